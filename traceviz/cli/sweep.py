"""``traceviz sweep``: capture every point of a grid into sweep.parquet."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from traceviz.cli.base import Command, progress_bar, stderr, stdout
from traceviz.errors import UsageError

AMPS = ("fp16", "bf16")


class SweepCommand(Command):
    name = "sweep"
    help = "capture every point of a grid (models x batch x hidden x seq x amp) into sweep.parquet"

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        # here, not at the top: another command's parser imports no runner
        from traceviz.runners import DEVICES
        from traceviz.runners.presets import PRESETS

        p.add_argument("--models", required=True,
                       help="comma-separated variants (`traceviz models --names`)")
        p.add_argument("--preset", default="deepbench", choices=list(PRESETS),
                       help="workload (default deepbench)")
        p.add_argument("--batch", help="comma-separated batch sizes, e.g. 16,32,64")
        p.add_argument("--hidden", help="comma-separated hidden sizes")
        p.add_argument("--seq", help="comma-separated timesteps")
        p.add_argument("--layers", type=int, help="layers (default: the preset's)")
        p.add_argument("--amp", default="none", help="comma-separated: none, fp16, bf16")
        p.add_argument("--mode", choices=("forward", "train"))
        p.add_argument("--device", choices=DEVICES)
        p.add_argument("--warmup", type=int, default=2,
                       help="warm-up batches at least (default 2; more until times settle)")
        p.add_argument("--max-warmup", type=int, default=15,
                       help="warm-up batches at most (default 15)")
        p.add_argument("--steps", type=int, default=5, help="timed batches per point")
        p.add_argument("--profile-steps", type=int, default=2)
        p.add_argument("--out", type=Path, metavar="DIR",
                       help="sweep folder (default sweeps/<preset>-<timestamp>/)")
        p.add_argument("--resume", action="store_true",
                       help="skip the points already captured in DIR/sweep.parquet")
        p.add_argument("--force", action="store_true", help="start DIR's sweep again")
        p.add_argument("--ray", nargs="?", const="", metavar="ADDRESS",
                       help="run the points as Ray tasks, several at once across the nodes of "
                            "the cluster at ADDRESS (default $RAY_ADDRESS, else a local Ray): "
                            "one GPU per CUDA point, else one CPU; run folders are shipped "
                            "back when the workers do not see --out")

    def run(self, args: argparse.Namespace) -> int:
        from rich.progress import (
            MofNCompleteColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        from traceviz.capture.grid import SWEEP_FILE, SweepSpec, point_id, run_sweep
        from traceviz.runners import default_device

        amps = [None if a.strip() in ("none", "fp32", "") else a.strip()
                for a in args.amp.split(",")]
        bad = [a for a in amps if a not in (None, *AMPS)]
        if bad:
            raise UsageError(f"takes none, fp16 or bf16, not {bad[0]!r}", option="amp")
        spec = SweepSpec(
            models=[m.strip() for m in args.models.split(",") if m.strip()],
            batches=_ints(args.batch, "batch"), hiddens=_ints(args.hidden, "hidden"),
            seqs=_ints(args.seq, "seq"), amps=amps, preset=args.preset, mode=args.mode,
            device=args.device or default_device(), layers=args.layers,
            warmup=args.warmup, max_warmup=args.max_warmup, steps=args.steps,
            profile_steps=args.profile_steps,
        )
        out = args.out or Path("sweeps") / f"{args.preset}-{time.strftime('%Y%m%d-%H%M%S')}"
        if (out / SWEEP_FILE).exists() and not (args.resume or args.force):
            raise UsageError(f"{out / SWEEP_FILE}: already exists (use --resume to go on "
                             "with it, or --force to start again)")
        err = stderr()
        failed = []
        with progress_bar(err, MofNCompleteColumn(), TimeElapsedColumn(), TextColumn("ETA"),
                          TimeRemainingColumn(), keep=True) as progress:
            task = progress.add_task("sweep", total=len(spec.points()))

            def on_start(i: int, n: int, point: dict) -> None:
                progress.update(task, description="points on Ray" if args.ray is not None
                                else f"point {i}/{n} {point_id(point)}")

            def on_done(i: int, n: int, row: dict) -> None:
                progress.update(task, completed=i)
                if row["status"] != "ok":
                    failed.append(row)

            point_map = None
            if args.ray is not None:
                from traceviz.capture.grid import capture_point
                from traceviz.system.cluster import point_resources, ray_map

                point_map = ray_map(capture_point, args.ray or None, point_resources)
            df = run_sweep(spec, out, resume=args.resume, force=args.force, on_start=on_start,
                           on_done=on_done, point_map=point_map)
        for row in failed:
            err.print(f"[red]failed[/] {row['point']}: {row['error']}")
        ok = df[df["status"] == "ok"]
        from traceviz.render.terminal.runs_view import sweep_render

        console = stdout()
        console.print(sweep_render(df, str(out), console.width))
        console.print(f"next: traceviz sweep-plot {out / SWEEP_FILE}", soft_wrap=True)
        return 0 if len(ok) else 1


def _ints(text: str | None, option: str) -> list[int | None]:
    """``16,32,64`` -> [16, 32, 64]; nothing -> [None] (the preset's size)."""
    if not text:
        return [None]
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise UsageError(f"expected comma-separated integers, got {text!r}",
                         option=option) from None
    if any(v < 1 for v in values):
        raise UsageError(f"sizes must be positive: {text!r}", option=option)
    return list[int | None](values)
