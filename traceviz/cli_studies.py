"""Commands that read several runs: compare, amp, sweep, sweep-plot, report."""

from __future__ import annotations

import argparse
import time
from contextlib import ExitStack
from pathlib import Path

from traceviz.cli_base import (
    Command,
    chart_paths,
    load_with_progress,
    refuse_existing,
    stderr,
    stdout,
    write_charts,
)
from traceviz.errors import TraceVizError
from traceviz.fileio import atomic_output


def _label(path: Path, trace) -> str:
    meta = trace.meta
    if meta.get("model"):
        return meta["model"] + (f" ({meta['amp']})" if meta.get("amp") else "")
    name = path.name if path.is_dir() else path.name.split(".")[0]
    return name or str(path)


def _load_runs(paths: list[Path]) -> list[tuple[str, object]]:
    runs, seen = [], set()
    for p in paths:
        with ExitStack() as stack:
            trace = load_with_progress(p, stack)
        label = _label(p, trace)
        while label in seen:  # two runs of one model: keep both columns apart
            label += "'"
        seen.add(label)
        runs.append((label, trace))
    return runs


class CompareCommand(Command):
    name = "compare"
    help = "compare runs side by side: timings, busy, launch-bound, categories, kernels, MPE"

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("runs", type=Path, nargs="+",
                       help="run folders, trace.parquet files or raw traces (two or more)")
        p.add_argument("--top", type=int, default=12, help="kernel differences to list")
        p.add_argument("--plot", type=Path, metavar="DIR",
                       help="write categories.{png,svg} (and amp_waterfall for an AMP pair)")
        p.add_argument("--force", action="store_true", help="replace existing chart files")

    def run(self, args: argparse.Namespace) -> int:
        from traceviz.analyses.amp import amp_breakdown, differs_only_in_amp
        from traceviz.analyses.compare import kernel_diff, mpe_table, run_figures
        from traceviz.render_compare import amp_render, diff_table, mpe_render, runs_table

        if len(args.runs) < 2:
            raise TraceVizError("compare needs at least two runs")
        if args.plot:
            refuse_existing(chart_paths(args.plot, ["categories"]), args.force)
        runs = _load_runs(args.runs)
        figs = [run_figures(t, label) for label, t in runs]
        out = stdout()
        out.print(runs_table(figs))
        for (la, ta), (lb, tb) in zip(runs, runs[1:], strict=False):
            out.print(diff_table(kernel_diff(ta, tb), la, lb, top=args.top))
        out.print(mpe_render(mpe_table(figs)))
        pairs = [(a, b) for a in figs for b in figs
                 if a is not b and a.meta.get("amp") is None and differs_only_in_amp(a, b)]
        for a, b in pairs:
            out.print(amp_render(amp_breakdown(a, b), a.label, b.label))
        if args.plot:
            from traceviz.render_charts import amp_waterfall, category_bars

            charts = {"categories": category_bars(figs)}
            charts.update({f"amp_waterfall_{i}": amp_waterfall(amp_breakdown(a, b), a.label,
                                                               b.label)
                           for i, (a, b) in enumerate(pairs, 1)})
            write_charts(args.plot, charts, args.force)
        return 0


class AmpCommand(Command):
    name = "amp"
    help = "what mixed precision cost (casts) and saved (gemm/attention/rnn time) between two runs"

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("fp32", type=Path, help="the FP32 run (folder, .parquet or raw trace)")
        p.add_argument("amp", type=Path, help="the same run under --amp fp16|bf16")
        p.add_argument("--plot", type=Path, metavar="DIR", help="write amp_waterfall.{png,svg}")
        p.add_argument("--force", action="store_true", help="replace existing chart files")

    def run(self, args: argparse.Namespace) -> int:
        from traceviz.analyses.amp import amp_breakdown, differs_only_in_amp
        from traceviz.analyses.compare import run_figures
        from traceviz.render_compare import amp_render

        if args.plot:
            refuse_existing(chart_paths(args.plot, ["amp_waterfall"]), args.force)
        (la, ta), (lb, tb) = _load_runs([args.fp32, args.amp])
        a, b = run_figures(ta, la), run_figures(tb, lb)
        err = stderr()
        if a.meta.get("amp") is not None:
            raise TraceVizError(f"{args.fp32}: this run used --amp {a.meta['amp']}; "
                                "give the FP32 run first")
        if a.meta.get("model") and not differs_only_in_amp(a, b):
            err.print("[yellow]note:[/] the runs differ in more than --amp (model, workload "
                      "or device); the breakdown mixes those differences in")
        br = amp_breakdown(a, b)
        stdout().print(amp_render(br, la, lb))
        if args.plot:
            from traceviz.render_charts import amp_waterfall

            write_charts(args.plot, {"amp_waterfall": amp_waterfall(br, la, lb)}, args.force)
        return 0


def _ints(text: str | None) -> list[int | None]:
    if not text:
        return [None]
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise TraceVizError(f"expected comma-separated integers, got {text!r}") from None
    if any(v < 1 for v in values):
        raise TraceVizError(f"sizes must be positive: {text!r}")
    return values


class SweepCommand(Command):
    name = "sweep"
    help = "capture every point of a grid (models x batch x hidden x seq x amp) into sweep.parquet"

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("--models", required=True, help="comma-separated variants")
        from traceviz.runners.presets import PRESETS

        p.add_argument("--preset", default="deepbench", choices=list(PRESETS),
                       help="workload (default deepbench)")
        p.add_argument("--batch", help="comma-separated batch sizes, e.g. 16,32,64")
        p.add_argument("--hidden", help="comma-separated hidden sizes")
        p.add_argument("--seq", help="comma-separated timesteps")
        p.add_argument("--layers", type=int, help="layers (default: the preset's)")
        p.add_argument("--amp", default="none", help="comma-separated: none, fp16, bf16")
        p.add_argument("--mode", choices=("forward", "train"))
        p.add_argument("--device", choices=("cpu", "cuda"))
        p.add_argument("--warmup", type=int, default=2)
        p.add_argument("--steps", type=int, default=5, help="timed batches per point")
        p.add_argument("--profile-steps", type=int, default=2)
        p.add_argument("--out", type=Path, metavar="DIR",
                       help="sweep folder (default sweeps/<preset>-<timestamp>/)")
        p.add_argument("--resume", action="store_true",
                       help="skip the points already captured in DIR/sweep.parquet")
        p.add_argument("--force", action="store_true", help="start DIR's sweep again")

    def run(self, args: argparse.Namespace) -> int:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        from traceviz.cli import _default_device
        from traceviz.sweep import SweepSpec, run_sweep

        amps = [None if a.strip() in ("none", "fp32", "") else a.strip()
                for a in args.amp.split(",")]
        bad = [a for a in amps if a not in (None, "fp16", "bf16")]
        if bad:
            raise TraceVizError(f"--amp takes none, fp16 or bf16, not {bad[0]!r}")
        spec = SweepSpec(
            models=[m.strip() for m in args.models.split(",") if m.strip()],
            batches=_ints(args.batch), hiddens=_ints(args.hidden), seqs=_ints(args.seq),
            amps=amps, preset=args.preset, mode=args.mode,
            device=args.device or _default_device(), layers=args.layers,
            warmup=args.warmup, steps=args.steps, profile_steps=args.profile_steps,
        )
        out = args.out or Path("sweeps") / f"{args.preset}-{time.strftime('%Y%m%d-%H%M%S')}"
        err = stderr()
        failed = []
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                      TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                      console=err, transient=not err.is_terminal) as progress:
            task = progress.add_task("sweep", total=len(spec.points()))

            def on_start(i: int, n: int, point: dict) -> None:
                from traceviz.sweep import point_id

                progress.update(task, description=f"point {i}/{n} {point_id(point)}")

            def on_done(i: int, n: int, row: dict) -> None:
                progress.update(task, completed=i)
                if row["status"] != "ok":
                    failed.append(row)

            df = run_sweep(spec, out, resume=args.resume, force=args.force, on_start=on_start,
                           on_done=on_done)
        for row in failed:
            err.print(f"[red]failed[/] {row['point']}: {row['error']}")
        ok = df[df["status"] == "ok"]
        from rich.table import Table

        t = Table(title=f"Sweep {out} ({len(ok)} of {len(df)} points ok)", title_justify="left")
        for col in ("point", "time/batch", "sequences/s", "idle", "top kernel"):
            t.add_column(col, no_wrap=col != "top kernel")
        for r in ok.itertuples(index=False):
            t.add_row(r.point, f"{r.time_per_batch_s * 1e3:.3f} ms", f"{r.sequences_per_s:,.1f}",
                      "–" if r.idle_fraction != r.idle_fraction else f"{r.idle_fraction:.1%}",
                      str(r.top_kernel)[:40])
        stdout().print(t)
        stdout().print(f"next: traceviz sweep-plot {out / 'sweep.parquet'}", soft_wrap=True)
        return 0 if len(ok) else 1


class SweepPlotCommand(Command):
    name = "sweep-plot"
    help = "plot a sweep: time per batch vs batch size and vs timesteps per variant"

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("sweep", type=Path, help="a sweep.parquet (or its folder)")
        p.add_argument("--out", type=Path, metavar="DIR",
                       help="where to write the charts (default: DIR/plots beside the sweep)")
        p.add_argument("--force", action="store_true", help="replace existing chart files")

    def run(self, args: argparse.Namespace) -> int:
        from traceviz.fileio import check_readable
        from traceviz.render_charts import sweep_plots
        from traceviz.sweep import SWEEP_FILE, load_sweep

        path = args.sweep / SWEEP_FILE if args.sweep.is_dir() else args.sweep
        check_readable(path)
        df = load_sweep(path)
        if "status" not in df or not (df["status"] == "ok").any():
            raise TraceVizError(f"{path}: no captured points to plot")
        figs = sweep_plots(df)
        if not figs:
            raise TraceVizError(f"{path}: the sweep varies neither batch nor timesteps")
        out = args.out or path.parent / "plots"
        refuse_existing(chart_paths(out, list(figs)), args.force)
        write_charts(out, figs, args.force)
        return 0


class ReportCommand(Command):
    name = "report"
    help = "write a Markdown or self-contained HTML report of runs and sweeps"

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("inputs", type=Path, nargs="+",
                       help="run folders, traces, sweep folders or sweep.parquet files")
        p.add_argument("-o", "--output", type=Path, required=True,
                       help="report.md (charts in report_files/ beside it) or report.html")
        p.add_argument("--title", default="traceviz report")
        p.add_argument("--force", action="store_true", help="replace an existing report")

    def run(self, args: argparse.Namespace) -> int:
        from traceviz.report import build_report, to_html, to_markdown
        from traceviz.sweep import SWEEP_FILE, load_sweep

        suffix = args.output.suffix.lower()
        if suffix not in (".md", ".html", ".htm"):
            raise TraceVizError(f"{args.output}: the report must end in .md or .html")
        refuse_existing([args.output], args.force)
        runs, sweeps = [], []
        run_paths = []
        for p in args.inputs:
            sweep = p / SWEEP_FILE if p.is_dir() and (p / SWEEP_FILE).exists() else None
            if sweep is None and p.name.endswith(SWEEP_FILE):
                sweep = p
            if sweep is not None:
                sweeps.append((sweep.parent.name or "sweep", load_sweep(sweep)))
            else:
                run_paths.append(p)
        runs = _load_runs(run_paths) if run_paths else []
        sections = build_report(runs, sweeps)
        if suffix == ".md":
            files_dir = args.output.stem + "_files"
            text, files = to_markdown(sections, args.title, files_dir)
            targets = {args.output.parent / rel: png for rel, png in files.items()}
            refuse_existing(list(targets), args.force)  # the charts beside the report too
            for target, png in targets.items():
                target.parent.mkdir(parents=True, exist_ok=True)
                with atomic_output(target, force=args.force) as tmp:
                    tmp.write_bytes(png)
        else:
            text = to_html(sections, args.title)
        with atomic_output(args.output, force=args.force) as tmp:
            tmp.write_text(text)
        stderr().print(f"wrote {args.output} ({len(sections)} sections)")
        return 0
