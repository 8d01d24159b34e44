"""``traceviz capture -- python train.py ARGS``: the user's own script, profiled.

Progress is a few plain lines on stderr, not live bars: the script prints to the same
terminal, and its output is the user's.
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape

from traceviz.cli.base import stderr, stdout
from traceviz.errors import UsageError

if TYPE_CHECKING:
    from traceviz.capture.user_script import ScriptRequest

SCRIPT_ONLY = ("modules", "slice")
VARIANT_ONLY = ("preset", "mode", "amp", "exec_mode", "device", "batch", "seq", "hidden",
                "layers", "embed", "vocab", "workers", "python", "steps", "max_warmup", "seed",
                "sparse_embedding", "rank", "compile_mode")


def self_command() -> str:
    """``traceviz`` as the user can type it here: the bare name when PATH finds this
    installation's script, else the script's path (a venv not activated), else
    ``python -m traceviz``."""
    mine = Path(sys.executable).parent / "traceviz"
    found = shutil.which("traceviz")
    if found and (not mine.is_file() or Path(found).resolve() == mine.resolve()):
        return "traceviz"
    if mine.is_file():
        try:  # .venv/bin/traceviz, as the README's commands spell it
            return str(mine.relative_to(Path.cwd()))
        except ValueError:
            return str(mine)
    return f"{sys.executable} -m traceviz"


def run_script_capture(args: argparse.Namespace, command: list[str]) -> int:
    from traceviz.capture.user_script import ScriptRequest
    from traceviz.files.runclaim import claimed_run_dir

    given = [f"--{k.replace('_', '-')}" for k in VARIANT_ONLY
             if getattr(args, k, None) not in (None, False)]
    if args.model or given:
        raise UsageError(f"{args.model and '--model' or given[0]} is for the built-in "
                         "variants; a script sets up its own model and data")
    if args.profiler not in (None, "torch", "nsys", "tf"):
        raise UsageError("is torch, nsys or tf for a script", option="profiler")
    req = ScriptRequest(command, profiler=args.profiler, warmup=args.warmup,
                        profile_steps=args.profile_steps, modules=args.modules,
                        slice_s=args.slice, ranks=args.ranks or 1,
                        batch_size=args.batch_size)
    if req.ranks > 1 and req.profiler != "torch":
        raise UsageError("several ranks are profiled with torch.profiler", option="profiler")
    if req.profiler == "tf" and args.modules:
        raise UsageError("module ranges are for PyTorch scripts", option="modules")
    # the folder is this capture's from here on: another is refused, a name is unique
    with claimed_run_dir(args.out, req.stem, args.force) as run_dir:
        return _claimed(args, command, req, run_dir)


def _claimed(args: argparse.Namespace, command: list[str], req: ScriptRequest,
             run_dir: Path) -> int:
    from traceviz.capture.user_script import run_script

    err = stderr()
    from traceviz.units import plural

    err.print(f"traceviz: profiling {escape(shlex.join(command))} under "
              f"{_profiler_name(req.profiler)}: {plural(max(1, req.warmup), 'unprofiled step')}"
              f", 1 profiler warm-up step, then {plural(req.profile_steps, 'profiled step')}"
              f" → {run_dir}", soft_wrap=True, highlight=False)
    if req.warmup < 1:
        err.print("[yellow]note:[/] --warmup 0: a script's first step always runs "
                  "unprofiled (its end says where steps end): 1")

    def settled() -> None:  # the interpreter chosen: say how
        for note in req.notes:
            err.print(f"[yellow]note:[/] {escape(note)}", soft_wrap=True)

    from traceviz.capture.outcome import Ending, NothingRecorded, ending_note, exit_status

    schedule = _Schedule(max(1, req.warmup), req.profile_steps, run_dir)
    try:
        result = run_script(req, run_dir, lambda event: _event(err, event, schedule),
                            on_start=settled)
    except NothingRecorded as e:  # one line, and the status it carries (130 or 2)
        err.print(f"traceviz: {escape(str(e))}", soft_wrap=True, highlight=False)
        return e.exit_code
    for note in result.meta.get("notes") or []:
        err.print(f"[yellow]note:[/] {escape(note)}", soft_wrap=True)
    out = stdout()

    def ending() -> None:  # how the script ended, where that is news
        said = ending_note(Ending(req.name, result.status, result.meta.get("error"),
                                  int(result.meta.get("step_marks") or 0),
                                  result.meta.get("schedule_cut"), schedule.warmup,
                                  schedule.active))
        if said:
            err.print(f"[yellow]note:[/] {escape(said)}", soft_wrap=True)

    if req.ranks > 1:
        return exit_status(_ranks_done(out, req.ranks, result, ending))
    if result.trace is not None:
        from traceviz.analyses import summarize
        from traceviz.render.terminal.summary import print_summary

        print_summary(out, summarize(result.trace, with_efficiency=True), top=args.top)
    ending()
    _next_lines(out, result.run_dir, result.raw_trace, result.parquet)
    return exit_status(result.status)


def _ranks_done(out: Console, ranks: int, result,  # noqa: ANN001
                ending: Callable[[], None]) -> int:
    """A distributed run: the rank folder's summary, how it ended, what to run next."""
    traces = result.meta.get("rank_traces") or []
    if len(traces) == ranks:
        from traceviz.rankset.folder import analyze_folder
        from traceviz.render.terminal.summary import ranks_render

        out.print(ranks_render(analyze_folder(result.run_dir, workers=1), width=out.width))
    else:
        out.print(f"[yellow]note:[/] {len(traces)} of {ranks} ranks wrote a trace",
                  soft_wrap=True)
    ending()
    out.print(f"\nrun folder: {result.run_dir}  ({', '.join(traces)}; each rank's "
              "bench.json and meta.json in rank-N/)", soft_wrap=True)
    tv = self_command()
    out.print(f"next:\n  {tv} analyze {result.run_dir}\n  {tv} advise "
              f"{result.run_dir}/{traces[0] if traces else 'rank-0.pt.trace.json.gz'}",
              soft_wrap=True)
    return int(result.status)


def _profiler_name(profiler: str | None) -> str:
    from traceviz.capture.user_script import PROFILER_NAMES

    return PROFILER_NAMES[str(profiler)]


@dataclass
class _Schedule:
    """The script's profiler schedule, for the progress lines."""

    warmup: int     # unprofiled steps 0 .. warmup-1; step ``warmup`` warms the profiler up
    active: int     # the profiled steps after it
    run_dir: Path

    @property
    def steps(self) -> str:
        first, last = self.warmup + 1, self.warmup + self.active
        return f"step {first}" if first == last else f"steps {first}-{last}"


def _event(err: Console, event: dict, schedule: _Schedule) -> None:
    kind = event.get("event")
    if kind == "note":
        err.print(f"traceviz: {escape(event['message'])}", highlight=False)
    elif kind == "phase" and event.get("phase") == "profiled":
        err.print(f"traceviz: step {schedule.warmup} warms the profiler up; recording "
                  f"{schedule.steps} for {escape(str(schedule.run_dir))}", soft_wrap=True,
                  highlight=False)
    elif kind == "progress" and event.get("phase") == "profiled" \
            and event.get("done") == event.get("total"):
        err.print(f"traceviz: {schedule.steps} recorded; the script runs on unprofiled "
                  "(its later steps are timed)", highlight=False)


def _next_lines(out: Console, run_dir: Path, raw: Path | None, parquet: Path | None) -> None:
    files = ", ".join(p for p in (raw and str(raw.relative_to(run_dir)),
                                  parquet and parquet.name, "bench.json", "meta.json",
                                  "config.json") if p)
    out.print(f"\nrun folder: {run_dir}  ({files})", soft_wrap=True)
    if parquet is None:
        return
    tv = self_command()
    for line in ("next:", f"  {tv} analyze {parquet} --plot {run_dir}/charts",
                 f"  {tv} advise {run_dir}",
                 f"  {tv} analyze {parquet} --perfetto {run_dir}/perfetto.json   "
                 "# then open it in https://ui.perfetto.dev"):
        out.print(line, soft_wrap=True)
