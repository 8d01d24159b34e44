"""How much work a hostile input may cost: limits on inflated and element sizes.

A small compressed file can inflate to gigabytes of nothing (a *gzip bomb*, a Parquet
file of millions of identical rows), one JSON element can be as large as the file, and
an SQLite export can hold a view that never ends; without limits, each costs minutes
and gigabytes before its error, or never ends. Each limit is an environment variable,
so a real trace beyond it can still be read (``docs/failures.md`` lists them).
"""

from __future__ import annotations

import os
from pathlib import Path

from traceviz.errors import TraceVizError

MB = 1 << 20
# real gzipped traces inflate 10-30x (Kineto JSON) and rarely past 50x; a bomb inflates
# 1000x. Below the floor a file is never refused: small files cost little whatever their ratio.
DEFAULT_RATIO = 200
RATIO_FLOOR = 256 * MB
DEFAULT_ELEMENT_MB = 256


def _number(name: str, default: float) -> float:
    text = os.environ.get(name, "")
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        raise TraceVizError(f"{name}={text!r}: not a number") from None
    if value < 0 or value != value:
        raise TraceVizError(f"{name}={text!r}: must be 0 or more")
    return value


def inflate_limit(compressed: int) -> float:
    """The most bytes a gzip file of ``compressed`` bytes may inflate to
    (``TRACEVIZ_MAX_INFLATE_RATIO`` times its size, at least 256 MB; 0: no limit)."""
    ratio = _number("TRACEVIZ_MAX_INFLATE_RATIO", DEFAULT_RATIO)
    return float("inf") if ratio == 0 else max(RATIO_FLOOR, ratio * compressed)


def inflate_refusal(path: object, compressed: int, limit: float) -> TraceVizError:
    return TraceVizError(
        f"{path}: inflates to more than {limit / MB:,.0f} MB from {compressed / MB:,.1f} MB "
        "(a gzip bomb?); TRACEVIZ_MAX_INFLATE_RATIO=N raises the limit to N times the "
        "file's size, 0 lifts it")


def element_limit() -> int:
    """The most bytes one JSON array element may hold (``TRACEVIZ_MAX_ELEMENT_MB``)."""
    return int(_number("TRACEVIZ_MAX_ELEMENT_MB", DEFAULT_ELEMENT_MB) * MB)


def memory_bytes() -> int:
    """The machine's physical memory (4 GB where the system does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 4 << 30


def xspace_limit() -> int:
    """The most bytes of XSpace protobuf read into memory: parsing holds the bytes and
    the message (several times the bytes) at once, so an eighth of the machine's memory
    (``TRACEVIZ_MAX_XSPACE_MB`` sets another)."""
    stated = _number("TRACEVIZ_MAX_XSPACE_MB", 0)
    return int(stated * MB) if stated else memory_bytes() // 8


def sqlite_seconds(size: int) -> float:
    """The longest that reading the tables of an nsys SQLite export of ``size`` bytes may
    take (``TRACEVIZ_MAX_SQLITE_SECONDS``; by default 60 s plus 1 s per MB, five times
    what a busy machine takes; 0: no limit)."""
    stated = _number("TRACEVIZ_MAX_SQLITE_SECONDS", -1)
    if stated < 0:
        return 60 + size / MB
    return float("inf") if stated == 0 else stated


SQLITE_RATIO = 2
SQLITE_VALUES_FLOOR = 1 << 20


def sqlite_values(size: int) -> float:
    """The most values one query of an nsys SQLite export of ``size`` bytes may read, and
    the most bytes one value may hold (``TRACEVIZ_MAX_SQLITE_RATIO`` per byte of the file,
    at least a million; 0: no limit): every value a table stores takes at least a byte of
    the file, so only a view can read more."""
    ratio = _number("TRACEVIZ_MAX_SQLITE_RATIO", SQLITE_RATIO)
    return float("inf") if ratio == 0 else max(SQLITE_VALUES_FLOOR, ratio * size)


def parquet_limit(size: int) -> float:
    """The most memory the rows of a traceviz Parquet file of ``size`` bytes may take
    once read (``TRACEVIZ_MAX_PARQUET_RATIO`` times its size, at least 256 MB; 0: no
    limit): real tables take 10 to 20 times their file, while 40 M identical rows
    compress to 2.7 MB and took 4.3 GB."""
    ratio = _number("TRACEVIZ_MAX_PARQUET_RATIO", DEFAULT_RATIO)
    return float("inf") if ratio == 0 else max(RATIO_FLOOR, ratio * size)


def check_parquet_size(path: Path) -> None:
    """Refuse, from its footer alone, a Parquet file whose rows would take more memory
    than ``parquet_limit`` allows (rows times the width of a row, as pandas holds it)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    meta = pq.read_metadata(path)
    width = 0
    for f in meta.schema.to_arrow_schema():
        kind = f.type.index_type if pa.types.is_dictionary(f.type) else f.type
        try:
            width += max(1, kind.bit_width // 8)
        except ValueError:  # text, lists: their data besides, a pointer per row at least
            width += 8
    size = path.stat().st_size
    limit = parquet_limit(size)
    if meta.num_rows * width > limit:
        raise TraceVizError(
            f"{path}: {meta.num_rows:,} rows in {size / MB:,.1f} MB would take "
            f"{meta.num_rows * width / MB:,.0f} MB read, more than the limit of "
            f"{limit / MB:,.0f} MB (by default 200 times the file's size, at least 256 MB; "
            "a Parquet bomb?); TRACEVIZ_MAX_PARQUET_RATIO=N raises it to N times the "
            "file's size, 0 lifts it")
