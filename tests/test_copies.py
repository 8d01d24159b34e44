"""Copies on every format: memcpy rows named as torch.profiler names them, with the memory
kinds where the source records them (nsys' srcKind/dstKind, XSpace's memcpy_details), so
the pageable-copy rule reads every format; and host-device copies that no kernel overlaps
(the serialized_copies rule, the overlap_copies scenario). Every expected figure comes from
the raw input by another path: SQL on the nsys export, ``nsys stats``, the protobuf read
here, the Chrome trace the TensorFlow profiler wrote beside each keras XSpace."""

from __future__ import annotations

import gzip
import json
import re
import shutil
import sqlite3
import subprocess
from collections import Counter
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import H200, SHARED_TRACES, missing, shared
from traceviz import load
from traceviz.analyses import advice as A
from traceviz.analyses.advice.actions import framework_free, remedy
from traceviz.analyses.advice.rules import RULES
from traceviz.analyses.summary.exposed_copies import exposed_copies
from traceviz.analyses.whatif import whatif
from traceviz.analyses.work import analysis_windows, work_rows
from traceviz.parsers.nsys.nsys_reader import memcpy_names
from traceviz.table.copy_names import copy_direction

RULE = {r.name: r.rule for r in RULES}
FOREIGN = SHARED_TRACES / "foreign"
DARKNET = FOREIGN / "nsys" / "darknet_xavier_report1.qdrep"
SAXPY = FOREIGN / "nsys" / "pipit_saxpy_mpi_cuda_perlmutter0.sqlite"
TORCH_NSYS = SHARED_TRACES / "nsys" / "h100_2gpu_window.sqlite"
TINY = SHARED_TRACES / "nsys" / "rtx3080_tiny.sqlite"
KERAS = FOREIGN / "xplane" / "keras_semi_supervised_cv"
WINDOWS = ("resnet_s5", "alexnet_s1", "alexnet_s3tune")
DIRECTION = {1: "HtoD", 2: "DtoH", 8: "DtoD"}


# -- nsys: the darknet report (C/CUDA, no framework) --------------------------------------

@pytest.fixture(scope="module")
def darknet(tmp_path_factory) -> tuple[Path, object]:
    """The report exported once by nsys itself, and traceviz's table of that export."""
    shared(DARKNET)
    nsys = shutil.which("nsys")
    if nsys is None:
        missing("nsys is not installed: the darknet report is a .qdrep")
    out = tmp_path_factory.mktemp("darknet") / "report1.sqlite"
    done = subprocess.run([nsys, "export", "--type", "sqlite", "--output", str(out),
                           str(DARKNET)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return out, load(out)


def _sql(path: Path, query: str) -> list[tuple]:
    with sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True) as db:
        return db.execute(query).fetchall()


# the name each copy gets, spelt from the export's own enum labels
KINDS_SQL = """
SELECT m.copyKind, s.label, d.label, count(*), sum(m.bytes), sum(m.end - m.start)
FROM CUPTI_ACTIVITY_KIND_MEMCPY m
JOIN ENUM_CUDA_MEM_KIND s ON s.id = m.srcKind JOIN ENUM_CUDA_MEM_KIND d ON d.id = m.dstKind
GROUP BY 1, 2, 3
"""


def _by_name(trace) -> dict[str, tuple[int, int, int]]:
    ev = trace.events
    m = ev[ev["kind"] == "memcpy"]
    g = m.groupby(m["name"].astype(str)).agg(n=("dur_ns", "size"), b=("bytes", "sum"),
                                             t=("dur_ns", "sum"))
    return {k: (int(r.n), int(r.b), int(r.t)) for k, r in g.iterrows()}


def test_nsys_copies_carry_their_memory_kinds(darknet):
    path, trace = darknet
    want = {f"Memcpy {DIRECTION[k]} ({s} -> {d})": (n, b, t)
            for k, s, d, n, b, t in _sql(path, KINDS_SQL)}
    assert _by_name(trace) == want
    assert want["Memcpy HtoD (Pageable -> Device)"][:2] == (2712, 274_895_808)
    assert want["Memcpy HtoD (Pinned -> Device)"][0] == 400


def test_nsys_copy_totals_equal_nsys_stats(darknet, tmp_path):
    """Named with their kinds, the copies still add up to ``nsys stats``' memory-time
    summary per direction."""
    path, trace = darknet
    copy = tmp_path / path.name  # nsys stats may write beside its input
    shutil.copy(path, copy)
    done = subprocess.run([shutil.which("nsys"), "stats", "-q", "--report", "gpumemtimesum",
                           "--format", "csv", "--output", "-", str(copy)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    rows = [line.split(",") for line in done.stdout.splitlines() if "[CUDA memcpy" in line]
    want = {re.search(r"memcpy (\w+)\]", r[-1]).group(1): (int(r[2]), int(r[1])) for r in rows}
    ev = trace.events
    m = ev[ev["kind"] == "memcpy"]
    got = m.groupby(copy_direction(m["name"]))["dur_ns"].agg(["size", "sum"])
    assert {k: (int(r["size"]), int(r["sum"])) for k, r in got.iterrows()} == want
    assert want == {"HtoD": (3112, 60_255_008)}


def test_pageable_rule_reads_nsys_exports(darknet):
    """2,712 of darknet's 3,112 copies are from pageable memory; the program runs no
    framework, so the action is CUDA's own."""
    path, trace = darknet
    n, ns = _sql(path, """
        SELECT count(*), sum(m.end - m.start) FROM CUPTI_ACTIVITY_KIND_MEMCPY m
        JOIN ENUM_CUDA_MEM_KIND s ON s.id = m.srcKind JOIN ENUM_CUDA_MEM_KIND d ON d.id = m.dstKind
        WHERE s.label = 'Pageable' OR d.label = 'Pageable'""")[0]
    ctx = A.Context(trace)
    f = RULE["pageable_memcpy"](ctx)
    assert f is not None and (f.figures["count"], f.figures["ns"]) == (n, ns) == (2712, ns)
    assert f.evidence[0].startswith("2,712 of 3,112 copies are pageable")
    assert framework_free(ctx)
    assert "cudaHostAlloc" in f.action and "DataLoader" not in f.action


def test_nsys_export_without_memory_kinds(tmp_path):
    """An export whose memcpy table has no srcKind/dstKind (older nsys) names the copy by
    its direction alone, as before."""
    src = shared(TINY)
    copy = tmp_path / "tiny.sqlite"
    shutil.copy(src, copy)
    with sqlite3.connect(copy) as db:
        want = db.execute("SELECT copyKind, count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY "
                          "GROUP BY 1").fetchall()
        db.execute("ALTER TABLE CUPTI_ACTIVITY_KIND_MEMCPY DROP COLUMN srcKind")
        db.execute("ALTER TABLE CUPTI_ACTIVITY_KIND_MEMCPY DROP COLUMN dstKind")
    assert _by_name(load(copy)).keys() == {f"Memcpy {DIRECTION[k]}" for k, _ in want}
    assert {k: v[0] for k, v in _by_name(load(src)).items()} == {
        "Memcpy DtoH (Device -> Pinned)": 1}


def test_memcpy_names_per_kind():
    """The export's enums: copy kind (11-13 unified-memory migrations, named without
    memory kinds as before), memory kinds numbered from Pageable = 0; -1: not recorded."""
    names = memcpy_names(np.array([1, 1, 2, 8, 11, 1, 99]), np.array([0, 1, 2, 2, 4, -1, 0]),
                         np.array([2, 2, 1, 2, 2, -1, 2]))
    assert list(names) == ["Memcpy HtoD (Pageable -> Device)", "Memcpy HtoD (Pinned -> Device)",
                           "Memcpy DtoH (Device -> Pinned)", "Memcpy DtoD (Device -> Device)",
                           "Memcpy HtoD (Unified)", "Memcpy HtoD", "Memcpy"]


# -- XSpace ------------------------------------------------------------------------------

def _chrome(window: str) -> dict:
    """The sibling Chrome trace: the GPU's stream events (exact ns), the step and the host's
    events with a correlation id, from plain JSON."""
    with gzip.open(shared(KERAS / f"{window}.trace.json.gz"), "rt") as f:
        events = json.load(f, parse_float=Decimal)["traceEvents"]
    meta = [e for e in events if e.get("ph") == "M"]
    gpu = next(e["pid"] for e in meta if e["name"] == "process_name"
               and e["args"]["name"] == "/device:GPU:0")
    threads = {e["tid"]: e["args"]["name"] for e in meta
               if e["name"] == "thread_name" and e["pid"] == gpu}

    def ns(x) -> int:
        return int(Decimal(x) * 1000)

    timed = [e | {"t0": ns(e["ts"]), "t1": ns(e["ts"]) + ns(e["dur"])}
             for e in events if e.get("ph") == "X"]
    dev = [e for e in timed if e["pid"] == gpu and threads.get(e["tid"], "").startswith("Stream #")]
    step, = (e for e in timed if e["pid"] == gpu and threads.get(e["tid"]) == "Steps")
    host = [e for e in timed if e["pid"] != gpu and "correlation_id" in e.get("args", {})]
    return {"dev": dev, "step": step, "host": host}


@pytest.mark.parametrize("window", WINDOWS)
def test_xspace_copies_named_as_kineto_names_them(window):
    """TF 2.4 records no memory kinds: ``MemcpyH2D`` becomes ``Memcpy HtoD``; counts and
    bytes per name as the profiler's own Chrome trace has them."""
    raw = _chrome(window)
    spelled = {"MemcpyH2D": "Memcpy HtoD", "MemcpyD2H": "Memcpy DtoH",
               "MemcpyD2D": "Memcpy DtoD"}
    want: Counter = Counter()
    size: Counter = Counter()
    for e in raw["dev"]:
        if e["name"].startswith("Memcpy"):
            want[spelled[e["name"]]] += 1
            size[spelled[e["name"]]] += int(re.search(r"size:(\d+)",
                                                      e["args"]["memcpy_details"]).group(1))
    got = _by_name(load(shared(KERAS / f"{window}.xplane.pb")))
    assert {k: v[:2] for k, v in got.items()} == {k: (want[k], size[k]) for k in want}


def test_xspace_memory_kinds_from_memcpy_details():
    """JAX on an H200 records ``kind_src:device kind_dst:device``: the rows carry them,
    as the protobuf read here spells them."""
    path = shared(H200 / "scan_jax" / "vm.xplane.pb.gz")
    from tests.test_xplane import _events, _space

    want: Counter = Counter()
    short = {"H2D": "HtoD", "D2H": "DtoH", "D2D": "DtoD", "P2P": "PtoP"}
    for _, line, _e, name, st in _events(_space(path), lambda n: n.startswith("/device:GPU:")):
        if not line.name.startswith("Stream #") or "memcpy_details" not in st:
            continue
        kinds = re.search(r"kind_src:(\w+) kind_dst:(\w+)", st["memcpy_details"])
        assert kinds is not None
        src, dst = (k.replace("_", " ").title() for k in kinds.groups())
        want[f"Memcpy {short[name[len('Memcpy'):]]} ({src} -> {dst})"] += 1
    got = _by_name(load(path))
    assert {k: v[0] for k, v in got.items()} == dict(want)
    assert "Memcpy DtoD (Device -> Device)" in want


def test_framework_free_and_remedy_stay_compatible():
    """A PyTorch program under nsys (emit_nvtx's aten:: ranges) has a framework; a remedy
    without ``none=`` is the PyTorch text on any nsys trace, as before."""
    torch_nsys = A.Context(load(shared(TORCH_NSYS)))
    assert not framework_free(torch_nsys)
    assert remedy(torch_nsys, torch="T", tf="F", none="N") == "T"
    saxpy = A.Context(load(shared(SAXPY)))
    assert remedy(saxpy, torch="T", tf="F") == "T"
    assert remedy(saxpy, torch="T", tf="F", none="N") == "N"
    keras = A.Context(load(shared(KERAS / "alexnet_s1.xplane.pb")))
    assert not framework_free(keras)
    assert remedy(keras, torch="T", tf="F", none="N") == "F"


# -- host-device copies no kernel overlaps --------------------------------------------

def _covered(blocks: list[tuple[int, int]], a: int, b: int) -> int:
    return sum(max(0, min(e, b) - max(s, a)) for s, e in blocks)


def _union(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for s, e in sorted(spans):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def _raw_exposed(raw: dict) -> dict:
    """Host-device copies inside the step window and the time no kernel overlaps."""
    w0, w1 = raw["step"]["t0"], raw["step"]["t1"]
    kernels = _union([(e["t0"], e["t1"]) for e in raw["dev"]
                      if not e["name"].startswith(("Memcpy", "Memset"))])
    copies = [e for e in raw["dev"] if e["name"] in ("MemcpyH2D", "MemcpyD2H")]
    exposed = [(e, min(e["t1"], w1) - max(e["t0"], w0)
                - _covered(kernels, max(e["t0"], w0), min(e["t1"], w1))) for e in copies]
    exposed = [(e, x) for e, x in exposed if x > 0]
    union = _union([(max(e["t0"], w0), min(e["t1"], w1)) for e, _ in exposed])
    total = sum(e - s for s, e in union) - sum(_covered(kernels, s, e) for s, e in union)
    big = max(copies, key=lambda e: e["t1"] - e["t0"])
    size = int(re.search(r"size:(\d+)", big["args"]["memcpy_details"]).group(1))
    return {"step_ns": w1 - w0, "exposed_ns": total, "count": len(exposed), "big": big,
            "big_bytes": size, "big_ns": big["t1"] - big["t0"]}


def test_overlap_copies_against_the_copy_time():
    """alexnet_s1's step starts its compute as soon as the batch is on the device: the
    replay saves the copy's time. resnet_s5's host launched its first kernel 11.1 ms into
    the copy (a CPU GatherV2 ran meanwhile): copied ahead, the step saves the rest, from
    that launch to the copy's end."""
    for window in ("alexnet_s1", "resnet_s5"):
        chrome = _chrome(window)
        raw = _raw_exposed(chrome)
        big = raw["big"]
        s = whatif(load(shared(KERAS / f"{window}.xplane.pb")), ("overlap_copies",)) \
            .scenario("overlap_copies")
        assert s.applies
        if window == "alexnet_s1":
            assert s.saving_ns == pytest.approx(raw["big_ns"], rel=0.01)
            continue
        first = min((e for e in chrome["dev"] if e["t0"] >= big["t1"]
                     and not e["name"].startswith("Memcpy")), key=lambda e: e["t0"])
        launch = next(h for h in chrome["host"]
                      if h["args"]["correlation_id"] == first["args"]["correlation_id"])
        assert launch["t0"] - big["t0"] == pytest.approx(11.1e6, rel=0.01)
        assert s.saving_ns == pytest.approx(big["t1"] - launch["t0"], rel=0.01)
        assert s.saving_ns < raw["big_ns"]


def test_overlap_copies_has_nothing_to_change_without_such_copies():
    s = whatif(load(shared(SHARED_TRACES / "kineto" / "a100_nccl.json.gz")),
               ("overlap_copies",)).scenario("overlap_copies")
    assert not s.applies and "no host-to-device copy" in s.reason


# -- the serialized_copies rule --------------------------------------------------------

@pytest.mark.parametrize("window", WINDOWS)
def test_serialized_copies_on_the_keras_windows(window):
    """Each window copies its 100.7 MB input batch host to device with no kernel running:
    a finding at 7.1% (resnet_s5) and 15.3% (alexnet_s1) of the step; alexnet_s3tune's
    first step waits 2.3 s for its batch, and the copy is 0.8% of it: no finding."""
    raw = _raw_exposed(_chrome(window))
    t = load(shared(KERAS / f"{window}.xplane.pb"))
    work = work_rows(t)
    c = exposed_copies(t, work, analysis_windows(t, work))
    # the Chrome trace rounds each time to the ns, the XSpace holds ps (traceviz floors
    # them): an edge may differ by 1 ns
    edges = 2 * raw["count"]
    assert len(c.rows) == raw["count"]
    assert c.exposed_ns == pytest.approx(raw["exposed_ns"], abs=edges)
    big = c.rows.loc[c.rows["dur_ns"].idxmax()]
    assert int(big["bytes"]) == raw["big_bytes"]
    assert int(big["dur_ns"]) == pytest.approx(raw["big_ns"], abs=2)
    assert raw["big_bytes"] == 100_663_296  # 100.7 MB
    ctx = A.Context(t)
    assert ctx.summary.span_ns == pytest.approx(raw["step_ns"], abs=2)
    share = raw["exposed_ns"] / raw["step_ns"]
    f = RULE["serialized_copies"](ctx)
    if window == "alexnet_s3tune":
        assert f is None and share < 0.01
        return
    assert f is not None
    assert f.figures["exposed_ns"] == c.exposed_ns
    assert f.figures["share"] == pytest.approx(share, abs=edges / raw["step_ns"])
    assert share == pytest.approx({"resnet_s5": 0.0706, "alexnet_s1": 0.1525}[window],
                                  abs=5e-4)
    text = " ".join(f.evidence)
    assert "100.7 MB" in text and f"{raw['big_bytes'] / raw['big_ns']:,.1f} GB/s" in text
    assert f"{100 * share:.1f}% of the step" in text
    assert "prefetch_to_device" in f.action and "DataLoader" not in f.action


def test_serialized_copies_silent_on_small_copies():
    """A PyTorch run on two H100s whose copies run 27 µs with no kernel beside them in
    0.6 s of span: no finding."""
    t = load(shared(SHARED_TRACES / "nsys" / "h100_2gpu_mfu_before.sqlite"))
    assert RULE["serialized_copies"](A.Context(t)) is None


@pytest.mark.parametrize("window", ("resnet_s5", "alexnet_s1"))
def test_device_bound_then_the_copy(window):
    """Device-bound windows: the verdict's finding first, the copy right after it, with
    the scenario's saving."""
    a = A.advise_full(load(shared(KERAS / f"{window}.xplane.pb")))
    assert a.bound.by == "device"
    assert [f.rule for f in a.findings[:2]] == ["device_bound", "serialized_copies"]
    assert a.findings[1].saving_scenario == "overlap_copies" and a.findings[1].saving_ns > 0


def test_copies_without_a_framework_get_cuda_words():
    """An MPI + CUDA C program (saxpy on Perlmutter): its pageable copies stall the device
    a quarter of the span; the remedy names CUDA's calls, not a framework's."""
    t = load(shared(SAXPY))
    ctx = A.Context(t)
    f = RULE["serialized_copies"](ctx)
    assert framework_free(ctx) and f is not None
    assert "cudaMemcpyAsync" in f.action and "non_blocking" not in f.action
    n, = _sql(SAXPY,
              "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE copyKind IN (1, 2)")[0]
    assert f.figures["count"] <= n
