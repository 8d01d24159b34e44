"""One module per raw format; ``load`` detects the format from content and dispatches."""

from traceviz.parsers.detect import detect_format, load

__all__ = ["detect_format", "load"]
