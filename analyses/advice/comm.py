"""Advice on communication (theme ``comm``): collectives no computation overlaps, with the
remedies of the way the run is parallel (``runkind.py``): gradient buckets and comm hooks
only for a training run's gradient all-reduce, collective matmuls for tensor parallelism,
the all-to-all's overlap and balance for experts, micro-batches for a pipeline. A first
call's collectives, several times longer than the later ones of their kind, hold NCCL's
set-up (the communicator, its connections), which a warm run does not pay.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from traceviz.analyses.advice.actions import remedy
from traceviz.analyses.advice.bound import COMM_SHARE
from traceviz.analyses.advice.finding import Finding
from traceviz.units import fmt_ns, fmt_pct

if TYPE_CHECKING:  # the rules take it; advising.py makes it from the rules' registry
    from traceviz.analyses.advice.advising import Context

COLD = 3.0             # a first collective this many times its kind's later median
COLD_MIN_NS = 1_000_000
LONGEST_SHARE = 0.25   # one collective's share of the communication time worth naming
NAMES = {"data": "data parallel", "tensor": "tensor parallel", "pipeline": "pipeline",
         "expert": "expert parallel", "embedding": "sharded embeddings",
         "all_to_all": "all-to-all", "": "collectives"}


def communication(ctx: Context) -> Finding | None:
    """Collectives no computation overlaps take >= 25% of the span (``COMM_SHARE``): the
    verdict ``communication``, or a finding beside the verdict that outweighs it."""
    b = ctx.bound
    f = b.figures
    exposed, span = f.get("exposed_communication_ns", 0), f.get("span_ns", 0)
    if not span or exposed < COMM_SHARE * span:
        return None
    c = ctx.summary.communication
    kinds = "" if c is None else ", ".join(
        f"{r.kind} x{r.count:,} {fmt_ns(r.total_ns)}"
        + (f" (busbw {r.busbw_gbs:,.1f} GB/s" + (f", {fmt_pct(r.link_fraction)} of the link"
                                                 if r.link_fraction == r.link_fraction
                                                 and r.link_fraction is not None else "")
           + ")" if r.sized else "")
        for r in c.kinds.head(3).itertuples(index=False))
    title = "Exposed communication bounds the step" if b.by == "communication" else \
        f"Exposed communication takes {fmt_pct(exposed / span)} of the span"
    run = ctx.run
    coll = run.collectives
    cold = first_calls(coll)
    longest = _longest(coll)
    evidence = [
        b.why if b.by == "communication" else
        f"communication no computation overlaps takes {fmt_pct(exposed / span)} of the "
        f"span ({fmt_ns(exposed)}); the step's verdict is {b.by}",
        f"communication kernels run {fmt_ns(f['communication_ns'])} in all, "
        f"{fmt_ns(f['communication_ns'] - exposed)} of it overlapped by computation",
        *([f"by kind: {kinds}"] if kinds else []),
        f"the run: {run.line()}",
        *([longest] if longest else []),
        *([cold] if cold else []),
        "a collective waits for the slowest rank: part of this time is other ranks "
        "arriving late, which no change on this rank removes (`traceviz advise` on the "
        "folder of every rank's trace names the rank that arrives last)"]
    return Finding(
        "communication", title, evidence, _action(ctx, bool(cold)), None, None,
        {"communication_ns": f["communication_ns"], "exposed_ns": exposed,
         "share": exposed / span, "mode": run.mode, "parallel": run.parallel,
         "cold": bool(cold)})


def first_calls(coll: pd.DataFrame) -> str:
    """The first collective of a kind (of 3 or more) that lasted ``COLD`` times the later
    ones' median: a first call, which waits for the other ranks' first calls and may
    hold NCCL's set-up."""
    if coll.empty:
        return ""
    said = []
    for kind, d in coll.groupby("kind", sort=False):  # per kind: a few
        dur = d.sort_values("at_ns", kind="stable")["dur_ns"].to_numpy(np.int64)
        if len(dur) < 3:
            continue
        later = float(np.median(dur[1:]))
        if dur[0] >= COLD * later and dur[0] - later >= COLD_MIN_NS:
            said.append(f"the first {kind} took {fmt_ns(dur[0])}, the later ones "
                        f"{fmt_ns(later)} (median)")
    if not said:
        return ""
    return ("; ".join(said) + ": a first call waits for every rank's own first arrival "
            "and, where the communicator is made lazily, for NCCL's set-up; a warm run "
            "pays neither (the folder of every rank's trace tells a wait from a transfer)")


def _longest(coll: pd.DataFrame) -> str:
    """The longest collective where it alone holds ``LONGEST_SHARE`` of their time."""
    if coll.empty or not coll["dur_ns"].sum():
        return ""
    d = coll.sort_values("at_ns", kind="stable").reset_index(drop=True)
    i = int(d["dur_ns"].to_numpy().argmax())
    top, total = int(d["dur_ns"].iloc[i]), int(d["dur_ns"].sum())
    if top < LONGEST_SHARE * total:
        return ""
    kind = str(d["kind"].iloc[i])
    nth = int((d["kind"].iloc[:i + 1] == kind).sum())
    of = int((d["kind"] == kind).sum())
    return (f"the longest collective: {kind} {nth} of {of}"
            + (" (the last)" if nth == of and of > 1 else "")
            + f", {fmt_ns(top)} = {fmt_pct(top / total)} of the communication time")


def _action(ctx: Context, cold: bool) -> str:
    """The remedies of each way the run is parallel, the one whose collectives took
    longest first; a run placed nowhere gets the ones that fit any collective."""
    coll = ctx.run.collectives
    time = coll.groupby("parallel")["dur_ns"].sum() if len(coll) else pd.Series(dtype=int)
    kinds = [k for k in time.sort_values(ascending=False, kind="stable").index
             if k in REMEDIES] or [""]
    # a run already sequence parallel is not told to be
    seq = ctx.run.evidence.get("sequence_parallel")
    parts = [remedy(ctx, **REMEDIES["tensor_sp" if k == "tensor" and seq else k])
             for k in kinds]
    text = parts[0] if len(parts) == 1 else "; ".join(
        f"{NAMES[k]}: {p}" for k, p in zip(kinds, parts, strict=True))
    if cold:
        text += ("; and profile a warm run (after a few calls): a first call's "
                 "collectives wait for every rank's first call and "
                 + remedy(ctx, torch="hold NCCL's set-up where the communicator is made at "
                                     "the first collective (make it up front: "
                                     "init_process_group(..., device_id=torch.device("
                                     "'cuda', local_rank)))",
                          tf="hold the collectives' set-up"))
    return text


_TP = ("overlap each collective with the matmul beside it (async tensor parallelism: "
       "torch.distributed._symmetric_memory with torch.compile's _micro_pipeline_tp, or "
       "the fused all-gather-matmul and matmul-reduce-scatter ops), issue fewer "
       "collectives ({fewer}), and keep the tensor-parallel group on GPUs joined by NVLink "
       "(without it every collective crosses PCIe)")
_TP_TF = ("overlap each collective with the matmul beside it (XLA's collective matmul: "
          "windowed einsums), issue fewer collectives ({fewer}), and lay the model axis of "
          "the mesh over GPUs joined by NVLink")
REMEDIES: dict[str, dict[str, str]] = {
    # a training run's gradient all-reduce: buckets, hooks, prefetch
    "data": dict(
        torch="overlap the gradient all-reduce with the backward (DDP's bucket_cap_mb and "
              "gradient_as_bucket_view, FSDP's forward/backward prefetch, async "
              "collectives), send fewer and larger messages, compress gradients (DDP comm "
              "hooks), and place ranks that talk most on the same node",
        tf="overlap the gradient all-reduce with the backward (tf.distribute's all-reduce "
           "packing, XLA's async collectives), send fewer and larger messages, and place "
           "ranks that talk most on the same node",
        jax="overlap the gradient reduction with the backward (XLA's async collectives and "
            "latency-hiding scheduler flags), shard to send fewer and larger messages, and "
            "place ranks that talk most on the same node"),
    # collectives between the forward's matmuls; a run already sequence parallel (a
    # reduce-scatter and an all-gather for each all-reduce) is not told to be
    "tensor": dict(
        torch=_TP.format(fewer="sequence parallelism keeps activations sharded between "
                         "them; a lower tensor-parallel degree, or larger chunks per "
                         "collective"),
        tf=_TP_TF.format(fewer="activations kept sharded between layers; a smaller model "
                         "axis")),
    "tensor_sp": dict(
        torch=_TP.format(fewer="the run is sequence parallel already: a lower "
                         "tensor-parallel degree, or larger chunks per collective"),
        tf=_TP_TF.format(fewer="a smaller model axis")),
    "pipeline": dict(
        torch="shrink the pipeline's bubble: more micro-batches per step, an interleaved "
              "schedule (torch.distributed.pipelining's ScheduleInterleaved1F1B), stages "
              "of equal time so none waits for its neighbour, and sends and receives "
              "overlapped with compute (batch_isend_irecv)",
        tf="shrink the pipeline's bubble: more micro-batches per step, a circular "
           "(interleaved) schedule, stages of equal time, and neighbouring stages on "
           "NVLink"),
    "expert": dict(
        torch="overlap the dispatch and combine all-to-alls with computation (DeepEP's "
              "low-latency kernels and their receive hook, or two micro-batches "
              "interleaved so one's exchange runs beside the other's experts), balance "
              "tokens over experts (the router's auxiliary loss, a capacity factor) so no "
              "rank waits for the busiest, and keep expert groups within a node, NVLink "
              "inside and RDMA across (hierarchical all-to-all)",
        tf="overlap the all-to-alls with computation (XLA's async collectives; two "
           "micro-batches interleaved), balance tokens over experts (auxiliary loss, "
           "capacity factor), and keep expert groups within a node"),
    "embedding": dict(
        torch="overlap the embeddings' exchange with the dense layers (TorchRec's "
              "TrainPipelineSparseDist sends the next batch's features while this one "
              "computes), send fewer bytes (TorchRec's quantized communication: "
              "QCommsConfig, fp16/bf16 forward and backward), and shard the largest "
              "tables so that their lookups stay local (the planner's table-wise or "
              "column-wise plans)",
        tf="overlap the embeddings' exchange with the dense layers (prefetch the next "
           "batch's lookups), send fewer bytes (a lower-precision exchange), and shard "
           "the largest tables so that their lookups stay local"),
    "all_to_all": dict(
        torch="overlap the all-to-alls with computation (two micro-batches interleaved, "
              "async collectives), send fewer bytes per call (a lower precision), and keep "
              "the ranks that exchange most within a node on NVLink",
        tf="overlap the all-to-alls with computation (XLA's async collectives), send fewer "
           "bytes per call, and keep the ranks that exchange most within a node"),
    # collectives no rule places (no backward, no matmul beside them): what fits any
    "": dict(
        torch="overlap collectives with computation (async collectives: wait on the work "
              "handle only where the result is needed), send fewer and larger messages, "
              "and place ranks that talk most on the same node, on NVLink",
        tf="overlap collectives with computation (XLA's async collectives), send fewer and "
           "larger messages, and place ranks that talk most on the same node"),
}
