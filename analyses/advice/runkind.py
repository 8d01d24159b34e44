"""What the run is: training or inference, and how it is parallel, each with the evidence
counted, so that a remedy fits the run (an inference forward is told nothing of gradient
buckets).

**Mode.** ``training`` where the trace shows a backward pass or an optimizer step:
backward ops (PyTorch's ``autograd::engine::evaluate_function`` nodes, ``*Backward*``
ops, ``aten::*_backward``, ``AccumulateGrad``; TensorFlow's ``*Grad`` ops and
``*BackpropFilter``, ``gradient_tape/`` scopes; JAX's ``transpose(jvp(...))`` names; a
``backward`` range), kernels of backward ops or named so (``wgrad``, ``bwd``,
``backward``), optimizer steps (``Optimizer.step#``, an ``optimizer`` range, TF's
``Apply*`` ops, fused Adam/SGD kernels). A traceviz capture's own mode (``train``,
``forward``) decides where the trace has one. ``inference`` where the trace records
framework ops and none of that; ``unknown`` where it records no framework op to judge by.
Some names are left out on purpose: a data-gradient kernel (``dgrad``) and TF's
``Conv2DBackpropInput`` also run a transposed convolution's forward.

**Parallel.** The collectives are the communication kernels (a CPU trace: the backend's
host records), each of the kind the host's record of the call around its launch says
(``nccl:all_to_all``, ``c10d::...``: NCCL runs an all-to-all as send/recv kernels), else
its name's. Each is placed by its launch against the backward: per step, the backward's
hull (its first backward row's start to its last one's end); a collective issued before
it is in the forward, inside it during the backward, past it after the backward (an
inference run: all in the forward). Then:

- ``data``: a training run with all-reduces during or after the backward (gradient
  all-reduce), or DDP's or FSDP's own ranges (``DistributedDataParallel``, ``Reducer``,
  ``FullyShardedDataParallel``, ``FSDP``) beside its collectives;
- ``tensor``: all-reduces, all-gathers or reduce-scatters inside the forward (not FSDP's),
  at least half of them between matrix kernels (one before, one after);
- ``pipeline``: send/recv outside an all-to-all, collective-permutes;
- ``expert``: DeepEP's dispatch/combine kernels, or all-to-alls in a run naming experts
  (``moe``, ``expert``, ``router``);
- ``embedding``: all-to-alls in a run of sharded embedding tables (TorchRec, FBGEMM's
  split embeddings, DLRM's pooled all-to-all);
- ``all_to_all``: all-to-alls the trace names neither way.

A kernel whose launch no host record holds (a window cut it) takes the kind the records
give its name elsewhere; in a run of sharded embeddings that names no tensor parallelism,
forward reduce-scatters and backward all-gathers are the tables' row-wise exchanges.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from traceviz.algos.categorical import each, per_distinct
from traceviz.algos.patterns import in_line, in_word
from traceviz.analyses.summary.collectives import comm_rows
from traceviz.table.classify import collective_kind
from traceviz.table.schema import is_in
from traceviz.units import plural

if TYPE_CHECKING:  # the Trace type only: trace.py's notebook API imports analyses
    from traceviz.trace import Trace

# "A\w*B" and "A.*B" as patterns.in_word/in_line pieces: plain, they cost quadratic time
# on a name holding A many times
BACKWARD_OP = re.compile(
    r"^autograd::engine::evaluate_function|Backward\d*$|^aten::\w*_backward|"
    r"Grad(V\d+)?$|" + in_word("BackpropFilter", "*", "$")
    + r"|gradient_tape/|(^|/)gradients/|transpose\(jvp|"
    r"(?i:^#*\s*backward\s*#*$)")
BACKWARD_KERNEL = re.compile(r"(?-i:wgrad|Wgrad)|_bwd|bwd_|backward", re.IGNORECASE)
OPTIMIZER_OP = re.compile(
    r"^(Optimizer\.(step|zero_grad)#|(?i:#*\s*optimizer\s*#*$))|^(Resource)?(Sparse)?Apply"
    r"(Adam|GradientDescent|Momentum|KerasMomentum|RMSProp|CenteredRMSProp|Adagrad\w*|"
    r"Ftrl\w*|Adadelta|AdaMax|ProximalAdagrad|PowerSign|AddSign)\b")
OPTIMIZER_KERNEL = re.compile(
    in_word("Apply(Adam|GradientDescent|Momentum|KerasMomentum|RMSProp|Adagrad|Ftrl|Adadelta|"
            "AdaMax)", "*", "Kernel") + "|"
    + in_line("multi_tensor_apply_kernel", "Adam|SGD|Sgd|Lamb|LAMB|Adagrad|Novograd")
    + r"|fused_?adamw?\b|FusedAdam|_fused_sgd|adam_(update|step)_?kernel")
# who runs the collectives: the wrappers' own ranges and ops
NAMES = {
    "ddp": re.compile(r"DistributedDataParallel|\bReducer\b|reducer::|^DDP"),
    "fsdp": re.compile(r"FullyShardedDataParallel|\bFSDP"),
    "tensor_parallel": re.compile(r"^Redistribute$|DTensor|ColwiseParallel|RowwiseParallel|"
                                  r"(Column|Row)ParallelLinear|VocabParallel"),
    "moe": re.compile(r"moe|MoE|[Ee]xpert|[Rr]outer|deep_?ep|::ep::"),
    "embedding": re.compile(r"All2All_Pooled|fbgemm::|split_embedding|SplitLookup|"
                            r"torchrec|ShardedEmbedding|KeyedJaggedTensor|"
                            r"EmbeddingBagCollection"),
}
# the backend's own record of each collective call, else c10d's ops
_BACKEND_RECORD = re.compile(r"^(nccl|gloo|mpi|ucc|xccl|rccl|hccl):\w")
_C10D = re.compile(r"^c10d::(?!wait|barrier|monitored_barrier|_?allreduce_coalesced_wait)")
_FUNCTIONAL = re.compile(r"^_c10d_functional::(?!wait)")
TP_KINDS = ("all_reduce", "all_gather", "reduce_scatter")
EP_KINDS = ("dispatch", "combine", "notify")
PP_KINDS = ("send_recv", "permute")
BETWEEN_SHARE = 0.5  # tensor parallel: at least half the forward collectives between matmuls


@dataclass(frozen=True)
class RunKind:
    mode: str                      # training | inference | unknown
    parallel: list[str]            # data, tensor, pipeline, expert, embedding, all_to_all
    why: str                       # the mode's evidence, in words
    parallel_why: list[str]        # one clause per parallel kind
    evidence: dict[str, Any] = field(default_factory=dict)
    # one row per collective, in start order: name, kind, kernel_kind (its name's, as
    # the rank arrivals match them), step, at_ns (its launch, host clock), dur_ns,
    # source (where its kind comes from), where (forward | backward | after),
    # between_matmuls, parallel (the kind it is counted under; "" none)
    collectives: pd.DataFrame = field(default_factory=pd.DataFrame, repr=False)

    def line(self) -> str:
        """The run in one line: its mode and how it is parallel, with the counts."""
        return f"{self.mode} ({self.why}); " + ("; ".join(self.parallel_why) or (
            "no collectives" if self.collectives.empty else
            ", ".join(f"{k} x{n:,}" for k, n in self.collectives["kind"].value_counts()
                      .items()) + ": collectives no rule places (no backward, no matmul "
            "beside them)"))

    def to_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "parallel": self.parallel, "why": self.why,
                "parallel_why": self.parallel_why, "evidence": self.evidence}


def run_kind(trace: Trace) -> RunKind:
    """What ``trace``'s run is (see the module's docstring); the advice rules read it
    once, as ``Context.run``."""
    return _run_kind(trace)


def _match(values: pd.Series, rx: re.Pattern[str]) -> np.ndarray:
    return per_distinct(values, each(lambda n: bool(rx.search(n))), fill=False).astype(bool)


def _examples(names: pd.Series, n: int = 3) -> list[str]:
    return [str(x)[:80] for x in names.astype(str).value_counts().head(n).index]


def _run_kind(trace: Trace) -> RunKind:
    ev = trace.events
    host = is_in(ev["kind"], "op", "annotation") & (ev["device"].to_numpy() < 0)
    device = is_in(ev["kind"], "kernel", "memcpy", "memset")
    labelled = device & ev["op"].notna().to_numpy()  # a device row's framework op
    bw_host = host & _match(ev["name"], BACKWARD_OP)
    bw_dev = device & ((labelled & _match(ev["op"], BACKWARD_OP)) |
                       (is_in(ev["kind"], "kernel") & _match(ev["name"], BACKWARD_KERNEL)))
    opt_host = host & _match(ev["name"], OPTIMIZER_OP)
    opt_dev = device & ((labelled & _match(ev["op"], OPTIMIZER_OP)) |
                        _match(ev["name"], OPTIMIZER_KERNEL))
    framework_ops = int(is_in(ev["kind"], "op").sum())
    evidence: dict[str, Any] = {
        "backward_ops": int(bw_host.sum()), "backward_kernels": int(bw_dev.sum()),
        "optimizer_ops": int(opt_host.sum()), "optimizer_kernels": int(opt_dev.sum()),
        "framework_ops": framework_ops, "op_labelled_rows": int(labelled.sum()),
        "examples": _examples(pd.concat([ev["name"][bw_host | opt_host].astype(str),
                                         ev["op"][(bw_dev | opt_dev) & labelled].astype(str)]))}
    workload = trace.meta.get("workload")
    captured = trace.meta.get("mode") or (
        workload.get("mode") if isinstance(workload, dict) else None)
    evidence["capture_mode"] = captured
    mode, why = _mode(evidence, captured)
    # the backward's hull per step, from its host ranges and its device rows' launches
    t0 = ev["ts_ns"].to_numpy(np.int64)
    launch = ev["launch_ts_ns"].to_numpy(dtype=float, na_value=np.nan) \
        if "launch_ts_ns" in ev else np.full(len(ev), np.nan)
    at = np.where(np.isnan(launch), t0, np.nan_to_num(launch)).astype(np.int64)
    end = np.where(bw_host, t0 + ev["dur_ns"].to_numpy(np.int64), at)
    bw = bw_host | bw_dev
    hull = pd.DataFrame({"step": ev["step"].to_numpy(np.int64)[bw], "start": at[bw],
                         "end": end[bw]}).groupby("step").agg(start=("start", "min"),
                                                              end=("end", "max"))
    names = {k: int(_match(ev["name"], rx).sum()) for k, rx in NAMES.items()}
    coll = _collectives(trace, host, at)
    coll["where"] = _placed(coll, hull, bool(bw.any()))
    coll["between_matmuls"] = _between(trace, coll["at_ns"].to_numpy(np.int64), at)
    parallel, clauses, coll["parallel"] = _parallel(mode, coll, names)
    evidence["names"] = names
    tp = coll["parallel"].to_numpy(object) == "tensor"
    evidence["sequence_parallel"] = {"all_gather", "reduce_scatter"} <= set(
        coll["kind"].to_numpy(object)[tp])
    evidence["collectives"] = _coll_evidence(coll)
    return RunKind(mode, parallel, why, clauses, evidence, coll)


def _mode(e: dict[str, Any], captured: Any) -> tuple[str, str]:
    if captured in ("train", "forward"):
        return ("training" if captured == "train" else "inference",
                f"the capture's mode: {captured}")
    bits = [plural(n, w) for n, w in ((e["backward_ops"], "backward op"),
                                      (e["backward_kernels"], "backward kernel"),
                                      (e["optimizer_ops"], "optimizer range or op"),
                                      (e["optimizer_kernels"], "optimizer kernel")) if n]
    if bits:
        return "training", ", ".join(bits)
    if e["framework_ops"] or e["op_labelled_rows"]:
        ops = f"{e['framework_ops']:,} framework ops" if e["framework_ops"] else \
            f"{e['op_labelled_rows']:,} device rows labelled by their framework op"
        return "inference", f"{ops}, no backward op, no optimizer step"
    return "unknown", "no framework ops recorded to tell training from inference"


def _collectives(trace: Trace, host: np.ndarray, at: np.ndarray) -> pd.DataFrame:
    """One row per collective (``summary.comm.comm_rows``: a GPU's communication kernels, a
    CPU trace's host records): kind, step, when it was issued (the launch call, on the
    host's clock) and where its kind comes from. A kernel's kind is the host record of the
    call around its launch where one is there (``nccl:all_to_all``: NCCL runs an
    all-to-all, a reduce-scatter or an all-gather as send/recv kernels), else its name's."""
    rows = comm_rows(trace)
    kind = rows["kind"].to_numpy(object)
    t = at[rows["row"].to_numpy()] if len(rows) else np.zeros(0, np.int64)
    source = np.full(len(rows), "host record" if trace.is_cpu else "kernel name", object)
    if len(rows) and not trace.is_cpu:
        said = _record_kind(trace, host, rows["row"].to_numpy(), t)
        known = said != ""
        kind = np.where(known, said, kind)
        source[known] = "host record"
        # a kernel whose launch no record holds (a window cut it, a link lost) is what
        # the records say its name is elsewhere: NCCL's SendRecv kernel of an all-to-all
        # is no pipeline's send
        names = rows["name"].to_numpy(object)
        said_of = pd.Series(kind[known]).groupby(names[known]).agg(
            lambda k: k.value_counts().index[0]) if known.any() else pd.Series(dtype=object)
        guess = pd.Series(names[~known]).map(said_of).to_numpy(object)
        kind[~known] = np.where(pd.isna(guess), kind[~known], guess)
    return pd.DataFrame({"name": rows["name"].to_numpy(), "kind": kind,
                         "kernel_kind": rows["kind"].to_numpy(object),
                         "step": rows["step"].to_numpy(np.int64), "at_ns": t,
                         "dur_ns": rows["dur_ns"].to_numpy(np.int64), "source": source})


def _record_kind(trace: Trace, host: np.ndarray, rows: np.ndarray, t: np.ndarray
                 ) -> np.ndarray:
    """The kind of the innermost host record of a collective call (the backend's
    ``nccl:...``, ``c10d::...``, ``_c10d_functional::...``) around each kernel's launch
    call on the launching thread; "" where none is."""
    ev = trace.events
    records = host & (_match(ev["name"], _BACKEND_RECORD) | _match(ev["name"], _C10D)
                      | _match(ev["name"], _FUNCTIONAL))
    out = np.full(len(rows), "", object)
    if not records.any():
        return out
    rec = ev[records]
    rkind = per_distinct(rec["name"], each(lambda n: collective_kind(n) or ""), fill="")
    keep = (rkind != "") & (rkind != "other")
    rec, rkind = rec[keep], rkind[keep]
    # the launching thread of each kernel: its launch call's (one launch id, one call)
    calls = ev[is_in(ev["kind"], "runtime") & (ev["launch_id"].to_numpy() >= 0)]
    tid_of = pd.Series(calls["tid"].to_numpy(np.int64),
                       index=calls["launch_id"].to_numpy(np.int64))
    tid_of = tid_of[~tid_of.index.duplicated()]
    tid = pd.Series(ev["launch_id"].to_numpy(np.int64)[rows]).map(tid_of).to_numpy()
    starts = rec["ts_ns"].to_numpy(np.int64)
    ends = starts + rec["dur_ns"].to_numpy(np.int64)
    rtid = rec["tid"].to_numpy(np.int64)
    for thread in np.unique(rtid):  # per launching thread (a few), not per kernel
        mine = rtid == thread
        order = np.argsort(starts[mine], kind="stable")
        s, e, k = starts[mine][order], ends[mine][order], rkind[mine][order]
        # the innermost record around t: the latest start at or before it, still open
        # (records of one thread nest, so the latest open one is the innermost)
        sel = np.flatnonzero(tid == thread)
        i = np.searchsorted(s, t[sel], side="right") - 1
        ok = (i >= 0) & (e[np.maximum(i, 0)] >= t[sel])
        out[sel[ok]] = k[i[ok]]
    return out


def _placed(coll: pd.DataFrame, hull: pd.DataFrame, backward: bool) -> np.ndarray:
    """forward | backward | after, per collective, against its step's backward hull (the
    whole trace's where its step has none)."""
    if not backward or coll.empty:
        return np.full(len(coll), "forward", dtype=object)
    whole = (int(hull["start"].min()), int(hull["end"].max()))
    start = coll["step"].map(hull["start"]).fillna(whole[0]).to_numpy(np.int64)
    stop = coll["step"].map(hull["end"]).fillna(whole[1]).to_numpy(np.int64)
    t = coll["at_ns"].to_numpy(np.int64)
    return np.where(t < start, "forward", np.where(t <= stop, "backward", "after")).astype(
        object)


def _between(trace: Trace, t: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Whether matrix work (gemm, attention) was issued before and after each time."""
    ev = trace.events
    matrix = is_in(ev["category"], "gemm", "attention") & (
        is_in(ev["kind"], "op") if trace.is_cpu else is_in(ev["kind"], "kernel"))
    times = np.sort(at[matrix])
    if not len(times) or not len(t):
        return np.zeros(len(t), bool)
    before = np.searchsorted(times, t, side="left") > 0
    after = np.searchsorted(times, t, side="right") < len(times)
    return before & after


def _parallel(mode: str, coll: pd.DataFrame, names: dict[str, int]
              ) -> tuple[list[str], list[str], np.ndarray]:
    """The parallel kinds, a clause each, and each collective's kind ("" unplaced)."""
    shown, where = coll["kind"].to_numpy(object), coll["where"].to_numpy(object)
    kinds = shown
    if names["embedding"] and not names["tensor_parallel"]:
        # a sharded embedding's row-wise exchanges: reduce-scatter forward, all-gather
        # backward (TorchRec); no tensor parallelism is named beside them
        kinds = np.where(np.isin(kinds, ("all_gather", "reduce_scatter")), "all_to_all",
                         kinds)
    label = np.full(len(coll), "", dtype=object)
    out: list[str] = []
    said: list[str] = []

    def counts(mask: np.ndarray) -> str:
        vc = pd.Series(shown[mask]).value_counts()
        return ", ".join(f"{k} x{n:,}" for k, n in vc.items())

    def add(kind: str, mask: np.ndarray, clause: str) -> None:
        label[mask & (label == "")] = kind
        out.append(kind)
        said.append(clause)

    grads = (kinds == "all_reduce") & (where != "forward")
    sharded = names["fsdp"] > 0 and mode == "training"
    wrapped = np.isin(kinds, TP_KINDS) & bool(sharded or names["ddp"])
    if mode == "training" and (grads.any() or wrapped.any()):
        wrapper = "FSDP" if sharded else "DDP" if names["ddp"] else ""
        # FSDP's gathers and scatters are its own; DDP's, its all-reduces of gradients
        mask = wrapped if sharded or not grads.any() else grads
        add("data", mask, f"data parallel{f' ({wrapper})' if wrapper else ''}: "
            f"{counts(mask)} " + ("during or after the backward" if grads.any() else
                                  "around it"))
    fwd = np.isin(kinds, TP_KINDS) & (where == "forward") & (not sharded)
    between = coll["between_matmuls"].to_numpy(bool)
    if fwd.any() and between[fwd].mean() >= BETWEEN_SHARE:
        # sequence parallelism: a reduce-scatter and an all-gather for each all-reduce
        seq = {"all_gather", "reduce_scatter"} <= set(kinds[fwd])
        add("tensor", fwd, f"tensor parallel{' (sequence parallel)' if seq else ''}: "
            f"{counts(fwd)} inside the forward, {int(between[fwd].sum()):,} of them "
            "between matmuls")
    pp = np.isin(kinds, PP_KINDS)
    if pp.any():
        guessed = (coll["source"].to_numpy(object)[pp] != "host record").all()
        add("pipeline", pp, f"pipeline parallel: {counts(pp)}" + (
            " (send/recv kernels: no host record says whether they are a pipeline's or "
            "an all-to-all's)" if guessed else ""))
    a2a = kinds == "all_to_all"
    ep = np.isin(kinds, EP_KINDS) | (a2a & (names["moe"] > 0))
    if ep.any():
        add("expert", ep, f"expert parallel: {counts(ep)}")
    rest = a2a & ~ep
    if rest.any():
        kind = "embedding" if names["embedding"] else "all_to_all"
        places = pd.Series(where[rest]).value_counts()
        add(kind, rest, ("sharded embeddings" if kind == "embedding" else
                         "all-to-all exchanges (experts, sharded embeddings or "
                         "sequence-parallel attention: the trace names none)")
            + f": {counts(rest)} (" + ", ".join(f"{n:,} {w}" for w, n in places.items())
            + ")")
    return out, said, label


def _coll_evidence(coll: pd.DataFrame) -> dict[str, Any]:
    if coll.empty:
        return {"count": 0, "source": None, "by_kind": []}
    g = coll.groupby("kind", sort=False)
    by = [{"kind": str(k), "count": int(len(d)),
           "parallel": sorted({str(x) for x in d["parallel"] if x}),
           "forward": int((d["where"] == "forward").sum()),
           "backward": int((d["where"] == "backward").sum()),
           "after": int((d["where"] == "after").sum()),
           "between_matmuls": int(d["between_matmuls"].sum())} for k, d in g]
    return {"count": int(len(coll)), "source": str(coll["source"].iloc[0]),
            "by_kind": sorted(by, key=lambda r: -r["count"])}
