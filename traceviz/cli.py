"""``traceviz`` command line: one class per command, ``main(argv) -> int``.

Only this module prints or writes files; everything it shows comes from parsers
(returning a ``Trace``), analyses (returning tables/dataclasses) and renderers.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path

from rich.console import Console

from traceviz import __version__
from traceviz.cli_base import (
    Command,
    chart_paths,
    load_with_progress,
    refuse_existing,
    stderr,
    stdout,
    write_charts,
)
from traceviz.errors import Terminated, TraceVizError
from traceviz.fileio import atomic_output
from traceviz.runners.tf_models import EXEC_CHOICE  # numpy only; TF is imported by runners


class ImportCommand(Command):
    name = "import"
    help = ("convert a raw trace (torch.profiler JSON[.gz], nsys .sqlite/.arrow/.nsys-rep or "
            "parquetdir/arrowdir, TF/JAX .xplane.pb[.gz] or its log directory, MXNet JSON) "
            "into a traceviz .parquet table")

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("raw", type=Path, help="raw trace file; format detected from content")
        p.add_argument("-o", "--output", type=Path,
                       help="output .parquet (default: <raw name>.parquet in the current folder)")
        p.add_argument("--force", action="store_true", help="replace an existing output file")

    def run(self, args: argparse.Namespace) -> int:
        out = args.output or Path(_stem(args.raw) + ".parquet")
        if out.exists() and not args.force:
            raise TraceVizError(f"{out}: already exists (use --force to replace it)")
        with ExitStack() as stack:
            trace = load_with_progress(args.raw, stack)
        trace.save(out, force=args.force)
        ev = trace.events
        kinds = ev["kind"].value_counts()
        parts = ", ".join(f"{kinds.get(k, 0):,} {label}" for k, label in (
            ("kernel", "kernels"), ("runtime", "runtime calls"), ("op", "ops"),
            ("step", "steps")))
        Console(soft_wrap=True).print(f"wrote [bold]{out}[/]: {len(ev):,} events ({parts})")
        for note in trace.meta.get("notes") or []:
            stderr().print(f"[yellow]note:[/] {note}", soft_wrap=True)
        return 0


def _stem(path: Path) -> str:
    name = path.name
    for suffix in (".gz", ".json", ".pt.trace", ".trace", ".sqlite", ".arrow", ".nsys-rep",
                   ".parquetdir", ".arrowdir"):
        name = name.removesuffix(suffix)
    return name or "trace"


class AnalyzeCommand(Command):
    name = "analyze"
    help = "summarize a trace: top kernels, categories, launch overhead, casts"

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("trace", type=Path,
                       help="a traceviz .parquet, any raw trace, or a capture's run folder")
        p.add_argument("--top", type=int, default=15, help="kernels to list (default 15)")
        p.add_argument("--wide", action="store_true", help="full kernel names, no shortening")
        p.add_argument("--by", choices=("name", "config"), default="name",
                       help="kernel table rows: per name (default), or per name and launch "
                            "configuration (grid, block, registers, shared memory) where the "
                            "trace records it")
        p.add_argument("--json", action="store_true",
                       help="print the figures as one JSON object instead of tables")
        p.add_argument("--plot", type=Path, metavar="DIR",
                       help="write kernels_pie and launch_overhead charts (PNG, SVG) to DIR")
        p.add_argument("--export", type=Path, metavar="DIR",
                       help="write kernels.parquet, launches.parquet, casts.parquet to DIR")
        p.add_argument("--force", action="store_true",
                       help="replace existing files in --plot/--export folders")
        p.add_argument("--width", type=int, help="terminal width for the tables")

    def run(self, args: argparse.Namespace) -> int:
        from traceviz.analyses import summarize

        if args.top < 1:
            raise TraceVizError("--top must be at least 1")
        exports = plots = []
        if args.export:
            exports = [args.export / f"{n}.parquet" for n in ("kernels", "launches", "casts")]
        if args.plot:
            from traceviz.render_plot import CHART_NAMES

            plots = chart_paths(args.plot, CHART_NAMES)
        refuse_existing([*exports, *plots], args.force)

        with ExitStack() as stack:
            trace = load_with_progress(args.trace, stack)
        summary = summarize(trace, by_config=args.by == "config")
        if args.json:
            print(json.dumps(summary.to_dict(top=args.top), indent=2))
        else:
            from traceviz.render_text import print_summary

            print_summary(stdout(args.width), summary, top=args.top, wide=args.wide)
        err = stderr()
        if args.export:
            from traceviz.analyses.tables import export_tables

            for name, table in export_tables(trace).items():
                path = args.export / f"{name}.parquet"
                with atomic_output(path, force=args.force) as tmp:
                    table.to_parquet(tmp, index=False)
                err.print(f"wrote {path} ({len(table):,} rows)")
        if args.plot:
            from traceviz.render_plot import summary_charts

            write_charts(args.plot, summary_charts(summary), args.force)
        return 0


class CaptureCommand(Command):
    name = "capture"
    help = "run an LSTM variant under its profiler; save raw trace, trace.parquet, bench.json"

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        from traceviz.runners import VARIANTS
        from traceviz.runners.presets import PRESETS

        p.add_argument("--model", required=True, metavar="NAME",
                       help=f"variant ({', '.join(VARIANTS)}); see `traceviz models`")
        p.add_argument("--preset", default="ptb_lm", choices=list(PRESETS),
                       help="workload (default ptb_lm; scaled down on a CPU unless sizes "
                            "are given)")
        p.add_argument("--mode", choices=("forward", "train"),
                       help="forward, or train (loss, backward, optimizer step); "
                            "default: the preset's")
        p.add_argument("--amp", choices=("fp16", "bf16"),
                       help="mixed precision: torch.autocast, a Keras mixed_float16/"
                            "mixed_bfloat16 policy, or JAX compute in that dtype (bf16 suits "
                            "CPUs)")
        p.add_argument("--exec", dest="exec_mode", choices=("function", "eager"),
                       help=f"Keras variants ({', '.join(EXEC_CHOICE)}): run the step "
                            "under tf.function (default) or eagerly")
        p.add_argument("--device", choices=("cpu", "cuda"),
                       help="default: cuda when torch sees a GPU, else cpu")
        for name in ("batch", "seq", "hidden", "layers", "embed", "vocab"):
            p.add_argument(f"--{name}", type=int, help=f"override the preset's {name}")
        p.add_argument("--sparse-embedding", action="store_true",
                       help="sparse embedding gradients (presets with an embedding)")
        p.add_argument("--workers", type=int, metavar="N",
                       help="feed batches through a real DataLoader with N worker processes "
                            "(0: in the main process) over a synthetic dataset; default: one "
                            "fixed batch")
        p.add_argument("--warmup", type=int, default=3, help="warm-up batches (default 3)")
        p.add_argument("--steps", type=int, default=10,
                       help="timed batches without the profiler (default 10)")
        p.add_argument("--profile-steps", type=int, default=3,
                       help="profiled batches (default 3, after 1 wait + 1 warm-up step)")
        p.add_argument("--seed", type=int, default=0)
        p.add_argument("--python", metavar="PATH",
                       help="interpreter for gluon_mxnet (default: $TRACEVIZ_MXNET_PYTHON, "
                            "then ./.venv-mxnet from `traceviz env mxnet`)")
        p.add_argument("--profiler", choices=("torch", "nsys"), default="torch",
                       help="torch: torch.profiler (default); nsys: run under Nsight Systems "
                            "with NVTX step/phase/op ranges, keep report.nsys-rep and "
                            "report.sqlite")
        p.add_argument("--out", type=Path, metavar="DIR",
                       help="run folder (default runs/<model>-<preset>-<timestamp>/)")
        p.add_argument("--force", action="store_true", help="reuse a non-empty --out folder")
        p.add_argument("--top", type=int, default=10, help="kernels in the summary (default 10)")

    def run(self, args: argparse.Namespace) -> int:
        from traceviz.capture import (
            CaptureRequest,
            check_runnable,
            default_run_dir,
            prepare_run_dir,
            run_capture,
        )
        from traceviz.runners.presets import make_workload

        for flag in ("warmup", "steps", "profile_steps"):
            if getattr(args, flag) < (0 if flag == "warmup" else 1):
                raise TraceVizError(f"--{flag.replace('_', '-')} is too small")
        device = args.device or _default_device()
        check_runnable(args.model, device, args.profiler, args.python)
        if args.exec_mode and args.model not in EXEC_CHOICE:
            raise TraceVizError(f"--exec applies to the Keras variants ({', '.join(EXEC_CHOICE)}"
                                f"); {args.model} runs one way")
        workload, notes = make_workload(
            args.preset, args.mode, device, sparse_embedding=args.sparse_embedding,
            workers=args.workers,
            **{k: getattr(args, k) for k in ("batch", "seq", "hidden", "layers", "embed",
                                             "vocab")})
        req = CaptureRequest(args.model, workload, device, amp=args.amp, seed=args.seed,
                             warmup=args.warmup, steps=args.steps,
                             profile_steps=args.profile_steps, profiler=args.profiler,
                             python=args.python, exec_mode=args.exec_mode, notes=notes)
        run_dir = args.out or default_run_dir(req)
        prepare_run_dir(run_dir, args.force)
        err = stderr()
        for note in notes:
            err.print(f"[yellow]note:[/] {note}")
        w = workload
        err.print(f"capturing [bold]{args.model}[/] · {w.preset} {w.mode} · batch {w.batch}, "
                  f"seq {w.seq}, {w.layers}x{w.hidden} · {device}"
                  + (f" · amp {args.amp}" if args.amp else "") + f" → {run_dir}")
        runner_notes: list[str] = []
        result = _with_progress(err, lambda cb: run_capture(req, run_dir, cb), runner_notes)
        for note in runner_notes:
            err.print(f"[yellow]note:[/] {note}")

        from traceviz.analyses import summarize
        from traceviz.render_text import print_summary

        out = stdout()
        print_summary(out, summarize(result.trace), top=args.top)
        b = result.bench
        t = b["time_per_batch_s"]
        lines = [
            f"\n[bold]bench[/] (no profiler): {t['median'] * 1e3:.3f} ms/batch median "
            f"(min {t['min'] * 1e3:.3f}, max {t['max'] * 1e3:.3f}) · "
            f"{b['sequences_per_s']:,.1f} sequences/s · {b['batches']} batches in "
            f"{b['elapsed_s']:.3f} s · profiler overhead {b['profiler_overhead']:.2f}x",
            f"\nrun folder: [bold]{run_dir}[/]  ({result.raw_trace.name}, "
            + ("report.nsys-rep, " if args.profiler == "nsys" else "")
            + "trace.parquet, bench.json, runner.log)",
            "next:",
            f"  traceviz analyze {result.parquet} --plot {run_dir}/charts",
            f"  traceviz analyze {result.parquet} --export {run_dir}/tables",
            _open_hint(args.profiler, result.raw_trace, run_dir),
        ]
        for line in lines:  # unwrapped: paths and commands stay copy-pasteable
            out.print(line, soft_wrap=True)
        return 0


def _open_hint(profiler: str, raw: Path, run_dir: Path) -> str:
    if profiler == "nsys":
        return f"  nsys-ui {run_dir}/report.nsys-rep"
    if raw.name.endswith(".xplane.pb"):
        return f"  tensorboard --logdir {raw.parents[3]}  (Profile tab)"
    return "  (the raw trace opens in Perfetto, TensorBoard and HTA too)"


def _default_device() -> str:
    try:
        import torch
    except ImportError:
        return "cpu"
    return "cuda" if torch.cuda.is_available() else "cpu"


def _with_progress(err: Console, job, notes: list[str]):
    """Run ``job(on_event)`` showing the runner's phases as a rich progress bar."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description:>9}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err, transient=not err.is_terminal) as progress:
        tasks: dict[str, int] = {}
        starting = progress.add_task("starting", total=None)

        def on_event(event: dict) -> None:
            kind = event.get("event")
            if kind == "phase":
                progress.remove_task(starting) if starting in progress.task_ids else None
                tasks[event["phase"]] = progress.add_task(event["phase"],
                                                          total=event.get("total") or 0)
            elif kind == "progress" and event.get("phase") in tasks:
                progress.update(tasks[event["phase"]], completed=event["done"])
            elif kind == "note":
                notes.append(event["message"])

        return job(on_event)


class ModelsCommand(Command):
    name = "models"
    help = "list the LSTM variants, their framework, and whether they can run here"

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("--json", action="store_true", help="print as JSON")

    def run(self, args: argparse.Namespace) -> int:
        from traceviz.runners import VARIANTS, framework_installed

        cuda = None
        rows = []
        for v in VARIANTS.values():
            if not framework_installed(v.framework):
                ok, why = False, f"{v.framework} is not installed"
            elif v.gpu_only:
                if cuda is None:
                    cuda = _default_device() == "cuda"
                ok, why = cuda, "" if cuda else "needs a CUDA GPU; none is visible"
            else:
                ok, why = True, ""
            rows.append({"name": v.name, "framework": v.framework,
                         "description": v.description, "available": ok, "why_not": why})
        if args.json:
            print(json.dumps(rows, indent=2))
            return 0
        from rich.table import Table

        table = Table(title="LSTM variants", title_justify="left")
        for col in ("name", "framework", "runs here", "what it is"):
            table.add_column(col, no_wrap=col != "what it is")
        for r in rows:
            table.add_row(r["name"], r["framework"],
                          "[green]yes[/]" if r["available"] else f"[red]no[/]: {r['why_not']}",
                          r["description"])
        stdout().print(table)
        return 0


class EnvCommand(Command):
    name = "env"
    help = "create the separate environment a framework needs (mxnet: MXNet 1.9.1, numpy<1.24)"

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        from traceviz.runners import MXNET_ENV

        p.add_argument("framework", choices=("mxnet",))
        p.add_argument("--path", type=Path, default=MXNET_ENV,
                       help=f"where to create it (default ./{MXNET_ENV}, where capture "
                            "looks for it)")
        p.add_argument("--python", metavar="PATH",
                       help="base interpreter for the venv (default: traceviz's own base)")

    def run(self, args: argparse.Namespace) -> int:
        from traceviz.envs import make_mxnet_env

        err = stderr()
        with err.status("...") as status:
            interp = make_mxnet_env(args.path, args.python,
                                    lambda label: status.update(label + " ..."))
        stdout().print(f"MXNet environment ready: [bold]{interp}[/]\n"
                       f"  traceviz capture --model gluon_mxnet"
                       + ("" if args.path == Path(".venv-mxnet") else f" --python {interp}"),
                       soft_wrap=True)
        return 0


def _commands() -> tuple[Command, ...]:
    from traceviz.cli_studies import (
        AmpCommand,
        CompareCommand,
        ReportCommand,
        SweepCommand,
        SweepPlotCommand,
    )

    return (ImportCommand(), AnalyzeCommand(), CaptureCommand(), ModelsCommand(), EnvCommand(),
            CompareCommand(), AmpCommand(), SweepCommand(), SweepPlotCommand(), ReportCommand())


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="traceviz",
        description="Profile LSTM variants (PyTorch, TensorFlow, JAX, MXNet) and read any "
                    "torch.profiler, Nsight Systems or TF/JAX trace through one events table: "
                    "top kernels, launch overhead, AMP cast cost.",
    )
    parser.add_argument("--version", action="version", version=f"traceviz {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for cmd in _commands():
        p = sub.add_parser(cmd.name, help=cmd.help, description=cmd.help)
        cmd.add_arguments(p)
        p.set_defaults(_command=cmd)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "_command", None) is None:
        parser.print_help()
        return 2
    try:
        return args._command.run(args)
    except TraceVizError as e:
        _error(str(e))
        return 2
    except KeyboardInterrupt:
        print("traceviz: interrupted", file=sys.stderr)
        return 130
    except Terminated:
        print("traceviz: terminated", file=sys.stderr)
        return 143
    except BrokenPipeError:
        return 0
    except MemoryError:
        _error("out of memory")
        return 2
    except OSError as e:
        _error(f"{e.filename}: {e.strerror}" if e.filename and e.strerror else str(e))
        return 2
    except Exception as e:
        if os.environ.get("TRACEVIZ_DEBUG"):
            raise
        _error(f"{type(e).__name__}: {e} (set TRACEVIZ_DEBUG=1 to see the traceback)",
               "internal error")
        return 3


def _error(message: str, label: str = "error") -> None:
    """One line on stderr, whatever the message holds (Arrow's are two lines)."""
    text = " ".join(part.strip() for part in message.splitlines() if part.strip())
    print(f"traceviz: {label}: {text}", file=sys.stderr)
