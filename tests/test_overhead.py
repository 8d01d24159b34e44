"""The profiler's overhead is one figure everywhere: the steady profiled step (the first
profiled step, which holds the profiler's start-up, left out) over the timed median, in
bench.json, analyze (its bench line, its step line, --json's timings and timed_step),
advise, the critical path and the report; "within noise" only where it is.

Every expected figure is computed here from the raw inputs: bench.json's lists and the
Kineto JSON's ProfilerStep marks, read with json alone."""

from __future__ import annotations

import gzip
import json
import shutil
import statistics

import numpy as np
import pytest

from tests.conftest import H200, ROOT, needs, shared
from traceviz.cli import main
from traceviz.runners.benchdefs import profiler_overhead
from traceviz.runners.capture_protocol import Phases, bench_figures, step_bench


def _json(capsys, *argv: str) -> dict:
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def _noise(steady: float, times: list[float]) -> str:
    """The verdict recomputed with numpy: "within noise" only inside the timed range and
    within 3 scaled median absolute deviations (1.4826 MAD) of the timed median."""
    t = np.asarray(times)
    med = np.median(t)
    band = 3 * 1.4826 * np.median(np.abs(t - med))
    inside = t.min() <= steady <= t.max() and abs(steady - med) <= band
    return "within noise" if inside else f"{steady / med:.2f}x"


def _marks_ms(folder) -> list[float]:
    """The ProfilerStep marks' lengths in ms, in step order, from the raw Kineto JSON."""
    with gzip.open(folder / "trace.pt.trace.json.gz") as f:
        events = json.load(f)["traceEvents"]
    marks = sorted((e["ts"], e["dur"]) for e in events
                   if e.get("ph") == "X" and e.get("cat") == "user_annotation"
                   and str(e.get("name", "")).startswith("ProfilerStep#"))
    return [d / 1e3 for _, d in marks]


def test_the_definition_leaves_the_start_up_step_out():
    timed = [0.010, 0.011, 0.012, 0.009]
    o = profiler_overhead([0.500, 0.013, 0.015], timed)
    assert o["profiled_time_per_batch_s"] == pytest.approx(0.014)
    assert o["profiler_overhead"] == pytest.approx(0.014 / 0.0105)
    assert o["profiler_overhead_significant"]  # 14 ms lies above the 9-12 ms range
    o = profiler_overhead([0.500, 0.0115], timed)
    assert not o["profiler_overhead_significant"]
    # only the start-up step, or too few timed steps: no figure
    assert profiler_overhead([0.5], timed) == {} and profiler_overhead([0.5, 0.1], [0.1]) == {}


def test_bench_json_of_a_run_and_of_a_script_carries_the_one_figure():
    prof = [0.250, 0.021, 0.023, 0.022]
    times = [0.020, 0.019, 0.020, 0.021, 0.019]
    b = bench_figures(Phases(times, sum(times), prof, [0.5, 0.02, 0.02], True), batch=8)
    steady = statistics.median(prof[1:])
    assert b["profiled_batch_times_s"] == prof
    assert b["profiled_time_per_batch_s"] == steady
    assert b["profiler_overhead"] == pytest.approx(steady / statistics.median(times))
    assert b["profiler_overhead_significant"] == (_noise(steady, times) != "within noise")
    s = step_bench({"warmup": [0.3], "profiled": prof, "timed": times}, "optimizer.step")
    assert {k: s[k] for k in ("profiled_time_per_batch_s", "profiler_overhead")} == \
        {k: b[k] for k in ("profiled_time_per_batch_s", "profiler_overhead")}
    # a script that ran no step after the profiled ones: its profiled steps stand in for
    # the timed ones, and there is no overhead to tell
    s = step_bench({"warmup": [0.3], "profiled": prof, "timed": []}, "optimizer.step")
    assert "profiler_overhead" not in s


def test_one_slow_timed_batch_does_not_make_an_overhead_noise(capsys, tmp_path):
    """A real jit_torch fp16 train capture whose first timed batch took 1.14 s against a
    97 ms median: its range held the steady profiled step (2.33x the median, from the
    trace's steps), which read "within noise"; the timed batches' own spread does not."""
    run = ROOT / "sample_traces" / "gpu" / "jit_torch-fp16" / "train"
    times = json.loads((run / "bench.json").read_text())["batch_times_s"]
    assert max(times) / statistics.median(times) == pytest.approx(11.87, abs=0.01)
    out = _json(capsys, "analyze", str(run), "--json")["timings"]
    steady = out["profiled_step_s"]
    assert min(times) <= steady <= max(times)  # inside the range the old rule read
    assert out["profiler_overhead"] == pytest.approx(steady / statistics.median(times))
    assert out["profiler_overhead"] == pytest.approx(2.33, abs=0.01)
    assert out["overhead_significant"] and _noise(steady, times) == "2.33x"
    assert main(["analyze", str(run)]) == 0
    printed = capsys.readouterr().out
    assert printed.count("profiler overhead 2.33x") == 2 and "within noise" not in printed
    # a real bench.json with one timed batch made slow (8x the median) and profiled steps
    # 6.5x the median: the range holds them, the spread does not
    bench = json.loads(shared(H200 / "fused_torch" / "bench.json").read_text())
    times = list(bench["batch_times_s"])
    med = statistics.median(times)
    times[4] = 8 * med
    o = profiler_overhead([0.5, 6.4 * med, 6.5 * med, 6.6 * med], times)
    assert o["profiler_overhead"] == pytest.approx(6.5 * med / statistics.median(times))
    assert o["profiler_overhead"] > 6.4 and o["profiler_overhead_significant"]
    # a step inside the batches' own spread is noise: the median's neighbour
    near = sorted(times)[4]
    assert not profiler_overhead([0.5, near, near], times)["profiler_overhead_significant"]


@pytest.mark.parametrize("run", ["compile_full_torch", "fine_torch"])
def test_every_output_gives_the_same_overhead(run, capsys, tmp_path):
    """An older bench.json (no profiled step times): the trace's steps stand in, the
    first left out; analyze, advise, critical-path and report give the same figure."""
    folder = shared(H200 / run)
    bench = json.loads((folder / "bench.json").read_text())
    times = bench["batch_times_s"]
    steady = statistics.median(_marks_ms(folder)[1:]) / 1e3  # seconds
    want = steady / statistics.median(times)
    text = _noise(steady, times)

    out = _json(capsys, "analyze", str(folder), "--json")
    assert out["timings"]["profiler_overhead"] == pytest.approx(want, rel=0.02)
    assert out["timings"]["profiled_from"] == "trace steps"
    assert out["timed_step"]["profiler_overhead"] == out["timings"]["profiler_overhead"]
    assert main(["analyze", str(folder)]) == 0
    printed = capsys.readouterr().out
    assert printed.count(f"profiler overhead {text}") == 2  # the step line, the bench line
    assert "within noise" not in printed or text == "within noise"
    cp = _json(capsys, "analyze", str(folder), "--critical-path", "--json")["critical_path"]
    assert cp["profiler_overhead"] == out["timings"]["profiler_overhead"]
    assert main(["advise", str(folder)]) == 0
    assert f"profiler overhead {text}" in capsys.readouterr().out
    report = tmp_path / "report.md"
    assert main(["report", str(folder), "-o", str(report)]) == 0
    capsys.readouterr()
    md = report.read_text()
    assert md.count(f"| {text} |") >= 2 and "within noise" not in md.replace(
        f"| {text} |", "")


def test_a_bench_json_with_profiled_times_is_read_before_the_trace(capsys, tmp_path):
    """A run folder whose bench.json keeps its profiled step times (every capture now):
    the overhead is bench.json's, whatever the trace's step windows say."""
    src = shared(H200 / "compile_full_torch")
    run = tmp_path / "run"
    run.mkdir()
    for name in ("trace.pt.trace.json.gz", "config.json", "meta.json"):
        shutil.copy(src / name, run / name)
    bench = json.loads((src / "bench.json").read_text())
    times = bench["batch_times_s"]
    prof = [0.2, statistics.median(times) * 3, statistics.median(times) * 3.2]
    bench |= {"profiled_batch_times_s": prof, **profiler_overhead(prof, times)}
    (run / "bench.json").write_text(json.dumps(bench))
    out = _json(capsys, "analyze", str(run), "--json")
    assert out["timings"]["profiled_from"] == "bench"
    assert out["timings"]["profiler_overhead"] == pytest.approx(3.1)
    assert out["timed_step"]["steady_profiled_step_ns"] == pytest.approx(
        statistics.median(prof[1:]) * 1e9)


@pytest.mark.capture
def test_a_tiny_cpu_capture_says_one_figure(tmp_path, capsys):
    needs("torch")
    out = tmp_path / "run"
    assert main(["capture", "--model", "cudnn_torch", "--device", "cpu", "--batch", "2",
                 "--seq", "4", "--hidden", "8", "--layers", "1", "--embed", "8",
                 "--vocab", "50", "--profile-steps", "3", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    bench = json.loads((out / "bench.json").read_text())
    prof, times = bench["profiled_batch_times_s"], bench["batch_times_s"]
    assert len(prof) == 3
    steady = statistics.median(prof[1:])
    want = steady / statistics.median(times)
    assert bench["profiler_overhead"] == pytest.approx(want)
    text = _noise(steady, times)
    # the words as printed, whichever line ends where ("within noise" may wrap)
    assert " ".join(printed.split()).count(f"profiler overhead {text}") == 2
    got = _json(capsys, "analyze", str(out), "--json")
    assert got["timings"]["profiler_overhead"] == pytest.approx(want)
    assert got["timed_step"]["profiler_overhead"] == pytest.approx(want)
