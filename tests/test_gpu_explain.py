"""What a GPU run really costs, on the real H200 captures of ../shared/gpu-h200 (run folders
copied without their Parquet): timed against profiled steps, host time by its cause,
streams that overlap or not. Every expected figure is computed here from the raw Kineto
JSON and bench.json, not from traceviz's own output."""

from __future__ import annotations

import gzip
import json
import shutil
import statistics

import numpy as np
import pytest

import traceviz
from tests.conftest import H200, KINETO, ROOT, shared, shared_parquet
from tests.handmade import row, trace
from traceviz.cli import main

GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


class Raw:
    """A run folder's raw trace and bench, read with json alone."""

    def __init__(self, run: str):
        folder = shared(H200 / run)
        with gzip.open(folder / "trace.pt.trace.json.gz") as f:
            self.events = json.load(f)["traceEvents"]
        self.bench = json.loads((folder / "bench.json").read_text())
        marks = sorted((e["ts"], e["ts"] + e["dur"]) for e in self.events
                       if e.get("ph") == "X" and e.get("cat") == "user_annotation"
                       and str(e.get("name", "")).startswith("ProfilerStep#"))
        self.marks = marks
        self.steps = len(marks)
        runtime = [e for e in self.events if e.get("cat") in ("cuda_runtime", "cuda_driver")]
        self.runtime = runtime
        launched_in = {e["args"]["correlation"] for e in runtime if self.in_steps(e["ts"])}
        self.device = [e for e in self.events if e.get("cat") in GPU_CATS
                       and e["args"].get("correlation") in launched_in]

    def in_steps(self, ts: float) -> bool:
        return any(a <= ts < b for a, b in self.marks)

    @property
    def timed_ns(self) -> float:
        return statistics.median(self.bench["batch_times_s"]) * 1e9

    def kernels_per_step(self) -> float:
        return sum(e["cat"] == "kernel" for e in self.device) / self.steps

    def calls_per_step(self, name: str) -> tuple[float, float]:
        """Calls of ``name`` made inside the step marks, and their time (ns), per step."""
        mine = [e for e in self.runtime if e["name"] == name and self.in_steps(e["ts"])]
        return len(mine) / self.steps, sum(e["dur"] for e in mine) * 1e3 / self.steps

    def multi_stream_us(self) -> float:
        """Time (µs) with two or more streams busy, by a sweep over every device row."""
        edges = sorted([(e["ts"], 1, e["args"]["stream"]) for e in self.device]
                       + [(e["ts"] + e["dur"], -1, e["args"]["stream"]) for e in self.device],
                       key=lambda x: (x[0], x[1]))
        open_per: dict[int, int] = {}
        busy, last, total = 0, None, 0.0
        for t, d, s in edges:
            if last is not None and busy >= 2:
                total += t - last
            before = open_per.get(s, 0)
            open_per[s] = before + d
            if before == 0 and d == 1:
                busy += 1
            elif before == 1 and d == -1:
                busy -= 1
            last = t
        return total


def _json(capsys, *argv: str) -> dict:
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


# -- run folders copied without their Parquet -----------------------------------------

def test_a_copied_run_folder_is_one_run_with_its_timings(capsys, tmp_path):
    raw = Raw("fused_torch")
    t = traceviz.load(shared(H200 / "fused_torch"))
    assert t.meta["bench"] == raw.bench
    assert t.meta["model"] == "fused_torch" and t.meta["runner"]["device_name"] == "NVIDIA H200"
    out = _json(capsys, "analyze", str(H200 / "fused_torch"), "--json")
    assert out["timings"]["median_s"] == pytest.approx(raw.timed_ns / 1e9)
    assert traceviz.ranks is not None
    with pytest.raises(traceviz.TraceVizError, match="one trace"):
        traceviz.ranks(H200 / "fused_torch")
    # import of the raw trace beside its bench.json keeps the timings
    pq = tmp_path / "fused.parquet"
    assert main(["import", str(shared(H200 / "fused_torch" / "trace.pt.trace.json.gz")),
                 "-o", str(pq)]) == 0
    assert traceviz.load(pq).meta["bench"]["batch_times_s"] == raw.bench["batch_times_s"]


def test_a_trace_beside_its_own_parquet_is_one_rank(tmp_path):
    from traceviz.files.folders import rank_files

    shutil.copy(shared(KINETO / "a100_alexnet.json.gz"), tmp_path / "a100_alexnet.json.gz")
    shutil.copy(shared_parquet("kineto", "a100_alexnet.json.gz"), tmp_path / "a100_alexnet.parquet")
    shutil.copy(shared(KINETO / "mi250_rocm_train.json.gz"), tmp_path / "mi250_rocm_train.json.gz")
    assert [p.name for p in rank_files(tmp_path)] == ["a100_alexnet.parquet",
                                                       "mi250_rocm_train.json.gz"]


def test_unrelated_traces_are_not_called_stragglers(tmp_path, capsys):
    src = tmp_path / "unrelated"  # five unrelated jobs; one trace beside its own Parquet
    src.mkdir()
    for name in ("a100_alexnet", "a100_triton_culaunchkernel", "ampere_sampled_rank0",
                 "mi250_rocm_train"):
        shutil.copy(shared(KINETO / f"{name}.json.gz"), src / f"{name}.json.gz")
    for name in ("a100_alexnet", "v100_19k_kernels"):
        shutil.copy(shared_parquet("kineto", f"{name}.json.gz"), src / f"{name}.parquet")
    stems = {p.name.split(".")[0] for p in src.iterdir() if p.is_file()}
    out = _json(capsys, "analyze", str(src), "--json")
    assert len(out["ranks"]) == len(stems)  # one rank per trace, not per file
    assert out["stragglers"] == []
    assert any("not ranks of one job" in n for n in out["notes"])


# -- the timed step ----------------------------------------------------------------------

@pytest.mark.parametrize("run", ["fused_torch", "transposed_torch"])
def test_profiler_overhead_is_shown_beside_the_figures(run, capsys):
    raw = Raw(run)
    out = _json(capsys, "analyze", str(shared(H200 / run)), "--json")
    ts = out["timed_step"]
    assert ts["timed_step_ns"] == pytest.approx(raw.timed_ns)
    # the profiled step: the step marks, within the part of a window after the last mark
    marks = np.mean([b - a for a, b in raw.marks]) * 1e3
    assert ts["profiled_step_ns"] == pytest.approx(marks, rel=0.02)
    # the overhead: the steady profiled step (the profiler's start-up step, the first,
    # left out; this bench.json keeps no profiled times, so the trace's steps) over the
    # timed median, as bench.json, analyze and the report give it
    steady = statistics.median([b - a for a, b in raw.marks][1:]) * 1e3
    assert ts["steady_profiled_step_ns"] == pytest.approx(steady, rel=0.02)
    assert ts["profiler_overhead"] == pytest.approx(steady / raw.timed_ns, rel=0.02)
    assert out["timings"]["profiler_overhead"] == ts["profiler_overhead"]
    times = raw.bench["batch_times_s"]
    assert out["timings"]["overhead_significant"] == (
        not min(times) <= steady / 1e9 <= max(times))
    assert main(["analyze", str(H200 / run)]) == 0
    text = capsys.readouterr().out
    assert f"profiler overhead {ts['profiler_overhead']:.2f}x" in text
    assert "within noise" not in text
    assert f"{raw.timed_ns / 1e6:.3f} ms timed" in text


def test_savings_are_in_timed_time_and_never_below_the_device_work(capsys):
    """advise fused_torch once promised 32.4 ms per step off a 16.9 ms timed step."""
    raw = Raw("fused_torch")
    device = sum(e["dur"] for e in raw.device) * 1e3 / raw.steps  # one stream: a sum
    out = _json(capsys, "whatif", str(shared(H200 / "fused_torch")), "--json")
    graphs = next(s for s in out["scenarios"] if s["name"] == "cuda_graphs")
    step = graphs["per_step"]["timed_predicted_ns"]
    assert device * 0.99 <= step < raw.timed_ns
    assert graphs["per_step"]["timed_saving_ns"] == pytest.approx(raw.timed_ns - step)
    assert graphs["per_step"]["saving_ns"] > raw.timed_ns  # the profiled figure alone
    adv = _json(capsys, "advise", str(H200 / "fused_torch"), "--json")
    host = next(f for f in adv["findings"] if f["rule"] == "host_bound")
    assert 0 < host["timed_saving_ns_per_step"] < raw.timed_ns - device * 0.99
    assert main(["advise", str(H200 / "fused_torch")]) == 0
    assert "per timed step" in capsys.readouterr().out


def test_a_graph_of_fine_torch_is_not_predicted_faster_than_its_kernels(capsys):
    raw = Raw("fine_torch")
    kernels = sum(e["dur"] for e in raw.device) * 1e3 / raw.steps
    out = _json(capsys, "whatif", str(shared(H200 / "fine_torch")), "--json", "--scenario",
                "cuda_graphs")
    assert out["scenarios"][0]["per_step"]["timed_predicted_ns"] >= kernels * 0.99


def test_compare_says_when_profiled_and_timed_orders_disagree(capsys):
    fused, trans = Raw("fused_torch"), Raw("transposed_torch")

    def marks(r: Raw) -> float:
        return sum(b - a for a, b in r.marks) / r.steps

    assert marks(trans) < marks(fused) and trans.timed_ns > fused.timed_ns  # the raw files
    out = _json(capsys, "compare", str(shared(H200 / "fused_torch")),
                str(shared(H200 / "transposed_torch")), "--json")
    (conflict,) = out["profiled_vs_timed_order"]
    assert conflict.startswith("transposed_torch is faster profiled")
    mixed = _json(capsys, "compare", str(H200 / "fused_torch"), str(shared(H200 / "scan_jax")),
                  "--json")["not_like_for_like"]
    assert any(d.startswith("framework (torch, jax)") for d in mixed)
    # both ran on the H200 (the runners' records), though the XSpace may name its GPU
    # "/device:GPU:0": the device is no difference
    assert not any(d.startswith("device") for d in mixed)
    cpu = _json(capsys, "compare", str(H200 / "fused_torch"),
                str(ROOT / "sample_traces" / "gpu" / "fused_torch" / "train"),
                "--json")["not_like_for_like"]
    assert any(d.startswith("device (NVIDIA H200, NVIDIA H100") for d in cpu)


def test_a_ladder_prediction_is_never_faster_than_the_base_rungs_kernels():
    from traceviz.ladder.read import read_ladder
    from traceviz.ladder.rungs import BY_NAME

    rungs = tuple(BY_NAME[n] for n in ("naive8_torch", "fine_torch", "compile_full_torch"))
    ladder = read_ladder(shared(H200), rungs)
    graphs = next(r for r in ladder.rungs if r.rung.variant == "compile_full_torch")
    assert graphs.prediction.on == "fine_torch"
    # fuse_pointwise+cuda_graphs on fine_torch's trace keeps every GEMM kernel: never
    # below their time per step
    fine = Raw("fine_torch")
    kernels = sum(e["dur"] for e in fine.device if "gemm" in e["name"].lower()) * 1e3 / \
        fine.steps
    assert kernels > 0
    assert graphs.prediction.eager_step_s * 1e9 >= kernels * 0.99
    naive8 = Raw("naive8_torch").bench["time_per_batch_s"]["median"]
    assert graphs.prediction.eager_x == pytest.approx(
        naive8 / graphs.prediction.eager_step_s)


# -- host time by its cause ---------------------------------------------------------------

def test_host_time_per_api_call_is_the_calls_own(capsys):
    raw = Raw("streams_torch")
    out = _json(capsys, "analyze", str(shared(H200 / "streams_torch")), "--json")
    apis = {a["name"]: a for a in out["host"]["apis"]}
    for name in ("cudaLaunchKernel", "cudaLaunchKernelExC", "cudaStreamIsCapturing"):
        calls, ns = raw.calls_per_step(name)
        assert apis[name]["calls"] / out["steps"] == pytest.approx(calls, rel=0.01)
        assert apis[name]["per_step_ns"] == pytest.approx(ns, rel=0.02)
    main_t = out["host"]["main_thread"]
    assert main_t["api_ns"] + main_t["op_ns"] + main_t["between_ns"] == main_t["window_ns"]


def test_the_critical_path_names_the_time_between_ops(capsys):
    """It once charged 15.3 ms of Python per step to cudaStreamIsCapturing."""
    raw = Raw("wavefront_torch")
    _, capturing = raw.calls_per_step("cudaStreamIsCapturing")
    out = _json(capsys, "analyze", str(shared(H200 / "wavefront_torch")), "--json",
                "--critical-path")
    cp = out["critical_path"]
    host = {h["name"]: h["on_path_ns"] / cp["windows"] for h in cp["host_calls"]}
    assert host.get("cudaStreamIsCapturing", 0) <= capturing * 1.05
    assert max(host, key=host.get).startswith("(between ops")
    assert cp["timed_step_ns"] == pytest.approx(raw.timed_ns)


@pytest.mark.parametrize("run, per_kernel_us", [("wavefront_torch", 27.4),
                                               ("fused_torch", 13.9)])
def test_host_time_per_kernel(run, per_kernel_us, capsys):
    raw = Raw(run)
    out = _json(capsys, "analyze", str(shared(H200 / run)), "--json")
    assert out["kernels"]["count"] / out["steps"] == pytest.approx(raw.kernels_per_step())
    expected = raw.timed_ns / raw.kernels_per_step()
    assert out["host"]["per_kernel_ns"]["timed"] == pytest.approx(expected, rel=1e-6)
    assert expected / 1e3 == pytest.approx(per_kernel_us, abs=0.05)


# -- streams ------------------------------------------------------------------------------

@pytest.mark.parametrize("run", ["streams_torch", "wavefront_torch"])
def test_streams_that_never_overlap_are_said_so(run, capsys):
    raw = Raw(run)
    streams = {e["args"]["stream"] for e in raw.device}
    assert len(streams) == 5 and raw.multi_stream_us() == 0
    out = _json(capsys, "analyze", str(shared(H200 / run)), "--json")
    (ov,) = out["stream_overlap"]
    assert ov["streams"] == len(streams) and ov["multi_stream_ns"] == 0
    per_stream = {s["stream"]: s["work_count"] for s in out["streams"]}
    assert sum(per_stream.values()) == len(raw.device)
    adv = _json(capsys, "advise", str(H200 / run), "--json")
    finding = next(f for f in adv["findings"] if f["rule"] == "streams_never_overlap")
    waits, _ = raw.calls_per_step("cudaStreamWaitEvent")
    assert any(f"{waits:,.0f} event wait calls per step" in e for e in finding["evidence"])
    assert main(["analyze", str(H200 / run)]) == 0
    assert "never overlap" in capsys.readouterr().out


def test_one_stream_gets_no_stream_finding(capsys):
    adv = _json(capsys, "advise", str(shared(H200 / "fused_torch")), "--json")
    assert not any(f["rule"] == "streams_never_overlap" for f in adv["findings"])


def test_overlapping_streams_are_measured():
    """Two streams busy together for 300 ns of a 1000 ns step (by hand)."""
    from traceviz.analyses import summarize

    t = trace(row("step", "ProfilerStep#1", 0, 1000, step=1),
              row("runtime", "cudaLaunchKernel", 0, 10, corr=1),
              row("runtime", "cudaLaunchKernel", 20, 10, corr=2),
              row("kernel", "a", 100, 400, corr=1, stream=7),
              row("kernel", "b", 200, 500, corr=2, stream=9))
    (ov,) = summarize(t).stream_overlap
    assert (ov.streams, ov.multi_ns, ov.busy_ns, ov.max_streams) == (2, 300, 600, 2)
    assert ov.overlap_fraction == pytest.approx(0.5) and not ov.never_overlaps


def test_the_replay_honours_recorded_event_waits(capsys):
    raw = Raw("streams_torch")
    waits = sum(e["name"] == "cudaStreamWaitEvent" for e in raw.runtime)
    out = _json(capsys, "whatif", str(shared(H200 / "streams_torch")), "--json", "--scenario",
                "cuda_graphs")
    assert out["model"]["stream_wait_calls"] == waits == 808
    assert out["model"]["event_waits"] == waits


def test_the_report_holds_the_timed_step_and_streams(tmp_path):
    out = tmp_path / "r.md"
    assert main(["report", str(shared(H200 / "fused_torch")), str(shared(H200 / "streams_torch")),
                 "-o", str(out)]) == 0
    text = out.read_text()
    section = text[text.index("## Profiled and timed step"):]
    fused = Raw("fused_torch")
    # the steady profiled step (the profiler's start-up step, the first, left out)
    over = statistics.median([b - a for a, b in fused.marks][1:]) * 1e3 / fused.timed_ns
    # a Markdown cell: "_" escaped
    assert "| fused\\_torch | " in section and f"{over:.2f}x" in section
    assert "0 ns (0.0% of busy)" in section


def test_no_timed_step_says_figures_are_profiled(capsys, kineto_dir):
    assert main(["analyze", str(kineto_dir / "a100_80gb_queue.json.gz")]) == 0
    out = capsys.readouterr().out
    assert "every figure is profiled time" in out or "figures are profiled" in out


# -- the five questions of the ladder page, figure by figure ------------------------------

def _gemm(e: dict) -> bool:
    name = e["name"]
    return "gemm" in name or "sgemm" in name or "splitKreduce" in name


def test_factorized_runs_more_kernels_in_less_device_time(capsys):
    """The ladder page: factorized_torch has fewer FLOPs and more, smaller kernels than
    fused_torch, and waits for the host more."""
    fused, fact = Raw("fused_torch"), Raw("factorized_torch")
    assert (fused.kernels_per_step(), fact.kernels_per_step()) == (1220, 1616)
    out = _json(capsys, "compare", str(shared(H200 / "fused_torch")),
                str(shared(H200 / "factorized_torch")), "--json")
    a, b = out["runs"]
    assert (a["per_step"]["kernels"], b["per_step"]["kernels"]) == (1220, 1616)
    gemm = [sum(e["dur"] for e in r.device if _gemm(e)) * 1e3 / r.steps for r in (fused, fact)]
    assert a["per_step"]["category_ns"]["gemm"] == pytest.approx(gemm[0], rel=1e-6)
    assert b["per_step"]["category_ns"]["gemm"] == pytest.approx(gemm[1], rel=1e-6)
    assert gemm[1] < gemm[0] and fact.timed_ns > fused.timed_ns
    assert b["launch_bound_fraction"] > a["launch_bound_fraction"] > 0.7


def test_compile_full_is_device_bound(capsys):
    raw = Raw("compile_full_torch")
    kernels = [e for e in raw.device if e["cat"] == "kernel"]
    busy = sum(e["dur"] for e in kernels) * 1e3 / raw.steps
    gemm = [e for e in kernels if _gemm(e)]
    assert len(gemm) / raw.steps == 1600
    assert busy / raw.timed_ns == pytest.approx(0.87, abs=0.01)
    out = _json(capsys, "analyze", str(shared(H200 / "compile_full_torch")), "--json")
    assert out["graphs"]["launches"] == 2
    assert out["categories"]["gemm"]["count"] / out["steps"] == 1600
    assert out["categories"]["gemm"]["total_ns"] / out["steps"] == pytest.approx(
        sum(e["dur"] for e in gemm) * 1e3 / raw.steps, rel=1e-6)
    assert out["kernels"]["total_ns"] / out["steps"] / out["timed_step"]["timed_step_ns"] \
        == pytest.approx(busy / raw.timed_ns, rel=1e-3)


def test_a_parquet_of_another_trace_is_not_taken_for_its_namesake(tmp_path):
    from traceviz.files.folders import rank_files

    shutil.copy(shared(KINETO / "a100_alexnet.json.gz"), tmp_path / "a.json.gz")
    shutil.copy(shared_parquet("kineto", "mi250_rocm_train.json.gz"), tmp_path / "a.parquet")
    assert [p.name for p in rank_files(tmp_path)] == ["a.json.gz", "a.parquet"]


@pytest.mark.parametrize("change", [("time_per_batch_s", {"median": "x"}),
                                    ("batch_times_s", ["0.1", 2]),
                                    ("profiled_time_per_batch_s", "fast")])
def test_a_run_folder_with_a_damaged_bench_is_one_line(change, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(shared(H200 / "fused_torch"), run)
    bench = json.loads((run / "bench.json").read_text())
    bench[change[0]] = change[1]
    (run / "bench.json").write_text(json.dumps(bench))
    assert main(["analyze", str(run)]) == 2
    err = capsys.readouterr().err
    # one line naming the file and the field
    assert err.count("\n") == 1 and f"field {change[0]} " in err and "bench.json" in err
