"""Charts and reports as a user sees them (issue 15): bars within their span, runs named,
no empty panels, AMP parts labelled by sign, human numbers, ticks apart, a terminal at a
fixed width, PNGs opened, and the HTML report screenshotted by headless Chromium."""

from __future__ import annotations

import io
import re
import shutil
import subprocess
from itertools import combinations

import matplotlib

matplotlib.use("Agg")
import matplotlib.image  # noqa: E402
import matplotlib.pyplot  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from rich.console import Console  # noqa: E402

from tests.conftest import ROOT  # noqa: E402
from tests.handmade import step_trace  # noqa: E402
from traceviz.analyses import summarize  # noqa: E402
from traceviz.analyses.compare.amp_breakdown import amp_breakdown  # noqa: E402
from traceviz.analyses.compare.runs import run_figures  # noqa: E402
from traceviz.cli import main  # noqa: E402
from traceviz.render import charts  # noqa: E402
from traceviz.render.terminal.runs_view import amp_rows  # noqa: E402
from traceviz.render.terminal.summary import print_summary  # noqa: E402
from traceviz.trace import Trace  # noqa: E402

S = ROOT / "sample_traces"
RUNS = {"cpu": S / "cpu" / "cudnn_torch", "gpu": S / "gpu" / "cudnn_torch" / "train",
        "gpu-bf16": S / "gpu" / "cudnn_torch-bf16" / "train",
        "tf-threads": S / "tf" / "generic_tf"}  # TF's CPU ops overlap on several threads


def _figs():
    return [run_figures(Trace.load(p / "trace.parquet"), label) for label, p in RUNS.items()]


def test_category_bars_stay_within_the_span():
    figs = _figs()
    tf = figs[-1]
    assert sum(tf.category_ns.values()) > tf.busy_ns  # summed kernel time overlaps itself
    fig = charts.category_bars(figs)
    ax = fig.axes[0]
    tops: dict[int, float] = {}
    for bar in ax.patches:
        x = round(bar.get_x() + bar.get_width() / 2)
        tops[x] = max(tops.get(x, 0.0), bar.get_y() + bar.get_height())
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    for i, f in enumerate(figs):
        span = f.span_ns / f.per_step / 1e6
        assert tops[i] == pytest.approx(span, rel=1e-6)
        assert sum(f.category_busy_ns.values()) == pytest.approx(f.busy_ns, abs=len(
            f.category_busy_ns))
    assert "framework overhead" in legend and "idle, waiting for host" in legend
    assert all(f.label in ax.get_title() for f in figs)


def test_launch_chart_has_no_empty_panel_on_cpu_and_names_the_run():
    cpu = summarize(Trace.load(RUNS["cpu"] / "trace.parquet"))
    gpu = summarize(Trace.load(RUNS["gpu"] / "trace.parquet"))
    assert len(charts.launch_chart(cpu, "cpu run").axes) == 1
    g = charts.launch_chart(gpu, "gpu run")
    assert len(g.axes) == 2 and "gpu run" in g.axes[0].get_title()
    pie = charts.kernel_pie(gpu, "gpu run")
    assert pie.axes[0].get_title().startswith("gpu run: ")




def test_amp_part_that_grew_is_not_called_saved():
    fp32 = run_figures(step_trace([("volta_sgemm_128x64_nn", 300)]), "fp32")
    amp = run_figures(step_trace([("volta_h884gemm_128x64_nn", 500),
                                   ("bfloat16_copy_kernel_cuda", 50)], amp="bf16"), "amp")
    b = amp_breakdown(fp32, amp)
    assert b.matrix_saved_ns == -200
    labels = dict(amp_rows(b))
    assert labels["+ matrix time grew (gemm/attention/rnn)"] == "200 ns"
    assert not any("saved" in k for k in labels)
    fig = charts.amp_waterfall(b, "fp32", "amp")
    ticks = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert "matrix time grew" in ticks and "fp32 → amp" in fig.axes[0].get_title()


def _overlaps(labels) -> list:
    boxes = [t.get_window_extent() for t in labels if t.get_visible() and t.get_text()]
    return [(a, b) for a, b in combinations(boxes, 2) if a.overlaps(b)]


def test_sweep_log_ticks_do_not_overlap_and_name_the_sweep():
    df = pd.read_parquet(S / "gpu" / "sweep-amp" / "sweep.parquet")
    df = pd.concat([df, pd.read_parquet(S / "gpu" / "sweep-batch" / "sweep.parquet")])
    figs = charts.sweep_plots(df, "h100 sweeps")
    assert figs
    for fig in figs.values():
        fig.canvas.draw()
        assert "h100 sweeps" in fig._suptitle.get_text()
        for ax in fig.axes:
            assert not _overlaps(ax.get_yticklabels())
            assert not _overlaps(ax.get_xticklabels())
            assert len([t for t in ax.get_yticklabels() if t.get_text()]) >= 2


def test_terminal_at_fixed_width(capsys):
    for label in ("gpu-bf16", "cpu"):
        buf = io.StringIO()
        s = summarize(Trace.load(RUNS[label] / "trace.parquet"))
        print_summary(Console(file=buf, width=100, color_system=None), s, top=10)
        lines = buf.getvalue().splitlines()
        assert max(len(line) for line in lines) <= 100
        text = buf.getvalue()
        assert "Phases per step" in text and "bench (no profiler)" in text
    assert "forward" in text


def test_pngs_open_and_show_something(tmp_path):
    assert main(["analyze", str(RUNS["gpu-bf16"]), "--plot", str(tmp_path)]) == 0
    for name in ("kernels_pie", "launch_overhead"):
        img = matplotlib.image.imread(tmp_path / f"{name}.png")
        assert img.shape[0] > 300 and img.shape[1] > 500
        assert float(np.std(img[..., :3])) > 0.05  # not a blank canvas


def test_compare_shows_phases_timings_and_noise(capsys):
    assert main(["compare", str(RUNS["gpu"]), str(RUNS["gpu-bf16"])]) == 0
    out = capsys.readouterr().out
    assert "phase forward: wall" in out and "  kernels" in out
    assert "phase backward" in out and "spread (CV)" in out
    assert "Mean percentage error" in out  # both runs have timed batches


def test_sweep_report_prints_human_numbers(tmp_path):
    md = tmp_path / "r.md"
    assert main(["report", str(S / "gpu" / "sweep-batch"), "-o", str(md)]) == 0
    text = md.read_text()
    section = text.split("## Sweep", 1)[1]
    assert "e+0" not in section and "ms" in section and "%" in section
    ok = pd.read_parquet(S / "gpu" / "sweep-batch" / "sweep.parquet")
    best = ok.loc[ok["sequences_per_s"].idxmax(), "sequences_per_s"]
    assert f"{best:,.1f}" in section


def _chromium(*args: str) -> subprocess.CompletedProcess:
    """Headless Chromium with the network cut off: no proxy reachable, no name resolves."""
    return subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu",
                           "--hide-scrollbars", "--proxy-server=127.0.0.1:9",
                           "--host-resolver-rules=MAP * ~NOTFOUND", "--enable-logging=stderr",
                           "--v=0", "--virtual-time-budget=15000", *args],
                          check=True, capture_output=True, text=True, timeout=180)


@pytest.mark.requires(shutil.which("chromium") is None,
                      "needs headless Chromium (.ci/run installs Debian's chromium)")
def test_html_report_explores_offline(tmp_path):
    """The report opens from the file alone with the network off, logs no error, draws one
    step per run with as many kernel bars as the step has kernels (the longest 3,000 where
    it has more, with a note), names the kernel in the hover, and is not blank."""
    from traceviz.analyses.timeline import step_rows
    from traceviz.render.report.html_page import STEP_BUDGET, check_json

    runs = [RUNS["gpu"], S / "gpu" / "fine_torch" / "train", RUNS["gpu-bf16"]]
    html = tmp_path / "report.html"
    assert main(["report", *map(str, runs), "-o", str(html)]) == 0
    page = html.read_text()
    # every script inlined: no tag loads anything (the Chromium run below has no network)
    assert not re.search(r"<script[^>]*\bsrc=|<link[^>]*\bhref=[\"']?https?:", page)
    assert len(page) < 8e6
    r = _chromium("--dump-dom", html.as_uri())
    console = [x for x in r.stderr.splitlines() if ":CONSOLE" in x]
    assert console and not [x for x in console if "rror" in x or "Uncaught" in x], console
    checks = check_json(r.stdout)
    assert [c["run"] for c in checks] == ["cudnn_torch/train", "fine_torch/train",
                                          "cudnn_torch-bf16/train"]
    for c, run in zip(checks, runs, strict=True):
        t = Trace.load(run / "trace.parquet")
        ev = t.events
        dev = ev[ev["kind"].isin(["kernel", "memcpy", "memset"])]
        step = step_rows(t, 1 << 30)
        end = dev["ts_ns"] + dev["dur_ns"]
        in_step = int(((end > step.start_ns) & (dev["ts_ns"] < step.end_ns)).sum())
        assert c["kernels_in_step"] == in_step > 0
        assert c["kernel_bars"] == min(in_step, STEP_BUDGET)
        assert c["tooltip"] == "@name" and c["first_name"] in set(ev["name"].astype(str))
    assert checks[1]["kernel_bars"] < checks[1]["kernels_in_step"]
    assert "are left out to keep the file small" in page
    for heading in ("Phases", "AMP breakdown", "Time per batch", "Findings (advise)",
                    "Scenarios (whatif", "Kernel differences"):
        assert heading in page
    shot = tmp_path / "shot.png"
    _chromium(f"--screenshot={shot}", "--window-size=1200,3000", html.as_uri())
    img = matplotlib.image.imread(shot)
    assert img.shape[:2] == (3000, 1200)
    rows = np.std(img[..., :3], axis=1).mean(axis=1)
    assert (rows > 0.05).sum() > 1000  # text, tables and charts over much of the page


def test_pie_slices_are_readable():
    """No slice under 1% but the first and "others" (a 94% pie listed six 0.0% rows)."""
    from traceviz.analyses.summary.figures import summarize
    from traceviz.render.charts import kernel_pie

    for path in (RUNS["gpu"], S / "cpu" / "jit_torch"):
        s = summarize(Trace.load(path / "trace.parquet"))
        fig = kernel_pie(s, "x")
        texts = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
        shares = [float(t.rsplit(" ", 1)[1].rstrip("%")) for t in texts]
        assert all(p >= 1.0 for p, t in zip(shares[1:], texts[1:], strict=True)
                   if not t.startswith("others"))
        k = s.kernels
        shown = len(texts) - (1 if texts[-1].startswith("others") else 0)
        assert (k["share"].head(shown) >= 0.01).all()
        assert shares[-1] == pytest.approx(100 * k["share"].iloc[shown:].sum(), abs=0.06)
        matplotlib.pyplot.close(fig)
