"""Timings a reader can trust (issue 15): spread and the noisy flag, warm-up until times
settle, profiler overhead only above the noise, and CPU captures kept short."""

from __future__ import annotations

import json
import time

import pytest

from tests.conftest import ROOT
from traceviz.analyses.timings import timings
from traceviz.runners import benchdefs, capture_protocol
from traceviz.runners.presets import cpu_has_native, make_workload

GPU = ROOT / "sample_traces" / "gpu"


def test_spread_and_noisy_flag():
    quiet = benchdefs.spread([1.0, 1.02, 0.98, 1.01])
    assert quiet["cv"] == pytest.approx(0.01479, abs=1e-4) and not quiet["noisy"]
    assert benchdefs.spread([1.0, 1.6, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0])["noisy"]  # max/min
    wide = benchdefs.spread([1.0, 1.3, 1.0, 1.3])  # max/min 1.3, CV 13 %
    assert wide["max_over_min"] < 1.5 and wide["cv"] > 0.10 and wide["noisy"]


def test_settled_needs_the_last_three_within_the_ratio():
    assert not benchdefs.settled([0.8, 0.12])
    assert not benchdefs.settled([0.12, 0.8, 0.12, 0.12])  # 0.8 still among the last three
    assert benchdefs.settled([0.8, 0.12, 0.13, 0.12])


def test_warm_up_goes_on_until_times_settle():
    """A step whose first calls vary, as TorchScript's profiling and optimizing runs do
    (0.41, 0.96, 1.40, 0.80 s, then 0.14-0.18 s in a real jit_torch capture): the warm-up
    keeps going past the minimum until three calls agree."""
    calls = []
    # far enough apart that a busy machine's late wake-ups (tens of ms) change nothing:
    # no three of the first four within 1.5x (the closest, 0.8/0.35), then three alike
    slow = [0.15, 0.8, 0.35, 0.8]

    def step():
        calls.append(1)
        time.sleep(slow[len(calls) - 1] if len(calls) <= len(slow) else 0.1)

    times, ok = capture_protocol.warm_up(step, least=2, most=12)
    assert ok and len(times) == 7 and len(calls) == 7  # 4 varying, then 3 that agree
    times, ok = capture_protocol.warm_up(lambda: time.sleep(0.1), least=3, most=12)
    assert ok and len(times) == 3
    calls.clear()
    times, ok = capture_protocol.warm_up(step, least=2, most=3)  # bounded: not settled
    assert not ok and len(times) == 3


def test_old_runs_get_their_timings_from_batch_times():
    bench = json.loads((GPU / "jit_torch" / "train" / "bench.json").read_text())
    t = timings(bench)
    times = bench["batch_times_s"]
    assert t.max_s == max(times) and t.min_s == min(times) and t.batches == len(times)
    assert t.max_over_min > 100 and t.noisy  # the 12.9 s batch of an unsettled warm-up
    assert t.warmup_settled is None  # a run from before warm-up until settled
    cudnn = timings(json.loads((GPU / "cudnn_torch" / "train" / "bench.json").read_text()))
    assert not cudnn.noisy and cudnn.cv < 0.10


def test_profiler_overhead_counts_only_outside_the_spread():
    # the first profiled step holds the profiler's start-up: left out
    b = {"batch_times_s": [1.0, 1.1, 1.2, 0.9], "profiled_batch_times_s": [9.0, 1.15]}
    t = timings(b)
    assert t.profiler_overhead == pytest.approx(1.15 / 1.05) and not t.overhead_significant
    assert t.overhead_text == "within noise" and t.profiled_step_s == 1.15
    b["profiled_batch_times_s"] = [9.0, 1.5, 1.4]
    assert timings(b).overhead_significant and timings(b).overhead_text == "1.38x"
    assert timings({}) is None
    # only the start-up step, or an older bench.json with its median alone: unknown
    for old in ({"profiled_batch_times_s": [9.0]}, {"profiled_time_per_batch_s": 1.5}):
        t = timings({"batch_times_s": [1.0, 1.1, 1.2]} | old)
        assert t.profiler_overhead is None and t.overhead_text == "unknown"


def test_emulated_half_precision_is_capped_harder():
    avx2 = "flags\t\t: fpu sse avx2 avx512f\n"
    assert not cpu_has_native("bf16", avx2)
    assert cpu_has_native("bf16", "flags\t\t: avx2 avx512_bf16\n")
    assert cpu_has_native("fp16", "flags\t\t: amx_fp16\n")
    w, notes = make_workload("ptb_lm", None, "cpu")
    assert (w.batch, w.seq) == (16, 20)
    if not cpu_has_native("bf16"):
        w, notes = make_workload("ptb_lm", None, "cpu", amp="bf16")
        assert (w.batch, w.seq) == (8, 10) and "emulated" in notes[0]
    w, _ = make_workload("ptb_lm", None, "cpu", amp="bf16", batch=32)
    assert w.batch == 32  # an explicit size wins


def test_warm_up_progress_counts_on(capsys):
    """Extra settling batches count on (4/4, 5/5), not back to "warmup 1/3" each time."""
    from traceviz.runners.capture_protocol import warm_up

    sleeps = iter([0.001, 0.03, 0.001, 0.03, 0.001, 0.03, 0.01, 0.01, 0.01, 0.01, 0.01])
    times, ok = warm_up(lambda: time.sleep(next(sleeps)), 3, 11)
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    done = [e["done"] for e in events if e["event"] == "progress"]
    assert done == list(range(1, len(times) + 1)) and len(times) > 3
    assert all(e["total"] == max(3, e["done"]) for e in events if e["event"] == "progress")
