"""The communication section on real traces of other projects: every expected figure
(counts, bytes, bandwidth, exposed time) is computed here from the raw JSON with plain
Python, never from traceviz's output."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest

from tests.conftest import SHARED_TRACES, shared
from tests.test_bound import B200, DEEPSEEK, DLRM, _length, _ns, _overlap, _raw
from traceviz import load
from traceviz.analyses.summary.figures import summarize

NCCL = SHARED_TRACES / "kineto" / "a100_nccl.json.gz"
ELEM = {"Float": 4, "BFloat16": 2, "Long": 8, "Half": 2}


def _kernels(path):
    return [e for e in _raw(path) if e.get("cat") == "kernel"]


def _section(path) -> dict:
    return summarize(load(path)).to_dict()["communication"]


def _exposed(path, is_comm) -> tuple[int, int]:
    ks = _kernels(path)
    comm = [(_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"])) for e in ks if is_comm(e["name"])]
    other = [(_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"])) for e in ks
             if not is_comm(e["name"])]
    return _length(comm), _length(comm) - _overlap(comm, other)


def test_nccl_kinds_messages_and_bandwidth_from_the_kernels_args():
    """A100 DDP, 2 ranks: each NCCL kernel carries its message; all-reduce busbw =
    algbw x 2(n-1)/n, broadcast = algbw."""
    want: dict[str, dict] = {}
    for e in _kernels(shared(NCCL)):
        m = re.match(r"ncclKernel_(AllReduce|Broadcast)_", e["name"])
        if not m:
            continue
        a = e["args"]
        k = want.setdefault({"AllReduce": "all_reduce", "Broadcast": "broadcast"}[m[1]],
                            {"count": 0, "ns": 0, "bytes": 0, "group": a["Group size"]})
        k["count"] += 1
        k["ns"] += _ns(e["dur"])
        k["bytes"] += max(a["In msg nelems"], a["Out msg nelems"]) * ELEM[a["dtype"]]
    c = _section(NCCL)
    got = {k["kind"]: k for k in c["kinds"]}
    assert set(got) == set(want) == {"all_reduce", "broadcast"}
    for kind, w in want.items():
        g = got[kind]
        assert (g["count"], g["sized"], g["total_ns"], g["bytes"], g["group"]) == \
            (w["count"], w["count"], w["ns"], w["bytes"], 2)
        assert g["algbw_gbs"] == pytest.approx(w["bytes"] / w["ns"])
    n = 2
    assert got["all_reduce"]["busbw_gbs"] == pytest.approx(
        want["all_reduce"]["bytes"] / want["all_reduce"]["ns"] * 2 * (n - 1) / n)
    assert got["broadcast"]["busbw_gbs"] == pytest.approx(got["broadcast"]["algbw_gbs"])
    assert c["link_gbs"] == 300.0  # the A100's NVLink, one direction
    # exposed: the steps' windows hold every NCCL kernel after the first step's
    assert 0 < c["exposed_ns"] <= c["comm_ns"]
    assert sum(s["exposed_ns"] for s in c["per_step"]) == c["exposed_ns"]


def test_b200_all_gather_message_and_multimem_all_reduce_never_overlapped():
    ks = _kernels(shared(B200))
    gather = [e for e in ks if e["name"].startswith("ncclDevKernel_AllGather")]
    multimem = [e for e in ks if "multimem_all_reduce_kernel" in e["name"]]
    c = _section(B200)
    got = {k["kind"]: k for k in c["kinds"]}
    assert got["all_reduce"]["count"] == len(multimem) == 73
    assert got["all_gather"]["count"] == len(gather) == 1
    a = gather[0]["args"]
    size = a["Out msg nelems"] * 2  # BFloat16: the output of an all-gather is its size
    assert got["all_gather"]["bytes"] == size and got["all_gather"]["dtype"] == "BFloat16"
    algbw = size / _ns(gather[0]["dur"])
    assert got["all_gather"]["busbw_gbs"] == pytest.approx(algbw * 7 / 8)
    assert got["all_reduce"]["sized"] == 0  # symmetric memory records no message
    total, exposed = _exposed(B200, lambda n: "multimem_all_reduce" in n
                              or n.startswith("nccl"))
    assert (c["comm_ns"], c["exposed_ns"]) == (total, exposed) and total == exposed
    assert c["overlap_fraction"] == 0.0


def test_deepseek_deepep_kinds_and_exposed_time():
    """DeepEP on H800: dispatch, combine and their notify steps, 4.19 ms exposed."""
    names = [e["name"] for e in _kernels(shared(DEEPSEEK)) if "dpsk::ep::" in e["name"]]
    notify = sum("notify" in n for n in names)
    dispatch = sum("dispatch" in n and "notify" not in n for n in names)
    combine = sum("::combine<" in n for n in names)
    c = _section(DEEPSEEK)
    got = {k["kind"]: k["count"] for k in c["kinds"]}
    assert got == {"notify": notify, "dispatch": dispatch, "combine": combine}
    assert sum(got.values()) == len(names) == 36
    total, exposed = _exposed(DEEPSEEK, lambda n: "dpsk::ep::" in n)
    assert (c["comm_ns"], c["exposed_ns"]) == (total, exposed) == (113_440_000, 4_190_000)
    assert c["overlap_fraction"] == pytest.approx((total - exposed) / total)


def test_dlrm_rank0_per_step():
    total, exposed = _exposed(shared(DLRM), lambda n: n.startswith("nccl"))
    c = _section(DLRM)
    kinds = {k["kind"]: k["count"] for k in c["kinds"]}
    names = [e["name"] for e in _kernels(DLRM) if e["name"].startswith("nccl")]
    assert kinds == {"send_recv": sum("SendRecv" in n for n in names),
                     "all_reduce": sum("AllReduce" in n for n in names)}
    assert [(s["comm_ns"], s["exposed_ns"]) for s in c["per_step"]] == [(total, exposed)]


def test_no_collectives_no_section():
    h1 = shared(SHARED_TRACES / "foreign" / "kineto" / "h1_kineto_v100_resnet50.pt.trace.json.gz")
    assert summarize(load(h1)).to_dict()["communication"] is None


def test_whatif_keeps_each_collective_end_where_the_trace_put_it():
    """DLRM rank 0: CUDA graphs shorten the host's launches, but each NCCL kernel still
    ends no earlier than recorded (the other ranks arrive as they did)."""
    from traceviz.analyses.replay.graph import build, solve
    from traceviz.analyses.whatif.cuda_graphs import cuda_graphs
    from traceviz.analyses.whatif.engine import COLLECTIVES_KEPT, whatif

    trace = load(shared(DLRM))
    origin = int(trace.meta.get("origin_ns", 0))
    ends = sorted(_ns(e["ts"]) + _ns(e["dur"]) - origin for e in _kernels(DLRM)
                  if e["name"].startswith("nccl"))
    g = build(trace)
    changed, notes = cuda_graphs(g, 0)
    assert notes
    sol = solve(changed)
    comm = (trace.events.loc[changed.d_rows, "category"] == "communication").to_numpy()
    replayed = sorted(sol.d_end[comm].tolist())
    assert len(replayed) == len(ends) == 8
    assert all(r >= e for r, e in zip(replayed, ends, strict=True))
    s = whatif(trace, ("cuda_graphs",)).scenarios[0]
    assert COLLECTIVES_KEPT in s.assumptions
    # what is left to save is host time around the collectives: a few percent of the step
    assert 0 < s.saving_ns < 0.05 * s.predicted_ns


DLRM_RANKS = SHARED_TRACES / "foreign" / "kineto" / "h3_param_dlrm_8rank"


def _rank_collectives_raw(path) -> list[tuple[str, int, int, int]]:
    """(kind, launch, start, end) in µs·1000 of every NCCL kernel, in start order: the
    launch is the runtime call of the same correlation id."""
    ev = _raw(path)
    launch = {e["args"]["correlation"]: _ns(e["ts"]) for e in ev
              if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})}
    out = []
    for e in sorted((e for e in ev if e.get("cat") == "kernel"
                     and e["name"].startswith("nccl")), key=lambda e: _ns(e["ts"])):
        kind = "send_recv" if "SendRecv" in e["name"] else "all_reduce"
        s = _ns(e["ts"])
        out.append((kind, launch[e["args"]["correlation"]], s, s + _ns(e["dur"])))
    return out


def test_ranks_by_arrival_on_the_dlrm_folder():
    """Match the k-th collective of each kind across the 8 ranks: rank 7 launches last
    into 5 of the 8; the ranks that wait longest are others; ends agree within µs."""
    from traceviz.rankset.folder import analyze_folder

    raw = {int(re.search(r"worker(\d)", p.name)[1]): _rank_collectives_raw(p)
           for p in shared(DLRM_RANKS).iterdir()}
    matched: dict[tuple[str, int], dict[int, tuple[int, int, int]]] = {}
    for rank, rows in raw.items():
        seen: dict[str, int] = {}
        for kind, launch, start, end in rows:
            k = seen[kind] = seen.get(kind, -1) + 1
            matched.setdefault((kind, k), {})[rank] = (launch, start, end)
    last = [max(sorted(m), key=lambda r: m[r][0]) for m in matched.values()]
    waits = {r: sum(max(x[1] for x in m.values()) - m[r][1] for m in matched.values())
             for r in raw}
    assert len(matched) == 8 and last.count(7) == 5
    assert max(max(x[2] for x in m.values()) - min(x[2] for x in m.values())
               for m in matched.values()) <= 7_000
    a = analyze_folder(DLRM_RANKS, workers=1).arrivals
    assert a is not None and a.straggler == 7 and not a.clock_corrected
    per = a.per_rank.set_index("rank")
    assert per.loc[7, "last"] == 5 and int(per["last"].sum()) == 8
    assert {r: int(per.loc[r, "wait_ns"]) for r in raw} == waits
    late = {r: sum(m[r][0] - min(x[0] for x in m.values()) for m in matched.values())
            for r in raw}
    assert {r: int(per.loc[r, "launch_late_ns"]) for r in raw} == late
    assert max(late, key=lambda r: late[r]) == 7
    kinds = {k["kind"]: (k["ranks"], k["count"], k["total_ns"]) for k in a.to_dict()["kinds"]}
    assert kinds == {kind: (8, sum(x[0] == kind for rows in raw.values() for x in rows),
                            sum(x[3] - x[2] for rows in raw.values() for x in rows
                                if x[0] == kind)) for kind in ("send_recv", "all_reduce")}
    longest = max(waits, key=lambda r: waits[r])
    assert a.waits_longest[0] == longest != 7
    assert a.collectives["end_spread_ns"].max() <= 7_000


@pytest.mark.capture
def test_capture_of_a_data_parallel_run_under_gloo(tmp_path):
    """`capture --ranks 2` runs the DDP example under torchrun (Gloo on the CPU): one
    trace per rank in one folder, read back as a rank folder with its all-reduces."""
    import statistics
    import subprocess
    import sys

    from tests.conftest import needs
    from traceviz.rankset.folder import analyze_folder

    needs("torch")
    root = Path(__file__).resolve().parents[1]
    run = tmp_path / "ddp"
    done = subprocess.run([sys.executable, "-m", "traceviz", "capture", "--ranks", "2",
                           "--warmup", "2", "--profile-steps", "3", "--out", str(run), "--",
                           sys.executable, str(root / "examples" / "ddp_lstm.py"), "--steps",
                           "8"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Arrivals at the" in done.stdout
    raw = {}
    for r in (0, 1):
        path = run / f"rank-{r}.pt.trace.json.gz"
        with gzip.open(path) as f:
            doc = json.load(f)
        assert doc["distributedInfo"]["backend"] == "gloo"
        assert doc["distributedInfo"]["rank"] == r
        raw[r] = sorted((_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"]))
                        for e in doc["traceEvents"] if e.get("name") == "gloo:all_reduce")
        c = summarize(load(path)).to_dict()["communication"]
        assert c["host_records"] and c["kinds"][0]["kind"] == "all_reduce"
        assert c["kinds"][0]["count"] == len(raw[r]) > 0
        assert c["kinds"][0]["total_ns"] == sum(e - s for s, e in raw[r])
    n = min(len(v) for v in raw.values())
    assert len(raw[0]) == len(raw[1]) == n
    # one host, one clock: offsets from the common end stay small; last = latest start
    common = [statistics.median([raw[r][k][1] for r in raw]) for k in range(n)]
    offsets = {r: statistics.median([raw[r][k][1] - common[k] for k in range(n)])
               for r in raw}
    shift = {r: offsets[r] if max(abs(o) for o in offsets.values()) > 2_000_000 else 0
             for r in raw}
    last = [max(sorted(raw), key=lambda r: raw[r][k][0] - shift[r]) for k in range(n)]
    a = analyze_folder(run, workers=1).arrivals
    assert a is not None and len(a.collectives) == n
    per = a.per_rank.set_index("rank")
    assert {r: int(per.loc[r, "last"]) for r in raw} == {r: last.count(r) for r in raw}
    if last.count(0) != last.count(1):
        assert a.straggler == max(sorted(raw), key=last.count)


def test_whatif_on_the_rank_folder_joins_the_collectives():
    """Every DLRM rank replayed together: as recorded, each collective starts on every
    rank when the last rank's kernel started (from the raw kernels, within 20 µs), and the
    job's step is the slowest rank's; CUDA graphs on every rank move the collectives."""
    from traceviz.analyses.whatif.all_ranks import whatif_ranks
    from traceviz.rankset.folder import rank_traces

    raw = {int(re.search(r"worker(\d)", p.name)[1]): _rank_collectives_raw(p)
           for p in shared(DLRM_RANKS).iterdir()}
    latest: dict[tuple[str, int], int] = {}
    for rows in raw.values():
        seen: dict[str, int] = {}
        for kind, _, start, _ in rows:
            k = seen[kind] = seen.get(kind, -1) + 1
            latest[(kind, k)] = max(latest.get((kind, k), 0), start)
    w = whatif_ranks(rank_traces(DLRM_RANKS), ("cuda_graphs",))
    assert w.collectives == len(latest) == 8
    got = dict(zip(w.keys, w.starts["as recorded"].tolist(), strict=True))
    assert all(abs(got[k] - latest[k]) <= 20_000 for k in latest)
    assert w.job() == int(w.per_rank["replayed_ns"].max())
    assert 0 < w.job("cuda_graphs") < w.job()
    moved = w.starts["cuda_graphs"] - w.starts["as recorded"]
    assert (moved <= 0).all() and (moved < 0).any()


def test_gloo_ranges_on_a_cpu_trace():
    """A CPU trace of a Gloo job: the collectives are Gloo's own ranges on its threads."""
    path = shared(SHARED_TRACES / "kineto" / "cpu_only.json.gz")
    gloo = [e for e in _raw(path) if e["name"].startswith("gloo:all_reduce")]
    c = _section(path)
    assert c["host_records"] and c["overlap_fraction"] is None
    assert [(k["kind"], k["count"], k["total_ns"]) for k in c["kinds"]] == [
        ("all_reduce", len(gloo), sum(_ns(e["dur"]) for e in gloo))]
