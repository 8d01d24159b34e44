"""torch.profiler (Kineto) Chrome-trace JSON -> ``Trace``: ``reader`` (the pieces and the
document), ``native`` (the compiled reader) or ``events`` (the Python one, its fallback)
into raw columns (``raw``), then ``columns`` (with ``args`` and ``times``) to base rows."""

from traceviz.parsers.kineto.kineto_reader import (
    CHUNK_BYTES,
    IN_PROCESS_CHUNK,
    WORKER_MB_EACH,
    decode_piece,
    device_properties,
    parse,
)

__all__ = ["CHUNK_BYTES", "IN_PROCESS_CHUNK", "WORKER_MB_EACH", "decode_piece",
           "device_properties", "parse"]
