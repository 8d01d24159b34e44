"""traceviz: profile LSTM variants and read any trace through one events table."""

from traceviz.errors import TraceVizError

__version__ = "0.1.0"
__all__ = ["Trace", "TraceVizError", "__version__"]


def __getattr__(name: str):
    # Trace pulls in pandas and pyarrow: imported on first use, so that the command
    # line starts (and handles Ctrl-C) before any heavy import
    if name == "Trace":
        from traceviz.trace import Trace

        return Trace
    raise AttributeError(f"module 'traceviz' has no attribute {name!r}")
