"""analyze's sections as a protocol: the registry holds every key of ``--json`` in order, a
section registered from outside appears in ``to_dict`` and on the terminal at its place,
and a lazy section is computed when first read, once, and not by what does not read it."""

from __future__ import annotations

import json

import pytest
from rich.text import Text

from tests.conftest import KINETO, shared
from tests.rawref import load as raw_events
from traceviz import load
from traceviz.analyses.summary import registry
from traceviz.analyses.summary.figures import Summary, summarize
from traceviz.analyses.summary.protocol import Inputs, Section
from traceviz.cli import main
from traceviz.render.terminal import sections as renders
from traceviz.render.terminal.page import Page, section_render

TRACE = KINETO / "a100_diff_control.json.gz"

# analyze --json's top-level keys as the hand-assembled to_dict wrote them (issue 50)
JSON_KEYS = [
    "source", "trace_type", "scope", "steps", "span_ns", "busy_ns", "idle_ns",
    "host_wait_ns", "queued_idle_ns", "trace_busy_ns", "idle_fraction",
    "launch_bound_fraction", "framework_overhead_fraction", "queued_idle_fraction",
    "copy_fraction", "devices", "streams", "kernels", "bound", "step_windows", "launches", "copies",
    "graphs", "kernel_activity",
    "categories", "top_kernels", "other_kernels", "casts", "phases", "input_pipeline",
    "modules", "ranges", "range_kernels", "range_timeline", "timings",
    "timed_step", "host", "host_wait_split", "stream_overlap", "communication",
    "efficiency", "memory", "notes"]
LAZY = ["bound", "step_windows", "launches", "kernel_activity", "casts", "phases",
        "input_pipeline", "modules", "ranges", "host", "host_wait_split", "stream_overlap",
        "communication", "efficiency", "memory"]


@pytest.fixture(scope="module")
def trace():
    return load(shared(TRACE))


def test_the_registry_holds_every_json_key_in_order(trace):
    assert registry.json_keys() == JSON_KEYS
    assert list(summarize(trace, with_efficiency=True).to_dict()) == JSON_KEYS
    # without efficiency (ranks): the two sections give nothing, the rest keeps its order
    assert list(summarize(trace).to_dict()) == [
        k for k in JSON_KEYS if k not in ("efficiency", "memory")]
    assert [s.key for s in registry.sections() if s.compute is not None] == LAZY


def test_each_render_names_a_section_and_no_lazy_key_is_a_summary_attribute():
    keys = [s.key for s in registry.sections()]
    assert all(s.key in keys for s, _ in renders.renders())
    # the terminal's order, from the rows' printed places: not the JSON's
    assert [s.key for s, _ in renders.renders()] == [
        "totals", "step_windows", "kernel_tables", "phases", "input_pipeline", "modules",
        "stream_overlap", "communication", "host_wait_split", "launches", "casts", "ranges",
        "efficiency", "memory", "timings", "notes"]
    # a lazy section is the Summary attribute of its key, nothing else answers it
    fields = set(Summary.__dataclass_fields__) | {
        n for n in dir(Summary) if not n.startswith("_") and n not in LAZY}
    assert not fields & set(LAZY)
    assert all(getattr(Summary, k) is registry.section(k) for k in LAZY)


def test_a_lazy_section_is_computed_when_read_once(trace):
    s = summarize(trace, with_efficiency=True)
    assert not set(LAZY) & set(vars(s))
    casts = s.casts
    assert set(LAZY) & set(vars(s)) == {"casts"}
    assert s.casts is casts
    assert casts.count == 36  # the terminal's "36 cast kernels"
    with pytest.raises(AttributeError):
        s.no_such_section  # noqa: B018


def _memcpy_rows(i: Inputs, s: Summary) -> int:
    _memcpy_rows.calls += 1  # type: ignore[attr-defined]
    return int((i.trace.events["kind"] == "memcpy").sum())


@pytest.fixture
def memcpy_section():
    """A small real section (the trace's memcpy rows) registered in one place: its row
    (before the casts in --json, printed between the launches and the casts) and its
    terminal render beside it; taken out after the test."""
    _memcpy_rows.calls = 0  # type: ignore[attr-defined]
    memcpy = registry.register("memcpy_rows", Section(
        lambda s, top: {"memcpy_rows": s.memcpy_rows}, _memcpy_rows),
        before="casts", printed=105)

    @section_render(memcpy)
    def _render(s: Summary, page: Page) -> None:
        page.add(Text(f"memcpy rows: {s.memcpy_rows:,}"))

    yield
    registry.unregister("memcpy_rows")
    renders.unregister_render(memcpy)


def test_a_registered_section_is_in_the_json_at_its_place(trace, memcpy_section):
    raw = sum(1 for e in raw_events(shared(TRACE)) if e.get("cat") == "gpu_memcpy")
    assert raw > 0
    s = summarize(trace, with_efficiency=True)
    s.launches, s.casts  # noqa: B018  reading other sections does not compute it
    assert _memcpy_rows.calls == 0 and "memcpy_rows" not in vars(s)
    out = s.to_dict()
    keys = list(out)
    at = keys.index("memcpy_rows")
    assert keys[at - 1:at + 2] == ["other_kernels", "memcpy_rows", "casts"]
    assert out["memcpy_rows"] == raw
    assert s.section_json("memcpy_rows") == {"memcpy_rows": raw}
    s.to_dict()
    assert _memcpy_rows.calls == 1  # computed once, kept
    with pytest.raises(ValueError, match="already registered"):
        registry.register("copies2", Section(lambda s, top: {"copies": 0}, keys=("copies",)))


def test_a_section_writing_an_undeclared_key_fails(trace):
    registry.register("stray", Section(lambda s, top: {"copies": 0}))
    try:
        with pytest.raises(ValueError, match="'stray' gave copies"):
            summarize(trace).to_dict()
    finally:
        registry.unregister("stray")


def test_a_registered_section_prints_at_its_place(capsys, memcpy_section):
    """The section registered in one place (the fixture) is in analyze's --json at its
    row's place and on the terminal at its row's printed place."""
    raw = sum(1 for e in raw_events(shared(TRACE)) if e.get("cat") == "gpu_memcpy")
    assert main(["analyze", str(TRACE), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    keys = list(doc)
    assert doc["memcpy_rows"] == raw and keys[keys.index("memcpy_rows") + 1] == "casts"
    assert main(["analyze", str(TRACE), "--width", "120"]) == 0
    lines = [line.strip() for line in capsys.readouterr().out.splitlines()]
    mine = lines.index(f"memcpy rows: {raw:,}")
    launch = next(i for i, line in enumerate(lines) if line.startswith("Launch overhead"))
    cast = next(i for i, line in enumerate(lines) if line.startswith("Cast ops (AMP)"))
    assert launch < mine < cast
