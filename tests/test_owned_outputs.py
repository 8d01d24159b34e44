"""Nothing lost, nothing left running: an output folder is traceviz's only by its
marker, imports into one dataset exclude each other and readers see one dataset, dataset
paths are literal, a killed capture leaves no process and nothing that reads as a run, a
full disk leaves no partial report or dataset. Each case runs real ``python -m traceviz``
processes on real traces and checks the exit code, the one line, and that nothing already
written changed (checksums)."""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.conftest import ROOT, SHARED_TRACES, needs, shared
from tests.test_faults import small_disk  # noqa: F401 (a fixture)

TRACEVIZ = [sys.executable, "-m", "traceviz"]
DLRM = SHARED_TRACES / "foreign" / "kineto" / "h3_param_dlrm_8rank"
SAMPLES = ROOT / "sample_traces"


def _tv(*args: str, timeout: float = 300, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([*TRACEVIZ, *args], capture_output=True, text=True,
                          timeout=timeout, **kw)


def _one_line(r: subprocess.CompletedProcess) -> str:
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("traceviz: error:"), r.stderr
    assert "Traceback" not in r.stderr
    return lines[0]


def _sums(root: Path) -> dict[str, str]:
    """Every file under ``root`` (symbolic links as links) and its SHA-256."""
    out = {}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        if p.is_symlink():
            out[rel] = "-> " + os.readlink(p)
        elif p.is_file():
            out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def _raw_kernels(folder: Path) -> list[int]:
    """Kernel events per rank file, from the raw JSON, in file-name order (the ranks'
    numbers are in their names: worker0 ... worker7)."""
    counts = []
    for f in sorted(folder.glob("*.json.gz")):
        with gzip.open(f, "rt") as fh:
            counts.append(sum(1 for e in json.load(fh)["traceEvents"]
                              if e.get("cat") == "kernel"))
    return counts


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    ds = tmp_path_factory.mktemp("made") / "ds"
    r = _tv("import", str(shared(DLRM)), "-o", str(ds))
    assert r.returncode == 0, r.stderr
    return ds


def test_a_folder_without_the_marker_is_refused_and_kept(tmp_path):
    out = tmp_path / "out"
    (out / "rank=5").mkdir(parents=True)
    (out / "rank=5" / "notes.txt").write_text("the user's notes\n")
    before = _sums(out)
    r = _tv("import", str(shared(DLRM)), "-o", str(out))
    assert r.returncode == 2
    assert "not a traceviz dataset" in _one_line(r) and str(out) in r.stderr
    # --force writes beside what is there, and replaces nothing traceviz did not write
    r = _tv("import", str(DLRM), "-o", str(out), "--force")
    assert r.returncode == 2
    assert _one_line(r) == (f"traceviz: error: {out}/rank=5: holds files traceviz did not "
                            "write; move them away to import here")
    assert _sums(out) == before  # not even a lock file


def test_force_writes_beside_the_user_s_files(dataset, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "README.md").write_text("what this folder is\n")
    (out / "later").mkdir()
    (out / "later" / "a.json").write_text("{}")
    before = _sums(out)
    r = _tv("import", str(shared(DLRM)), "-o", str(out), "--force")
    assert r.returncode == 0, r.stderr
    after = _sums(out)
    assert {k: after[k] for k in before} == before
    meta = json.loads((out / "_traceviz.json").read_text())
    assert [meta["ranks"][str(k)]["file"] for k in range(8)] == sorted(
        p.name for p in DLRM.iterdir())
    # a dataset of traceviz's: replaced with --force, the user's files again untouched
    r = _tv("import", str(DLRM), "-o", str(out), "--force")
    assert r.returncode == 0, r.stderr
    assert {k: v for k, v in _sums(out).items() if k in before} == before


def test_a_symlinked_rank_folder_is_one_line_naming_it(dataset, tmp_path):
    ds = tmp_path / "ds"
    shutil.copytree(dataset, ds)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("not traceviz's\n")
    shutil.rmtree(ds / "rank=3")
    (ds / "rank=3").symlink_to(elsewhere)
    before, kept = _sums(ds), _sums(elsewhere)
    r = _tv("import", str(shared(DLRM)), "-o", str(ds), "--force")
    assert r.returncode == 2
    line = _one_line(r)
    assert f"{ds}/rank=3: a symbolic link" in line and "rmtree" not in line
    assert _sums(ds) == before and _sums(elsewhere) == kept


def test_dataset_paths_are_taken_literally(dataset, tmp_path):
    """A dataset named ``ds?`` beside ``ds1`` and ``ds2`` reads itself only."""
    three = tmp_path / "three"
    three.mkdir()
    for f in sorted(shared(DLRM).iterdir())[:3]:
        shutil.copy(f, three / f.name)
    for name, src in (("ds1", DLRM), ("ds2", DLRM), ("ds?", three), ("d[s]", three)):
        r = _tv("import", str(src), "-o", str(tmp_path / name))
        assert r.returncode == 0, r.stderr
    want = _raw_kernels(three)
    assert len(want) == 3 and sum(want) > 0
    for name in ("ds?", "d[s]"):
        r = _tv("analyze", str(tmp_path / name), "--json", "--top", "1000")
        assert r.returncode == 0, r.stderr
        doc = json.loads(r.stdout)
        assert [row["kernels"]["count"] for row in doc["ranks"]] == want
        assert sum(k["count"] for k in doc["top_kernels"]) == sum(want)


def test_two_imports_at_once_one_wins_one_is_refused(tmp_path):
    out = tmp_path / "ds"
    procs = [subprocess.Popen([*TRACEVIZ, "import", str(shared(DLRM)), "-o", str(out)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    results = [p.communicate(timeout=300) for p in procs]
    assert sorted(p.returncode for p in procs) == [0, 2], results
    loser = next(err for p, (_, err) in zip(procs, results, strict=True) if p.returncode == 2)
    lines = loser.strip().splitlines()
    assert len(lines) == 1, loser
    assert (f"another import into {out} is running" in lines[0]
            or "already exists" in lines[0] or "a traceviz dataset already" in lines[0])
    r = _tv("analyze", str(out), "--json")
    assert r.returncode == 0, r.stderr
    assert [row["kernels"]["count"] for row in json.loads(r.stdout)["ranks"]] \
        == _raw_kernels(DLRM)
    assert not list(out.glob(".import-*"))


def test_readers_during_import_force_see_one_dataset(dataset, tmp_path):
    """``analyze`` while imports of two different rank folders replace the dataset in
    turn: every read is the whole of one of them."""
    three = tmp_path / "three"
    three.mkdir()
    for f in sorted(shared(DLRM).iterdir())[:3]:
        shutil.copy(f, three / f.name)
    ds = tmp_path / "ds"
    shutil.copytree(dataset, ds)
    answers = {tuple(_raw_kernels(DLRM)), tuple(_raw_kernels(three))}
    writer = subprocess.Popen(
        ["bash", "-c", " ; ".join(
            f"{sys.executable} -m traceviz import {src} -o {ds} --force"
            for src in (three, DLRM, three, DLRM, three))],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seen = []
    while writer.poll() is None or not seen:
        r = _tv("analyze", str(ds), "--json")
        assert r.returncode == 0, r.stderr
        seen.append(tuple(row["kernels"]["count"] for row in json.loads(r.stdout)["ranks"]))
    assert writer.wait() == 0, writer.stderr.read()
    assert set(seen) <= answers, seen


@pytest.fixture
def mib_disk(tmp_path):
    """A 1 MiB tmpfs (needs root and mount rights; skipped otherwise)."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a small tmpfs needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)],
                          capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    yield mnt
    subprocess.run(["umount", str(mnt)], check=False)


def test_disk_full_import_names_the_dataset_and_leaves_no_stage(dataset, mib_disk):
    ds = mib_disk / "ds"
    shutil.copytree(dataset, ds, ignore=shutil.ignore_patterns(".traceviz-*"))
    with open(mib_disk / "fill", "wb", buffering=0) as f, contextlib.suppress(OSError):
        while True:
            f.write(b"\0" * 4096)
            f.flush()
    before = _sums(ds)
    r = _tv("import", str(shared(DLRM)), "-o", str(ds), "--force")
    assert r.returncode == 2
    line = _one_line(r)
    assert str(ds) in line and "No space left" in line
    assert not list(ds.glob(".import-*"))
    assert {k: v for k, v in _sums(ds).items() if not k.startswith(".traceviz-")} == before


def test_disk_full_report_leaves_neither_the_report_nor_its_charts(small_disk):  # noqa: F811
    runs = [SAMPLES / "cpu" / "cell_torch", SAMPLES / "cpu" / "fused_torch",
            SAMPLES / "cpu_sweep"]
    (small_disk / "old.md").write_text("an earlier report\n")
    before = _sums(small_disk)
    r = _tv("report", *map(str, runs), "-o", str(small_disk / "r.md"))
    assert r.returncode == 2
    line = _one_line(r)
    assert str(small_disk / "r_files") in line and "No space left" in line
    assert _sums(small_disk) == before
    assert sorted(p.name for p in small_disk.iterdir()) == ["old.md"]


# -- captures -----------------------------------------------------------------------------
def _tagged(tag: str) -> list[int]:
    """The processes carrying ``tag`` in their environment (capture, runner, script)."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if f"TRACEVIZ_TEST_TAG={tag}".encode() in (proc / "environ").read_bytes():
                    found.append(int(proc.name))
            except OSError:
                continue
    return found


def _runner_runs(tag: str) -> bool:
    """Whether one of the processes carrying ``tag`` is a capture's runner (``-m
    traceviz.runners.X``; not a probe that imports it)."""
    for pid in _tagged(tag):
        try:
            if b"-m\0traceviz.runners." in Path(f"/proc/{pid}/cmdline").read_bytes():
                return True
        except OSError:
            continue
    return False


def _gone_within(tag: str, seconds: float) -> list[int]:
    deadline = time.monotonic() + seconds
    while _tagged(tag) and time.monotonic() < deadline:
        time.sleep(0.1)
    return _tagged(tag)


SLEEPER = """import time
for _ in range(3000):
    time.sleep(0.1)
"""
TINY = ["--preset", "ptb_lm", "--batch", "4", "--seq", "5", "--hidden", "16", "--layers", "2",
        "--vocab", "50", "--embed", "8", "--warmup", "1", "--steps", "3",
        "--profile-steps", "2", "--device", "cpu"]


def _start_capture(tmp_path: Path, args: list[str], tag: str) -> subprocess.Popen:
    proc = subprocess.Popen([*TRACEVIZ, "capture", "--out", str(tmp_path / "run"), *args],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "TRACEVIZ_TEST_TAG": tag})
    # until the runner runs beside capture (and its watcher: traceviz/capture/watcher.py;
    # a count of processes would take a probe of the interpreter for the runner)
    deadline = time.monotonic() + 120
    while not _runner_runs(tag) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _runner_runs(tag) and proc.poll() is None
    return proc


def _nothing_reads_as_a_run(tmp_path: Path) -> None:
    run = tmp_path / "run"
    assert not run.exists()
    r = _tv("analyze", str(run))
    assert r.returncode == 2 and "no such file" in _one_line(r)


@pytest.mark.capture
@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc (Linux)")
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_a_killed_script_capture_leaves_no_process_and_no_run(tmp_path, sig):
    needs("torch")
    (tmp_path / "sleeper.py").write_text(SLEEPER)
    tag = uuid.uuid4().hex
    proc = _start_capture(tmp_path, ["--", "python", "sleeper.py"], tag)
    time.sleep(1.0)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == (-9 if sig == signal.SIGKILL else 143), err
    assert _gone_within(tag, 5.0) == []
    _nothing_reads_as_a_run(tmp_path)
    if sig == signal.SIGTERM:
        assert err.strip().splitlines()[-1] == "traceviz: terminated"
        assert [p.name for p in tmp_path.iterdir()] == ["sleeper.py"]
        return
    # SIGKILL leaves the hidden staging folder; the same command again is not refused
    (tmp_path / "sleeper.py").write_text("import torch\nprint(torch.ones(3).sum())\n")
    r = _tv("capture", "--out", "run", "--", "python", "sleeper.py", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "run" / "trace.parquet").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run", "sleeper.py"]


@pytest.mark.capture
@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc (Linux)")
def test_an_interrupted_model_capture_leaves_no_process_and_no_run(tmp_path):
    needs("torch")
    tag = uuid.uuid4().hex
    proc = _start_capture(tmp_path, ["--model", "fine_torch", *TINY], tag)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert _gone_within(tag, 5.0) == []
    _nothing_reads_as_a_run(tmp_path)
    assert list(tmp_path.iterdir()) == []
    r = _tv("capture", "--out", "run", "--model", "fine_torch", *TINY, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "run" / "trace.parquet").is_file()
