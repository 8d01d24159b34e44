"""XSpace (.xplane.pb): the real TF 2.4 GPU profile in ../shared, and real TF 2.21 / JAX
CPU captures made here. Every expected figure is counted from the protobuf by the test
itself (plain loops over planes, lines and events), not by the parser."""

from __future__ import annotations

import gzip
import json
import math
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import SHARED_TRACES, needs, shared
from traceviz import Trace, load
from traceviz.cli import main
from traceviz.parsers import detect_format
from traceviz.parsers.xspace.messages import xspace_class

BERT = SHARED_TRACES / "xplane" / "tf24_bert_amp_gpu.xplane.pb.gz"


def _space(path: Path):
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    space = xspace_class()()
    space.ParseFromString(data)
    return space


def _events(space, plane_filter):
    """(plane, line, event, name, {stat name: value}) for every event of matching planes."""
    for plane in space.planes:
        if not plane_filter(plane.name):
            continue
        sm = {k: v.name for k, v in plane.stat_metadata.items()}
        for line in plane.lines:
            for e in line.events:
                stats = {}
                for s in e.stats:
                    which = s.WhichOneof("value")
                    stats[sm[s.metadata_id]] = sm.get(s.ref_value) if which == "ref_value" \
                        else getattr(s, which)
                yield plane, line, e, plane.event_metadata[e.metadata_id].name, stats


@pytest.fixture(scope="module")
def bert():
    return _space(shared(BERT)), load(BERT)


def _raw_device_rows(space):
    rows = []
    for plane, line, e, name, st in _events(space, lambda n: n.startswith("/device:GPU:")):
        if not line.name.startswith("Stream #"):
            continue
        kind = "memcpy" if "memcpy_details" in st or name.startswith("Memcpy") else "kernel"
        ts = (line.timestamp_ns * 1000 + e.offset_ps) // 1000
        rows.append({"device": int(plane.name.rsplit(":", 1)[1]), "kind": kind, "name": name,
                     "ts": ts, "dur": e.duration_ps // 1000, "stats": st})
    return rows


def test_bert_kernels_per_device_and_durations(bert):
    space, trace = bert
    raw = _raw_device_rows(space)
    ev = trace.events
    for kind in ("kernel", "memcpy"):
        want = Counter(r["device"] for r in raw if r["kind"] == kind)
        got = ev[ev["kind"] == kind].groupby("device", observed=True).size().to_dict()
        assert got == dict(want), kind
    assert dict(Counter(r["device"] for r in raw if r["kind"] == "kernel")) == {4: 665, 6: 665}
    for device in (4, 6):
        want = sum(r["dur"] for r in raw if r["kind"] == "kernel" and r["device"] == device)
        k = ev[(ev["kind"] == "kernel") & (ev["device"] == device)]
        assert int(k["dur_ns"].sum()) == want
    # bytes of every copy from memcpy_details "size:N"
    want_bytes = sum(int(re.search(r"size:(\d+)", r["stats"]["memcpy_details"]).group(1))
                     for r in raw if r["kind"] == "memcpy")
    assert int(ev.loc[ev["kind"] == "memcpy", "bytes"].sum()) == want_bytes
    # launch configuration kept
    first = next(r for r in raw if r["kind"] == "kernel")
    assert first["stats"]["kernel_details"].startswith("regs:")
    details = set(ev.loc[ev["kind"] == "kernel", "details"].astype(str))
    assert {r["stats"]["kernel_details"] for r in raw if r["kind"] == "kernel"} == details


def test_bert_launches_joined_by_correlation(bert):
    space, trace = bert
    host = {}
    for _, line, e, _name, st in _events(space, lambda n: n == "/host:CPU"):
        if "correlation_id" in st:
            host[st["correlation_id"]] = ((line.timestamp_ns * 1000 + e.offset_ps) // 1000,
                                          e.duration_ps // 1000)
    raw = [r for r in _raw_device_rows(space) if r["kind"] == "kernel"]
    matched = [r for r in raw if r["stats"].get("correlation_id") in host]
    ev = trace.events
    k = ev[ev["kind"] == "kernel"]
    assert int(k["launch_ts_ns"].notna().sum()) == len(matched) == 1330
    assert (ev["kind"] == "runtime").sum() == len(host)
    assert set(k["launch_api"].dropna().astype(str)) == {"cuLaunchKernel"}
    origin = trace.meta["origin_ns"]
    want_delay = sum(max(0, r["ts"] - sum(host[r["stats"]["correlation_id"]]))
                     for r in matched)
    assert int(k["launch_delay_ns"].sum()) == want_delay
    want_call = sum(host[r["stats"]["correlation_id"]][1] for r in matched)
    assert int(k["launch_dur_ns"].sum()) == want_call
    # absolute times survive: trace ts + origin == the protobuf's
    assert int(k["ts_ns"].min()) + origin == min(r["ts"] for r in raw)


def test_bert_cast_time_and_ops(bert):
    space, trace = bert
    raw = [r for r in _raw_device_rows(space) if r["kind"] == "kernel"]

    def op_type(r):  # annotation "scope/node:Type#shape=...#" -> Type
        label = re.sub(r"#.*?#", "", r["stats"].get("annotation", "")).split("::")[-1]
        return label.rsplit(":", 1)[-1] if ":" in label else ""

    cast = [r for r in raw if op_type(r) == "Cast" or "TensorConversionOp" in r["name"]]
    ev = trace.events
    k = ev[ev["kind"] == "kernel"]
    assert int(k.loc[k["is_cast"], "dur_ns"].sum()) == sum(r["dur"] for r in cast) > 0
    assert int(k["is_cast"].sum()) == len(cast)
    assert dict(Counter(op_type(r) for r in raw)) == \
        {str(o): int(c) for o, c in k["op"].astype(str).value_counts().items()}
    from traceviz.analyses import summarize

    s = summarize(trace)
    assert s.casts.total_ns == sum(r["dur"] for r in cast)
    assert s.casts.count == len(cast)


def test_bert_steps_from_device_step_lines(bert):
    space, trace = bert
    ev = trace.events
    steps = ev[ev["kind"] == "step"]
    raw_steps = [(p.name, e.duration_ps // 1000, st) for p, line, e, _n, st in
                 _events(space, lambda n: n.startswith("/device:")) if line.name == "Steps"]
    assert len(steps) == len(raw_steps) == 2
    assert sorted(steps["dur_ns"].tolist()) == sorted(d for _, d, _ in raw_steps)
    grouped = [r for r in _raw_device_rows(space) if r["stats"].get("group_id") == 0]
    k = ev[ev["kind"] == "kernel"]
    assert int((k["step"] == 0).sum()) == sum(1 for r in grouped if r["kind"] == "kernel")


def test_bert_cli(bert, tmp_path, capsys):
    assert detect_format(shared(BERT)) == "xplane"
    assert main(["analyze", str(BERT), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["kernels"]["count"] == 1330
    out = tmp_path / "bert.parquet"
    assert main(["import", str(BERT), "-o", str(out)]) == 0
    assert len(Trace.load(out).events) == len(bert[1].events)


# --- real captures with TF 2.21 and JAX on this CPU -----------------------------------
TINY = ["--preset", "imdb", "--batch", "4", "--seq", "6", "--hidden", "8", "--embed", "4",
        "--vocab", "50", "--warmup", "1", "--steps", "2", "--profile-steps", "2",
        "--device", "cpu"]


def _capture(tmp_path_factory, model: str, *extra: str) -> Path:
    needs("tensorflow" if model.endswith("_tf") else "jax")
    out = tmp_path_factory.mktemp(model) / "run"
    assert main(["capture", "--model", model, *TINY, *extra, "--out", str(out)]) == 0
    return out


def _raw_of(run: Path) -> Path:
    raw = sorted(run.glob("*profile/plugins/profile/*/*.xplane.pb"))
    assert len(raw) == 1
    return raw[0]


@pytest.fixture(scope="module")
def keras_bf16(tmp_path_factory):
    return _capture(tmp_path_factory, "cudnn_tf", "--amp", "bf16")


@pytest.mark.capture
def test_keras_capture_ops_steps_casts(keras_bf16):
    space = _space(_raw_of(keras_bf16))
    trace = Trace.load(keras_bf16 / "trace.parquet")
    ev = trace.events
    assert trace.is_cpu and trace.meta["runner"]["dtype_policy"] == "mixed_bfloat16"
    ops: Counter = Counter()
    cast_ns = 0
    steps = []
    for _, _line, e, name, st in _events(space, lambda n: n == "/host:CPU"):
        m = re.fullmatch(r"([^:\s]+):([A-Za-z_]\w*)", name)
        if m and not m.group(2).startswith("__"):
            ops[m.group(2)] += 1
            cast_ns += e.duration_ps // 1000 if m.group(2) == "Cast" else 0
        if "step_num" in st:
            steps.append((st["step_num"], e.duration_ps // 1000))
    got = ev[ev["kind"] == "op"]["name"].astype(str).value_counts().to_dict()
    assert got == dict(ops)
    # oneDNN-enabled TF runs MatMul as _MklMatMul on CPUs with AVX512-BF16
    assert ops["Cast"] > 0 and ops["MatMul"] + ops["_MklMatMul"] > 0
    assert int(ev.loc[(ev["kind"] == "op") & ev["is_cast"], "dur_ns"].sum()) == cast_ns
    st = ev[ev["kind"] == "step"].sort_values("step")
    assert list(zip(st["step"], st["dur_ns"], strict=True)) == sorted(steps)
    assert [s for s, _ in sorted(steps)] == [2, 3]
    bench = json.loads((keras_bf16 / "bench.json").read_text())
    assert bench["batches"] == 2 and bench["profiled_batches"] == 2


@pytest.mark.capture
def test_eager_capture_names_ops_by_eager_op(tmp_path_factory):
    run = _capture(tmp_path_factory, "eager_tf", "--mode", "forward")
    space = _space(_raw_of(run))
    outer, inner = [], []
    for _, line, e, name, st in _events(space, lambda n: n == "/host:CPU"):
        span = (line.id, e.offset_ps, e.offset_ps + e.duration_ps)
        if name == "EagerExecute" and st.get("is_func") == 0:
            outer.append((*span, st["eager_op"]))
        elif name == "EagerKernelExecute":
            inner.append(span)
    want: Counter = Counter()
    for tid, start, _end in inner:
        around = [o for o in outer if o[0] == tid and o[1] <= start < o[2]]
        if around:
            want[max(around, key=lambda o: o[1])[3]] += 1
    ev = Trace.load(run / "trace.parquet").events
    assert ev[ev["kind"] == "op"]["name"].astype(str).value_counts().to_dict() == dict(want)
    # per profiled step: the Python loop's MatMul pair per time step, and the head's
    assert want["MatMul"] == 2 * (2 * 6 + 1)


@pytest.mark.capture
@pytest.mark.parametrize("model", ["xla_tf", "scan_jax"])
def test_xla_thunks_are_ops(tmp_path_factory, model):
    run = _capture(tmp_path_factory, model)
    space = _space(_raw_of(run))
    want = Counter(re.sub(r"(_\d+)?(\.\d+)?$", "", st["hlo_op"])
                   for _, _l, _e, _n, st in _events(space, lambda n: n == "/host:CPU")
                   if "hlo_op" in st)
    trace = Trace.load(run / "trace.parquet")
    ev = trace.events
    assert ev[ev["kind"] == "op"]["name"].astype(str).value_counts().to_dict() == dict(want)
    gemm = {"xla_tf": "MatMul", "scan_jax": "dot"}[model]
    assert want[gemm] > 0
    for name in (gemm, "ynn_fusion"):  # XLA:CPU's YNNPACK dots
        assert set(ev.loc[(ev["kind"] == "op") & (ev["name"] == name), "category"]) <= {"gemm"}
    assert sorted(ev.loc[ev["kind"] == "step", "step"]) == [2, 3]
    # bench.json: the loss of each timed batch (imdb trains: SGD/Adam moves it), the
    # utilization probe, and JAX's own compile time (its monitoring events)
    bench = json.loads((run / "bench.json").read_text())
    losses = bench["loss_per_batch"]
    assert len(losses) == 2 and all(math.isfinite(v) and v > 0 for v in losses)
    assert losses[0] != losses[1]
    assert bench["loss_first_batch"] == bench["warmup_batches"]
    assert bench["utilization"]["cpu_percent"] >= 0
    if model == "scan_jax":
        assert bench["framework_compile_s"] > 0
        assert "/jax/core/compile/backend_compile_duration" in bench["framework_compile_note"]
    else:
        assert bench["framework_compile_s"] is None and bench["framework_compile_note"]


@pytest.mark.capture
def test_every_variant_computes_what_cudnn_tf_computes():
    tf = needs("tensorflow")
    from traceviz.runners.reference import reference_weights
    from traceviz.runners.tensorflow import keras_lstms as tf_models

    batch, seq, width, hidden, layers = 3, 5, 4, 6, 2
    x = np.random.default_rng(1).normal(size=(batch, seq, width)).astype(np.float32)
    weights = reference_weights(width, hidden, layers, seed=7)
    outputs = {}
    for variant in tf_models.VARIANTS:
        stack = tf_models.lstm_layers(variant, hidden, layers)
        tf_models.run_stack(stack, tf.constant(x))  # build
        tf_models.load_weights(stack, weights)
        fn = tf_models.step_wrapper(tf_models.DEFAULT_EXEC[variant])(
            lambda inp, stack=stack: tf_models.run_stack(stack, inp))
        outputs[variant] = fn(tf.constant(x)).numpy()
    reference = outputs["cudnn_tf"]
    assert reference.shape == (batch, seq, hidden)
    for variant, out in outputs.items():
        np.testing.assert_allclose(out, reference, atol=2e-5, err_msg=variant)
    # a numpy LSTM with the same gate order, and JAX's scan, agree too
    h = np.asarray(x)
    for kernel, recurrent, bias in weights:
        hs, c, ht = [], np.zeros((batch, hidden)), np.zeros((batch, hidden))
        for t in range(seq):
            z = h[:, t] @ kernel + ht @ recurrent + bias
            i, f, g, o = np.split(z, 4, axis=1)
            sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
            c = sig(f) * c + sig(i) * np.tanh(g)
            ht = sig(o) * np.tanh(c)
            hs.append(ht)
        h = np.stack(hs, axis=1)
    np.testing.assert_allclose(reference, h, atol=2e-5)
    jax = needs("jax")
    from traceviz.runners.jax import lstm_stack

    jout = lstm_stack([tuple(jax.numpy.asarray(a) for a in layer) for layer in weights],
                      jax.numpy.asarray(np.swapaxes(x, 0, 1)))
    np.testing.assert_allclose(np.swapaxes(np.asarray(jout), 0, 1), reference, atol=2e-5)


# --- logdirs and bad input ------------------------------------------------------------
def test_logdir_picks_newest_run_or_the_named_one(tmp_path, capsys):
    data = gzip.decompress(shared(BERT).read_bytes())
    for run in ("2026_01_01_00_00_00", "2026_02_01_00_00_00"):
        d = tmp_path / "logs" / "plugins" / "profile" / run
        d.mkdir(parents=True)
        (d / "host.xplane.pb").write_bytes(data)
    from traceviz.parsers.xspace.planes import resolve

    assert resolve(tmp_path / "logs")[0].parent.name == "2026_02_01_00_00_00"
    assert resolve(tmp_path / "logs", "2026_01_01_00_00_00")[0].parent.name \
        == "2026_01_01_00_00_00"
    assert detect_format(tmp_path / "logs") == "xplane"
    assert main(["analyze", str(tmp_path / "logs"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["kernels"]["count"] == 1330
    # two hosts in one run: both files, devices apart, launches joined within each host
    newest = tmp_path / "logs" / "plugins" / "profile" / "2026_02_01_00_00_00"
    second = _space(BERT)  # the same profile, its host calls 1 ms later
    for plane in second.planes:
        if plane.name == "/host:CPU":
            for line in plane.lines:
                line.timestamp_ns += 1_000_000
    (newest / "host2.xplane.pb").write_bytes(second.SerializeToString())
    ev = load(tmp_path / "logs").events
    k = ev[ev["kind"] == "kernel"]
    assert k.groupby("device").size().to_dict() == {4: 665, 6: 665, 1004: 665, 1006: 665}
    assert int(k["launch_ts_ns"].notna().sum()) == 2 * 1330
    first_host = k["device"] < 1000
    assert int(k.loc[~first_host, "launch_ts_ns"].sum()) \
        - int(k.loc[first_host, "launch_ts_ns"].sum()) == 1330 * 1_000_000
    assert set(ev.loc[ev["kind"] == "runtime", "pid"]) == {0, 1}


def test_bad_xplane_inputs(tmp_path, capsys):
    data = gzip.decompress(shared(BERT).read_bytes())
    cut = tmp_path / "cut.xplane.pb"
    cut.write_bytes(data[: len(data) // 3])
    empty_space = tmp_path / "empty.xplane.pb"
    empty_space.write_bytes(b"\x22\x04host")  # a valid XSpace: one hostname, no planes
    junk = tmp_path / "junk.xplane.pb"
    junk.write_bytes(b"\xff" * 100)
    for path, words in ((cut, "not a readable XSpace"), (empty_space, "holds no events"),
                        (junk, "not a readable XSpace")):
        assert main(["analyze", str(path)]) == 2, path
        err = capsys.readouterr().err
        assert words in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    no_runs = tmp_path / "logs" / "plugins" / "profile"
    no_runs.mkdir(parents=True)
    (no_runs / "x").mkdir()
    from traceviz.errors import TraceVizError
    from traceviz.parsers.xspace.planes import resolve

    with pytest.raises(TraceVizError, match="no .xplane.pb"):
        resolve(tmp_path / "logs")


def _handmade_space():
    """A TF 2.21-style GPU profile built here: host launches, one kernel with a tf_op
    stat, one with only JAX's hlo_op, an async D2D copy and a memset."""
    space = xspace_class()()
    host = space.planes.add(name="/host:CPU")
    gpu = space.planes.add(name="/device:GPU:0")
    for plane in (host, gpu):
        for sid, stat in enumerate(("correlation_id", "tf_op", "hlo_op", "memcpy_details",
                                    "memset_details", "kernel_details", "step_num"), 1):
            plane.stat_metadata[sid].id, plane.stat_metadata[sid].name = sid, stat
        for mid, name in enumerate(("gemm_kernel", "fusion_kernel", "MemcpyD2D", "Memset",
                                    "step", "model/dense/MatMul:MatMul"), 1):
            plane.event_metadata[mid].id, plane.event_metadata[mid].name = mid, name

    def event(line, mid, offset_ns, dur_ns, **stats):
        e = line.events.add(metadata_id=mid, offset_ps=offset_ns * 1000,
                            duration_ps=dur_ns * 1000)
        ids = {"correlation_id": 1, "tf_op": 2, "hlo_op": 3, "memcpy_details": 4,
               "memset_details": 5, "kernel_details": 6, "step_num": 7}
        for key, value in stats.items():
            s = e.stats.add(metadata_id=ids[key])
            if isinstance(value, str):
                s.str_value = value
            else:
                s.int64_value = value

    thread = host.lines.add(id=7, name="python", timestamp_ns=1_000)
    event(thread, 5, 0, 10_000, step_num=4)
    event(thread, 6, 100, 300)                          # the MatMul op around launch 1
    for corr, (mid, at) in enumerate(((1, 150), (1, 500), (3, 700), (4, 900)), 1):
        event(thread, mid, at, 20, correlation_id=corr)
    stream = gpu.lines.add(id=9, name="Stream #9(Compute)", timestamp_ns=1_000)
    event(stream, 1, 1_000, 50, correlation_id=1, tf_op="model/dense/MatMul:MatMul",
          kernel_details="regs:32 shm:0 grid:1,1,1 block:32,1,1")
    event(stream, 2, 2_000, 40, correlation_id=2, hlo_op="dot_add_fusion.3")
    event(stream, 3, 3_000, 30, correlation_id=3, memcpy_details="size:4096 async:1")
    event(stream, 4, 4_000, 20, correlation_id=4, memset_details="num_bytes:64 async:1")
    return space


def test_handmade_gpu_space(tmp_path):
    path = tmp_path / "hand.xplane.pb"
    path.write_bytes(_handmade_space().SerializeToString())
    ev = load(path).events
    dev = ev[ev["kind"].isin(["kernel", "memcpy", "memset"])].sort_values("ts_ns")
    assert dev["kind"].astype(str).tolist() == ["kernel", "kernel", "memcpy", "memset"]
    assert dev["bytes"].tolist() == [-1, -1, 4096, 64]
    assert dev["op"].astype(str).tolist()[:2] == ["MatMul", "dot_add_fusion"]
    assert dev["launch_api"].astype(str).tolist() == [
        "cuLaunchKernel", "cuLaunchKernel", "cuMemcpyDtoDAsync", "cuMemsetD8Async"]
    assert dev["launch_delay_ns"].tolist() == [1_000 - 170, 2_000 - 520, 3_000 - 720,
                                               4_000 - 920]
    assert dev["details"].astype(str).tolist()[0] == "regs:32 shm:0 grid:1,1,1 block:32,1,1"
    assert set(dev["step"]) == {4}
    assert ev.loc[ev["kind"] == "op", "name"].astype(str).tolist() == ["MatMul"]


def test_bert_span_is_per_gpu_step(bert):
    """Steps marked per GPU scope their own GPU: span = Σ of the Steps lines, busy = the
    union of each GPU's step-0 work, both counted from the protobuf."""
    space, trace = bert
    from traceviz.algos.intervals import union_length
    from traceviz.analyses import summarize

    windows = {int(p.name.rsplit(":", 1)[1]): ((line.timestamp_ns * 1000 + e.offset_ps) // 1000,
                                                e.duration_ps // 1000)
               for p, line, e, _n, _st in _events(space, lambda n: n.startswith("/device:"))
               if line.name == "Steps"}
    s = summarize(trace)
    assert s.span_ns == sum(d for _, d in windows.values())
    busy = 0
    for device, (w_start, w_dur) in windows.items():
        # the step's work: rows tagged group 0, and untagged rows inside the window
        mine = [r for r in _raw_device_rows(space) if r["device"] == device and (
            r["stats"].get("group_id") == 0 or ("group_id" not in r["stats"]
                                                and w_start <= r["ts"] < w_start + w_dur))]
        start = np.array([r["ts"] for r in mine], dtype=np.int64)
        busy += union_length(start, start + np.array([r["dur"] for r in mine]))
    assert s.busy_ns == busy
    assert [d.device for d in s.devices] == [4, 6]


def _plane(space, name: str, stats: tuple[str, ...], events: tuple[str, ...]):
    plane = space.planes.add(name=name)
    for sid, stat in enumerate(stats, 1):
        plane.stat_metadata[sid].id, plane.stat_metadata[sid].name = sid, stat
    for mid, event in enumerate(events, 1):
        plane.event_metadata[mid].id, plane.event_metadata[mid].name = mid, event
    return plane


def _add(plane, line, name: str, offset_ns: int, dur_ns: int, **stats):
    mid = next(k for k, md in plane.event_metadata.items() if md.name == name)
    e = line.events.add(metadata_id=mid, offset_ps=offset_ns * 1000, duration_ps=dur_ns * 1000)
    for key, value in stats.items():
        sid = next(k for k, sm in plane.stat_metadata.items() if sm.name == key)
        s = e.stats.add(metadata_id=sid)
        if isinstance(value, str):
            s.str_value = value
        else:
            s.int64_value = value


def test_tpu_planes_are_device_rows(tmp_path):
    """A TPU profile (JAX/TF on TPU): /device:TPU:N planes' "XLA Ops" line becomes kernel
    rows, its "Steps" line the steps; no host call launches them, so the idle time of
    the TPU is not split into host wait and queued idle. Not a CPU trace."""
    space = xspace_class()()
    ops = ("fusion.12", "convolution.3", "convert.7", "all-reduce.2", "copy.4", "1", "2")
    tpu = _plane(space, "/device:TPU:0", ("group_id", "tf_op"), ops)
    steps = tpu.lines.add(id=1, name="Steps", timestamp_ns=1_000_000)
    xla = tpu.lines.add(id=2, name="XLA Ops", timestamp_ns=1_000_000)
    tpu.lines.add(id=3, name="XLA Modules", timestamp_ns=1_000_000)  # derived: skipped
    _add(tpu, steps, "1", 0, 1_000, group_id=1)
    _add(tpu, steps, "2", 1_000, 1_000, group_id=2)
    for step in (0, 1):
        base = 1_000 * step
        for name, at, dur in (("fusion.12", 10, 100), ("convolution.3", 120, 400),
                              ("convert.7", 530, 50), ("all-reduce.2", 590, 200),
                              ("copy.4", 800, 30)):
            _add(tpu, xla, name, base + at, dur, group_id=step + 1)
    _plane(space, "/host:CPU", (), ())
    path = tmp_path / "tpu.xplane.pb"
    path.write_bytes(space.SerializeToString())
    t = load(path)
    assert not t.is_cpu
    k = t.kernels()
    assert len(k) == 10 and set(k["device"]) == {0}
    cats = dict(zip(k["name"].astype(str), k["category"].astype(str), strict=False))
    assert cats == {"fusion.12": "elementwise", "convolution.3": "gemm", "convert.7": "cast",
                    "all-reduce.2": "communication", "copy.4": "elementwise"}
    s = summarize_of(t)
    assert s.scope == "steps" and s.steps == 2
    assert s.busy_ns == 2 * (100 + 400 + 50 + 200 + 30)
    assert s.span_ns == 2_000 and s.host_wait_ns is None and s.launch_bound_fraction is None
    assert s.casts.count == 2 and s.casts.total_ns == 100


def summarize_of(t):
    from traceviz.analyses import summarize

    return summarize(t)


def test_rocm_launch_calls_keep_their_recorded_names(tmp_path):
    """ROCm's tracer names host events after the API (hipModuleLaunchKernel,
    hipMemcpyDtoDAsync): kept as recorded, not renamed to CUDA's; a runtime call that
    launches nothing (hipStreamWaitEvent) is not a launch even when it carries an id."""
    space = xspace_class()()
    host = _plane(space, "/host:CPU", ("correlation_id",),
                  ("hipModuleLaunchKernel", "hipMemcpyDtoDAsync", "hipStreamWaitEvent"))
    gpu = _plane(space, "/device:GPU:0", ("correlation_id", "memcpy_details"),
                 ("loop_add_fusion.kd", "Memcpy"))
    thread = host.lines.add(id=5, name="Host Threads/5", timestamp_ns=1_000)
    _add(host, thread, "hipModuleLaunchKernel", 0, 10, correlation_id=1)
    _add(host, thread, "hipMemcpyDtoDAsync", 20, 10, correlation_id=2)
    _add(host, thread, "hipStreamWaitEvent", 40, 5, correlation_id=3)
    stream = gpu.lines.add(id=9, name="Stream #9(Kernel)", timestamp_ns=1_000)
    _add(gpu, stream, "loop_add_fusion.kd", 100, 50, correlation_id=1)
    _add(gpu, stream, "Memcpy", 200, 50, correlation_id=2,
         memcpy_details="kind:Unknown size:4096 dest:0 async:1")
    _add(gpu, stream, "loop_add_fusion.kd", 300, 50, correlation_id=3)
    path = tmp_path / "rocm.xplane.pb"
    path.write_bytes(space.SerializeToString())
    ev = load(path).events
    rt = ev[ev["kind"] == "runtime"].sort_values("ts_ns")
    assert rt["name"].astype(str).tolist() == ["hipModuleLaunchKernel", "hipMemcpyDtoDAsync",
                                               "hipStreamWaitEvent"]
    assert (rt["launch_id"] >= 0).tolist() == [True, True, False]
    dev = ev[ev["kind"].isin(["kernel", "memcpy"])].sort_values("ts_ns")
    assert dev["launch_api"].tolist()[:2] == ["hipModuleLaunchKernel", "hipMemcpyDtoDAsync"]
    assert dev["launch_ts_ns"].isna().tolist() == [False, False, True]
    assert dev["category"].astype(str).tolist() == ["elementwise", "memcpy", "elementwise"]
