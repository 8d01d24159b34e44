"""Property-based fuzzing of the sections that read collectives and ranges: communication
(the collectives by kind, their messages, exposed time) and ranges (user and NVTX ranges,
their kernels, their timeline), on seeds that hold both, with mutations aimed at what
those sections read: a collective's message fields and names, a range's times, text,
domain, category and payload. Each example runs analyze --json (every section), whatif
and advise, and one in four also writes report.html (its step timeline reads what no
other command does); every one ends in exit 0, or in exit 2 with one ``traceviz: error:``
line (``test_fuzz._check``). A failure leaves its input in ``tests/corpus/regressions/``.

Budget: a tenth of ``TRACEVIZ_FUZZ_EXAMPLES`` per target (default 15; each example runs
its commands on a whole analysis, 2-3 s of CPU), the seeds cut small (297 Kineto events,
the tiny nsys export with 8 NVTX rows, BERT's first 40 events per line): about two
minutes of CPU for the three. ``TRACEVIZ_FUZZ_EXAMPLES=1500 TRACEVIZ_FUZZ_RANDOM=1`` for a
longer, new run.
"""

from __future__ import annotations

import copy
import functools
import gzip
import io
import json
import shutil
import sqlite3
import tempfile
import warnings
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import KINETO, SHARED_TRACES
from tests.test_fuzz import FUZZ, LEAVES, SQL_VALUES, VALUES, Blob, _apply, _check, _run
from traceviz.cli import main

# every example reaches the analyses (most of test_fuzz's stop at a parse error): 2-3 s
# of CPU each with its three commands, so a tenth of the examples per target
SECTIONS = settings(FUZZ, max_examples=max(10, FUZZ.max_examples // 10))
NCCL_TRACE = KINETO / "a100_nccl.json.gz"
TINY = SHARED_TRACES / "nsys" / "rtx3080_tiny.sqlite"
BERT = SHARED_TRACES / "xplane" / "tf24_bert_amp_gpu.xplane.pb.gz"
# names the communication section reads as collectives, with the edges a name can have
COLLECTIVES = ["ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, "
               "ncclWork*)", "ncclKernel_AllGather_RING_LL_Sum_int8_t", "all-reduce.3",
               "nccl:all_reduce", "record_param_comms", "gloo:all_reduce", "c10d::allreduce_",
               "dpsk::ep::internode::dispatch", "multimem_all_reduce_kernel", "",
               "ncclKernel_SendRecv" + "x" * 300]
NUMBERS = st.sampled_from([0, -1, 1, 2 ** 31, 2 ** 59, 2 ** 63 - 1, 2 ** 63, 2 ** 64, 1e30,
                           float("nan"), "12", "[0, 1]", None])


def _sections(path: Path, label: str, report: bool) -> None:
    """``test_fuzz._run``'s commands, then (``report``) report.html where they read it."""
    _run(path, label)
    if not report:
        return
    out = path.parent / "r.html"
    err = io.StringIO()
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with redirect_stdout(io.StringIO()), redirect_stderr(err):
            code = main(["report", str(path), "-o", str(out), "--force"])
    _check(path, label, code, err.getvalue())


# --- Kineto: NCCL kernels with their messages, record_param_comms, user ranges ----------

@functools.cache
def _nccl_doc() -> dict:
    """The A100 DDP trace cut to its collectives (kernels, launches, record_param_comms),
    every user range (ProfilerStep, ## forward ##, nccl:all_reduce, their GPU twins) and
    the first 80 kernels of its first step: 297 events."""
    with gzip.open(NCCL_TRACE) as f:
        doc = json.load(f)
    timed = [e for e in doc["traceEvents"] if "ts" in e]
    t0 = min(float(e["ts"]) for e in timed if str(e.get("name", "")).startswith("ProfilerStep#"))
    kernels = sorted((e for e in timed if e.get("cat") == "kernel" and float(e["ts"]) >= t0),
                     key=lambda e: float(e["ts"]))
    corr = {e["args"]["correlation"] for e in kernels[:80]}
    corr |= {e["args"]["correlation"] for e in timed
             if e.get("cat") == "kernel" and "nccl" in e["name"].lower()}
    doc["traceEvents"] = [
        e for e in doc["traceEvents"] if "ts" not in e
        or e.get("cat") in ("user_annotation", "gpu_user_annotation")
        or e.get("name") == "record_param_comms"
        or (e.get("cat") in ("kernel", "cuda_runtime")
            and e.get("args", {}).get("correlation") in corr)]
    return doc


COMM_ARGS = st.sampled_from(["In msg nelems", "Out msg nelems", "Group size", "dtype",
                             "Process Group Name", "Collective name", "Process Group Ranks",
                             "In split size", "Out split size"])


@st.composite
def kineto_sections(draw) -> tuple[bytes, bool]:
    doc = copy.deepcopy(_nccl_doc())
    events = doc["traceEvents"]
    comm = [e for e in events if "nccl" in str(e.get("name", "")).lower()
            or e.get("name") == "record_param_comms"]
    ranges = [e for e in events if e.get("cat") in ("user_annotation", "gpu_user_annotation")]
    for _ in range(draw(st.integers(1, 6))):
        action = draw(st.sampled_from(["message", "message", "rename", "range", "copy"]))
        if action == "message":
            e = draw(st.sampled_from(comm))
            e.setdefault("args", {})[draw(COMM_ARGS)] = draw(st.one_of(NUMBERS, VALUES))
        elif action == "rename":
            e = draw(st.sampled_from(events))
            e["name"] = draw(st.one_of(st.sampled_from(COLLECTIVES), LEAVES))
        elif action == "range":
            e = draw(st.sampled_from(ranges))
            e[draw(st.sampled_from(["ts", "dur", "name", "tid", "cat"]))] = draw(
                st.one_of(NUMBERS, st.sampled_from(["ProfilerStep#7", "## forward ##",
                                                    "nccl:all_reduce", "gpu_user_annotation"]),
                          VALUES))
        else:
            events.append(copy.deepcopy(draw(st.sampled_from(comm + ranges))))
    if draw(st.booleans()):
        doc["distributedInfo"] = draw(st.one_of(VALUES, st.fixed_dictionaries(
            {"rank": NUMBERS, "world_size": NUMBERS, "backend": st.just("nccl")})))
    return Blob(json.dumps(doc).encode()), draw(st.integers(0, 3)) == 0


@pytest.mark.shared(NCCL_TRACE)
@SECTIONS
@given(kineto_sections())
def test_fuzz_kineto_sections(case):
    data, report = case
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "t.json"
        path.write_bytes(data)
        _sections(path, "kineto-sections", report)


# --- nsys: the tiny export with NVTX ranges, one kernel named as a collective -----------

def _nsys_seed(path: Path) -> None:
    """The tiny RTX 3080 export with an NVTX table written around its kernels: push/pop
    and start/end ranges, a step, a domain (created, then used), categories and payloads
    of each type; its first kernel renamed as an NCCL all-reduce."""
    shutil.copyfile(TINY, path)
    db = sqlite3.connect(path)
    k0, k1 = db.execute("SELECT min(start), max(end) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()
    tid, = db.execute("SELECT globalTid FROM CUPTI_ACTIVITY_KIND_RUNTIME LIMIT 1").fetchone()
    name_id, = db.execute("SELECT demangledName FROM CUPTI_ACTIVITY_KIND_KERNEL "
                          "ORDER BY start LIMIT 1").fetchone()
    db.execute("UPDATE StringIds SET value = ? WHERE id = ?", (COLLECTIVES[0], name_id))
    db.execute("CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType "
               "INTEGER NOT NULL, rangeId INTEGER, category INTEGER, color INTEGER, text TEXT, "
               "globalTid INTEGER, endGlobalTid INTEGER, textId INTEGER, domainId INTEGER, "
               "uint64Value INTEGER, int64Value INTEGER, doubleValue REAL, uint32Value "
               "INTEGER, int32Value INTEGER, floatValue REAL, jsonTextId INTEGER, "
               "jsonText TEXT, binaryData TEXT)")
    mid = (k0 + k1) // 2
    rows = [  # start, end, eventType, text, domainId, category, int64Value, doubleValue
        (k0 - 2000, k1 + 2000, 59, "step 1", 0, None, None, None),
        (k0 - 1000, mid, 59, "forward", 0, 3, 42, None),
        (mid, k1 + 1000, 59, "backward", 0, None, None, 0.5),
        (k0 - 500, k0 + 500, 60, "aten::mm, seq = 4, op_id = 7", 0, None, None, None),
        (k0, k0, 75, "MPI", 7, None, None, None),  # the domain MPI, created
        (k0 - 100, k1 + 100, 59, "MPI_Allreduce", 7, 1, None, None),
        (mid, None, 60, "left open", 0, None, -5, None),
        (k0 - 50, k0 + 50, 34, "a mark", 0, None, None, None),
    ]
    db.executemany("INSERT INTO NVTX_EVENTS (start, end, eventType, text, domainId, category, "
                   "int64Value, doubleValue, globalTid) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                   [(*r, tid) for r in rows])
    db.commit()
    db.close()


NVTX_COLUMNS = st.sampled_from(["start", "end", "eventType", "text", "textId", "globalTid",
                                "domainId", "category", "int64Value", "doubleValue",
                                "uint32Value", "jsonText"])


@st.composite
def nsys_sections(draw) -> tuple[list[tuple], bool]:
    edits = []
    for _ in range(draw(st.integers(1, 5))):
        if draw(st.integers(0, 3)):
            edits.append(("set", "NVTX_EVENTS", draw(NVTX_COLUMNS),
                          draw(st.one_of(SQL_VALUES, st.sampled_from(COLLECTIVES))),
                          draw(st.integers(0, 7))))
        else:  # a kernel's name, through its string
            edits.append(("set", "StringIds", "value",
                          draw(st.one_of(st.sampled_from(COLLECTIVES), SQL_VALUES)),
                          draw(st.integers(0, 3))))
    return edits, draw(st.integers(0, 3)) == 0


@pytest.mark.shared(TINY)
@SECTIONS
@given(nsys_sections())
def test_fuzz_nsys_sections(case):
    edits, report = case
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "r.sqlite"
        _nsys_seed(path)
        db = sqlite3.connect(path)
        for edit in edits:
            _apply(db, *edit)
        db.commit()
        db.close()
        _sections(path, "nsys-sections", report)


# --- XSpace: BERT's first events, some kernels named as collectives ----------------------

@functools.cache
def _xspace_seed() -> tuple[bytes, int]:
    """The shared BERT profile cut to its first events per line (``test_fuzz``), every
    other kernel on each GPU's compute stream made a collective (NCCL's all-reduce on one
    GPU, XLA's on the other); and how many they are."""
    from tests.test_fuzz import _small_space
    from traceviz.parsers.xspace.messages import xspace_class

    space = xspace_class()()
    space.ParseFromString(_small_space())
    count = 0
    gpus = [p for p in space.planes if any(x.name.endswith("(Compute)") for x in p.lines)]
    for plane, name in zip(gpus, COLLECTIVES[:3:2], strict=False):
        mid = max(plane.event_metadata) + 1
        plane.event_metadata[mid].id, plane.event_metadata[mid].name = mid, name
        for line in plane.lines:
            if line.name.endswith("(Compute)"):
                for e in line.events[1::2]:
                    e.metadata_id = mid
                    count += 1
    return space.SerializeToString(), count


@st.composite
def xspace_sections(draw) -> tuple[bytes, bool]:
    from traceviz.parsers.xspace.messages import xspace_class

    space = xspace_class()()
    space.ParseFromString(_xspace_seed()[0])
    planes = [p for p in space.planes if p.lines]
    for _ in range(draw(st.integers(1, 6))):
        plane = draw(st.sampled_from(planes))
        what = draw(st.sampled_from(["name", "name", "time", "line"]))
        if what == "name" and plane.event_metadata:
            mid = draw(st.sampled_from(sorted(plane.event_metadata)))
            plane.event_metadata[mid].name = draw(st.one_of(st.sampled_from(COLLECTIVES),
                                                            st.text(max_size=20)))
        elif what == "time":
            line = draw(st.sampled_from(list(plane.lines)))
            if line.events:
                e = line.events[draw(st.integers(0, len(line.events) - 1))]
                setattr(e, draw(st.sampled_from(["offset_ps", "duration_ps"])),
                        draw(st.integers(-(2 ** 63), 2 ** 63 - 1)))
        else:  # a line that holds ranges, renamed (host threads, "Steps", TF's op lines)
            line = draw(st.sampled_from(list(plane.lines)))
            line.name = draw(st.sampled_from(["Steps", "TensorFlow Ops", "XLA Ops",
                                              "Framework Name Scope", "python", ""]))
    return Blob(space.SerializeToString()), draw(st.integers(0, 3)) == 0


@pytest.mark.shared(BERT)
@SECTIONS
@given(xspace_sections())
def test_fuzz_xspace_sections(case):
    data, report = case
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "h.xplane.pb"
        path.write_bytes(data)
        _sections(path, "xspace-sections", report)


# --- the seeds reach both sections --------------------------------------------------------

@pytest.mark.shared(NCCL_TRACE, TINY, BERT)
def test_seeds_hold_collectives_and_ranges(tmp_path, capsys):
    """Unmutated, each seed has collectives (by kind, in the raw counts) and ranges: the
    fuzzing above reaches the code of both sections."""
    doc = _nccl_doc()
    raw_nccl = sum(e.get("cat") == "kernel" and "nccl" in e["name"].lower()
                   for e in doc["traceEvents"])
    (tmp_path / "t.json").write_text(json.dumps(doc))
    space, renamed = _xspace_seed()
    (tmp_path / "h.xplane.pb").write_bytes(space)
    _nsys_seed(tmp_path / "r.sqlite")
    # the collectives each seed holds: the cut's NCCL kernels, the export's one renamed
    # kernel, the events of BERT's renamed kernels
    for name, collectives in (("t.json", raw_nccl), ("r.sqlite", 1), ("h.xplane.pb", renamed)):
        assert main(["analyze", str(tmp_path / name), "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        comm = out["communication"]
        assert comm is not None and comm["collectives"] > 0, name
        assert comm["collectives"] == collectives, name
        assert out["ranges"], name
