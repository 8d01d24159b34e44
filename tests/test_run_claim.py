"""Nothing lost between runs: a run folder is one capture's from its start (a second
capture into it is refused, an automatic name is unique), ``--force`` replaces only a
folder traceviz made, a full disk publishes nothing and says so in one line, and an
``--export`` that fails keeps the old one whole, and a killed import's staging folder is
removed by the next import. Real ``python -m traceviz`` processes, real files; a full
disk is a real small tmpfs (root only, skipped elsewhere)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.conftest import ROOT, SHARED_TRACES, needs, shared
from traceviz.files.runclaim import RUN_MARKER, claimed_run_dir
from traceviz.trace import Trace

TRACEVIZ = [sys.executable, "-m", "traceviz"]
SAMPLES = ROOT / "sample_traces" / "cpu"
DLRM = SHARED_TRACES / "foreign" / "kineto" / "h3_param_dlrm_8rank"
# a tiny training loop; with an argument, its first step waits for that file to appear
# (the test holds a capture inside its run while it starts another)
TRAIN = """import os, sys, time
import torch
m = torch.nn.Linear(8, 8)
opt = torch.optim.SGD(m.parameters(), lr=0.1)
for i in range(8):
    m(torch.randn(4, 8)).sum().backward()
    opt.step()
    opt.zero_grad()
    deadline = time.time() + 120
    while i == 0 and len(sys.argv) > 1 and not os.path.exists(sys.argv[1]) \\
            and time.time() < deadline:
        time.sleep(0.05)
"""


def _tv(*args: str, cwd: Path | None = None, env: dict | None = None,
        timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([*TRACEVIZ, *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=timeout)


def _start(*args: str, cwd: Path) -> subprocess.Popen:
    return subprocess.Popen([*TRACEVIZ, *args], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _error_line(stderr: str) -> str:
    """The one ``traceviz: error:`` line, and no traceback."""
    assert "Traceback" not in stderr and "EOFError" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line.startswith("traceviz: error:")]
    assert len(lines) == 1, stderr
    return lines[0]


def _sums(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def _wait_for(path: Path, proc: subprocess.Popen, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert path.exists(), proc.communicate()


def _complete_run(run: Path) -> None:
    """A whole run: its marker, records and a trace that reads, with its steps."""
    assert (run / RUN_MARKER).is_file()
    assert {"trace.parquet", "bench.json", "meta.json", "config.json"} <= \
        {p.name for p in run.iterdir()}
    assert json.loads((run / "bench.json").read_text())["profiled_batches"] == 3
    trace = Trace.load(run / "trace.parquet")
    # named where it is: in the run folder, not the hidden one it was written in
    assert trace.meta["source_file"].endswith(f"{run.name}/trace.pt.trace.json.gz")
    assert len(trace.events) > 0


@pytest.fixture
def work(tmp_path: Path) -> Path:
    (tmp_path / "train.py").write_text(TRAIN)
    return tmp_path


@pytest.mark.capture
def test_a_second_capture_into_a_held_folder_is_refused(work):
    """A capture holds its run folder from its start: another into it, --force or not, is
    one line naming the folder and exit 2, and the first one's run is whole."""
    needs("torch")
    go = work / "go"
    first = _start("capture", "--out", "run", "--", "python", "train.py", str(go), cwd=work)
    _wait_for(work / ".run.lock", first)
    for force in ([], ["--force"]):
        r = _tv("capture", "--out", "run", *force, "--", "python", "train.py", cwd=work)
        assert r.returncode == 2
        assert _error_line(r.stderr) == (
            "traceviz: error: run: another capture is writing this run folder (it holds "
            ".run.lock); wait for it to end or choose another folder")
    go.touch()
    _, err = first.communicate(timeout=300)
    assert first.returncode == 0, err
    _complete_run(work / "run")
    assert sorted(p.name for p in work.iterdir()) == ["go", "run", "train.py"]
    # done: the folder is a run now, refused without --force and replaced with it
    r = _tv("capture", "--out", "run", "--", "python", "train.py", cwd=work)
    assert r.returncode == 2
    assert _error_line(r.stderr) == ("traceviz: error: run: folder is not empty (use "
                                     "--force to reuse it)")


@pytest.mark.capture
def test_captures_at_once_get_folders_of_their_own(work):
    """Two captures without --out, both inside their runs at once: two folders, two
    whole runs (an automatic name is claimed, not only looked for)."""
    needs("torch")
    go = work / "go"
    procs = [_start("capture", "--", "python", "train.py", str(go), cwd=work)
             for _ in range(2)]
    deadline = time.monotonic() + 120
    while len(list((work / "runs").glob(".*.lock"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    go.touch()
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    runs = sorted((work / "runs").iterdir())
    assert len(runs) == 2 and all(p.name.startswith("train-") for p in runs), runs
    for run in runs:
        _complete_run(run)


def test_claims_in_one_second_are_distinct_names(tmp_path):
    """The same stem claimed twice at once, in the same second: the second name is the
    first's with ``-2``; each lock goes with its claim."""
    for _ in range(5):  # the second may tick between the two claims: then try again
        with claimed_run_dir(None, "train", False, root=tmp_path) as a, \
                claimed_run_dir(None, "train", False, root=tmp_path) as b:
            locks = sorted(p.name for p in tmp_path.iterdir())
        if b.name.startswith(a.name):
            break
    assert b == a.with_name(a.name + "-2")
    assert locks == sorted([f".{a.name}.lock", f".{b.name}.lock"])
    assert list(tmp_path.iterdir()) == []


@pytest.mark.capture
def test_force_never_replaces_a_folder_traceviz_did_not_make(work):
    needs("torch")
    mine = work / "mine"
    mine.mkdir()
    for name in ("config.json", "meta.json", "bench.json"):
        (mine / name).write_text('{"the user\'s": 1}\n')
    before = _sums(mine)
    r = _tv("capture", "--out", "mine", "--force", "--", "python", "train.py", cwd=work)
    assert r.returncode == 2
    assert _error_line(r.stderr) == (
        "traceviz: error: mine: not a run folder traceviz made (no .traceviz-run) and not "
        "empty (bench.json, config.json, meta.json); traceviz replaces nothing in it, even "
        "with --force: choose another folder")
    assert _sums(mine) == before
    assert sorted(p.name for p in work.iterdir()) == ["mine", "train.py"]  # no lock left
    # a run folder traceviz made is reused with --force; what the user added is kept
    go = work / "go"
    go.touch()
    for force in ([], ["--force"]):
        r = _tv("capture", "--out", "run", *force, "--", "python", "train.py", str(go),
                cwd=work)
        assert r.returncode == 0, r.stderr
        (work / "run" / "notes.txt").write_text("mine\n")
    _complete_run(work / "run")
    assert (work / "run" / "notes.txt").read_text() == "mine\n"


def test_a_dangling_link_as_an_output_says_so(work):
    tmp_path = work
    link = tmp_path / "out.json"
    link.symlink_to(tmp_path / "nowhere" / "x.json")
    r = _tv("analyze", str(SAMPLES / "cell_torch"), "--perfetto", str(link), "--force")
    assert r.returncode == 2
    assert _error_line(r.stderr) == (f"traceviz: error: {link}: a dangling symbolic link "
                                     f"(to {tmp_path}/nowhere/x.json); remove it or choose "
                                     "another path")
    tables = tmp_path / "tables"
    tables.symlink_to(tmp_path / "gone")
    r = _tv("analyze", str(SAMPLES / "cell_torch"), "--export", str(tables))
    assert r.returncode == 2
    assert _error_line(r.stderr) == (f"traceviz: error: {tables}: a dangling symbolic link "
                                     f"(to {tmp_path}/gone); remove it or choose another "
                                     "folder")
    run = tmp_path / "run"
    run.symlink_to(tmp_path / "gone")
    r = _tv("capture", "--out", str(run), "--", "python", "train.py", cwd=tmp_path)
    assert r.returncode == 2
    assert _error_line(r.stderr) == (f"traceviz: error: {run}: a dangling symbolic link "
                                     f"(to {tmp_path}/gone); remove it or choose another "
                                     "folder")
    assert run.is_symlink() and not (tmp_path / "gone").exists()


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


@pytest.mark.capture
@pytest.mark.parametrize("tmpdir_too", [False, True], ids=["run", "run-and-tmpdir"])
def test_a_capture_onto_a_full_disk_publishes_nothing(work, tmpdir_too):
    """The run does not fit: exit 2, one line about the disk, nothing left on it; with
    ``$TMPDIR`` there too, where torch.profiler used to write its JSON, no traceback of
    the profiler's half-written file (``EOFError``, ``JSONDecodeError``)."""
    needs("torch")
    with _tmpfs(work / "disk", "24k") as disk:
        env = dict(os.environ)
        if tmpdir_too:
            (disk / "tmp").mkdir()
            env["TMPDIR"] = str(disk / "tmp")
        r = _tv("capture", "--out", str(disk / "run"), "--", "python", "train.py",
                cwd=work, env=env)
        assert r.returncode == 2, r.stderr
        line = _error_line(r.stderr)
        assert str(disk / "run") in line
        assert "No space left" in line or "is full" in line, line
        assert "Failed to write" not in r.stderr  # Kineto's own log line: said once, above
        left = sorted(p.name for p in disk.iterdir())
        assert left == (["tmp"] if tmpdir_too else [])


@pytest.mark.shared(DLRM)
def test_the_next_import_removes_a_killed_import_s_staging(tmp_path):
    """What a SIGKILLed import leaves in its dataset (a staging folder with some ranks,
    its marker written or not yet) goes with the next import; a folder of the user's
    named like one stays."""
    ds = tmp_path / "ds"
    r = _tv("import", str(shared(DLRM)), "-o", str(ds))
    assert r.returncode == 0, r.stderr
    marked, unmarked = (ds / f".import-{uuid.uuid4().hex}" for _ in range(2))
    for stage in (marked, unmarked):
        shutil.copytree(ds / "rank=0", stage / "rank=0")
    (marked / ".traceviz-import").write_text(marked.name.removeprefix(".import-"))
    users = ds / ".import-notes"
    users.mkdir()
    (users / "keep.txt").write_text("mine\n")
    r = _tv("import", str(DLRM), "-o", str(ds), "--force")
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in ds.glob(".import-*")) == [".import-notes"]
    assert (users / "keep.txt").read_text() == "mine\n"
