"""``traceviz report``: runs and sweeps written up as Markdown or one HTML file."""

from __future__ import annotations

import argparse
from pathlib import Path

from traceviz.cli.base import (
    Command,
    add_peak,
    check_labels,
    load_runs,
    peak_of,
    refuse_existing,
    stderr,
)
from traceviz.errors import UsageError
from traceviz.files.fileio import atomic_output, staged_folder

SUFFIXES = (".md", ".html", ".htm")


class ReportCommand(Command):
    name = "report"
    help = "write a Markdown or self-contained HTML report of runs and sweeps"

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("inputs", type=Path, nargs="+",
                       help="run folders, traces, sweep folders, sweep.parquet files, or "
                            "folders of rank traces (a job: its ranks, their arrivals at "
                            "the collectives, its slowest rank)")
        p.add_argument("-o", "--output", type=Path, required=True,
                       help="report.md (charts in report_files/ beside it) or report.html")
        p.add_argument("--label", action="append", metavar="NAME",
                       help="the name of an input in tables and charts, one per input in "
                            "order (default: its folder's name)")
        p.add_argument("--title", default="traceviz report")
        p.add_argument("--force", action="store_true", help="replace an existing report")
        add_peak(p)

    def run(self, args: argparse.Namespace) -> int:
        from traceviz.analyses.compare.runs import run_figures
        from traceviz.analyses.shown.report_data import report_data
        from traceviz.capture.grid import SWEEP_FILE, load_sweep
        from traceviz.render.report import build_report, to_markdown

        suffix = args.output.suffix.lower()
        if suffix not in SUFFIXES:
            raise UsageError(f"{args.output}: the report must end in .md or .html")
        refuse_existing([args.output], args.force)
        peak = peak_of(args)  # a bad --peak is refused before any trace is read
        from traceviz.files.folders import is_dataset, is_rank_folder

        labels = check_labels(args.label, len(args.inputs))
        sweeps, run_paths, jobs = [], [], []
        run_labels: list[str] = []
        for i, p in enumerate(args.inputs):
            given = labels[i] if labels else None
            sweep = p / SWEEP_FILE if p.is_dir() and (p / SWEEP_FILE).exists() else None
            if sweep is None and p.name.endswith(SWEEP_FILE):
                sweep = p
            if sweep is not None:
                name = given or sweep.resolve().parent.name or "sweep"
                sweeps.append((name, load_sweep(sweep)))
            elif is_dataset(p) or is_rank_folder(p):
                jobs.append((given or p.resolve().name or str(p), p))
            else:
                run_paths.append(p)
                if given is not None:
                    run_labels.append(given)
        runs = load_runs(run_paths, run_labels or None)
        lead = []
        for name, p in jobs:  # a job's sections first; its slowest rank is one of the runs
            from traceviz.cli.advise import advise_job
            from traceviz.render.report.job_sections import job_sections

            job, trace = advise_job(p, peak=peak)
            lead += job_sections(name, job)
            runs.append((f"{name}: rank {job.slowest} (the slowest)", trace))
        figs = [run_figures(t, label, peak=peak) for label, t in runs]
        sections = lead + build_report(report_data(figs, sweeps))
        if suffix == ".md":
            files_dir = args.output.stem + "_files"
            text, files = to_markdown(sections, args.title, files_dir)
            targets = {args.output.parent / rel: png for rel, png in files.items()}
            refuse_existing(list(targets), args.force)  # the charts beside the report too
        else:  # one file to explore: Bokeh, every script inlined
            from traceviz.analyses.shown.html_runs import html_runs
            from traceviz.render.report.html_page import html_report

            files, files_dir = {}, ""
            shown = html_runs([(label, t, f) for (label, t), f in zip(runs, figs, strict=True)],
                              peak)
            text = html_report(shown, sections[len(lead):], args.title, lead)
        # the report and its charts written under temporary names, renamed at the end: an
        # interrupted or failed write (a full disk) leaves neither
        with atomic_output(args.output, force=args.force) as tmp:
            tmp.write_text(text)
            if files:
                charts = args.output.parent / files_dir
                # other files already there are kept: the check above refused collisions
                with staged_folder(charts, force=True) as stage:
                    for rel, png in files.items():
                        target = stage / Path(rel).relative_to(files_dir)
                        target.parent.mkdir(parents=True, exist_ok=True)
                        target.write_bytes(png)
        stderr().print(f"wrote {args.output} ({len(sections)} sections)")
        return 0
