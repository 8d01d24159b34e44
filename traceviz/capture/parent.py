"""Parent side of ``traceviz capture``: run folder, runner subprocess, import of its trace.

The runner runs in its own interpreter (``python -m traceviz.runners.<framework>``) so a
crash or out-of-memory in a variant is reported, not inherited. It talks back through
JSON lines on stdout; its stderr goes to ``runner.log`` in the run folder.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from traceviz.capture.children import runner_process
from traceviz.errors import RunFailed, TraceVizError, UsageError
from traceviz.files.runclaim import keep_runner_log, run_stage
from traceviz.runners import FRAMEWORKS, VARIANTS
from traceviz.runners.presets import Workload
from traceviz.runners.torch.refusals import GRAPHING_COMPILE_MODES, graph_replay_refusal

if TYPE_CHECKING:  # pandas comes with Trace: `traceviz --help` must not import it
    from traceviz.trace import Trace


@dataclass
class CaptureRequest:
    model: str
    workload: Workload
    device: str
    amp: str | None = None
    seed: int = 0
    warmup: int = 3
    max_warmup: int = 15        # warm-up goes on until times settle, at most this many
    steps: int = 10
    profile_steps: int = 3
    profiler: str = "torch"
    python: str | None = None   # the interpreter for frameworks kept apart (MXNet)
    exec_mode: str | None = None  # TF Keras variants: "eager" or "function"
    options: dict = field(default_factory=dict)  # a variant's own: rank, compile_mode
    notes: list[str] = field(default_factory=list)
    graph_replay: bool = False  # the forward pass captured in a CUDA graph and replayed

    def config(self) -> dict:
        return {"model": self.model, "workload": self.workload.to_dict(), "device": self.device,
                "amp": self.amp, "seed": self.seed, "warmup": self.warmup,
                "max_warmup": max(self.warmup, self.max_warmup), "steps": self.steps,
                "profile_steps": self.profile_steps, "profiler": self.profiler,
                "exec": self.exec_mode, "options": self.options,
                "graph_replay": self.graph_replay}


@dataclass
class CaptureResult:
    run_dir: Path
    raw_trace: Path
    parquet: Path
    bench: dict
    trace: Trace


def run_stem(req: CaptureRequest) -> str:
    """The automatic run folder's stem: ``runs/<model>-<preset>-<timestamp>``."""
    return f"{req.model}-{req.workload.preset}"


# a variant's own options: the variants that take each (runners/torch/variants.py OPTIONS)
VARIANT_OPTIONS = {"rank": ("factorized_torch",), "compile_mode": ("compile_full_torch",)}
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune")


def variant_options(model: str, **given: object) -> dict:
    """The options given (None: not given) that ``model`` takes; one given to a variant
    that does not take it, or out of range, is a usage error."""
    options = {k: v for k, v in given.items() if v is not None}
    for key, value in options.items():
        takers = VARIANT_OPTIONS[key]
        if model not in takers:
            raise UsageError(f"applies to {', '.join(takers)}, not {model}", option=key)
        if key == "rank" and not (isinstance(value, int) and value >= 1):
            raise UsageError("must be a positive integer", option=key)
        if key == "compile_mode" and value not in COMPILE_MODES:
            raise UsageError(f"takes {', '.join(COMPILE_MODES)}", option=key)
    return options


PROFILERS = ("torch", "nsys")  # torch: the framework's own profiler; nsys: Nsight Systems
NSYS_TRACE = "cuda,nvtx,osrt"


def check_runnable(model: str, device: str, profiler: str = "torch",
                   python: str | None = None) -> None:
    if model not in VARIANTS:
        raise UsageError(f"unknown model {model!r}; `traceviz models` lists them")
    v = VARIANTS[model]
    fw = FRAMEWORKS[v.framework]
    if not fw.installed(python):
        raise TraceVizError(f"{model}: {fw.missing(python)}")
    if not v.runs_on(device):
        raise UsageError(f"{model} runs only on a GPU ({v.description}); "
                         "this capture is on the CPU")
    if profiler == "nsys":
        from traceviz.parsers.nsys.export import nsys_binary

        if not fw.nsys:
            raise UsageError(f"nsys is available for the PyTorch variants; {model} is a "
                             f"{v.framework} variant", option="profiler")
        if nsys_binary() is None:
            raise UsageError("nsys: Nsight Systems (`nsys`) is not on PATH (docs/capture.md: "
                             "Installing Nsight Systems)", option="profiler")


def check_graph_replay(req: CaptureRequest) -> None:
    """A ``UsageError`` where ``req.graph_replay`` cannot work, before anything runs."""
    if req.graph_replay:
        refused = graph_replay_refusal(req.model, req.device, req.workload.mode, req.options)
        if refused:
            raise UsageError(refused, option="graph_replay")


# a compile longer than this, with CUDA graphs, earns the hint to compile without them
LONG_COMPILE_S = 30.0
FASTER_COMPILE = "--compile-mode default (no CUDA graphs) compiles faster"


class CompileWatch:
    """What the runner's ``compile`` events said: whether its first call is compiling,
    since when, in which mode; the note for a long compile."""

    def __init__(self) -> None:
        self.what: str | None = None
        self.mode: str | None = None
        self.started: float | None = None  # set while compiling
        self.seconds: float | None = None

    def see(self, event: dict) -> str | None:
        """Take one runner event; returns a note to show, if it calls for one."""
        if event.get("event") != "compile":
            return None
        self.mode = event.get("mode")
        if event.get("state") == "start":
            self.what, self.started = event.get("what"), time.monotonic()
            return None
        self.started, self.seconds = None, float(event.get("seconds") or 0.0)
        if self.seconds >= LONG_COMPILE_S and self.mode in GRAPHING_COMPILE_MODES:
            return (f"the first call compiled for {self.seconds:.1f} s ({self.what}); "
                    f"{FASTER_COMPILE}")
        return None

    def interrupted(self) -> str | None:
        """Where the run ended while compiling: how long it had compiled, and the hint."""
        if self.started is None:
            return None
        hint = f"; {FASTER_COMPILE}" if self.mode in GRAPHING_COMPILE_MODES else ""
        return (f"it ended while compiling ({self.what}, "
                f"{time.monotonic() - self.started:.0f} s){hint}")


def run_capture(req: CaptureRequest, run_dir: Path,
                on_event: Callable[[dict], None] | None = None) -> CaptureResult:
    """Run the variant's runner in a subprocess, then import and save its trace. The run
    is written into a hidden folder beside ``run_dir``, renamed into place once complete:
    an interrupted capture leaves nothing that reads as a run; a failed one leaves its
    ``runner.log`` alone in ``run_dir``."""
    check_runnable(req.model, req.device, req.profiler, req.python)
    check_graph_replay(req)
    with run_stage(run_dir) as stage:
        try:
            result = _run_capture(req, stage, run_dir, on_event)
        except TraceVizError as e:  # a failed runner or nsys: its log kept
            keep_runner_log(stage, run_dir)  # what the user reads to see why
            e.message = e.message.replace(str(stage), str(run_dir))  # the path it keeps
            raise
    return result


def _run_capture(req: CaptureRequest, run_dir: Path, final: Path,
                 on_event: Callable[[dict], None] | None) -> CaptureResult:
    """The capture, written into ``run_dir`` (the stage), its paths named in ``final``."""
    framework = FRAMEWORKS[VARIANTS[req.model].framework]
    cfg_path = run_dir / "config.json"
    cfg_path.write_text(json.dumps(req.config(), indent=2))
    log_path = final / "runner.log"
    cmd = framework.command(req.python)
    cmd += ["--config", str(cfg_path), "--out", str(run_dir)]
    if req.profiler == "nsys":
        from traceviz.parsers.nsys.export import nsys_binary

        # sampling and context switches off: the NVTX and CUDA timelines are the point
        cmd = [str(nsys_binary()), "profile", f"--trace={NSYS_TRACE}", "--sample=none",
               "--cpuctxsw=none", "--force-overwrite=true",
               "--output", str(run_dir / "report"), *cmd]
    error = done = None
    watch = CompileWatch()
    with open(run_dir / "runner.log", "w") as log, runner_process(
            cmd, stdout=subprocess.PIPE, stderr=log, text=True, bufsize=1,
            errors="replace") as proc:
        assert proc.stdout is not None
        try:
            for line in proc.stdout:
                try:
                    event = json.loads(line)
                except ValueError:
                    log.write(line)  # a framework printing on stdout
                    continue
                if event.get("event") == "error":
                    error = event.get("message")
                elif event.get("event") == "done":
                    done = event
                note = watch.see(event)
                if on_event:
                    on_event(event)
                    if note:
                        on_event({"event": "note", "message": f"{req.model}: {note}"})
        except BaseException:  # Ctrl-C, SIGTERM: say so where it came while compiling
            during = watch.interrupted()
            if during and on_event:
                on_event({"event": "note", "message": f"{req.model}: {during}"})
            raise
        code = proc.wait()
    if code != 0 or done is None:
        during = watch.interrupted()
        during = f"; {during}" if during else ""
        if error:
            raise RunFailed(f"{req.model} failed: {error}{during} (details: {log_path})")
        if code < 0:
            name = signal.Signals(-code).name
            hint = " (out of memory?)" if -code == signal.SIGKILL else ""
            raise RunFailed(f"{req.model}: the runner was killed by {name}{hint}{during} "
                            f"(details: {log_path})")
        raise RunFailed(f"{req.model}: the runner exited with code {code}{during} "
                        f"(details: {log_path})")

    from traceviz.parsers import load

    raw = nsys_sqlite(run_dir) if req.profiler == "nsys" else Path(done["trace"])
    trace = load(raw)
    from traceviz.files.runfolder import run_meta

    # the same metadata a copied run folder gives (config.json, bench.json, meta.json)
    trace.meta.update(run_meta(req.config(), done["bench"], done["meta"]))
    if framework.name != "torch":
        trace.meta["profiler"] = done["meta"].get("profiler", framework.name)
    raw = final / raw.resolve().relative_to(run_dir.resolve())  # where it will be
    trace.meta["source_file"] = str(raw)
    trace.save(run_dir / "trace.parquet", force=True)
    return CaptureResult(final, raw, final / "trace.parquet", done["bench"], trace)


def nsys_sqlite(run_dir: Path) -> Path:
    """report.nsys-rep (imported from report.qdstrm if nsys could not) -> report.sqlite."""
    from traceviz.parsers.nsys.export import export_sqlite, import_qdstrm, nsys_binary

    rep, qdstrm = run_dir / "report.nsys-rep", run_dir / "report.qdstrm"
    if not rep.is_file():
        if not qdstrm.is_file():
            raise TraceVizError(f"{run_dir}: nsys wrote no report (details: "
                                f"{run_dir / 'runner.log'})")
        import_qdstrm(qdstrm, str(nsys_binary()))
    if qdstrm.is_file() and rep.is_file():
        qdstrm.unlink()  # the raw stream; the report holds the same
    return export_sqlite(rep, run_dir / "report.sqlite")
