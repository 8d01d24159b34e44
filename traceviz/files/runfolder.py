"""A capture's run folder read as one run: its trace and what the runner wrote beside it
(``bench.json``: the timed, unprofiled batches; ``config.json``: what was asked for;
``meta.json``: the runner's versions and device).

A folder a user copied often has no ``trace.parquet``: the raw trace and the three files
are enough, and every command reads such a folder, or the raw trace inside it, as the run
with its timings. ``capture`` builds the same metadata from the same three records."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from traceviz.errors import InputError, TraceVizError
from traceviz.files.folders import TRACE_SUFFIXES, default_stem, rank_files, run_trace

if TYPE_CHECKING:  # the type only: the table's definitions sit above files/
    from traceviz.table.meta import TraceMeta


def read_record(path: Path) -> dict[str, Any] | None:
    """A run's JSON record (bench/config/meta.json); None where the file is absent."""
    if not path.is_file():
        return None
    try:
        value = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise InputError(f"{path}: not readable as the run's JSON record ({e})") from None
    if not isinstance(value, dict):
        raise InputError(f"{path}: not a JSON object (a run's {path.name} holds one)")
    return value


def run_meta(config: dict[str, Any] | None, bench: dict[str, Any] | None,
             runner: dict[str, Any] | None) -> TraceMeta:
    """The ``Trace.meta`` keys a run adds to its trace's, from config.json, bench.json
    and meta.json (any of them may be missing); ``TraceMeta`` says what each holds."""
    config, runner = config or {}, runner or {}
    workload = config.get("workload") or {}
    out: dict[str, Any] = {}
    if config.get("model"):
        out |= {"model": config["model"], "variant": config["model"]}
    elif script_name(config.get("command")):  # a script's run: named as capture names it
        name = script_name(config.get("command"))
        out |= {"model": name, "variant": name, "script": " ".join(config["command"])}
    command = config.get("command")
    if "script" not in out and command and isinstance(command, list):  # capture -- CMD
        out["script"] = " ".join(str(c) for c in command)
    for key, value in (("preset", workload.get("preset")), ("mode", workload.get("mode")),
                       ("amp", config.get("amp")), ("seed", config.get("seed")),
                       ("device_kind", config.get("device"))):
        if key in config or value is not None:
            out[key] = value
    if not workload and config.get("batch_size") is not None:
        # a script's batch size, given to capture (--batch-size): its per-sample figures
        workload = {"batch": config["batch_size"]}
    if workload:
        out["workload"] = workload
    if bench is not None:
        out["bench"] = bench
    if runner:
        out["runner"] = runner
    prof = config.get("profiler")
    if runner.get("framework") == "torch" and prof in ("torch", "nsys"):
        out["profiler"] = {"torch": "torch.profiler", "nsys": "Nsight Systems"}[prof]
    elif runner.get("profiler") or runner.get("framework"):
        out["profiler"] = runner.get("profiler") or runner["framework"]
    if config.get("exec") is not None:
        out["exec"] = config["exec"]
    if config.get("options"):
        out["options"] = config["options"]
    if config.get("graph_replay"):
        out["graph_replay"] = True
    return cast("TraceMeta", out)


def script_name(command: object) -> str | None:
    """The script's file name (``train.py``) or module (``pkg.train``) of a script run's
    recorded command (``["python", "train.py", ...]``); None for anything else."""
    if not isinstance(command, list) or not all(isinstance(c, str) for c in command):
        return None
    words = list(command)
    if words and Path(words[0]).name.startswith("python") and not words[0].endswith(".py"):
        words = words[1:]
    if len(words) >= 2 and words[0] == "-m":
        return words[1]
    return Path(words[0]).name if words and words[0].endswith(".py") else None


def run_name_path(path: Path) -> Path:
    """The path whose last parts name a run: its run folder (a folder, or the folder a
    trace file belongs to), else the trace file without its suffixes."""
    path = Path(path).absolute()
    if path.is_dir():
        return path
    folder = run_of(path)
    return folder if folder is not None else path.parent / default_stem(path)


def run_names(paths: list[Path]) -> list[str]:
    """Distinct labels for runs, by the folder each run is: ``cudnn_torch``; where two share
    a name, as many parent folders as tell them apart (``a/train``, ``b/train``); the same
    run given twice: ``name #2``."""
    full = [run_name_path(p) for p in paths]
    depth = [1] * len(full)

    def label(i: int) -> str:
        return "/".join(full[i].parts[-depth[i]:])

    while True:
        labels = [label(i) for i in range(len(full))]
        grown = False
        for i, text in enumerate(labels):
            same = {full[j] for j, other in enumerate(labels) if other == text}
            # the same run twice is told apart by its number; the root never shows
            if len(same) > 1 and depth[i] < len(full[i].parts) - 1:
                depth[i] += 1
                grown = True
        if not grown:
            break
    out: list[str] = []
    for text in (label(i) for i in range(len(full))):
        n, unique = 1, text
        while unique in out:
            n += 1
            unique = f"{text} #{n}"
        out.append(unique)
    return out


def folder_meta(run_dir: Path) -> TraceMeta:
    """``run_meta`` of the records in ``run_dir``, each checked field by field."""
    bench = read_record(run_dir / "bench.json")
    if bench is not None:
        check_bench(bench, run_dir / "bench.json")
    config = read_record(run_dir / "config.json")
    if config is not None:
        check_fields(config, _CONFIG, run_dir / "config.json")
        if isinstance(config.get("workload"), dict):
            check_fields(config["workload"], _WORKLOAD, run_dir / "config.json", "workload.")
    runner = read_record(run_dir / "meta.json")
    if runner is not None:
        check_fields(runner, _RUNNER, run_dir / "meta.json")
    return run_meta(config, bench, runner)


_NONE = type(None)
# the fields of config.json and meta.json that traceviz reads, and their JSON types
_CONFIG: dict[str, tuple[type, ...]] = {
    "model": (str,), "workload": (dict,), "device": (str, _NONE), "amp": (str, _NONE),
    "seed": (int, _NONE), "warmup": (int, _NONE), "steps": (int, _NONE),
    "profile_steps": (int, _NONE), "profiler": (str, _NONE), "exec": (str, _NONE),
    "options": (dict, _NONE), "graph_replay": (bool, _NONE), "batch_size": (int, _NONE),
    "command": (list, _NONE)}
_WORKLOAD: dict[str, tuple[type, ...]] = {
    **dict.fromkeys(("preset", "head", "loss", "optimizer", "mode"), (str,)),
    **dict.fromkeys(("batch", "seq", "hidden", "layers", "input", "vocab", "embed",
                     "classes", "workers"), (int,)),
    "lr": (int, float), "sparse_embedding": (bool,)}
_RUNNER: dict[str, tuple[type, ...]] = {
    **dict.fromkeys(("framework", "framework_version", "python", "device_name", "profiler"),
                    (str, _NONE)),
    "cpu_threads": (int, _NONE), "nvtx": (bool, _NONE)}
_JSON_TYPE = {str: "text", int: "a whole number", float: "a number", bool: "true or false",
              dict: "an object", list: "a list", _NONE: "null"}


def check_fields(record: dict[str, Any], types: dict[str, tuple[type, ...]], path: Path,
                 prefix: str = "") -> None:
    """Raise ``InputError`` naming the first field of ``record`` whose JSON type is not
    one of ``types``' (fields it does not list are not read, and not checked)."""
    for key, allowed in types.items():
        if key not in record:
            continue
        v = record[key]
        ok = isinstance(v, allowed) and not (isinstance(v, bool) and bool not in allowed)
        if ok and isinstance(v, float) and not math.isfinite(v):
            ok = False
        if not ok:
            want = " or ".join(_JSON_TYPE[t] for t in allowed)
            raise InputError(f"{path}: field {prefix}{key} is {_shown(v)}, not {want}")


def _shown(v: Any) -> str:
    text = json.dumps(v, allow_nan=True)
    return text if len(text) <= 40 else text[:37] + "..."


# bench.json's figures the analyses read: numbers, or lists of numbers
_BENCH_NUMBERS = ("elapsed_s", "sequences_per_s", "batches", "profiled_time_per_batch_s",
                  "profiler_overhead", "first_call_s", "framework_compile_s",
                  "workload_flops", "warmup_batches")
_BENCH_LISTS = ("batch_times_s", "warmup_times_s", "loss_per_batch", "profiled_batch_times_s")


def check_bench(bench: dict[str, Any], path: Path, prefix: str = "") -> None:
    """Raise ``InputError`` naming the first figure of ``bench`` of the wrong type."""
    def number(v: Any, key: str) -> bool:
        """A JSON number; a time or a count finite and not negative (a loss may be NaN:
        a diverged run's)."""
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            return False
        return key == "loss_per_batch" or (math.isfinite(v) and v >= 0)

    for key in _BENCH_NUMBERS:
        if bench.get(key) is not None and not number(bench[key], key):
            raise InputError(f"{path}: field {prefix}{key} is {_shown(bench[key])}, not a number "
                             "of 0 or more")
    for key in _BENCH_LISTS:
        v = bench.get(key)
        if v is not None and not (isinstance(v, list)
                                  and all(number(x, key) or x is None for x in v)):
            what = "numbers" if key == "loss_per_batch" else "numbers of 0 or more"
            raise InputError(f"{path}: field {prefix}{key} is not a list of {what}")
    t = bench.get("time_per_batch_s")
    if t is not None and not (isinstance(t, dict) and all(
            number(t.get(k), k) for k in ("median", "min", "max", "mean") if k in t)):
        raise InputError(f"{path}: field {prefix}time_per_batch_s holds something other than "
                         "numbers of 0 or more")
    for key in ("memory", "utilization", "workload_flops_parts"):
        if bench.get(key) is not None and not isinstance(bench[key], dict):
            raise InputError(f"{path}: field {prefix}{key} is not a JSON object")


def run_of(trace_path: Path) -> Path | None:
    """The run folder whose trace ``trace_path`` is, else None: the folder's one trace, or
    the raw trace its ``trace.parquet`` was imported from (the Parquet's recorded source)."""
    path = Path(trace_path)
    parent = path.parent
    try:
        found = run_trace(parent)
        if found is None:
            return None
        if found.resolve() == path.resolve():
            return parent
        # a raw trace beside the Parquet made of it: rank_files lets the Parquet stand for it
        if found.name == "trace.parquet" and path.is_file() and \
                path.name.endswith(TRACE_SUFFIXES) and not path.name.endswith(".parquet"):
            return parent if all(f.resolve() != path.resolve()
                                 for f in rank_files(parent)) else None
    except (PermissionError, TraceVizError):  # a folder that cannot be listed: a lone trace
        return None
    return None


_TRACE_META: dict[str, tuple[type, ...]] = {
    **dict.fromkeys(("source_format", "source_file", "profiler", "model", "variant",
                     "preset", "mode", "amp", "device_kind", "exec", "script",
                     "kineto_traceName", "nsys_version", "nsys_schema", "nsys_window_ns"),
                    (str, _NONE)),
    **dict.fromkeys(("devices", "memory_base", "thread_names", "device_properties",
                     "workload", "bench", "runner", "options", "kineto_distributedInfo"),
                    (dict, _NONE)),
    **dict.fromkeys(("notes", "hostnames", "mxnet_processes"), (list, _NONE)),
    **dict.fromkeys(("origin_ns", "seed", "exit_status", "rank", "workers",
                     "kineto_baseTimeNanoseconds"), (int, _NONE)),
    **dict.fromkeys(("dtypes_recorded", "graph_replay"), (bool, _NONE))}


def check_trace_meta(meta: dict[str, Any], where: Path, prefix: str = "") -> None:
    """Raise ``InputError`` naming the first field of a trace's saved metadata (a Parquet
    file's, a rank dataset's) of the wrong type, down into the run's records it holds."""
    check_fields(meta, _TRACE_META, where, prefix)
    if isinstance(meta.get("workload"), dict):
        check_fields(meta["workload"], _WORKLOAD, where, prefix + "workload.")
    if isinstance(meta.get("runner"), dict):
        check_fields(meta["runner"], _RUNNER, where, prefix + "runner.")
    if isinstance(meta.get("bench"), dict):
        check_bench(meta["bench"], where, prefix + "bench.")
    devices = meta.get("devices")
    if isinstance(devices, dict) and not all(isinstance(n, str) for n in devices.values()):
        raise InputError(f"{where}: field {prefix}devices holds a device name that is not "
                         "text")
    notes = meta.get("notes")
    if isinstance(notes, list) and not all(isinstance(n, str) for n in notes):
        raise InputError(f"{where}: field {prefix}notes is not a list of texts")
