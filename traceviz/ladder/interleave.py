"""Capture a ladder: every rung in every mode, the repeats interleaved (A B C A B C ...)
so that a burst of load or a slow process hits one repeat of a rung, not all of them; then
the table is read back from the folders written (``read.py``)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path

from traceviz.errors import TraceVizError
from traceviz.ladder.read import read_rungs, rung_dir
from traceviz.ladder.rungs import RUNGS, Ladder, Rung
from traceviz.runners.presets import Workload

OnRun = Callable[[int, int, str], None]  # (k, of n, "rung mode, repeat r")


def plan(rungs: tuple[Rung, ...], modes: tuple[str, ...], repeats: int
         ) -> list[tuple[int, Rung, str]]:
    """(repeat, rung, mode) in the order they run: whole ladders one after another."""
    return [(rep, rung, mode) for rep in range(repeats) for rung in rungs for mode in modes
            if not (mode == "graph" and rung.no_graph)]


def run_ladder(workload: Workload, device: str, out: Path, rungs: tuple[Rung, ...] = RUNGS,
               modes: tuple[str, ...] = ("eager",), repeats: int = 1, warmup: int = 2,
               max_warmup: int = 15, steps: int = 10, profile_steps: int = 2,
               on_start: OnRun | None = None) -> Ladder:
    """Capture every (repeat, rung, mode); a failing one is recorded and the ladder goes on.
    The folders: ``out/<rung>[-graph]/``, or ``out/repeat-K/<rung>[-graph]/``."""
    from traceviz.capture.parent import CaptureRequest, run_capture
    from traceviz.files.runclaim import prepare_run_dir
    from traceviz.ladder.predict import predict
    from traceviz.runners import VARIANTS

    errors: dict[tuple[str, str], list[str]] = {}
    notes: dict[str, list[str]] = {}
    traces: dict[str, object] = {}
    todo = plan(rungs, modes, repeats)
    for k, (rep, rung, mode) in enumerate(todo, 1):
        if on_start:
            label = f"{rung.variant}{'' if mode == 'eager' else ' ' + mode}"
            on_start(k, len(todo), label + (f", repeat {rep + 1}" if repeats > 1 else ""))
        if not VARIANTS[rung.variant].runs_on(device):
            errors.setdefault((rung.variant, mode), []).append(
                f"runs only on {', '.join(VARIANTS[rung.variant].devices)}")
            continue
        run_dir = rung_dir(out / f"repeat-{rep + 1}" if repeats > 1 else out, rung.variant,
                           mode)
        req = CaptureRequest(rung.variant, workload, device, warmup=warmup,
                             max_warmup=max_warmup, steps=steps, profile_steps=profile_steps,
                             graph_replay=mode == "graph")
        try:
            # the ladder's folder was checked (or --force given) before the first rung
            prepare_run_dir(run_dir, force=True)
            cap = run_capture(req, run_dir, on_event=partial(_note, notes=notes.setdefault(
                rung.variant, [])))
        except TraceVizError as e:
            errors.setdefault((rung.variant, mode), []).append(str(e))
            continue
        if mode == "eager":
            traces[rung.variant] = cap.trace  # the latest repeat's, for whatif
    results, w, dev, read_notes = read_rungs(out, rungs, modes, errors)
    for r in results:
        r.notes = sorted(set(notes.get(r.rung.variant, [])))
    predict(results, w or workload.to_dict(), modes, traces)
    return Ladder(w or workload.to_dict(), dev or device, str(out), repeats, modes, results,
                  read_notes)


def _note(event: dict, notes: list[str]) -> None:
    if event.get("event") == "note":
        notes.append(str(event.get("message")))
