"""``traceviz ladder``: the CUDA LSTM study's optimization ladder, rung by rung."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from traceviz.cli.base import Command, progress_bar, stderr, stdout, width_arg
from traceviz.errors import UsageError
from traceviz.runners import DEVICES, default_device


class LadderCommand(Command):
    name = "ladder"
    help = ("run the LSTM optimization ladder (naive8 -> combined GEMMs -> streams -> fused -> "
            "transposed -> wavefront, factorized, torch.compile) and print each rung's "
            "speed-up beside the study's and whatif's")

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("--device", choices=DEVICES,
                       help="default: cuda when torch sees a GPU, else cpu")
        p.add_argument("--full", action="store_true",
                       help="the study's shape (4 x 512, seq 100, batch 64) on a CPU too "
                            "(default there: batch 16, seq 20)")
        p.add_argument("--rungs", metavar="NAMES",
                       help="comma-separated rungs to run (default: all that run on the "
                            "device); the baseline naive8_torch always runs")
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
        from traceviz.ladder import BASELINE, RUNGS, ladder_workload, run_ladder
        from traceviz.runners import VARIANTS

        for flag in ("warmup", "steps", "profile_steps"):
            least = 0 if flag == "warmup" else 1
            if getattr(args, flag) < least:
                raise UsageError(f"is at least {least}", option=flag)
        device = args.device or default_device()
        names = {r.variant for r in RUNGS}
        asked = names if not args.rungs else \
            {n.strip() for n in args.rungs.split(",") if n.strip()} | {BASELINE}
        unknown = sorted(asked - names)
        if unknown:
            raise UsageError(f"{unknown[0]!r} is no rung; the rungs: "
                             f"{', '.join(r.variant for r in RUNGS)}", option="rungs")
        rungs = tuple(r for r in RUNGS if r.variant in asked
                      and VARIANTS[r.variant].runs_on(device))
        w, notes = ladder_workload(device, args.full, batch=args.batch, seq=args.seq,
                                   hidden=args.hidden, layers=args.layers)
        out = args.out or Path("runs") / f"ladder-{time.strftime('%Y%m%d-%H%M%S')}"
        from traceviz.capture import prepare_run_dir

        prepare_run_dir(out, args.force)  # before any rung runs: earlier rungs are kept
        err = stderr()
        for note in notes:
            err.print(f"[yellow]note:[/] {note.replace('--batch/--seq', '--full')}")
        shape = f"{w.layers} x {w.hidden}, seq {w.seq}, batch {w.batch}, forward, {device}"
        with progress_bar(err, keep=True) as progress:
            task = progress.add_task("ladder", total=len(rungs))

            def on_start(k: int, n: int, variant: str) -> None:
                progress.update(task, completed=k - 1, description=f"rung {k}/{n} {variant}")

            results = run_ladder(w, device, out, rungs, warmup=args.warmup,
                                 max_warmup=args.max_warmup, steps=args.steps,
                                 profile_steps=args.profile_steps, on_start=on_start)
            progress.update(task, completed=len(rungs))
        if args.json:
            print(json.dumps({"workload": w.to_dict(), "device": device, "out": str(out),
                              "rungs": [r.to_dict() for r in results]}, indent=2))
        else:
            from traceviz.render.ladder import ladder_render

            console = stdout(args.width)
            console.print(ladder_render(results, f"LSTM optimization ladder: {shape}",
                                        console.width))
            console.print(f"run folders: {out}", soft_wrap=True)
        return 0 if any(r.median_s is not None for r in results) else 1
