"""What mixed precision costs in casts and saves in matrix time (per profiled step)."""

from __future__ import annotations

from dataclasses import dataclass

from traceviz.analyses.compare.runs import MATRIX_CATEGORIES, RunFigures


@dataclass(frozen=True)
class AmpBreakdown:
    """Per-step span difference (AMP - FP32) split into its parts; all ns per step.

    span_delta = cast_added - matrix_saved + idle_change + other, where idle is the span
    not covered by work (host wait and queued idle on a GPU, framework time on a CPU).
    """

    fp32_span_ns: float
    amp_span_ns: float
    cast_added_ns: float
    matrix_saved_ns: float
    idle_change_ns: float
    other_ns: float
    tensor_core_share_fp32: float | None
    tensor_core_share_amp: float | None
    # the unprofiled medians: the span above is the profiled one, whose profiler overhead
    # may differ between the runs
    fp32_time_s: float | None = None
    amp_time_s: float | None = None

    @property
    def span_delta_ns(self) -> float:
        return self.amp_span_ns - self.fp32_span_ns

    def to_dict(self) -> dict[str, float | None | list]:
        """``amp --json``: the breakdown per step (ns), FP32 span to AMP span."""
        return {"fp32_span_ns": self.fp32_span_ns, "amp_span_ns": self.amp_span_ns,
                "span_delta_ns": self.span_delta_ns,
                "parts": [{"part": label, "ns": delta} for label, delta in self.parts()],
                "cast_added_ns": self.cast_added_ns, "matrix_saved_ns": self.matrix_saved_ns,
                "idle_change_ns": self.idle_change_ns, "other_ns": self.other_ns,
                "tensor_core_share_fp32": self.tensor_core_share_fp32,
                "tensor_core_share_amp": self.tensor_core_share_amp,
                "fp32_time_s": self.fp32_time_s, "amp_time_s": self.amp_time_s,
                "unprofiled_change": self.amp_time_s / self.fp32_time_s - 1
                if self.fp32_time_s and self.amp_time_s else None}

    def parts(self) -> list[tuple[str, float]]:
        """FP32 span to AMP span as (label, signed ns per step): a part that grew is
        labelled as grown, one that shrank as saved or shrunk."""
        m = -self.matrix_saved_ns
        return [
            ("casts added" if self.cast_added_ns >= 0 else "casts removed", self.cast_added_ns),
            ("matrix time saved" if m <= 0 else "matrix time grew", m),
            ("idle grew" if self.idle_change_ns > 0 else "idle shrank", self.idle_change_ns),
            ("other grew" if self.other_ns > 0 else "other shrank", self.other_ns),
        ]


def amp_breakdown(fp32: RunFigures, amp: RunFigures) -> AmpBreakdown:
    def per_step(r: RunFigures, value: float) -> float:
        return value / r.per_step

    def matrix(r: RunFigures) -> float:
        return per_step(r, sum(r.category_ns[c] for c in MATRIX_CATEGORIES))

    def idle(r: RunFigures) -> float:
        return per_step(r, r.span_ns - r.busy_ns)

    span_a, span_b = per_step(fp32, fp32.span_ns), per_step(amp, amp.span_ns)
    cast_added = per_step(amp, amp.cast_ns) - per_step(fp32, fp32.cast_ns)
    matrix_saved = matrix(fp32) - matrix(amp)
    idle_change = idle(amp) - idle(fp32)
    other = (span_b - span_a) - cast_added + matrix_saved - idle_change
    return AmpBreakdown(span_a, span_b, cast_added, matrix_saved, idle_change, other,
                        fp32.tensor_core_share, amp.tensor_core_share,
                        fp32.time_per_batch_s, amp.time_per_batch_s)


def differs_only_in_amp(a: RunFigures, b: RunFigures) -> bool:
    """Same model and workload, one FP32 and one AMP: an AMP pair for `compare`."""
    ma, mb = a.meta, b.meta
    return (ma.get("model") is not None and ma.get("model") == mb.get("model")
            and ma.get("workload") == mb.get("workload")
            and ma.get("device_kind") == mb.get("device_kind")
            and (ma.get("amp") is None) != (mb.get("amp") is None))


def amp_pairs(runs: list[RunFigures]) -> list[tuple[RunFigures, RunFigures]]:
    """Every (FP32 run, AMP run) among ``runs`` that differ only in --amp, in run order."""
    return [(a, b) for a in runs for b in runs
            if a is not b and a.meta.get("amp") is None and differs_only_in_amp(a, b)]
