"""torch.profiler (Kineto) Chrome-trace JSON -> ``Trace``: ``reader`` (the pieces and the
document), ``native`` (the compiled reader) or ``events`` (the Python one, its fallback)
into raw columns (``raw``), then ``columns`` (with ``args`` and ``times``) to base rows;
``plan`` (how a file is read) and ``prefetch`` (a small file read ahead) import no pandas.

The reader's names are imported on first use, so that ``prefetch`` can start before pandas
is imported."""

from typing import Any

from traceviz.parsers.kineto.plan import CHUNK_BYTES, IN_PROCESS_CHUNK, WORKER_MB_EACH

_READER = ("decode_piece", "device_properties", "parse")

__all__ = ["CHUNK_BYTES", "IN_PROCESS_CHUNK", "WORKER_MB_EACH", *_READER]


def __getattr__(name: str) -> Any:
    if name in _READER:
        from traceviz.parsers.kineto import kineto_reader

        return getattr(kineto_reader, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
