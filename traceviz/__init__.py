"""traceviz: profile LSTM variants and read any trace through one events table."""

from traceviz.errors import TraceVizError
from traceviz.trace import Trace

__version__ = "0.1.0"
__all__ = ["Trace", "TraceVizError", "__version__"]
