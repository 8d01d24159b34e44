"""Rank folders for tests and benchmarks: N ranks made from real rank traces.

Rank k is a copy of source k mod len(sources) with ``distributedInfo.rank = k``, its
timestamps shifted by k x ``shift_us`` and its correlation and external ids offset by
k x 10^7, so no two ranks share an id or a time origin (as in a real job) while each
rank's figures equal its source's.

    python benchmarks/rankgen.py N OUT [SOURCE ...]   # default: the shared two-rank traces
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
from pathlib import Path

ID_KEYS = ("correlation", "External id", "Ev Idx")


def make_ranks(sources: list[Path], n: int, out: Path, shift_us: float = 1000.0) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    docs = []
    for src in sources:
        with gzip.open(src, "rt") as f:
            docs.append(json.load(f))
    paths = []
    last = [0] * len(docs)  # the rank each source document holds now (edited in place)
    for k in range(n):
        j = k % len(docs)
        doc, step = docs[j], k - last[j]
        last[j] = k
        info = doc.setdefault("distributedInfo", {})
        info["rank"] = k
        info["world_size"] = n
        for e in doc.get("traceEvents", []):
            if "ts" in e:
                e["ts"] = e["ts"] + step * shift_us
            args = e.get("args")
            if isinstance(args, dict):
                for key in ID_KEYS:
                    if isinstance(args.get(key), int):
                        args[key] += step * 10_000_000
        path = out / f"rank-{k}.json.gz"
        # one write of the whole text: json.dump's many small writes into gzip are slow
        path.write_bytes(gzip.compress(json.dumps(doc).encode(), 1))
        paths.append(path)
    return paths


PAIR = [Path(__file__).resolve().parents[2] / "shared" / "traces" / "kineto"
        / f"ampere_sampled_rank{k}.json.gz" for k in (0, 1)]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Make a folder of N rank traces from real ones.")
    p.add_argument("n", type=int, help="number of ranks")
    p.add_argument("out", type=Path, help="folder to write rank-<k>.json.gz into")
    p.add_argument("sources", type=Path, nargs="*", default=PAIR,
                   help="rank traces to copy (default: ../shared's two-rank trace)")
    args = p.parse_args(argv)
    if args.n < 1:
        p.error("N must be at least 1")
    for src in args.sources:
        if not src.is_file():
            p.error(f"no such trace: {src}")
    if args.out.exists() and any(args.out.iterdir()):
        # ranks left from a larger N would join the folder with another world size
        p.error(f"{args.out} is not empty; give a new folder")
    created = not args.out.exists()
    try:
        paths = make_ranks(args.sources, args.n, args.out)
    except (OSError, EOFError, ValueError) as e:  # a truncated or non-JSON source
        if created:
            shutil.rmtree(args.out, ignore_errors=True)
        p.exit(2, f"rankgen: error: {type(e).__name__}: {e}\n")
    print(f"wrote {len(paths)} ranks to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
