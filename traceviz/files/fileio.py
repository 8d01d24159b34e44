"""Opening user files (gzip-aware, with readable errors) and writing outputs atomically."""

from __future__ import annotations

import contextlib
import gzip
import os
import shutil
import tempfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, cast

from traceviz.errors import TraceVizError
from traceviz.files.limits import inflate_limit, inflate_refusal

try:  # ISA-L inflates about 3x faster than zlib: a gzipped trace's reading is mostly that
    from isal import igzip as _gzip
    from isal import isal_zlib as _zlib
except ImportError:  # a platform without its wheels: the standard library's
    _gzip, _zlib = gzip, zlib  # type: ignore[misc]

GZIP_MAGIC = b"\x1f\x8b"
# what inflating a damaged stream raises (zlib.error, or ISA-L's own)
_INFLATE_ERRORS = (gzip.BadGzipFile, zlib.error, cast(type[Exception], _zlib.error))


def check_readable(path: Path) -> None:
    """Raise a TraceVizError naming the problem if ``path`` is not a readable, non-empty file."""
    if not path.exists():
        raise TraceVizError(f"{path}: no such file")
    if path.is_dir():
        raise TraceVizError(f"{path}: is a directory, not a trace file")
    if not os.access(path, os.R_OK):
        raise TraceVizError(f"{path}: permission denied")
    if not path.is_file():  # a device (/dev/zero) or a pipe: no size to trust, maybe no end
        raise TraceVizError(f"{path}: not a regular file (a device, a pipe or a socket); "
                            "traceviz reads trace files")
    if path.stat().st_size == 0:
        raise TraceVizError(f"{path}: file is empty")


_BLOCK = 16 << 20


class _GzipErrors:
    """A gzip stream whose truncation/corruption errors read as one line."""

    def __init__(self, path: Path, limit: float | None = None):
        self._path = path
        self._compressed = os.path.getsize(path)
        # a bomb is refused as soon as it passes the limit, not after inflating it all
        self._limit = inflate_limit(self._compressed) if limit is None else limit
        self._total = 0
        self._f = _gzip.open(path, "rb")  # noqa: SIM115 (closed by close())

    def read(self, n: int = -1) -> bytes:
        if self._limit != float("inf"):  # never inflate more than one byte past the limit
            room = int(self._limit - self._total) + 1
            n = room if n < 0 else min(n, room)
        if n < 0 or n > _BLOCK:
            # in blocks: one large read inflates into a buffer several times its size
            parts = []
            while n < 0 or n > 0:
                part = self._read(_BLOCK if n < 0 else min(n, _BLOCK))
                if not part:
                    break
                parts.append(part)
                n -= len(part) if n > 0 else 0
            return b"".join(parts)
        return self._read(n)

    def _read(self, n: int) -> bytes:
        try:
            data = self._f.read(n)
        except EOFError as e:
            raise TraceVizError(f"{self._path}: truncated gzip file ({e})") from None
        except _INFLATE_ERRORS as e:
            raise TraceVizError(f"{self._path}: corrupt gzip file ({e})") from None
        self._total += len(data)
        if self._total > self._limit:
            raise inflate_refusal(self._path, self._compressed, self._limit)
        return data

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> _GzipErrors:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def is_gzip(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(2) == GZIP_MAGIC


def read_whole(path: Path, limit: int) -> bytes | None:
    """The file's bytes, gzip inflated, when they are at most ``limit`` and read without
    error: one read instead of a stream of blocks. None otherwise (too large, truncated,
    corrupt, several gzip members): the streaming reader then reads it, or says why not."""
    try:
        with open(path, "rb") as f:
            head = f.read(2)
            size = os.fstat(f.fileno()).st_size
            if head == GZIP_MAGIC and size >= 18:
                f.seek(-4, os.SEEK_END)  # the inflated size (mod 2**32): too large, no try
                if int.from_bytes(f.read(4), "little") > limit:
                    return None
            elif size > limit:
                return None
            f.seek(0)
            raw = f.read(limit + 1)
    except OSError:
        return None
    if raw[:2] != GZIP_MAGIC:
        return raw if len(raw) <= limit else None
    inflate = _zlib.decompressobj(wbits=31)
    try:
        data = inflate.decompress(raw, limit + 1)
    except _INFLATE_ERRORS:
        return None
    if len(data) > limit or not inflate.eof or inflate.unused_data:
        return None
    return data


def open_input(path: Path) -> BinaryIO | _GzipErrors:
    """Open a raw trace for binary reading, decompressing gzip transparently."""
    check_readable(path)
    try:
        with open(path, "rb") as f:
            magic = f.read(2)
        return _GzipErrors(path) if magic == GZIP_MAGIC else open(path, "rb")
    except PermissionError:
        raise TraceVizError(f"{path}: permission denied") from None


def check_output(path: Path, force: bool = False) -> None:
    """Refuse an output path that exists (without ``force``) or is not a regular file.

    A device node, fifo, socket or directory is never replaced, ``--force`` or not.
    """
    path = Path(path)
    above = path.parent
    while not above.exists() and above != above.parent:
        above = above.parent
    if not above.is_dir():  # the folder to write into would be a file: say so before work
        raise TraceVizError(f"{path}: cannot write here ({above} is a file, not a folder)")
    if not path.exists() and not path.is_symlink():
        return
    if path.is_dir():
        raise TraceVizError(f"{path}: is a directory")
    if not path.exists():  # a link to nothing: written through, it would land elsewhere
        raise TraceVizError(f"{path}: a dangling symbolic link (to {os.readlink(path)}); "
                            "remove it or choose another path")
    if not path.is_file():
        raise TraceVizError(f"{path}: not a regular file (a device, fifo or socket); outputs "
                            "are written only to regular files")
    if not force:
        raise TraceVizError(f"{path}: already exists", option="force", action="replace it")


@contextlib.contextmanager
def atomic_output(path: Path, force: bool = False) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; move it to ``path`` only on success.

    An existing ``path`` is replaced only with ``force``, and only if it is a regular
    file. Without ``force`` the final name is created by a hard link, which fails if the
    name appeared meanwhile: of two runs writing one path, the second fails cleanly
    instead of replacing the first's output. On any error, Ctrl-C or SIGTERM the
    temporary file is removed, so no partial output is ever left behind; a failed write
    (a full disk) names the path.
    """
    path = Path(path)
    check_output(path, force)
    parent = path.parent if str(path.parent) else Path(".")
    try:
        parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=parent)
    except OSError as e:
        raise TraceVizError(f"{path}: cannot write here ({e.strerror})") from None
    os.close(fd)
    tmp_path = Path(tmp)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp_path, 0o666 & ~umask)  # mkstemp makes 0600; outputs are ordinary files
    try:
        try:
            yield tmp_path
            _publish(tmp_path, path, force)
        except OSError as e:
            raise TraceVizError(f"{path}: cannot write ({e.strerror or e})") from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp_path.unlink()


@contextlib.contextmanager
def output_folder(directory: Path) -> Iterator[Path]:
    """Create ``directory`` (and missing parents) for a command's outputs. Where the
    command then fails (a full disk, Ctrl-C), the folders it created go again with what it
    wrote into them: a failed run leaves no half-filled folder behind. A folder that was
    there before is left as it is (each file in it is written atomically)."""
    directory = Path(directory)
    if directory.is_symlink() and not directory.exists():
        raise TraceVizError(f"{directory}: a dangling symbolic link (to "
                            f"{os.readlink(directory)}); remove it or choose another folder")
    created = None
    p = directory
    while not p.exists() and not p.is_symlink() and p != p.parent:
        created, p = p, p.parent
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise TraceVizError(f"{directory}: cannot create the folder ({e.strerror})") from None
    try:
        yield directory
    except BaseException:
        if created is not None:
            shutil.rmtree(created, ignore_errors=True)
        raise


def _publish(tmp: Path, path: Path, force: bool) -> None:
    if force:
        check_output(path, force=True)
        os.replace(tmp, path)
        return
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise TraceVizError(f"{path}: already exists (written meanwhile by another run)",
                            option="force", action="replace it") from None
    except OSError:  # a file system without hard links: no race protection there
        check_output(path, force=False)
        os.replace(tmp, path)


IMPORT_LOCK = ".traceviz-import.lock"  # held by the one import writing a dataset
READ_LOCK = ".traceviz-read.lock"  # shared by its readers, exclusive while it is swapped


@contextlib.contextmanager
def folder_lock(folder: Path, name: str, shared: bool = False, wait: bool = True,
                busy: str = "") -> Iterator[bool]:
    """Hold the lock file ``folder/name`` (``flock``: released when the process dies,
    SIGKILL included, so a killed holder leaves no stale lock). ``wait=False`` refuses a
    held lock with ``busy`` as the line. A reader (``shared``) of a folder without the file
    (made before locks, or read-only) reads unlocked; yields whether it holds the lock."""
    try:
        import fcntl
    except ImportError:  # no flock (Windows): no lock
        yield False
        return
    path = Path(folder) / name
    try:
        fd = os.open(path, os.O_RDONLY if shared else os.O_RDWR | os.O_CREAT, 0o666)
    except OSError as e:
        if shared:
            yield False
            return
        raise TraceVizError(f"{path}: cannot create the lock file ({e.strerror})") from None
    try:
        mode = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
        try:
            fcntl.flock(fd, mode if wait else mode | fcntl.LOCK_NB)
        except BlockingIOError:
            raise TraceVizError(busy or f"{folder}: in use by another traceviz") from None
        yield True
    finally:
        os.close(fd)


PARTIAL = ".partial-"  # a staged folder: hidden, beside its final name, with the writer's pid


@contextlib.contextmanager
def staged_folder(final: Path, force: bool = False) -> Iterator[Path]:
    """Yield a hidden folder beside ``final`` (``.NAME.partial-PID``) to write into; on
    success it is renamed to ``final`` (a new or empty folder) or, with ``force``, its
    entries replace those of the same names in ``final`` (the others are kept). On any
    error, Ctrl-C or SIGTERM it is removed: what is left never reads as a finished
    folder, and a SIGKILLed writer's leftover is removed by the next run (its pid is
    gone). A failed write (a full disk) names ``final``."""
    final = Path(final)
    parent = final.parent if str(final.parent) else Path(".")
    stage = parent / f".{final.name}{PARTIAL}{os.getpid()}"
    try:
        parent.mkdir(parents=True, exist_ok=True)
        for old in parent.glob(f".{glob_literal(final.name)}{PARTIAL}*"):
            pid = old.name.rsplit("-", 1)[-1]
            if pid.isdigit() and not alive(int(pid)):
                shutil.rmtree(old, ignore_errors=True)
        shutil.rmtree(stage, ignore_errors=True)
        stage.mkdir()
    except OSError as e:
        raise TraceVizError(f"{final}: cannot create the folder ({e.strerror})") from None
    try:
        try:
            yield stage
            _publish_folder(stage, final, force)
        except OSError as e:
            raise TraceVizError(f"{final}: cannot write ({e.strerror or e})") from None
    finally:
        shutil.rmtree(stage, ignore_errors=True)


@contextlib.contextmanager
def staged_files(directory: Path, force: bool = False) -> Iterator[Path]:
    """Yield a hidden folder inside ``directory`` (``.partial-PID``; ``directory`` and
    missing parents made, and taken back on failure, as ``output_folder`` does) to write a
    set of files into; on success each moves to ``directory``, replacing a file of its
    name only with ``force``. A failure (a full disk, Ctrl-C) leaves what ``directory``
    held as it was: never part of the new set beside the rest of an old one."""
    directory = Path(directory)
    with output_folder(directory):
        stage = directory / f"{PARTIAL[1:]}{os.getpid()}"
        try:
            for old in directory.glob(f"{PARTIAL[1:]}*"):  # a killed writer's, or ours
                pid = old.name.rsplit("-", 1)[-1]
                if pid.isdigit() and (int(pid) == os.getpid() or not alive(int(pid))):
                    shutil.rmtree(old, ignore_errors=True)
            stage.mkdir()
        except OSError as e:
            raise TraceVizError(f"{directory}: cannot write ({e.strerror})") from None
        try:
            try:
                yield stage
                files = sorted(stage.iterdir())
                for f in files:  # all refused or none moved: checked before the first
                    check_output(directory / f.name, force)
                for f in files:
                    _publish(f, directory / f.name, force)
            except OSError as e:
                raise TraceVizError(f"{directory}: cannot write ({e.strerror or e})") from None
            except TraceVizError as e:  # the path the user gave, not the hidden stage's
                e.message = e.message.replace(str(stage), str(directory))
                raise
        finally:
            shutil.rmtree(stage, ignore_errors=True)


def _publish_folder(stage: Path, final: Path, force: bool) -> None:
    if final.is_symlink() or (final.exists() and not final.is_dir()):
        raise TraceVizError(f"{final}: exists and is not a folder")
    if not final.exists() or not any(final.iterdir()):
        os.replace(stage, final)  # onto an empty folder too: one step
        return
    if not force:
        raise TraceVizError(f"{final}: folder is not empty (written meanwhile by another "
                            "run)", option="force", action="reuse it")
    for entry in sorted(stage.iterdir()):
        target = final / entry.name
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        os.replace(entry, target)


def glob_literal(name: str) -> str:
    """``name`` in a ``Path.glob`` pattern, matching only itself."""
    return "".join(f"[{c}]" if c in "*?[" else c for c in name)


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists (one of another user included)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
