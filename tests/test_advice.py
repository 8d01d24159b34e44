"""advise: each rule fires on a real trace where its finding is true and stays silent on
one where it is not; the figures in the evidence come from the raw rows."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from tests.conftest import ROOT, SHARED_TRACES, shared
from tests.handmade import row, trace
from traceviz import load
from traceviz.analyses import advice as A
from traceviz.analyses.advice.rules import RULES
from traceviz.analyses.work import work_rows
from traceviz.cli import main
from traceviz.table.classify import MATRIX_OPS
from traceviz.units import fmt_ns

H100 = ROOT / "sample_traces" / "gpu"
# every rule by name, from the registry (a new rule needs no import here)
RULE = {r.name: r.rule for r in RULES}
CPU = ROOT / "sample_traces" / "cpu"
QUEUE = SHARED_TRACES / "kineto" / "a100_80gb_queue.json.gz"

CASES = [  # rule, fires on, silent on
    (RULE["host_bound"], H100 / "fine_torch/train", H100 / "graph_torch/train"),
    (RULE["host_bound"], CPU / "fine_torch", CPU / "cudnn_torch"),
    (RULE["kernel_sequences"], H100 / "fine_torch/train", H100 / "cudnn_torch/train"),
    (RULE["casts"], H100 / "cudnn_torch-bf16/train", H100 / "cudnn_torch/train"),
    (RULE["syncs_in_steps"], QUEUE, H100 / "cudnn_torch/train"),
    (RULE["pageable_memcpy"], QUEUE, H100 / "fine_torch/train"),
    (RULE["long_gaps"], QUEUE, H100 / "fine_torch/train"),
    (RULE["noisy"], H100 / "fine_torch/train", H100 / "cudnn_torch-bf16/train"),
    # the steady profiled step (the profiler's start-up step left out) at 3.48x the timed
    (RULE["profiled_unlike_timed"], H100 / "cell_torch-bf16/train",
     H100 / "cudnn_torch-bf16/train"),
    # the bf16 decoder's vocabulary of 10001 is off the multiple of 8; FP32 matrices
    # are not the rule's
    (RULE["tensor_core_shapes"], H100 / "cudnn_torch-bf16/train", H100 / "cudnn_torch/train"),
    # the FP32 decoder GEMMs ran FP32 kernels on an H100; the bf16 run has none
    (RULE["tf32_off"], H100 / "cudnn_torch/train", H100 / "cudnn_torch-bf16/train"),
    # fp16 per-step GEMMs of 128 x 256 x 1024: 79 FLOP/byte under the fp16 ridge of 295
    (RULE["memory_bound_gemms"], H100 / "fine_torch-fp16/train", H100 / "cudnn_torch/train"),
    # ResNet-50 with a single-process DataLoader: the device idles 355.6 ms in it
    (RULE["input_pipeline"], SHARED_TRACES / "foreign" / "kineto" /
     "h1_kineto_v100_resnet50.pt.trace.json.gz", H100 / "cudnn_torch-bf16/train"),
    # AlexNet on a T4: the 100.7 MB input batch copied with no kernel running, 15.3% of
    # the step (tests/test_copies.py recomputes it from the profiler's Chrome trace)
    (RULE["serialized_copies"], SHARED_TRACES / "foreign" / "xplane" /
     "keras_semi_supervised_cv" / "alexnet_s1.xplane.pb", H100 / "fine_torch/train"),
]


def _path(p):
    return p / "trace.parquet" if p.is_dir() else p


@pytest.mark.parametrize(("rule", "fires", "silent"), CASES,
                         ids=[f"{c[0].__name__}-{i}" for i, c in enumerate(CASES)])
def test_rule_fires_and_stays_silent(rule, fires, silent):
    if fires is not None:
        assert rule(A.Context(load(_path(fires)))) is not None
    assert rule(A.Context(load(_path(silent)))) is None


def test_syncs_in_steps_evidence_from_raw_rows():
    t = load(shared(QUEUE))
    ev = t.events
    rt = ev[(ev["kind"] == "runtime") & (ev["step"] >= 0)]
    calls = rt[rt["name"].astype(str).isin(["cudaStreamSynchronize", "cudaDeviceSynchronize"])]
    f = RULE["syncs_in_steps"](A.Context(t))
    assert f.figures["per_step"] == len(calls) / 5 == 15.0
    assert f.figures["blocked_ns"] == int(calls["dur_ns"].sum())


def test_host_bound_saving_is_the_cuda_graphs_scenario():
    f = RULE["host_bound"](A.Context(load(_path(H100 / "fine_torch/train"))))
    assert f.saving_scenario == "cuda_graphs" and f.saving_ns > 0
    assert f.figures["kernels_per_step"] == pytest.approx(6564, abs=1)


@pytest.mark.capture
def test_capture_rules(tmp_path):
    """tensor_core_shapes and input_pipeline on real CPU captures: bf16 with hidden 100 and
    batch 20 (not multiples of 8) vs all multiples of 8; a DataLoader worker."""
    tiny = ["--model", "cell_torch", "--mode", "train", "--steps", "3", "--warmup", "1",
            "--layers", "1"]
    odd, even, data = tmp_path / "odd", tmp_path / "even", tmp_path / "data"
    assert main(["capture", *tiny, "--amp", "bf16", "--seq", "5", "--batch", "20",
                 "--hidden", "100", "--embed", "16", "--vocab", "64", "--out", str(odd)]) == 0
    assert main(["capture", *tiny, "--amp", "bf16", "--seq", "8", "--batch", "16",
                 "--hidden", "64", "--embed", "16", "--vocab", "64", "--out", str(even)]) == 0
    assert main(["capture", *tiny, "--seq", "5", "--batch", "8", "--hidden", "32", "--embed", "32",
                 "--vocab", "64", "--workers", "1", "--out", str(data)]) == 0
    f = RULE["tensor_core_shapes"](A.Context(load(odd)))
    ev = load(odd).events
    mm = ev[(ev["kind"] == "op") & ev["name"].isin(MATRIX_OPS)
            & ev["details"].astype(str).str.contains("BFloat16")
            & ev["details"].astype(str).str.contains(r"\b(?:20|100)\b")]
    assert f is not None and f.figures["ops"] == len(mm) > 0
    assert RULE["tensor_core_shapes"](A.Context(load(even))) is None
    # how long the step waits for the worker's batch depends on the machine's load: the
    # rule's verdict is checked against the share recomputed from this trace's phases
    ctx = A.Context(load(data))
    phases = ctx.summary.phases.set_index("phase")
    assert phases.loc["data", "ranges"] >= 3  # the worker's batches are marked
    # on a CPU trace the data phase and the DataLoader's __next__ inside it are the
    # input calls; the work ops inside them (the batch's own tensors) are not idle
    ev = ctx.trace.events
    names = ev["name"].astype(str)
    data = ev[(ev["kind"] == "annotation") & (names == "data")]
    loader = ev[ev["kind"].isin(["op", "annotation"]) & names.str.contains("DataLoader")
                & names.str.contains("__next__")]
    calls = pd.concat([data, loader])
    p = ctx.summary.input_pipeline
    assert p is not None and len(data) >= 3 and p.frameworks[0] == "traceviz"
    assert len(data) <= p.calls <= len(calls)
    ends = calls["ts_ns"] + calls["dur_ns"]
    assert p.input_ns <= int(ends.max() - calls["ts_ns"].min())
    d = RULE["input_pipeline"](ctx)
    assert (d is not None) == (p.idle_ns >= A.INPUT_IDLE_SHARE * ctx.summary.span_ns)
    assert d is None or d.figures["idle_share"] == pytest.approx(p.idle_ns / ctx.summary.span_ns)


@pytest.mark.parametrize("data_ns", [300, 100, 50, 49])
def test_input_pipeline_at_its_threshold(data_ns):
    """A 1000 ns step whose data range takes ``data_ns`` with the device idle in it: a
    finding from 5% of the step."""
    t = trace(row("step", "ProfilerStep#1", 0, 1000, step=1),
              row("annotation", "data", 0, data_ns),
              row("annotation", "forward", data_ns, 1000 - data_ns),
              row("kernel", "volta_sgemm_128x64_nn", data_ns, 1000 - data_ns))
    d = RULE["input_pipeline"](A.Context(t))
    if data_ns < 50:
        assert d is None
    else:
        assert d is not None
        assert (d.figures["input_ns"], d.figures["idle_ns"]) == (data_ns, data_ns)
        assert d.figures["share"] == d.figures["idle_share"] == data_ns / 1000


def test_cli(capsys, tmp_path):
    assert main(["advise", str(shared(QUEUE)), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {f["rule"] for f in out["findings"]} >= {"syncs_in_steps", "pageable_memcpy"}
    assert main(["advise", str(_path(CPU / "fine_torch"))]) == 0
    assert "Framework overhead" in capsys.readouterr().out
    bad = tmp_path / "t.json.gz"
    bad.write_bytes(b"\x1f\x8b\x08")
    assert main(["advise", str(bad)]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_notebook_api_equals_the_commands(capsys):
    t = load(shared(QUEUE))
    assert main(["advise", str(QUEUE), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["findings"] == json.loads(
        json.dumps(t.advise(), default=int))
    assert main(["whatif", str(QUEUE), "--json", "--scenario", "no_casts"]) == 0
    assert json.loads(capsys.readouterr().out) == json.loads(
        json.dumps(t.whatif("no_casts")))


def test_tf32_off_figures_from_the_efficiency_table():
    t = load(_path(H100 / "cudnn_torch/train"))
    f = RULE["tf32_off"](A.Context(t))

    # from the kernel rows: FP32 GEMM kernels (no TF32 in their names) of the mm/addmm ops
    k = t.kernels()
    names = k["name"].astype(str)
    fp32 = k[k["op"].isin(["aten::mm", "aten::addmm"]) & (k["category"] == "gemm")
             & ~names.str.contains("tf32|tensorop_s1688")]
    assert len(fp32) == 9  # 3 ops x 3 profiled steps
    assert f.figures["fp32_matrix_ns"] == int(fp32["dur_ns"].sum())
    assert f.saving_scenario.startswith("gemm_speedup=") and f.figures["speedup"] > 1
    assert f.saving_ns is not None and f.saving_ns >= 0


def test_memory_headroom_from_bench_memory():
    t = load(_path(H100 / "cudnn_torch/train"))
    assert RULE["memory_headroom"](A.Context(t)) is None  # no memory figures in this capture
    t.meta["bench"] = {**t.meta["bench"], "memory": {
        "device": "cuda", "peak_allocated_bytes": 3 * 2**30, "total_bytes": 80 * 2**30}}
    f = RULE["memory_headroom"](A.Context(t))
    assert f.figures["times"] == 26 and "26x" in f.action
    t.meta["bench"]["memory"]["peak_allocated_bytes"] = 50 * 2**30
    assert RULE["memory_headroom"](A.Context(t)) is None


def test_a_scenario_that_replays_slower_claims_no_saving():
    f = A.Finding("host_bound", "t", ["e"], "capture the step in a CUDA graph", -1_663_000,
                  "cuda_graphs", {})
    g = A.no_loss(f)
    assert g.saving_ns is None and g.evidence[0] == "e"
    assert "cuda_graphs replay predicts no gain" in g.evidence[-1]
    assert "1.663 ms" in g.evidence[-1]
    kept = A.Finding("casts", "t", ["e"], "a", 5, "no_casts", {})
    assert A.no_loss(kept) is kept


def test_pageable_copies_need_a_size_worth_acting_on():
    """The queue trace's 75 pageable copies move 15 KB but their synchronous calls hold
    the host 759 ms of a 1.23 s span: a finding. The same copies with calls of 1 µs and
    device time of 1 µs each (under 1% of the span) are none."""
    t = load(shared(QUEUE))
    f = RULE["pageable_memcpy"](A.Context(t))
    ev = t.events
    p = ev[(ev["kind"] == "memcpy") & ev["name"].astype(str).str.contains("Pageable")]
    assert f is not None and f.figures["count"] == len(p) == 75
    assert fmt_ns(int(p["launch_dur_ns"].sum())) in f.evidence[0]
    small = t.events.copy()
    rows = p.index
    small.loc[rows, "dur_ns"] = 1_000
    small.loc[rows, "launch_dur_ns"] = 1_000
    assert RULE["pageable_memcpy"](A.Context(type(t)(small, dict(t.meta)))) is None


def test_fusion_advice_fits_the_trace():
    """LSTM actions only where the trace holds an LSTM, no TorchScript for a TorchScript
    run, an optimizer's update where the kernels run in the optimizer's step, nothing on
    a CPU trace (no launches to save there)."""
    eager = RULE["kernel_sequences"](A.Context(load(_path(H100 / "fine_torch/train"))))
    assert "fused LSTM" in eager.action and "TorchScript the cell" in eager.action
    scripted = RULE["kernel_sequences"](A.Context(load(_path(H100 / "jit_torch/train"))))
    assert "fused LSTM" in scripted.action and "TorchScript" not in scripted.action
    ddp = RULE["kernel_sequences"](
        A.Context(load(shared(SHARED_TRACES / "kineto" / "v100_19k_kernels.json.gz"))))
    assert "LSTM" not in ddp.action and "TorchScript" not in ddp.action
    assert RULE["kernel_sequences"](A.Context(load(_path(CPU / "naive8_torch")))) is None
    # the SGD step's foreach kernel: launched inside the "optimizer" range every time
    t = load(_path(H100 / "fine_torch/train"))
    k = t.kernels()
    opt = k[k["phase"] == "optimizer"]["name"].astype(str).iloc[0]
    from traceviz.analyses.advice.actions import fusion_action

    action = fusion_action(A.Context(t), work_rows(t), opt)
    assert "foreach or fused optimizer" in action


def test_amd_devices_have_matrix_cores():
    """The same findings on an AMD device name its units matrix cores (the H100 bf16
    capture's device renamed to an MI300X)."""
    t = load(_path(H100 / "cudnn_torch-bf16/train"))
    assert "tensor cores" in RULE["tensor_core_shapes"](A.Context(t)).title
    t.meta["devices"] = {"0": "AMD Instinct MI300X"}
    assert "matrix cores" in RULE["tensor_core_shapes"](A.Context(t)).title


def test_whole_trace_totals_say_so_beside_per_step_savings():
    t = load(_path(H100 / "cudnn_torch/train"))
    f = RULE["host_bound"](A.Context(t))
    s = A.Context(t).summary
    assert f"{fmt_ns(s.host_wait_ns)} of {fmt_ns(s.span_ns)} in all 3 steps" in f.evidence[0]


def test_actions_speak_the_traces_framework():
    """A TensorFlow profile is told of XLA and Keras, never of torch; a PyTorch one of
    torch.compile."""
    from traceviz.analyses.advice.advising import advise
    from traceviz.parsers import load

    tf, _ = advise(load(shared(SHARED_TRACES / "xplane" / "tf24_bert_amp_gpu.xplane.pb.gz")))
    assert tf and not any("torch" in f.action or ".half()" in f.action for f in tf)
    assert any("XLA" in f.action for f in tf)
    pt, _ = advise(load(ROOT / "sample_traces" / "gpu" / "fine_torch" / "train"))
    assert any("torch.compile" in f.action for f in pt)


def test_host_bound_not_raised_where_its_replay_finds_no_gain():
    """Each kernel is waited for (a synchronize after every launch) and the host then
    spends 10 µs on its own: the device waits for the host 80% of the time, but capturing
    single-kernel segments in graphs removes no host time, so its own replay predicts a
    loss: the finding is not raised (the synchronizing calls are)."""
    from tests.handmade import row, trace
    from traceviz.analyses.whatif.engine import whatif

    rows = [row("step", "ProfilerStep#1", 0, 20 * 13_000 + 1_000, step=1)]
    for i in range(20):
        t0 = 13_000 * i
        rows.append(row("runtime", "cudaLaunchKernel", t0, 1_000, corr=i + 1))
        rows.append(row("kernel", "k", t0 + 1_500, 2_000, corr=i + 1))
        rows.append(row("runtime", "cudaStreamSynchronize", t0 + 1_000, 2_600))
    t = trace(*rows)
    assert t.summary()["launch_bound_fraction"] > 0.25
    assert whatif(t, ("cuda_graphs",)).scenario("cuda_graphs").saving_ns < 0
    rules = [f.rule for f in A.advise(t)[0]]
    assert "host_bound" not in rules and "syncs_in_steps" in rules


@pytest.mark.parametrize("model", ["scan_jax", "xla_tf"])
def test_xla_compiled_cpu_runs_are_not_told_to_compile(model):
    """jax.jit and tf.function(jit_compile=True) on a CPU: the work ops are XLA's fused
    thunks; the framework-overhead finding says the step is compiled, never to compile."""
    found = A.advise(load(ROOT / "sample_traces" / "tf" / model))[0]
    f = next(f for f in found if f.rule == "host_bound")
    assert "already compiled (XLA)" in f.action
    assert not any("compile the step with XLA" in g.action for g in found)


def test_tensor_core_examples_on_one_line():
    """Some traces keep an op's Input Dims as indented JSON over many lines (h7's
    PyTorch): the finding's example gives them on one line, as the dims they are."""
    op = {**row("op", "aten::mm", 0, 10, step=1),
          "details": "dims:[\n  [\n    20,\n    100\n  ],\n  [100, 64]\n] "
                     "types:['c10::BFloat16', 'c10::BFloat16']"}
    f = RULE["tensor_core_shapes"](A.Context(trace(row("step", "ProfilerStep#1", 0, 100,
                                                       step=1), op)))
    assert f is not None and f.figures["ops"] == 1
    assert f.evidence[-1] == "e.g. aten::mm [[20, 100], [100, 64]] x1"


def _noisy_action(path, capsys) -> str:
    assert main(["advise", str(path), "--json"]) == 0
    found = {f["rule"]: f for f in json.loads(capsys.readouterr().out)["findings"]}
    return found["noisy"]["action"]


def test_a_script_run_is_never_told_capture_options(tmp_path, capsys):
    """The script run's timed batches are noisy (4 batches, 1.0-211.6 ms): its advice
    says to run more steps after the profiled ones, never capture's options for built-in
    variants (--steps, --max-warmup), also from a copy without its trace.parquet, from
    the raw trace named alone there, and from a copy without its config.json (its
    bench.json counts steps from the code's marks)."""
    src = ROOT / "sample_traces" / "script" / "lstm_train"
    run = tmp_path / "run"
    run.mkdir()
    for name in ("bench.json", "config.json", "meta.json", "trace.pt.trace.json.gz"):
        (run / name).write_bytes((src / name).read_bytes())
    bare = tmp_path / "bare"
    bare.mkdir()
    for name in ("bench.json", "meta.json", "trace.pt.trace.json.gz"):
        (bare / name).write_bytes((src / name).read_bytes())
    bench = json.loads((src / "bench.json").read_text())
    assert bench["time_per_batch_s"]["noisy"] and len(bench["batch_times_s"]) == 4
    for path in (src, run, run / "trace.pt.trace.json.gz", bare):
        action = _noisy_action(path, capsys)
        assert action.startswith("let the script run more steps after the profiled ones")
        assert "--steps" not in action and "--max-warmup" not in action, path
    assert load(run).meta["script"] == "python examples/lstm_train.py --steps 10"
    # a capture of a built-in variant (jit_torch fp16: one 1.14 s timed batch, NOISY)
    action = _noisy_action(H100 / "jit_torch-fp16" / "train", capsys)
    assert action.startswith("time more batches (--steps), raise --max-warmup")
