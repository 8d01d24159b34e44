"""Types of the compiled Kineto reader (``kineto_native.c``; its header comment is the
API: a dict of column buffers, or None where the Python reader must decode)."""

from typing import Any

INT_FIELDS: tuple[str, ...]

class NativeBuffer:
    def __len__(self) -> int: ...
    def __buffer__(self, flags: int, /) -> memoryview: ...

def read_events(data: bytes | bytearray | memoryview,
                document: bool = False) -> dict[str, Any] | None: ...

def ascii_count(data: bytes | bytearray | memoryview,
                needle: bytes | bytearray | memoryview, /) -> tuple[bool, int]: ...
