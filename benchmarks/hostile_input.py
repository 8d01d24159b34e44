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
- an ``.xplane.pb.gz`` of a few MB inflating to 2 GiB (refused before it is inflated);
- bounded reading (``BOUNDED_CASES``, their own block below): an nsys SQLite export whose
  kernel table is a recursive view yielding rows for ever (``sqlite_endless``), or none
  ever (``sqlite_stuck``: by the default time limit, by a 5 s one, and Ctrl-C after 5 s);
  a 300-byte XSpace under ``ulimit -v`` 4.5 GB with the XSpace limit of a 128 GB machine
  (``xspace_small``); an XSpace whose one ``--xspace-name-mb`` name is shared by 100
  kernels (``xspace_shared``); a 2.7 MB traceviz Parquet of 40 M identical rows
  (``parquet_rows``).

Names and ranges (``--cases names,ranges``), Kineto traces: three short kernel names (the
floor every case pays); one kernel name of 40 KB, 250 KB or 1 MB, an identifier inside a
template signature, and one holding a 160 KB run of spaces (each name is shortened and
classified: no pattern may backtrack over it); 4,000 ranges nested in each other over
4,000 kernels launched in the innermost, the same with kernel i launched in range i, and
1,000 steps of 40 nested ranges over 200,000 kernels (a kernel belongs to every range
around its launch: no row per kernel per range).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import sqlite3
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
    ap.add_argument("--xspace-name-mb", type=float, default=50.0)
    ap.add_argument("--cases", default="bomb,before,after,xplane,names,ranges,"
                    + ",".join(BOUNDED_CASES),
                    help="which cases, comma-separated (default: all)")
    args = ap.parse_args()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="hostile-"))
    folder.mkdir(parents=True, exist_ok=True)
    cases = set(args.cases.split(","))
    try:
        names_and_ranges(folder, cases)  # names and ranges: their own block below
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
        bounded_reads(folder, cases, args.xspace_name_mb)
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


# --- names and ranges: Kineto traces written event by event ---

def _kineto_write(path: Path, events) -> None:
    """A Kineto trace of ``events`` (dicts), written one event at a time."""
    with open(path, "w") as f:
        f.write('{"schemaVersion": 1, "traceEvents": [\n')
        for i, e in enumerate(events):
            f.write((",\n" if i else "") + json.dumps(e))
        f.write("\n]}\n")


def _launch(corr: int, ts: float, name: str = "k") -> list[dict]:
    """A kernel launched at ``ts`` (µs) on thread 1 and run on device 0 right after."""
    return [{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
             "ts": ts, "dur": 0.2, "args": {"correlation": corr}},
            {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts + 0.5,
             "dur": 0.3 + (corr % 7) * 0.1,
             "args": {"device": 0, "stream": 7, "correlation": corr}}]


def _named_kernel(name: str):
    """A trace of three kernels, the middle one named ``name``."""
    def make(path: Path) -> None:
        _kineto_write(path, [e for i, k in enumerate(("gemm_a", name, "gemm_b"))
                             for e in _launch(i + 1, 10.0 * (i + 1), k)])
    return make


def _nested_ranges(ranges: int, kernels: int, spread: bool = False):
    """``ranges`` ranges on one thread, each inside the one before, the ``kernels``
    launched inside the innermost (``spread``: kernel i inside range i and no deeper, so
    that no two ranges hold the same kernels)."""
    def make(path: Path) -> None:
        span = 2.0 * (kernels + ranges) + 10
        def events():
            for i in range(ranges):
                yield {"ph": "X", "cat": "user_annotation", "name": f"range_{i}", "pid": 1,
                       "tid": 1, "ts": float(i), "dur": span - 2.0 * i}
            for j in range(kernels):
                at = j + 0.2 if spread else ranges + 1.0 + j  # before range j + 1 starts
                yield from _launch(j + 1, at, f"kernel_{j % 4}")
        _kineto_write(path, events())
    return make


def _stepped_ranges(steps: int, depth: int, per_step: int):
    """``steps`` steps one after another, each ``depth`` nested ranges (``layer_0`` ...)
    over ``per_step`` kernels launched in the innermost, named after 20 kernels."""
    def make(path: Path) -> None:
        def events():
            corr = 0
            width = 2.0 * depth + per_step + 4
            for s in range(steps):
                t0 = s * width
                for d in range(depth):
                    yield {"ph": "X", "cat": "user_annotation", "name": f"layer_{d}",
                           "pid": 1, "tid": 1, "ts": t0 + d, "dur": width - 1 - 2.0 * d}
                for j in range(per_step):
                    corr += 1
                    yield from _launch(corr, t0 + depth + 1.0 + j, f"kernel_{corr % 20}")
        _kineto_write(path, events())
    return make


def names_and_ranges(folder: Path, cases: set[str]) -> None:
    """Write and run the names and ranges cases chosen in ``cases``; a names case twice:
    ``--json`` keeps names whole, the tables shorten them."""
    for label, name, make in _name_and_range_cases():
        case, label = label.split(":", 1)
        if case in cases:
            path = folder / name
            make(path)
            report(label, path)
            if case == "names":
                _report_tables(label + " (tables)", path)
            path.unlink()


def _report_tables(label: str, path: Path) -> None:
    """``report`` of ``traceviz analyze FILE`` printing its tables at 120 columns."""
    code = ("import sys\nfrom traceviz.cli import main\ntry:\n    rc = main(sys.argv[1:])\n"
            "finally:\n    print('PEAK', open('/proc/self/status').read().split('VmHWM:')[1]"
            ".split()[0], file=sys.stderr)\nsys.exit(rc)")
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code, "analyze", str(path)],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          env={**os.environ, "COLUMNS": "120"}, check=False)
    wall = time.perf_counter() - started
    lines = done.stderr.decode(errors="replace").strip().splitlines()
    peak = [int(x.split()[1]) for x in lines if x.startswith("PEAK ")] or [0]
    err = [x for x in lines if not x.startswith("PEAK ")] or [""]
    print(f"{label:<44} {path.stat().st_size / MB:7.1f} MB file {wall:8.2f} s  "
          f"peak {peak[-1] >> 10:6,} MB  rc {done.returncode}  {err[-1][:110]}", flush=True)


def _name_and_range_cases():
    """(``case:label``, file name, writer) of the names and ranges cases."""
    word = "void ns::kernel_{}<float>(int)".format
    return [
        ("names:three short kernel names (the floor)", "floor.json",
         _named_kernel(word("a"))),
        ("names:a 40 KB kernel name", "name40k.json", _named_kernel(word("a" * 40_000))),
        ("names:a 250 KB kernel name", "name250k.json", _named_kernel(word("a" * 250_000))),
        ("names:a 1 MB kernel name", "name1m.json", _named_kernel(word("a" * MB))),
        ("names:a kernel name with 160 KB of spaces", "spaces.json",
         _named_kernel("k" + " " * 160_000 + "x<int>")),
        ("ranges:4,000 nested ranges over 4,000 kernels", "nested.json",
         _nested_ranges(4_000, 4_000)),
        ("ranges:the same, kernel i launched in range i", "spread.json",
         _nested_ranges(4_000, 4_000, spread=True)),
        ("ranges:200,000 kernels under 40 nested ranges a step", "steps.json",
         _stepped_ranges(1_000, 40, 200)),
    ]


# --- end of names and ranges ---


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


# --- bounded reading: nsys views, XSpace memory, Parquet rows -------------------------

BOUNDED_CASES = ("sqlite_endless", "sqlite_stuck", "xspace_small", "xspace_shared",
                 "parquet_rows")
_KERNEL_COLUMNS = ("start", "end", "deviceId", "streamId", "correlationId", "globalPid",
                   "demangledName", "shortName")
_RECURSIVE = "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT {} FROM r"
_PEAK_CODE = ("import sys\nfrom traceviz.cli import main\ntry:\n"
              "    rc = main(sys.argv[1:])\nfinally:\n"
              "    status = open('/proc/self/status').read().split('VmHWM:')[1]\n"
              "    print('PEAK', int(status.split()[0]), file=sys.stderr)\nsys.exit(rc)")


def bounded_reads(folder: Path, cases: set[str], xspace_name_mb: float) -> None:
    """The bounded-reading cases named in ``cases``, each reported as ``report`` does
    (a run past its ``timeout`` is killed and said to be)."""
    if "sqlite_endless" in cases:
        path = _nsys_view(folder / "endless.sqlite", "")
        _report_bounded("nsys kernel table: a view of endless rows", path, timeout=600)
    if "sqlite_stuck" in cases:
        path = _nsys_view(folder / "stuck.sqlite", " WHERE n < 0")
        _report_bounded("nsys kernel table: a view that returns no row", path, timeout=600)
        _report_bounded("  the same, TRACEVIZ_MAX_SQLITE_SECONDS=5", path, timeout=600,
                        env={"TRACEVIZ_MAX_SQLITE_SECONDS": "5"})
        _report_bounded("  the same, Ctrl-C (SIGINT) after 5 s", path, timeout=600,
                        interrupt_after=5.0)
    if "xspace_small" in cases:
        path = folder / "small.xplane.pb"
        path.write_bytes(_xspace("volta_sgemm_128x64_nn", 5))
        _report_bounded("small XSpace, ulimit -v 4.5 GB, 16 GB XSpace limit", path,
                        env={"TRACEVIZ_MAX_XSPACE_MB": "16384"}, address_space=4.5 * (1 << 30))
    if "xspace_shared" in cases:
        path = folder / "shared.xplane.pb"
        path.write_bytes(_xspace("k" * int(xspace_name_mb * MB), 100))
        _report_bounded(f"XSpace: one {xspace_name_mb:g} MB name, 100 kernels", path,
                        timeout=3600)
        path.unlink()
    if "parquet_rows" in cases:
        path = _identical_rows(folder / "rows.parquet", 40_000_000)
        # not read with the limit lifted: that took all 23 GB of the machine it was
        # tried on, and the system killed it after 158 s
        _report_bounded("traceviz Parquet of 40 M identical rows", path, timeout=600)


def _report_bounded(label: str, path: Path, env: dict[str, str] | None = None,
                    timeout: float = 600, address_space: float | None = None,
                    interrupt_after: float | None = None) -> None:
    def limit() -> None:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        if address_space is not None:
            resource.setrlimit(resource.RLIMIT_AS, (int(address_space),) * 2)

    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", _PEAK_CODE, "analyze", str(path), "--json"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env={**os.environ, **(env or {})}, preexec_fn=limit)
    said = ""
    try:
        if interrupt_after is not None:
            time.sleep(interrupt_after)
            proc.send_signal(signal.SIGINT)
            started = time.perf_counter()  # from the signal to the exit
            said = "(from the signal) "
        _, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, stderr = proc.communicate()
        said = f"(killed after {timeout:g} s) "
    wall = time.perf_counter() - started
    lines = stderr.decode(errors="replace").strip().splitlines()
    peaks = [int(x.split()[1]) for x in lines if x.startswith("PEAK ")]
    err = [x for x in lines if not x.startswith("PEAK ")]
    size = path.stat().st_size
    shown = f"{size / MB:7.1f} MB" if size >= MB // 10 else f"{size:7,} B "
    print(f"{label:<52} {shown} file {wall:8.2f} s {said}peak "
          f"{(peaks[-1] if peaks else 0) >> 10:6,} MB  rc {proc.returncode}  "
          f"{(err[-1] if err else '')[:110]}", flush=True)


def _nsys_view(path: Path, where: str) -> Path:
    """A minimal nsys export: StringIds, and the kernel table a recursive view."""
    path.unlink(missing_ok=True)
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL)")
    db.execute("INSERT INTO StringIds VALUES (1, 'volta_sgemm_128x64_nn')")
    columns = ", ".join(f"{'1' if c.endswith('Name') else 'n'} AS {c}" for c in _KERNEL_COLUMNS)
    db.execute("CREATE VIEW CUPTI_ACTIVITY_KIND_KERNEL AS "
               + _RECURSIVE.format(columns) + where)
    db.commit()
    db.close()
    return path


def _xspace(name: str, kernels: int) -> bytes:
    """An XSpace of ``kernels`` kernels on one GPU stream, all named by one metadata
    entry (``name``), each launched by one host call."""
    from traceviz.parsers.xspace.messages import xspace_class

    space = xspace_class()()
    planes = []
    for plane_id, plane_name, event, line_name in (
            (1, "/host:CPU", "cuLaunchKernel", "python"),
            (2, "/device:GPU:0", name, "Stream #7(Compute)")):
        plane = space.planes.add(id=plane_id, name=plane_name)
        plane.stat_metadata[1].id, plane.stat_metadata[1].name = 1, "correlation_id"
        plane.event_metadata[1].id, plane.event_metadata[1].name = 1, event
        planes.append(plane.lines.add(id=7, name=line_name, timestamp_ns=1000))
    for i in range(kernels):
        for line, offset, duration in ((planes[0], 0, 4_000), (planes[1], 6_000, 10_000)):
            event = line.events.add(metadata_id=1, offset_ps=i * 20_000 + offset,
                                    duration_ps=duration)
            event.stats.add(metadata_id=1, uint64_value=i + 1)
    return space.SerializeToString()


def _identical_rows(path: Path, rows: int) -> Path:
    """A traceviz Parquet of one kernel row ``rows`` times, written in blocks."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    import traceviz

    src = path.with_suffix(".json")
    src.write_text(json.dumps({"traceEvents": [json.loads(EVENT)]}))
    one = traceviz.load(src).save(path.with_suffix(".one.parquet"), force=True)
    table = pq.read_table(one)
    block = table.take(pa.array([0] * (1 << 20)))
    with pq.ParquetWriter(path, table.schema, compression="zstd") as writer:
        for start in range(0, rows, len(block)):
            writer.write_table(block.slice(0, min(len(block), rows - start)))
    src.unlink()
    one.unlink()
    return path


if __name__ == "__main__":
    main()
