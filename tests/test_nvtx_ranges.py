"""The Ranges section against Nsight Systems' own reports (``nsys stats --report nvtxsum,
nvtxgpuproj, nvtxkernsum``) on other projects' exports, and against the test's own SQL
over the raw tables where nsys is absent; a capture under nsys made here; range-only
exports in analyze, compare and whatif."""

from __future__ import annotations

import csv
import io
import json
import shutil
import sqlite3
import statistics
import subprocess
from collections import defaultdict
from pathlib import Path

import pytest

from tests.conftest import SHARED_TRACES, shared
from traceviz import load
from traceviz.analyses.summary.ranges import range_figures
from traceviz.cli import main

NSYS = SHARED_TRACES / "foreign" / "nsys"
EXPORTS = ("ecf_baseline", "ecf_poolformer", "memfusion_trt_rtx3090_report1",
           "pipit_saxpy_mpi_cuda_perlmutter0")
RANGE_TYPES = "(59, 60, 70, 71)"  # NvtxPushPopRange, NvtxStartEndRange and NVTXT twins

# a range's name and style as nsys' reports make them: the registered string before the
# text, "Domain:" before it where the process registered the domain
RANGES_SQL = f"""
WITH domains AS (SELECT domainId AS id, globalTid & 0x0000FFFFFF000000 AS proc, text AS name
                 FROM NVTX_EVENTS WHERE eventType = 75 GROUP BY 1, 2),
     maxts AS (SELECT max(max(start), max(end)) AS m FROM NVTX_EVENTS)
SELECT e.rowid, e.start, coalesce(e.end, (SELECT m FROM maxts)), e.globalTid,
       CASE WHEN d.name IS NOT NULL THEN d.name || ':' || coalesce(s.value, e.text)
            ELSE coalesce(s.value, e.text) END,
       CASE WHEN e.eventType IN (60, 71) THEN 'StartEnd' ELSE 'PushPop' END
FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId
LEFT JOIN domains d ON d.id = e.domainId AND d.proc = (e.globalTid & 0x0000FFFFFF000000)
WHERE e.eventType IN {RANGE_TYPES}
"""


def _export(name: str) -> Path:
    return shared(NSYS / f"{name}.sqlite")


def _ranges(path: Path) -> list[tuple]:
    with sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True) as db:
        return db.execute(RANGES_SQL).fetchall()


def own_nvtxsum(path: Path) -> dict[tuple[str, str], dict]:
    """nvtxsum computed here: per (name, style) the durations' count, sum, mean, median,
    min, max and sample standard deviation (0 for one range)."""
    durs: dict[tuple[str, str], list[int]] = defaultdict(list)
    for _, start, end, _, name, style in _ranges(path):
        durs[(name, style)].append(end - start)
    return {k: {"instances": len(v), "total_ns": sum(v), "avg_ns": statistics.mean(v),
                "med_ns": statistics.median(v), "min_ns": min(v), "max_ns": max(v),
                "std_ns": statistics.stdev(v) if len(v) > 1 else 0.0}
            for k, v in durs.items()}


def own_gpu_projection(path: Path) -> dict[int, dict]:
    """nvtxgpuproj computed here, per range (its rowid): the GPU ops (kernels, copies,
    sets) whose launch call lies inside the range on its thread: first start, last end,
    distinct launch calls; and the kernels' own time, each kernel once."""
    ranges = _ranges(path)
    with sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True) as db:
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master")}
        ops = []
        for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
                      "CUPTI_ACTIVITY_KIND_MEMSET"):
            if table in tables:
                ops += [(*row, table.endswith("KERNEL")) for row in db.execute(
                    f"SELECT o.rowid, o.start, o.end, r.correlationId, r.start, r.end, "
                    f"r.globalTid FROM {table} o JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON "
                    "r.correlationId = o.correlationId AND "
                    "(r.globalTid & 0xFFFFFFFFFF000000) = o.globalPid")]
    by_thread: dict[int, list] = defaultdict(list)
    for op in ops:
        by_thread[op[6]].append(op)
    out = {}
    for rowid, start, end, gtid, _, _ in ranges:
        inside = [o for o in by_thread.get(gtid, ()) if start <= o[4] and o[5] <= end]
        if not inside:
            continue
        kernels = {o[0]: o[2] - o[1] for o in inside if o[7]}  # a kernel once per range
        out[rowid] = {"proj_start": min(o[1] for o in inside),
                      "proj_ns": max(o[2] for o in inside) - min(o[1] for o in inside),
                      "gpu_ops": len({o[3] for o in inside}), "kernels": len(kernels),
                      "kernel_ns": sum(kernels.values())}
    return out


def nsys_stats(path: Path, report: str, tmp: Path) -> list[dict] | None:
    """``nsys stats`` of a copy of the export (it may write beside its input), as rows;
    None without nsys."""
    nsys = shutil.which("nsys")
    if nsys is None:
        return None
    copy = tmp / path.name
    if not copy.exists():
        shutil.copy(path, copy)
    done = subprocess.run([nsys, "stats", "-q", "--report", report, "--format", "csv",
                           "--output", "-", str(copy)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    text = done.stdout[done.stdout.index(next(h for h in ("Time (%)", "Name,", "NVTX Range")
                                               if h in done.stdout)):]
    return list(csv.DictReader(io.StringIO(text)))


@pytest.fixture(scope="module")
def figures():
    return {name: range_figures(load(_export(name))) for name in EXPORTS}


@pytest.mark.parametrize("name", EXPORTS)
def test_range_table_is_nvtxsum(name, figures, tmp_path):
    path = _export(name)
    table = figures[name].table
    ours = {(r["name"], r["style"]): r for r in table.to_dict("records")}
    want = own_nvtxsum(path)
    assert set(ours) == set(want)
    total = sum(w["total_ns"] for w in want.values())
    for key, w in want.items():
        r = ours[key]
        assert (r["instances"], r["total_ns"], r["min_ns"], r["max_ns"]) == \
            (w["instances"], w["total_ns"], w["min_ns"], w["max_ns"]), key
        assert r["avg_ns"] == pytest.approx(w["avg_ns"], abs=1e-6)
        assert r["med_ns"] == pytest.approx(w["med_ns"], abs=1e-6)
        assert r["std_ns"] == pytest.approx(w["std_ns"], rel=1e-9, abs=1e-6)
        assert r["share"] == pytest.approx(w["total_ns"] / total)
    report = nsys_stats(path, "nvtxsum", tmp_path)
    if report is None:
        return
    assert len(report) == len(ours)
    for row in report:
        r = ours[(row["Range"], row["Style"])]
        assert r["instances"] == int(row["Instances"])
        assert r["total_ns"] == int(row["Total Time (ns)"])
        assert (r["min_ns"], r["max_ns"]) == (int(row["Min (ns)"]), int(row["Max (ns)"]))
        for col, key in (("Avg (ns)", "avg_ns"), ("Med (ns)", "med_ns"),
                         ("StdDev (ns)", "std_ns")):
            assert r[key] == pytest.approx(float(row[col]), abs=0.051), (key, row["Range"])
        assert round(100 * r["share"], 1) == pytest.approx(float(row["Time (%)"]), abs=0.051)


def test_the_issue_s_figures(figures):
    """ecf_baseline's transformer_forward and poolformer_forward as nvtxsum prints them."""
    t = figures["ecf_baseline"].table.set_index("name")
    tf = t.loc["transformer_forward"]
    assert (tf.instances, tf.total_ns, tf.min_ns, tf.max_ns) == \
        (304, 6_139_773_464, 16_320_217, 54_743_820)
    assert tf.med_ns == 17_069_343.5
    assert round(figures["ecf_poolformer"].table.set_index("name")
                 .loc["poolformer_forward"].avg_ns) == 460_812


@pytest.mark.parametrize("name", ["memfusion_trt_rtx3090_report1",
                                  "pipit_saxpy_mpi_cuda_perlmutter0"])
def test_gpu_projection_is_nvtxgpuproj(name, figures, tmp_path):
    path = _export(name)
    fig = figures[name]
    want = own_gpu_projection(path)
    by_name: dict[str, dict] = defaultdict(lambda: defaultdict(int))
    names = {r[0]: r[4] for r in _ranges(path)}
    for rowid, w in want.items():
        for k in ("proj_ns", "gpu_ops", "kernels", "kernel_ns"):
            by_name[names[rowid]][k] += w[k]
    t = fig.table.set_index("name")
    assert set(t.index[t["gpu_ops"] > 0]) == set(by_name)
    for n, w in by_name.items():
        assert {k: int(t.loc[n, k]) for k in w} == dict(w), n
    report = nsys_stats(path, "nvtxgpuproj", tmp_path)
    if report is None:
        return
    proj: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for row in report:
        proj[row["Name"]][0] += int(row["Projected Duration (ns)"])
        proj[row["Name"]][1] += int(row["NumGPUOps"])
    assert {n: [int(t.loc[n, "proj_ns"]), int(t.loc[n, "gpu_ops"])] for n in proj} == \
        dict(proj)


def test_memfusion_s_projection_and_nesting(figures):
    """The issue's TensorRT figures, and nesting: every layer range sits in execute."""
    t = figures["memfusion_trt_rtx3090_report1"].table.set_index("name")
    conv = t.loc["TensorRT:/conv1/Conv + /relu/Relu"]
    assert (conv.proj_ns, conv.total_ns, conv.parent) == \
        (854_662, 40_658, "TensorRT:ExecutionContext::execute")
    ex = t.loc["TensorRT:ExecutionContext::execute"]
    assert (ex.proj_ns, ex.gpu_ops, ex.parent, ex.depth) == (6_457_677, 40, "", 0)


@pytest.mark.parametrize("name", ["memfusion_trt_rtx3090_report1",
                                  "pipit_saxpy_mpi_cuda_perlmutter0"])
def test_kernels_per_range_are_nvtxkernsum(name, figures, tmp_path):
    path = _export(name)
    k = figures[name].kernels
    got = defaultdict(lambda: [0, 0])
    for r in k.itertuples(index=False):
        got[r.range][0] += r.kernels
        got[r.range][1] += r.total_ns
    names = {r[0]: r[4] for r in _ranges(path)}
    want = defaultdict(lambda: [0, 0])
    for rowid, w in own_gpu_projection(path).items():
        if w["kernels"]:
            want[names[rowid]][0] += w["kernels"]
            want[names[rowid]][1] += w["kernel_ns"]
    assert dict(got) == dict(want)
    report = nsys_stats(path, "nvtxkernsum", tmp_path)
    if report is None:
        return
    rows = [r for r in report if r["NVTX Range"]]  # kernels outside every range: no row
    assert len(rows) == len(k)
    mine = k.set_index(["range", "tid", "kernel"])
    for r in rows:
        m = mine.loc[(r["NVTX Range"], int(r["TID"]), r["Kernel Name"])]
        assert (m.kernels, m.ranges) == (int(r["Kern Inst"]), int(r["NVTX Inst"]))
        assert (m.min_ns, m.max_ns) == (int(r["Min (ns)"]), int(r["Max (ns)"]))
        # nsys joins a kernel to every runtime record of its launch: a launch recorded
        # twice (pipit's saxpy) doubles its Total and changes its StdDev, never its mean
        assert m.avg_ns == pytest.approx(float(r["Avg (ns)"]), abs=0.051)
        assert m.med_ns == pytest.approx(float(r["Med (ns)"]), abs=0.051)
        assert m.total_ns == round(float(r["Avg (ns)"]) * int(r["Kern Inst"]))


def test_range_only_export_in_analyze_compare_whatif(capsys):
    base, pool = _export("ecf_baseline"), _export("ecf_poolformer")
    assert main(["analyze", str(base), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    want = own_nvtxsum(base)
    assert {r["name"]: r["instances"] for r in out["ranges"]} == \
        {k[0]: v["instances"] for k, v in want.items()}
    assert out["range_timeline"][0]["outermost"] == sum(
        v["instances"] for v in want.values())  # ecf's ranges never nest
    assert "efficiency" not in out
    # the loop's body, in the order the raw ranges start, and its rounds
    order = [r[4] for r in sorted(_ranges(base), key=lambda r: r[1])]
    tl = out["range_timeline"][0]
    n = len(tl["cycle"])
    assert tl["cycle"] == order[:n] and order == tl["cycle"] * tl["repeats"]
    assert tl["repeats"] == 304
    assert main(["analyze", str(base)]) == 0
    text = capsys.readouterr().out
    assert "user ranges only: 1,824 ranges" in text and "transformer_forward" in text
    assert "Top CPU ops" not in text
    assert main(["compare", str(base), str(pool), "--json"]) == 0
    cmp = json.loads(capsys.readouterr().out)
    rows = {r["name"]: r for r in cmp["range_differences"][0]["ranges"]}
    pool_want = own_nvtxsum(pool)
    fc = rows["find_centers"]
    assert fc["a_mean_ns"] == round(want[("find_centers", "PushPop")]["avg_ns"])
    assert fc["b_mean_ns"] == round(pool_want[("find_centers", "PushPop")]["avg_ns"])
    assert rows["poolformer_forward"]["a_calls"] == 0
    assert rows["poolformer_forward"]["b_calls"] == 96
    assert main(["whatif", str(base)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "ranges" in err[0]


def test_export_and_perfetto_carry_every_range(tmp_path, capsys):
    """--export's range_instances: one row per range, its parent and its projection as
    the test's own SQL finds them; --perfetto (beside --export) a slice per range."""
    import pandas as pd

    path = _export("memfusion_trt_rtx3090_report1")
    out, trace_json = tmp_path / "ex", tmp_path / "p.json"
    assert main(["analyze", str(path), "--export", str(out), "--perfetto",
                 str(trace_json)]) == 0
    capsys.readouterr()
    inst = pd.read_parquet(out / "range_instances.parquet")
    raw = _ranges(path)
    assert len(inst) == len(raw)
    assert sorted(inst["dur_ns"]) == sorted(e - s for _, s, e, _, _, _ in raw)
    proj = own_gpu_projection(path)
    got = sorted(zip(inst.loc[inst["gpu_ops"] > 0, "proj_ns"],
                     inst.loc[inst["gpu_ops"] > 0, "gpu_ops"], strict=True))
    assert got == sorted((w["proj_ns"], w["gpu_ops"]) for w in proj.values())
    # nesting: the outermost range holds every other one on its thread
    outer = max(raw, key=lambda r: r[2] - r[1])
    held = sum(1 for r in raw if r is not outer and r[3] == outer[3]
               and outer[1] <= r[1] and r[2] <= outer[2])
    top = int(inst["dur_ns"].idxmax())
    assert int((inst["parent"] == top).sum()) == held == len(raw) - 1
    events = json.loads(trace_json.read_text())
    events = events["traceEvents"] if isinstance(events, dict) else events
    names = {r[4] for r in raw}
    assert sum(1 for e in events if e.get("ph") == "X" and e.get("name") in names) == len(raw)


def test_report_html_has_a_ranges_track_and_table(tmp_path, capsys):
    """report.html of a range-only export: a track holding every range (the Bokeh
    document's data source) and the ranges table, one row per name."""
    import re

    path = _export("ecf_baseline")
    out = tmp_path / "r.html"
    assert main(["report", "-o", str(out), str(path)]) == 0
    capsys.readouterr()
    page = out.read_text()
    found = re.search(r'<script type="application/json" id="[^"]+">\s*(.*?)\s*</script>',
                      page, re.S)
    doc = json.loads(found.group(1))

    def named(o, name):
        if isinstance(o, dict):
            if o.get("name") == name:
                yield o
            for v in o.values():
                yield from named(v, name)
        elif isinstance(o, list):
            for v in o:
                yield from named(v, name)

    data = dict(next(named(doc, "ranges-0-rows"))["data"]["entries"])
    raw = _ranges(path)
    assert sorted(data["name"]) == sorted(r[4] for r in raw)
    table = next(named(doc, "ranges-0"))
    source = table["source"]
    rows = dict(source["attributes"]["data"]["entries"]) if "attributes" in source else None
    if rows is not None:
        assert sorted(rows["name"]) == sorted({r[4] for r in raw})


def _folded(text: str) -> str:
    """An emit_nvtx range's text as the op it names ("aten::mm, seq = 4, op_id = 7" ->
    "aten::mm"), as the test reads PyTorch's suffixes."""
    head, sep, rest = text.partition(", ")
    if sep and (rest.startswith(("seq = ", "op_id = ", "sizes = ")) or
                head.startswith("aten::")):
        return head
    return text


@pytest.mark.capture
def test_a_capture_under_nsys_shows_the_runner_s_ranges(tmp_path, capsys):
    """A capture made here under nsys: its Ranges table is the export's NVTX ranges,
    emit_nvtx's op ranges folded by op (the test's own SQL, and nsys stats where nsys
    runs), with the runner's step, forward, backward and optimizer ranges; the phases
    stay as they are."""
    from tests.conftest import needs

    needs("torch")
    if shutil.which("nsys") is None:
        pytest.skip("Nsight Systems (nsys) is not installed; .ci/run installs it")
    out = tmp_path / "run"
    tiny = ["--preset", "ptb_lm", "--batch", "4", "--seq", "5", "--hidden", "16",
            "--layers", "1", "--vocab", "50", "--embed", "8", "--warmup", "1", "--steps",
            "3", "--profile-steps", "2", "--device", "cpu"]
    assert main(["capture", "--model", "cudnn_torch", "--profiler", "nsys", "--mode",
                 "train", *tiny, "--out", str(out)]) == 0
    capsys.readouterr()
    export = out / "report.sqlite"
    want: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for (name, _), w in own_nvtxsum(export).items():
        want[_folded(name)][0] += w["instances"]
        want[_folded(name)][1] += w["total_ns"]
    assert main(["analyze", str(export), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    mine = {r["name"]: [r["instances"], r["total_ns"]] for r in got["ranges"]}
    assert mine == dict(want)
    assert {"forward", "backward", "optimizer"} <= set(mine)
    assert any(n.startswith("step ") for n in mine)
    assert {p["phase"] for p in got["phases"]} >= {"forward", "backward", "optimizer"}
    report = nsys_stats(export, "nvtxsum", tmp_path)
    if report is not None:
        theirs: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        for row in report:
            theirs[_folded(row["Range"])][0] += int(row["Instances"])
            theirs[_folded(row["Range"])][1] += int(row["Total Time (ns)"])
        assert mine == dict(theirs)


def test_raw_range_names_keep_emit_nvtx_texts(capsys):
    """An emit_nvtx export (a 2-GPU H100 run): by default its ranges are grouped by op
    ("aten::to"); with --raw-range-names each keeps its whole text, as the export holds it
    (the set of texts read here by SQL)."""
    path = shared(SHARED_TRACES / "nsys" / "h100_2gpu_mfu_after.sqlite")
    with sqlite3.connect(path) as db:
        texts = {t for (t,) in db.execute(
            "SELECT DISTINCT COALESCE(e.text, s.value) FROM NVTX_EVENTS e "
            "LEFT JOIN StringIds s ON e.textId = s.id WHERE e.eventType = 59")}
    emitted = {t for t in texts if t and (", op_id = " in t or ", seq = " in t)}
    assert emitted
    assert main(["analyze", str(path), "--json"]) == 0
    folded = {r["name"] for r in json.loads(capsys.readouterr().out)["ranges"]}
    assert not folded & emitted and "aten::to" in folded
    assert main(["analyze", str(path), "--json", "--raw-range-names"]) == 0
    raw = {r["name"] for r in json.loads(capsys.readouterr().out)["ranges"]}
    assert {n for n in raw if ", op_id = " in n or ", seq = " in n} == emitted


@pytest.mark.parametrize("name", ["mi250_rocm_train.json.gz", "a100_diff_control.json.gz"])
def test_kineto_steps_are_one_range_name(name):
    """torch.profiler's ProfilerStep#N marks are one range name, ProfilerStep#*: its count
    and total are the host step marks' in the raw JSON (device echoes left out)."""
    import gzip

    path = shared(SHARED_TRACES / "kineto" / name)
    raw = json.loads(gzip.decompress(path.read_bytes()))
    events = raw["traceEvents"] if isinstance(raw, dict) else raw
    steps = [e for e in events if e.get("cat") == "user_annotation"
             and str(e.get("name", "")).startswith("ProfilerStep#")]
    table = range_figures(load(path)).table
    row = table[table["name"] == "ProfilerStep#*"]
    assert len(steps) > 1 and len(row) == 1
    assert row["instances"].iloc[0] == len(steps)
    total_us = sum(e["dur"] for e in steps)
    assert row["total_ns"].iloc[0] == pytest.approx(total_us * 1e3, abs=len(steps))
    assert not table["name"].str.match(r"ProfilerStep#\d").any()


@pytest.mark.parametrize(("name", "family"), [
    ("ProfilerStep#12", "ProfilerStep#*"), ("step 3", "step *"), ("Step_4", "Step_*"),
    ("step#7", "step#*"), ("forward", "forward"), ("step 3 fwd", "step 3 fwd")])
def test_step_family(name, family):
    from traceviz.table.steps import step_family

    assert step_family(name) == family
