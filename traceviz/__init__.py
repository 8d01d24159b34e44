"""traceviz: profile LSTM variants and read any trace through one events table.

In a notebook::

    import traceviz
    t = traceviz.load("runs/cudnn_torch-ptb_lm-20261122-101500")  # or any trace file
    t.kernels()      # one row per kernel (leaf op on a CPU trace)
    t.summary()      # the figures of `traceviz analyze --json`
    r = traceviz.ranks("ranks/")   # a folder of rank traces, or its dataset
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from traceviz.errors import TraceVizError

if TYPE_CHECKING:
    from traceviz.analyses.compare.ranks import RanksSummary
    from traceviz.capture.in_process import Profile
    from traceviz.notebook_api import TraceAnalysis

__version__ = "0.1.0"
__all__ = ["Trace", "TraceAnalysis", "TraceVizError", "__version__", "load", "profile",
           "ranks", "step"]


def load(path: str | Path) -> TraceAnalysis:
    """Read anything ``traceviz analyze`` reads: a traceviz ``.parquet``, a raw trace
    (torch.profiler/Kineto JSON, ``.xplane.pb``, nsys ``.sqlite``/``.nsys-rep``, MXNet
    JSON; gzipped or not), a capture's run folder, or a TensorBoard log directory.
    Returns the trace with the notebook API (``t.kernels()``, ``t.summary()``...).
    Raises ``TraceVizError`` with one line when it cannot."""
    from traceviz.notebook_api import TraceAnalysis
    from traceviz.parsers import load as load_any

    return TraceAnalysis.of(load_any(Path(path)))


def ranks(path: str | Path, memory_limit: str | None = None) -> RanksSummary:
    """What ``traceviz analyze`` says of a folder of rank traces or of the dataset
    ``traceviz import DIR`` made of one: ``.ranks`` (per-rank figures), ``.stragglers``
    and ``.top_kernels`` (pandas), ``.to_dict(top)`` (exactly ``analyze --json``).
    ``memory_limit``: DuckDB's, for a dataset (default a quarter of RAM). Raises
    ``TraceVizError`` with one line when it cannot."""
    from traceviz.files.folders import is_dataset, is_rank_folder
    from traceviz.parsers.detect import check_loadable
    from traceviz.rankset.dataset import analyze_dataset
    from traceviz.rankset.folder import analyze_folder

    path = Path(path)
    if is_dataset(path):
        return analyze_dataset(path, memory_limit)
    if is_rank_folder(path):
        return analyze_folder(path)
    check_loadable(path)  # missing, empty, unknown: says why
    raise TraceVizError(f"{path}: one trace, not a folder of rank traces or a rank dataset "
                        "(traceviz.load reads it)")


def step() -> None:
    """Mark the end of a step in your own code: under ``traceviz capture -- python
    train.py`` or ``traceviz.profile()`` the profiler's schedule counts these marks
    (instead of ``optimizer.step()`` calls); anywhere else it does nothing."""
    from traceviz.runners.marks import step as mark

    mark()


def profile(steps: int = 3, warmup: int = 3, out: str | Path | None = None,
            modules: bool = False, force: bool = False,
            slice_s: float | None = None, batch_size: int | None = None) -> Profile:
    """Profile your own PyTorch code in-process (a notebook, a training loop)::

        with traceviz.profile(steps=3) as p:
            for batch in loader:
                train_step(batch)
                p.step()
        p.trace.summary()

    ``warmup`` unprofiled steps, one profiler warm-up step, then ``steps`` recorded;
    without ``p.step()``/``traceviz.step()`` calls each ``optimizer.step()`` ends a step.
    Writes the run folder ``out`` (default ``runs/profile-TIMESTAMP/``) as ``traceviz
    capture`` does; ``modules``: time per ``nn.Module`` (forward ranges); ``batch_size``:
    the samples each step processes, for per-sample figures (sequences/s)."""
    from traceviz.capture.in_process import Profile

    return Profile(steps, warmup, out, modules, force, slice_s, batch_size)


def __getattr__(name: str):
    # Trace pulls in pandas and pyarrow: imported on first use, so that the command
    # line starts (and handles Ctrl-C) before any heavy import. traceviz.Trace is the one
    # a notebook holds: the table with the notebook API (traceviz.trace.Trace: the table)
    if name in ("Trace", "TraceAnalysis"):
        from traceviz.notebook_api import TraceAnalysis

        return TraceAnalysis
    raise AttributeError(f"module 'traceviz' has no attribute {name!r}")
