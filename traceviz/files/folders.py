"""What a folder is, from its file names (and a Parquet's record of its source): one
trace (an nsys table folder, a TensorBoard log directory or profile run, a capture's run
folder), a folder of rank traces, or a rank dataset. Format detection
(``parsers/detect.py``) and the rank readers (``rankset/folder.py``) both ask; this module imports
neither."""

from __future__ import annotations

from pathlib import Path

from traceviz.errors import TraceVizError

DATASET_META = "_traceviz.json"
TRACE_SUFFIXES = (".json", ".json.gz", ".sqlite", ".parquet", ".nsys-rep", ".arrow",
                  ".xplane.pb", ".xplane.pb.gz", ".qdrep")
_NSYS_TABLE_FILES = ("StringIds", "CUPTI_ACTIVITY_KIND_KERNEL", "NVTX_EVENTS")
# what a capture writes beside its trace: a folder holding one of them and one trace is a run
RUN_FILES = ("bench.json", "config.json", "meta.json")
# stripped from a raw trace's name to name the .parquet `traceviz import` makes of it
RAW_SUFFIXES = (".gz", ".json", ".pt.trace", ".trace", ".sqlite", ".arrow", ".nsys-rep",
                ".parquetdir", ".arrowdir")


def is_nsys_folder(path: Path) -> bool:
    """A folder of nsys export tables (``nsys export --type parquetdir/arrowdir``)."""
    return any((path / f"{t}{ext}").is_file() for t in _NSYS_TABLE_FILES
               for ext in (".parquet", ".arrow"))


def is_xplane_dir(path: Path) -> bool:
    """A TensorBoard log directory or profile run holding ``.xplane.pb`` files, or a folder
    with exactly one log directory below it (Keras' ``logs/fit/`` holding
    ``<time>/train/plugins/profile/...``)."""
    path = Path(path)
    return path.is_dir() and (any(path.glob("*.xplane.pb*"))
                              or any(path.glob("plugins/profile/*/*.xplane.pb*"))
                              or any(path.glob("*/*.xplane.pb*"))
                              or len(log_dirs_below(path)) == 1)


# how deep below a folder its TensorBoard log directories are looked for: Keras writes
# logs/fit/<time>/train/plugins/profile/<run>/<host>.xplane.pb, so logs/ is 3 levels
# above the log directory
LOG_DIR_DEPTH = 4


def log_dirs_below(path: Path) -> list[Path]:
    """The TensorBoard log directories (``<dir>/plugins/profile/<run>/*.xplane.pb``)
    strictly below ``path``, at most ``LOG_DIR_DEPTH`` levels down, sorted."""
    found = set()
    for depth in range(1, LOG_DIR_DEPTH + 1):
        for f in Path(path).glob("*/" * depth + "plugins/profile/*/*.xplane.pb*"):
            found.add(f.parents[3])  # host file -> run -> profile -> plugins -> log dir
    return sorted(found)


def describe_folder(path: Path) -> str:
    """Why a folder is not something traceviz reads as one trace, in one line."""
    if is_dataset(path):
        return (f"{path}: a rank dataset, not one trace (`traceviz analyze {path}` reads "
                "the dataset; give one rank's trace file here)")
    ranks = rank_files(path)
    if ranks:
        return (f"{path}: a folder of {len(ranks)} rank traces, not one trace (`traceviz "
                f"analyze {path}` reads them all; give one here, e.g. {path / ranks[0].name})")
    below = log_dirs_below(path)
    if len(below) > 1:
        names = ", ".join(str(d.relative_to(path)) for d in below)
        return (f"{path}: {len(below)} TensorBoard log directories below it, one run each "
                f"({names}): give one of them, e.g. {below[-1]}")
    if any(path.glob("rank=*/*.parquet")):
        return (f"{path}: an incomplete rank dataset (no {DATASET_META}: its import did not "
                "finish); import the rank folder into it again with --force")
    return (f"{path}: no trace files in this folder (expected a capture's run folder, a "
            f"folder of rank traces named *{', *'.join(TRACE_SUFFIXES[:4])}..., an nsys "
            "table folder or a TensorBoard log directory)")


def is_dataset(path: Path) -> bool:
    from traceviz.files.fileio import READ_LOCK, folder_lock

    if not path.is_dir():
        return False
    with folder_lock(path, READ_LOCK, shared=True):  # not in the moment an import swaps
        return (path / DATASET_META).is_file()


def rank_files(directory: Path) -> list[Path]:
    """The trace files directly in ``directory`` (by name), sorted. A raw trace beside
    the ``.parquet`` imported from it (``NAME.json.gz`` and ``NAME.parquet`` whose
    metadata names ``NAME.json.gz`` as its source) is one trace: the Parquet stands for
    both."""
    try:
        files = sorted(p for p in directory.iterdir()
                       if p.is_file() and p.name.endswith(TRACE_SUFFIXES)
                       and not p.name.startswith(".") and p.name not in RUN_FILES)
    except PermissionError:
        raise TraceVizError(f"{directory}: permission denied (the folder cannot be listed; "
                            "a trace file in it can still be named)") from None
    parquets = {p.name.removesuffix(".parquet"): p for p in files
                if p.name.endswith(".parquet")}
    return [p for p in files if p.name.endswith(".parquet")
            or default_stem(p) not in parquets
            or _source_name(parquets[default_stem(p)]) != p.name]


def _source_name(parquet: Path) -> str | None:
    """The raw file a traceviz Parquet was imported from (its metadata's
    ``source_file``), by name; None when unreadable or not recorded."""
    import json

    import pyarrow.parquet as pq

    try:
        raw = (pq.read_schema(parquet).metadata or {}).get(b"traceviz")
        src = json.loads(raw).get("source_file") if raw else None
    except (OSError, ValueError, AttributeError):
        return None
    return Path(str(src)).name if src else None


def xspace_companion(name: str) -> bool:
    """Files TF/JAX write beside a host's ``.xplane.pb`` in a profile run (trace viewer and
    Perfetto exports, memory profiles): part of that run, not ranks. PyTorch's
    ``*.pt.trace.json`` are not among them."""
    return name.startswith("perfetto_trace.json") or name.endswith(
        (".memory_profile.json.gz", ".memory_profile.json")) or (
        name.endswith((".trace.json.gz", ".trace.json")) and ".pt.trace.json" not in name)


def is_rank_folder(path: Path) -> bool:
    """A folder of trace files that is not itself one trace (a run folder, an nsys table
    folder, a TensorBoard log directory, a profile run of ``.xplane.pb`` host files and
    their companions) nor a dataset. ``.xplane.pb`` files beside traces of other formats
    are ranks like the others."""
    if not path.is_dir() or is_dataset(path) or (path / "trace.parquet").is_file():
        return False
    if run_trace(path) is not None:  # a run folder a user copied without its Parquet
        return False
    if is_nsys_folder(path):
        return False
    files = rank_files(path)
    # a log directory (its runs in folders below) or a run folder is one trace
    if is_xplane_dir(path) and (
            not any(".xplane.pb" in f.name for f in files)
            or all(".xplane.pb" in f.name or xspace_companion(f.name) for f in files)):
        return False
    return bool(files)


# where the runners put their raw trace, most specific first (nsys: the exported SQLite
# before the report it came from)
_RAW_ORDER = (".sqlite", ".pt.trace.json.gz", ".pt.trace.json", ".json.gz", ".json",
              ".xplane.pb.gz", ".xplane.pb", ".nsys-rep", ".qdrep", ".arrow")


def has_run_files(path: Path) -> bool:
    return path.is_dir() and any((path / name).is_file() for name in RUN_FILES)


def run_trace(path: Path) -> Path | None:
    """The raw trace of a run folder (``bench.json``, ``config.json`` or ``meta.json``
    beside one trace); None when ``path`` is no run folder or holds several unrelated
    traces (then it is a folder of ranks, or nothing traceviz reads as one run)."""
    path = Path(path)
    if not has_run_files(path):
        return None
    if (path / "trace.parquet").is_file():
        return path / "trace.parquet"
    files = rank_files(path)
    if not files:
        # JAX and TensorFlow runners write a log directory
        subdirs = [d for d in sorted(path.iterdir()) if d.is_dir() and is_xplane_dir(d)]
        return subdirs[0] if len(subdirs) == 1 else None
    if len(files) == 1:
        return files[0]
    for suffix in _RAW_ORDER:  # one run recorded twice (nsys report and its export)
        same = [f for f in files if f.name.endswith(suffix)]
        if same and all(_stem(f) == _stem(same[0]) for f in files):
            return same[0]
    return None


def _stem(f: Path) -> str:
    name = f.name
    for suffix in _RAW_ORDER:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def default_stem(path: Path) -> str:
    """``NAME`` of the ``NAME.parquet`` that ``traceviz import`` writes for ``path``."""
    name = path.name
    for suffix in RAW_SUFFIXES:
        name = name.removesuffix(suffix)
    return name or "trace"
