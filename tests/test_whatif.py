"""whatif: the identity replay reproduces every real GPU trace's window time within 5%,
scenarios change what they say they change (checked against the raw rows), and the
command's errors are one line."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from tests.conftest import ROOT, SHARED_TRACES, shared, shared_traces
from tests.handmade import row, trace
from traceviz import load
from traceviz.analyses.replay import graph as R
from traceviz.analyses.replay.measure import window_time
from traceviz.analyses.whatif.engine import whatif
from traceviz.analyses.whatif.scenarios import SCENARIOS, parse_scenario
from traceviz.cli import main
from traceviz.errors import UsageError
from traceviz.trace import Trace

GPU_TRACES = sorted(
    [p for p in shared_traces()
     if p.name not in ("cpu_only.json.gz", "a100_cupti_counters.json.gz")])
H100 = ROOT / "sample_traces" / "gpu"


@pytest.mark.parametrize("path", GPU_TRACES, ids=lambda p: p.name)
def test_identity_replay_within_5_percent(path):
    w = whatif(load(path), ())
    assert w.measured_ns > 0
    assert abs(w.replay_error) < 0.05, (w.measured_ns, w.replayed_ns)
    if w.steps:
        assert w.step_error_max < 0.05


def test_identity_replay_of_h100_captures():
    errors = {p.parent.parent.name + "/" + p.parent.name: whatif(load(p), ()).replay_error
              for p in sorted(H100.glob("*/*/trace.parquet"))}
    assert len(errors) == 36
    assert max(abs(v) for v in errors.values()) < 0.01, errors


def test_measured_is_the_summary_span():
    t = load(shared(SHARED_TRACES / "kineto" / "v100_diff_test.json.gz"))
    assert whatif(t, ()).measured_ns == t.summary()["span_ns"]


def _kernel_trace(rows: list[tuple], calls: list[tuple], steps=()) -> Trace:
    """rows: (name, ts, dur, stream, launch_id, category); calls: (name, ts, dur, tid,
    launch_id) on one process; steps: (ts, dur)."""
    ev = []
    for name, ts, dur, stream, lid, cat in rows:
        ev.append(dict(kind="kernel", name=name, ts_ns=ts, dur_ns=dur, pid=-1, tid=-1,
                       device=0, stream=stream, correlation=lid, step=-1, bytes=-1,
                       launch_api="cudaLaunchKernel", launch_id=lid, op="", category=cat,
                       is_cast=False))
    for name, ts, dur, tid, lid in calls:
        ev.append(dict(kind="runtime", name=name, ts_ns=ts, dur_ns=dur, pid=1, tid=tid,
                       device=-1, stream=-1, correlation=lid, step=-1, bytes=-1,
                       launch_api=None, launch_id=lid, op="", category=None, is_cast=False))
    for i, (ts, dur) in enumerate(steps):
        ev.append(dict(kind="step", name=f"ProfilerStep#{i}", ts_ns=ts, dur_ns=dur, pid=1,
                       tid=1, device=-1, stream=-1, correlation=-1, step=i, bytes=-1,
                       launch_api=None, launch_id=-1, op="", category=None, is_cast=False))
    df = pd.DataFrame(ev)
    calls_by_id = df[df["kind"] == "runtime"].set_index("launch_id")
    dev = df["kind"] == "kernel"
    df["launch_ts_ns"] = pd.array([calls_by_id["ts_ns"].get(i) if d else None
                                   for i, d in zip(df["launch_id"], dev, strict=True)], "Int64")
    df["launch_dur_ns"] = pd.array([calls_by_id["dur_ns"].get(i) if d else None
                                    for i, d in zip(df["launch_id"], dev, strict=True)], "Int64")
    df["launch_delay_ns"] = (df["ts_ns"] - df["launch_ts_ns"] - df["launch_dur_ns"]).clip(lower=0)
    df.loc[~dev, "launch_id"] = np.where(df.loc[~dev, "kind"] == "runtime",
                                         df.loc[~dev, "launch_id"], -1)
    return Trace(df, {"source_format": "handmade"})


def test_replay_by_hand():
    # three launches 10 µs apart on one thread, each 2 µs; kernels of 30 µs queue up on
    # one stream; then a cudaDeviceSynchronize that waits for the last one
    us = 1000
    calls = [("cudaLaunchKernel", 0, 2 * us, 1, 1), ("cudaLaunchKernel", 10 * us, 2 * us, 1, 2),
             ("cudaLaunchKernel", 20 * us, 2 * us, 1, 3),
             ("cudaDeviceSynchronize", 25 * us, 73 * us, 1, -1)]
    rows = [("k1", 3 * us, 30 * us, 7, 1, "elementwise"),
            ("k2", 34 * us, 30 * us, 7, 2, "elementwise"),
            ("k3", 65 * us, 30 * us, 7, 3, "gemm")]
    t = _kernel_trace(rows, calls)
    g = R.build(t)
    assert g.latency_ns == {0: 1 * us}          # k1: launched onto an idle stream
    assert g.queue_gap_ns == {0: 1 * us}        # k2, k3: 1 µs after the previous end
    sync = int(np.flatnonzero(g.h_await >= 0)[0])
    assert g.h_tail[sync] == 98 * us - 95 * us  # sync ends 3 µs after k3
    sol = R.solve(g)
    assert list(sol.d_start) == [3 * us, 34 * us, 65 * us]   # identity, exactly
    assert sol.h_end[sync] == 98 * us
    # gemm 2x faster: k3 lasts 15 µs, the sync returns 15 µs earlier
    fast, _ = SCENARIOS["gemm_speedup"].transform(g, 2.0)
    assert R.solve(fast).h_end[sync] == 83 * us
    # fusing k1..k2 (two elementwise kernels launched one after the other): one kernel of
    # max(30, 60 x 4/6) = 40 µs, k2's launch and the 8 µs before it gone
    fused, notes = SCENARIOS["fuse_pointwise"].transform(g, 0.0)
    s = R.solve(fused)
    assert fused.d_removed.tolist() == [False, True, False]
    assert s.d_end[0] - s.d_start[0] == 40 * us
    assert "k+2" in notes[1]


def test_a_dependency_cycle_is_reported_within_a_pass_per_node():
    # the hand trace above, with k1 made to wait for k3, which its stream runs after k1:
    # every pass pushes the three kernels later; no replay settles
    import dataclasses
    import re

    from traceviz.errors import InputError

    us = 1000
    calls = [("cudaLaunchKernel", 0, 2 * us, 1, 1), ("cudaLaunchKernel", 10 * us, 2 * us, 1, 2),
             ("cudaLaunchKernel", 20 * us, 2 * us, 1, 3)]
    rows = [("k1", 3 * us, 30 * us, 7, 1, "elementwise"),
            ("k2", 34 * us, 30 * us, 7, 2, "elementwise"),
            ("k3", 65 * us, 30 * us, 7, 3, "gemm")]
    g = R.build(_kernel_trace(rows, calls))
    assert R.solve(g).passes <= len(g.h_ts) + len(g.d_ts) + 2
    cyclic = dataclasses.replace(g, d_dep=np.array([2, -1, -1]),
                                 d_dep_lat=np.array([1 * us, 0, 0]))
    with pytest.raises(InputError, match="did not settle") as e:
        R.solve(cyclic)
    passes = int(re.search(r"in ([\d,]+) passes", str(e.value)).group(1).replace(",", ""))
    assert passes == len(g.h_ts) + len(g.d_ts) + 2  # not the 20,000 of a large trace


def test_gemm_speedup_on_a_cpu_trace_saves_half_the_gemm_time():
    t = load(ROOT / "sample_traces" / "cpu" / "naive8_torch" / "trace.parquet")
    w = whatif(t, ("gemm_speedup=2", "cuda_graphs", "fuse_pointwise"))
    s = w.scenario("gemm_speedup=2")
    work = t.kernels()
    gemm = work[work["category"].isin(["gemm", "rnn"]) & (work["step"] >= 0)]
    # one host thread, host-driven step windows: the chain shrinks by what its gemm ops
    # lose (integer division per op)
    expected = int((gemm["dur_ns"] - gemm["dur_ns"] // 2).sum())
    assert abs(s.saving_ns - expected) <= len(gemm)
    assert not w.scenario("cuda_graphs").applies
    assert "CPU trace" in w.scenario("fuse_pointwise").reason


def test_factor_one_is_the_identity():
    t = load(H100 / "cudnn_torch-bf16" / "train" / "trace.parquet")
    w = whatif(t, ("gemm_speedup=1", "host_speedup=1"))
    assert [s.saving_ns for s in w.scenarios] == [0, 0]


def test_no_casts_removes_every_cast_kernel():
    t = load(H100 / "cudnn_torch-bf16" / "train" / "trace.parquet")
    g = R.build(t)
    changed, _ = SCENARIOS["no_casts"].transform(g, 0.0)
    assert changed.d_removed.sum() == t.events["is_cast"][t.events["kind"] == "kernel"].sum()
    w = whatif(t, ("no_casts",))
    assert 0 < w.scenario("no_casts").saving_ns < w.replayed_ns
    assert not whatif(load(H100 / "cudnn_torch" / "train" / "trace.parquet"),
                      ("no_casts",)).scenario("no_casts").applies


@pytest.mark.parametrize(("before", "after", "scenario", "mode", "tolerance"), [
    ("fused_torch", "graph_torch", "cuda_graphs", "forward", 0.20),
    ("fused_torch", "graph_torch", "cuda_graphs", "train", 0.70),  # syncs stay: +43%
])
def test_predicted_against_measured_on_h100(before, after, scenario, mode, tolerance):
    """The GPU evidence docs/whatif.md tables: a scenario on one variant's capture against
    the capture of the variant that applies the optimization."""
    a = whatif(load(H100 / before / mode / "trace.parquet"), (scenario,))
    b = window_time(load(H100 / after / mode / "trace.parquet"))
    predicted = a.scenario(scenario).predicted_ns / a.steps
    measured = b.span_ns / len(b.per_step)
    assert predicted < a.measured_ns / a.steps  # it predicts a saving
    assert abs(predicted / measured - 1) < tolerance


def test_parse_scenario():
    assert parse_scenario("gemm_speedup=2.5") == ("gemm_speedup", 2.5)
    assert parse_scenario("no_casts") == ("no_casts", 0.0)
    for bad in ("gemm_speedup", "gemm_speedup=0", "gemm_speedup=x", "no_casts=2", "warp"):
        with pytest.raises(UsageError):
            parse_scenario(bad)


def test_cli_json_and_errors(tmp_path, capsys):
    path = shared(SHARED_TRACES / "kineto" / "a100_event_sync.json.gz")
    assert main(["whatif", str(path), "--json", "--scenario", "host_speedup=4"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) >= {"measured_ns", "replayed_ns", "scenarios", "model"}
    assert out["scenarios"][0]["name"] == "host_speedup=4"
    assert main(["whatif", str(path), "--scenario", "warp"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown scenario" in err
    empty = tmp_path / "empty.json"
    empty.write_text("")
    assert main(["whatif", str(empty)]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_device_rows_without_their_launch_calls():
    t = load(shared(SHARED_TRACES / "kineto" / "v100_diff_test.json.gz"))
    ev = t.events[t.events["kind"] != "runtime"].reset_index(drop=True)
    w = whatif(Trace(ev, dict(t.meta)))
    assert w.replay_error == 0  # every row starts where it was recorded
    for name in ("cuda_graphs", "fuse_pointwise"):
        assert "no launch call" in w.scenario(name).reason
    assert w.scenario("gemm_speedup=2").applies


def test_a_rank_folder_replays_every_rank(tmp_path, capsys):
    """A folder of rank traces is replayed rank by rank, its collectives joined (the
    figures: tests/test_comm.py)."""
    import shutil

    for k in (0, 1):
        shutil.copy(shared(SHARED_TRACES / "kineto" / f"ampere_sampled_rank{k}.json.gz"), tmp_path)
    assert main(["whatif", str(tmp_path), "--scenario", "cuda_graphs", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [r["rank"] for r in out["per_rank"]] == [0, 1] and out["collectives"] > 0
    assert out["replayed_ns"] == max(r["replayed_ns"] for r in out["per_rank"])


def test_whatif_brief_fits_one_screen(capsys):
    """--brief: the replay and one row per scenario, no assumptions: under 25 lines; the
    same savings as the full form."""
    from traceviz.cli import main

    path = ROOT / "sample_traces" / "gpu" / "cudnn_torch" / "train" / "trace.parquet"
    assert main(["whatif", str(path), "--brief", "--width", "120"]) == 0
    brief = capsys.readouterr().out
    assert main(["whatif", str(path), "--width", "120"]) == 0
    full = capsys.readouterr().out
    assert len(brief.splitlines()) < 25 < len(full.splitlines())
    assert "per thread and step" in full and "per thread and step" not in brief
    # never after a shown "\\x0a" (the escape a trace's own line break gets)
    assert "\\x0a" not in full
    saving = [ln.split()[2] for ln in full.splitlines() if ln.strip().startswith("cuda_graphs")]
    assert saving and saving[0] in brief


PLAIN = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻", "0123456789-")  # the notes' superscript numbers


def test_whatif_assumptions_are_footnotes(capsys):
    """Each scenario's row is one line with its notes' numbers; each assumption is
    printed once, below the table, after its number."""
    from traceviz import load
    from traceviz.analyses.whatif import whatif
    from traceviz.cli import main

    path = ROOT / "sample_traces" / "gpu" / "cudnn_torch" / "train" / "trace.parquet"
    w = whatif(load(path))
    assert main(["whatif", str(path), "--width", "120"]) == 0
    full = capsys.readouterr().out
    lines = [ln.rstrip() for ln in full.splitlines()]
    texts = list(dict.fromkeys(t for s in w.scenarios for t in (
        [*s.assumptions, *([s.caveat] if s.caveat else [])] if s.applies
        else [f"does not apply: {s.reason}"])))
    n = 0
    for s in w.scenarios:
        mine = [t for t in ([*s.assumptions, *([s.caveat] if s.caveat else [])]
                            if s.applies else [f"does not apply: {s.reason}"])]
        rows = [ln for ln in lines if ln.strip().startswith(s.name + " ")]
        assert len(rows) == 1
        want = {texts.index(t) + 1 for t in mine}
        marks = rows[0].split("   ")[-1].strip().translate(PLAIN)
        got = set()
        for part in marks.split(", "):
            lo, _, hi = part.partition("-")
            got |= set(range(int(lo), int(hi or lo) + 1))
        assert got == want, (s.name, marks)
        n = max(n, *want)
    assert n == len(texts) and n >= 8
    # each note once, its number first: the text as printed (joined across its lines)
    body = " ".join(ln.strip() for ln in lines).translate(PLAIN)
    for k, t in enumerate(texts, 1):
        assert body.count(f" {k} {t[:40]}") == 1
        assert body.count(t[:60]) == 1


def test_cuda_graphs_never_slows_a_device_bound_step():
    """100 kernels of 6 µs queued back to back (0.4 µs apart) behind 3 µs launch calls
    every 5 µs: the device sets the pace. Captured in a graph, the kernels start while the
    graph's launch call still enqueues them (not after its 100 x 1.6 µs), with the trace's
    own gap: removing launches cannot lengthen the step."""
    rows = [row("step", "ProfilerStep#1", 0, 700_000, step=1)]
    for i in range(100):
        rows.append(row("runtime", "cudaLaunchKernel", 1_000 + 5_000 * i, 3_000, corr=i + 1))
        rows.append(row("kernel", "k", 5_000 + 6_400 * i, 6_000, corr=i + 1))
    w = whatif(trace(*rows), ("cuda_graphs",))
    s = w.scenario("cuda_graphs")
    assert s.applies and s.saving_ns >= 0
    assert any("after the call's start" in a for a in s.assumptions)


def test_timed_predictions_on_a_cpu_trace_scale_every_op():
    """A CPU trace's ops are its host work, slowed by the profiler as well: the timed model
    scales every op (no device floor), so a faster GEMM saves time per timed step; it
    once calibrated the factor to 0 and predicted the timed step unchanged."""
    run = ROOT / "sample_traces" / "cpu" / "fused_torch"
    bench = json.loads((run / "bench.json").read_text())
    w = whatif(load(run), ("gemm_speedup=4",))
    s = w.scenarios[0]
    timed = bench["time_per_batch_s"]["median"] * 1e9
    assert w.model["timed_host_factor"] == pytest.approx(timed / (w.measured_ns / w.steps),
                                                         rel=0.05)
    assert 0 < s.timed_step_ns < timed
    # the same share of the step as the profiled prediction, within the calibration
    assert s.timed_step_ns / timed == pytest.approx(s.predicted_ns / w.replayed_ns, rel=0.05)
