"""Every command's ``--json`` (with ``--terminal``, its printed output too) on every trace
and run folder the project can read, written to one file per (input, command): run it before
and after a change that must change no figure
(a refactor), then ``diff -r BEFORE AFTER``.

    python tools/json_snapshot.py /tmp/before          # on the old tree
    python tools/json_snapshot.py /tmp/after           # on the new one
    diff -r /tmp/before /tmp/after && echo identical

Each input runs in a fresh interpreter (no cache shared between inputs), all its commands
in process, ``--jobs`` inputs at a time. The exit status and stderr are kept beside stdout,
so a refusal that changes its words shows in the diff too.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
TRACE_SUFFIXES = (".json", ".json.gz", ".sqlite", ".nsys-rep", ".qdrep", ".pb", ".pb.gz")


def inputs() -> list[Path]:
    """Every trace file under ../shared/traces, the rank folder, and every run folder
    (a folder holding trace.parquet) under sample_traces/ and ../shared/gpu-h200/."""
    found: list[Path] = []
    for path in sorted((SHARED / "traces").rglob("*")):
        if path.is_file() and path.name.endswith(TRACE_SUFFIXES) and "8rank" not in str(path):
            found.append(path)
    found += sorted(p for p in (SHARED / "traces").rglob("*8rank") if p.is_dir())
    for base in (ROOT / "sample_traces", SHARED / "gpu-h200"):
        found += sorted(p.parent for p in base.rglob("trace.parquet"))
    return found


def commands(path: Path, terminal: bool = False) -> list[list[str]]:
    path = Path(os.path.relpath(path, ROOT))  # the same text in every tree's output
    out = [["analyze", str(path), "--json"], ["advise", str(path), "--json"],
           ["whatif", str(path), "--json"]]
    return out + [argv[:-1] for argv in out] if terminal else out


PAIRS = [("sample_traces/gpu/fused_torch/train", "sample_traces/gpu/graph_torch/train"),
         ("sample_traces/gpu/cudnn_torch/train", "sample_traces/gpu/cudnn_torch-bf16/train"),
         ("sample_traces/cpu/cudnn_torch", "sample_traces/cpu/fine_torch")]


def extra_commands(terminal: bool = False) -> list[list[str]]:
    out = [["models", "--json"], ["ladder", "--from", "../shared/gpu-h200", "--json"]]
    for a, b in PAIRS:
        out.append(["compare", a, b, "--json"])
    out.append(["amp", PAIRS[1][0], PAIRS[1][1], "--json"])
    out.append(["amp", "sample_traces/gpu/fine_torch/train",
                "sample_traces/gpu/fine_torch-fp16/train", "--json"])
    return out + [argv[:-1] for argv in out] if terminal else out


def run_in_process(argvs: list[list[str]]) -> list[dict]:
    from traceviz.cli import main

    results = []
    for argv in argvs:
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            try:
                rc = main(argv)
            except SystemExit as e:  # argparse
                rc = e.code
        results.append({"argv": argv, "rc": rc, "stdout": out.getvalue(),
                        "stderr": err.getvalue()})
    return results


def slug(argv: list[str]) -> str:
    text = "_".join(a.replace(str(SHARED), "shared").replace(str(ROOT), "") for a in argv)
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", text)[-180:]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path, help="folder for the outputs (created)")
    ap.add_argument("--jobs", type=int, default=2, help="inputs at a time (default 2)")
    ap.add_argument("--only", metavar="TEXT", action="append",
                    help="only the commands whose text (command, input, options) holds TEXT "
                         "(repeatable: any of them)")
    ap.add_argument("--terminal", action="store_true",
                    help="also every command without --json: what it prints (120 columns "
                         "into a file)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        for res in run_in_process(json.loads(args.child)):
            (args.out / (slug(res["argv"]) + ".txt")).write_text(
                f"rc={res['rc']}\n--- stdout\n{res['stdout']}\n--- stderr\n{res['stderr']}")
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    batches = ([commands(p, args.terminal) for p in inputs()]
               + [[c] for c in extra_commands(args.terminal)])
    if args.only:  # the commands (of any input) whose text holds one of them
        batches = [[c for c in b if any(t in " ".join(c) for t in args.only)]
                   for b in batches]
        batches = [b for b in batches if b]

    def one(batch: list[list[str]]) -> int:
        return subprocess.run([sys.executable, __file__, str(args.out), "--child",
                               json.dumps(batch)], cwd=ROOT).returncode

    with ThreadPoolExecutor(args.jobs) as pool:
        for i, rc in enumerate(pool.map(one, batches), 1):
            print(f"{i}/{len(batches)} {' '.join(batches[i - 1][0][:2])} rc={rc}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
