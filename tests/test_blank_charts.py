"""``analyze --plot`` writes no blank chart: a chart with nothing to draw (no slice, bar,
point or line) is not written and one line says why; a chart with data is written and
draws it. What a trace holds is read from the raw file by the test, not from traceviz."""

from __future__ import annotations

import gzip
import json
import sqlite3
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from tests.conftest import SHARED_TRACES, shared  # noqa: E402
from traceviz.cli import main  # noqa: E402

FOREIGN = SHARED_TRACES / "foreign"
DEEPSEEK = FOREIGN / "kineto" / "deepseek_v3_train.json"
OWLV2 = FOREIGN / "kineto" / "h7_tracelens_h100_owlv2.json.gz"
NVTX_ONLY = FOREIGN / "nsys" / "ecf_baseline.sqlite"


def _events(path: Path) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        return json.load(f)["traceEvents"]


def _raw(path: Path) -> dict:
    """What the charts could draw, from the Kineto JSON: allocator events per device
    (``[memory]`` instants) and ops with recorded input shapes (a roofline needs them)."""
    ev = _events(path)
    memory: dict[tuple, int] = {}
    for e in ev:
        if e.get("name") == "[memory]":
            key = (e["args"].get("Device Type"), e["args"].get("Device Id"))
            memory[key] = memory.get(key, 0) + 1
    shaped = sum(1 for e in ev if e.get("cat") == "cpu_op"
                 and (e.get("args") or {}).get("Input Dims"))
    kernels = sum(1 for e in ev if e.get("ph") == "X" and e.get("cat") == "kernel")
    return {"memory": memory, "shaped_ops": shaped, "kernels": kernels}


def _not_written(err: str) -> dict[str, str]:
    lines = [ln for ln in err.splitlines() if " chart not written: " in ln]
    return dict(ln.split(" chart not written: ", 1) for ln in lines)


def test_no_memory_events_and_no_shapes_no_memory_or_roofline_chart(tmp_path, capsys):
    """DeepSeek-V3: no allocator event, no op shape, 963 kernels: the pie and the launch
    chart are written; memory and roofline are not, each with its reason on one line."""
    raw = _raw(shared(DEEPSEEK))
    assert raw["memory"] == {} and raw["shaped_ops"] == 0 and raw["kernels"] == 963
    out = tmp_path / "plots"
    assert main(["analyze", str(DEEPSEEK), "--plot", str(out)]) == 0
    err = capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == [
        "kernels_pie.png", "kernels_pie.svg", "launch_overhead.png", "launch_overhead.svg"]
    why = _not_written(err)
    assert set(why) == {"memory", "roofline"}
    assert "no memory" in why["memory"] and "FLOPs" in why["roofline"]


def test_charts_with_data_are_written_and_draw_it(tmp_path, capsys):
    """OWLv2 on an H100: allocator events on the host and GPU 0, ops with shapes: every
    chart is written, the memory chart with a line per device the file records events
    for, the roofline with points."""
    from traceviz import load
    from traceviz.analyses import summarize
    from traceviz.render.charts import SUMMARY_CHARTS, summary_charts

    raw = _raw(shared(OWLV2))
    assert len(raw["memory"]) == 2 and all(n >= 2 for n in raw["memory"].values())
    assert raw["shaped_ops"] > 0
    out = tmp_path / "plots"
    assert main(["analyze", str(OWLV2), "--plot", str(out)]) == 0
    assert not _not_written(capsys.readouterr().err)
    assert sorted(p.stem for p in out.iterdir()) == sorted(2 * list(SUMMARY_CHARTS))

    charts = summary_charts(summarize(load(OWLV2), with_efficiency=True), "owlv2")
    try:
        assert set(charts.figures) == set(SUMMARY_CHARTS) and not charts.not_drawn
        lines = charts.figures["memory"].axes[0].get_lines()
        assert len(lines) == len(raw["memory"])
        assert sum(len(ln.get_xdata()) for ln in lines) == sum(raw["memory"].values())
        points = sum(len(c.get_offsets()) for c in charts.figures["roofline"].axes[0].collections)
        assert points > 0
    finally:
        for fig in charts.figures.values():
            plt.close(fig)


def test_a_trace_without_kernels_writes_no_chart_and_no_folder(tmp_path, capsys):
    """An NVTX-only Nsight export (no CUPTI kernel table, no allocator events): nothing
    to draw, so no chart and no folder, and four lines say why."""
    with sqlite3.connect(shared(NVTX_ONLY)) as db:
        tables = {r[0] for r in db.execute("select name from sqlite_master where type='table'")}
    assert "NVTX_EVENTS" in tables and not any(t.startswith("CUPTI_ACTIVITY_KIND_KERNEL")
                                               for t in tables)
    out = tmp_path / "plots"
    assert main(["analyze", str(NVTX_ONLY), "--plot", str(out)]) == 0
    assert not out.exists()
    why = _not_written(capsys.readouterr().err)
    assert set(why) == {"kernels_pie", "launch_overhead", "roofline", "memory"}


@pytest.mark.parametrize("path", [DEEPSEEK, OWLV2], ids=["deepseek", "owlv2"])
def test_blank_charts_follow_the_data(path):
    """``blank_charts`` (the renderer's decision) names exactly the charts whose data
    the raw file lacks."""
    from traceviz import load
    from traceviz.analyses import summarize
    from traceviz.render.charts import blank_charts

    raw = _raw(path)
    blank = blank_charts(summarize(load(path), with_efficiency=True))
    assert ("memory" in blank) == (not raw["memory"])
    assert ("roofline" in blank) == (raw["shaped_ops"] == 0)
    assert ("kernels_pie" in blank) == (raw["kernels"] == 0)
