"""traceviz: profile LSTM variants and read any trace through one events table.

In a notebook::

    import traceviz
    t = traceviz.load("runs/cudnn_torch-ptb_lm-20261122-101500")  # or any trace file
    t.kernels()      # one row per kernel (leaf op on a CPU trace)
    t.summary()      # the figures of `traceviz analyze --json`
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from traceviz.errors import TraceVizError

if TYPE_CHECKING:
    from traceviz.trace import Trace

__version__ = "0.1.0"
__all__ = ["Trace", "TraceVizError", "__version__", "load"]


def load(path: str | Path) -> Trace:
    """Read anything ``traceviz analyze`` reads: a traceviz ``.parquet``, a raw trace
    (torch.profiler/Kineto JSON, ``.xplane.pb``, nsys ``.sqlite``/``.nsys-rep``, MXNet
    JSON; gzipped or not), a capture's run folder, or a TensorBoard log directory.
    Raises ``TraceVizError`` with one line when it cannot."""
    from traceviz.parsers import load as load_any

    return load_any(Path(path))


def __getattr__(name: str):
    # Trace pulls in pandas and pyarrow: imported on first use, so that the command
    # line starts (and handles Ctrl-C) before any heavy import
    if name == "Trace":
        from traceviz.trace import Trace

        return Trace
    raise AttributeError(f"module 'traceviz' has no attribute {name!r}")
