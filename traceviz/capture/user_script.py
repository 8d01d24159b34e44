"""Parent side of ``traceviz capture -- python train.py ARGS``: a user's own script.

The script runs in its own interpreter under ``runners/script.py`` with its stdin,
stdout and stderr untouched (its output is the user's); progress comes back through a
pipe. Whatever the script's end, what was recorded becomes the same run folder a
built-in capture writes, and the script's exit status is the command's; when no whole
profiled step was recorded, no run folder is left and one line says why
(``outcome.py``: exit 130 when interrupted, else 2).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from traceviz.capture.children import runner_process
from traceviz.errors import RunFailed, TraceVizError, UsageError
from traceviz.files.runclaim import full_disk, run_stage

if TYPE_CHECKING:
    from traceviz.table.meta import TraceMeta
    from traceviz.trace import Trace

PYTHON_NAME = re.compile(r"^python[0-9.]*$")
PROFILER_NAMES = {"torch": "torch.profiler", "nsys": "Nsight Systems",
                  "tf": "TensorFlow profiler"}
TF_IMPORT = re.compile(r"^\s*(?:import|from)\s+(?:tensorflow|keras)\b", re.MULTILINE)
TORCH_IMPORT = re.compile(r"^\s*(?:import|from)\s+torch\b", re.MULTILINE)
PRESSES_TO_ABANDON = 3  # the third Ctrl-C ends the script's process group at once


@dataclass
class ScriptRequest:
    command: list[str]            # as typed after ``--``
    profiler: str | None = None   # torch | nsys | tf; None: tf for a TF/Keras script
    warmup: int = 3
    profile_steps: int = 3
    modules: bool = False
    slice_s: float | None = None
    ranks: int = 1                # > 1: that many processes of one torch.distributed job
    batch_size: int | None = None  # samples per step, as the user says (per-sample figures)
    interpreter: str = field(default="")
    target: list[str] = field(default_factory=list)  # SCRIPT ARGS or -m MODULE ARGS
    notes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.interpreter, self.target = split_command(self.command)
        if self.profiler is None:
            self.profiler = "tf" if is_tf_script(self.target) else "torch"

    @property
    def name(self) -> str:
        """The run's name: the script's file name or the module's."""
        return self.target[1] if self.target[0] == "-m" else Path(self.target[0]).name

    @property
    def stem(self) -> str:
        """The run folder's stem: ``train`` for ``train.py`` and for ``-m pkg.train``."""
        if self.target[0] == "-m":
            return self.target[1].rsplit(".", 1)[-1]
        return Path(self.target[0]).stem


@dataclass
class ScriptResult:
    run_dir: Path
    raw_trace: Path | None
    parquet: Path | None
    bench: dict
    meta: dict
    trace: Trace | None
    status: int


def split_command(command: list[str]) -> tuple[str, list[str]]:
    """(interpreter, SCRIPT ARGS | -m MODULE ARGS) of ``python train.py ARGS``,
    ``python -m pkg.train ARGS``, ``train.py ARGS`` or ``-m pkg.train ARGS``."""
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise UsageError("nothing to run after `--`: traceviz capture -- python train.py ARGS")
    interpreter = sys.executable
    if PYTHON_NAME.match(Path(command[0]).name):
        found = shutil.which(command[0])
        if found is None:
            raise UsageError(f"{command[0]}: no such interpreter on PATH")
        interpreter, command = found, command[1:]
    if not command:
        raise UsageError("a script or -m MODULE must follow the interpreter")
    if command[0] == "-m":
        if len(command) < 2:
            raise UsageError("-m needs a module name")
        _check_module(interpreter, command[1])
        return interpreter, command
    if command[0].startswith("-"):
        raise UsageError(_option_advice(command))
    if not command[0].endswith(".py") and not Path(command[0]).is_file():
        raise UsageError(f"{command[0]}: not a Python script; traceviz capture -- python "
                         "SCRIPT ARGS (or -m MODULE ARGS)")
    if not Path(command[0]).is_file():
        raise TraceVizError(f"{command[0]}: no such file")
    _check_source(Path(command[0]))
    return interpreter, command


# interpreter options that have an environment variable of the same effect
OPTION_ENV = {"-u": "PYTHONUNBUFFERED=1", "-B": "PYTHONDONTWRITEBYTECODE=1",
              "-O": "PYTHONOPTIMIZE=1", "-OO": "PYTHONOPTIMIZE=2", "-d": "PYTHONDEBUG=1",
              "-v": "PYTHONVERBOSE=1", "-s": "PYTHONNOUSERSITE=1", "-E": None, "-I": None}
X_ENV = {"dev": "PYTHONDEVMODE=1", "utf8": "PYTHONUTF8=1", "importtime":
         "PYTHONPROFILEIMPORTTIME=1", "faulthandler": "PYTHONFAULTHANDLER=1",
         "tracemalloc": "PYTHONTRACEMALLOC=1", "warn_default_encoding":
         "PYTHONWARNDEFAULTENCODING=1", "frozen_modules": None}


def _option_advice(command: list[str]) -> str:
    """Why an interpreter option before the script cannot be passed, and what works
    instead: a code string (``-c``) or stdin (``-``) is no file to profile; most other
    options have an environment variable."""
    opt = command[0]
    if opt == "-c" or opt.startswith("-c") or opt == "-":
        what = "code given with -c" if opt.startswith("-c") else "code read from stdin"
        return (f"{what} cannot be profiled: traceviz runs a script file or a module; "
                "save the code as a file (train.py) and run `traceviz capture -- python "
                "train.py`")
    value = command[1] if len(command) > 1 else ""
    env = None
    if opt in ("-X", "-W"):
        env = X_ENV.get(value.split("=")[0]) if opt == "-X" else f"PYTHONWARNINGS={value}"
    elif opt in OPTION_ENV:
        env = OPTION_ENV[opt]
    told = f" ({opt} {value})" if opt in ("-X", "-W") and value else ""
    if env is None:
        return f"interpreter option {opt} is not supported{told}: run the script without it"
    return (f"interpreter option {opt} is not supported{told}: set {env} in the environment "
            f"instead ({env} traceviz capture -- python SCRIPT)")


def _check_source(path: Path) -> None:
    """That the script is Python source (compiled, not run), before a run folder is made:
    a trace or a binary given by mistake is one line, not a run of Python's traceback."""
    try:
        compile(path.read_bytes(), str(path), "exec")
    except (SyntaxError, ValueError) as e:  # ValueError: NUL bytes
        where = f" (line {e.lineno})" if isinstance(e, SyntaxError) and e.lineno else ""
        reason = e.msg if isinstance(e, SyntaxError) else str(e)
        raise UsageError(f"{path}: not Python source{where}: {reason}") from None
    except OSError as e:
        raise TraceVizError(f"{path}: cannot read it ({e.strerror})") from None


def _check_module(interpreter: str, module: str) -> None:
    """``-m MODULE``: that the module is found, as ``python -m`` looks for it (the working
    directory first), before a run folder is made. The named interpreter answers, or this
    one where that cannot run."""
    probe = ("import importlib.util, os, sys; sys.path.insert(0, os.getcwd()); "
             f"sys.exit(importlib.util.find_spec({module!r}) is None)")
    try:  # 1: not found (a probe stopped by Ctrl-C is no answer: capture is interrupted)
        missing = subprocess.run([interpreter, "-c", probe], capture_output=True,
                                 timeout=120).returncode == 1
    except (OSError, subprocess.TimeoutExpired):
        return  # the run itself will say what is wrong
    if missing:
        raise UsageError(f"-m {module}: no module named {module!r} (from "
                         f"{Path.cwd()})")


def is_tf_script(target: list[str]) -> bool:
    """A script that imports TensorFlow or Keras and not torch."""
    if target[0] == "-m":
        return False
    try:
        text = Path(target[0]).read_text(errors="replace")
    except OSError:
        return False
    return bool(TF_IMPORT.search(text)) and not TORCH_IMPORT.search(text)


def _runner_command(req: ScriptRequest, cfg_path: Path, run_dir: Path) -> list[str]:
    if req.interpreter != sys.executable and subprocess.run(
            [req.interpreter, "-c", "import traceviz.runners.script"],
            capture_output=True).returncode != 0:
        # `python` on PATH is another installation (a venv not activated): traceviz's
        # own interpreter runs the script, and says so
        req.notes.append(f"{req.interpreter} cannot import traceviz; the script runs "
                         f"with traceviz's interpreter, {sys.executable}")
        req.interpreter = sys.executable
    cmd = [req.interpreter, "-m", "traceviz.runners.script", "--config", str(cfg_path),
           "--out", str(run_dir), "--", *req.target]
    if req.ranks > 1:  # torchrun on this machine, a free port of its own (--standalone)
        cmd[1:3] = ["-m", "torch.distributed.run", "--standalone", "--nnodes", "1",
                    "--nproc-per-node", str(req.ranks), "-m", "traceviz.runners.script"]
    if req.profiler == "nsys":
        from traceviz.capture.parent import NSYS_TRACE
        from traceviz.parsers.nsys.export import nsys_binary

        nsys = nsys_binary()
        if nsys is None:
            raise UsageError("Nsight Systems (`nsys`) is not on PATH", option="profiler")
        cmd = [str(nsys), "profile", f"--trace={NSYS_TRACE}", "--sample=none",
               "--cpuctxsw=none", "--force-overwrite=true",
               "--output", str(run_dir / "report"), *cmd]
    return cmd


def run_script(req: ScriptRequest, run_dir: Path,
               on_event: Callable[[dict], None] | None = None,
               on_start: Callable[[], object] = lambda: None) -> ScriptResult:
    """Run the script under its profiler; import and save what it recorded.
    ``on_start`` is called once the command is settled (``req.notes`` say how). The run
    is written into a hidden folder beside ``run_dir``, renamed into place once complete:
    a capture killed or failing before then leaves nothing that reads as a run."""
    with run_stage(run_dir) as stage:
        result = _run_script(req, stage, run_dir, on_event, on_start)

    def moved(path: Path | None) -> Path | None:
        return None if path is None else run_dir / path.relative_to(stage)

    return dataclasses.replace(result, run_dir=run_dir, raw_trace=moved(result.raw_trace),
                               parquet=moved(result.parquet))


def _run_script(req: ScriptRequest, run_dir: Path, final: Path,
                on_event: Callable[[dict], None] | None,
                on_start: Callable[[], object]) -> ScriptResult:
    from traceviz.runners.script import EVENTS_FD

    framework = "tensorflow" if req.profiler == "tf" else "torch"
    cfg = {"framework": framework, "profiler": req.profiler,
           "profiler_name": PROFILER_NAMES[str(req.profiler)], "warmup": req.warmup,
           "profile_steps": req.profile_steps, "modules": req.modules,
           "slice_s": req.slice_s, "command": req.command, "ranks": req.ranks,
           "batch_size": req.batch_size}
    cfg_path = run_dir / "config.json"
    cfg_path.write_text(json.dumps(cfg, indent=2))
    cmd = _runner_command(req, cfg_path, run_dir)
    on_start()
    read_fd, write_fd = os.pipe()
    env = dict(os.environ, **{EVENTS_FD: str(write_fd)})
    # Ctrl-C reaches the script (the terminal's foreground while it runs, or passed on),
    # which stops and writes what it has; this side waits for it instead of dying first.
    # torchrun (--ranks) is not given the terminal: its Ctrl-C comes here, so that this
    # side knows the run was interrupted (torchrun then exits 1)
    presses: list[int] = []
    started: list[subprocess.Popen] = []
    passed: list[int] = []

    def on_ctrl_c(*_: object) -> None:
        presses.append(1)
        if len(presses) >= PRESSES_TO_ABANDON:  # the script does not stop: end it, no run
            raise KeyboardInterrupt
        if started:  # else passed on once it has started
            passed.append(1)
            _pass_on(started[0], signal.SIGINT)

    old = signal.signal(signal.SIGINT, on_ctrl_c)
    try:
        with runner_process(cmd, foreground=req.ranks == 1, env=env,
                            pass_fds=(write_fd,)) as proc:
            started.append(proc)
            if presses and not passed:  # Ctrl-C while it was starting
                _pass_on(proc, signal.SIGINT)
            os.close(write_fd)
            reader = threading.Thread(target=_read_events, args=(read_fd, on_event),
                                      daemon=True)
            reader.start()
            status = proc.wait()
            reader.join(timeout=5)  # a forked child of the script may hold the pipe open
    finally:
        signal.signal(signal.SIGINT, old)
    return _collect(req, run_dir, status, final, interrupted=bool(presses))


def _pass_on(proc: subprocess.Popen, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def _read_events(fd: int, on_event: Callable[[dict], None] | None) -> None:
    with os.fdopen(fd) as pipe:
        for line in pipe:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if on_event:
                on_event(event)


def _collect(req: ScriptRequest, run_dir: Path, status: int, final: Path,
             interrupted: bool = False) -> ScriptResult:
    """What the runner left, as a run; ``NothingRecorded`` (no run folder is left) when no
    whole profiled step was recorded. ``interrupted``: Ctrl-C was passed on to it."""
    from traceviz.capture import outcome
    from traceviz.capture.outcome import Ending, nothing_recorded

    status = outcome.settled_status(status, interrupted)
    end = Ending(req.name, status, warmup=max(1, req.warmup), active=req.profile_steps)
    if req.ranks > 1:
        return _collect_ranks(req, run_dir, status)
    results = outcome.read_results(run_dir)
    if results is None:
        raise outcome.no_results(end, f"{req.name}: the profiling runner ended (status "
                                 f"{status}) before writing its results{full_disk(run_dir, final)}")
    bench, meta = results
    if meta.get("write_error"):  # the recording could not be written: a full disk
        raise RunFailed(f"{final / meta['write_error']}; no run folder left")
    if status < 0:  # killed, or crashed, after the profile was written: it is kept
        outcome.after_crash(end, meta)
        (run_dir / "meta.json").write_text(json.dumps(meta, indent=2))
    end.error, end.marks = meta.get("error"), int(meta.get("step_marks") or 0)
    end.cut = meta.get("schedule_cut")
    raw = _raw_trace(req, run_dir)
    if raw is None:
        raise nothing_recorded(end)
    from traceviz.parsers import load

    try:
        trace = load(raw)
    except TraceVizError as e:  # e.g. a script that ran no framework op: nothing to read
        said = str(e).split(": ", 1)[-1] if str(e).startswith(str(run_dir)) else str(e)
        raise nothing_recorded(end, said) from None
    trace.meta.update({
        "model": req.name, "variant": req.name, "script": " ".join(req.command),
        "bench": bench, "runner": meta, "profiler": PROFILER_NAMES[str(req.profiler)],
        "exit_status": status, "source_file": str(final / raw.relative_to(run_dir)),
        **({"workload": {"batch": req.batch_size}} if req.batch_size else {}),
    })
    parquet = run_dir / "trace.parquet"
    trace.save(parquet, force=True)  # a full disk: its own line, no run published
    return ScriptResult(run_dir, raw, parquet, bench, meta, trace, status)


def _collect_ranks(req: ScriptRequest, run_dir: Path, status: int) -> ScriptResult:
    """Each rank's trace moved up into the run folder as ``rank-N.pt.trace.json.gz`` (the
    folder is then a rank folder: ``traceviz analyze RUN_DIR``); each rank's bench.json
    and meta.json stay in ``rank-N/``, rank 0's are the run's."""
    found = []
    for r in range(req.ranks):
        raw = run_dir / f"rank-{r}" / "trace.pt.trace.json.gz"
        if raw.is_file():
            found.append(raw.replace(run_dir / f"rank-{r}.pt.trace.json.gz"))
    from traceviz.capture.outcome import Ending, no_results, nothing_recorded, read_results

    results = read_results(run_dir / "rank-0")
    if results is None:
        raise no_results(Ending(req.name, status, warmup=max(1, req.warmup),
                                active=req.profile_steps),
                         f"{req.name}: the {req.ranks} processes ended (status {status})"
                         " before rank 0 wrote its results")
    bench, meta = results
    if not found:  # no rank recorded a profiled step: no run
        raise nothing_recorded(Ending(
            req.name, status, meta.get("error"), int(meta.get("step_marks") or 0),
            meta.get("schedule_cut"), max(1, req.warmup), req.profile_steps))
    meta["ranks"] = req.ranks
    meta["rank_traces"] = [p.name for p in found]
    return ScriptResult(run_dir, found[0] if found else None, None, bench, meta, None, status)


def save_trace(raw: Path, run_dir: Path, meta: TraceMeta) -> tuple[Trace, Path]:
    """Import the recorded trace, add the run's ``meta``, save ``trace.parquet``."""
    from traceviz.parsers import load

    trace = load(raw)
    trace.meta.update(meta)
    parquet = run_dir / "trace.parquet"
    trace.save(parquet, force=True)
    return trace, parquet


def _raw_trace(req: ScriptRequest, run_dir: Path) -> Path | None:
    if req.profiler == "nsys":
        from traceviz.capture.parent import nsys_sqlite

        return nsys_sqlite(run_dir)
    if req.profiler == "tf":
        found = sorted(run_dir.glob("tfprofile/plugins/profile/*/*.xplane.pb"))
        return found[-1] if found else None
    raw = run_dir / "trace.pt.trace.json.gz"
    return raw if raw.is_file() else None
