"""Real Nsight Systems captures on this CPU machine (nsys from Debian; .ci/run installs it)."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys

import pytest

from tests.conftest import missing, needs

needs("torch")
pytestmark = pytest.mark.capture  # every test here runs real captures
if shutil.which("nsys") is None:
    missing("Nsight Systems (nsys) is not installed; .ci/run installs it")

from traceviz.analyses import summarize  # noqa: E402
from traceviz.cli import main  # noqa: E402
from traceviz.parsers import detect_format, load  # noqa: E402
from traceviz.parsers.nsys.export import export_sqlite, import_qdstrm  # noqa: E402
from traceviz.trace import Trace  # noqa: E402

TINY = ["--preset", "ptb_lm", "--batch", "4", "--seq", "5", "--hidden", "16", "--layers", "1",
        "--vocab", "50", "--embed", "8", "--warmup", "1", "--steps", "3",
        "--profile-steps", "2", "--device", "cpu"]
RANGES = ("SELECT COALESCE(n.text, s.value) t, count(*) FROM NVTX_EVENTS n "
          "LEFT JOIN StringIds s ON s.id = n.textId WHERE n.eventType = 59 "
          "AND n.end IS NOT NULL GROUP BY 1")


@pytest.fixture(scope="module")
def nsys_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("nsys") / "run"
    code = main(["capture", "--model", "cudnn_torch", "--profiler", "nsys", "--mode", "train",
                 *TINY, "--out", str(out)])
    assert code == 0, (out / "runner.log").read_text() if (out / "runner.log").exists() else ""
    return out


def test_capture_keeps_report_and_export(nsys_run):
    names = {p.name for p in nsys_run.iterdir()}
    assert {"report.nsys-rep", "report.sqlite", "trace.parquet", "bench.json",
            "runner.log"} <= names
    assert "report.qdstrm" not in names and "trace.pt.trace.json.gz" not in names


def test_runner_ranges_are_in_the_export(nsys_run):
    db = sqlite3.connect(nsys_run / "report.sqlite")
    ranges: dict[str, int] = {}
    for text, count in db.execute(RANGES).fetchall():  # an op range: "aten::mm, sizes = .."
        name = text.split(", sizes = ")[0]
        ranges[name] = ranges.get(name, 0) + count
    # NVTX step markers around the profiled steps only (numbered like ProfilerStep#)
    assert {k: v for k, v in ranges.items() if k.startswith("step ")} == {"step 2": 1,
                                                                         "step 3": 1}
    # phase ranges in every batch: warm-up (at least 1, until settled) + 3 timed + 2 + 2
    warm = json.loads((nsys_run / "bench.json").read_text())["warmup_batches"]
    assert warm >= 1
    assert ranges["forward"] == ranges["backward"] == ranges["optimizer"] == warm + 7
    aten = sum(v for k, v in ranges.items() if k.startswith("aten::"))
    assert aten > 0 and ranges.get("aten::mkldnn_rnn_layer", 0) == 2
    assert not any(k.startswith("profiler::") for k in ranges)

    trace = Trace.load(nsys_run / "trace.parquet")
    ev = trace.events
    assert trace.meta["profiler"] == "Nsight Systems"
    assert trace.meta["runner"]["profiler"] == "nsys"
    assert (ev["kind"] == "step").sum() == 2
    assert (ev["kind"] == "op").sum() == aten
    assert (ev["name"].astype(str) == "forward").sum() == warm + 7
    s = summarize(trace)
    assert s.cpu_trace and s.steps == 2
    rnn = s.kernels[s.kernels["name"] == "aten::mkldnn_rnn_layer"]
    assert int(rnn["count"].iloc[0]) == 2  # one per profiled step (forward)


def test_same_report_in_every_container(nsys_run, tmp_path):
    """.nsys-rep (exported on the fly), the 2022.x single-file Arrow export, SQLite."""
    ref = load(nsys_run / "report.sqlite").events
    arrow = tmp_path / "report.arrow"
    done = subprocess.run(["nsys", "export", "--type", "arrow", "--output", str(arrow),
                           str(nsys_run / "report.nsys-rep")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert detect_format(arrow) == "nsys-arrow"
    assert detect_format(nsys_run / "report.nsys-rep") == "nsys-rep"
    for other in (load(arrow).events, load(nsys_run / "report.nsys-rep").events):
        assert len(other) == len(ref)
        assert list(other["name"].astype(str)) == list(ref["name"].astype(str))
        assert other["ts_ns"].equals(ref["ts_ns"]) and other["dur_ns"].equals(ref["dur_ns"])


def test_package_bindings_are_recorded(tmp_path):
    """The runner's NVTX route, under nsys, alone: every pushed range is in the export."""
    script = tmp_path / "ranges.py"
    script.write_text(
        "from traceviz.runners.nvtx_ranges import provider\n"
        "push, pop = provider(cuda=False)\n"
        "for i in range(5):\n"
        "    push(f'step {i}'); push('inner'); pop(); pop()\n")
    rep = tmp_path / "r"
    subprocess.run(["nsys", "profile", "--trace=nvtx", "--sample=none", "--cpuctxsw=none",
                    "--output", str(rep), sys.executable, str(script)], check=True,
                   capture_output=True)
    report = rep.with_suffix(".nsys-rep")
    if not report.is_file():
        report = import_qdstrm(rep.with_suffix(".qdstrm"), shutil.which("nsys"))
    db = sqlite3.connect(export_sqlite(report, tmp_path / "r.sqlite"))
    ranges = dict(db.execute(RANGES).fetchall())
    assert ranges == {**{f"step {i}": 1 for i in range(5)}, "inner": 5}


def test_op_ranges_carry_shapes_for_the_flops(nsys_run):
    """The runner's op ranges carry their input shapes as emit_nvtx(record_shapes=True)
    writes them: FLOPs per op from the NVTX text, no bytes (NVTX records no dtypes)."""
    db = sqlite3.connect(nsys_run / "report.sqlite")
    texts = [t for t, _ in db.execute(RANGES).fetchall()
             if t.startswith("aten::mkldnn_rnn_layer,")]
    assert texts
    dims = json.loads(texts[0].split(", sizes = ")[1])
    x, w_ih, w_hh = dims[0], dims[1], dims[2]
    per_call = 2 * x[0] * x[1] * (w_ih[0] * w_ih[1] + w_hh[0] * w_hh[1])
    assert per_call == 2 * 5 * 4 * 64 * (8 + 16)  # T=5, B=4, 4H=64, I=8, H=16
    e = summarize(Trace.load(nsys_run / "trace.parquet"), with_efficiency=True).efficiency
    rnn = e.groups[e.groups["op"] == "aten::mkldnn_rnn_layer"]
    assert int(rnn["flops"].sum()) == per_call * int(rnn["calls"].sum())
    assert rnn["gbps"].isna().all() and rnn["bound"].isna().all()
    assert e.bytes is None and e.flops > 0  # no dtypes: bytes unknown, not 0


def test_user_script_under_nsys(tmp_path):
    """`capture --profiler nsys -- python SCRIPT`: step ranges around the active steps
    (the script's own step numbers), op ranges inside them, the script's exit status."""
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "examples" / "lstm_train.py"
    out = tmp_path / "run"
    r = subprocess.run([sys.executable, "-m", "traceviz", "capture", "--profiler", "nsys",
                        "--warmup", "2", "--profile-steps", "2", "--out", str(out), "--",
                        str(script), "--steps", "7"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "trained 7 steps" in r.stdout
    db = sqlite3.connect(out / "report.sqlite")
    ranges: dict[str, int] = {}
    for text, count in db.execute(RANGES).fetchall():
        name = text.split(", sizes = ")[0]
        ranges[name] = ranges.get(name, 0) + count
    assert {k: v for k, v in ranges.items() if k.startswith("step ")} == {"step 3": 1,
                                                                         "step 4": 1}
    assert ranges.get("aten::mm", 0) > 0  # op ranges inside the active steps
    trace = Trace.load(out / "trace.parquet")
    assert trace.meta["profiler"] == "Nsight Systems"
    steps = trace.events[trace.events["kind"] == "step"]
    assert sorted(steps["name"].astype(str)) == ["step 3", "step 4"]
