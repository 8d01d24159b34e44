"""``analyze --perfetto``: the Chrome trace-event file, re-read with the standard JSON
reader and checked against the trace table and the analyses it carries."""

from __future__ import annotations

import json
from collections import defaultdict

import numpy as np
import pytest

from tests.conftest import KINETO, ROOT, SHARED_TRACES, shared
from tests.handmade import row, trace
from traceviz.analyses.shown.perfetto_tracks import perfetto_tracks
from traceviz.analyses.summary.figures import summarize
from traceviz.cli import main
from traceviz.parsers import load
from traceviz.render.perfetto import TRACEVIZ, perfetto_json
from traceviz.table.schema import DEVICE_KINDS

CASES = [ROOT / "sample_traces" / "gpu" / "cudnn_torch-fp16" / "train",
         SHARED_TRACES / "nsys" / "h100_2gpu_window.sqlite",
         SHARED_TRACES / "xplane" / "tf24_bert_amp_gpu.xplane.pb.gz",
         KINETO / "a100_nccl.json.gz",
         ROOT / "sample_traces" / "cpu" / "jit_torch"]


def _tracks(events: list[dict]) -> dict[tuple, list[dict]]:
    out = defaultdict(list)
    for e in events:
        if e["ph"] == "X":
            out[(e["pid"], e["tid"])].append(e)
    return out


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.name if p.suffix else p.parent.name)
def test_every_row_arrives_and_the_tracks_hold(path):
    t = load(path)
    doc = json.loads(perfetto_json(t, perfetto_tracks(t)))
    events = doc["traceEvents"]
    base = doc["otherData"]["device_pid_base"]
    mine = base + TRACEVIZ
    ev = t.events
    assert base > ev["pid"].max()
    dev = ev[ev["kind"].isin(DEVICE_KINDS).to_numpy()]
    device_x = [e for e in events if e["ph"] == "X" and base <= e["pid"] < mine]
    assert len(device_x) == len(dev)
    assert sorted(round(e["dur"] * 1000) for e in device_x) == sorted(dev["dur_ns"].tolist())
    # no two rows of a device track overlap: a viewer would drop one
    for rows in _tracks(device_x).values():
        rows.sort(key=lambda e: e["ts"])
        assert all(b["ts"] >= a["ts"] + a["dur"] - 1e-3
                   for a, b in zip(rows, rows[1:], strict=False))
    host_x = [e for e in events if e["ph"] == "X" and e["pid"] < base]
    kinds = ["runtime", "op", "annotation", "step"]
    assert len(host_x) == int((ev["kind"].isin(kinds) & (ev["device"] < 0)
                               & (ev["pid"] >= 0)).sum())
    # host threads keep the names the profiler gave them, where it kept any (XSpace)
    named = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
             if e["ph"] == "M" and e["name"] == "thread_name" and e["pid"] < base}
    for key, name in (t.meta.get("thread_names") or {}).items():
        pid, tid = (int(x) for x in key.split(":"))
        assert named.get((pid, tid), name) == name
    if t.meta.get("source_format") == "xplane":
        assert "python3" in named.values()
    # casts and categories travel as arguments
    assert sum(e["args"]["cast"] for e in device_x) == int(dev["is_cast"].sum())
    assert {e["cat"] for e in device_x} == set(dev["category"].astype(str))
    # one arrow per row whose launch call is in the trace, from inside that call to the row
    s = {e["id"]: e for e in events if e["ph"] == "s"}
    f = {e["id"]: e for e in events if e["ph"] == "f"}
    assert s.keys() == f.keys()
    calls = ev[(ev["kind"] == "runtime") & (ev["launch_id"] >= 0)]["launch_id"].unique()
    assert len(f) == int(dev["launch_id"].isin(calls).sum())
    starts = {(e["pid"], e["tid"], e["ts"]) for e in device_x}
    assert all((e["pid"], e["tid"], e["ts"]) in starts and e["bp"] == "e" for e in f.values())
    summary = summarize(t)
    if t.is_cpu:
        assert not s and not any(e["ph"] == "C" for e in events)
        return
    # idle intervals by cause add up to analyze's split, device by device
    idle = defaultdict(float)
    for e in events:
        if e["ph"] == "X" and e["pid"] == mine and e["tid"] >= 10:
            idle[(e["tid"] - 10, e["name"])] += e["dur"]
    for d in summary.devices:
        if d.host_wait_ns is not None:
            assert idle[(d.device, "host wait")] == pytest.approx(d.host_wait_ns / 1e3, abs=1)
            assert idle[(d.device, "queued idle")] == pytest.approx(d.queued_idle_ns / 1e3,
                                                                   abs=1)
    depth = defaultdict(int)
    for e in events:
        if e["ph"] == "C":
            depth[e["pid"] - base] = max(depth[e["pid"] - base],
                                               e["args"]["launched, not started"])
    assert {d.device: d.queue_max for d in summary.devices if d.queue_max is not None} \
        .items() <= depth.items()
    steps = [e for e in events if e["ph"] == "X" and e["pid"] == mine and e["tid"] == 1]
    assert len(steps) == max(summary.steps, 1)


def test_overlapping_rows_of_a_stream_get_lanes():
    """Two kernels of one stream that overlap (as some profilers record them) and a third
    after both: the second moves to a lane of its own, nothing is dropped."""
    t = trace(row("kernel", "a", 0, 100), row("kernel", "b", 50, 100),
              row("kernel", "c", 200, 10))
    doc = json.loads(perfetto_json(t, perfetto_tracks(t)))
    base = doc["otherData"]["device_pid_base"]
    x = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["pid"] == base]
    lanes = {e["name"]: e["tid"] for e in x}
    assert lanes["a"] == lanes["c"] == 7 * 1000 and lanes["b"] == 7 * 1000 + 1
    names = [e["args"]["name"] for e in doc["traceEvents"]
             if e["ph"] == "M" and e["name"] == "thread_name" and e["pid"] == base]
    assert sorted(names) == ["stream 7", "stream 7 (overlapping rows, lane 1)"]


def test_the_command_writes_it_with_the_critical_path(tmp_path, capsys):
    out = tmp_path / "t.json"
    src = shared(KINETO / "a100_alexnet.json.gz")
    assert main(["analyze", str(src), "--perfetto", str(out), "--critical-path",
                 "[param|pytorch.model.alex_net|0|0|0|measure|forward]"]) == 0
    assert "wrote" in capsys.readouterr().err
    events = json.loads(out.read_text())["traceEvents"]
    on = [e for e in events if e["ph"] == "X" and e.get("args", {}).get("critical_path")]
    assert len(on) == 34  # the kernels HTA's path holds too (test_critical_path)
    assert main(["analyze", str(src), "--perfetto", str(out)]) == 2
    assert "already exists" in capsys.readouterr().err
    assert main(["analyze", str(src), "--perfetto", str(out), "--force"]) == 0
    assert not any(e.get("args", {}).get("critical_path") is not None
                   for e in json.loads(out.read_text())["traceEvents"])
    assert np.isfinite([e["ts"] for e in events if "ts" in e]).all()


def test_the_windows_are_found_once(tmp_path, monkeypatch):
    """``analyze --perfetto`` finds the trace's analysis windows once (the summary's), and
    ``perfetto_tracks`` given them draws the file it draws finding them itself."""
    from traceviz.analyses import timeline, work
    from traceviz.analyses.shown import perfetto_tracks as tracks_module
    from traceviz.analyses.summary import figures

    src = shared(KINETO / "a100_nccl.json.gz")
    t = load(src)
    alone = perfetto_json(t, perfetto_tracks(t))
    assert perfetto_json(t, perfetto_tracks(t, windows=work.analysis_windows(t))) == alone
    calls = []
    real = work.analysis_windows

    def counted(*a, **k):
        calls.append(1)
        return real(*a, **k)

    for module in (work, timeline, tracks_module, figures):
        monkeypatch.setattr(module, "analysis_windows", counted)
    out = tmp_path / "t.json"
    assert main(["analyze", str(src), "--perfetto", str(out), "--json"]) == 0
    assert len(calls) == 1
    assert out.read_text() == alone


def test_an_output_under_a_file_fails_before_any_work(tmp_path, capsys):
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    assert main(["analyze", str(shared(KINETO / "a100_alexnet.json.gz")), "--perfetto",
                 str(blocker / "sub" / "t.json")]) == 2
    out = capsys.readouterr()
    assert out.out == "" and "is a file, not a folder" in out.err
