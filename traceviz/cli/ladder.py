"""``traceviz ladder``: the CUDA LSTM study's optimization ladder, rung by rung."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import TYPE_CHECKING

from rich.markup import escape

from traceviz.cli.base import Command, json_text, progress_bar, stderr, stdout, width_arg
from traceviz.errors import UsageError

if TYPE_CHECKING:
    from traceviz.ladder.rungs import Ladder

GRAPH_ON_CPU = ("the graph-replayed mode captures each forward pass in a CUDA graph and "
                "needs --device cuda")


class LadderCommand(Command):
    name = "ladder"
    help = ("run the LSTM optimization ladder (naive8 -> combined GEMMs -> streams -> fused -> "
            "transposed -> wavefront, factorized, torch.compile, cuDNN as the reference), "
            "eager and graph-replayed, and print each rung's speed-up beside the study's and "
            "whatif's")

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        # here, not at the top: another command's parser imports no runner
        from traceviz.runners import DEVICES

        p.add_argument("--from", dest="source", type=Path, metavar="DIR",
                       help="re-render a ladder folder written before (no capture)")
        p.add_argument("--device", choices=DEVICES,
                       help="default: cuda when torch sees a GPU, else cpu")
        p.add_argument("--full", action="store_true",
                       help="the study's shape (4 x 512, seq 100, batch 64) on a CPU too "
                            "(default there: batch 16, seq 20)")
        p.add_argument("--rungs", metavar="NAMES",
                       help="comma-separated rungs to run (default: all that run on the "
                            "device); the baseline naive8_torch always runs, and whatif "
                            "predicts a rung from the rung below it when that one runs too")
        p.add_argument("--modes", metavar="MODES",
                       help="eager, graph (each forward captured once in a CUDA graph and "
                            "replayed, timed with CUDA events) or eager,graph (default on a "
                            "GPU; eager on a CPU)")
        p.add_argument("--repeat", type=int, metavar="N",
                       help="runs of the whole ladder, interleaved (default 3 on a GPU, 1 on "
                            "a CPU); the table gives the median of the repeats' medians and "
                            "their spread")
        for size in ("batch", "seq", "hidden", "layers"):
            p.add_argument(f"--{size}", type=int, help=f"override the study's {size}")
        p.add_argument("--warmup", type=int, default=2,
                       help="warm-up batches at least (default 2; more until times settle)")
        p.add_argument("--max-warmup", type=int, default=15)
        p.add_argument("--steps", type=int, default=10, help="timed batches per rung")
        p.add_argument("--profile-steps", type=int, default=2,
                       help="profiled batches per rung (whatif replays them)")
        p.add_argument("--out", type=Path, metavar="DIR",
                       help="where the rungs' run folders go (default runs/ladder-<time>/)")
        p.add_argument("--force", action="store_true",
                       help="reuse a non-empty --out folder (its rung folders are replaced)")
        p.add_argument("--json", action="store_true", help="print one JSON object")
        p.add_argument("--width", type=width_arg, help="terminal width (at least 40 columns)")

    def run(self, args: argparse.Namespace) -> int:
        from traceviz.ladder.rungs import BASELINE, MODES, RUNGS
        from traceviz.runners import default_device

        names = {r.variant for r in RUNGS}
        asked = names if not args.rungs else \
            {n.strip() for n in args.rungs.split(",") if n.strip()} | {BASELINE}
        unknown = sorted(asked - names)
        if unknown:
            raise UsageError(f"{unknown[0]!r} is no rung; the rungs: "
                             f"{', '.join(r.variant for r in RUNGS)}", option="rungs")
        modes = None
        if args.modes:
            modes = tuple(m for m in MODES if m in {s.strip() for s in args.modes.split(",")})
            bad = sorted({s.strip() for s in args.modes.split(",")} - set(MODES))
            if bad or not modes:
                raise UsageError(f"{(bad or [args.modes])[0]!r} is no mode; the modes: "
                                 f"{', '.join(MODES)}", option="modes")
        if args.repeat is not None and args.repeat < 1:
            raise UsageError("is at least 1", option="repeat")
        if args.source is not None:
            return self._render_from(args, tuple(r for r in RUNGS if r.variant in asked), modes)
        for flag in ("warmup", "steps", "profile_steps"):
            least = 0 if flag == "warmup" else 1
            if getattr(args, flag) < least:
                raise UsageError(f"is at least {least}", option=flag)
        device = args.device or default_device()
        if modes is None:
            modes = MODES if device == "cuda" else ("eager",)
        if "graph" in modes and device != "cuda":
            raise UsageError(f"graph: {GRAPH_ON_CPU}", option="modes")
        repeat = args.repeat or (3 if device == "cuda" else 1)
        return self._capture(args, tuple(r for r in RUNGS if r.variant in asked), device,
                             modes, repeat)

    def _capture(self, args: argparse.Namespace, rungs: tuple, device: str,
                 modes: tuple[str, ...], repeat: int) -> int:
        from traceviz.files.runclaim import prepare_run_dir
        from traceviz.ladder.interleave import plan, run_ladder
        from traceviz.ladder.rungs import ladder_workload
        from traceviz.runners import VARIANTS

        rungs = tuple(r for r in rungs if VARIANTS[r.variant].runs_on(device))
        w, notes = ladder_workload(device, args.full, batch=args.batch, seq=args.seq,
                                   hidden=args.hidden, layers=args.layers)
        out = args.out or Path("runs") / f"ladder-{time.strftime('%Y%m%d-%H%M%S')}"
        prepare_run_dir(out, args.force)  # before any rung runs: earlier rungs are kept
        err = stderr()
        for note in notes:
            err.print(f"[yellow]note:[/] {escape(note.replace('--batch/--seq', '--full'))}")
        with progress_bar(err, keep=True) as progress:
            total = len(plan(rungs, modes, repeat))
            task = progress.add_task("ladder", total=total)

            def on_start(k: int, n: int, label: str) -> None:
                progress.update(task, completed=k - 1, description=f"run {k}/{n} {label}")

            ladder = run_ladder(w, device, out, rungs, modes, repeat, warmup=args.warmup,
                                max_warmup=args.max_warmup, steps=args.steps,
                                profile_steps=args.profile_steps, on_start=on_start)
            progress.update(task, completed=total)
        self._print(args, ladder)
        return 0 if ladder.any_ran else 1

    def _render_from(self, args: argparse.Namespace, rungs: tuple,
                     modes: tuple[str, ...] | None) -> int:
        from traceviz.ladder.read import read_ladder

        captured = [f for f in ("device", "full", "batch", "seq", "hidden", "layers", "out",
                                "force", "repeat") if getattr(args, f) not in (None, False)]
        if captured:
            raise UsageError(f"--from re-renders a ladder folder; --{captured[0]} is for a "
                             "capture", option="from")
        self._print(args, read_ladder(args.source, rungs, modes))
        return 0

    @staticmethod
    def _print(args: argparse.Namespace, ladder: Ladder) -> None:
        if args.json:
            print(json_text(ladder.to_dict()))
            return
        from traceviz.render.terminal.ladder_view import ladder_render

        w = ladder.workload
        shape = (f"{w.get('layers')} x {w.get('hidden')}, seq {w.get('seq')}, batch "
                 f"{w.get('batch')}, {w.get('mode')}, {ladder.device}")
        console = stdout(args.width)
        console.print(ladder_render(ladder, f"LSTM optimization ladder: {shape}",
                                    console.width))
        console.print(f"run folders: {ladder.out}", soft_wrap=True)
