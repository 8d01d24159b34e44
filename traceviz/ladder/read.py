"""A ladder folder read back: each rung's run folders (one per repeat and mode) into
``Timing``s, and the speed-ups between them. ``traceviz ladder`` computes its table from
the folders it has just written, and ``ladder --from DIR`` from a folder written before
(or copied from another machine, raw traces without ``trace.parquet``).

Layout: ``DIR/<rung>/`` (eager) and ``DIR/<rung>-graph/`` (graph-replayed) for one repeat;
``DIR/repeat-1/``, ``DIR/repeat-2/``, ... each holding those for several.
"""

from __future__ import annotations

import re
import statistics
from pathlib import Path
from typing import Any

from traceviz.errors import TraceVizError
from traceviz.files.runfolder import check_bench, read_record
from traceviz.ladder.rungs import (
    BASELINE,
    BY_NAME,
    MODES,
    NO_GRAPH,
    NOT_CAPTURED,
    Ladder,
    Rung,
    RungResult,
    Timing,
)

NOISY_CV = 0.10  # the repeats' medians vary more than this: NOISY, as one run's batches


def repeat_dirs(root: Path) -> list[Path]:
    """``root/repeat-K`` in K's order, or ``root`` itself (one repeat)."""
    found = [(int(m.group(1)), p) for p in root.iterdir() if p.is_dir()
             and (m := re.fullmatch(r"repeat-(\d+)", p.name))] if root.is_dir() else []
    return [p for _, p in sorted(found)] or [root]


def rung_dir(repeat_dir: Path, variant: str, mode: str) -> Path:
    return repeat_dir / (variant if mode == "eager" else f"{variant}-{mode}")


def folder_modes(root: Path) -> tuple[str, ...]:
    """The modes a ladder folder holds: eager, and graph where a ``-graph`` folder is."""
    dirs = [p for d in repeat_dirs(root) for p in d.iterdir() if p.is_dir()]
    return tuple(m for m in MODES if m == "eager" or any(p.name.endswith(f"-{m}")
                                                         for p in dirs))


def _one_run(run_dir: Path, variant: str, mode: str) -> dict[str, Any] | str:
    """One repeat's figures of a rung, or why there are none."""
    if not run_dir.is_dir():
        return NOT_CAPTURED
    bench = read_record(run_dir / "bench.json")
    if bench is None:
        return f"{run_dir.name}/ has no bench.json (its capture failed or was stopped)"
    check_bench(bench, run_dir / "bench.json")
    config = read_record(run_dir / "config.json") or {}
    model = config.get("model", variant)
    if model != variant:
        return f"{run_dir.name}/ holds a {model} run, not {variant}"
    if bool(config.get("graph_replay")) != (mode == "graph"):
        return f"{run_dir.name}/ is not a {mode} run"
    t = bench.get("time_per_batch_s") or {}
    if not isinstance(t.get("median"), (int, float)):
        return f"{run_dir.name}/bench.json has no timed median"
    return {"dir": str(run_dir), "median": float(t["median"]), "min": t.get("min"),
            "max": t.get("max"), "cv": t.get("cv"), "noisy": bool(t.get("noisy")),
            "first_call": bench.get("first_call_s"),
            "compile": bench.get("framework_compile_s"),
            "compile_note": bench.get("framework_compile_note") or "",
            "timing": bench.get("timing") or "wall",
            "workload": config.get("workload"), "device": config.get("device")}


def _timing(runs: list[dict[str, Any]], errors: list[str]) -> Timing:
    t = Timing(error="; ".join(dict.fromkeys(errors)) if not runs else "")
    if not runs:
        return t
    medians = [r["median"] for r in runs]
    t.run_dirs = [r["dir"] for r in runs]
    t.medians_s = medians
    t.median_s = statistics.median(medians)
    lows = [r["min"] for r in runs if isinstance(r["min"], (int, float))]
    highs = [r["max"] for r in runs if isinstance(r["max"], (int, float))]
    t.min_s, t.max_s = (min(lows) if lows else None), (max(highs) if highs else None)
    if len(medians) > 1:
        t.spread_s = max(medians) - min(medians)
        t.cv = statistics.pstdev(medians) / statistics.fmean(medians)
    else:
        t.cv = runs[0]["cv"]
    t.noisy = any(r["noisy"] for r in runs) or (len(medians) > 1 and (t.cv or 0) > NOISY_CV)
    first = runs[0]
    t.first_call_s, t.compile_s = first["first_call"], first["compile"]
    t.compile_note, t.timing = first["compile_note"], first["timing"]
    if errors:  # some repeats failed: say so beside the figures of those that ran
        t.error = f"{len(errors)} of {len(errors) + len(runs)} repeats failed: {errors[0]}"
    return t


def speedups(results: list[RungResult]) -> None:
    """Per mode: over the baseline, over the rung below, over the rung that measures the
    optimization alone; a step smaller than the repeats' spread is not resolved."""
    by = {r.rung.variant: r for r in results}
    for r in results:
        for mode, t in r.modes.items():
            if not t.ran:
                continue

            def other(name: str | None, mode: str = mode) -> Timing | None:
                o = by.get(name or "")
                got = o.modes.get(mode) if o else None
                return got if got and got.ran else None

            base, below, alone = other(BASELINE), other(r.rung.below), other(r.rung.alone_over)
            assert t.median_s is not None
            t.x_over_baseline = base.median_s / t.median_s if base and base.median_s else None
            t.x_over_below = below.median_s / t.median_s if below and below.median_s else None
            t.x_alone = alone.median_s / t.median_s if alone and alone.median_s else None
            if below and below.median_s and t.spread_s is not None \
                    and below.spread_s is not None:
                t.resolved = abs(below.median_s - t.median_s) > max(t.spread_s,
                                                                     below.spread_s)


def read_rungs(root: Path, rungs: tuple[Rung, ...], modes: tuple[str, ...],
               errors: dict[tuple[str, str], list[str]] | None = None
               ) -> tuple[list[RungResult], dict[str, Any] | None, str | None, list[str]]:
    """Every rung's timings from the folder; ``errors``: the captures' own messages, by
    (variant, mode), for the repeats that failed. Returns the results, the workload and
    device the rungs ran (the baseline's, else the first's) and notes."""
    reps = repeat_dirs(root)
    results: list[RungResult] = []
    workload: dict[str, Any] | None = None
    device: str | None = None
    shapes: dict[str, Any] = {}
    for rung in rungs:
        res = RungResult(rung)
        results.append(res)
        for mode in modes:
            if mode == "graph" and rung.no_graph:
                res.modes[mode] = Timing(error=f"{NO_GRAPH}: {rung.no_graph}")
                continue
            runs, errs = [], list((errors or {}).get((rung.variant, mode), []))
            for rep in reps:
                got = _one_run(rung_dir(rep, rung.variant, mode), rung.variant, mode)
                if isinstance(got, str):
                    if not errors or (rung.variant, mode) not in errors:
                        errs.append(got)
                    continue
                runs.append(got)
                shapes.setdefault(rung.variant, got["workload"])
                if rung.variant == BASELINE or workload is None:
                    workload, device = got["workload"], got["device"]
            res.modes[mode] = _timing(runs, errs)
    notes = []
    odd = sorted(v for v, w in shapes.items() if workload is not None and w != workload)
    if odd:
        notes.append(f"{', '.join(odd)} ran another shape than {BASELINE} (see their "
                     "config.json): their speed-ups compare different work")
    speedups(results)
    return results, workload, device, notes


def read_ladder(root: Path, rungs: tuple[Rung, ...] | None = None,
                modes: tuple[str, ...] | None = None) -> Ladder:
    """``ladder --from DIR``: the table of a ladder folder, without capturing."""
    from traceviz.ladder.predict import predict

    if not root.is_dir():
        raise TraceVizError(f"{root}: not a folder (ladder --from reads the folder "
                            "`traceviz ladder --out` wrote)")
    modes = modes or folder_modes(root)
    present = {p.name.removesuffix("-graph") for d in repeat_dirs(root) for p in d.iterdir()
               if p.is_dir()}
    asked = {r.variant for r in (rungs or tuple(BY_NAME.values())) if r.variant in present}
    if not asked:
        raise TraceVizError(f"{root}: no rung folders here ({', '.join(BY_NAME)}, or "
                            "repeat-N/ folders holding them)")
    # every rung present is read: the speed-ups and predictions of the asked ones need
    # the rungs below them
    every = tuple(r for r in BY_NAME.values() if r.variant in present)
    results, workload, device, notes = read_rungs(root, every, modes)
    if workload is None:
        raise TraceVizError(f"{root}: no rung here has a readable run (bench.json with a "
                            "timed median)")
    predict(results, workload, modes, only=asked)
    results = [r for r in results if r.rung.variant in asked]
    return Ladder(workload, device or "?", str(root), len(repeat_dirs(root)), modes,
                  results, notes)
