"""Make the output excerpt the README and the documentation show: ``traceviz analyze`` on a
committed H100 capture, recorded by rich and written as ``docs/img/analyze.svg`` and its
text twin ``docs/img/analyze.txt`` (what ``tests/test_docs.py`` compares with the current
output).

    python docs/make_screens.py            # rewrite both files
    python docs/make_screens.py --check    # exit 1 when they differ from the current output
"""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path

from rich.console import Console

ROOT = Path(__file__).resolve().parent.parent
IMG = ROOT / "docs" / "img"
TRACE = "sample_traces/gpu/cudnn_torch/train/trace.parquet"
ARGV = ["analyze", TRACE, "--top", "8", "--width", "100"]
COMMAND = "traceviz " + " ".join(ARGV)
WIDTH = 100


def record() -> Console:
    """Run ``traceviz analyze`` in this process with a recording console; return it."""
    from traceviz.cli import analyze as analyze_cli
    from traceviz.cli import main

    console = Console(record=True, width=WIDTH, file=io.StringIO(), force_terminal=True,
                      color_system="truecolor", markup=False, legacy_windows=False)
    real = analyze_cli.stdout
    analyze_cli.stdout = lambda width=None: console
    cwd = Path.cwd()
    try:
        os.chdir(ROOT)  # the header names the trace by the path given
        code = main(ARGV)
    finally:
        analyze_cli.stdout = real
        os.chdir(cwd)
    if code != 0:
        raise SystemExit(f"{COMMAND} ended with status {code}")
    return console


def text_of(console: Console) -> str:
    """The recorded output as plain text, trailing spaces removed (clears the record)."""
    text = console.export_text(clear=False, styles=False)
    return "\n".join(line.rstrip() for line in text.splitlines()) + "\n"


def main(argv: list[str]) -> int:
    console = record()
    text = text_of(console)
    if "--check" in argv:
        same = (IMG / "analyze.txt").read_text() == text
        print("docs/img/analyze.txt matches" if same else "docs/img/analyze.txt differs "
              "from the current output: run python docs/make_screens.py")
        return 0 if same else 1
    IMG.mkdir(parents=True, exist_ok=True)
    (IMG / "analyze.txt").write_text(text)
    # a fixed id: rich names its CSS classes by a hash of the whole output otherwise, so one
    # changed line rewrote every line of the file
    svg = console.export_svg(title=COMMAND, clear=True, unique_id="analyze")
    (IMG / "analyze.svg").write_text(svg)
    print(f"wrote {IMG / 'analyze.svg'} and {IMG / 'analyze.txt'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
