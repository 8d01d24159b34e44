"""The LSTM optimization ladder of the CUDA LSTM study ("Optimizing Performance of
Recurrent Neural Networks on GPUs"): each rung captured, its speed-up over the 8-GEMM
baseline beside the study's figure and what ``whatif`` predicts for it.

The study's shape: 4 layers, seq 100, hidden 512, batch 64, forward (the ``seq100``
preset); a CPU run is scaled down unless the full shape is asked for.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from traceviz.errors import TraceVizError
from traceviz.runners.presets import Workload, make_workload

BASELINE = "naive8_torch"
PRESET = "seq100"
# the study's whole ladder, every rung together, over its 8-GEMM baseline
STUDY_ALL = 7.98
# the factorized LSTM's study figure: 42.8 -> 8.36 ms at hidden 256, seq 100
STUDY_FACTORIZED = 42.8 / 8.36


@dataclass(frozen=True)
class Rung:
    variant: str
    what: str
    base: str | None = None       # the rung below: the study's figure is over it
    study: float | None = None    # the study's speed-up over ``base``
    study_note: str = ""
    scenario: str | None = None   # the whatif scenario, on ``base``'s trace, for this rung
    no_prediction: str = ""       # why whatif predicts nothing for it


RUNGS: tuple[Rung, ...] = (
    Rung(BASELINE, "8 GEMMs per step (the baseline)",
         no_prediction="the baseline"),
    Rung("fine_torch", "combined GEMMs: 2 per step", BASELINE, 2.0,
         no_prediction="no whatif scenario merges GEMMs"),
    Rung("streams_torch", "+ input and recurrent GEMMs on separate streams", "fine_torch", 1.82,
         no_prediction="no whatif scenario moves work onto other streams"),
    Rung("fused_torch", "+ fused pointwise ops, all steps' input GEMMs in one",
         "streams_torch", 1.2, scenario="fuse_pointwise"),
    Rung("transposed_torch", "+ pre-transposed weights", "fused_torch", 1.063,
         no_prediction="no whatif scenario changes a weight's layout"),
    Rung("wavefront_torch", "+ many-layer (wavefront) scheduling", "transposed_torch", 1.30,
         f"all rungs together: {STUDY_ALL}x",
         no_prediction="no whatif scenario reschedules layers"),
    Rung("factorized_torch", "factorized LSTM, rank hidden/4 (another model)", "fused_torch",
         STUDY_FACTORIZED, "42.8 -> 8.36 ms at hidden 256, seq 100, over its dense LSTM",
         scenario="gemm_speedup"),
    Rung("compile_full_torch", "torch.compile of the whole model (automatic)", "fine_torch",
         None, f"the question: how near the hand-made {STUDY_ALL}x?", scenario="cuda_graphs"),
)


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
class RungResult:
    rung: Rung
    run_dir: str
    error: str = ""
    median_s: float | None = None
    min_s: float | None = None
    max_s: float | None = None
    cv: float | None = None
    noisy: bool | None = None
    first_call_s: float | None = None
    compile_s: float | None = None
    speedup: float | None = None        # over the baseline, measured
    step: float | None = None           # over the rung's base, measured
    predicted: float | None = None      # over the baseline, whatif's
    prediction_note: str = ""
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


OnRung = Callable[[int, int, str], None]


def run_ladder(workload: Workload, device: str, out: Path, rungs: tuple[Rung, ...] = RUNGS,
               warmup: int = 2, max_warmup: int = 15, steps: int = 10,
               profile_steps: int = 2, on_start: OnRung | None = None) -> list[RungResult]:
    """Capture every rung (a failing one is recorded and the ladder goes on), then its
    speed-ups and whatif's predictions."""
    from traceviz.capture import CaptureRequest, prepare_run_dir, run_capture
    from traceviz.runners import VARIANTS

    results: list[RungResult] = []
    traces: dict[str, Any] = {}
    for k, rung in enumerate(rungs, 1):
        run_dir = out / rung.variant
        res = RungResult(rung, str(run_dir))
        results.append(res)
        if on_start:
            on_start(k, len(rungs), rung.variant)
        if not VARIANTS[rung.variant].runs_on(device):
            res.error = f"runs only on {', '.join(VARIANTS[rung.variant].devices)}"
            continue
        req = CaptureRequest(rung.variant, workload, device, warmup=warmup,
                             max_warmup=max_warmup, steps=steps, profile_steps=profile_steps)
        try:
            # the ladder's folder was checked (or --force given) before the first rung
            prepare_run_dir(run_dir, force=True)
            cap = run_capture(req, run_dir, on_event=partial(_note, res=res))
        except TraceVizError as e:
            res.error = str(e)
            continue
        b = cap.bench
        t = b["time_per_batch_s"]
        res.median_s, res.min_s, res.max_s = t["median"], t["min"], t["max"]
        res.cv, res.noisy = t.get("cv"), t.get("noisy")
        res.first_call_s, res.compile_s = b.get("first_call_s"), b.get("framework_compile_s")
        traces[rung.variant] = cap.trace
    _speedups(results)
    _predict(results, traces, workload)
    return results


def _note(event: dict, res: RungResult) -> None:
    if event.get("event") == "note":
        res.notes.append(str(event.get("message")))


def _speedups(results: list[RungResult]) -> None:
    median = {r.rung.variant: r.median_s for r in results if r.median_s}
    base = median.get(BASELINE)
    for r in results:
        if r.median_s is None:
            continue
        r.speedup = base / r.median_s if base else None
        below = median.get(r.rung.base or "")
        r.step = below / r.median_s if below else None


def _predict(results: list[RungResult], traces: dict[str, Any], w: Workload) -> None:
    """whatif's speed-up over the baseline for the rungs a scenario stands for: the
    baseline's timed step over the scenario's predicted timed step on the base rung's trace
    (the replay with the profiler's host cost taken out, analyses/whatif_timed.py: never
    shorter than the device work it keeps); without a timed step, the base rung's
    speed-up times the scenario's profiled (replayed / predicted) ratio."""
    from traceviz.analyses.whatif import whatif

    by_name = {r.rung.variant: r for r in results}
    for r in results:
        rung = r.rung
        if rung.scenario is None:
            r.prediction_note = rung.no_prediction
            continue
        base = by_name.get(rung.base or "")
        if base is None or rung.base not in traces or base.speedup is None:
            r.prediction_note = f"no {rung.base} capture to replay"
            continue
        scenario = rung.scenario
        if scenario == "gemm_speedup":
            scenario = f"gemm_speedup={factorized_gemm_speedup(w):.3g}"
        s = whatif(traces[rung.base], (scenario,)).scenarios[0]
        if not s.applies or not s.predicted_ns:
            r.prediction_note = f"{scenario}: {s.reason or 'nothing to change'}"
            continue
        baseline = by_name.get(BASELINE)
        if s.timed_step_ns and baseline is not None and baseline.median_s:
            r.predicted = baseline.median_s * 1e9 / s.timed_step_ns
            r.prediction_note = (f"{scenario} on {rung.base}'s trace: "
                                 f"{s.timed_step_ns / 1e6:.1f} ms per timed step")
            continue
        r.predicted = base.speedup * (s.predicted_ns + (s.saving_ns or 0)) / s.predicted_ns
        r.prediction_note = f"{scenario} on {rung.base}'s trace (profiled ratio)"
