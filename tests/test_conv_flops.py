"""Convolutions' FLOPs on real traces, against counts this file derives from the raw
Kineto JSON by its own path.

h1 (PyTorch 1.9, ResNet-50 training on a V100) records no Concrete Inputs: no stride,
padding or dilation. The output's shape is in the trace all the same: the autograd node
of a forward convolution (same "Sequence number") receives the output's gradient. Here the
forward ops are linked to their node by that number (traceviz links them by shapes); the
backward halves take the weight's shape from the backward op around them. h5 (PyTorch
2.x, ResNet on an MI300X) records Concrete Inputs: its miopen_convolution ops are counted
from stride, padding and dilation by this file's own formula.
"""

from __future__ import annotations

import functools
import gzip
import json
import math
from collections import defaultdict
from pathlib import Path

import pytest

import traceviz
from tests.conftest import SHARED_TRACES, shared
from traceviz.analyses.summary.figures import summarize
from traceviz.opcost import op_cost

FOREIGN = SHARED_TRACES / "foreign" / "kineto"
H1 = FOREIGN / "h1_kineto_v100_resnet50.pt.trace.json.gz"
H5 = FOREIGN / "h5_tracelens_mi300_resnet_actckpt.json.gz"
CONV = ("aten::cudnn_convolution", "aten::cudnn_convolution_backward_input",
        "aten::cudnn_convolution_backward_weight")


@functools.cache
def _doc(path: Path) -> dict:
    with gzip.open(path) as f:
        return json.load(f)


def _events(path: Path) -> list[dict]:
    return _doc(path)["traceEvents"]


@functools.cache
def _efficiency(path: Path):
    return summarize(traceviz.load(path), with_efficiency=True).efficiency


def _key(op: str, dims: object) -> tuple[str, str]:
    return op, json.dumps(dims)


def _groups(e) -> dict[tuple[str, str], dict]:
    """traceviz's op groups summed by (op, recorded dims) (a group is also keyed by
    types, one per dims here)."""
    out: dict[tuple[str, str], dict] = defaultdict(lambda: {"flops": 0, "calls": 0,
                                                            "time_ns": 0, "bytes": 0})
    for r in e.groups.to_dict("records"):
        if r["op"] in CONV or r["op"] == "aten::miopen_convolution":
            g = out[_key(r["op"], json.loads(r["dims"]))]
            for f in g:
                g[f] += r[f]
    return dict(out)


@functools.cache
def _h1_expected() -> dict[tuple[str, str], dict]:
    """Per (op, dims): calls, direct-convolution FLOPs, kernel time and kernel names,
    from the raw events: 2 * numel(output) * prod(weight[1:]), the output's shape from
    the autograd node of the same sequence number, a backward half's weight from the
    cudnn_convolution_backward around it."""
    ev = _events(shared(H1))
    ops = [e for e in ev if e.get("cat") == "Operator"]
    kernels = defaultdict(list)
    for k in ev:
        if k.get("cat") == "Kernel":
            kernels[k["args"]["external id"]].append(k)
    grad_out = {e["args"]["Sequence number"]: e["args"]["Input Dims"][0] for e in ops
                if e["name"] == "CudnnConvolutionBackward"}
    full = [e for e in ops if e["name"] == "aten::cudnn_convolution_backward"]
    out: dict[tuple[str, str], dict] = {}
    for e in ops:
        if e["name"] not in CONV or e["args"]["External id"] not in kernels:
            continue
        dims = e["args"]["Input Dims"]
        if e["name"] == "aten::cudnn_convolution":
            y, w = grad_out[e["args"]["Sequence number"]], dims[1]
        elif e["name"].endswith("_input"):
            y, w = dims[1], dims[2]
        else:
            around = [p for p in full if p["tid"] == e["tid"] and p["ts"] <= e["ts"]
                      and e["ts"] + e["dur"] <= p["ts"] + p["dur"]]
            assert len(around) == 1
            y, w = dims[1], around[0]["args"]["Input Dims"][2]
        ks = kernels[e["args"]["External id"]]
        g = out.setdefault(_key(e["name"], dims), {"calls": 0, "flops": 0, "time_ns": 0,
                                                   "names": set()})
        g["calls"] += 1
        g["flops"] += 2 * math.prod(y) * math.prod(w[1:])
        g["time_ns"] += sum(round(k["dur"] * 1000) for k in ks)
        g["names"] |= {k["name"] for k in ks}
    return out


def test_h1_conv_flops_from_the_recorded_shapes():
    want = _h1_expected()
    got = _groups(_efficiency(shared(H1)))
    # ResNet-50's 23 distinct forward shapes; gradients of several share recorded dims
    assert sum(op == "aten::cudnn_convolution" for op, _ in want) == 23
    assert {op for op, _ in want} == set(CONV)
    assert set(got) == set(want)
    for key, w in want.items():
        assert got[key]["calls"] == w["calls"], key
        assert got[key]["flops"] == pytest.approx(w["flops"], rel=1e-12), key
        assert got[key]["time_ns"] == w["time_ns"], key


def test_h1_stride_two_1x1_conv_counts_its_strided_output():
    """layer4's downsample, 1x1 stride 2 from 1024 to 2048 channels: 14x14 in, 7x7 out;
    6.58 GFLOP a call, not the 26.3 of a stride-1 count."""
    g = _groups(_efficiency(shared(H1)))[_key("aten::cudnn_convolution", [
        [32, 1024, 14, 14], [2048, 1024, 1, 1], [], [], [], [], [], [], []])]
    assert g["flops"] / g["calls"] == pytest.approx(2 * 32 * 2048 * 7 * 7 * 1024, rel=1e-12)


def test_h1_no_conv_above_peak_unless_winograd_or_fft():
    """With the true output shapes, a convolution runs above the V100's FP32 peak only
    where cuDNN chose a Winograd or FFT algorithm (a kernel so named among its kernels):
    those do fewer multiplications than the direct count; the notes say so and do not
    blame the peak table."""
    e = _efficiency(shared(H1))
    peak = e.peak.figures["fp32"] * 1e12
    over = 0
    for key, w in _h1_expected().items():
        rate = w["flops"] / (w["time_ns"] * 1e-9)
        fast = any("winograd" in n.lower() or "fft" in n.lower() for n in w["names"])
        assert rate <= peak or fast, (key, rate / peak)
        over += rate > 1.05 * peak
    assert over  # h1's 3x3 convolutions run Winograd above the direct count's peak
    g = e.groups[e.groups["op"].isin(CONV)]
    assert g["pct_peak"].max() < 2.0
    assert not any("check --peak" in n and "convolution" in n for n in e.notes)
    assert any(n.startswith("Convolutions above the compute peak") and "Winograd" in n
               for n in e.notes)


def test_shape_incomplete_gets_no_flops(tmp_path):
    """h1's forward record alone (no stride, padding, output): no FLOPs, "shape
    incomplete"; with the backward ops taken out of the trace (as an inference trace has
    none), the forward convolutions and weight gradients have no figures and say why,
    while an input gradient, counted from grad_output and the weight it records, keeps its
    FLOPs without bytes."""
    ev = _events(shared(H1))
    rec = next(e for e in ev if e.get("name") == "aten::cudnn_convolution")
    details = (f"dims:{json.dumps(rec['args']['Input Dims'])} "
               f"types:{json.dumps(rec['args']['Input type'])}")
    c = op_cost("aten::cudnn_convolution", details)
    assert c is not None and c.flops is None and c.note.startswith("shape incomplete")
    doc = {**_doc(H1), "traceEvents": [e for e in ev if e.get("name") not in (
        "aten::cudnn_convolution_backward", "CudnnConvolutionBackward")]}
    path = tmp_path / "h1_no_backward.json"
    path.write_text(json.dumps(doc))
    e = summarize(traceviz.load(path), with_efficiency=True).efficiency
    ops = set(e.groups["op"])
    assert "aten::cudnn_convolution" not in ops
    assert "aten::cudnn_convolution_backward_weight" not in ops
    u = e.uncovered.set_index("op")
    for op in ("aten::cudnn_convolution", "aten::cudnn_convolution_backward_weight"):
        assert str(u.loc[op, "note"]).startswith("shape incomplete"), op
    got = _groups(e)
    for key, w in _h1_expected().items():
        if key[0] == "aten::cudnn_convolution_backward_input":
            assert got[key]["flops"] == pytest.approx(w["flops"], rel=1e-12)
            assert got[key]["bytes"] == 0
    g = e.groups[e.groups["op"] == "aten::cudnn_convolution_backward_input"]
    assert g["gbps"].isna().all()


def test_h5_miopen_convolution_from_concrete_inputs():
    """miopen_convolution(self, weight, bias, padding, stride, dilation, groups, ...):
    the output from the recorded stride, padding and dilation."""
    per_dims: dict[tuple[str, str], set[int]] = defaultdict(set)
    for e in _events(shared(H5)):
        if e.get("name") != "aten::miopen_convolution":
            continue
        x, w, b = e["args"]["Input Dims"][:3]
        pad, stride, dil = (json.loads(v) for v in e["args"]["Concrete Inputs"][3:6])
        out = [x[0], w[0]] + [(x[2 + i] + 2 * pad[i] - dil[i] * (w[2 + i] - 1) - 1)
                              // stride[i] + 1 for i in range(2)]
        per_dims[_key(e["name"], e["args"]["Input Dims"])].add(
            2 * math.prod(out) * math.prod(w[1:]) + (math.prod(out) if b else 0))
    got = _groups(_efficiency(H5))
    assert len(per_dims) >= 10
    for key, flops in per_dims.items():
        assert len(flops) == 1 and key in got, key
        assert got[key]["flops"] == pytest.approx(got[key]["calls"] * flops.pop(),
                                                  rel=1e-12), key
