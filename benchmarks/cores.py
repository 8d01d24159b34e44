"""The import on more cores: ``traceviz import`` of a ~200 MB Kineto JSON by 1, 2, 4, 8 and
16 decoders (as many of those as the machine has usable cores), beside HTA's parser
measured in the same run.

    python benchmarks/cores.py [--size-mb 200] [--reps 3] [--workers 1,2,4,8,16]
                               [--hta-python PATH] [--python-reader]

Each run is a fresh process (``benchmarks/ingest.py``'s child: read the trace, write its
Parquet) with ``TRACEVIZ_IMPORT_WORKERS=N``: with the compiled reader the pieces are
decoded by N threads; ``--python-reader`` adds the Python reader (``TRACEVIZ_READER=python``,
N worker processes) at the same counts. The file is ``ingest.py``'s build. Runs alternate,
their order rotated each round (a busy machine slows every configuration alike); each
figure is a median of ``--reps`` runs, with its CPU time (the importing process and its
threads: the Python reader's worker processes, children of a fork server, are not
counted) and the peak RSS of its process tree, and its ratio to HTA's
``parse_trace_dataframe`` (its own interpreter, see ``ingest.py``) measured in the same
rounds.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.fast import rotated, timed_child  # noqa: E402
from benchmarks.ingest import CHILD_HTA, CHILD_TRACEVIZ, DATA, build  # noqa: E402


def _with_env(env: dict[str, str], python: str, code: str, *args: str
              ) -> tuple[float, int, float]:
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        return timed_child(python, code, *args)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size-mb", type=int, default=200, help="JSON size (default 200)")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--workers", default="1,2,4,8,16",
                   help="decoder counts to measure, those above the usable cores left out")
    p.add_argument("--hta-python", default=None,
                   help="interpreter with holistictraceanalysis installed (the peer)")
    p.add_argument("--python-reader", action="store_true",
                   help="also the Python reader (worker processes) at the same counts")
    args = p.parse_args()
    from traceviz.parsers.kineto import native
    from traceviz.system.pools import usable_cores

    cores = usable_cores()
    counts = [n for n in map(int, args.workers.split(",")) if n <= cores]
    if native.reader() != "native":
        raise SystemExit("the compiled Kineto reader is not built: pip install -e . where "
                         "a C compiler is found")
    src = build(args.size_mb)
    size = src.stat().st_size
    out = DATA / "cores.parquet"
    runs: dict[str, dict[str, str]] = {
        f"compiled, {n} thread{'s' * (n > 1)}": {"TRACEVIZ_IMPORT_WORKERS": str(n),
                                                  "TRACEVIZ_READER": "native"}
        for n in counts}
    if args.python_reader:
        runs.update({f"Python, {n} process{'es' * (n > 1)}": {
            "TRACEVIZ_IMPORT_WORKERS": str(n), "TRACEVIZ_READER": "python"} for n in counts})
    keys = list(runs) + (["HTA"] if args.hta_python else [])
    print(f"input: {src} ({size / 1e6:.0f} MB of JSON); {cores} usable cores "
          f"(load average {os.getloadavg()[0]:.1f}); {args.reps} rounds of {len(keys)} runs")
    results: dict[str, list[tuple[float, int, float]]] = {k: [] for k in keys}
    for i in range(args.reps):
        for key in rotated(keys, i):
            if key == "HTA":
                results[key].append(timed_child(args.hta_python, CHILD_HTA, str(src)))
            else:
                results[key].append(_with_env(runs[key], sys.executable, CHILD_TRACEVIZ,
                                              str(src), str(out)))
            print(f"  round {i + 1}: {key}: {results[key][-1][0]:.2f} s", flush=True)

    def med(key: str, at: int) -> float:
        return statistics.median(r[at] for r in results[key])

    one = med(keys[0], 0)
    hta = med("HTA", 0) if "HTA" in results else None
    print(f"\n| run | wall (median) | CPU | peak RSS | x 1 thread | x HTA"
          f"{f' ({hta:.2f} s)' if hta else ''} |")
    print("|---|---|---|---|---|---|")
    for key in keys:
        wall, cpu, rss = med(key, 0), med(key, 2), med(key, 1)
        peer = f"{hta / wall:.1f}x" if hta and key != "HTA" else "-"
        print(f"| {key} | {wall:.2f} s | {cpu:.2f} s | {rss / size:.2f}x the JSON | "
              f"{one / wall:.2f}x | {peer} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
