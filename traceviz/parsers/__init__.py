"""One module per raw format; ``load`` detects the format from content and dispatches.

``load`` and ``detect_format`` are imported on first use: a format's light modules (the
Kineto reader's plan and read-ahead) import without pandas."""

from typing import Any

__all__ = ["detect_format", "load"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from traceviz.parsers import detect

        return getattr(detect, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
