"""Advice on copies the step waits for (theme ``copies``): host <-> device copies that no
kernel overlaps on their device, inside the windows (``analyses/summary/exposed_copies.py``
measures them). Nothing computes while they run, so the step is that much longer than its
work: an input batch copied at the start of each step instead of beside the step before.
``rules.py`` registers the rule."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from traceviz.analyses.advice.actions import remedy
from traceviz.analyses.advice.finding import Finding
from traceviz.analyses.summary.exposed_copies import ExposedCopies, exposed_copies
from traceviz.units import fmt_ns, fmt_pct, plural

if TYPE_CHECKING:  # the rules take it; advising.py makes it from the rules' registry
    from traceviz.analyses.advice.advising import Context

SERIALIZED_SHARE = 0.05  # copy time no kernel overlaps / span: a twentieth of the step
_WORDS = {"HtoD": "host to device", "DtoH": "device to host"}


def _mb(n: int) -> str:
    # decimal units, as the GB/s beside them
    return f"{n / 1e6:,.1f} MB" if n >= 100_000 else f"{n / 1e3:,.1f} kB" if n >= 1000 \
        else f"{n} B"


def _gbs(nbytes: int, ns: int) -> str:
    return f"{nbytes / ns:,.1f} GB/s" if ns > 0 and nbytes > 0 else "size not recorded"


def serialized_copies(ctx: Context) -> Finding | None:
    """Host <-> device copies that no kernel overlaps take >= 5% (``SERIALIZED_SHARE``) of the
    span: each could run beside the compute of the step before (prefetched to the
    device), off the step's path."""
    s = ctx.summary
    if s.cpu_trace or not s.span_ns or s.inputs is None:
        return None
    c = exposed_copies(ctx.trace, s.inputs.work, s.inputs.windows)
    share = c.exposed_ns / s.span_ns
    if c.empty or share < SERIALIZED_SHARE:
        return None
    rows = c.rows
    per = f"{fmt_ns(c.exposed_ns / ctx.steps)} per step" if ctx.steps else \
        fmt_ns(c.exposed_ns)
    evidence = [f"{plural(len(rows), 'host-device copy', 'host-device copies')} run with no "
                f"kernel on their device for {per}, {fmt_pct(share)} of the "
                f"{'step' if ctx.steps else 'span'}"]
    evidence += _by_direction(c)
    big = rows.loc[rows["dur_ns"].idxmax()]
    like = (rows["name"] == big["name"]) & (rows["bytes"] == big["bytes"])
    each = ctx.steps > 1 and int(like.sum()) == ctx.steps
    evidence.append(f"the longest: {big['name']}, {_mb(int(big['bytes']))} in "
                    f"{fmt_ns(int(big['dur_ns']))} ({_gbs(int(big['bytes']), int(big['dur_ns']))})"
                    + (f", one like it in each of the {ctx.steps} steps" if each else ""))
    if ctx.bound.by == "device":
        rest = max(s.busy_ns - c.exposed_ns, 0) / s.span_ns
        evidence.append(f"the device verdict counts this time as busy: its work without "
                        f"these copies fills {fmt_pct(rest)} of the span")
    h2d = rows[rows["direction"] == "HtoD"]
    room = int(h2d.drop_duplicates(["device", "step"])["compute_ns"].sum())
    if int(h2d["dur_ns"].sum()) > room:
        evidence.append(f"the kernels run {fmt_ns(room)} beside which the host-to-device "
                        f"copies ({fmt_ns(int(h2d['dur_ns'].sum()))}) could run: copied "
                        "ahead, at most that much of them hides; the rest takes fewer or "
                        "smaller copies (data kept on the device)")
    figures = {"count": len(rows), "bytes": int(rows.loc[rows["bytes"] > 0, "bytes"].sum()),
               "exposed_ns": c.exposed_ns, "share": share,
               "gbs": _rate(rows), "directions": sorted(set(rows["direction"]))}
    saving = ctx.saving_of("overlap_copies")
    if saving is not None and saving <= 0:
        evidence.append("the overlap_copies replay predicts no gain here: hidden behind the "
                        "kernels beside them, they do not move the step's end")
        saving = None
    return Finding(
        "serialized_copies",
        f"Copies stall the device {fmt_pct(share)} of the {'step' if ctx.steps else 'span'}",
        evidence, _action(ctx, c), saving, "overlap_copies" if saving is not None else None,
        figures)


def _rate(rows: pd.DataFrame) -> float | None:
    sized = rows[rows["bytes"] > 0]
    ns = int(sized["dur_ns"].sum())
    return float(sized["bytes"].sum() / ns) if ns else None


def _by_direction(c: ExposedCopies) -> list[str]:
    """One line per direction: copies, bytes, time no kernel overlaps, bandwidth."""
    out, small = [], 0
    for d, g in c.rows.groupby("direction", sort=False):
        if g["exposed_ns"].sum() < 0.01 * c.exposed_ns:  # a few bytes of a loss value
            small += len(g)
            continue
        sized = g[g["bytes"] > 0]
        pageable = int(g["name"].str.contains("Pageable", regex=False).sum())
        out.append(f"{_WORDS.get(str(d), d)}: {plural(len(g), 'copy', 'copies')}, "
                   f"{_mb(int(sized['bytes'].sum()))}, {fmt_ns(int(g['exposed_ns'].sum()))} "
                   f"no kernel overlaps, "
                   f"{_gbs(int(sized['bytes'].sum()), int(sized['dur_ns'].sum()))}"
                   + (f"; {pageable} from pageable memory" if pageable else ""))
    if small:
        out.append(f"and {plural(small, 'copy', 'copies')} of the other direction, under 1% "
                   "of that time")
    return out


# a step's input is a batch or two: more host-to-device copies per step and device carrying
# most of their time are data brought in piece by piece (weights or activations offloaded)
BATCH_COPIES = 2


def _batches(ctx: Context, c: ExposedCopies) -> bool:
    """The exposed host-to-device time is input batches: a few copies per step carry
    90% of it."""
    h2d = c.rows[c.rows["direction"] == "HtoD"].sort_values("exposed_ns", ascending=False)
    if h2d.empty:
        return True
    share = h2d["exposed_ns"].cumsum() / h2d["exposed_ns"].sum()
    carry = int((share < 0.9).sum()) + 1
    return carry <= BATCH_COPIES * max(ctx.steps, 1) * h2d["device"].nunique()


def _action(ctx: Context, c: ExposedCopies) -> str:
    back = c.rows.loc[c.rows["direction"] == "DtoH", "exposed_ns"].sum() > \
        c.rows.loc[c.rows["direction"] == "HtoD", "exposed_ns"].sum()
    tail = ("; results copied back the same way: into pinned memory, asynchronously, read "
            "a step later") if back else ""
    none = ("copy from pinned host buffers (cudaHostAlloc, or cudaHostRegister on existing "
            "ones) with cudaMemcpyAsync on a stream of its own, one buffer ahead of the "
            "compute stream (double buffering, ordered by events), so the copies run beside "
            "the kernels instead of between them" + tail)
    if not _batches(ctx, c):
        return remedy(
            ctx,
            torch="many copies per step bring data in piece by piece (weights or activations "
                  "offloaded to the host): keep them on the device where memory allows, "
                  "else copy the next piece from pinned memory with .to(device, "
                  "non_blocking=True) on a side CUDA stream while the current one computes"
                  + tail,
            tf="many copies per step bring data in piece by piece: keep the tensors on the "
               "device (variables and constants placed on the GPU, not fed each step), or "
               "stage them ahead with tf.data.experimental.prefetch_to_device" + tail,
            jax="many copies per step bring data in piece by piece: keep the arrays on the "
                "device (jax.device_put once, outside the step), or put the next piece "
                "ahead from a prefetch thread" + tail,
            none=none)
    return remedy(
        ctx,
        torch="prefetch the input batches to the device beside the step before: pinned "
              "host memory (DataLoader(pin_memory=True)), then .to(device, "
              "non_blocking=True) issued one batch ahead on a side CUDA stream (a "
              "prefetcher; or NVIDIA DALI), so the copy of batch n+1 runs while batch n "
              "computes" + tail,
        tf="stage the input batches on the device ahead of the step: end the tf.data "
           "pipeline with tf.data.experimental.prefetch_to_device('/gpu:0') (or "
           "copy_to_device then prefetch; under a distribution strategy, dataset.prefetch "
           "last: its distributed dataset prefetches to the devices), so the copy of batch "
           "n+1 runs while batch n computes" + tail,
        jax="put the batches on the device ahead of the step: jax.device_put from a "
            "prefetch thread, or flax.jax_utils.prefetch_to_device(iterator, 2), so the "
            "copy of batch n+1 runs while batch n computes" + tail,
        mxnet="load batches into pinned memory (gluon.data.DataLoader(pin_memory=True)) "
              "and copy them with as_in_context one batch ahead, so the copy of batch n+1 "
              "runs while batch n computes" + tail,
        none=none)
