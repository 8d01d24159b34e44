"""The critical path: hand-built graphs whose path is known (a chain of queued kernels, a
fork and join across streams, a host-bound step), invariants on real traces, and the
commands that show it."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.conftest import KINETO, ROOT, shared
from tests.handmade import row, trace
from traceviz.analyses.critical_path.hostops import BETWEEN_OPS
from traceviz.analyses.critical_path.path import PARTS, ancestors, critical_path

GPU = ROOT / "sample_traces" / "gpu"


def launch(ts: int, corr: int, dur: int = 500) -> dict:
    return row("runtime", "cudaLaunchKernel", ts, dur, corr=corr)


def kernel(name: str, ts: int, dur: int, corr: int, stream: int = 7) -> dict:
    return row("kernel", name, ts, dur, corr=corr, stream=stream)


def sync(ts: int, end: int) -> dict:
    return row("runtime", "cudaDeviceSynchronize", ts, end - ts)


def step(end: int) -> dict:
    return row("step", "ProfilerStep#1", 0, end, step=1)


def parts(cp) -> dict[str, int]:
    s = cp.steps.iloc[0]
    return {p: int(s[f"{p}_ns"]) for p in PARTS}


def test_a_chain_of_queued_kernels():
    """Three 100 us kernels queued on one stream, a sync that waits for the last: the path
    is the first launch, its latency, the three kernels, the queue gaps between them and
    the sync's tail; the second and third launch calls are off it."""
    t = trace(step(310_000),
              launch(1000, 1), launch(2000, 2), launch(3000, 3), sync(4000, 305_000),
              kernel("k1", 2500, 100_000, 1), kernel("k2", 103_500, 100_000, 2),
              kernel("k3", 204_500, 100_000, 3))
    cp = critical_path(t)
    assert int(cp.steps.iloc[0]["length_ns"]) == 310_000
    # host: 1000 before the first call + its 500 + 5000 after the sync until the mark's end
    assert parts(cp) == {"host": 6500, "launch": 1000, "device": 300_000, "queue": 2000,
                         "sync": 500}
    k = cp.kernels.set_index("name")
    assert (k["share"] == 1.0).all() and k["on_path_calls"].tolist() == [1, 1, 1]
    assert cp.host_calls.set_index("name")["on_path_ns"].to_dict() == {"cudaLaunchKernel": 500}


def test_fork_and_join_across_streams():
    """A1, A2 on stream 7; B (200 us) on stream 8; C on stream 7 waits for B: the path runs
    through B and the wait, never through A1 and A2 (they could run faster without
    shortening the step)."""
    t = trace(step(240_000),
              launch(1000, 1), launch(2000, 2), launch(3000, 3), launch(4000, 4),
              sync(5000, 237_000),
              kernel("A1", 2500, 20_000, 1), kernel("A2", 22_500, 20_000, 2),
              kernel("B", 4500, 200_000, 3, stream=8), kernel("C", 206_500, 30_000, 4))
    cp = critical_path(t)
    # A1 runs from 2500: the host's last 1000 before B's launch returns (2500-3500) and
    # B's launch latency (3500-4500) overlap it, so they are device time (the device was
    # busy, not waiting for the host); B and C are 230_000
    assert parts(cp) == {"host": 6500 - 1000, "launch": 0, "device": 230_000 + 2000,
                         "queue": 0, "sync": 2500}
    share = cp.kernels.set_index("name")["share"].to_dict()
    assert share == {"B": 1.0, "C": 1.0, "A1": 0.0, "A2": 0.0}
    assert sum(parts(cp).values()) == int(cp.steps.iloc[0]["length_ns"]) == 240_000


def test_a_host_bound_step():
    """Short kernels far apart and a sync after the device is done: all host, but for
    the two kernels' 1000 each, run while the path was on the host (device time: the
    device was busy then, not waiting)."""
    t = trace(step(61_000), launch(1000, 1), launch(50_000, 2), sync(60_000, 60_500),
              kernel("k1", 2500, 1000, 1), kernel("k2", 51_500, 1000, 2))
    cp = critical_path(t)
    assert parts(cp) == {"host": 61_000 - 2000, "launch": 0, "device": 2000, "queue": 0,
                         "sync": 0}
    assert (cp.kernels["on_path_ns"] == 0).all()
    calls = cp.host_calls.set_index("name")["on_path_ns"].to_dict()
    # the host time before a call is not the call's: no op covers it, so it is between ops
    assert calls == {"cudaLaunchKernel": 500 + 500, "cudaDeviceSynchronize": 500,
                     BETWEEN_OPS: 48_500 + 9500}


def test_pointer_doubling_finds_every_ancestor():
    rng = np.random.default_rng(3)
    n = 500
    pred = np.array([-1 if i == 0 or rng.random() < 0.05 else rng.integers(0, i)
                     for i in range(n)])
    ends = rng.choice(n, 7, replace=False)
    want = np.zeros(n, bool)
    for e in ends:  # the reference: walk each chain
        while e >= 0 and not want[e]:
            want[e] = True
            e = pred[e]
    assert (ancestors(pred, ends) == want).all()


@pytest.mark.parametrize("path", [GPU / "cudnn_torch" / "train", GPU / "graph_torch" / "train",
                                  KINETO / "a100_alexnet.json.gz",
                                  KINETO / "a100_event_sync.json.gz",
                                  ROOT / "sample_traces" / "cpu" / "jit_torch"])
def test_parts_add_up_to_each_step(path):
    from traceviz.parsers import load

    cp = critical_path(load(path))
    s = cp.steps
    assert len(s) and (s["length_ns"] > 0).all()
    assert (s[[f"{p}_ns" for p in PARTS]].sum(axis=1) == s["length_ns"]).all()
    assert (cp.kernels["on_path_ns"] <= cp.kernels["total_ns"]).all()
    # the device part: the kernels on the path, and the path's other time while the
    # device ran work
    assert cp.kernels["on_path_ns"].sum() <= s["device_ns"].sum() or cp.is_cpu


def test_the_kernels_on_the_path_are_htas():
    """HTA 0.5's critical path on its own test traces (``benchmarks/critical_path_hta.py
    --write`` stored its figures): the same kernels lie on traceviz's path, one by one
    (recorded start and duration), and the same device time. The host side differs by
    model (HTA: CPU ops as recorded; traceviz: runtime calls as replayed)."""
    import sys

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from critical_path_hta import ours

    ref = json.loads((ROOT / "tests" / "data" / "hta_critical_path.json").read_text())
    assert ref["hta"] == "0.5.0" and len(ref["cases"]) == 2
    for case in ref["cases"]:
        mine = ours(shared(KINETO / case["trace"]), case["annotation"])
        for theirs, m in zip(case["instances"], mine, strict=True):
            assert theirs["ok"] and theirs["kernels"], case["trace"]
            assert m["kernels"] == theirs["kernels"]
            assert m["kernel_ns"] == 1000 * theirs["device_us"] <= m["device"]
            # both paths run within the same range: HTA's from its first node to its last
            assert m["length_ns"] >= 1000 * (theirs["path_end_us"] - theirs["path_start_us"])


def test_whatif_holds_a_saving_against_the_path():
    """The chain of queued GEMMs: halving them takes 150 us off the path, and the replay
    saves exactly that; in the host-bound step the same scenario takes nothing off it."""
    from traceviz.analyses.whatif.engine import whatif

    t = trace(step(310_000),
              launch(1000, 1), launch(2000, 2), launch(3000, 3), sync(4000, 305_000),
              kernel("volta_sgemm_128x64_nn", 2500, 100_000, 1),
              kernel("volta_sgemm_128x64_nn", 103_500, 100_000, 2),
              kernel("volta_sgemm_128x64_nn", 204_500, 100_000, 3))
    s = whatif(t, ("gemm_speedup=2",)).scenario("gemm_speedup=2")
    assert s.path_ns == 150_000 and s.saving_ns == 150_000
    assert "takes 150.0 µs per step off the critical path" in s.assumptions[-1]
    # the saving as the table prints it, beside the path's figure
    assert s.assumptions[-1].endswith("the saving, 150.0 µs per step, is about that much")
    t = trace(step(61_000), launch(1000, 1), launch(50_000, 2), sync(60_000, 60_500),
              kernel("volta_sgemm_128x64_nn", 2500, 1000, 1),
              kernel("volta_sgemm_128x64_nn", 51_500, 1000, 2))
    s = whatif(t, ("gemm_speedup=2",)).scenario("gemm_speedup=2")
    assert s.path_ns == 0 and s.saving_ns == 0
    assert s.assumptions[-1].endswith("the path does not get shorter")


def test_the_command_and_the_api_agree(capsys):
    from traceviz import Trace
    from traceviz.cli import main
    from traceviz.parsers import load

    path = GPU / "cudnn_torch" / "train" / "trace.parquet"
    assert main(["analyze", str(path), "--critical-path", "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)["critical_path"]
    api = Trace.load(path).critical_path(top=15)  # analyze lists --top 15
    assert cli == json.loads(json.dumps(api))
    s = critical_path(load(path)).steps
    assert [r["length_ns"] for r in cli["steps"]] == s["length_ns"].tolist()
    assert cli["unit"] == "step" and cli["windows"] == 3
    assert main(["analyze", str(path), "--critical-path", "nothing-like-this"]) == 2
    assert "--critical-path: no host range named" in capsys.readouterr().err


NCCL = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"


def _rank(collective_at: int) -> object:
    """A rank whose step ends in a GEMM, then an all-reduce (starting at
    ``collective_at``, 150 us), then a sync."""
    end = collective_at + 150_000
    return trace(step(end + 5000), launch(1000, 1), launch(2000, 2), sync(3000, end + 500),
                 kernel("volta_sgemm_128x64_nn", 2500, 50_000, 1),
                 kernel(NCCL, collective_at, 150_000, 2))


def test_a_collective_on_the_path_names_the_rank_it_waited_for():
    """Rank 0 reaches the all-reduce at 52.5 us; rank 1 at 190 us, rank 2 at 100 us: on
    rank 0's path the all-reduce waited for rank 1, 137.5 us."""
    from traceviz.analyses.critical_path.cross_rank import collective_starts, waits_of

    t0 = _rank(52_500)
    cp = critical_path(t0)
    assert cp.kernels.set_index("name").loc[NCCL, "share"] == 1.0
    others = {1: collective_starts(_rank(190_000)), 2: collective_starts(_rank(100_000))}
    w = waits_of(0, t0, cp, others)
    assert w.to_dict("records") == [{"name": NCCL, "occurrence": 0, "on_path_ns": 150_000,
                                     "waited_for": 1, "lag_ns": 137_500}]
    # this rank the last to arrive: it waited for nobody (itself, lag 0)
    w = waits_of(0, t0, cp, {1: collective_starts(_rank(10_000))})
    assert w[["waited_for", "lag_ns"]].values.tolist() == [[0, 0]]


def test_a_rank_folder_gives_the_slowest_ranks_path(tmp_path, capsys):
    import shutil

    from traceviz.analyses.compare.ranks import slowest_ranks
    from traceviz.cli import main
    from traceviz.rankset.folder import analyze_folder

    for r in (0, 1):
        shutil.copy(shared(KINETO / f"ampere_sampled_rank{r}.json.gz"), tmp_path)
    assert main(["analyze", str(tmp_path), "--critical-path", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    slow = slowest_ranks(analyze_folder(tmp_path).ranks, 1)[0]
    cp = out["critical_path"]
    assert cp["rank"] == slow.rank and cp["file"] == slow.file
    assert cp["windows"] == 2 and cp["collectives"] == []  # host-bound: no collective on it
    assert sum(cp["totals"][p] for p in PARTS) == cp["totals"]["length"]


def test_on_a_cpu_trace_the_work_ops_are_the_work():
    """A CPU capture: one thread of leaf ops, so every op lies on the path; their own time
    is the path's work (device) part and equals their total, the rest is framework."""
    from traceviz.analyses.work import work_rows
    from traceviz.parsers import load

    t = load(ROOT / "sample_traces" / "cpu" / "jit_torch")
    cp = critical_path(t)
    assert cp.is_cpu and (cp.kernels["share"] == 1.0).all()
    work = work_rows(t)
    assert int(cp.steps["device_ns"].sum()) == int(cp.kernels["on_path_ns"].sum()) \
        == int(cp.kernels["total_ns"].sum()) <= int(work["dur_ns"].sum())
    assert (cp.steps["host_ns"] > 0).all()
