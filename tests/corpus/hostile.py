"""Corpus cases of hostile and wrong inputs: bombs, wrong values, wrong types in records
and metadata, and odd files (``generate.cases`` adds them to the corpus).

Each case keeps its inputs unchanged (``keep``): a refused input is never rewritten."""

from __future__ import annotations

import json
import shutil
import zlib
from collections.abc import Callable
from pathlib import Path

from tests.corpus.generate import (
    ERR,
    OK,
    ROOT,
    Case,
    _dataset,
    _dump,
    _is,
    _kineto_doc,
    _parquet_case,
    _set_meta,
    _sql,
    _sqlite_case,
    _untyped,
    _with,
    _write,
)

RUN = ROOT / "sample_traces" / "cpu" / "cell_torch"  # a CPU run: trace, bench, config, meta


def _gz_of_spaces(total: int, head: bytes, tail: bytes) -> bytes:
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = b" " * (1 << 20)
    parts = [comp.compress(head)]
    parts += [comp.compress(block) for _ in range(total >> 20)]
    return b"".join([*parts, comp.compress(tail), comp.flush()])


def _run(edit: Callable[[Path], None] | None = None) -> Callable[[Path], None]:
    """A copy of a real run folder without its Parquet (the records are read beside the
    raw trace), then ``edit``ed."""
    def setup(d: Path) -> None:
        shutil.copytree(RUN, d / "run", ignore=shutil.ignore_patterns("trace.parquet"))
        if edit is not None:
            edit(d / "run")
    return setup


def _record(name: str, change: Callable[[dict], None]) -> Callable[[Path], None]:
    def edit(run: Path) -> None:
        value = json.loads((run / name).read_text())
        change(value)
        (run / name).write_text(json.dumps(value))  # NaN written as NaN, as Python does
    return edit


def _meta_edit(change: Callable[[dict], None]) -> Callable:
    def edit(t):
        meta = json.loads(t.schema.metadata[b"traceviz"])
        change(meta)
        return t.replace_schema_metadata({b"traceviz": json.dumps(meta).encode()})
    return edit


_RUN_INPUTS = ("run/bench.json", "run/config.json", "run/meta.json",
               "run/trace.pt.trace.json.gz")


def hostile_cases() -> list[Case]:
    import pyarrow as pa

    doc = _kineto_doc()
    out: list[Case] = []

    def add(id_: str, argv: list[str], setup, expect: int, says: str = "",
            keep: tuple[str, ...] = (), outputs: tuple[str, ...] = ()) -> None:
        out.append(Case(f"hostile/{id_}", argv, setup, expect, says, outputs, keep))

    def kineto(id_: str, data: bytes, expect: int, says: str = "", name: str = "t.json") -> None:
        add(id_, ["analyze", "{d}/" + name, "--json"], _write(name, data), expect, says,
            keep=(name,))

    # bombs: refused at the limit, not after inflating them whole
    kineto("gzip-bomb-whitespace", _gz_of_spaces(300 << 20, b'{"traceEvents": [', b"]}"),
           ERR, "a gzip bomb?", name="t.json.gz")
    kineto("gzip-bomb-before-document", _gz_of_spaces(300 << 20, b"", b'{"traceEvents": []}'),
           ERR, "a gzip bomb?", name="t.json.gz")
    xbomb = _gz_of_spaces(300 << 20, b"\x0a\x80\x80\x80\x80\x01", b"")
    add("xplane-gzip-bomb", ["analyze", "{d}/t.xplane.pb.gz", "--json"],
        _write("t.xplane.pb.gz", xbomb), ERR, "a gzip bomb?", keep=("t.xplane.pb.gz",))
    # a whitespace-only array of 40 MB: more than one read block, read in linear time
    kineto("array-of-whitespace", b'{"traceEvents": [' + b" " * (40 << 20) + b"]}", ERR,
           "no profiler events")

    # wrong values: noted and dropped, or refused; never a figure
    kineto("dur-text-number", _with(doc, _is("kernel"), dur="20"), OK)
    kineto("name-null-on-kernels", _with(doc, _is("kernel"), name=None), OK)
    kineto("name-null-everywhere", _with(doc, lambda e: True, name=None), ERR,
           "no profiler events")
    kineto("bom", b"\xef\xbb\xbf" + _dump(doc), ERR, "byte order mark (BOM)")
    kineto("events-are-strings", b'{"traceEvents": ["a"]}', ERR,
           "holds values that are not events")
    add("dev-zero", ["analyze", "/dev/zero"], lambda d: None, ERR, "not a regular file")
    add("markdown-device-name", ["report", "{d}/t.parquet", "-o", "{d}/r.md"],
        _parquet_case(_meta_edit(lambda m: m.update(
            devices={"0": "<img src=x onerror=alert(1)>"}))), OK,
        keep=("t.parquet",), outputs=("r.md", "r_files/*"))
    add("escape-in-file-name", ["analyze", "{d}/t\x1b[2J.json"], lambda d: None, ERR,
        "t\\x1b[2J.json: no such file")

    # nsys rows without times, or ending before they start
    nsys = ["analyze", "{d}/r.sqlite", "--json"]
    add("nsys-kernel-end-before-start", nsys, _sqlite_case(_sql(
        "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = start - 5")), OK, keep=("r.sqlite",))
    add("nsys-kernel-null-times", nsys, _sqlite_case(_untyped(
        "CUPTI_ACTIVITY_KIND_KERNEL",
        "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = NULL, end = NULL")), OK,
        keep=("r.sqlite",))

    # run records: wrong values and wrong types name the file and the field
    run = ["analyze", "{d}/run", "--json"]

    def record(id_: str, name: str, change: Callable[[dict], None], says: str,
               expect: int = ERR) -> None:
        add(id_, run, _run(_record(name, change)), expect, says, keep=_RUN_INPUTS)

    def set_(key: str, value: object, sub: str | None = None) -> Callable[[dict], None]:
        def change(d: dict) -> None:
            (d[sub] if sub else d)[key] = value
        return change

    record("bench-nan-batch-time", "bench.json",
           lambda b: b["batch_times_s"].__setitem__(0, float("nan")),
           "bench.json: field batch_times_s is not a list of numbers of 0 or more")
    record("bench-negative-batch-time", "bench.json",
           lambda b: b["batch_times_s"].__setitem__(0, -1.5),
           "bench.json: field batch_times_s")
    record("bench-elapsed-text", "bench.json", set_("elapsed_s", "1.5"),
           "bench.json: field elapsed_s")
    record("bench-elapsed-nan", "bench.json", set_("elapsed_s", float("nan")),
           "bench.json: field elapsed_s")
    record("bench-median-negative", "bench.json", set_("median", -1.0, "time_per_batch_s"),
           "bench.json: field time_per_batch_s")
    record("bench-memory-list", "bench.json", set_("memory", [1]), "bench.json: field memory")
    for key, value in (("model", 5), ("workload", [1]), ("amp", 16), ("seed", "0"),
                       ("options", "x"), ("device", {"a": 1})):
        record(f"config-{key}-wrong-type", "config.json", set_(key, value),
               f"config.json: field {key} is")
    for key, value in (("batch", "8"), ("seq", 1.5), ("mode", 3), ("lr", "1e-3"),
                       ("sparse_embedding", "no"), ("batch", True)):
        record(f"config-workload-{key}-{type(value).__name__}", "config.json",
               set_(key, value, "workload"), f"config.json: field workload.{key} is")
    for key, value in (("framework", 5), ("cpu_threads", "2"), ("device_name", ["x"])):
        record(f"meta-{key}-wrong-type", "meta.json", set_(key, value),
               f"meta.json: field {key} is")

    # Parquet metadata of the wrong type
    pq = ["analyze", "{d}/t.parquet", "--json"]
    for key, value, says in (("devices", [1], "field devices is"),
                             ("devices", {"0": 5}, "field devices holds"),
                             ("notes", "x", "field notes is"),
                             ("notes", [1], "field notes is not a list of texts"),
                             ("origin_ns", "0", "field origin_ns is"),
                             ("bench", {"batch_times_s": [float("nan")]},
                              "field bench.batch_times_s"),
                             ("workload", {"batch": "8"}, "field workload.batch is"),
                             ("runner", {"framework": 1}, "field runner.framework is"),
                             ("model", 1, "field model is")):
        add(f"parquet-meta-{key}-{type(value).__name__}", pq,
            _parquet_case(_meta_edit(lambda m, k=key, v=value: m.update({k: v}))), ERR,
            says, keep=("t.parquet",))
    # Parquet values out of their range: refused in one line, or dropped with a note
    for label, column, value, expect, says in (
            ("negative-dur", "dur_ns", -10_692_000, ERR, "column dur_ns has 1 negative value"),
            ("ts-end-past-int64", "ts_ns", 2 ** 63 - 10, ERR, "past 64-bit nanoseconds"),
            ("huge-ts", "ts_ns", 2 ** 62, -1, "")):
        def edit(t, c=column, v=value):
            i = t.schema.get_field_index(c)
            arr = t.column(c).to_pylist()
            arr[t.column("kind").to_pylist().index("kernel")] = v  # on a kernel's row
            return t.set_column(i, c, pa.array(arr, pa.int64()))
        for cmd in (["analyze", "{d}/t.parquet", "--json"],
                    ["report", "{d}/t.parquet", "-o", "{d}/r.md"]):
            add(f"parquet-{label}-{cmd[0]}", cmd, _parquet_case(edit), expect, says,
                keep=("t.parquet",), outputs=("r.md", "r_files/*"))
    add("parquet-zero-rows-amp", ["amp", "{d}/t.parquet", "{d}/t.parquet", "--json"],
        _parquet_case(lambda t: t.slice(0, 0)), ERR, "no rows", keep=("t.parquet",))

    # dataset metadata of the wrong type
    ds = ["analyze", "{d}/ds", "--json"]
    add("dataset-rank-meta-devices-list", ds, _dataset(_set_meta(lambda m: {
        **m, "ranks": {k: {**v, "meta": {**v["meta"], "devices": [1]}}
                       for k, v in m["ranks"].items()}})), ERR,
        "ranks.0.meta.devices is", keep=("ds/_traceviz.json",))
    add("dataset-rank-meta-notes-number", ds, _dataset(_set_meta(lambda m: {
        **m, "ranks": {k: {**v, "meta": {**v["meta"], "notes": 5}}
                       for k, v in m["ranks"].items()}})), ERR,
        "ranks.0.meta.notes is", keep=("ds/_traceviz.json",))

    # a sweep table with NaN where figures belong
    def nan_sweep(d: Path) -> None:
        import numpy as np
        import pandas as pd

        df = pd.read_parquet(ROOT / "sample_traces" / "cpu_sweep" / "sweep.parquet")
        for c in df.columns:
            if df[c].dtype.kind == "f":
                df.loc[df.index[0], c] = np.nan
        (d / "s").mkdir()
        df.to_parquet(d / "s" / "sweep.parquet")
    add("sweep-nan-report", ["report", "{d}/s", "-o", "{d}/r.md"], nan_sweep, -1,
        keep=("s/sweep.parquet",), outputs=("r.md", "r_files/*"))
    add("sweep-nan-plot", ["sweep-plot", "{d}/s/sweep.parquet", "--out", "{d}/plots"],
        nan_sweep, -1, keep=("s/sweep.parquet",), outputs=("plots/*",))
    return out
