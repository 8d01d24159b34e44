"""Verdicts that agree with each other and with the raw events: the critical path's
host/device split on an overlapped multi-stream trace, a step window longer than its
ProfilerStep, a graph's first-kernel delay, host-bound advice where the timed step has no
host time left, and a what-if scenario that serializes streams.

Every expected figure is computed here from the raw JSON with plain ``json`` and Python
loops, never from traceviz's output."""

from __future__ import annotations

import gzip
import json
import statistics

import pytest
from conftest import H200, ROOT, SHARED_TRACES, shared

from traceviz import load
from traceviz.units import fmt_ns

FOREIGN = SHARED_TRACES / "foreign" / "kineto"
DEEPSEEK = FOREIGN / "deepseek_v3_train.json"
H6 = FOREIGN / "h6_tracelens_mi300_vllm_hipgraph.json.gz"
DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
HOST_CATS = {"cuda_runtime", "cuda_driver"}


def _events(path) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        return [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]


def _union(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def _length(blocks, lo: int, hi: int) -> int:
    return sum(max(0, min(e, hi) - max(s, lo)) for s, e in blocks)


class Raw:
    """DeepSeek-V3's one step, from the raw JSON (times in ns from the step's start)."""

    def __init__(self) -> None:
        ev = _events(shared(DEEPSEEK))
        step = next(e for e in ev if e.get("cat") == "user_annotation"
                    and e["name"].startswith("ProfilerStep#"))
        t0 = step["ts"]
        self.mark = step["name"]
        self.mark_ns = step["dur"] * 1000

        def ns(t):
            return round((t - t0) * 1000)

        calls = {e["args"]["correlation"]: e for e in ev if e.get("cat") in HOST_CATS
                 and "correlation" in e.get("args", {})}
        dev = [e for e in ev if e.get("cat") in DEVICE_CATS]
        self.rows = [(ns(e["ts"]), ns(e["ts"] + e["dur"]), e["args"]["stream"]) for e in dev]
        # the kernels the step launched: their launch call lies inside ProfilerStep
        launched = [e for e in dev if (c := calls.get(e["args"]["correlation"]))
                    and t0 <= c["ts"] <= t0 + step["dur"]]
        self.end = max(ns(e["ts"] + e["dur"]) for e in launched)
        self.busy = _length(_union([(s, e) for s, e, _ in self.rows]), 0, self.end)
        self.streams = sorted({st for *_, st in self.rows})
        delays = [(e["ts"] - (c["ts"] + c["dur"])) * 1000 for e in dev
                  if (c := calls.get(e["args"]["correlation"])) and "LaunchKernel" in c["name"]]
        self.median_delay = statistics.median(max(0, d) for d in delays)
        # time with two or more streams busy at once: each stream's union, swept together
        marks = []
        for st in self.streams:
            for s, e in _union([(s, e) for s, e, x in self.rows if x == st]):
                marks += [(s, 1), (e, -1)]
        depth, last, self.multi = 0, 0, 0
        for t, d in sorted(marks, key=lambda m: (m[0], m[1])):  # closings first
            t = min(max(t, 0), self.end)
            if depth >= 2:
                self.multi += t - last
            depth, last = depth + d, t


@pytest.fixture(scope="module")
def raw() -> Raw:
    return Raw()


@pytest.fixture(scope="module")
def deepseek():
    return load(shared(DEEPSEEK))


def test_deepseek_is_device_bound_on_every_verdict(raw, deepseek):
    """Three streams, most of the busy time overlapped, kernels starting ~15 ms after their
    launch: the device sets the pace, and the critical path says so."""
    from traceviz.analyses.critical_path.path import critical_path

    assert len(raw.streams) == 3 and raw.multi / raw.busy > 0.8
    assert raw.median_delay > 10e6  # ns: the host ran far ahead of the device
    cp = critical_path(deepseek)
    s = cp.steps.iloc[0]
    length = int(s["length_ns"])
    assert abs(length - raw.end) <= 0.001 * raw.end  # the replay's step: the recorded one
    # the path's device part: the device's busy time in the step, its host part no more
    # than the time the device ran nothing (as replayed: within 0.1% of the step)
    assert abs(int(s["device_ns"]) - raw.busy) <= 0.001 * raw.end
    assert int(s["host_ns"]) <= raw.end - raw.busy + 0.001 * raw.end
    assert int(s["host_ns"]) < 0.01 * length  # was 81% of the path: the host chain
    assert max(("host", "launch", "device", "queue", "sync"),
               key=lambda p: int(s[f"{p}_ns"])) == "device"
    assert cp.kernels["on_path_ns"].sum() <= s["device_ns"]


def test_deepseek_step_window_says_why_it_is_longer(raw, deepseek, capsys):
    from traceviz.analyses.summary.figures import summarize
    from traceviz.cli import main

    d = summarize(deepseek).to_dict()
    assert d["span_ns"] == raw.end  # the window holds the work the step launched
    (w,) = d["step_windows"]
    assert (w["mark"], w["why"]) == (raw.mark, "device work")
    assert w["mark_length_ns"] == raw.mark_ns and w["length_ns"] == raw.end
    assert w["past_mark_ns"] == raw.end - raw.mark_ns
    assert main(["analyze", str(shared(DEEPSEEK)), "--width", "200"]) == 0
    out = capsys.readouterr().out
    line = (f"step 1's window runs {fmt_ns(raw.end)}, past {raw.mark}'s end at "
            f"{fmt_ns(raw.mark_ns)}: the kernels launched in the step ran until then")
    assert out.count(line) == 1


def test_drop_stream_sync_says_it_serializes_the_streams(raw, deepseek, capsys):
    from traceviz.analyses.whatif.engine import whatif
    from traceviz.cli import main

    s = whatif(deepseek, ("drop_stream_sync",)).scenario("drop_stream_sync")
    caveat = (f"serializes {len(raw.streams)} streams onto 1: {fmt_ns(raw.multi)} per step "
              "that ran on 2+ streams at once now runs one after another")
    assert s.caveat == caveat and s.saving_ns < 0
    assert main(["whatif", str(shared(DEEPSEEK)), "--scenario", "drop_stream_sync", "--brief",
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["scenarios"][0]["caveat"] == caveat
    assert main(["whatif", str(DEEPSEEK), "--scenario", "drop_stream_sync", "--brief",
                 "--width", "400"]) == 0
    assert caveat in capsys.readouterr().out
    # a scenario that leaves the streams alone says nothing of them
    assert whatif(deepseek, ("no_casts",)).scenario("no_casts").caveat == ""


def test_a_graphs_first_kernel_delay_is_not_launch_latency():
    """vLLM on an MI300X: one hipGraphLaunch runs 421 kernels; its first kernel starts
    6.4 ms after the call returned, the device's whole queue having started late (behind
    work the trace does not hold). That wait is queued work, not launch latency."""
    from traceviz.analyses.critical_path.path import critical_path

    ev = _events(shared(H6))
    (call,) = [e for e in ev if e["name"] == "hipGraphLaunch"]
    graph = [e for e in ev if e.get("cat") in DEVICE_CATS
             and e["args"].get("correlation") == call["args"]["correlation"]]
    assert len(graph) == 421
    delay = (min(e["ts"] for e in graph) - (call["ts"] + call["dur"])) * 1000
    assert 6e6 < delay < 7e6
    cp = critical_path(load(H6))
    t = cp.totals()
    assert t["launch"] <= 0.01 * t["length"]
    assert t["queue"] >= delay
    assert max(("host", "launch", "device", "queue", "sync"), key=t.get) == "device"


def _bench_median_ns(folder) -> float:
    bench = json.loads((folder / "bench.json").read_text())
    times = bench.get("batch_times_s") or bench.get("times_s")
    return statistics.median(times) * 1e9 if times else bench["median_s"] * 1e9


@pytest.mark.parametrize("run", ["compile_full_torch", "scan_jax"])
def test_no_host_bound_finding_where_the_timed_step_has_no_host_time(h200, run):
    """The profiled steps wait for the host, the timed ones (no profiler) hardly: the
    timed calibration leaves the host no time, and no host-bound finding is made."""
    from traceviz.analyses.advice.advising import Context, _advise

    folder = shared(H200 / run)
    t = load(folder)
    ctx = Context(t)
    assert ctx.timed_host_factor is not None and ctx.timed_host_factor <= 0.05
    assert ctx.summary.launch_bound_fraction >= 0.25  # profiled: the old trigger
    findings, _ = _advise(ctx)
    assert all(f.rule != "host_bound" for f in findings)


def test_compile_full_timed_step_is_mostly_device_work(h200):
    """compile_full's timed step against its kernels' busy time per ProfilerStep, from the
    raw trace and bench.json."""
    folder = shared(H200 / "compile_full_torch")
    ev = _events(folder / "trace.pt.trace.json.gz")
    steps = [e for e in ev if e.get("cat") == "user_annotation"
             and e["name"].startswith("ProfilerStep#")]
    dev = _union([(e["ts"] * 1000, (e["ts"] + e["dur"]) * 1000) for e in ev
                  if e.get("cat") in DEVICE_CATS])
    busy = sum(_length(dev, s["ts"] * 1000, (s["ts"] + s["dur"]) * 1000) for s in steps)
    timed = _bench_median_ns(folder)
    assert busy / len(steps) > 0.8 * timed
    from traceviz.analyses.advice.advising import advise

    findings, _ = advise(load(folder))
    assert findings[0].rule != "host_bound"


def test_a_cuda_graph_replay_has_no_launch_latency_on_its_path():
    """The H100 capture of the LSTM cell in CUDA graphs: each graph launch's first-kernel
    delay is queued work (or device time, where earlier work still ran)."""
    from traceviz.analyses.critical_path.path import critical_path

    t = load(ROOT / "sample_traces" / "gpu" / "graph_torch" / "train")
    graphs = t.launches()
    assert (graphs["population"] == "graph").sum() > 0
    totals = critical_path(t).totals()
    assert totals["launch"] == 0 and totals["queue"] > 0
