"""A CPU run reads as a CPU run (issue 60): CPU ops, the host threads, GFLOP/s, no device
columns, in analyze, advise, compare, whatif and the reports; a GPU run keeps its device
words. On the committed captures: sample_traces/cpu (torch on a CPU, no device rows) and
sample_traces/gpu (an H100)."""

from __future__ import annotations

import io
import re
import shutil

import matplotlib

matplotlib.use("Agg")
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from tests.conftest import ROOT  # noqa: E402
from traceviz.analyses import summarize  # noqa: E402
from traceviz.analyses.compare.runs import run_figures  # noqa: E402
from traceviz.cli import main  # noqa: E402
from traceviz.trace import Trace  # noqa: E402
from traceviz.units import fmt_ns  # noqa: E402

S = ROOT / "sample_traces"
CPU, CPU2 = S / "cpu" / "cudnn_torch", S / "cpu" / "cell_torch"
GPU, GPU2 = S / "gpu" / "cudnn_torch" / "train", S / "gpu" / "fine_torch" / "train"
DEVICE_WORDS = ("TFLOP/s", "device's own work", "idle gaps on the device", "device times",
                "GPU projected", "tensor-core", "launch-bound", "streams")


def _out(capsys, *argv: str) -> str:
    capsys.readouterr()
    assert main([*argv, "--width", "200"]) == 0
    return capsys.readouterr().out


def _flat(text: str) -> str:
    """The text with its wrapped lines joined (a sentence reads whole)."""
    return " ".join(text.split())


def _load(run) -> Trace:
    return Trace.load(run / "trace.parquet")


def test_analyze_cpu_run_in_cpu_words_and_gflops(capsys):
    out = _out(capsys, "analyze", str(CPU))
    for word in DEVICE_WORDS:
        assert word not in out, word
    assert re.search(r"bound by +the CPU ops' own work on the host threads: the CPU ops "
                     r"fill 77\.5% of the span", out)
    assert "Efficiency: op groups (name and shapes) by CPU op time" in out
    table = out[out.index("Efficiency:"):out.index("prec:")]
    assert "% of" not in table and "bound" not in table  # no peak for a CPU: no dashes
    # each group's rate in GFLOP/s: its FLOPs over its time (FLOP per ns = GFLOP/s)
    e = summarize(_load(CPU), with_efficiency=True).efficiency
    assert e is not None and e.cpu
    addmm = e.groups[e.groups["op"].astype(str).str.endswith("addmm")].iloc[0]
    rate = addmm["flops"] / addmm["time_ns"]
    assert rate == pytest.approx(36.07, abs=0.01)
    assert re.search(rf"addmm .* {rate:.2f} +{addmm['gbps']:.2f} ", out)
    busy = e.flops / e.busy_ns
    assert f"{busy:.2f} GFLOP/s over busy time" in _flat(out)
    assert busy == pytest.approx(5.91, abs=0.01)


def test_analyze_gpu_run_keeps_device_words(capsys):
    out = _out(capsys, "analyze", str(GPU))
    assert "Efficiency: op groups (name and shapes) by device time" in out
    assert "TFLOP/s over busy time" in out and "GFLOP/s" not in out
    assert "CPU ops" not in out


def test_advise_cpu_run_names_the_host_threads(capsys):
    out = _flat(_out(capsys, "advise", str(CPU)))
    assert "What bounds the step: the CPU ops' own work on the host threads (the CPU ops " \
        "fill 77.5% of the span)" in out
    assert "1. Compute-bound: the step is as long as its CPU ops" in out
    assert "every CPU op's time scaled so that it lasts the timed step" in out
    for word in ("device", "kernel", "TFLOP/s"):
        assert word not in out, word
    out = _flat(_out(capsys, "advise", str(CPU2)))
    assert "What bounds the step: framework overhead on the host threads (54.9% of the " \
        "span is framework time outside the CPU ops)" in out
    assert "device" not in out


def test_advise_gpu_run_keeps_device_words(capsys):
    out = _out(capsys, "advise", str(GPU))
    assert "device" in out and "CPU ops" not in out and "host threads" not in out


def test_compare_cpu_runs_have_no_device_rows(capsys):
    out = _out(capsys, "compare", str(CPU), str(CPU2))
    for word in DEVICE_WORDS + ("GPU", "API calls", "kernel"):
        assert word not in out, word
    assert "Runs side by side (CPU op times per profiled step)" in out
    assert "Biggest CPU op differences (per step)" in out
    a, b = run_figures(_load(CPU), "a"), run_figures(_load(CPU2), "b")
    gflops = [f.model_tflops * 1e3 for f in (a, b)]
    assert gflops == [pytest.approx(18.97, abs=0.01), pytest.approx(5.07, abs=0.01)]
    assert re.search(rf"model GFLOP/s \(workload FLOPs / median\) +{gflops[0]:.2f} +"
                     rf"{gflops[1]:.2f}", out)
    assert re.search(r"framework overhead, 1 - busy/span +22\.5% +54\.9%", out)
    assert re.search(r"\n  CPU ops +13 +252", out)


def test_compare_gpu_runs_keep_device_words(capsys):
    out = _out(capsys, "compare", str(GPU), str(GPU2))
    assert "Runs side by side (device times per profiled step)" in out
    assert "model TFLOP/s" in out and "tensor-core share" in out
    assert "Biggest kernel differences" in out


def test_whatif_cpu_run_in_cpu_words(capsys):
    out = _flat(_out(capsys, "whatif", str(CPU)))
    assert "the host time between CPU ops (framework overhead) shrinks 2x" in out
    assert "work ops" not in out


def test_markdown_report_of_cpu_runs_has_no_device_columns(tmp_path):
    md = tmp_path / "r.md"
    assert main(["report", str(CPU), str(CPU2), "-o", str(md)]) == 0
    text = md.read_text()
    for word in DEVICE_WORDS + ("host: API calls", "queued idle"):
        assert word not in text, word
    assert "| model GFLOP/s |" in text and "| 18.97 |" in text and "| 5.07 |" in text
    assert "| CPU ops/step |" in text
    assert "the CPU ops&#x27; own work on the host threads" in text
    # no column is dashes only: every column of every table holds a figure
    for table in re.findall(r"((?:^\|.*\|\n)+)", text, re.M):
        rows = [r.strip("|").split(" | ") for r in table.strip().splitlines()]
        body = rows[2:]
        for j in range(1, len(rows[0])):
            assert any(r[j].strip() != "–" for r in body), (rows[0][j], table)


def test_markdown_report_of_gpu_runs_keeps_device_columns(tmp_path):
    md = tmp_path / "r.md"
    assert main(["report", str(GPU), str(GPU2), "-o", str(md)]) == 0
    text = md.read_text()
    assert "model TFLOP/s" in text and "launch-bound (waiting for host)" in text
    assert "tensor-core share" in text and "GFLOP/s" not in text


def test_html_tables_drop_dash_columns_and_empty_tables():
    from traceviz.render.report.report_section import shown_table

    df = pd.DataFrame({"run": ["a", "b"], "x": ["1 ms", "–"], "y": ["–", "–"]})
    assert list(shown_table(df).columns) == ["run", "x"]
    assert shown_table(df[["run", "y"]]) is None and shown_table(None) is None


def test_html_html_tables_count_from_one_in_terminal_units():
    """The kernels and ranges tables: a "#" column from 1 (no index from 0), times as
    fmt_ns writes them (sorted by the number), no GPU columns for a CPU run's ranges."""
    from traceviz.render.report.kernel_tables import bokeh_module, kernels_table
    from traceviz.render.report.range_tracks import ranges_parts

    s = summarize(_load(CPU))
    table = kernels_table(0, s).children[1]
    data = table.source.data
    assert table.index_position is None and data["rank"][:3] == [1, 2, 3]
    assert data["total_text"][0] == fmt_ns(s.kernels["total_ns"].iloc[0]) == "3.990 ms"
    assert data["total"][0] == int(s.kernels["total_ns"].iloc[0])
    assert table.columns[1].title == "CPU op (hover: full name)"
    ranges = ranges_parts(0, "cpu", s)[0]
    titles = [c.title for c in ranges.columns]
    assert titles[0] == "#" and "GPU projected" not in titles and "kernel time" not in titles
    assert ranges.source.data["total_text"][0] == "8.582 ms"
    assert isinstance(ranges, bokeh_module("bokeh.models").DataTable)
    g = ranges_parts(0, "gpu", summarize(_load(GPU)))
    if g:  # a GPU run's ranges that launched device work keep their device columns
        assert "GPU projected" in [c.title for c in g[0].columns]


def test_cpu_timeline_draws_the_host_threads_ops():
    from traceviz.analyses.timeline import step_rows
    from traceviz.analyses.work import work_rows

    t = _load(CPU)
    tl = step_rows(t, 1 << 30)
    work = work_rows(t)
    end = work["ts_ns"] + work["dur_ns"]
    inside = int(((end > tl.start_ns) & (work["ts_ns"] < tl.end_ns)).sum())
    assert tl.cpu and tl.rows_in_step == len(tl.rows) == inside == 13
    assert set(tl.rows["track"]) == {f"thread {int(work['tid'].iloc[0])}"}
    assert (tl.rows["shapes"] != "").sum() >= 10  # the ops' own recorded shapes
    assert not step_rows(_load(GPU), 1 << 30).cpu


@pytest.mark.requires(shutil.which("chromium") is None,
                      "needs headless Chromium (.ci/run installs Debian's chromium)")
def test_html_report_of_a_cpu_run_draws_its_timeline(tmp_path):
    from tests.test_charts_report import _chromium
    from traceviz.render.report.html_page import check_json

    html = tmp_path / "report.html"
    assert main(["report", str(CPU), "-o", str(html)]) == 0
    page = html.read_text()
    assert "no device rows: no timeline" not in page
    for word in ("GPU projected", "TFLOP/s", "Device time per category"):
        assert word not in page, word
    assert "the host threads&#x27; CPU ops" in page or "the host threads' CPU ops" in page
    checks = check_json(_chromium("--dump-dom", html.as_uri()).stdout)
    assert checks is not None
    assert checks[0]["kernels_in_step"] == checks[0]["kernel_bars"] == 13
    assert checks[0]["first_name"].startswith("aten::")


def test_roofline_labels_do_not_overlap():
    from traceviz.render.roofline import roofline_chart

    for run, unit in ((GPU, "TFLOP/s"), (CPU, "GFLOP/s")):
        e = summarize(_load(run), with_efficiency=True).efficiency
        fig = roofline_chart(e, "run")
        ax = fig.axes[0]
        assert ax.get_ylabel() == f"achieved {unit}"
        fig.canvas.draw()
        r = fig.canvas.get_renderer()
        boxes = [a.get_window_extent(r) for a in ax.texts if a.get_text()[0].isdigit()
                 and "\n" not in a.get_text()]
        assert len(boxes) >= 3
        for i, a in enumerate(boxes):
            for b in boxes[i + 1:]:
                assert not a.overlaps(b)


def test_pie_is_a_modest_size():
    from traceviz.render.charts import kernel_pie
    from traceviz.render.report.report_section import figure_png, png_width

    fig = kernel_pie(summarize(_load(CPU)), "cpu")
    assert tuple(fig.get_size_inches()) == (7.5, 3.6)
    png = figure_png(fig)
    assert 600 <= png_width(png) <= 900  # at 110 dpi, cropped to what it draws
    buf = io.BytesIO(png)
    assert buf.read(8) == b"\x89PNG\r\n\x1a\n"
