"""Graphed, compiled and XLA runs read as they ran: the real H200 captures of
``../shared/gpu-h200/`` (run folders; their trace files are read directly). Every expected
figure is computed here from the raw file: the XSpace protobuf through the project's own
message copy (``xspace.messages``: the schema only, no traceviz reading), Kineto JSON through
plain ``json``."""

from __future__ import annotations

import gzip
import json
import statistics
from collections import Counter
from decimal import Decimal
from pathlib import Path

import pytest

from tests.conftest import H200, ROOT, shared
from tests.rawref import ns
from traceviz import load
from traceviz.analyses import summarize
from traceviz.opcost.peaks import find

SCAN_JAX = H200 / "scan_jax" / "vm.xplane.pb.gz"
COMPILE_FULL = H200 / "compile_full_torch" / "trace.pt.trace.json.gz"


def _raw_space(path: Path):
    from traceviz.parsers.xspace.messages import xspace_class

    space = xspace_class()()
    with gzip.open(path) as f:
        space.ParseFromString(f.read())
    return space


def _value(s, names: dict):
    which = s.WhichOneof("value")
    return names.get(s.ref_value) if which == "ref_value" else getattr(s, which)


def _events(plane):
    """(name, line, start ps, duration ps, stats) of every event of a plane."""
    names = {k: m.name for k, m in plane.event_metadata.items()}
    stat_names = {k: m.name for k, m in plane.stat_metadata.items()}
    for line in plane.lines:
        for e in line.events:
            yield (names[e.metadata_id], line.name, line.timestamp_ns * 1000 + e.offset_ps,
                   e.duration_ps, {stat_names[s.metadata_id]: _value(s, stat_names)
                                   for s in e.stats})


@pytest.fixture(scope="module")
def scan_space():
    return _raw_space(shared(SCAN_JAX))


@pytest.fixture(scope="module")
def scan_trace():
    return load(shared(SCAN_JAX))


@pytest.fixture(scope="module")
def compile_raw() -> list[dict]:
    with gzip.open(shared(COMPILE_FULL), "rt") as f:
        doc = json.load(f, parse_float=Decimal)
    return [e for e in doc["traceEvents"] if e.get("ph") == "X"]


@pytest.fixture(scope="module")
def compile_trace():
    return load(shared(COMPILE_FULL))


def test_xspace_device_named_by_its_plane_stats(scan_space, scan_trace):
    """The GPU plane states its device ("NVIDIA H200"), so the H200's peaks apply."""
    plane = next(p for p in scan_space.planes if p.name == "/device:GPU:0")
    names = {k: m.name for k, m in plane.stat_metadata.items()}
    stated = {names[s.metadata_id]: _value(s, names) for s in plane.stats}
    assert scan_trace.meta["devices"]["0"] == stated["gpu_device_name"] == "NVIDIA H200"
    props = scan_trace.meta["device_properties"]["0"]
    assert props["multiprocessors"] == stated["core_count"] == 132
    assert props["memory_bandwidth_gbps"] == pytest.approx(stated["memory_bandwidth"] / 1e9)
    s = summarize(scan_trace, with_efficiency=True)
    assert s.efficiency.peak is not None and s.efficiency.peak.device == "H200 SXM"
    assert find(scan_trace.meta["devices"]["0"]).device == "H200 SXM"


def test_xla_command_buffers_are_graph_launches(scan_space, scan_trace):
    """``cuGraphLaunch (CudaGraph:N)`` host events are graph launches, each with the
    kernels its correlation id ran; the remaining kernel launches are the few others."""
    host = [e for p in scan_space.planes if p.name == "/host:CPU" for e in _events(p)]
    device = [e for p in scan_space.planes if p.name == "/device:GPU:0" for e in _events(p)]
    launches = [e for e in host if "correlation_id" in e[4]]
    graphs = {e[4]["correlation_id"] for e in launches if e[0].startswith("cuGraphLaunch (")}
    copies = {e[4]["correlation_id"] for e in launches if e[0].startswith("Memcpy")}
    kernels = [e for e in device if "kernel_details" in e[4]]
    in_graphs = [e for e in kernels if e[4]["correlation_id"] in graphs]
    lo = summarize(scan_trace).launches
    assert lo.graphs.count == len(graphs) == 909
    assert lo.graphs.kernels == len(in_graphs) == 14_073
    assert lo.graphs.kernel_ns == sum(e[3] // 1000 for e in in_graphs)
    assert lo.kernel.count == len(launches) - len(graphs) - len(copies) == 6
    assert lo.short_kernels <= lo.kernel.count
    steps = [e for e in host if "step_num" in e[4]]
    assert round(len(graphs) / len(steps)) == 303  # graph launches per step


def test_graph_kernel_delay_from_the_previous_kernel(compile_raw, compile_trace):
    """compile_full_torch (reduce-overhead: two graph launches of 2,005 kernels): a graph
    kernel's launch delay runs from the end of the graph's kernels before it, so the
    median is the graph's own kernel-to-kernel gap, not the wait behind the graph."""
    calls = {e["args"]["correlation"]: e for e in compile_raw
             if e.get("cat") == "cuda_runtime" and e["name"] == "cudaGraphLaunch"}
    assert len(calls) == 2
    delays = []
    for corr, call in calls.items():
        rows = sorted((ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])) for e in compile_raw
                      if e.get("cat") == "kernel" and e["args"].get("correlation") == corr)
        latest = ns(call["ts"]) + ns(call["dur"])
        for i, (start, end) in enumerate(rows):
            delays.append(max(0, start - latest))
            latest = end if i == 0 else max(latest, end)
    ev = compile_trace.events
    graph_rows = ev[(ev["kind"] == "kernel") & (ev["launch_api"] == "cudaGraphLaunch")]
    assert sorted(graph_rows["launch_delay_ns"].astype(int)) == sorted(delays)
    lo = summarize(compile_trace).launches
    assert lo.delay.count == len(delays) + lo.kernel.count
    assert lo.delay.median_ns < 1_000  # 0.42 µs, not the 9.7 ms of the queued kernels
    assert lo.delay.median_ns == pytest.approx(statistics.median(
        delays + [float(x) for x in ev.loc[(ev["kind"] == "kernel")
                                           & (ev["launch_api"] == "cudaLaunchKernel"),
                                           "launch_delay_ns"]]))


def test_phase_busy_never_exceeds_its_wall(compile_raw, compile_trace):
    """The forward range closes long before its graph's kernels end: the phase's wall
    stretches over the time its work ran, so busy/wall stays <= 100 %."""
    fwd = [e for e in compile_raw if e["name"] == "forward" and e.get("cat") ==
           "user_annotation"]
    marked = sum(ns(e["dur"]) for e in fwd)
    s = summarize(compile_trace)
    row = s.phases.set_index("phase").loc["forward"]
    assert row["busy_ns"] > marked  # the raw ranges alone read 216 %
    assert row["busy_ns"] <= row["wall_ns"]
    assert Counter(s.phases["busy_ns"] <= s.phases["wall_ns"])[False] == 0


def test_xla_fusions_categorised_by_kind_not_suffix(scan_space, scan_trace):
    """A fusion and its numbered copies ("loop_add_fusion", "loop_add_fusion_2") get one
    category, by the fusion's kind; no XLA kernel of the run is "other"; the table's rows
    from this capture are there with their category."""
    import re

    from tests.test_classify import _table

    device = [e for p in scan_space.planes if p.name == "/device:GPU:0" for e in _events(p)]
    raw_names = {e[0] for e in device if "kernel_details" in e[4]}
    k = scan_trace.kernels()
    cat = k.groupby(k["name"].astype(str), observed=True)["category"].agg(
        lambda c: set(c.astype(str)))
    assert set(cat.index) == raw_names
    families: dict[str, set] = {}
    for name in raw_names:
        families.setdefault(re.sub(r"_\d+$", "", name), set()).update(cat[name])
    assert all(len(c) == 1 for c in families.values()), families
    assert not any("other" in c for c in cat)
    assert cat["loop_add_fusion"] == cat["loop_add_fusion_2"] == {"elementwise"}
    assert cat["input_reduce_fusion"] == {"reduction"}
    rows = _table()
    for r in rows[rows["source"].str.startswith("gpu-h200 scan_jax")].itertuples():
        assert cat[r.name] == {r.category}, r.name


def _as_run(trace, run: Path):
    """The trace with what its run folder adds (a capture writes the same into its
    trace.parquet): bench.json, the config's workload and --amp."""
    cfg = json.loads((run / "config.json").read_text())
    trace.meta.update(bench=json.loads((run / "bench.json").read_text()),
                      workload=cfg["workload"], amp=cfg["amp"])
    return trace


def test_compiled_run_roofline_from_the_workload(compile_raw):
    """torch.compile records no op shapes: the run's FLOPs are the workload's
    (bench.json) times the profiled steps, held against the FP32 peak its FFMA GEMM
    kernels ran at, with the TF32 peak named beside them."""
    trace = _as_run(load(shared(COMPILE_FULL)), COMPILE_FULL.parent)
    bench = json.loads((COMPILE_FULL.parent / "bench.json").read_text())
    steps = sum(1 for e in compile_raw if e["name"].startswith("ProfilerStep#"))
    ffma = sum(1 for e in compile_raw if e.get("cat") == "kernel" and "ffma" in e["name"])
    assert (steps, ffma) == (2, 3_200)
    s = summarize(trace, with_efficiency=True)
    e = s.efficiency
    assert e.flops == bench["workload_flops"] * steps and e.flops_from == "workload"
    assert e.run_key == "fp32" and e.run_peak == 66.9
    assert e.tflops_span == pytest.approx(e.flops / s.span_ns / 1e3)
    assert e.mfu_trace == pytest.approx(e.tflops_span / 66.9)
    assert e.model["mfu"] == pytest.approx(bench["workload_flops"]
                                           / bench["time_per_batch_s"]["median"] / 1e12 / 66.9)
    note = next(n for n in e.notes if "FMA" in n)
    assert f"{ffma // steps:,} per step" in note and "494.7" in note


def test_xla_efficiency_notes_speak_jax(scan_trace):
    """No torch.profiler advice to a JAX user; with the run's workload the figures are the
    run's."""
    s = summarize(scan_trace, with_efficiency=True)
    text = " ".join(s.efficiency.notes)
    assert "record_shapes" not in text and "torch" not in text and "XLA" in text
    run = _as_run(load(shared(SCAN_JAX)), SCAN_JAX.parent)
    e = summarize(run, with_efficiency=True).efficiency
    bench = json.loads((SCAN_JAX.parent / "bench.json").read_text())
    assert e.flops == bench["workload_flops"] * 3 and e.tflops_busy is not None


def _advice(trace):
    from traceviz.analyses.advice.advising import advise

    return {f.rule: f for f in advise(trace)[0]}


def test_advice_on_a_graphed_compiled_run_names_what_it_uses(compile_raw, compile_trace):
    """torch.compile reduce-overhead: one graph launch per step runs nearly every kernel.
    Timed (no profiler), the step is the device's: the first finding says so and names
    what the run already uses; no host-bound finding, no CUDA graph or torch.compile
    recommended."""
    steps = sum(1 for e in compile_raw if e["name"].startswith("ProfilerStep#"))
    graphs = [e for e in compile_raw if e["name"] == "cudaGraphLaunch"]
    found = _advice(compile_trace)
    first = next(iter(found.values()))
    assert first.rule == "device_bound" and "host_bound" not in found
    text = " ".join(first.evidence)
    assert f"{len(graphs) // steps} graph launch per step" in text and "torch.compile" in text
    assert "timed step" in text
    for finding in found.values():
        assert "capture the step in a CUDA graph" not in finding.action
        assert "torch.compile the" not in finding.action and "(torch.compile" not in \
            finding.action
    tf32 = found["tf32_off"]
    assert tf32.saving_scenario.startswith("gemm_speedup=") and \
        tf32.timed_saving_ns_per_step > 0


def test_advice_on_a_jitted_run_recommends_no_jit(scan_space, scan_trace):
    """JAX: already jitted and graph-launched. No action says to compile with XLA, and no
    launch count promised exceeds the launch calls the trace holds per step."""
    import re

    host = [e for p in scan_space.planes if p.name == "/host:CPU" for e in _events(p)]
    calls = sum(1 for e in host if "correlation_id" in e[4])
    steps = sum(1 for e in host if "step_num" in e[4])
    per_step = calls / steps  # about 308
    found = _advice(scan_trace)
    # timed, the step is 96 % device work: the first finding says the device bounds it,
    # and names what the run already does
    first = next(iter(found.values()))
    assert first.rule == "device_bound" and "host_bound" not in found
    assert "XLA command buffers" in " ".join(first.evidence)
    for f in found.values():
        assert "compile the step with XLA" not in f.action
        assert "compile with XLA" not in f.action
        for n in re.findall(r"([\d,]+) launches fewer per step", " ".join(f.evidence)):
            assert int(n.replace(",", "")) <= per_step


def test_no_lstm_remedies_without_an_lstm():
    """A CNN trained with NCCL (no recurrent op or kernel in the raw JSON): its host-bound
    and kernel-sequence actions name no LSTM."""
    import re

    from tests.conftest import KINETO

    path = shared(KINETO / "a100_nccl.json.gz")
    with gzip.open(path, "rt") as f:
        names = {e.get("name", "") for e in json.load(f)["traceEvents"]}
    assert not any(re.search(r"lstm|(?<![a-z])gru|rnn", n, re.IGNORECASE) for n in names)
    found = _advice(load(path))
    assert "host_bound" in found
    for f in found.values():
        assert "LSTM" not in f.action and "TorchScript the cell" not in f.action


def test_fp32_tf_run_gets_no_mixed_precision_advice():
    """eager_tf, FP32 (no --amp): Keras' Cast ops (its integer step counter) carry no
    dtypes; in a FP32 run they are no mixed precision's cost."""
    run = ROOT / "sample_traces" / "tf" / "eager_tf"
    assert json.loads((run / "config.json").read_text())["amp"] is None
    trace = load(run)
    assert summarize(trace).casts.count > 0 and not trace.meta.get("dtypes_recorded")
    assert "casts" not in _advice(trace)


def test_bf16_autocast_running_fp16_is_said(compile_raw):
    """cudnn_torch-forward-bf16: the cuDNN LSTM took c10::Half tensors under bf16
    autocast; the weight copies float -> c10::Half per step counted from the raw JSON."""
    path = shared(H200 / "cudnn_torch-forward-bf16" / "trace.pt.trace.json.gz")
    with gzip.open(path, "rt") as f:
        raw = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    steps = sum(1 for e in raw if e["name"].startswith("ProfilerStep#"))
    copies = sum(1 for e in raw if e["name"] == "aten::copy_" and
                 (e.get("args") or {}).get("Input type", [])[:2] == ["c10::Half", "float"])
    trace = load(path)
    f = _advice(trace)["autocast_precision"]
    assert f.figures["copies"] == copies and copies // steps == 15
    assert f.figures["ops"] == {"aten::_cudnn_rnn": steps}
    assert "asked for bf16, ran fp16" in f.evidence[0]


def test_ffma_gemms_are_a_finding_with_the_tf32_peak(compile_raw, compile_trace):
    """1,600 FP32 FFMA GEMM kernels per step (raw kernel names), no TF32: a finding with
    the H200's FP32 and TF32 peaks, though no op shapes were recorded."""
    steps = sum(1 for e in compile_raw if e["name"].startswith("ProfilerStep#"))
    ffma = [e for e in compile_raw if e.get("cat") == "kernel" and "ffma" in e["name"]]
    f = _advice(compile_trace)["tf32_off"]
    text = " ".join(f.evidence)
    assert f"{len(ffma) // steps:,} per step" in text
    assert "66.9 TFLOP/s" in text and "494.7 TFLOP/s" in text
    assert f.figures["fp32_fma_ns"] == sum(ns(e["dur"]) for e in ffma)
    assert "allow_tf32" in f.action


def test_a_device_the_table_lacks_gets_its_peak_from_the_profile(scan_space, scan_trace):
    """A GPU the peak table does not know: the bandwidth its XSpace plane states is used
    for % of bandwidth, and its FP32 peak is derived from the plane's multiprocessors,
    clock and compute capability (an H200: 128 FP32 lanes per multiprocessor, the
    table's 66.9 TFLOP/s); no tensor-core peak is invented."""
    plane = next(p for p in scan_space.planes if p.name == "/device:GPU:0")
    names = {k: m.name for k, m in plane.stat_metadata.items()}
    stated = {names[s.metadata_id]: _value(s, names) for s in plane.stats}
    assert (stated["compute_cap_major"], stated["compute_cap_minor"]) == (9, 0)
    t = load(shared(SCAN_JAX))
    t.meta["devices"]["0"] = t.meta["device_properties"]["0"]["name"] = "NVIDIA Unlisted"
    e = summarize(t, with_efficiency=True).efficiency
    fp32 = stated["core_count"] * stated["clock_rate"] * 1e3 * 128 * 2 / 1e12
    assert e.peak.figures == {"fp32": pytest.approx(fp32, abs=1e-3),
                              "bw": pytest.approx(stated["memory_bandwidth"] / 1e9)}
    assert fp32 == pytest.approx(66.9, rel=0.01)
    assert e.peak.applicable("bf16", "matrix") is None
    assert any("derived from the profile's device properties" in n for n in e.notes)


def test_compiled_run_serial_chain_floor(compile_raw):
    """The serial-chain floor: a step's busiest stream's kernel time, back to back (raw:
    each kernel in the ProfilerStep around its launch call), and the workload's rate
    there."""
    steps = sorted((ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])) for e in compile_raw
                   if e["name"].startswith("ProfilerStep#"))
    launch = {e["args"]["correlation"]: ns(e["ts"]) for e in compile_raw
              if e.get("cat") == "cuda_runtime" and "correlation" in (e.get("args") or {})}
    per: dict[tuple, int] = {}
    for k in compile_raw:
        if k.get("cat") != "kernel" or k["args"].get("correlation") not in launch:
            continue
        at = launch[k["args"]["correlation"]]
        step = next((i for i, (s, e) in enumerate(steps) if s <= at < e), None)
        if step is not None:
            key = (step, k["args"].get("stream"))
            per[key] = per.get(key, 0) + ns(k["dur"])
    busiest = [max(v for (s, _), v in per.items() if s == i) for i in range(len(steps))]
    floor = statistics.median(busiest)
    trace = _as_run(load(shared(COMPILE_FULL)), COMPILE_FULL.parent)
    e = summarize(trace, with_efficiency=True).efficiency
    assert e.model["serial_floor_ns"] == pytest.approx(floor)
    wf = json.loads((COMPILE_FULL.parent / "bench.json").read_text())["workload_flops"]
    assert e.model["floor_tflops"] == pytest.approx(wf / floor / 1e3)
    assert any(n.startswith("Serial-chain floor") for n in e.notes)


def test_analyze_json_states_the_device(scan_trace):
    """``analyze --json`` carries what the plane states about its device."""
    doc = summarize(scan_trace).to_dict()
    assert doc["source"]["devices"] == {"0": "NVIDIA H200"}
    assert doc["source"]["device_properties"]["0"]["multiprocessors"] == 132
