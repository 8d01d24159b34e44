"""The LSTM optimization ladder of the CUDA LSTM study ("Optimizing Performance of
Recurrent Neural Networks on GPUs"): the rungs, what the study says of each, and the
figures a ladder computes for them.

The study gives two kinds of figure: each optimization **alone** over its baseline (combined
GEMMs 2x, streams 1.82x, fused pointwise 1.2x, transposed weights 1.063x, many-layer
scheduling 1.30x) and the **cumulative** speed-up of the combinations (1+2 = 3.74x, +3 =
6.21x, +4 = 6.55x, +5 = 7.98x). The rungs here are built one on another, so each rung's
measured speed-up over the baseline compares with the cumulative figure; a rung compares
with an individual figure only where it adds one optimization to the baseline itself.

The study's shape: 4 layers, seq 100, hidden 512, batch 64, forward (the ``seq100``
preset); a CPU run is scaled down unless the full shape is asked for.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from traceviz.runners.presets import Workload, make_workload

BASELINE = "naive8_torch"
REFERENCE = "cudnn_torch"
PRESET = "seq100"
MODES = ("eager", "graph")
NOT_CAPTURED = "not captured"
NO_GRAPH = "no graph-replayed run"
# the factorized LSTM's figure: 42.8 -> 8.36 ms at hidden 256, seq 100, over its dense LSTM
FACTORIZED_ALONE = 42.8 / 8.36
# what fused_torch changes over streams_torch, as whatif scenarios on streams_torch's trace
FUSED_CHANGE = "fuse_pointwise+batch_input_gemms+drop_stream_sync"


@dataclass(frozen=True)
class Rung:
    variant: str
    what: str
    below: str | None = None       # the rung this one adds its change to
    cumulative: float | None = None  # the study: every optimization up to here, x baseline
    alone: float | None = None     # the study: this rung's optimization alone, x its baseline
    alone_over: str | None = None  # the rung that measures that optimization alone here
    study_note: str = ""
    scenario: str | None = None    # whatif's stand-in for the change, on ``below``'s trace
    no_prediction: str = ""        # why whatif predicts nothing for it
    reference: bool = False        # not a rung: the target the rungs chase

    @property
    def alone_comparable(self) -> bool:
        return self.alone is not None and self.alone_over is not None

    @property
    def no_graph(self) -> str:
        """Why the rung has no graph-replayed run on a GPU ("": it has one): capture's own
        refusal (compile_full_torch replays CUDA graphs of its own)."""
        from traceviz.runners.torch.refusals import graph_replay_refusal

        return graph_replay_refusal(self.variant, "cuda", "forward") or ""


RUNGS: tuple[Rung, ...] = (
    Rung(BASELINE, "8 GEMMs per step (the baseline)", cumulative=1.0,
         no_prediction="the baseline"),
    Rung("fine_torch", "combined GEMMs: 2 per step", BASELINE, 2.0, 2.0, BASELINE,
         scenario="merge_gemms"),
    Rung("streams_torch", "+ input and recurrent GEMMs on separate streams", "fine_torch",
         3.74, 1.82,
         no_prediction="no whatif scenario adds streams (running work side by side is what "
                       "the rung changes)"),
    Rung("fused_torch", "+ fused pointwise ops, all steps' input GEMMs in one",
         "streams_torch", 6.21, 1.2, scenario=FUSED_CHANGE),
    Rung("transposed_torch", "+ pre-transposed weights", "fused_torch", 6.55, 1.063,
         no_prediction="no whatif scenario changes a weight's layout"),
    Rung("wavefront_torch", "+ many-layer (wavefront) scheduling", "transposed_torch", 7.98,
         1.30, no_prediction="no whatif scenario reschedules layers"),
    Rung("factorized_torch", "factorized LSTM, rank hidden/4 (another model)", "fused_torch",
         None, FACTORIZED_ALONE, "fused_torch",
         "42.8 -> 8.36 ms at hidden 256, seq 100, over its dense LSTM", scenario="gemm_speedup"),
    Rung("compile_full_torch", "torch.compile of the whole model (automatic)", "fine_torch",
         study_note="the question: how near the hand-made 7.98x?",
         scenario="fuse_pointwise+cuda_graphs"),
    Rung(REFERENCE, "cuDNN's LSTM (nn.LSTM): the vendor's fused kernels, the target",
         no_prediction="the reference", reference=True),
)
BY_NAME = {r.variant: r for r in RUNGS}


def factorized_gemm_speedup(w: Workload, rank: int | None = None) -> float:
    """Dense over factorized GEMM FLOPs per step, summed over layers: 4H (I_l + H) against
    r (I_l + H) + 4H r; the whatif ``gemm_speedup`` that stands for the factorization."""
    r = rank or max(1, w.hidden // 4)
    widths = [w.input] + [w.hidden] * (w.layers - 1)
    dense = sum(4 * w.hidden * (i + w.hidden) for i in widths)
    return dense / sum(r * (i + w.hidden) + 4 * w.hidden * r for i in widths)


def ladder_workload(device: str, full: bool, batch: int | None = None, seq: int | None = None,
                    hidden: int | None = None, layers: int | None = None
                    ) -> tuple[Workload, list[str]]:
    """The study's shape (``seq100``, forward); on a CPU scaled down (the CPU caps) unless
    ``full`` or sizes are given."""
    # the CPU caps are the only thing the device changes: a full ladder asks for none
    return make_workload(PRESET, "forward", "cuda" if full else device, batch=batch, seq=seq,
                         hidden=hidden, layers=layers)


@dataclass
class Timing:
    """One rung in one mode over the repeats: the median of the repeats' medians, their
    spread, and the speed-ups computed from it."""
    run_dirs: list[str] = field(default_factory=list)
    medians_s: list[float] = field(default_factory=list)   # one per repeat that ran
    median_s: float | None = None      # the median of ``medians_s``
    spread_s: float | None = None      # max - min of ``medians_s`` (None: one repeat)
    min_s: float | None = None         # over every timed batch of every repeat
    max_s: float | None = None
    cv: float | None = None            # of the repeats' medians (one repeat: its batches')
    noisy: bool | None = None          # a repeat said NOISY, or the repeats' CV over 10%
    first_call_s: float | None = None  # the first repeat's
    compile_s: float | None = None
    compile_note: str = ""
    timing: str = "wall"               # "cuda_events" for a graph-replayed run
    error: str = ""
    x_over_baseline: float | None = None   # the baseline's median over this one, same mode
    x_over_below: float | None = None
    x_alone: float | None = None       # over ``alone_over`` (where comparable alone)
    resolved: bool | None = None       # the step from the rung below exceeds both spreads

    @property
    def ran(self) -> bool:
        return self.median_s is not None


@dataclass
class Prediction:
    """whatif's prediction for a rung, in timed time: the scenario that stands for the
    rung's change, replayed on the rung below's eager trace; in graph mode with the
    launches captured in a graph too (``+cuda_graphs``)."""
    scenario: str | None = None
    on: str | None = None              # the rung whose trace it replays
    note: str = ""                     # why there is none, or what it replayed
    eager_step_s: float | None = None
    eager_x: float | None = None       # over the baseline's eager median
    eager_error: float | None = None   # predicted / measured - 1
    graph_step_s: float | None = None
    graph_x: float | None = None
    graph_error: float | None = None
    graph_note: str = ""


@dataclass
class RungResult:
    rung: Rung
    modes: dict[str, Timing] = field(default_factory=dict)
    prediction: Prediction = field(default_factory=Prediction)
    notes: list[str] = field(default_factory=list)

    def timing(self, mode: str) -> Timing | None:
        return self.modes.get(mode)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["rung"]["alone_comparable"] = self.rung.alone_comparable
        return d


@dataclass
class Ladder:
    workload: dict[str, Any]
    device: str
    out: str
    repeats: int
    modes: tuple[str, ...]
    rungs: list[RungResult]
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"workload": self.workload, "device": self.device, "out": self.out,
                "repeats": self.repeats, "modes": list(self.modes),
                "rungs": [r.to_dict() for r in self.rungs], "notes": self.notes}

    @property
    def any_ran(self) -> bool:
        return any(t.ran for r in self.rungs for t in r.modes.values())
