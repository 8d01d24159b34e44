"""What traceviz says of TensorFlow/Keras profiles recorded by other projects
(``../shared/traces/foreign/xplane/``): casts, the device's derived peak, the host's time
between ops, streams of copies, log directories given at their parent. Each ``.xplane.pb``
of the Keras windows has a sibling ``.trace.json.gz`` the same profiler wrote: the
expected figures are read from it (plain ``json``, Python loops), never from traceviz."""

from __future__ import annotations

import gzip
import json
import re
from decimal import Decimal
from functools import lru_cache
from pathlib import Path

import pytest

from tests.conftest import SHARED_TRACES, shared
from traceviz import load
from traceviz.analyses.summary.figures import summarize

XPLANE = SHARED_TRACES / "foreign" / "xplane"
KERAS = XPLANE / "keras_semi_supervised_cv"


@lru_cache(maxsize=4)
def _sibling(name: str) -> tuple[dict, ...]:
    """The complete events of a Keras window's ``.trace.json.gz``."""
    with gzip.open(shared(KERAS / f"{name}.trace.json.gz"), "rt") as f:
        doc = json.load(f, parse_float=Decimal)
    return tuple(e for e in doc["traceEvents"] if e.get("ph") == "X")


def _ns(v) -> int:
    return int((Decimal(str(v)) * 1000).to_integral_value())


def _stream_rows(name: str) -> list[dict]:
    """Device rows on the GPU's stream lines (pid 1, small tids; the other GPU lines
    repeat them per kind)."""
    return [e for e in _sibling(name) if e["pid"] == 1 and int(e["tid"]) < 1 << 16]


def _op_type(e: dict) -> str:
    """A kernel's TF op type: ``annotation`` is ``name:Type``."""
    return str(e.get("args", {}).get("annotation", "")).rsplit(":", 1)[-1]


def test_inline_conversions_are_not_casts_only_tf_cast_ops_are():
    """ReluGrad's kernels convert the comparison's bool to float inside the product:
    FP32 work. The casts are the kernels TF's Cast op ran."""
    rows = _stream_rows("resnet_s5")
    cast = [e for e in rows if _op_type(e) == "Cast"]
    relu = [e for e in rows if _op_type(e) == "ReluGrad"
            and "TensorConversionOp" in e["name"]]
    assert len(relu) == 50 and len(cast) == 8
    trace = load(shared(KERAS / "resnet_s5.xplane.pb"))
    s = summarize(trace)
    assert s.casts.count == len(cast)
    assert s.casts.total_ns == sum(_ns(e["dur"]) for e in cast)
    k = trace.kernels()
    relu_rows = k[k["op"].astype(str) == "ReluGrad"]
    assert len(relu_rows) == len(relu) and not relu_rows["is_cast"].any()
    assert set(relu_rows["category"].astype(str)) <= {"elementwise", "reduction", "other"}


# the profiler's copy names as traceviz names copies on every format (torch.profiler's)
_COPY_NAMES = {"MemcpyH2D": "Memcpy HtoD", "MemcpyD2H": "Memcpy DtoH",
               "MemcpyD2D": "Memcpy DtoD", "MemcpyP2P": "Memcpy PtoP"}


def _per_name(name: str) -> dict[str, tuple[int, int]]:
    """(calls, total ns) per device row name on the stream lines of a window."""
    out: dict[str, tuple[int, int]] = {}
    for e in _stream_rows(name):
        key = _COPY_NAMES.get(e["name"], e["name"])
        n, t = out.get(key, (0, 0))
        out[key] = (n + 1, t + _ns(e["dur"]))
    return out


def test_compare_time_per_call_is_the_mean_and_agrees_with_the_totals(capsys):
    """Both windows mark one step: calls per step. "faster" or "slower" with the count
    unchanged never contradicts the name's total (the median call did: a DtoD copy was
    "faster" with more time, ShuffleInTensor3Simple "slower" with less)."""
    from traceviz.analyses.compare.runs import kernel_diff

    a, b = (load(shared(KERAS / f"{n}.xplane.pb")) for n in ("alexnet_s1", "alexnet_s3tune"))
    d = kernel_diff(a, b).set_index("name")
    assert d.attrs["unit"] == "step" and d.attrs["windows_apart"] is None
    for side, window in (("a", "alexnet_s1"), ("b", "alexnet_s3tune")):
        raw = _per_name(window)
        got = d[d[f"calls_{side}"] > 0]
        assert set(got.index) == set(raw)
        for n, (calls, total) in raw.items():
            assert got.loc[n, f"calls_{side}"] == calls
            assert got.loc[n, f"per_call_{side}"] == pytest.approx(total / calls, abs=0.5)
    change = d["change"].astype(str)
    alone = d[change.isin(["faster", "slower"])]
    assert len(alone) > 0
    assert ((alone["change"] == "faster") == (alone["delta_ns"] < 0)).all()
    assert d.loc["Memcpy DtoD", "change"] != "faster"
    with_calls = d[change.str.contains("calls")]
    assert len(with_calls) and ((with_calls["change"].str.startswith("more")
                                 & with_calls["change"].str.endswith("slower"))
                                <= (with_calls["delta_ns"] > 0)).all()
    from traceviz.cli import main

    assert main(["compare", str(shared(KERAS / "alexnet_s1.xplane.pb")),
                 str(shared(KERAS / "alexnet_s3tune.xplane.pb")), "--width", "200"]) == 0
    out = capsys.readouterr().out
    assert "calls/step" in out and "mean/call" in out
    ta, tb = (sum(t for _, t in _per_name(n).values()) for n in ("alexnet_s1",
                                                                 "alexnet_s3tune"))
    from traceviz.units import fmt_ns

    assert f"A {fmt_ns(ta)} → B {fmt_ns(tb)}" in out


def test_compare_without_steps_says_per_second_and_the_windows(capsys):
    """Two JAX windows without step marks, 15x apart in length: per-second columns, both
    lengths in the title and a note that the rates compare different stretches."""
    from traceviz.cli import main

    a, b = (shared(XPLANE / f"tracelens_mi300_jax08_{n}.xplane.pb") for n in ("gemm", "conv"))
    assert main(["compare", str(a), str(b), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)["differences"][0]
    wa, wb = d["window_ns"]
    assert d["unit"] == "s" and d["windows_apart"] == pytest.approx(max(wa, wb) / min(wa, wb))
    assert d["windows_apart"] > 10
    for k in d["kernels"]:
        assert k["count_a"] == pytest.approx(k["calls_a"] / (wa / 1e9))
        if k["calls_b"]:
            assert k["per_call_b"] == pytest.approx(k["ns_b"] * wb / 1e9 / k["calls_b"])
    assert main(["compare", str(a), str(b), "--width", "200"]) == 0
    out = capsys.readouterr().out
    from traceviz.units import fmt_ns

    assert f"per second of each run's window: A {fmt_ns(wa)}, B {fmt_ns(wb)}" in out
    assert "calls/s" in out and f"the windows differ {max(wa, wb) / min(wa, wb):.0f}x" in out


def _plane_stats(path: Path, plane_name: str) -> dict:
    """A plane's own stats, read from the protobuf as it lies."""
    from traceviz.parsers.xspace.messages import xspace_class

    space = xspace_class()()
    space.ParseFromString(path.read_bytes())
    plane = next(p for p in space.planes if p.name == plane_name)
    names = {k: m.name for k, m in plane.stat_metadata.items()}
    return {names[s.metadata_id]: getattr(s, s.WhichOneof("value")) for s in plane.stats}


def test_an_unnamed_xspace_gpu_gets_a_peak_derived_from_its_properties(capsys):
    """``/device:GPU:0`` names no device; its plane states 80 multiprocessors, their
    clock, compute capability 7.0 (64 FP32 lanes each) and the memory bandwidth: a V100
    SXM2's 15.7 TFLOP/s FP32 and 900 GB/s, derived and said to be."""
    from traceviz.cli import main

    path = shared(KERAS / "resnet_s5.xplane.pb")
    st = _plane_stats(path, "/device:GPU:0")
    assert (st["compute_cap_major"], st["compute_cap_minor"]) == (7, 0)
    fp32 = st["core_count"] * st["clock_rate"] * 1e3 * 64 * 2 / 1e12  # clock_rate: kHz
    assert fp32 == pytest.approx(15.7, rel=0.01)  # NVIDIA V100 datasheet, SXM2
    assert main(["analyze", str(path), "--json"]) == 0
    e = json.loads(capsys.readouterr().out)["efficiency"]
    assert e["peak"]["figures"] == {"fp32": pytest.approx(fp32, abs=1e-3),
                                    "bw": pytest.approx(st["memory_bandwidth"] / 1e9)}
    assert not any(n.startswith("No peak figures") for n in e["notes"])
    derived = [n for n in e["notes"] if "derived from the profile's device properties" in n]
    assert len(derived) == 1
    assert f"{st['core_count']} multiprocessors x {st['clock_rate'] / 1e3:g} MHz x 64 FP32 " \
           "lanes (compute capability 7.0) x 2" in derived[0]
    assert main(["analyze", str(path), "--width", "200"]) == 0
    out = capsys.readouterr().out
    assert f"peak of /device:GPU:0 (TFLOP/s): fp32 {round(fp32, 3):g}" in out
    assert "No peak figures" not in out


def test_flop_rates_without_any_flop_figure_are_unknown_not_zero(capsys):
    """TensorFlow recorded no XLA cost analysis (no ``flops`` stat on the GPU plane): the
    FLOPs, bytes and TFLOP/s are unknown (null, "unknown"), with the reason once."""
    from traceviz.cli import main

    path = shared(KERAS / "resnet_s5.xplane.pb")
    from traceviz.parsers.xspace.messages import xspace_class

    space = xspace_class()()
    space.ParseFromString(path.read_bytes())
    gpu = next(p for p in space.planes if p.name == "/device:GPU:0")
    assert not {m.name for m in gpu.stat_metadata.values()} & {"flops", "bytes_accessed"}
    assert main(["analyze", str(path), "--json"]) == 0
    e = json.loads(capsys.readouterr().out)["efficiency"]
    run = e["run"]
    assert run["flops"] is None and run["bytes"] is None
    assert run["tflops_busy"] is None and run["tflops_span"] is None
    assert run["time_ns"] == sum(_ns(r["dur"]) for r in _stream_rows("resnet_s5")
                                 if not r["name"].startswith("Memcpy"))
    assert sum("no XLA cost analysis" in n for n in e["notes"]) == 1
    assert main(["analyze", str(path), "--width", "200"]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("efficiency:"))
    assert "FLOPs unknown" in line and "TFLOP/s unknown" in line
    assert "0.00 TFLOP/s" not in out and "FLOPs 0.0 G" not in out
    assert out.count("no XLA cost analysis") == 1


@pytest.mark.parametrize("path, alone", [
    (XPLANE / "tracelens_jax_te_fused_attn.xplane.pb", True),  # device-bound, nothing else
    (KERAS / "resnet_s5.xplane.pb", False),                    # device-bound, then more
])
def test_the_findings_below_only_where_findings_follow(path, alone, capsys):
    from traceviz.cli import main

    assert main(["advise", str(path), "--json"]) == 0
    findings = json.loads(capsys.readouterr().out)["findings"]
    assert findings[0]["rule"] == "device_bound"
    assert (len(findings) == 1) == alone
    assert main(["advise", str(path), "--width", "200"]) == 0
    out = capsys.readouterr().out
    assert ("the findings below" in out) != alone
    if alone:  # what the pointer leaned on stands alone
        assert "make the kernels faster or fewer: `traceviz analyze`" in out


def _kernel_streams(name: str) -> tuple[set[int], set[int]]:
    """(streams that ran kernels, streams of copies alone) of a window, from the sibling."""
    kinds: dict[int, set[bool]] = {}
    for e in _stream_rows(name):
        kinds.setdefault(int(e["tid"]), set()).add(e["name"].startswith("Memcpy"))
    return ({t for t, k in kinds.items() if False in k},
            {t for t, k in kinds.items() if k == {True}})


def test_streams_of_copies_alone_are_not_compute_streams_that_failed_to_overlap(capsys):
    """TensorFlow copies the input batch on a stream of its own and results back on
    another: one stream ran kernels, so nothing "never overlaps"."""
    from traceviz.cli import main

    kernels, copies = _kernel_streams("resnet_s5")
    assert len(kernels) == 1 and len(copies) == 2
    path = shared(KERAS / "resnet_s5.xplane.pb")
    o, = summarize(load(path)).stream_overlap
    assert (o.streams, o.kernel_streams) == (3, 1) and not o.never_overlaps
    assert main(["advise", str(path), "--json"]) == 0
    rules = [f["rule"] for f in json.loads(capsys.readouterr().out)["findings"]]
    assert "streams_never_overlap" not in rules
    assert main(["analyze", str(path), "--width", "200"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("streams,"))
    assert "3 ran work (1 with kernels, 2 copies alone)" in line and "overlap" not in line


def test_streams_that_ran_kernels_are_judged_copies_left_out(capsys):
    """The AlexNet window ran kernels on two streams, never at once; its two copy streams
    are named apart and not counted."""
    from traceviz.cli import main

    kernels, copies = _kernel_streams("alexnet_s1")
    assert len(kernels) == 2 and len(copies) == 2
    assert main(["advise", str(shared(KERAS / "alexnet_s1.xplane.pb")), "--json"]) == 0
    found = {f["rule"]: f for f in json.loads(capsys.readouterr().out)["findings"]}
    f = found["streams_never_overlap"]
    o, = f["figures"]["devices"]
    assert o["kernel_streams"] == 2 and o["streams"] == 4 and o["never_overlaps"]
    assert f["evidence"][0].startswith("device 0: 2 streams ran kernels")
    assert "2 more held copies alone (not counted)" in f["evidence"][0]


def test_a_tensorflow_executor_thread_is_not_python(capsys):
    """The thread that launched most kernels is one of TensorFlow's executor threads
    (``tf_Compute/...`` on the host plane): its time between ops is the executor's, not
    Python's, in the host split and on the critical path."""
    from collections import Counter

    from traceviz.cli import main
    from traceviz.parsers.xspace.messages import xspace_class

    path = shared(KERAS / "resnet_s5.xplane.pb")
    space = xspace_class()()
    space.ParseFromString(path.read_bytes())
    host = next(p for p in space.planes if p.name == "/host:CPU")
    # CUPTI's launch events carry the kernel's name and its correlation id; copies aside
    names = {k: m.name for k, m in host.event_metadata.items()}
    corr = next(k for k, m in host.stat_metadata.items() if m.name == "correlation_id")
    launches = Counter(line.name for line in host.lines for e in line.events
                       if any(st.metadata_id == corr for st in e.stats)
                       and not names[e.metadata_id].startswith("Memcpy"))
    (top, n), = launches.most_common(1)
    assert top.startswith("tf_Compute") and n > 1000
    assert main(["analyze", str(path), "--json", "--critical-path"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["host"]["main_thread"]["tid"] == int(top.rsplit("/", 1)[1]) % 2**32
    assert out["host"]["between_ops_what"] == "TensorFlow's executor"
    calls = {r["name"] for r in out["critical_path"]["host_calls"]}
    assert "(between ops: TensorFlow's executor, anything unrecorded)" in calls
    assert main(["analyze", str(path), "--width", "200"]) == 0
    text = capsys.readouterr().out
    assert "between ops: TensorFlow's executor, anything unrecorded" in text
    assert "between ops: Python" not in text


# each XLA front end's own API words; the bound and host rules (``bound.py``, ``host.py``)
# are worded elsewhere and left out here
TF_WORDS = re.compile(r"\btf\.|keras|TensorFlow")
JAX_WORDS = re.compile(r"\bjax\b|jax\.|flax|Pallas|grain\b")
OTHER_THEMES = ("bound", "host")


@pytest.mark.parametrize("path, framework", [
    (KERAS / "resnet_s5.xplane.pb", "tf"), (KERAS / "alexnet_s1.xplane.pb", "tf"),
    (KERAS / "alexnet_s3tune.xplane.pb", "tf"),
    (XPLANE / "chess_tf_20210616-014419.xplane.pb", "tf"),
    (XPLANE / "tracelens_mi300_jax08_attention.xplane.pb", "jax"),
    (XPLANE / "tracelens_mi300_jax08_elementwise.xplane.pb", "jax"),
], ids=lambda x: getattr(x, "name", x))
def test_remedies_speak_the_traces_framework_alone(path, framework):
    """A TensorFlow trace's actions name no JAX API, a JAX trace's no TensorFlow one (the
    repeated kernel sequence of the ResNet window offered jax.jit)."""
    from traceviz.analyses.advice.advising import Context, advise_full
    from traceviz.analyses.advice.rules import RULES

    t = load(path)
    assert Context(t).framework_name == framework
    theme = {r.rule.__name__: r.theme for r in RULES}
    other = JAX_WORDS if framework == "tf" else TF_WORDS
    checked = [f for f in advise_full(t).findings if theme[f.rule] not in OTHER_THEMES]
    assert checked
    for f in checked:
        assert not other.search(f.action), (f.rule, f.action)
    if path.name == "resnet_s5.xplane.pb":
        seq = next(f for f in checked if f.rule == "kernel_sequences")
        assert "tf.function(jit_compile=True)" in seq.action


@pytest.mark.parametrize("path, own, other", [
    (XPLANE / "tracelens_mi300_jax08_attention.xplane.pb", "jax.jit", TF_WORDS),
    (XPLANE / "chess_tf_20210616-112936.xplane.pb", "tf.function(jit_compile=True)",
     JAX_WORDS),
], ids=lambda x: getattr(x, "name", None))
def test_what_fuses_a_sequence_is_said_in_the_traces_framework(path, own, other):
    """The fusion remedy of a repeated sequence: jax.jit on a JAX trace, tf.function's
    XLA on a TensorFlow one, never the other's."""
    from traceviz.analyses.advice.actions import fusion_action
    from traceviz.analyses.advice.advising import Context
    from traceviz.analyses.work import work_rows

    t = load(path)
    work = work_rows(t)
    action = fusion_action(Context(t), work, str(work["name"].iloc[0]))
    assert own in action and not other.search(action)


def _keras_logs(root: Path, runs: tuple[str, ...]) -> Path:
    """Keras' TensorBoard layout, ``logs/fit/<time>/train/plugins/profile/<run>/``, one
    chess run per ``<time>`` (its file linked from ../shared, not copied)."""
    for time in runs:
        src = shared(XPLANE / f"chess_tf_{time}.xplane.pb")
        d = root / "logs" / "fit" / time / "train" / "plugins" / "profile" / "2021_06_16"
        d.mkdir(parents=True)
        (d / "aoberai.xplane.pb").symlink_to(src.resolve())
        (root / "logs" / "fit" / time / "validation").mkdir()
    return root / "logs" / "fit"


def _compute_kernels(path: Path) -> int:
    """Kernels on the GPU plane's stream lines (copies aside), from the protobuf."""
    from traceviz.parsers.xspace.messages import xspace_class

    space = xspace_class()()
    space.ParseFromString(path.read_bytes())
    gpu = next(p for p in space.planes if p.name == "/device:GPU:0")
    names = {k: m.name for k, m in gpu.event_metadata.items()}
    return sum(1 for line in gpu.lines if line.name.startswith("Stream #")
               for e in line.events if not names[e.metadata_id].startswith("Memcpy"))


def test_a_log_dir_given_at_its_parent_is_read(tmp_path, capsys):
    """``logs/fit/`` (and ``logs/``) holding one run's log directory deeper down reads as
    that log directory does."""
    from traceviz.cli import main

    fit = _keras_logs(tmp_path, ("20210616-112936",))
    want = _compute_kernels(shared(XPLANE / "chess_tf_20210616-112936.xplane.pb"))
    assert want == 147
    for path in (fit, fit.parent, fit / "20210616-112936"):
        assert main(["analyze", str(path), "--json"]) == 0, path
        assert json.loads(capsys.readouterr().out)["kernels"]["count"] == want


def test_several_runs_below_a_folder_are_listed_in_one_line(tmp_path, capsys):
    from traceviz.cli import main

    fit = _keras_logs(tmp_path, ("20210616-014419", "20210616-112936"))
    for path in (fit, fit.parent):
        assert main(["analyze", str(path)]) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
        assert "2 TensorBoard log directories below it" in err
        for time in ("20210616-014419", "20210616-112936"):
            assert str((fit / time / "train").relative_to(path)) in err
    # each of them still reads alone
    assert main(["analyze", str(fit / "20210616-014419"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["kernels"]["count"] == _compute_kernels(
        shared(XPLANE / "chess_tf_20210616-014419.xplane.pb"))
