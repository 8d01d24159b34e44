"""Time and peak memory of reading hostile inputs: each must cost work bounded by its
size (linear), or be refused early by a limit.

    python benchmarks/hostile_input.py [--sizes 100,200,400] [--bomb-gb 1] [--keep DIR]

Each case runs ``traceviz analyze FILE --json`` in a fresh process and prints its wall
time, its peak resident memory (its ``VmHWM``; decode workers' apart, Linux only), its exit
status and its error line. The cases:

- a ``.json.gz`` of about 1 MB holding ``--bomb-gb`` GiB of whitespace inside the event
  array (a gzip bomb);
- plain ``.json`` event arrays holding N MB of whitespace before their one event, for each
  N of ``--sizes`` (time should grow in proportion to N);
- the same after the event, where it counts toward that element's size (refused past
  ``TRACEVIZ_MAX_ELEMENT_MB``, and read in linear time when the limit is raised);
- an ``.xplane.pb.gz`` of a few MB inflating to 2 GiB (refused before it is inflated).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

MB = 1 << 20
EVENT = (b'{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 2, "pid": 0, '
         b'"tid": 7, "args": {"device": 0, "stream": 7}}')


def _gzip_write(path: Path, parts) -> None:
    """Write a gzip file from byte parts, without holding the inflated whole."""
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    with open(path, "wb") as f:
        for part in parts:
            f.write(comp.compress(part))
        f.write(comp.flush())


def _spaces(total: int, block: int = 4 * MB):
    while total > 0:
        n = min(block, total)
        yield b" " * n
        total -= n


def _plain_write(path: Path, parts) -> None:
    with open(path, "wb") as f:
        for part in parts:
            f.write(part)


def run(path: Path, env: dict[str, str] | None = None
        ) -> tuple[float, tuple[int, int], int, str]:
    """Wall seconds, peak KB (the process's, its largest child's), exit status and last
    stderr line of one analyze."""
    # the child states its own peak, VmHWM (ru_maxrss keeps the forking parent's peak
    # across exec: it read 1 GB for a process that never held 130 MB)
    code = ("import resource, sys\nfrom traceviz.cli import main\ntry:\n"
            "    rc = main(sys.argv[1:])\nfinally:\n"
            "    status = open('/proc/self/status').read().split('VmHWM:')[1]\n"
            "    peak = int(status.split()[0])\n"
            "    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss\n"
            "    print('PEAK', peak, kids, file=sys.stderr)\nsys.exit(rc)")
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", code, "analyze", str(path), "--json"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env={**os.environ, **(env or {})})
    _, stderr = proc.communicate()
    wall = time.perf_counter() - started
    lines = stderr.decode(errors="replace").strip().splitlines()
    # this process's peak and its largest worker's (decode workers, when it starts any)
    peaks = [(int(x.split()[1]), int(x.split()[2])) for x in lines if x.startswith("PEAK ")]
    err = [x for x in lines if not x.startswith("PEAK ")]
    return wall, peaks[-1] if peaks else (0, 0), proc.returncode, (err[-1] if err else "")


def report(label: str, path: Path, env: dict[str, str] | None = None) -> None:
    wall, peak, rc, line = run(path, env)
    size = path.stat().st_size / MB
    print(f"{label:<44} {size:7.1f} MB file {wall:8.2f} s  peak {peak[0] >> 10:6,} MB "
          f"(worker {peak[1] >> 10:5,} MB)  rc {rc}  {line[:110]}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100,200,400", help="MB of whitespace, comma-separated")
    ap.add_argument("--bomb-gb", type=float, default=1.0)
    ap.add_argument("--xplane-gb", type=float, default=2.0)
    ap.add_argument("--keep", type=Path, help="write the inputs here and keep them")
    ap.add_argument("--cases", default="bomb,before,after,xplane",
                    help="which cases, comma-separated (default: all)")
    args = ap.parse_args()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="hostile-"))
    folder.mkdir(parents=True, exist_ok=True)
    cases = set(args.cases.split(","))
    try:
        bomb = folder / "bomb.json.gz"
        if "bomb" in cases:
            _gzip_write(bomb, [b'{"traceEvents": [', *_spaces(int(args.bomb_gb * (1 << 30))),
                               b"]}"])
            report(f"{args.bomb_gb:g} GiB of whitespace in a .json.gz", bomb)
        for n in [int(x) for x in args.sizes.split(",")] if "before" in cases else []:
            before = folder / f"ws_before_{n}.json"
            _plain_write(before, [b'{"traceEvents": [', *_spaces(n * MB), EVENT, b"]}"])
            report(f"{n} MB of whitespace before the event", before)
            before.unlink()
        for n in [int(x) for x in args.sizes.split(",")] if "after" in cases else []:
            after = folder / f"ws_after_{n}.json"
            _plain_write(after, [b'{"traceEvents": [', EVENT, *_spaces(n * MB), b"]}"])
            report(f"{n} MB of whitespace after the event", after)
            report("  the same, TRACEVIZ_MAX_ELEMENT_MB=1024", after,
                   {"TRACEVIZ_MAX_ELEMENT_MB": "1024"})
            after.unlink()
        if "xplane" not in cases:
            return
        xbomb = folder / "bomb.xplane.pb.gz"
        # an XSpace whose one plane claims a huge payload of zero bytes
        size = int(args.xplane_gb * (1 << 30))
        head = b"\x0a" + _varint(size)
        _gzip_write(xbomb, [head, *(b"\0" * n for n in _sizes(size, 16 * MB))])
        report(f"{args.xplane_gb:g} GiB XSpace in a .xplane.pb.gz", xbomb)
    finally:
        if args.keep is None:
            for p in folder.iterdir():
                p.unlink()
            folder.rmdir()


def _sizes(total: int, block: int):
    while total > 0:
        yield min(block, total)
        total -= block


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


if __name__ == "__main__":
    main()
