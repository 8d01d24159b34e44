"""torch.compile's compile time as each torch version reports it, and the progress a
capture shows while a compiling variant's first call compiles."""

from __future__ import annotations

import pytest

from tests.conftest import needs
from traceviz.capture import parent as capture
from traceviz.runners.torch.compile_time import from_metrics, from_phases, text_rows

# compile_times(repr="str", aggregate=True) without the tabulate package (torch 2.13)
COMMAS = """TorchDynamo compilation metrics:
Function, Runtimes (s)
_compile.compile_inner, 8.9202
compile_attempt_0, 8.8812
OutputGraph.call_user_compiler, 8.8147
compile_fx.<locals>.fw_compiler_base, 8.6172
backward._backward_impl, 1.2500
compile_file, 6.1901
"""
# the same with tabulate installed, as torch 2.1 named the frame compile
TABULATE_OLD = """TorchDynamo compilation metrics:
Function                            Runtimes (s)
--------------------------------  --------------
_compile.<locals>.compile_inner          12.3456
OutputGraph.call_user_compiler           11.0021
compile_fx.<locals>.fw_compiler_base      9.5
"""
# aggregate=False: one value per compile, comma-separated, under tabulate
TABULATE_LISTS = """TorchDynamo compilation metrics:
Function                Runtimes (s)
----------------------  ----------------
_compile.compile_inner  80.1000, 9.0000
compile_file            1.0000, 2.0000
"""


def test_text_rows_read_both_table_forms():
    rows = text_rows(COMMAS)
    assert rows["_compile.compile_inner"] == [8.9202]
    assert rows["compile_fx.<locals>.fw_compiler_base"] == [8.6172]
    assert "Function" not in rows and len(rows) == 6
    old = text_rows(TABULATE_OLD)
    assert old == {"_compile.<locals>.compile_inner": [12.3456],
                   "OutputGraph.call_user_compiler": [11.0021],
                   "compile_fx.<locals>.fw_compiler_base": [9.5]}
    assert text_rows(TABULATE_LISTS)["_compile.compile_inner"] == [80.1, 9.0]
    assert text_rows("") == {} and text_rows("TorchDynamo compilation metrics:\n") == {}


def test_compile_time_from_each_form():
    # the frame compile plus the lazily compiled backward; nested keys are not added
    assert from_metrics(text_rows(COMMAS)) == (pytest.approx(8.9202 + 1.25),
                                               ["_compile.compile_inner",
                                                "backward._backward_impl"])
    assert from_metrics(text_rows(TABULATE_OLD)) == (12.3456,
                                                     ["_compile.<locals>.compile_inner"])
    assert from_metrics(text_rows(TABULATE_LISTS))[0] == pytest.approx(89.1)
    # the dict itself: key -> seconds of each compile
    metrics = {"_compile.compile_inner": [80.0, 9.1], "compile_file": [50.0],
               "backward._backward_impl": [2.0]}
    assert from_metrics(metrics)[0] == pytest.approx(91.1)
    assert from_metrics({"compile_file": [1.0]}) == (None, [])
    assert from_metrics({"_compile.compile_inner": []}) == (None, [])
    # calculate_time_spent(): seconds per phase
    assert from_phases({"entire_frame_compile": 8.92, "entire_backward_compile": 1.5,
                        "total_wall_time": 10.42, "code_gen": 8.3}) == pytest.approx(10.42)
    assert from_phases({"entire_frame_compile": 3.0}) == 3.0
    assert from_phases({"code_gen": 1.0}) is None


def test_compile_watch_notes():
    watch = capture.CompileWatch()
    start = {"event": "compile", "state": "start", "what": "torch.compile, mode "
             "reduce-overhead", "mode": "reduce-overhead"}
    assert watch.see(start) is None and watch.see({"event": "progress"}) is None
    assert watch.interrupted().startswith("it ended while compiling (torch.compile, mode "
                                          "reduce-overhead, ")
    assert watch.interrupted().endswith(f" s); {capture.FASTER_COMPILE}")
    assert watch.see({**start, "state": "done", "seconds": 89.1}) == (
        "the first call compiled for 89.1 s (torch.compile, mode reduce-overhead); "
        "--compile-mode default (no CUDA graphs) compiles faster")
    assert watch.interrupted() is None  # compiled: nothing was cut short
    quick = capture.CompileWatch()
    quick.see(start)
    assert quick.see({**start, "state": "done", "seconds": 2.0}) is None
    plain = capture.CompileWatch()
    plain.see({**start, "what": "torch.compile, mode default", "mode": "default"})
    assert plain.see({**start, "mode": "default", "state": "done", "seconds": 99.0}) is None
    plain.see({**start, "what": "torch.compile, mode default", "mode": "default"})
    assert plain.interrupted().startswith("it ended while compiling (torch.compile, mode "
                                          "default, ")
    assert plain.interrupted().endswith(" s)")  # no CUDA graphs: no faster mode to offer


@pytest.mark.capture
def test_compile_progress_and_time_on_a_real_compile(tmp_path, monkeypatch):
    """A tiny compile_full_torch capture on the CPU: the runner reports its first call as
    the compile, the capture adds the hint of a long one, bench.json has the time the
    running torch reports beside the first call."""
    needs("torch")
    from traceviz.runners.presets import make_workload

    monkeypatch.setattr(capture, "LONG_COMPILE_S", 0.0)  # every compile counts as long
    workload, _ = make_workload("ptb_lm", "forward", "cpu", batch=2, seq=3, hidden=8,
                                layers=1, vocab=20, embed=4)
    req = capture.CaptureRequest("compile_full_torch", workload, "cpu", warmup=1,
                                 max_warmup=4, steps=2, profile_steps=1,
                                 options={"compile_mode": "reduce-overhead"})
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    events: list[dict] = []
    result = capture.run_capture(req, run_dir, events.append)
    kinds = [(e["event"], e.get("state") or e.get("phase")) for e in events
             if e["event"] in ("compile", "phase")]
    # the compile is announced before the first warm-up batch runs and ends inside it
    assert kinds[:3] == [("phase", "warmup"), ("compile", "start"), ("compile", "done")]
    start, done = (e for e in events if e["event"] == "compile")
    assert start["what"] == "torch.compile, mode reduce-overhead"
    assert done["seconds"] > 0
    notes = [e["message"] for e in events if e["event"] == "note"]
    assert f"compile_full_torch: the first call compiled for {done['seconds']:.1f} s " \
           f"(torch.compile, mode reduce-overhead); {capture.FASTER_COMPILE}" in notes
    bench = result.bench
    assert "compilation_time_metrics: _compile.compile_inner" in \
        bench["framework_compile_note"]
    # the compile happened inside the first call, which took longer than it
    assert 0 < bench["framework_compile_s"] <= done["seconds"]
    assert bench["warmup_times_s"][0] >= done["seconds"] and bench["first_call_s"] > 0
    assert bench["timing"] == "wall"


def test_compile_seconds_of_this_torch():
    """A real torch.compile here: the structured record, its text and its phase totals
    agree (the text rounds to 4 decimals)."""
    torch = needs("torch")
    from torch._dynamo import utils

    from traceviz.runners.torch.compile_time import compile_seconds

    torch._dynamo.reset()
    f = torch.compile(lambda x: torch.sin(x) * 2 + 1, dynamic=False)
    assert torch.allclose(f(torch.ones(3)), torch.sin(torch.ones(3)) * 2 + 1)
    seconds, note = compile_seconds()
    assert seconds is not None and seconds > 0
    assert note.startswith("torch._dynamo.utils.compilation_time_metrics: ")
    assert "compile_inner" in note
    text, _ = from_metrics(text_rows(utils.compile_times(repr="str", aggregate=True)))
    assert text == pytest.approx(seconds, abs=1e-3)
    assert from_phases(utils.calculate_time_spent()) == pytest.approx(seconds, rel=1e-3)
