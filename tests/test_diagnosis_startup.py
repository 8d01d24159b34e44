"""The diagnosis test bed's start-up and host-cause part: which moments of a window are
start-up, busy, input, queued or host, and what the host did while the device waited,
worked out from the raw events (``tests/diagnosis_startup.py``: no traceviz import).

The raw part checks the machinery on hand-made events, then pins each trace's verdict
(the 13 traces added 2026-11-28, and the old ones the new rules move; their key figures
are in ``tests/test_diagnosis_figures.py``).
The output part checks ``advise --json``'s ``bound.cause`` and ``analyze --json``'s
``host_wait_split`` against them.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from tests.conftest import shared
from tests.diagnosis_events import INPUT, LAUNCH, STEP, Events, Spans
from tests.diagnosis_paths import MS, SLOW, json_of, raw
from tests.diagnosis_raw import expected_bound, expected_cause, facts_of, verdict_windows
from tests.diagnosis_startup import BUDGET, CAUSES, base, startup_of


@pytest.fixture(scope="module")
def advise():
    return functools.partial(json_of, "advise")


@pytest.fixture(scope="module")
def analyze():
    return functools.partial(json_of, "analyze")


# ---------------------------------------------------------------- the machinery, by hand


def _events(calls, ranges=(), os=(), rows=(), steps=()) -> Events:
    """Events from ms tuples: calls/ranges/os ``(start, end, thread, name)`` (ranges with
    an op flag last), rows ``(start, end, call index)``."""
    def ns(v):
        return round(v * MS)

    c = Spans.of([(ns(s), ns(e), t, n, 0, False) for s, e, t, n in calls])
    r = Spans.of([(ns(s), ns(e), t, n, 0, op) for s, e, t, n, op in ranges])
    o = Spans.of([(ns(s), ns(e), t, n, 0, False) for s, e, t, n in os])
    start = np.array([ns(s) for s, _, _ in rows], np.int64)
    end = np.array([ns(e) for _, e, _ in rows], np.int64)
    call = np.array([i for _, _, i in rows], np.int64)
    return Events(start, end, np.zeros(len(rows), np.int64), np.ones(len(rows), bool),
                  np.array(["k"] * len(rows), object), c.end[call], r.pick(STEP),
                  r.pick(INPUT), int(sum(bool(LAUNCH.match(n)) for n in c.name)), 0,
                  None, calls=c, ranges=r, os=o, dev_call=call,
                  first_host_ns=int(min(c.start.min(), r.start.min())))


def test_start_up_calls_by_the_contract():
    """A first call of 5 ms (context creation), a launch of 2 ms among 5 µs ones, a module
    load of 1.5 ms: start-up. A 3 ms synchronization, a 4 ms copy, a 0.4 ms cuInit, a
    3 ms graph launch, a launch twice its usual time: not."""
    launches = [(10 + i / 10, 10 + i / 10 + 0.005, 0, "cudaLaunchKernel") for i in range(10)]
    ev = _events([(0, 5, 0, "cudaMalloc_v3020"), *launches, (12, 14, 0, "cudaLaunchKernel"),
                  (15, 18, 0, "cudaStreamSynchronize"), (18, 22, 0, "cudaMemcpy"),
                  (22, 23.5, 0, "cuModuleLoadData"), (23.5, 23.9, 0, "cuInit"),
                  (24, 27, 0, "cudaGraphLaunch"), (27, 27.01, 0, "cudaLaunchKernel_v7000")],
                 ranges=[(30, 40, 0, "jit_f::XlaCompile", False),
                         (41, 42, 0, "jax/_src/compiler.py(12): backend_compile", False)])
    s = startup_of(ev)
    assert s.parts == {"first_call": 5 * MS, "launch": 2 * MS, "module": 1.5 * MS,
                       "compile": 10 * MS}
    assert s.calls.tolist() == [[0, 5 * MS], [12 * MS, 14 * MS], [22 * MS, 23.5 * MS],
                                [30 * MS, 40 * MS]]
    assert base("cudaGetDeviceProperties_v2_v12000") == "cudaGetDeviceProperties"
    assert base("cudaLaunchKernel (void foo<int>(int))") == "cudaLaunchKernel"


def test_every_moment_once_and_the_host_wait_by_what_the_launching_thread_did():
    """One 100 ms step by hand: three kernels (the last under an autotuning mark), an
    input call, a compile range; the launching thread's calls, an op, a sleep, a stretch
    off the CPU; another thread's call (not the launching thread: not counted)."""
    calls = [(-5, -4.9, 0, "cudaGetDeviceCount"), (2, 5, 0, "cudaLaunchKernel"),
             (25, 28, 0, "cudaLaunchKernel"), (72, 75, 0, "cudaLaunchKernel"),
             (90, 100, 1, "cudaEventQuery")]
    ranges = [(0, 100, 0, "ProfilerStep#1", False), (30, 50, 0, "data", False),
              (60, 70, 0, "XlaCompile", False), (85, 88, 0, "GpuConvAlgorithmPicker", False),
              (20, 24.5, 0, "aten::mm", True)]
    os = [(50, 55, 0, "nanosleep"), (55, 58, 0, "[off-CPU]")]
    f = facts_of(_events(calls, ranges, os, rows=[(10, 20, 1), (40, 45, 2), (80, 90, 3)]))
    # startup: the compile [60, 70) and the autotuning stretch [85, 88) over a kernel;
    # busy: the kernels but that; input: [30, 50) but the kernel; queued: [5, 10),
    # [28, 30) and [75, 80) (the pending [30, 40) is input's); host: the rest
    assert {k: f.part(k) / MS for k in BUDGET} == {
        "startup": 13, "busy": 22, "input": 15, "queued": 12, "host": 38}
    # the host wait (idle, nothing pending: 53 ms) by cause: start-up, input, then the
    # launching thread: its launch calls 9, the op 4.5, a 0.5 ms gap (issuing work), a
    # sleep 5, off the CPU 3, untraced 2 + 2 + 2 + 10 (from the window's start to its first
    # event, [58, 60), [70, 72), after its last to the window's end)
    waits = {c: f.part(f"wait_{c}") / MS for c in CAUSES if f.part(f"wait_{c}")}
    assert waits == {"startup": 10, "input": 5, "launch": 9, "ops": 4.5, "gaps": 0.5,
                     "sleep": 5, "offcpu": 3, "untraced": 16}
    assert f.causes() == {"launch": 14 * MS, "untraced": 16 * MS, "os": 8 * MS,
                          "sync_copy": 0, "sync": 0, "alloc": 0}
    assert expected_cause(f) == {"untraced"}  # 16 of 38 ms: the launch group 14 is 5 %
    # the only step is cold (start-up 13 %), but within BORDER of COLD_MIN: taken warm too,
    # it is the host's (38 of the 87 ms outside start-up)
    assert expected_bound(f) == {"startup", "host"}


# ---------------------------------------------------------------- the traces' verdicts

# Each trace's verdicts (and host causes) from its raw figures: the 13 traces added
# 2026-11-28, then the old traces the start-up rules move or nearly move.
VERDICTS = {
    "a100_switch_moe_cold": ({"startup"}, None),
    "a4000_vit_cold": ({"startup"}, None),
    "t4_resnet_cifar": ({"host"}, {"launch"}),
    "gh200_transformer_steps": ({"host"}, {"launch"}),
    "rtx3060_triton_attention_nocupti": ({"unknown"}, None),
    "rtx4090_llama_tp2_rank0": ({"communication", "device"}, None),
    "rtx4090_llama_tp2_rank1": ({"communication", "device"}, None),
    "llama_demo": ({"host"}, {"os"}),
    "llama_real_inference_simulation": ({"host"}, {"os"}),
    "dlprof_lenet_nsys_profile": ({"startup"}, None),
    "darknet_xavier_report1": ({"host"}, {"untraced"}),
    "keras_resnet_s5": ({"device"}, None),
    "keras_alexnet_s1": ({"device"}, None),
    "keras_alexnet_s3tune": ({"startup"}, None),
    "a100_alexnet": ({"startup"}, None),  # was host
    "rtx3080_tiny": ({"startup"}, None),  # was host
    # 58.8% start-up, 41% steady host time after it: the steady part is judged
    "flux_gtx1650_report20": ({"host"}, {"untraced"}),
    # 6.2 s of start-up before the window, 3.6 s of serving after it: the serving is judged
    "abacus_titanrtx_report1": ({"host"}, {"untraced"}),
    # its first step cold, its second a 49 us window with no device work: no steady step
    "mi250_rocm_train": ({"startup"}, None),
    "h4_tracelens_b200_eager": ({"host"}, {"launch"}),  # autotuner frames are no marks
    "h200_compile_full_torch": ({"device"}, None),  # graph launches are no start-up
    # its first three graph launches (8, 4, 4 ms against 0.16 ms) upload the graphs
    "h200_scan_jax": ({"device"}, None),
    "h2_param_2080ti_resnet": ({"input"}, None),  # 16 % start-up inside its span
}
NEW = list(VERDICTS)[:14]


def _param(key: str):
    return pytest.param(key, id=key, marks=[pytest.mark.slow] if key in SLOW else [])


@pytest.mark.parametrize("key", [_param(k) for k in VERDICTS])
def test_verdict_of_the_raw_events(key):
    f = raw(key)
    bound, cause = VERDICTS[key]
    assert expected_bound(f) == bound, (key, f.startup_share, int(f.cold().sum()))
    if cause is not None:
        assert expected_cause(f) == cause, (key, f.causes(verdict_windows(f)))


# ---------------------------------------------------------------- the output part

# every trace above with device rows (the one without kernel records has no split)
SPLIT = [_param(k) for k, (bound, _) in VERDICTS.items() if bound != {"unknown"}]
CAUSED = [_param(k) for k, (_, cause) in VERDICTS.items() if cause is not None]
# Without steps, traceviz's window is this test's (the device's first launch call to its
# last row's end): the budget's parts agree to 0.1 % of the windows' total (µs timestamps
# rounded differently). With steps, traceviz runs a step to the next one's start and the
# last to its device rows' end, the raw windows are the step ranges: 2 % (gh200's gaps
# between steps: 1.4 %).
WINDOW_TOL = {False: 0.001, True: 0.02}
# A host-wait cause: the 1 ms line between "gaps" (issuing work) and "untraced" falls on
# a stretch by its length, measured between a thread's recorded events, which a window's
# or a step's edge may cut differently: 5 % of the host wait (measured: 3.3 % at most).
CAUSE_TOL = 0.05


def _finding(out: dict, rule: str) -> dict:
    found = [x for x in out["findings"] if x["rule"] == rule]
    assert found, f"no {rule} finding: {[x['rule'] for x in out['findings']]}"
    return found[0]


@pytest.mark.parametrize("key", CAUSED)
def test_host_cause_is_the_raw_one(key, advise):
    """A host verdict names its cause (``bound.cause``, the host_bound finding's
    ``figures.cause``): the largest group of the raw host wait."""
    out = advise(key)
    bound = out["bound"]
    assert bound["by"] == "host", (key, bound)
    assert bound.get("cause") in expected_cause(raw(key)), (key, bound, raw(key).causes())
    assert _finding(out, "host_bound")["figures"].get("cause") == bound["cause"]


def _split(key: str, analyze) -> dict:
    split = analyze(key).get("host_wait_split")
    assert split is not None, f"{key}: analyze --json has no host_wait_split"
    return split


@pytest.mark.parametrize("key", SPLIT)
def test_host_wait_split_budget(key, analyze):
    """``host_wait_split.budget``: every device's windows split into start-up, busy,
    input, queued and host, summed; and the start-up before the first window."""
    f, split = raw(key), _split(key, analyze)
    total = sum(f.totals[f"{k}_ns"] for k in BUDGET)
    tol = WINDOW_TOL[bool(f.steps)] * total
    got = {k: split["budget"][f"{k}_ns"] for k in BUDGET}
    assert got == pytest.approx({k: f.totals[f"{k}_ns"] for k in BUDGET}, abs=tol), key
    assert split["startup"]["before_windows_ns"] == pytest.approx(f.totals["before_ns"], abs=tol)


@pytest.mark.parametrize("key", SPLIT)
def test_host_wait_split_causes(key, analyze):
    """``host_wait_split.causes``: the host wait (the device idle, nothing pending) by
    cause, adding up to ``host_wait_ns``."""
    f, split = raw(key), _split(key, analyze)
    wait = f.totals["host_wait_ns"]
    total = sum(f.totals[f"{k}_ns"] for k in BUDGET)
    assert split["host_wait_ns"] == pytest.approx(wait, abs=WINDOW_TOL[bool(f.steps)] * total)
    got = {c: split["causes"].get(c, {}).get("ns", 0) for c in CAUSES}
    assert sum(got.values()) == split["host_wait_ns"]
    assert set(split["causes"]) <= set(CAUSES)
    assert got == pytest.approx({c: f.totals[c] for c in CAUSES}, abs=CAUSE_TOL * wait), key


def test_tp2_folder_is_one_run():
    """``advise`` on the TP=2 folder (being built): its verdict must be one both ranks
    allow (each rank waits in its collectives)."""
    from tests.diagnosis_paths import FOREIGN, TP2, allowed_bound, cli

    folder = shared(FOREIGN / "kineto" / TP2)
    rc, out, err = cli("advise", "--json", str(folder))
    if rc:
        pytest.skip(f"advise refuses a folder of rank traces (not built yet): {err.strip()}")
    import json

    by = json.loads(out)["bound"]["by"]
    ranks = [allowed_bound(f"{TP2}_rank{r}", raw(f"{TP2}_rank{r}")) for r in (0, 1)]
    assert by in ranks[0] & ranks[1], (by, ranks)
