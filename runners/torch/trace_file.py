"""A torch.profiler recording written as ``trace.pt.trace.json.gz``, whole or not at all.

torch.profiler's own gzipped export writes the JSON into ``$TMPDIR`` first, and Kineto
reports a failed write (a full disk) only as a log line, leaving the JSON cut short. Here
the JSON goes beside the trace, its end is checked, and it is compressed here, so a full
disk, of the run folder or of ``$TMPDIR``, is an ``OSError`` naming the trace, never a
truncated file that a later reader fails on.
"""

from __future__ import annotations

import errno
import gzip
import os
import shutil
from pathlib import Path
from typing import Any

_TAIL = 64  # bytes read back from the end of the JSON: a whole one ends with "}"
_FULL_BELOW = 1 << 20  # free bytes under which a short write is put down to a full disk


def export_trace(prof: Any, path: Path) -> None:
    """Write ``prof``'s recording to ``path`` (``.json.gz``); on any failure nothing is
    left at ``path`` and an ``OSError`` says why."""
    path = Path(path)
    plain = path.with_name(path.name.removesuffix(".gz"))
    try:
        prof.export_chrome_trace(str(plain))
        if not _ends_whole(plain):  # Kineto logs a failed write and goes on
            raise _cut_short(plain.parent)
        with open(plain, "rb") as fin, gzip.open(path, "wb") as fout:
            shutil.copyfileobj(fin, fout, 1 << 20)
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    finally:
        plain.unlink(missing_ok=True)


def _ends_whole(plain: Path) -> bool:
    try:
        size = plain.stat().st_size
        with open(plain, "rb") as f:
            f.seek(max(0, size - _TAIL), os.SEEK_SET)
            return f.read().rstrip().endswith(b"}")
    except OSError:
        return False


def _cut_short(folder: Path) -> OSError:
    """Why Kineto's JSON ended early: a disk with next to nothing free is full."""
    try:
        st = os.statvfs(folder)
        full = st.f_bavail * st.f_frsize < _FULL_BELOW
    except (OSError, AttributeError):
        full = False
    if full:
        return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    return OSError(errno.EIO, "the profiler wrote it incomplete")


def write_failure(path: Path, e: BaseException) -> str:
    """One line for a trace that could not be written."""
    why = e.strerror if isinstance(e, OSError) and e.strerror else str(e) or type(e).__name__
    return f"{Path(path).name}: cannot write ({why})"
