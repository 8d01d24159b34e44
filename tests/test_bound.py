"""What bounds the step, the input pipeline, attention and the framework's own remedies,
on real traces from other projects: every expected figure is computed here from the raw
JSON (plain json, Python loops), never from traceviz's output."""

from __future__ import annotations

import bisect
import gzip
import json
import re
from decimal import Decimal
from functools import lru_cache
from pathlib import Path

import pytest

from tests.conftest import SHARED_TRACES, shared
from tests.diagnosis_paths import FOREIGN_FILES
from tests.handmade import row, trace
from traceviz import load
from traceviz.analyses import advice as A
from traceviz.analyses.advice.advising import advise_full
from traceviz.analyses.efficiency.attention_fusion import attention
from traceviz.analyses.summary.figures import summarize
from traceviz.analyses.whatif.engine import whatif
from traceviz.opcost import peaks

FOREIGN = SHARED_TRACES / "foreign"
H1 = FOREIGN / "kineto" / "h1_kineto_v100_resnet50.pt.trace.json.gz"
H7 = FOREIGN / "kineto" / "h7_tracelens_h100_owlv2.json.gz"
DLRM = FOREIGN / "kineto" / "h3_param_dlrm_v100_rank0.pt.trace.json.gz"
DEEPSEEK = FOREIGN / "kineto" / "deepseek_v3_train.json"
B200 = FOREIGN / "kineto" / "h4_tracelens_b200_eager.json.gz"
DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset"}


def _ns(v) -> int:
    return int((Decimal(str(v)) * 1000).to_integral_value())


@lru_cache(maxsize=4)
def _raw(path: Path) -> tuple[dict, ...]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        doc = json.load(f)
    return tuple(e for e in doc["traceEvents"] if e.get("ph") == "X")


def _blocks(intervals):
    out = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def _overlap(a, b) -> int:
    """Length of the intersection of two unions of intervals."""
    a, b = _blocks(a), _blocks(b)
    i = j = total = 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        total += max(0, hi - lo)
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def _length(intervals) -> int:
    return sum(e - s for s, e in _blocks(intervals))


def _loader_and_device(path: Path):
    ev = _raw(path)
    loader = [(_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"])) for e in ev
              if "DataLoader" in e["name"] and "__next__" in e["name"]]
    device = [(_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"])) for e in ev
              if e.get("cat") in DEVICE_CATS]
    return loader, device


# -- the input pipeline --------------------------------------------------------------

@pytest.mark.parametrize(("path", "input_ms", "idle_ms"), [
    (H1, 415.791, 355.571),   # single-process loader: the 415.8 and 355.6 ms
    (H7, 619.045006, 619.045006)])
def test_input_pipeline_from_the_raw_loader_calls(path, input_ms, idle_ms):
    loader, device = _loader_and_device(path)
    raw_input = _length(loader)
    raw_idle = raw_input - _overlap(loader, device)
    assert (raw_input, raw_idle) == (round(input_ms * 1e6), round(idle_ms * 1e6))
    s = summarize(load(path))
    p = s.input_pipeline
    # every loader call lies inside the step windows here: the figures are the raw ones
    assert (p.input_ns, p.idle_ns, p.calls) == (raw_input, raw_idle, len(loader))
    assert p.idle_share == pytest.approx(raw_idle / s.span_ns)
    assert p.frameworks == ["torch"]
    assert int(p.per_step["input_ns"].sum()) == raw_input


def test_input_ranks_first_and_no_launch_remedy_claims_it():
    """h1: the device idles 355.6 ms in the loader and 91.5 ms waiting for launches: the
    input bounds the step, and the launch remedies are priced beside the input's."""
    a = advise_full(load(shared(H1)))
    assert a.bound.by == "input"
    loader, device = _loader_and_device(H1)
    assert a.bound.figures["input_idle_ns"] == _length(loader) - _overlap(loader, device)
    first = a.findings[0]
    assert first.rule == "input_pipeline" and first.saving_scenario == "overlap_input"
    assert 0 < first.saving_ns <= first.figures["idle_ns"]
    assert "num_workers" in first.action and "pin_memory" in first.action
    assert "main process" in " ".join(first.evidence)  # _SingleProcessDataLoaderIter
    # the launch wait left once the input's idle is taken out is under the host rule's
    # threshold: no "host-bound" finding takes the loader's time
    assert a.bound.figures["host_ns"] < A.HOST_BOUND * a.bound.figures["span_ns"]
    assert "host_bound" not in [f.rule for f in a.findings]


def test_overlap_input_removes_only_the_loader_time():
    w = whatif(load(shared(H1)), ("overlap_input", "overlap_input+cuda_graphs", "cuda_graphs"))
    loader, device = _loader_and_device(H1)
    idle = _length(loader) - _overlap(loader, device)
    o = w.scenario("overlap_input")
    assert o.applies and 0 < o.saving_ns <= idle
    both = w.scenario("overlap_input+cuda_graphs")
    assert both.saving_ns >= o.saving_ns


@pytest.mark.parametrize(("busy_until", "idle"), [(0, 300), (150, 150), (300, 0)])
def test_input_idle_is_the_loader_time_the_device_ran_nothing(busy_until, idle):
    """A 1000 ns step: the data range [0, 300) and a kernel queued before it running
    until ``busy_until``: only the part after it is idle."""
    rows = [row("step", "ProfilerStep#1", 0, 1000, step=1),
            row("annotation", "data", 0, 300),
            row("kernel", "volta_sgemm_128x64_nn", 300, 700)]
    if busy_until:
        rows.append(row("kernel", "volta_sgemm_64x64_nn", 0, busy_until))
    p = summarize(trace(*rows)).input_pipeline
    assert (p.input_ns, p.idle_ns, p.calls) == (300, idle, 1)


# -- attention -----------------------------------------------------------------------

def _inner_op_kernels(path: Path, op_pattern: str):
    """Per op call matching ``op_pattern`` (the innermost op around the launch): its
    Input Dims and the time of the kernels launched inside it."""
    ev = _raw(path)
    ops = sorted([e for e in ev if e.get("cat") == "cpu_op"], key=lambda e: _ns(e["ts"]))
    launch = {e["args"]["correlation"]: e for e in ev
              if e.get("cat") in ("cuda_runtime", "cuda_driver")
              and "correlation" in e.get("args", {})}
    by_tid: dict = {}
    for o in ops:
        by_tid.setdefault(o["tid"], []).append(o)
    starts = {tid: [_ns(o["ts"]) for o in v] for tid, v in by_tid.items()}
    out: dict = {}
    for k in (e for e in ev if e.get("cat") == "kernel"):
        call = launch.get(k["args"].get("correlation"))
        if call is None:
            continue
        t, mine = _ns(call["ts"]), by_tid.get(call["tid"], [])
        # the innermost op around t: the latest-starting one that has not ended
        i = bisect.bisect_right(starts.get(call["tid"], []), t) - 1
        while i >= 0 and _ns(mine[i]["ts"]) + _ns(mine[i]["dur"]) < t:
            i -= 1
        inner = mine[i] if i >= 0 else None
        if inner is not None and re.match(op_pattern, inner["name"]):
            key = (inner["name"], json.dumps(inner["args"].get("Input Dims")))
            out[key] = out.get(key, 0) + _ns(k["dur"])
    return out


def test_unfused_attention_on_owlv2_from_the_raw_ops():
    """h7 (OWLv2 on an H100): softmax over [16, 5185, 5185] between two bmms."""
    kernels = [e for e in _raw(shared(H7)) if e.get("cat") == "kernel"]
    kernel_ns = sum(_ns(e["dur"]) for e in kernels)
    soft = _inner_op_kernels(H7, r"^aten::_softmax$")
    soft_ns = sum(v for (n, dims), v in soft.items() if json.loads(dims)[0][-2:] == [5185] * 2)
    mm = _inner_op_kernels(H7, r"^aten::bmm$")
    bmm_ns = sum(v for (n, dims), v in mm.items() if 5185 in json.loads(dims)[0][-2:])
    assert soft_ns == 262_422_467 and round(soft_ns / kernel_ns, 3) == 0.476
    a = attention(load(H7))
    (g,) = a.groups
    assert (g.seq, g.batch_heads, g.head_dim, g.softmax_calls) == (5185, 16, 64, 120)
    assert (g.softmax_ns, g.matmul_ns) == (soft_ns, bmm_ns)
    assert a.kernel_total_ns == kernel_ns
    # Q·Kᵀ writes the scores once, the softmax reads and writes them, P·V reads them
    assert g.sxs_bytes == 4 * 120 * 16 * 5185 * 5185 * 2
    flops = 2 * 2 * 16 * 5185 * 5185 * 64 * 120
    h100 = peaks.find("NVIDIA H100 80GB HBM3")
    assert g.fused_ns == int(max(flops / (h100.figures["bf16"] * 1e12 * 0.5) * 1e9,
                                 4 * 16 * 5185 * 64 * 2 * 120 / (h100.bandwidth * 1e9) * 1e9))
    f = A.attention(A.Context(load(H7)))
    assert f is not None and f.figures["softmax_ns"] == soft_ns
    assert f.figures["share"] == pytest.approx((soft_ns + bmm_ns) / kernel_ns)
    assert "scaled_dot_product_attention" in f.action
    # the replay with one fused kernel saves time, at most the kernels it takes out
    assert 0 < f.saving_ns <= g.kernel_ns - g.fused_ns + 10_000_000


def test_fused_attention_is_not_an_unfused_finding():
    """The B200 trace runs FMHA kernels: recognized as fused, no finding."""
    names = [e["name"] for e in _raw(shared(B200)) if e.get("cat") == "kernel"]
    # FMHA kernels (not vLLM's reshape_and_cache_flash, a KV-cache write)
    fused = [n for n in names if re.match(r"fmha|flash_?(attn|fwd|bwd)", n, re.IGNORECASE)]
    a = attention(load(B200))
    assert a.fused_kernels == len(fused) > 0 and not a.groups
    assert A.attention(A.Context(load(B200))) is None


# -- what bounds the step ------------------------------------------------------------

def test_exposed_communication_from_the_raw_kernels():
    """DLRM rank 0: NCCL kernels 5.798 ms, 5.537 ms of them overlapped by no other kernel."""
    ks = [e for e in _raw(shared(DLRM)) if e.get("cat") == "kernel"]
    comm = [(_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"])) for e in ks if "nccl" in e["name"]]
    other = [(_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"])) for e in ks
             if "nccl" not in e["name"]]
    exposed = _length(comm) - _overlap(comm, other)
    assert (_length(comm), exposed) == (5_798_000, 5_537_000)
    b = advise_full(load(DLRM)).bound
    assert b.figures["communication_ns"] == 5_798_000
    assert b.figures["exposed_communication_ns"] == exposed


def test_device_bound_on_an_overlapped_multi_stream_trace():
    """DeepSeek-V3: three streams, the device busy almost all of the step."""
    dev = [(_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"])) for e in _raw(shared(DEEPSEEK))
           if e.get("cat") in DEVICE_CATS]
    a = advise_full(load(DEEPSEEK))
    assert a.bound.by == "device"
    assert a.bound.figures["busy_ns"] == pytest.approx(_length(dev), rel=0.02)
    assert a.findings[0].rule == "device_bound"
    assert "host_bound" not in [f.rule for f in a.findings]


def test_the_timed_step_decides_a_host_bound(h200):
    """compile_full on an H200: the profiled step waits for the host 28.6 %, but without
    the profiler the step is 10.7 ms of which the device is busy 9.3: no room for a host
    bound. The figures are bench.json's and the trace's."""
    run = h200 / "compile_full_torch"
    bench = json.loads((run / "bench.json").read_text())
    a = advise_full(load(run))
    timed = a.timed
    assert timed.timed_ns == pytest.approx(bench["time_per_batch_s"]["median"] * 1e9)
    assert (timed.timed_ns - timed.device_ns) / timed.timed_ns < 0.25
    assert a.bound.figures["timed_host_room"] == pytest.approx(
        (timed.timed_ns - timed.device_ns) / timed.timed_ns)
    assert a.bound.by == "device" and a.findings[0].rule == "device_bound"
    assert "host_bound" not in [f.rule for f in a.findings]


# -- the framework's own remedies ----------------------------------------------------

TORCH_WORDS = re.compile(r"torch|\.item\(\)|non_blocking|DataLoader|pin_memory\(|"
                         r"record_function|TorchScript|Triton")


@pytest.mark.parametrize("path", [FOREIGN / "xplane" / n for n in FOREIGN_FILES["xplane"]
                                  if "/" not in n], ids=lambda p: p.name)
def test_no_torch_remedy_on_xla_traces(path):
    t = load(path)
    ctx = A.Context(t)
    expected = "tf" if path.name.startswith("chess_tf") else "jax"
    assert ctx.framework_name == expected
    for f in advise_full(t).findings:
        assert not TORCH_WORDS.search(f.action), (f.rule, f.action)


def test_tf_sync_and_copy_remedies_name_tf():
    t = load(shared(FOREIGN / "xplane" / "chess_tf_20210616-112936.xplane.pb"))
    found = {f.rule: f for f in advise_full(t).findings}
    assert "syncs_in_steps" in found
    assert ".numpy()" in found["syncs_in_steps"].action
