"""What the run is (``analyses/advice/runkind.py``) and the communication remedies that
follow from it, on real traces of other projects: every expected count (backward ops,
optimizer ranges, collectives by kind and where they were issued, matmuls around them)
is recomputed here from the raw JSON with plain Python, never from traceviz's output."""

from __future__ import annotations

import bisect
import gzip
import json
import re
from functools import cache
from pathlib import Path

import pytest

from tests.conftest import SHARED_TRACES, shared
from traceviz import load
from traceviz.analyses.advice.advising import Context
from traceviz.analyses.advice.runkind import run_kind

FOREIGN = SHARED_TRACES / "foreign"
LLAMA = FOREIGN / "kineto" / "rtx4090_llama_tp2"
DLRM = FOREIGN / "kineto" / "h3_param_dlrm_v100_rank0.pt.trace.json.gz"
DEEPSEEK = FOREIGN / "kineto" / "deepseek_v3_train.json"
H1 = FOREIGN / "kineto" / "h1_kineto_v100_resnet50.pt.trace.json.gz"
H7 = FOREIGN / "kineto" / "h7_tracelens_h100_owlv2.json.gz"
KERAS = FOREIGN / "xplane" / "keras_semi_supervised_cv"
# the data-parallel remedies an inference run must never get
DDP_WORDS = ("bucket_cap_mb", "gradient_as_bucket_view", "comm hooks", "compress gradients",
             "FSDP")


@cache
def _events(path: Path) -> tuple[dict, ...]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        doc = json.load(f)
    return tuple(e for e in (doc["traceEvents"] if isinstance(doc, dict) else doc)
                 if e.get("ph") == "X")


def _launches(path: Path) -> dict[int, float]:
    """correlation id -> the launch call's start (µs)."""
    return {e["args"]["correlation"]: e["ts"] for e in _events(path)
            if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})}


@pytest.mark.parametrize("rank", [0, 1])
def test_llama_tp2_is_a_tensor_parallel_inference_forward(rank):
    """Two RTX 4090s, one forward: no backward op, no optimizer; 10 all-gathers and 9
    reduce-scatters, all in the forward, 16 of them launched between matmul kernels;
    the communication remedies are tensor parallelism's, none of DDP's."""
    path = shared(LLAMA / f"llama_trace_4layers{rank}_with_annotations.json")
    ev = _events(path)
    names = [e["name"] for e in ev if e.get("cat") in ("cpu_op", "user_annotation")]
    assert not [n for n in names if re.search(r"Backward|evaluate_function|_backward|"
                                              r"Optimizer\.", n)]
    launch = _launches(path)
    kernels = [e for e in ev if e.get("cat") == "kernel"]
    nccl = [e for e in kernels if e["name"].startswith("nccl")]
    kinds = {"all_gather": sum("AllGather" in e["name"] for e in nccl),
             "reduce_scatter": sum("ReduceScatter" in e["name"] for e in nccl)}
    assert kinds == {"all_gather": 10, "reduce_scatter": 9}
    mm = sorted(launch[e["args"]["correlation"]] for e in kernels
                if re.search(r"sgemm|fmha", e["name"]))
    at = [launch[e["args"]["correlation"]] for e in nccl]
    between = sum(1 for t in at if bisect.bisect_left(mm, t) > 0
                  and bisect.bisect_right(mm, t) < len(mm))
    assert between == 16

    trace = load(path)
    r = run_kind(trace)
    assert (r.mode, r.parallel) == ("inference", ["tensor"])
    assert r.evidence["framework_ops"] == sum(e.get("cat") == "cpu_op" for e in ev) == 1448
    assert r.evidence["backward_ops"] == r.evidence["optimizer_ops"] == 0
    assert r.evidence["sequence_parallel"]
    got = {k["kind"]: (k["count"], k["forward"], k["between_matmuls"])
           for k in r.evidence["collectives"]["by_kind"]}
    assert {k: v[0] for k, v in got.items()} == kinds
    assert all(v[1] == v[0] for v in got.values())  # every one in the forward
    assert sum(v[2] for v in got.values()) == between

    f = _rule(Context(trace), "communication")
    assert f is not None
    assert "async tensor parallelism" in f.action and "NVLink" in f.action
    assert "sequence parallel already" in f.action
    assert not any(w in f.action for w in DDP_WORDS)
    assert any(e.startswith("the run: inference") for e in f.evidence)


def _rule(ctx: Context, name: str):
    from traceviz.analyses.advice.rules import RULES

    return next(r for r in RULES if r.name == name)(ctx)


def test_llama_rank0_first_collectives_are_named_a_first_call():
    """Rank 0's first reduce-scatter and all-gather last 4-5x the later ones of their
    kind (it waits for rank 1's first arrival): the finding says so, and the action asks
    for a warm run."""
    path = shared(LLAMA / "llama_trace_4layers0_with_annotations.json")
    nccl = sorted((e for e in _events(path) if e.get("cat") == "kernel"
                   and e["name"].startswith("nccl")), key=lambda e: e["ts"])
    rs = [e["dur"] for e in nccl if "ReduceScatter" in e["name"]]
    later = sorted(rs[1:])[len(rs[1:]) // 2 - 1: len(rs[1:]) // 2 + 1]
    assert rs[0] >= 3 * max(later)
    f = _rule(Context(load(path)), "communication")
    cold = next(e for e in f.evidence if e.startswith("the first"))
    assert f"the first reduce_scatter took {rs[0] / 1000:.3f} ms" in cold
    assert "profile a warm run" in f.action and f.figures["cold"]


def test_dlrm_is_data_parallel_training_with_sharded_embeddings():
    """DLRM rank 0 (V100, 8 ranks): autograd nodes and 3 optimizer ranges; 3 all-reduces
    issued during the backward (DDP), 5 all-to-alls (4 before the backward, 1 in it) over
    FBGEMM's split embeddings: remedies for both, the data-parallel ones' DDP words."""
    ev = _events(shared(DLRM))
    bw = next(e for e in ev if e["name"] == "## backward ##")
    start, end = bw["ts"], bw["ts"] + bw["dur"]
    where: dict[str, list[str]] = {}
    for e in ev:
        if e["name"] in ("nccl:all_reduce", "nccl:all_to_all"):
            w = "forward" if e["ts"] < start else "backward" if e["ts"] <= end else "after"
            where.setdefault(e["name"][5:], []).append(w)
    assert sorted(where["all_to_all"]) == ["backward"] + ["forward"] * 4
    assert where["all_reduce"] == ["backward"] * 3
    optimizer = [e["name"] for e in ev if re.match(r"Optimizer\.|## optimizer ##", e["name"])]
    assert len(optimizer) == 3

    trace = load(DLRM)
    r = run_kind(trace)
    assert r.mode == "training" and r.parallel == ["data", "embedding"]
    assert r.evidence["optimizer_ops"] == len(optimizer)
    assert r.evidence["backward_ops"] == sum(
        1 for e in ev if e.get("cat") in ("cpu_op", "user_annotation") and re.search(
            r"^autograd::engine::evaluate_function|Backward\d*$|^aten::\w*_backward|Grad$|"
            r"^## backward ##$", e["name"]))
    got = {k["kind"]: sorted(["forward"] * k["forward"] + ["backward"] * k["backward"]
                             + ["after"] * k["after"])
           for k in r.evidence["collectives"]["by_kind"]}
    assert got == {k: sorted(v) for k, v in where.items()}
    f = _rule(Context(trace), "communication")
    assert f is not None and "bucket_cap_mb" in f.action
    assert "TrainPipelineSparseDist" in f.action
    # the longer exchange first: the all-to-alls' kernels hold more time than the reduces
    assert f.action.index("sharded embeddings") < f.action.index("data parallel")


def test_deepseek_is_expert_parallel_training():
    """DeepSeek-V3's DualPipe chunk (H800): autograd nodes, DeepEP's dispatch, combine
    and notify kernels and no NCCL collective: training, expert parallel."""
    ev = _events(shared(DEEPSEEK))
    ep = [e["name"] for e in ev if e.get("cat") == "kernel" and "::ep::" in e["name"]]
    # a notify step of either exchange first (cached_notify, notify_dispatch), then the
    # exchange the name says (get_dispatch_layout is the dispatch's)
    kinds = {"notify": sum("notify" in n for n in ep),
             "dispatch": sum("dispatch" in n and "notify" not in n for n in ep),
             "combine": sum("combine" in n and "notify" not in n for n in ep)}
    r = run_kind(load(DEEPSEEK))
    assert r.mode == "training" and r.parallel == ["expert"]
    assert r.evidence["backward_ops"] > 0
    got = {k["kind"]: k["count"] for k in r.evidence["collectives"]["by_kind"]}
    assert got == kinds == {"notify": 16, "dispatch": 12, "combine": 8}
    assert not any(e["name"].startswith("nccl") for e in ev if e.get("cat") == "kernel")


@pytest.mark.parametrize("path,mode,optimizer", [
    (H7, "inference", 0),   # OWLv2 inference on an H100
    (H1, "training", 12),   # ResNet-50 on a V100: 6 SGD steps and 6 zero_grads
])
def test_one_device_runs(path, mode, optimizer):
    ev = _events(path)
    names = [e["name"] for e in ev if str(e.get("cat")).lower() in (
        "cpu_op", "operator", "user_annotation")]
    assert sum(bool(re.match(r"Optimizer\.(step|zero_grad)#", n)) for n in names) == optimizer
    assert any("Backward" in n for n in names) == (mode == "training")
    assert not any(e["name"].startswith("nccl") for e in ev)
    r = run_kind(load(path))
    assert (r.mode, r.parallel) == (mode, [])
    assert r.evidence["optimizer_ops"] == optimizer
    assert r.line().endswith("no collectives")


@pytest.mark.parametrize("name", ["resnet_s5", "alexnet_s1", "alexnet_s3tune"])
def test_keras_windows_are_training(name):
    """TF 2 / Keras training windows: the kernels of the Adam update and the gradient ops,
    counted from the sibling Chrome trace the same profiler wrote (one correlation id per
    kernel)."""
    with gzip.open(shared(KERAS / f"{name}.trace.json.gz"), "rt") as f:
        doc = json.load(f)
    adam = {e["args"]["correlation_id"] for e in doc["traceEvents"]
            if "ApplyAdamKernel" in e.get("name", "") and "correlation_id" in e.get("args", {})}
    r = run_kind(load(shared(KERAS / f"{name}.xplane.pb")))
    assert r.mode == "training" and r.parallel == []
    assert r.evidence["optimizer_kernels"] == len(adam) > 0
    assert r.evidence["backward_kernels"] > 0
    assert "ResourceApplyAdam" in r.evidence["examples"]


def _input_trace(*extra: dict):
    """A 1000 ns step whose first 300 ns the device idles in the step's own `data` range
    (no DataLoader), one framework op, then a GEMM."""
    from tests.handmade import row, trace

    return trace(row("step", "ProfilerStep#1", 0, 1000, step=1),
                 row("annotation", "data", 0, 300),
                 row("op", "aten::mm", 300, 700),
                 row("kernel", "volta_sgemm_128x64_nn", 300, 700), *extra)


def test_input_remedy_fits_the_mode():
    """No DataLoader in the trace: an inference run is told to prepare its inputs beside
    the step, not to give a DataLoader workers; with a backward range, the run is training
    and gets the DataLoader's remedy."""
    from tests.handmade import row

    inference = _rule(Context(_input_trace()), "input_pipeline")
    assert Context(_input_trace()).run.mode == "inference"
    assert "prepare the next inputs" in inference.action
    assert "num_workers" not in inference.action
    trained = _input_trace(row("annotation", "backward", 900, 100))
    assert Context(trained).run.mode == "training"
    assert "num_workers" in _rule(Context(trained), "input_pipeline").action


def test_llama_streams_and_gaps_fit_an_inference_forward():
    """Rank 0's NCCL kernels run on a stream of their own (raw: no other kernel on it):
    the streams finding says to give them work to overlap, not to merge the streams;
    its long idle gaps are not told to look for checkpointing."""
    path = shared(LLAMA / "llama_trace_4layers0_with_annotations.json")
    streams: dict[int, set[bool]] = {}
    for e in _events(path):
        if e.get("cat") == "kernel":
            streams.setdefault(e["args"]["stream"], set()).add(e["name"].startswith("nccl"))
    only_nccl = sum(kinds == {True} for kinds in streams.values())
    assert len(streams) == 2 and only_nccl == 1
    ctx = Context(load(path))
    s = _rule(ctx, "streams_never_overlap")
    assert s.figures["collective_streams"] == only_nccl
    assert "not fewer streams" in s.action and "launch the work from one stream" not in s.action
    gaps = _rule(ctx, "long_gaps")
    assert "checkpointing" not in gaps.action and "preparing inputs" in gaps.action
