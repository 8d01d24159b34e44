"""Bad input ends in one clear line and a non-zero exit; nothing partial is left behind."""

from __future__ import annotations

import gzip
import subprocess
import sys

import pytest

from tests.conftest import KINETO, shared
from traceviz.cli import main

ALEXNET = KINETO / "a100_alexnet.json.gz"


def _bad_files(tmp_path):
    raw = gzip.decompress(shared(ALEXNET).read_bytes())
    files = {
        "truncated gzip": ALEXNET.read_bytes()[: len(ALEXNET.read_bytes()) // 2],
        "truncated json": raw[: len(raw) * 2 // 3],
        "truncated json.gz": gzip.compress(raw[: len(raw) // 2]),
        "empty": b"",
        "whitespace": b"   \n",
        "json not a trace": b'{"hello": [1, 2, 3]}',
        "json list of numbers": b"[1, 2, 3]",
        "no events": b'{"traceEvents": []}',
        "only metadata events": b'{"traceEvents": [{"ph": "M", "name": "process_name", '
                                b'"pid": 1, "args": {"name": "x"}}]}',
        "wrong field type": b'{"traceEvents": [{"ph": "X", "cat": "kernel", "name": 5, '
                            b'"ts": 1, "dur": 2, "pid": 0, "tid": 7}]}',
        "binary junk": bytes(range(256)) * 4,
        "not closed": b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", '
                      b'"ts": 1, "dur": 2, "pid": 1, "tid": 1}',
    }
    paths = {}
    for label, data in files.items():
        p = tmp_path / (label.replace(" ", "_") + (".json.gz" if "gzip" in label else ".json"))
        p.write_bytes(data)
        paths[label] = p
    return paths


@pytest.mark.parametrize("command", ["import", "analyze"])
def test_bad_files_fail_cleanly(tmp_path, capsys, command):
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    for label, path in _bad_files(tmp_path).items():
        argv = [command, str(path)]
        if command == "import":
            argv += ["-o", str(out_dir / "t.parquet")]
        code = main(argv)
        err = capsys.readouterr().err
        assert code == 2, label
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("traceviz: error:"), (label, err)
        assert "Traceback" not in err
        assert list(out_dir.iterdir()) == [], label  # no partial output


def test_directory_missing_and_unreadable(tmp_path, capsys, monkeypatch):
    assert main(["analyze", str(tmp_path)]) == 2
    assert "no trace files in this folder" in capsys.readouterr().err
    assert main(["analyze", str(tmp_path / "nope.json")]) == 2
    assert "no such file" in capsys.readouterr().err
    locked = tmp_path / "locked.json"
    locked.write_bytes(gzip.decompress(shared(ALEXNET).read_bytes()))
    # tests may run as root, where chmod 000 does not stop reading: ask os.access instead
    monkeypatch.setattr("traceviz.files.fileio.os.access", lambda path, mode: False)
    assert main(["analyze", str(locked)]) == 2
    assert "permission denied" in capsys.readouterr().err


def test_unknown_fields_are_ignored(tmp_path, capsys):
    p = tmp_path / "extra.json"
    p.write_bytes(b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", '
                  b'"ts": 1.5, "dur": 2.25, "pid": 1, "tid": 1, "brand_new_field": {"a": [1]},'
                  b' "args": {"also_new": "x"}}], "someOtherKey": 1}')
    assert main(["analyze", str(p), "--json"]) == 0
    import json
    d = json.loads(capsys.readouterr().out)
    assert d["kernels"]["count"] == 1 and d["kernels"]["total_ns"] == 2250


def test_bad_parquet(tmp_path, capsys):
    p = tmp_path / "x.parquet"
    import pandas as pd
    pd.DataFrame({"a": [1]}).to_parquet(p)
    assert main(["analyze", str(p)]) == 2
    assert "not written by traceviz" in capsys.readouterr().err
    p.write_bytes(b"PAR1 this is not parquet")
    assert main(["analyze", str(p)]) == 2
    assert "Parquet" in capsys.readouterr().err


def test_console_script_prints_no_traceback(tmp_path):
    bad = tmp_path / "bad.json.gz"
    bad.write_bytes(shared(ALEXNET).read_bytes()[:500])
    r = subprocess.run([sys.executable, "-m", "traceviz", "analyze", str(bad)],
                       capture_output=True, text=True)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "truncated gzip" in r.stderr
    assert "Traceback" not in r.stderr


def _fill_limit() -> None:
    """A child whose files cannot grow past 64 KiB (writes then fail with EFBIG, as on a
    full disk, rather than killing the process with SIGXFSZ)."""
    import resource
    import signal

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (64 << 10, 64 << 10))


@pytest.mark.parametrize("disk", ["tmpfs", "file size limit"])
def test_a_full_disk_leaves_no_folder_behind(tmp_path, disk):
    """``--export`` and ``--plot`` into folders that do not exist yet, on a disk that fills
    up: one line naming the file, exit 2, and the folders the run created are gone (a
    folder that was there before stays)."""
    root = tmp_path / "disk"
    root.mkdir()
    limit = None
    if disk == "tmpfs":
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=96k", "tmpfs", str(root)],
                           capture_output=True)
        if r.returncode:
            pytest.skip("this machine does not let a test mount a tmpfs (the file size "
                        "limit case runs instead)")
    else:
        limit = _fill_limit
    try:
        (root / "kept").mkdir()
        r = subprocess.run([sys.executable, "-m", "traceviz", "analyze", str(shared(ALEXNET)),
                            "--export", str(root / "new" / "exports"),
                            "--plot", str(root / "kept" / "plots")],
                           capture_output=True, text=True, preexec_fn=limit)
        assert r.returncode == 2, r.stderr
        assert r.stderr.count("\n") == 1 and "cannot write" in r.stderr
        assert "Traceback" not in r.stderr
        assert sorted(p.name for p in root.iterdir()) == ["kept"]
        assert not any((root / "kept").iterdir())
    finally:
        if disk == "tmpfs":
            subprocess.run(["umount", str(root)], check=True)


def _as_user(cmd: list[str]) -> list[str]:
    """``cmd`` under the file permissions an ordinary user has: as root, with the
    capabilities that override them dropped (``setpriv``); otherwise as it is."""
    import os
    import shutil

    if os.geteuid() != 0:
        return cmd
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("root without setpriv: file permissions cannot be enforced here")
    return [setpriv, "--bounding-set=-dac_override,-dac_read_search", "--inh-caps=-all",
            *cmd]


def test_a_trace_in_a_folder_that_cannot_be_listed(tmp_path):
    """A readable trace in a folder without read permission (execute only) is read, by
    its name; the folder itself, asked for as a folder of traces, is one line."""
    import shutil

    folder = tmp_path / "locked"
    folder.mkdir()
    shutil.copy(shared(ALEXNET), folder / "t.json.gz")
    folder.chmod(0o111)
    try:
        ok = subprocess.run(_as_user([sys.executable, "-m", "traceviz", "analyze",
                                      str(folder / "t.json.gz"), "--json"]),
                            capture_output=True, text=True)
        listed = subprocess.run(_as_user(["ls", str(folder)]), capture_output=True)
        bad = subprocess.run(_as_user([sys.executable, "-c", "import sys, traceviz\n"
                                       "try:\n    traceviz.ranks(sys.argv[1])\n"
                                       "except traceviz.TraceVizError as e:\n    print(e)\n",
                                       str(folder)]), capture_output=True, text=True)
    finally:
        folder.chmod(0o755)
    assert listed.returncode != 0, "the folder could be listed: permissions not enforced"
    assert ok.returncode == 0 and ok.stderr == "", ok.stderr
    assert '"kernels"' in ok.stdout
    assert bad.returncode == 0, bad.stderr
    assert bad.stdout.strip() == f"{folder}: permission denied (the folder cannot be listed; " \
                                 "a trace file in it can still be named)"
