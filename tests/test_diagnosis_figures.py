"""The diagnosis test bed's key figures of each trace, from its raw events alone (no
traceviz): what start-up is made of, what the host did while the device waited, the
figures the README gives for the traces added 2026-11-28, and why the start-up rules move
(or leave) old traces. Their verdicts are in ``tests/test_diagnosis_startup.py``.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from tests.diagnosis_events import LAUNCH, intersect, length, read, union
from tests.diagnosis_formats import OFF_CPU
from tests.diagnosis_paths import MS, raw, trace
from tests.diagnosis_startup import base


def _calls(key: str):
    """A trace's runtime calls: base names, durations, starts."""
    c = read(trace(key)).calls
    return np.array([base(n) for n in c.name], object), c.end - c.start, c.start


def test_a100_switch_moe_cold_is_lazy_module_loading():
    """One cold forward: 18 launch calls of 1 ms or more hold 685.2 ms (the first call
    of the process, a launch, 497.2 ms) where a launch takes 9 µs; start-up 708.5 of the
    810.2 ms window (87.4 %: the 18 launches, an occupancy query, cudaGetSymbolAddress,
    two cudaFree and a cudaHostAlloc), the device busy 42.7 ms."""
    names, dur, start = _calls("a100_switch_moe_cold")
    launch = np.array([bool(LAUNCH.match(n)) for n in names])
    assert (launch & (dur >= MS)).sum() == 18
    assert dur[launch & (dur >= MS)].sum() / MS == pytest.approx(685.18, abs=0.01)
    assert np.median(dur[launch]) == 9_000
    assert names[np.argmin(start)] == "cudaLaunchKernel" and dur[np.argmin(start)] / MS == \
        pytest.approx(497.23, abs=0.01)
    f = raw("a100_switch_moe_cold")
    assert f.window_ns / MS == pytest.approx(810.24, abs=0.01)
    assert f.part("startup") / MS == pytest.approx(708.55, abs=0.01)
    assert f.busy_ns / MS == pytest.approx(42.68, abs=0.01)


def test_a4000_vit_cold_is_context_streams_and_modules():
    """cudaFree (context creation) 3,977.8 ms in 4 calls, stream creation 564.3 ms, 8
    launch calls 5,549.0 ms (median launch 6 µs); the process' first call is a 2 ms copy
    (no start-up: a copy's time is the data's). Start-up 10,097.5 of 11,962.9 ms."""
    names, dur, start = _calls("a4000_vit_cold")
    launch = np.array([bool(LAUNCH.match(n)) for n in names])
    assert dur[names == "cudaFree"].sum() / MS == pytest.approx(3977.80, abs=0.01)
    assert dur[names == "cudaStreamCreateWithFlags"].sum() / MS == pytest.approx(564.35,
                                                                               abs=0.01)
    assert (launch & (dur >= MS)).sum() == 8 and np.median(dur[launch]) == 6_000
    assert dur[launch & (dur >= MS)].sum() / MS == pytest.approx(5548.99, abs=0.01)
    assert names[np.argmin(start)] == "cudaMemcpyAsync"
    f = raw("a4000_vit_cold")
    # (a 2.2 ms cudaMalloc is under 20 times the lower quartile of its 52 calls: steady)
    assert f.startup_parts == {"alloc": 3984_323_000, "create": 564_339_000,
                               "launch": 5548_987_000}
    assert (f.part("startup") / MS, f.window_ns / MS) == pytest.approx((10097.51, 11962.85),
                                                                      abs=0.01)
    assert f.busy_ns / MS == pytest.approx(16.04, abs=0.01)


def test_t4_and_gh200_wait_for_the_host_issuing_work():
    """T4: busy 7.655 of 19.279 ms, the host wait 11.11 ms (a 1.32 ms occupancy query is
    start-up); the rest is issuing work: ops 5.64, gaps under 1 ms 2.02, launch calls
    1.66, other calls 0.47. GH200: 3 steps of 16 kernels, busy 0.413 ms a step of 1.17."""
    f = raw("t4_resnet_cifar")
    assert (f.busy_ns / MS, f.window_ns / MS) == pytest.approx((7.655, 19.279), abs=0.001)
    assert (f.part("startup") + f.part("host")) / MS == pytest.approx(11.11, abs=0.005)
    waits = {c: f.part(f"wait_{c}") / MS for c in ("ops", "gaps", "launch")}
    assert waits == pytest.approx({"ops": 5.641, "gaps": 2.021, "launch": 1.657}, abs=0.001)
    assert f.causes()["launch"] == f.part("host")
    g = raw("gh200_transformer_steps")
    assert g.steps == 3 and g.kernels == 48
    assert g.busy_ns / 3 / MS == pytest.approx(0.413, abs=0.001)
    assert g.window_ns / 3 / MS == pytest.approx(1.168, abs=0.001)
    assert g.part("host") / g.window_ns == pytest.approx(0.628, abs=0.001)


@pytest.mark.parametrize("rank, comm, busy, startup, longest", [
    (0, 550.78, 573.95, 396.93, 342.98), (1, 505.26, 528.38, 450.06, 367.69)])
def test_rtx4090_tp2_ranks_wait_in_their_collectives(rank, comm, busy, startup, longest):
    """One cold TP=2 forward per rank: 19 NCCL kernels, none under other work, end with
    one all-gather of 441.5 ms; start-up (launch calls up to 343/368 ms on first use) is
    40-45 % of the window but less than the busy time: communication, not start-up."""
    key = f"rtx4090_llama_tp2_rank{rank}"
    f, ev = raw(key), read(trace(key))
    assert (f.comm_ns / MS, f.busy_ns / MS) == pytest.approx((comm, busy), abs=0.01)
    assert f.comm_exposed_ns == f.comm_ns  # 0 % overlapped
    nccl = np.array(["nccl" in n for n in ev.dev_name])
    assert nccl.sum() == 19
    assert (ev.dev_end - ev.dev_start)[nccl].max() / MS == pytest.approx(441.5, abs=0.15)
    assert f.part("startup") / MS == pytest.approx(startup, abs=0.01)
    assert f.part("startup") < f.part("busy")
    names, dur, _ = _calls(key)
    assert dur[[bool(LAUNCH.match(n)) for n in names]].max() / MS == pytest.approx(longest,
                                                                                  abs=0.01)


def _off_cpu_inside(key: str, pattern: str) -> tuple[int, int]:
    """The union of the NVTX ranges matching ``pattern`` and the main thread's time off
    the CPU inside them (the main thread: the one that makes the runtime calls)."""
    ev = read(trace(key))
    threads, counts = np.unique(ev.calls.thread, return_counts=True)
    main = threads[np.argmax(counts)]
    o, r = ev.os, ev.ranges
    off = (o.name == OFF_CPU) & (o.thread == main)
    hit = np.array([bool(re.match(pattern, str(n))) for n in r.name])
    ranges = union(r.start[hit], r.end[hit])
    return length(ranges), length(intersect(ranges, union(o.start[off], o.end[off])))


def test_llama_simulations_sleep_in_their_weight_prefetch():
    """``time.sleep`` in the simulated weight prefetch: the main thread is off the CPU
    inside ``ensure_layer_*`` for 261.9 of its 263.1 ms (demo) and 560.2 of 566.1 ms
    (real: 72.9 % of the 776.3 ms loop); the host waits off the CPU 466.3 of 506.8 ms
    (demo, window 557.0) and 559.1 of 644.6 ms (real, window 679.9)."""
    assert _off_cpu_inside("llama_demo", r"ensure_layer_\d+$") == pytest.approx(
        (263.147 * MS, 261.904 * MS), abs=0.001 * MS)
    ensure, off = _off_cpu_inside("llama_real_inference_simulation",
                                  r"ensure_layer_\d+_weights$")
    loop, _ = _off_cpu_inside("llama_real_inference_simulation", "layer_processing_simulation$")
    assert (ensure / MS, off / MS, loop / MS) == pytest.approx((566.071, 560.164, 776.337),
                                                              abs=0.001)
    assert ensure / loop == pytest.approx(0.729, abs=0.0005)
    for key, offcpu, host, window, busy in (
            ("llama_demo", 466.33, 506.84, 557.01, 24.72),
            ("llama_real_inference_simulation", 559.11, 644.57, 679.93, 18.76)):
        f = raw(key)
        assert (f.part("wait_offcpu") / MS, f.part("host") / MS, f.window_ns / MS,
                f.busy_ns / MS) == pytest.approx((offcpu, host, window, busy), abs=0.01)


def test_dlprof_lenet_is_its_context_creation():
    """The first cudaMalloc (context creation) takes 2,078.8 ms and ends 3.3 ms before
    the first launch; the window after it (46 kernels, 0.347 ms) is 5.35 ms: start-up is
    99.7 % of the window and the time before it."""
    names, dur, start = _calls("dlprof_lenet_nsys_profile")
    assert names[np.argmin(start)] == "cudaMalloc"
    f = raw("dlprof_lenet_nsys_profile")
    assert f.before_ns == dur[np.argmin(start)] and f.before_ns / MS == pytest.approx(
        2078.84, abs=0.01)
    assert f.window_ns / MS == pytest.approx(5.35, abs=0.005) and f.part("startup") == 0
    assert f.kernels == 46 and f.kernel_ns / MS == pytest.approx(0.347, abs=0.001)
    assert f.startup_share == pytest.approx(0.997, abs=0.0005)


def test_darknet_xavier_loads_weights_with_synchronous_pageable_copies():
    """3,112 synchronous cudaMemcpy (299.1 ms; 3,112 host-to-device rows, 2,712 of them
    from pageable memory), 3,117 cudaMalloc (160.1 ms), stream creation 277.8 ms (its
    first, 277.5 ms, the process' first call, before the window), one kernel; the device
    busy 60.8 of 2,722.3 ms; the host wait: untraced 2,112.8 ms (the CPU building the
    network), synchronous copies 249.7, allocation 210.3 (with creation)."""
    import sqlite3

    from tests.diagnosis_formats import exported

    names, dur, _ = _calls("darknet_xavier_report1")
    copy = names == "cudaMemcpy"
    assert copy.sum() == 3112 and dur[copy].sum() / MS == pytest.approx(299.14, abs=0.01)
    malloc = names == "cudaMalloc"
    assert malloc.sum() == 3117 and dur[malloc].sum() / MS == pytest.approx(160.15, abs=0.01)
    assert dur[names == "cudaStreamCreateWithFlags"].sum() / MS == pytest.approx(277.78,
                                                                                 abs=0.01)
    con = sqlite3.connect(exported(trace("darknet_xavier_report1")))
    kinds = dict(con.execute("select srcKind, count(*) from CUPTI_ACTIVITY_KIND_MEMCPY "
                             "where copyKind = 1 group by srcKind"))  # 1: host to device
    pageable = con.execute("select id from ENUM_CUDA_MEM_KIND where name like "
                           "'%PAGEABLE'").fetchone()[0]
    con.close()
    assert sum(kinds.values()) == 3112 and kinds[pageable] == 2712
    f = raw("darknet_xavier_report1")
    assert f.kernels == 1 and f.before_ns / MS == pytest.approx(277.55, abs=0.01)
    assert (f.busy_ns / MS, f.window_ns / MS) == pytest.approx((60.79, 2722.26), abs=0.01)
    causes = f.causes()
    assert {k: causes[k] / MS for k in ("untraced", "sync_copy", "alloc")} == pytest.approx(
        {"untraced": 2112.76, "sync_copy": 249.73, "alloc": 210.29}, abs=0.01)


@pytest.mark.parametrize("key, busy, window", [("keras_resnet_s5", 392.46, 406.03),
                                               ("keras_alexnet_s1", 157.91, 164.08)])
def test_keras_steady_steps_are_device_bound(key, busy, window):
    """ResNet-v2 (V100) and AlexNet (T4): busy 96.7 % and 96.2 % of their one step."""
    f = raw(key)
    assert (f.busy_ns / MS, f.window_ns / MS) == pytest.approx((busy, window), abs=0.01)
    assert f.part("startup") < 0.001 * f.window_ns


def test_keras_alexnet_s3tune_is_a_warm_up_step():
    """The first step (3,758.4 ms): IteratorGetNext 2,339.3 ms with the device idle
    throughout, then cuDNN's autotuning: 276 redzone_checker from the first to the last
    make a 1,373.7 ms stretch (36.6 % of the step: cold); 735 kernels (1,299.0 ms), 146
    synchronizations in the step."""
    ev, f = read(trace("keras_alexnet_s3tune")), raw("keras_alexnet_s3tune")
    assert f.steps == 1 and f.window_ns / MS == pytest.approx(3758.41, abs=0.01)
    assert f.input_ns == f.input_idle_ns and f.input_ns / MS == pytest.approx(2339.28, abs=0.01)
    assert (ev.dev_name == "redzone_checker").sum() == 276
    assert f.part("startup") / MS == pytest.approx(1373.71, abs=0.01)
    assert f.cold().tolist() == [True]
    assert f.kernels == 735 and f.kernel_ns / MS == pytest.approx(1299.02, abs=0.01)
    names, _, start = _calls("keras_alexnet_s3tune")
    inside = (start >= f.windows[0, 0]) & (start < f.windows[0, 1])
    assert (inside & np.array([n.endswith("Synchronize") for n in names])).sum() == 146


@pytest.mark.parametrize("key, first, before, startup, window", [
    # the first call of the process (context creation) 29.9 s before the first launch;
    # in the window, cudaFree 6.0 s, cudaLaunchKernel 3.1 s, cudaMalloc, streams
    ("a100_alexnet", "cudaDeviceGetStreamPriorityRange", 29927.38, 12199.58, 12920.30),
    # two launch calls of 17.8 and 17.4 ms (module loading) in a 39.9 ms window
    ("rtx3080_tiny", "cuModuleGetLoadingMode", 0, 35.20, 39.91),
    # a 1,987.7 ms stream creation, a 679.7 ms launch and 312 redzone_checker (an
    # autotuning stretch of 1,276.5 ms) in a 6.7 s window
    pytest.param("flux_gtx1650_report20", "cuStreamCreate", 0, 3943.91, 6711.31,
                 marks=pytest.mark.slow),
    # the first stream creation 6,169.2 ms before the first launch: 63.5 % of the window
    # and the start-up before it; the window itself is the host's (85 %), and its 3.6 s
    # of steady serving are what the verdict judges
    pytest.param("abacus_titanrtx_report1", "cuInit", 6169.18, 33.36, 3625.18,
                 marks=pytest.mark.slow),
])
def test_old_cold_traces_are_start_up_now(key, first, before, startup, window):
    names, _, start = _calls(key)
    f = raw(key)
    assert names[np.argmin(start)] == first
    assert (f.before_ns / MS, f.part("startup") / MS, f.window_ns / MS) == pytest.approx(
        (before, startup, window), abs=0.01)
    assert f.startup_share > 0.5 and not f.steps


def test_mi250_first_step_is_cold_and_the_second_is_empty():
    """A 6.54 ms first hipLaunchKernel makes the first step (9.29 ms) 70.4 % start-up:
    cold. The steady verdict comes from the second step alone, 49 µs without device work:
    host by the contract, from no evidence of a steady state."""
    f = raw("mi250_rocm_train")
    assert f.steps == 2 and f.cold().tolist() == [True, False]
    assert f.parts["startup"][0] / MS == pytest.approx(6.543, abs=0.001)
    assert f.parts["window"].tolist() == [9_288_291, 49_073]
    assert f.parts["busy"][1] == 0 and f.parts["host"][1] == f.parts["window"][1]


def test_h4_autotuner_frames_are_no_autotuning():
    """h4 (B200 eager decode): 376 Python frames of flashinfer/autotuner.py (375: its
    cache lookups, every forward) and torch/_inductor/runtime/autotune_cache.py (1) span
    77.8 of the 84.5 ms window; taken as autotuning marks they would make the trace
    start-up. Source locations are no range names: not marks."""
    ev, f = read(trace("h4_tracelens_b200_eager")), raw("h4_tracelens_b200_eager")
    frames = np.array(["utotun" in str(n) for n in ev.ranges.name])
    assert frames.sum() == 376
    assert all(re.search(r"\.py\(\d+\): ", n) for n in ev.ranges.name[frames])
    r = ev.ranges
    assert (r.end[frames].max() - r.start[frames].min()) / MS == pytest.approx(77.80, abs=0.01)
    assert f.window_ns / MS == pytest.approx(84.55, abs=0.01) and f.part("startup") == 0


def test_compile_full_torch_graph_launches_are_no_start_up():
    """The graphed H200 run launches its graph once a step: cudaGraphLaunch 3.17 and
    3.00 ms, 20 times the process' median call (33.8 µs) and over 1 ms. A kernel launch
    that slow is module loading; a graph launch's time grows with the graph, every step:
    not start-up (taken as start-up, both steps would be cold, 21-22 %)."""
    from tests.diagnosis_raw import run_trace

    c = read(run_trace(trace("h200_compile_full_torch"))).calls
    names, dur = np.array([base(n) for n in c.name]), c.end - c.start
    assert sorted(np.round(dur[names == "cudaGraphLaunch"] / MS, 2)) == [3.0, 3.17]
    assert np.median(dur) / 1000 == pytest.approx(33.8, abs=0.05)
    f = raw("h200_compile_full_torch")
    assert f.part("startup") == 0 and not f.cold().any()


def test_scan_jax_command_buffers_are_graph_launches():
    """XSpace names a launch call by what it launched: on scan_jax 909 of them launch 5
    to 21 kernels each (XLA's command buffers): graph launches. The first three take 8.08,
    4.20 and 4.12 ms, over 20 times their own calls' usual time (cold: the graphs'
    upload): start-up, which makes the first step cold; the verdict is the other two's."""
    from collections import Counter

    from tests.diagnosis_raw import run_trace

    ev = read(run_trace(trace("h200_scan_jax")))
    c = ev.calls
    rows = Counter(ev.dev_call[ev.dev_call >= 0].tolist())
    graph = np.array([rows[i] > 1 for i in range(len(c))])
    assert graph.sum() == 909 and min(rows[i] for i in np.flatnonzero(graph)) == 5
    assert set(c.name[graph]) == {"cuGraphLaunch"}
    assert sorted(np.round((c.end - c.start)[graph] / MS, 2))[-3:] == [4.12, 4.2, 8.08]
    f = raw("h200_scan_jax")
    assert f.steps == 3 and f.cold().tolist() == [True, False, False]
    assert f.parts["startup"].tolist()[1:] == [0, 0] and f.parts["startup"][0] / MS > 15
