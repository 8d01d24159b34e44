"""Re-read committed raw traces into their ``.parquet`` beside them, keeping the capture's
metadata (model, workload, bench...): run after a parser change that adds columns or
rows (for example op shapes for the efficiency figures).

    python sample_traces/reimport.py [FOLDER ...]   (default: sample_traces/)

A run folder's ``trace.parquet`` is rebuilt from its ``*.json.gz``; a loose
``NAME.parquet`` from ``NAME.json.gz`` beside it. Parquets without a raw trace are left as
they are.
"""

from __future__ import annotations

import sys
from pathlib import Path

import traceviz
from traceviz.parsers import load


def pairs(root: Path) -> list[tuple[Path, Path]]:
    out = []
    for parquet in sorted(root.rglob("*.parquet")):
        if parquet.name == "trace.parquet":
            raws = sorted(parquet.parent.glob("*.json.gz"))
        else:
            raws = [parquet.with_suffix(".json.gz")]
        raws = [r for r in raws if r.is_file()]
        if len(raws) == 1:
            out.append((raws[0], parquet))
    return out


def main(argv: list[str]) -> int:
    roots = [Path(a) for a in argv] or [Path(__file__).parent]
    for root in roots:
        for raw, parquet in pairs(root):
            old = traceviz.Trace.load(parquet).meta
            new = load(raw)
            # what the parser says of the file now, and what the capture added then
            new.meta = {**old, **{k: v for k, v in new.meta.items() if k != "source_file"}}
            before = parquet.stat().st_size
            new.save(parquet, force=True)
            print(f"{parquet}: {len(new.events):,} rows, {before:,} -> "
                  f"{parquet.stat().st_size:,} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
