"""``--peak`` wherever a command rates or prices by the device's peaks. ``advise``: on a
real H100 trace with unfused attention, the attention finding's fused kernel time (and so
its saving) and the memory-bound finding's ridge follow the peak, and nothing else
changes; the expected fused time is the model of ``analyses/efficiency/attention_fusion.py``
applied to the shapes read here from the raw trace's own records. ``compare``: each run's
MFU is its model TFLOP/s over the peak given."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from tests.conftest import SHARED_TRACES, shared
from traceviz.cli import main
from traceviz.opcost.peaks import find

OWLV2 = SHARED_TRACES / "foreign" / "kineto" / "h7_tracelens_h100_owlv2.json.gz"
BF16, BW = 100.0, 1000.0  # TFLOP/s and GB/s given with --peak
PEAK_RULES = ("attention", "memory_bound_gemms")  # the findings that rate by the peak


def _advise(capsys, *extra: str) -> dict:
    assert main(["advise", str(shared(OWLV2)), "--json", *extra]) == 0
    return json.loads(capsys.readouterr().out)


def _expected_fused_ns(bf16: float, bw: float) -> int:
    """From the raw trace: the Q·Kᵀ batched matmul ([B·H, S, d] x [B·H, d, S], bf16) and
    the softmax calls over its [B·H, S, S] scores; the model: both matmuls' FLOPs at half
    the bf16 peak, or Q, K, V and the output moved once at the bandwidth, the longer."""
    with gzip.open(OWLV2) as f:
        doc = json.load(f)
    ops = [e for e in doc["traceEvents"] if e.get("cat") == "cpu_op"]
    qk = [e["args"]["Input Dims"] for e in ops if e["name"] == "aten::bmm"
          and len(e["args"]["Input Dims"][0]) == 3
          and e["args"]["Input Dims"][0][1] == e["args"]["Input Dims"][1][2] >= 16]
    (bh, s, d), _ = qk[0]
    calls = sum(1 for e in ops if e["name"] == "aten::_softmax"
                and e["args"]["Input Dims"][0] == [bh, s, s])
    assert calls == len(qk) == 120  # one softmax per attention call
    flops = 2 * 2 * bh * s * s * d * calls
    qkvo = 4 * bh * s * d * 2 * calls  # bf16: 2 bytes
    return int(max(flops / (bf16 * 1e12 * 0.5) * 1e9, qkvo / (bw * 1e9) * 1e9))


def test_advise_peak_changes_the_figures_rated_by_the_peak_and_only_those(capsys) -> None:
    base = _advise(capsys)
    given = _advise(capsys, "--peak", f"bf16={BF16:g},bw={BW:g}")
    table = find("NVIDIA H100 80GB HBM3")
    assert table is not None
    before = {f["rule"]: f for f in base["findings"]}
    after = {f["rule"]: f for f in given["findings"]}
    assert before["attention"]["figures"]["fused_ns"] == _expected_fused_ns(
        table.figures["bf16"], table.bandwidth)
    assert after["attention"]["figures"]["fused_ns"] == _expected_fused_ns(BF16, BW)
    # a slower fused kernel saves less, and the replay still finds a saving
    assert 0 < after["attention"]["saving_ns"] < before["attention"]["saving_ns"]
    ridge = BF16 * 1e3 / BW  # FLOP per byte where the bf16 roof meets the bandwidth's
    assert f"against the bf16 ridge of {ridge:.0f} on the user" in \
        after["memory_bound_gemms"]["evidence"][-1]
    assert "on the H100 SXM" in before["memory_bound_gemms"]["evidence"][-1]
    # everything else is as without --peak
    assert set(before) == set(after)
    assert {r: f for r, f in before.items() if r not in PEAK_RULES} == \
        {r: f for r, f in after.items() if r not in PEAK_RULES}
    assert {k: v for k, v in base.items() if k != "findings"} == \
        {k: v for k, v in given.items() if k != "findings"}


def test_a_wrong_peak_is_refused_before_the_trace_is_read(capsys, tmp_path) -> None:
    """The same refusal as ``analyze --peak``'s, and before any reading: the trace named
    does not even exist."""
    assert main(["advise", str(tmp_path / "none.json"), "--peak", "bf16"]) == 2
    assert "'bf16' is no device of the peak table" in capsys.readouterr().err


RUNS = Path(__file__).resolve().parent.parent / "sample_traces" / "gpu"


def test_compare_peak_holds_each_runs_mfu_against_it(capsys) -> None:
    runs = [str(RUNS / "fused_torch" / "train"), str(RUNS / "graph_torch" / "train")]
    assert main(["compare", *runs, "--json"]) == 0
    base = json.loads(capsys.readouterr().out)
    assert main(["compare", *runs, "--json", "--peak", "fp32=10"]) == 0
    given = json.loads(capsys.readouterr().out)
    assert len(base["runs"]) == len(given["runs"]) == 2
    for a, b in zip(base["runs"], given["runs"], strict=True):
        assert a["model_tflops"] > 0 and b["mfu"] == a["model_tflops"] / 10
        assert {k: v for k, v in a.items() if k != "mfu"} == \
            {k: v for k, v in b.items() if k != "mfu"}
    assert {k: v for k, v in base.items() if k != "runs"} == \
        {k: v for k, v in given.items() if k != "runs"}


def test_report_peak_holds_each_runs_mfu_against_it(tmp_path, capsys) -> None:
    """``report --peak``: the MFU cell of every run is its model TFLOP/s over the peak
    given, as ``compare --peak`` computes it; nothing else of the Markdown changes."""
    from traceviz.units import fmt_pct

    runs = [str(RUNS / "fused_torch" / "train"), str(RUNS / "graph_torch" / "train")]
    assert main(["compare", *runs, "--json"]) == 0
    tflops = [r["model_tflops"] for r in json.loads(capsys.readouterr().out)["runs"]]
    for folder, extra in (("a", []), ("b", ["--peak", "fp32=10"])):
        (tmp_path / folder).mkdir()
        assert main(["report", *runs, "-o", str(tmp_path / folder / "r.md"), *extra]) == 0
    capsys.readouterr()
    base, given = ((tmp_path / n / "r.md").read_text().splitlines() for n in ("a", "b"))
    changed = [(a, b) for a, b in zip(base, given, strict=True) if a != b]
    assert len(changed) == 2  # the two runs' rows of the benchmark table
    for (a, b), t in zip(changed, tflops, strict=True):
        assert a.split(" | ")[:-1] == b.split(" | ")[:-1]  # only the last cell, the MFU
        assert b.split(" | ")[-1] == f"{fmt_pct(t / 10)} of fp32 |"


def test_notebook_advise_and_whatif_take_the_peak(capsys) -> None:
    """``t.advise(peak=...)`` and ``t.whatif(..., peak=...)`` rate against the peaks
    given, as ``advise --peak`` and ``whatif --peak`` do: the fused attention's modelled
    time from the raw trace, and the same scenario figures as the command's."""
    from traceviz import load

    peak = f"bf16={BF16:g},bw={BW:g}"
    t = load(shared(OWLV2))
    found = {f["rule"]: f for f in t.advise(peak=peak)}
    assert found["attention"]["figures"]["fused_ns"] == _expected_fused_ns(BF16, BW)
    got = dict(t.whatif("fuse_attention", peak=peak))
    assert main(["whatif", str(shared(OWLV2)), "--json", "--peak", peak,
                 "--scenario", "fuse_attention"]) == 0
    want = json.loads(capsys.readouterr().out)
    keys = ("name", "predicted_ns", "saving_ns")
    assert [{k: s[k] for k in keys} for s in got["scenarios"]] == \
        [{k: s[k] for k in keys} for s in want["scenarios"]]
    assert got["scenarios"][0]["saving_ns"] != dict(t.whatif("fuse_attention"))[
        "scenarios"][0]["saving_ns"]
