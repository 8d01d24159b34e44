"""``traceviz capture``: run one variant under its profiler and summarize the run."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape

from traceviz.cli.base import Command, progress_bar, stderr, stdout
from traceviz.cli.capture_script import self_command
from traceviz.errors import Terminated, UsageError

if TYPE_CHECKING:
    from traceviz.capture.parent import CaptureRequest

SIZES = ("batch", "seq", "hidden", "layers", "embed", "vocab")


def _what_arguments(p: argparse.ArgumentParser) -> None:
    """What runs: a script, or a variant on a workload, device and precision."""
    # here, not at the top: another command's parser imports no runner
    from traceviz.capture.parent import COMPILE_MODES
    from traceviz.runners import DEVICES, VARIANTS
    from traceviz.runners.presets import PRESETS

    keras = [v.name for v in VARIANTS.values() if v.exec_modes]
    p.add_argument("script_cmd", nargs="*", metavar="-- python SCRIPT ARGS",
                   help="profile your own script instead of a variant: `traceviz "
                        "capture [OPTIONS] -- python train.py ARGS` (or `-- -m MODULE "
                        "ARGS`); steps come from optimizer.step() or traceviz.step()")
    p.add_argument("--model", metavar="NAME",
                   help=f"variant ({', '.join(VARIANTS)}); see `traceviz models`")
    p.add_argument("--preset", choices=list(PRESETS),
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
                   help=f"Keras variants ({', '.join(keras)}): run the step "
                        "under tf.function (default) or eagerly")
    p.add_argument("--rank", type=int,
                   help="factorized_torch: the rank r of W ~ W2 W1 (default hidden/4)")
    p.add_argument("--compile-mode", choices=COMPILE_MODES,
                   help="compile_full_torch: torch.compile's mode (default "
                        "reduce-overhead on a GPU, default on a CPU)")
    p.add_argument("--graph-replay", action="store_true",
                   help="PyTorch variants, forward, on a GPU: capture the forward pass "
                        "once in a CUDA graph and replay it every batch, timed by CUDA "
                        "events (what the model costs without Python's dispatch)")
    p.add_argument("--device", choices=DEVICES,
                   help="default: cuda when torch sees a GPU, else cpu")
    for name in SIZES:
        p.add_argument(f"--{name}", type=int, help=f"override the preset's {name}")
    p.add_argument("--sparse-embedding", action="store_true",
                   help="sparse embedding gradients (presets with an embedding)")


def _how_arguments(p: argparse.ArgumentParser) -> None:
    """How it runs: data, warm-up, timed and profiled steps, the profiler."""
    from traceviz.capture.parent import PROFILERS

    p.add_argument("--workers", type=int, metavar="N",
                   help="feed batches through a real DataLoader with N worker processes "
                        "(0: in the main process) over a synthetic dataset; default: one "
                        "fixed batch")
    p.add_argument("--warmup", type=int, default=3,
                   help="warm-up batches at least (default 3); warm-up goes on until the "
                        "last 3 batch times agree within 1.5x, up to --max-warmup. A "
                        "script: its unprofiled first steps (default 3, at least 1)")
    p.add_argument("--max-warmup", type=int,
                   help="warm-up batches at most (default 15)")
    p.add_argument("--steps", type=int,
                   help="timed batches without the profiler (default 10; a script's "
                        "timed steps are those it runs after the profiled ones)")
    p.add_argument("--profile-steps", type=int, default=3,
                   help="profiled batches (default 3, after 1 wait + 1 warm-up step; a "
                        "script: after 1 profiler warm-up step)")
    p.add_argument("--seed", type=int)
    p.add_argument("--python", metavar="PATH",
                   help="interpreter for gluon_mxnet (default: $TRACEVIZ_MXNET_PYTHON, "
                        "then ./.venv-mxnet from `traceviz env mxnet`)")
    p.add_argument("--profiler", choices=(*PROFILERS, "tf"),
                   help="torch: torch.profiler (default); nsys: run under Nsight Systems "
                        "with NVTX step/phase/op ranges, keep report.nsys-rep and "
                        "report.sqlite; tf: the TensorFlow profiler (a script's default "
                        "when it imports TensorFlow/Keras and not torch)")


def _script_arguments(p: argparse.ArgumentParser) -> None:
    """A script's own options, and where the run folder goes."""
    p.add_argument("--ranks", type=int, metavar="N",
                   help="script: run it as N processes of one torch.distributed job "
                        "(torchrun on this machine: Gloo on CPUs, NCCL on GPUs, as the "
                        "script chooses), one trace per rank into the run folder")
    p.add_argument("--modules", action="store_true",
                   help="script: each nn.Module call as a range (time per layer)")
    p.add_argument("--batch-size", type=int, metavar="N",
                   help="script: the samples (sequences) each step processes, recorded "
                        "in the run folder for per-sample figures (sequences/s)")
    p.add_argument("--slice", type=float, metavar="SECONDS",
                   help="script that marks no step: cut the recording into slices of "
                        "this length, taken as steps (default 1)")
    p.add_argument("--out", type=Path, metavar="DIR",
                   help="run folder (default runs/<model>-<preset>-<timestamp>/)")
    p.add_argument("--force", action="store_true",
                   help="reuse a --out run folder traceviz made (it holds .traceviz-run); "
                        "a folder of your own is never replaced")
    p.add_argument("--top", type=int, default=10, help="kernels in the summary (default 10)")


class CaptureCommand(Command):
    name = "capture"
    help = ("run an LSTM variant, or your own script (capture -- python train.py ARGS), "
            "under a profiler; save raw trace, trace.parquet, bench.json")

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        _what_arguments(p)
        _how_arguments(p)
        _script_arguments(p)

    def run(self, args: argparse.Namespace) -> int:
        from traceviz.capture.parent import (
            CaptureRequest,
            check_graph_replay,
            check_runnable,
            run_stem,
            variant_options,
        )
        from traceviz.files.runclaim import claimed_run_dir
        from traceviz.runners import VARIANTS, default_device
        from traceviz.runners.presets import make_workload

        for flag in ("warmup", "steps", "profile_steps", "max_warmup"):
            least = 0 if flag in ("warmup", "max_warmup") else 1
            if getattr(args, flag) is not None and getattr(args, flag) < least:
                raise UsageError(f"is at least {least}", option=flag)
        if args.slice is not None and not args.slice > 0:
            raise UsageError("is a positive number of seconds", option="slice")
        if args.batch_size is not None and args.batch_size < 1:
            raise UsageError("is at least 1", option="batch_size")
        if args.ranks is not None and not 1 <= args.ranks <= 64:
            raise UsageError("is a number of processes from 1 to 64", option="ranks")
        if args.script_cmd:
            from traceviz.cli.capture_script import run_script_capture

            return run_script_capture(args, args.script_cmd)
        if args.model is None:
            raise UsageError("a variant (--model NAME) or a script (-- python train.py) "
                             "to capture")
        if args.batch_size is not None:
            raise UsageError("is for a script (-- python train.py); a built-in variant "
                             "takes --batch", option="batch_size")
        if args.modules or args.slice is not None or args.ranks is not None:
            raise UsageError("is for a script (-- python train.py)",
                             option="modules" if args.modules else "slice"
                             if args.slice is not None else "ranks")
        if args.profiler == "tf":
            raise UsageError("tf is for a script; a TensorFlow variant uses the TensorFlow "
                             "profiler already", option="profiler")
        args.profiler = args.profiler or "torch"
        args.preset = args.preset or "ptb_lm"
        args.steps = 10 if args.steps is None else args.steps
        args.max_warmup = 15 if args.max_warmup is None else args.max_warmup
        args.seed = args.seed or 0
        device = args.device or default_device()
        check_runnable(args.model, device, args.profiler, args.python)
        if args.exec_mode and not VARIANTS[args.model].exec_modes:
            keras = ", ".join(v.name for v in VARIANTS.values() if v.exec_modes)
            raise UsageError(f"applies to the Keras variants ({keras}); {args.model} runs "
                             "one way", option="exec")
        workload, notes = make_workload(
            args.preset, args.mode, device, sparse_embedding=args.sparse_embedding,
            workers=args.workers, amp=args.amp, **{k: getattr(args, k) for k in SIZES})
        options = variant_options(args.model, rank=args.rank, compile_mode=args.compile_mode)
        req = CaptureRequest(args.model, workload, device, amp=args.amp, seed=args.seed,
                             warmup=args.warmup, max_warmup=args.max_warmup, steps=args.steps,
                             profile_steps=args.profile_steps, profiler=args.profiler,
                             python=args.python, exec_mode=args.exec_mode, notes=notes,
                             options=options, graph_replay=args.graph_replay)
        check_graph_replay(req)
        # the folder is this capture's from here on: another is refused, a name is unique
        with claimed_run_dir(args.out, run_stem(req), args.force) as run_dir:
            return self._capture(args, req, run_dir, notes)

    def _capture(self, args: argparse.Namespace, req: CaptureRequest, run_dir: Path,
                 notes: list[str]) -> int:
        from traceviz.capture.parent import run_capture

        device, workload = req.device, req.workload
        err = stderr()
        for note in notes:
            err.print(f"[yellow]note:[/] {escape(note)}")
        w = workload
        err.print(f"capturing [bold]{args.model}[/] · {w.preset} {w.mode} · batch {w.batch}, "
                  f"seq {w.seq}, {w.layers}x{w.hidden} · {device}"
                  + (f" · amp {args.amp}" if args.amp else "")
                  + (" · graph-replayed" if args.graph_replay else "") + f" → {run_dir}")
        runner_notes: list[str] = []
        result = _with_phases(err, lambda cb: run_capture(req, run_dir, cb), runner_notes)
        for note in runner_notes:
            err.print(f"[yellow]note:[/] {escape(note)}")

        from traceviz.analyses import summarize
        from traceviz.render.terminal.summary import print_summary

        out = stdout()
        print_summary(out, summarize(result.trace, with_efficiency=True), top=args.top)
        b = result.bench
        tv = self_command()
        lines = [  # the summary's "bench" line has the timings, spread and warm-up
            f"throughput: {b['sequences_per_s']:,.1f} sequences/s (batch / median time)",
            f"\nrun folder: {run_dir}  ({result.raw_trace.name}, "
            + ("report.nsys-rep, " if args.profiler == "nsys" else "")
            + "trace.parquet, bench.json, runner.log)",
            "next:",
            f"  {tv} analyze {result.parquet} --plot {run_dir}/charts",
            f"  {tv} analyze {result.parquet} --export {run_dir}/tables",
            f"  {tv} analyze {result.parquet} --perfetto {run_dir}/perfetto.json   "
            "# then open it in https://ui.perfetto.dev",
            _open_hint(args.profiler, result.raw_trace, run_dir),
        ]
        for line in lines:  # unwrapped: paths and commands stay copy-pasteable
            if line:
                out.print(line, soft_wrap=True)
        return 0


def _open_hint(profiler: str, raw: Path, run_dir: Path) -> str:
    """A native viewer for the raw trace, named only when it is installed here (any
    trace opens in Perfetto through ``--perfetto``)."""
    import shutil

    if profiler == "nsys":
        if shutil.which("nsys-ui"):
            return f"  nsys-ui {run_dir}/report.nsys-rep"
        return f"  nsys stats {run_dir}/report.nsys-rep"
    if raw.name.endswith(".xplane.pb") and shutil.which("tensorboard"):
        return f"  tensorboard --logdir {raw.parents[3]}  (Profile tab)"
    return ""


def _with_phases(err: Console, job: Callable, notes: list[str]):
    """Run ``job(on_event)`` showing the runner's phases (warm-up, bench, profile) as bars;
    the runner's notes are collected into ``notes``."""
    from rich.progress import MofNCompleteColumn, TaskID, TimeElapsedColumn

    with progress_bar(err, MofNCompleteColumn(), TimeElapsedColumn(),
                      description="{task.description:>9}", keep=True) as progress:
        tasks: dict[str, TaskID] = {}
        starting = progress.add_task("starting", total=None)

        def on_event(event: dict) -> None:
            kind = event.get("event")
            if kind == "phase":
                if starting in progress.task_ids:
                    progress.remove_task(starting)
                tasks[event["phase"]] = progress.add_task(event["phase"],
                                                          total=event.get("total") or 0)
            elif kind == "progress" and event.get("phase") in tasks:
                progress.update(tasks[event["phase"]], completed=event["done"],
                                total=event.get("total"))
            elif kind == "compile" and event.get("state") == "start":
                # the first call compiles: its own line, the time elapsed counting on
                tasks["compile"] = progress.add_task(f"compiling ({event.get('what')})",
                                                     total=None)
            elif kind == "compile" and "compile" in tasks:
                progress.update(tasks["compile"], total=1, completed=1,
                                description=f"compiled ({event.get('what') or event.get('mode')})")
            elif kind == "note":
                notes.append(event["message"])

        try:
            return job(on_event)
        except (KeyboardInterrupt, Terminated):  # the notes so far (a compile's hint) first
            for note in notes:
                err.print(f"[yellow]note:[/] {escape(note)}")
            notes.clear()
            raise
