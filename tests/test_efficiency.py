"""FLOPs, bytes, peaks, roofline and memory: formulas against hand computations, the
committed H100 captures against their raw JSON, a real CPU capture's allocator events
against Kineto's own totals, bad shapes and devices."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import traceviz
from tests.conftest import SHARED_TRACES, shared
from traceviz.analyses.efficiency.ops import efficiency
from traceviz.analyses.summary.figures import summarize
from traceviz.errors import UsageError
from traceviz.opcost import op_cost
from traceviz.opcost.peaks import PEAKS, find, parse_peak
from traceviz.runners.benchdefs import workload_flops

ROOT = Path(__file__).resolve().parents[1]
GPU = ROOT / "sample_traces" / "gpu"
CUDNN = GPU / "cudnn_torch" / "train" / "trace.pt.trace.json.gz"
CUDNN_BF16 = GPU / "cudnn_torch-bf16" / "train" / "trace.pt.trace.json.gz"
FINE = GPU / "fine_torch" / "train" / "trace.pt.trace.json.gz"


def d(dims: list, types: list, concrete: list | None = None) -> str:
    text = f"dims:{json.dumps(dims)} types:{json.dumps(types)}"
    return text + (f" concrete:{json.dumps(concrete)}" if concrete is not None else "")


# -- formulas against hand computations --------------------------------------------
def test_mm_and_addmm_by_hand():
    c = op_cost("aten::mm", d([[64, 32], [32, 16]], ["float", "float"]))
    assert c.flops == 2 * 64 * 32 * 16
    assert c.bytes == 4 * (64 * 32 + 32 * 16 + 64 * 16)
    assert (c.precision, c.unit) == ("fp32", "matrix")
    # TraceLens (PerfModel aten_addmm) on the H100 cudnn_torch capture's decoder addmm:
    # 32.835283 GFLOP and 260.2198 MiB per call; the same by hand here
    c = op_cost("aten::addmm", d([[10001], [6400, 256], [256, 10001], [], []],
                                 ["float", "float", "float", "Scalar", "Scalar"]))
    m, k, n = 6400, 256, 10001
    assert c.flops == 2 * m * n * k + m * n == 32_835_283_200
    assert c.bytes == 4 * (m * k + k * n + m * n + n)
    assert round(c.bytes / 2**20, 4) == 260.2198


def test_bmm_matmul_linear_half():
    c = op_cost("aten::bmm", d([[8, 4, 5], [8, 5, 6]], ["c10::BFloat16"] * 2))
    assert c.flops == 8 * 2 * 4 * 5 * 6 and c.bytes == 2 * 8 * (20 + 30 + 24)
    assert c.precision == "bf16"
    c = op_cost("aten::matmul", d([[3, 1, 4, 5], [2, 5, 6]], ["c10::Half"] * 2))
    assert c.flops == 3 * 2 * 2 * 4 * 5 * 6  # batch dims broadcast to 3 x 2
    c = op_cost("aten::linear", d([[10, 7, 5], [6, 5], [6]], ["float"] * 3))
    assert c.flops == 2 * 70 * 6 * 5 + 70 * 6


def test_convolution_forward_and_backward():
    # AlexNet conv1: 3x224x224 input, 64 filters 11x11, stride 4, padding 2 -> 55x55
    x, w = [128, 3, 224, 224], [64, 3, 11, 11]
    c = op_cost("aten::convolution", d([x, w, [64], [], [], [], [], [], []],
                                       ["float"] * 3 + ["ScalarList"] * 3 + ["Scalar"] * 3,
                                       ["", "", "", "[4, 4]", "[2, 2]", "[1, 1]", "False",
                                        "[0, 0]", "1"]))
    out = 128 * 64 * 55 * 55
    assert c.flops == 2 * out * 3 * 11 * 11 + out
    b = op_cost("aten::convolution_backward",
                d([[128, 64, 55, 55], x, w], ["float"] * 3,
                  ["", "", "", "[64]", "[4, 4]", "[2, 2]", "[1, 1]", "False", "[0, 0]", "1",
                   "[True, True, True]"]))
    assert b.flops == 2 * (2 * out * 3 * 11 * 11)


def test_cudnn_rnn_counts_every_weight_matrix():
    """3-layer LSTM, input 128, hidden 256, T=50, B=128: the studies' 2 x 4H x (I + H)
    per step and layer; backward with weight gradient twice that."""
    wl = [[1024, 128], [1024, 256], [1024], [1024]] + [[1024, 256], [1024, 256], [1024],
                                                        [1024]] * 2
    dims = [[50, 128, 128], wl, [], [1447936], [3, 128, 256], [3, 128, 256]] + [[]] * 10
    types = ["float", "TensorList", "Scalar", "float", "float", "float"] + ["Scalar"] * 10
    conc = ["", "", "4", "", "", "", "2", "256", "0", "3", "False", "0.", "True", "False",
            "[]", ""]
    fwd = op_cost("aten::_cudnn_rnn", d(dims, types, conc))
    by_hand = sum(2 * 50 * 128 * 4 * 256 * (i + 256) for i in (128, 256, 256))
    assert fwd.flops == by_hand == 18_454_937_600
    assert fwd.flops == workload_flops({"seq": 50, "batch": 128, "hidden": 256, "layers": 3,
                                        "input": 128, "head": "none",
                                        "mode": "forward"})["parts"]["lstm"]
    # under autocast the weights are recorded as [N, 1] views: the same count
    flat = [[n * k, 1] if k else [n, 1] for n, k in
            [(1024, 128), (1024, 256), (1024, 0), (1024, 0)] + [(1024, 256), (1024, 256),
                                                                (1024, 0), (1024, 0)] * 2]
    half = op_cost("aten::_cudnn_rnn", d([[50, 128, 128], flat, *dims[2:]],
                                         ["c10::Half", *types[1:]], conc))
    assert half.flops == by_hand and half.precision == "fp16"


def test_attention_and_elementwise():
    q = [2, 8, 128, 64]
    c = op_cost("aten::_scaled_dot_product_flash_attention", d([q, q, q], ["c10::BFloat16"] * 3))
    assert c.flops == 4 * 2 * 8 * 128 * 128 * 64
    c = op_cost("aten::add", d([[128, 1024], [1024], []], ["float", "float", "Scalar"]))
    assert c.flops == 128 * 1024
    assert c.bytes == 4 * (128 * 1024 + 1024 + 128 * 1024)  # in1 + in2 + broadcast output
    c = op_cost("aten::copy_", d([[4, 5], [4, 5], []], ["c10::BFloat16", "float", "Scalar"]))
    assert (c.flops, c.bytes) == (0, 20 * 2 + 20 * 4)
    c = op_cost("aten::_to_copy", d([[10], [], []], ["float", "Scalar", "Scalar"],
                                    ["", "15", ""]))
    assert c.bytes == 10 * 4 + 10 * 2  # to bfloat16 (ScalarType 15)


@pytest.mark.parametrize("details,why", [
    ("", "no shapes"),
    (d([[-3, 4], [4, 5]], ["float", "float"]), "negative dimension"),
    (d([[2**40, 2**40], [2**40, 2**40]], ["float", "float"]), "past int64"),
    (d([[2, 3], [3, 4]], ["c10::Mystery", "c10::Mystery"]), "unknown dtype"),
    ("dims:[[2, 3] types:[", "unreadable shape record"),
])
def test_bad_shapes_give_no_figure_and_a_note(details, why):
    c = op_cost("aten::mm", details)
    assert c.flops is None and c.bytes is None and why in c.note


def test_unmodelled_op():
    assert op_cost("aten::nll_loss_forward", d([[4, 5], [4]], ["float", "long int"])) is None


# -- peaks --------------------------------------------------------------------------
@pytest.mark.parametrize("name,device", [
    ("NVIDIA H100 80GB HBM3", "H100 SXM"), ("NVIDIA H100 PCIe", "H100 PCIe"),
    ("NVIDIA H200", "H200 SXM"), ("NVIDIA A100-SXM4-40GB", "A100 40GB"),
    ("NVIDIA A100-SXM4-80GB", "A100 80GB SXM"), ("NVIDIA A100 80GB PCIe", "A100 80GB PCIe"),
    ("Tesla V100-SXM2-16GB", "Tesla V100 SXM2"), ("NVIDIA GeForce GTX 1080", "GeForce GTX 1080"),
    ("NVIDIA TITAN V", "NVIDIA TITAN V"), ("Tesla M40 24GB", "Tesla M40"),
    ("NVIDIA GeForce RTX 2080 Ti", "GeForce RTX 2080 Ti"), ("NVIDIA B200", "B200"),
    ("AMD Instinct MI250X", "AMD Instinct MI250X (one GCD)"),
    ("AMD Instinct MI300X", "AMD Instinct MI300X"),
    ("AMD Instinct MI250X / MI250", "AMD Instinct MI250 (one GCD)"),
    ("NVIDIA GH200 480GB", "GH200 (HBM3)"), ("NVIDIA H200 NVL", "H200 NVL"),
    ("NVIDIA H100 NVL", "H100 NVL"), ("Tesla V100-PCIE-32GB", "Tesla V100 PCIe"),
    ("Tesla V100S-PCIE-32GB", "Tesla V100S PCIe"), ("NVIDIA A100-PCIE-40GB", "A100 40GB"),
    ("NVIDIA L4", "NVIDIA L4"), ("NVIDIA A10G", "NVIDIA A10"), ("NVIDIA L40S", "NVIDIA L40S"),
])
def test_device_names_match_their_row(name, device):
    p = find(name)
    assert p is not None and p.device == device and p.source and p.bandwidth


@pytest.mark.parametrize("device,figures", [
    # dense figures of the vendors' datasheets (sparse tensor figures halved)
    ("NVIDIA H100 80GB HBM3", {"fp32": 66.9, "tf32": 494.7, "bf16": 989.4, "fp8": 1978.9,
                               "bw": 3350.0}),
    ("NVIDIA A100-SXM4-40GB", {"fp32": 19.5, "tf32": 156.0, "fp16": 312.0, "bw": 1555.0}),
    ("Tesla V100-SXM2-16GB", {"fp32": 15.7, "fp16": 125.0, "bw": 900.0}),
    ("NVIDIA GeForce GTX 1080", {"fp32": 8.873, "bw": 320.0}),
    ("AMD Instinct MI300X", {"fp32": 163.4, "bf16": 1307.4, "fp8": 2614.9, "bw": 5300.0}),
])
def test_peak_figures(device, figures):
    p = find(device)
    assert {k: p.figures[k] for k in figures} == figures


def test_peak_table_and_override():
    for p in PEAKS:
        assert p.figures["fp32"] > 0 and p.figures["bw"] > 0
        if "tf32" in p.figures:  # dense tensor figures above the vector ones
            assert p.figures["fp16"] > p.figures["tf32"] > p.figures["fp32"]
    h100 = find("NVIDIA H100 80GB HBM3")
    assert h100.applicable("fp32", "matrix", tf32=True) == ("tf32", 494.7)
    assert h100.applicable("fp32", "matrix") == ("fp32", 66.9)
    assert h100.applicable("bf16", "matrix") == ("bf16", 989.4)
    assert find("NVIDIA GeForce GTX 1080").applicable("fp16", "matrix") == ("fp32", 8.873)
    assert find("Some Future GPU") is None
    user = parse_peak("fp32=10,bw=100")
    assert user.figures == {"fp32": 10.0, "bw": 100.0}
    assert parse_peak("h100 pcie").device == "H100 PCIe"
    for bad in ("fp32=-1", "warp=3", "fp32=x", "nonsense device", "fp32=5,junk",
                "fp32=5,fp32=6", "fp32=1e400"):
        with pytest.raises(UsageError):
            parse_peak(bad)


# -- the committed H100 captures ------------------------------------------------------
def _raw_ops(path: Path, name: str) -> list[dict]:
    with gzip.open(path) as f:
        doc = json.load(f)
    return [e for e in doc["traceEvents"] if e.get("cat") == "cpu_op" and e["name"] == name]


def test_h100_cudnn_capture_against_its_raw_json():
    t = traceviz.load(CUDNN)
    s = summarize(t, with_efficiency=True)
    e = s.efficiency
    assert e.peak.device == "H100 SXM"
    g = e.groups.set_index("op")
    # the recurrent ops: one group each, FLOPs = calls x the formula on the raw shapes
    raw = _raw_ops(CUDNN, "aten::_cudnn_rnn")
    wl = raw[0]["args"]["Input Dims"][1]
    tb = np.prod(raw[0]["args"]["Input Dims"][0][:-1])
    per_call = sum(2 * int(tb) * a * b for a, b in (w for w in wl if len(w) == 2))
    assert g.loc["aten::_cudnn_rnn", "flops"] == len(raw) * per_call
    assert g.loc["aten::_cudnn_rnn_backward", "flops"] == 2 * len(raw) * per_call
    # cuDNN ran TF32 tensor-core GEMMs for the FP32 LSTM: held against the TF32 peak;
    # the decoder's addmm ran FP32 SIMT/xmma kernels: the FP32 peak
    assert g.loc["aten::_cudnn_rnn", "peak_key"] == "tf32"
    assert g.loc["aten::addmm", "peak_key"] == "fp32"
    # kernel time per group = the raw kernels of those launches
    kernels = t.kernels()
    assert g.loc["aten::_cudnn_rnn", "time_ns"] == int(
        kernels.loc[kernels["op"] == "aten::_cudnn_rnn", "dur_ns"].sum())
    tf = g.loc["aten::addmm"]
    assert tf["tflops"] == pytest.approx(tf["flops"] / tf["time_ns"] / 1e3)
    assert tf["pct_peak"] == pytest.approx(tf["tflops"] / 66.9)
    assert tf["bound"] == "compute"
    assert g.loc["aten::_log_softmax", "bound"] == "memory"
    # the trace's FLOPs per step: the workload's matrix FLOPs per batch (LSTM and
    # decoder, forward and backward) within what the formulas model differently
    per_step = e.flops / s.steps
    w = workload_flops(t.meta.get("workload") or json.loads(
        (CUDNN.parent / "config.json").read_text())["workload"])
    assert per_step == pytest.approx(w["total"], rel=0.02)
    assert e.coverage > 0.98
    assert set(e.uncovered["op"]) >= {"aten::nll_loss_forward"}


def test_bf16_capture_splits_precisions():
    e = summarize(traceviz.load(CUDNN_BF16), with_efficiency=True).efficiency
    g = e.groups.set_index("op")
    # autocast ran cuDNN's LSTM in half precision and the decoder in bfloat16
    assert g.loc["aten::_cudnn_rnn", "peak_key"] == "fp16"
    assert g.loc["aten::addmm", "peak_key"] == "bf16"
    fp32 = summarize(traceviz.load(CUDNN), with_efficiency=True).efficiency
    assert e.flops == pytest.approx(fp32.flops, rel=0.001)  # same work, other precision


def test_fine_grained_capture_elementwise_bytes():
    e = summarize(traceviz.load(FINE), with_efficiency=True).efficiency
    g = e.groups
    mul = g[(g["op"] == "aten::mul") & (g["dims"] == "[[128, 256], [128, 256]]")]
    assert len(mul) == 1
    r = mul.iloc[0]
    assert r["flops"] == r["calls"] * 128 * 256
    assert r["bytes"] == r["calls"] * 3 * 128 * 256 * 4
    assert r["bound"] == "memory"


def test_unknown_device_and_user_peak(tmp_path):
    t = traceviz.load(CUDNN)
    t.meta["devices"] = {"0": "Imaginary Accelerator 9000"}
    e = efficiency(t)
    assert e.peak is None and e.groups["pct_peak"].isna().all()
    assert e.groups["tflops"].notna().any()
    assert any("No peak figures" in n for n in e.notes)
    spec = tmp_path / "peak.json"
    spec.write_text(json.dumps({"device": "mine", "fp32": 10, "tf32": 100, "bw": 1000}))
    e = efficiency(t, parse_peak(str(spec)))
    row = e.groups.set_index("op").loc["aten::addmm"]
    assert row["pct_peak"] == pytest.approx(row["tflops"] / 10)
    # 43.6 TFLOP/s against a 10 TFLOP/s "peak": said, not shown silently as 436%
    assert any(n.startswith("Achieved above the compute peak") for n in e.notes)


def test_above_the_bandwidth_is_data_from_cache_not_a_wrong_peak():
    """Elementwise ops moving more bytes per second than the memory's bandwidth read
    their small tensors from the caches: said so, and the peak table is not blamed."""
    t = traceviz.load(FINE)
    e = efficiency(t, parse_peak("fp32=1000,tf32=1000,bw=10"))
    g = e.groups
    over = g[(g["pct_bw"] > 1.05) & ~(g["pct_peak"] > 1.05)]
    assert len(over)
    note = next(n for n in e.notes if n.startswith("Above the memory bandwidth"))
    assert "served from the caches" in note and "of 10 GB/s" in note
    assert not any("check --peak" in n for n in e.notes)


def test_analyze_json_plot_export(tmp_path):
    out = subprocess.run([sys.executable, "-m", "traceviz", "analyze", str(CUDNN), "--json"],
                         capture_output=True, text=True, check=True).stdout
    doc = json.loads(out)
    eff = doc["efficiency"]
    assert eff["device"] == "NVIDIA H100 80GB HBM3" and eff["peak"]["device"] == "H100 SXM"
    assert eff["groups"][0]["op"] == "aten::_cudnn_rnn_backward"
    assert eff["run"]["flops"] == sum(g["flops"] for g in summarize(
        traceviz.load(CUDNN), with_efficiency=True).efficiency.groups.to_dict("records"))
    assert "memory" in doc
    r = subprocess.run([sys.executable, "-m", "traceviz", "analyze", str(CUDNN), "--plot",
                        str(tmp_path / "p"), "--export", str(tmp_path / "x")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "p" / "roofline.png").stat().st_size > 10_000
    # the capture recorded no allocator events: no blank memory chart, a line says why
    assert not (tmp_path / "p" / "memory.png").exists()
    assert "memory chart not written: the trace records no memory" in r.stderr
    import pandas as pd

    table = pd.read_parquet(tmp_path / "x" / "efficiency.parquet")
    assert int(table["flops"].sum()) == eff["run"]["flops"]
    r = subprocess.run([sys.executable, "-m", "traceviz", "analyze", str(CUDNN), "--peak",
                        "fp32=abc"], capture_output=True, text=True)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) <= 3
    assert "Traceback" not in r.stderr


# -- memory: a real CPU capture ---------------------------------------------------------
_CAPTURE = """
import sys, torch
from torch.profiler import profile, ProfilerActivity, record_function
m = torch.nn.LSTM(16, 32, 2); x = torch.randn(6, 3, 16)
with profile(activities=[ProfilerActivity.CPU], record_shapes=True, profile_memory=True) as p:
    for _ in range(2):
        with record_function("forward"):
            y, _ = m(x)
        with record_function("backward"):
            y.sum().backward()
p.export_chrome_trace(sys.argv[1])
"""


@pytest.mark.capture
def test_memory_events_against_kineto_totals(tmp_path):
    pytest.importorskip("torch")
    path = tmp_path / "mem.json"
    subprocess.run([sys.executable, "-c", _CAPTURE, str(path)], check=True,
                   capture_output=True)
    raw = [e for e in json.loads(path.read_text())["traceEvents"] if e.get("name") == "[memory]"]
    raw.sort(key=lambda e: e["ts"])
    t = traceviz.load(path)
    m = traceviz.Trace.memory(t)
    host = next(r for r in m["devices"] if r["device"] == -1)
    totals = [e["args"]["Total Allocated"] for e in raw]
    sizes = [e["args"]["Bytes"] for e in raw]
    assert host["events"] == len(raw)
    assert host["peak_allocated"] == max(totals)
    assert host["allocated"] == sum(b for b in sizes if b > 0)
    assert host["freed"] == -sum(b for b in sizes if b < 0)
    phases = {r["phase"]: r for r in m["phases"]}
    assert {"forward", "backward"} <= set(phases)
    assert sum(r["allocated"] for r in m["phases"]) == host["allocated"]
    # the running total from the stored sizes is Kineto's own at every event
    from traceviz.analyses.summary.footprint import memory

    series = memory(t).series
    assert series["total"].tolist() == totals


def test_workload_flops_by_hand():
    w = {"seq": 50, "batch": 128, "hidden": 256, "layers": 3, "input": 128, "vocab": 10001,
         "head": "lm", "classes": 0, "mode": "train"}
    f = workload_flops(w)
    lstm = sum(2 * 50 * 128 * 1024 * (i + 256) for i in (128, 256, 256))
    head = 2 * 6400 * 256 * 10001
    assert f["parts"] == {"lstm": 3 * lstm, "head": 3 * head + 2 * 6400 * 10001,
                          "softmax": 8 * 6400 * 10001}
    assert workload_flops({**w, "mode": "forward"})["total"] == lstm + head + 6400 * 10001 \
        + 5 * 6400 * 10001


def test_out_variants_promotion_and_torchscript_records():
    """Found by checking against TraceLens on real traces: DDP's mul_out into a given
    tensor by a 0-dim double reads the gradient and writes the out tensor once, in float;
    TorchScript's aten::mm records two Scalars before its matrices."""
    n = 8192 * 11192
    c = op_cost("aten::mul", d([[8192, 11192], [], [8192, 11192]], ["float", "double", "float"]))
    assert (c.flops, c.bytes) == (n, 4 * n + 8 + 4 * n)
    c = op_cost("aten::mul", d([[4096], []], ["float", "double"]))
    assert c.bytes == 4096 * 4 + 8 + 4096 * 4
    c = op_cost("aten::add", d([[4, 5], [4, 5], []], ["float", "long int", "Scalar"]))
    assert c.bytes == 20 * 4 + 20 * 8 + 20 * 4  # float + long -> float
    c = op_cost("aten::mm", d([[], [], [128, 256], [256, 1024]],
                              ["Scalar", "Scalar", "float", "float"]))
    assert c.flops == 2 * 128 * 256 * 1024
    assert op_cost("aten::copy_", d([[3], [3], []], ["long", "float", "Scalar"])).bytes == 36


def test_xspace_allocator_events_against_the_protobuf():
    """TF's MemoryAllocation/MemoryDeallocation events (shared BERT AMP trace, 3 GPUs):
    per allocator the total after each event is the protobuf's own bytes_allocated."""
    xplane_pb2 = pytest.importorskip("tensorflow.tsl.profiler.protobuf.xplane_pb2")
    path = shared(SHARED_TRACES / "xplane" / "tf24_bert_amp_gpu.xplane.pb.gz")
    space = xplane_pb2.XSpace()
    space.ParseFromString(gzip.decompress(path.read_bytes()))
    host = next(p for p in space.planes if p.name == "/host:CPU")
    names = {k: m.name for k, m in host.event_metadata.items()}
    stat = {k: m.name for k, m in host.stat_metadata.items()}
    raw: dict[int, list] = {}
    for line in host.lines:
        for e in line.events:
            if names[e.metadata_id] not in ("MemoryAllocation", "MemoryDeallocation"):
                continue
            s = {stat[x.metadata_id]: x.int64_value or x.uint64_value or x.str_value
                 for x in e.stats}
            alloc = str(s["allocator_name"])
            dev = int(alloc.split("_")[1]) if alloc.startswith("GPU_") else -1
            raw.setdefault(dev, []).append((line.timestamp_ns * 1000 + e.offset_ps,
                                            int(s["bytes_allocated"])))
    from traceviz.analyses.summary.footprint import memory

    t = traceviz.load(path)
    series = memory(t).series
    for dev, events in raw.items():
        got = series[series["device"] == dev]["total"].tolist()
        assert got == [b for _, b in sorted(events, key=lambda x: x[0])], dev
    m = t.memory()
    assert {r["device"]: r["peak_allocated"] for r in m["devices"]} == {
        d: max(b for _, b in ev) for d, ev in raw.items()}


def test_nsys_cuda_memory_usage_events(tmp_path):
    """nsys --cuda-memory-usage=true: CUDA_GPU_MEMORY_USAGE_EVENTS (the table as the
    installed Nsight Systems' User Guide defines it) added to a real export."""
    import shutil
    import sqlite3

    db = tmp_path / "mem.sqlite"
    shutil.copy(shared(SHARED_TRACES / "nsys" / "rtx3080_tiny.sqlite"), db)
    con = sqlite3.connect(db)
    start = con.execute("SELECT min(start) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    gpid = con.execute("SELECT globalPid FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    con.execute("CREATE TABLE CUDA_GPU_MEMORY_USAGE_EVENTS (start INTEGER NOT NULL, "
                "globalPid INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER "
                "NOT NULL, address INTEGER NOT NULL, pc INTEGER NOT NULL, bytes INTEGER NOT "
                "NULL, memKind INTEGER NOT NULL, memoryOperationType INTEGER NOT NULL, name "
                "TEXT, correlationId INTEGER)")
    mib = 1 << 20
    kinds = dict(con.execute("SELECT name, id FROM ENUM_CUDA_MEM_KIND").fetchall())
    dev, pinned = kinds["CUDA_MEMOPR_MEMORY_KIND_DEVICE"], kinds["CUDA_MEMOPR_MEMORY_KIND_PINNED"]
    events = [(1, 0, dev, 0, mib), (2, 0, dev, 0, 2 * mib), (3, 0, dev, 1, mib),
              (4, 0, pinned, 0, 4 * mib), (5, 0, dev, 0, 8 * mib), (6, 0, dev, 1, 8 * mib)]
    con.executemany("INSERT INTO CUDA_GPU_MEMORY_USAGE_EVENTS VALUES "
                    "(?, ?, ?, 1, ?, 0, ?, ?, ?, NULL, 0)",
                    [(start + t, gpid, dev, 4096 * t, size, kind, op)
                     for t, dev, kind, op, size in events])
    con.commit()
    con.close()
    m = traceviz.load(db).memory()
    by_device = {r["device"]: r for r in m["devices"]}
    assert by_device[0]["peak_allocated"] == 10 * mib  # 1 + 2 - 1 + 8
    assert (by_device[0]["allocated"], by_device[0]["freed"]) == (11 * mib, 9 * mib)
    assert by_device[-1]["allocated"] == 4 * mib  # pinned host memory
    assert any("peaks count from the first event" in n for n in m["notes"])


def test_xspace_xla_cost_analysis(tmp_path):
    """A TPU's "XLA Ops" line whose events carry XLA's cost analysis (flops and
    bytes_accessed, on the event metadata as TPU profiles hold them, or on the event):
    each op's own figures. No trace with them is to be had here, so the XSpace is built
    with the real protobuf schema, in the layout xprof's own tests use."""
    xplane_pb2 = pytest.importorskip("tensorflow.tsl.profiler.protobuf.xplane_pb2")
    xs = xplane_pb2.XSpace()
    host = xs.planes.add()
    host.id, host.name = 0, "/host:CPU"
    dev = xs.planes.add()
    dev.id, dev.name = 1, "/device:TPU:0"
    for sid, name in ((1, "flops"), (2, "bytes_accessed")):
        dev.stat_metadata[sid].id, dev.stat_metadata[sid].name = sid, name
    dot_flops, dot_bytes = 2 * 128 * 256 * 512, 4 * (128 * 256 + 256 * 512 + 128 * 512)
    for mid, name, stats in ((10, "dot.1", ((1, dot_flops), (2, dot_bytes))),
                             (11, "fusion.2", ()), (12, "copy.3", ())):
        md = dev.event_metadata[mid]
        md.id, md.name = mid, name
        for sid, value in stats:
            s = md.stats.add()
            s.metadata_id, s.int64_value = sid, value
    line = dev.lines.add()
    line.id, line.name, line.timestamp_ns = 1, "XLA Ops", 1_000_000
    for mid, off_us, dur_us in ((10, 0, 4000), (11, 5000, 1000), (12, 7000, 500),
                                (10, 8000, 4000)):
        e = line.events.add()
        e.metadata_id, e.offset_ps, e.duration_ps = mid, off_us * 10**6, dur_us * 10**6
        if mid == 11:  # the event's own stats
            for sid, value in ((1, 1000), (2, 4000)):
                s = e.stats.add()
                s.metadata_id, s.uint64_value = sid, value
    path = tmp_path / "tpu.xplane.pb"
    path.write_bytes(xs.SerializeToString())
    e = summarize(traceviz.load(path), with_efficiency=True).efficiency
    g = e.groups.set_index("op")
    assert g.loc["dot.1", "flops"] == 2 * dot_flops and g.loc["dot.1", "calls"] == 2
    assert g.loc["dot.1", "bytes"] == 2 * dot_bytes
    assert g.loc["dot.1", "tflops"] == pytest.approx(2 * dot_flops / 8_000_000 / 1e3)
    assert (g.loc["fusion.2", "flops"], g.loc["fusion.2", "bytes"]) == (1000, 4000)
    assert "copy.3" not in g.index and e.uncovered["time_ns"].sum() == 500_000


_CONV_ATTENTION = """
import sys, torch
import torch.nn.functional as F
from torch.profiler import profile, ProfilerActivity
conv = torch.nn.Conv2d(3, 16, 7, stride=2, padding=3)
x = torch.randn(2, 3, 64, 64, requires_grad=True)
q = torch.randn(2, 4, 32, 16, requires_grad=True)
with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as p:
    conv(x).sum().backward()
    F.scaled_dot_product_attention(q, q, q, is_causal=True).sum().backward()
    F.scaled_dot_product_attention(q, q, q).sum().backward()
p.export_chrome_trace(sys.argv[1])
"""


@pytest.mark.capture
def test_convolution_and_attention_ops_that_run(tmp_path):
    """The ops that do the work on a CPU (oneDNN's mkldnn_convolution, its backward, the
    CPU flash attention and its backward) read their own argument positions: stride 2,
    padding 3 and the causal flag from a real capture. Each op's calls in the trace, with
    the details they recorded: which op the Efficiency section counts as the unit of work
    depends on its share of its own time in this one short capture (a parent or a child
    of it may take that role on a busy machine), so its groups are not what is read."""
    pytest.importorskip("torch")
    path = tmp_path / "t.json"
    subprocess.run([sys.executable, "-c", _CONV_ATTENTION, str(path)], check=True,
                   capture_output=True)
    ev = traceviz.load(path).events
    ops = ev[ev["kind"] == "op"]
    g = {name: sum(op_cost(name, str(details)).flops
                   for details in ops.loc[ops["name"] == name, "details"])
         for name in ("aten::mkldnn_convolution", "aten::convolution_backward",
                      "aten::_scaled_dot_product_flash_attention_for_cpu",
                      "aten::_scaled_dot_product_flash_attention_for_cpu_backward")}
    out = 2 * 16 * 32 * 32  # N, C_out, (64 + 6 - 6 - 1) // 2 + 1 = 32
    per = 2 * out * 3 * 7 * 7
    assert g["aten::mkldnn_convolution"] == per + out  # with its bias
    assert g["aten::convolution_backward"] == 2 * per  # input and weight gradients
    full = 2 * (2 * 4) * 32 * 32 * (16 + 16)  # B*H, Lq, Lk, d + dv
    assert g["aten::_scaled_dot_product_flash_attention_for_cpu"] == full // 2 + full
    assert g["aten::_scaled_dot_product_flash_attention_for_cpu_backward"] == \
        (full // 2) * 5 // 2 + full * 5 // 2


def test_convolution_argument_positions_of_each_op():
    """cudnn_convolution(self, weight, padding, stride, dilation, ...) and
    mkldnn_convolution(self, weight, bias, padding, stride, ...): padding 0, stride 1,
    a 1x1 kernel keeps 56x56; under cudnn.benchmark its 'True' is not 'transposed'."""
    x, w = [8, 64, 56, 56], [256, 64, 1, 1]
    by_hand = 2 * 8 * 256 * 56 * 56 * 64
    c = op_cost("aten::cudnn_convolution", d(
        [x, w, [], [], [], [], [], [], []], ["float", "float"] + ["ScalarList"] * 3
        + ["Scalar"] * 4, ["", "", "[0, 0]", "[1, 1]", "[1, 1]", "1", "True", "False",
                           "True"]))
    assert c.flops == by_hand
    c = op_cost("aten::conv2d", d([x, w, [], [], [], [], []], ["float"] * 2 + [""] * 5,
                                  ["", "", "", "[1, 1]", "'same'", "[1, 1]", "1"]))
    assert c.flops == by_hand
    for name, fields in (("aten::_flash_attention_forward", 8),
                         ("aten::_efficient_attention_forward", 9)):
        q = [2, 1024, 16, 64]  # [B, L, H, d]
        conc = [""] * 12
        conc[fields] = "0"  # not causal (False / mask type 0)
        if fields == 8:
            conc[fields] = "False"
        c = op_cost(name, d([q, q, q] + [[]] * 9, ["c10::BFloat16"] * 3 + [""] * 9, conc))
        assert c.flops == 4 * 2 * 16 * 1024 * 1024 * 64, name


def test_integer_copies_are_not_casts(tmp_path):
    """A copy kernel named ...WithCast launched by an aten::copy_ whose recorded dtypes
    keep the floating-point format (here the H100 bf16 capture's float <-> bf16/fp16
    copies relabelled long -> int, as a DLRM's index copies are) is no cast; the rest
    stay."""
    with gzip.open(CUDNN_BF16) as f:
        doc = json.load(f)
    before = traceviz.load(CUDNN_BF16).kernels()
    edited = 0
    for e in doc["traceEvents"]:
        types = e.get("args", {}).get("Input type", [])[:2] if e.get("cat") == "cpu_op" \
            else []
        if e.get("name") == "aten::copy_" and len(types) == 2 and types[0] != types[1] and \
                set(types) <= {"float", "c10::BFloat16", "c10::Half"}:
            e["args"]["Input type"][:2] = ["long int", "int"]
            edited += 1
    assert edited
    path = tmp_path / "int_copies.json"
    path.write_text(json.dumps(doc))
    after = traceviz.load(path).kernels()
    copies = before["is_cast"] & (before["op"] == "aten::copy_")
    assert copies.sum() > 0 and (after["is_cast"] & (after["op"] == "aten::copy_")).sum() == 0
    others = before["is_cast"] & (before["op"] != "aten::copy_")
    assert (after["is_cast"] & (after["op"] != "aten::copy_")).sum() == others.sum()


@pytest.mark.capture
def test_a_cpu_work_op_without_a_formula_takes_its_modelled_op(tmp_path):
    """On a CPU trace the work op may be an autograd node (its own time past half):
    the figures come from the modelled op inside it."""
    pytest.importorskip("torch")
    from traceviz.analyses.efficiency.ops import _modelled_inside

    path = tmp_path / "t.json"
    subprocess.run([sys.executable, "-c", _CONV_ATTENTION, str(path)], check=True,
                   capture_output=True)
    t = traceviz.load(path)
    ev = t.events
    nodes = ev[ev["name"].astype(str) == "ConvolutionBackward0"]
    assert len(nodes) == 1
    chosen = _modelled_inside(t, nodes)
    assert str(ev["name"].iloc[chosen[0]]) == "aten::convolution_backward"
