"""Nothing lost between runs: an ``--export`` that fails keeps the old one whole, and an
output path that is a link to nothing is said to be one. Real ``python -m traceviz``
processes, real files; a full disk is a real small tmpfs (root only, skipped elsewhere)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

TRACEVIZ = [sys.executable, "-m", "traceviz"]
SAMPLES = ROOT / "sample_traces" / "cpu"


def _tv(*args: str, cwd: Path | None = None, env: dict | None = None,
        timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([*TRACEVIZ, *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=timeout)


def _error_line(stderr: str) -> str:
    """The one ``traceviz: error:`` line, and no traceback."""
    assert "Traceback" not in stderr and "EOFError" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line.startswith("traceviz: error:")]
    assert len(lines) == 1, stderr
    return lines[0]


def _sums(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_a_dangling_link_as_an_output_says_so(tmp_path):
    link = tmp_path / "out.json"
    link.symlink_to(tmp_path / "nowhere" / "x.json")
    r = _tv("analyze", str(SAMPLES / "cell_torch"), "--perfetto", str(link), "--force")
    assert r.returncode == 2
    assert _error_line(r.stderr) == (f"traceviz: error: {link}: a dangling symbolic link "
                                     f"(to {tmp_path}/nowhere/x.json); remove it or choose "
                                     "another path")


@contextlib.contextmanager
def _tmpfs(where: Path, size: str):
    """A tmpfs of ``size`` at ``where`` (needs root and mount rights; skipped otherwise)."""
    where.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a small tmpfs needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs",
                           str(where)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=False)


def _fill(disk: Path, leave: int) -> None:
    """Fill ``disk`` until ``leave`` bytes are free."""
    st = os.statvfs(disk)
    (disk / "fill").write_bytes(b"\0" * max(0, st.f_bavail * st.f_frsize - leave))


def test_a_failed_export_keeps_the_old_one_whole(tmp_path):
    with _tmpfs(tmp_path / "disk", "512k") as disk:
        out = disk / "tables"
        r = _tv("analyze", str(SAMPLES / "cell_torch"), "--export", str(out))
        assert r.returncode == 0, r.stderr
        before = _sums(out)
        assert len(before) == 9
        _fill(disk, 40 << 10)  # the new export (about 120 KiB) does not fit
        r = _tv("analyze", str(SAMPLES / "fused_torch"), "--export", str(out), "--force")
        assert r.returncode == 2
        line = _error_line(r.stderr)
        assert line.startswith(f"traceviz: error: {out}/") and "No space left" in line
        assert _sums(out) == before  # not one table of the new trace beside the old
        assert sorted(p.name for p in disk.iterdir()) == ["fill", "tables"]
        (disk / "fill").unlink()
        r = _tv("analyze", str(SAMPLES / "fused_torch"), "--export", str(out), "--force")
        assert r.returncode == 0, r.stderr
        after = _sums(out)
        assert set(after) == set(before) and after["kernels.parquet"] != \
            before["kernels.parquet"]
