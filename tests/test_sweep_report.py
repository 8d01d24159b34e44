"""A real CPU sweep (3 variants x 3 batch sizes, tiny shapes), resume, plots and reports."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import ROOT, needs

needs("torch")
pytestmark = pytest.mark.capture  # every test here runs real captures

from traceviz.cli import main  # noqa: E402

SWEEP = ["sweep", "--models", "cudnn_torch,fine_torch,fused_torch,graph_torch",
         "--batch", "2,4,8", "--hidden", "8", "--seq", "4", "--layers", "1",
         "--warmup", "1", "--steps", "2", "--profile-steps", "1", "--device", "cpu"]


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep")
    assert main([*SWEEP, "--out", str(out)]) == 0
    return out


def test_sweep_table(sweep_dir):
    df = pd.read_parquet(sweep_dir / "sweep.parquet")
    assert len(df) == 12
    ok = df[df["status"] == "ok"]
    assert len(ok) == 9 and set(ok["model"]) == {"cudnn_torch", "fine_torch", "fused_torch"}
    assert sorted(ok["batch"].unique()) == [2, 4, 8]
    assert (ok["time_per_batch_s"] > 0).all()
    assert (ok["sequences_per_s"] == ok["batch"] / ok["time_per_batch_s"]).all()
    failed = df[df["status"] == "failed"]
    assert set(failed["model"]) == {"graph_torch"}
    assert failed["error"].str.contains("GPU").all()
    for col in ("idle_fraction", "cast_share", "top_kernel", "kernel_count", "run_dir",
                "launch_bound_fraction", "framework_overhead_fraction"):
        assert col in df
    assert ok["cpu_trace"].all() and ok["launch_bound_fraction"].isna().all()
    assert (ok["framework_overhead_fraction"] == ok["idle_fraction"]).all()
    # the workload's FLOPs per batch, the model's TFLOP/s at the median and the peak
    # memory, as each point's runner wrote them into its bench.json
    for r in ok.itertuples(index=False):
        bench = json.loads((Path(r.run_dir) / "bench.json").read_text())
        assert r.workload_flops == bench["workload_flops"] > 0
        assert r.model_tflops == pytest.approx(bench["workload_flops"]
                                               / bench["time_per_batch_s"]["median"] / 1e12)
        assert r.peak_memory_bytes == bench["memory"]["peak_rss_growth_bytes"]
        # the spread and the NOISY verdict travel with the median
        t = bench["time_per_batch_s"]
        assert (r.time_min_s, r.time_max_s, r.time_cv, r.noisy) == (
            t["min"], t["max"], t["cv"], t["noisy"])
        assert r.cpu_threads >= 1
        assert r.first_call_s == bench["first_call_s"]
        assert list(r.loss_per_batch) == bench["loss_per_batch"]
        assert r.cpu_percent == bench["utilization"]["cpu_percent"]


def test_sweep_resume_and_refusal(sweep_dir, capsys):
    trace = sweep_dir / "points" / "fine_torch-b2-h8-s4-fp32" / "trace.parquet"
    before = trace.stat().st_mtime_ns
    assert main([*SWEEP, "--out", str(sweep_dir), "--resume"]) == 0
    assert trace.stat().st_mtime_ns == before  # done points are not captured again
    capsys.readouterr()
    assert main([*SWEEP, "--out", str(sweep_dir)]) == 2
    assert "--resume" in capsys.readouterr().err


def test_sweep_plot_and_reports(sweep_dir, tmp_path):
    assert main(["sweep-plot", str(sweep_dir), "--out", str(tmp_path / "plots")]) == 0
    assert {p.name for p in (tmp_path / "plots").iterdir()} == {
        "time_vs_batch.png", "time_vs_batch.svg", "tflops_vs_batch.png", "tflops_vs_batch.svg",
        "loss_curves.png", "loss_curves.svg"}
    run = sweep_dir / "points" / "fine_torch-b8-h8-s4-fp32"
    md = tmp_path / "report.md"
    assert main(["report", str(sweep_dir), str(run), "-o", str(md)]) == 0
    text = md.read_text()
    for heading in ("## Environment", "## Time per batch, elapsed and sequences/s",
                    "## What bounds the step and framework overhead",
                    "## Where the time goes", "## Sweep",
                    "## Loss curves"):
        assert heading in text
    # CPU points: their rates in GFLOP/s, no device column
    assert "| model GFLOP/s |" in text and "TFLOP/s" not in text and "launch-bound" not in text
    images = list((tmp_path / "report_files").iterdir())
    assert images and all(p.read_bytes()[:4] == b"\x89PNG" for p in images)
    html = tmp_path / "report.html"
    assert main(["report", str(sweep_dir), "-o", str(html)]) == 0
    page = html.read_text()
    assert page.count("data:image/png;base64,") >= 1 and "<table" in page
    assert main(["report", str(sweep_dir), "-o", str(html)]) == 2  # no overwrite without --force


def test_a_cpu_sweep_reads_in_gflops(sweep_dir):
    """A sweep of CPU points: the terminal table and the rate chart in GFLOP/s, each
    point's figure its model TFLOP/s times 1,000."""
    from rich.console import Console

    from traceviz.render.charts import sweep_plots
    from traceviz.render.terminal.runs_view import sweep_on_cpu, sweep_render

    df = pd.read_parquet(sweep_dir / "sweep.parquet")
    assert sweep_on_cpu(df)
    console = Console(width=200, record=True)
    console.print(sweep_render(df, "s", 200))
    out = console.export_text()
    assert "GFLOP/s" in out and "TFLOP/s" not in out
    ok = df[df["status"] == "ok"]
    for r in ok.itertuples(index=False):
        row = next(line for line in out.splitlines() if str(r.point) in line)
        assert f"{r.model_tflops * 1e3:,.2f}" in row
    fig = sweep_plots(df, "s")["tflops_vs_batch"]
    assert fig.axes[0].get_ylabel() == "model GFLOP/s"
    ys = sorted(y for ax in fig.axes for line in ax.get_lines() for y in line.get_ydata())
    assert ys == pytest.approx(sorted(ok["model_tflops"] * 1e3))


def test_an_older_sweep_gets_flops_and_the_noisy_verdict():
    """The committed H100 batch sweep predates both columns: workload FLOPs from its
    preset and sizes (deepbench forward: 2 x seq x batch x 4H x (I + H)), NOISY from its
    min and max (bench.json's max/min > 1.5 rule)."""
    from traceviz.capture.grid import load_sweep

    df = load_sweep(ROOT / "sample_traces" / "gpu" / "sweep-batch" / "sweep.parquet")
    ok = df[df["status"] == "ok"]
    assert (ok["workload_flops"] == 2 * 100 * ok["batch"] * 4 * 512 * (512 + 512)).all()
    assert (ok["model_tflops"] == ok["workload_flops"] / ok["time_per_batch_s"] / 1e12).all()
    assert (ok["noisy"] == (ok["time_max_s"] / ok["time_min_s"] > 1.5)).all()


TRAIN = ["sweep", "--models", "cudnn_torch,fused_torch,factorized_torch", "--preset",
         "rnn_bench", "--mode", "train", "--batch", "4", "--hidden", "8", "--seq", "4",
         "--layers", "1", "--warmup", "2", "--max-warmup", "2", "--steps", "4",
         "--profile-steps", "1", "--device", "cpu"]


def test_equivalent_variants_draw_the_same_loss_curve(tmp_path):
    """Training on the same data from the same seed, nn.LSTM and fused_torch compute the
    same function: the same loss at every batch, the same curve drawn; the factorized
    LSTM (rank hidden/4) is another model and draws its own."""
    from traceviz.capture.grid import load_sweep
    from traceviz.render.charts import sweep_plots

    out = tmp_path / "train"
    assert main([*TRAIN, "--out", str(out)]) == 0
    df = load_sweep(out / "sweep.parquet")
    assert (df["status"] == "ok").all()
    bench = {r.model: json.loads((Path(r.run_dir) / "bench.json").read_text())
             for r in df.itertuples(index=False)}
    loss = {m: b["loss_per_batch"] for m, b in bench.items()}
    assert all(len(v) == 4 for v in loss.values())
    assert loss["cudnn_torch"][0] != loss["cudnn_torch"][-1]  # SGD moves the loss
    assert loss["fused_torch"] == pytest.approx(loss["cudnn_torch"], rel=1e-5)
    assert loss["factorized_torch"] != pytest.approx(loss["cudnn_torch"], rel=1e-3)
    fig = sweep_plots(df, "train")["loss_curves"]
    lines = {ln.get_label(): ln for ln in fig.axes[0].get_lines()}
    assert set(lines) == {"cudnn_torch", "fused_torch", "factorized_torch"}
    for model, line in lines.items():
        # x: the batch number from the first warm-up batch (2 warm-up batches here)
        assert list(line.get_xdata()) == [2, 3, 4, 5] == \
            [bench[model]["loss_first_batch"] + i for i in range(4)]
        assert list(line.get_ydata()) == loss[model]
