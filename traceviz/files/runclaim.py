"""A capture's run folder: claimed at the start, written hidden, published by rename.

A capture holds ``.NAME.lock`` beside its run folder ``NAME`` (``flock``: the kernel
releases it when the process dies, SIGKILL included) from the moment the folder's name
is settled until the run is published, so two captures can never write one folder: the
second is refused in one line, and an automatic name (``runs/STEM-YYYYmmdd-HHMMSS``) takes
the next free ``-2``, ``-3``... The run is written into ``.NAME.partial-PID`` and renamed
into place once complete. Every folder a capture makes holds ``.traceviz-run``
(``RUN_MARKER``): ``--force`` reuses only such a folder, never one holding a user's own
files.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

from traceviz.errors import TraceVizError
from traceviz.files.fileio import PARTIAL, alive, glob_literal

RUN_MARKER = ".traceviz-run"  # in every run folder traceviz makes: what --force may reuse
MARKER_TEXT = "a run folder made by traceviz: capture --force may replace what it holds\n"
LOCK_SUFFIX = ".lock"  # .NAME.lock beside the run folder, held while a capture writes it
LOG = "runner.log"
# what a failed capture leaves: the same command again reuses it without --force
FAILED_RUN = {LOG, RUN_MARKER}

_HELD: dict[str, _Claim] = {}  # this process's claims, by the run folder's absolute path


def _key(path: Path) -> str:
    return os.path.abspath(path)


def lock_path(final: Path) -> Path:
    return final.parent / f".{final.name}{LOCK_SUFFIX}"


def check_run_dir(path: Path, force: bool) -> None:
    """Refuse ``path`` as a run folder: a file or a link, a folder holding more than a
    failed capture's ``runner.log`` without ``force``, and, ``force`` or not, a folder
    that holds anything and is not traceviz's (no ``RUN_MARKER``)."""
    path = Path(path)
    if path.is_symlink() and not path.exists():
        raise TraceVizError(f"{path}: a dangling symbolic link (to {os.readlink(path)}); "
                            "remove it or choose another folder")
    if path.exists() and not path.is_dir():
        raise TraceVizError(f"{path}: exists and is not a folder")
    if not path.exists():
        return
    try:
        held = {p.name for p in path.iterdir()}
    except OSError as e:
        raise TraceVizError(f"{path}: cannot read the folder ({e.strerror})") from None
    if held <= FAILED_RUN:
        return
    if not (path / RUN_MARKER).is_file():  # a user's own folder: never replaced
        shown = ", ".join(sorted(held - FAILED_RUN)[:3]) + (", ..." if len(held) > 4 else "")
        raise TraceVizError(f"{path}: not a run folder traceviz made (no {RUN_MARKER}) and "
                            f"not empty ({shown}); traceviz replaces nothing in it, even "
                            "with --force: choose another folder")
    if not force:
        raise TraceVizError(f"{path}: folder is not empty", option="force", action="reuse it")


def mark(folder: Path) -> None:
    """Write ``RUN_MARKER`` into ``folder``: traceviz made it."""
    (Path(folder) / RUN_MARKER).write_text(MARKER_TEXT)


def prepare_run_dir(path: Path, force: bool, create: bool = True) -> None:
    """Refuse what ``check_run_dir`` refuses; then create the folder, marked as traceviz's
    (``create``), for a writer that writes into it directly (``traceviz.profile()``, a
    ladder's folder of rungs)."""
    check_run_dir(path, force)
    if not create:
        return
    try:
        path.mkdir(parents=True, exist_ok=True)
        mark(path)
    except OSError as e:
        raise TraceVizError(f"{path}: cannot create the run folder ({e.strerror})") from None


def new_run_dir(stem: str, root: Path = Path("runs")) -> Path:
    """``root/STEM-YYYYmmdd-HHMMSS`` (``-2``, ``-3``... where taken), created and marked
    here: created exclusively, so two processes in one second get folders of their own."""
    for path in _stamped(stem, root):
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.mkdir()
        except FileExistsError:
            continue
        except OSError as e:
            raise TraceVizError(f"{path}: cannot create the run folder ({e.strerror})") from None
        mark(path)
        return path
    raise AssertionError("unreachable")


def _stamped(stem: str, root: Path) -> Iterator[Path]:
    base = root / f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}"
    yield base
    k = 1
    while True:
        k += 1
        yield base.with_name(f"{base.name}-{k}")


class _Claim:
    """The lock on one run folder's name, and the hidden stage the run is written into."""

    def __init__(self, final: Path, fd: int | None) -> None:
        self.final, self.fd = final, fd
        self.stage = final.parent / f".{final.name}{PARTIAL}{os.getpid()}"

    def release(self) -> None:
        shutil.rmtree(self.stage, ignore_errors=True)
        _HELD.pop(_key(self.final), None)
        if self.fd is not None:
            with contextlib.suppress(OSError):  # removed while held: the next one is fresh
                lock_path(self.final).unlink()
            os.close(self.fd)
            self.fd = None


def _take(lock: Path) -> int | None:
    """A descriptor holding ``lock`` (created where missing), or None where another
    process holds it. A holder removes the file before it lets go: a lock taken on a file
    that is no longer at ``lock`` is taken again on the new one."""
    import fcntl

    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        try:
            same = os.stat(lock, follow_symlinks=False).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)


def _claim(final: Path) -> _Claim | None:
    """Claim ``final`` (None: another process holds it), its stale stages removed."""
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        try:
            import fcntl  # noqa: F401  (no flock on Windows: no claim there)
        except ImportError:
            return _Claim(final, None)
        fd = _take(lock_path(final))
    except OSError as e:
        raise TraceVizError(f"{final}: cannot claim the run folder ({e.strerror or e})") from None
    if fd is None:
        return None
    claim = _Claim(final, fd)
    # holding the name: a stage of this name whose writer is gone is a killed capture's
    for old in final.parent.glob(f".{glob_literal(final.name)}{PARTIAL}*"):
        pid = old.name.rsplit("-", 1)[-1]
        if pid.isdigit() and (int(pid) == os.getpid() or not alive(int(pid))):
            shutil.rmtree(old, ignore_errors=True)
    return claim


def busy_line(final: Path) -> str:
    return (f"{final}: another capture is writing this run folder (it holds "
            f"{lock_path(final).name}); wait for it to end or choose another folder")


def _claim_given(out: Path, force: bool) -> _Claim:
    check_run_dir(out, force)
    claim = _claim(out)
    if claim is None:
        raise TraceVizError(busy_line(out))
    try:
        check_run_dir(out, force)  # again, holding it: a capture may have ended meanwhile
    except BaseException:
        claim.release()
        raise
    return claim


def _claim_free(stem: str, root: Path) -> _Claim:
    """The first of ``root/STEM-TIME``, ``-2``, ``-3``... that neither exists nor is
    claimed by another capture."""
    for path in _stamped(stem, root):
        if path.exists() or path.is_symlink():
            continue
        claim = _claim(path)
        if claim is None:
            continue
        if not (path.exists() or path.is_symlink()):
            return claim
        claim.release()  # published between the look and the claim
    raise AssertionError("unreachable: the names go on")


@contextlib.contextmanager
def claimed_run_dir(out: Path | None, stem: str, force: bool,
                    root: Path = Path("runs")) -> Iterator[Path]:
    """Claim the run folder ``out`` (checked by ``check_run_dir``; held by another
    capture: refused), or, without ``out``, the first free ``root/STEM-TIME[-K]``; yield
    its path. ``run_stage`` writes the run under the claim; it ends with the block."""
    claim = _claim_given(Path(out), force) if out is not None else _claim_free(stem, root)
    _HELD[_key(claim.final)] = claim
    try:
        yield claim.final
    finally:
        claim.release()


@contextlib.contextmanager
def run_stage(final: Path, force: bool = True) -> Iterator[Path]:
    """Yield the hidden folder the run of ``final`` is written into; renamed to ``final``
    on success, removed on any error, Ctrl-C or SIGTERM. The folder is claimed here
    unless this process holds it already (``claimed_run_dir``; ``force`` then applies)."""
    final = Path(final)
    if _key(final) not in _HELD:
        with claimed_run_dir(final, "", force), run_stage(final) as stage:
            yield stage
        return
    claim = _HELD[_key(final)]
    stage = claim.stage
    try:
        shutil.rmtree(stage, ignore_errors=True)
        stage.mkdir()
        mark(stage)
    except OSError as e:
        raise TraceVizError(f"{final}: cannot create the run folder ({e.strerror})") from None
    try:
        try:
            yield stage
            _publish(stage, final)
        except OSError as e:
            raise TraceVizError(f"{final}: cannot write ({e.strerror or e})") from None
        except TraceVizError as e:  # the path the user knows, not the hidden stage's
            e.message = e.message.replace(str(stage), str(final))
            raise
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def _publish(stage: Path, final: Path) -> None:
    """``stage`` becomes ``final``: renamed into place where ``final`` is absent or a
    failed capture's; over a run of traceviz's (``--force``), its entries replace those
    of the same names (what else the folder holds is kept)."""
    check_run_dir(final, force=True)  # holding the claim: only another program changes it
    held = {p.name for p in final.iterdir()} if final.exists() else set()
    if held <= FAILED_RUN:
        for name in held:
            (final / name).unlink()
        os.replace(stage, final)  # onto an empty folder too: one step
        return
    for entry in sorted(stage.iterdir()):
        target = final / entry.name
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        os.replace(entry, target)


def keep_runner_log(stage: Path, final: Path) -> None:
    """A failed capture's ``runner.log`` into ``final`` (made, and marked, where it is
    not there), for the user to read why; nothing else of the stage is kept."""
    with contextlib.suppress(OSError):
        final.mkdir(parents=True, exist_ok=True)
        if not (final / RUN_MARKER).exists():
            mark(final)
        os.replace(stage / LOG, final / LOG)


FULL_BELOW = 1 << 20  # free bytes under which a run's missing files are put down to the disk


def full_disk(folder: Path, final: Path) -> str:
    """``; the disk of FINAL is full (N KiB free)`` where ``folder``'s file system has
    less than ``FULL_BELOW`` free: why a runner wrote no results, said in the same line."""
    try:
        st = os.statvfs(folder)
    except (OSError, AttributeError):  # gone, or no statvfs (Windows)
        return ""
    free = st.f_bavail * st.f_frsize
    if free >= FULL_BELOW:
        return ""
    return f"; the disk of {final} is full ({free >> 10} KiB free)"
