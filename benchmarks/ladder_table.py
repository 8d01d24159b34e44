"""Print a ladder as a Markdown table (docs/ladder.md): the same rows `traceviz ladder`
prints, read from a ladder folder.

    python benchmarks/ladder_table.py DIR            # a folder `traceviz ladder --out DIR` wrote
    traceviz ladder --repeat 3 --steps 15 --out DIR  # to make one (interleaved repeats)

The machine line comes from the baseline's meta.json and config.json.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from traceviz.files.runfolder import read_record
from traceviz.ladder.read import read_ladder, repeat_dirs, rung_dir
from traceviz.render.terminal.ladder_view import ladder_cols, ladder_footnotes, ladder_rows


def _machine(root: Path) -> str:
    d = rung_dir(repeat_dirs(root)[0], "naive8_torch", "eager")
    meta = read_record(d / "meta.json") or {}
    cfg = read_record(d / "config.json") or {}
    return (f"{meta.get('device_name')}, {meta.get('framework')} "
            f"{meta.get('framework_version')} ({meta.get('cpu_threads')} threads); "
            f"{cfg.get('steps')} timed batches per rung and repeat")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("folder", type=Path, help="a ladder folder")
    args = p.parse_args()
    ladder = read_ladder(args.folder)
    w = ladder.workload
    print(f"{w['layers']} layers x hidden {w['hidden']}, seq {w['seq']}, batch {w['batch']}, "
          f"{w['mode']}, FP32; {ladder.device}: {_machine(args.folder)}; "
          f"{ladder.repeats} repeat(s), modes {', '.join(ladder.modes)}\n")
    cols = [c.one_line for c in ladder_cols(ladder.modes)]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for row in ladder_rows(ladder):
        print("| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |")
    print()
    for line in ladder_footnotes(ladder):
        print(f"- {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
