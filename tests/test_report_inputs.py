"""`report` and `compare` on every kind of input: every committed run folder, every
example script captured, a raw trace inside its run folder, Parquet files, sweeps and
rank folders; runs named by their folders or by --label; a script's batch size."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import KINETO, ROOT, needs, shared
from traceviz.cli import main
from traceviz.files.folders import RUN_FILES
from traceviz.render.escape import markdown
from traceviz.units import fmt_ns

S = ROOT / "sample_traces"
EXAMPLES = ROOT / "examples"
TRACEVIZ = [sys.executable, "-m", "traceviz"]
RUN_FOLDERS = sorted({p.parent for name in RUN_FILES for p in S.rglob(name)})


def _row(md: str, title: str, label: str) -> dict[str, str]:
    """The row of ``label`` in the Markdown table under the section ``title``."""
    part = md.split(f"## {title}", 1)[1].split("\n## ", 1)[0]
    lines = [x for x in part.splitlines() if x.startswith("|")]
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    for line in lines[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[0] == markdown(label):
            return dict(zip(head, cells, strict=True))
    raise AssertionError(f"no row {label!r} under {title!r}")


def _bench(folder: Path) -> dict | None:
    path = folder / "bench.json"
    return json.loads(path.read_text()) if path.is_file() else None


@pytest.mark.slow
def test_report_on_every_committed_run_folder(tmp_path, capsys):
    """Each run folder under sample_traces/ makes a Markdown report named after the folder,
    its time per batch the median of bench.json's timed batches; a folder whose capture
    failed (no bench.json, a cut trace) is one line and exit 2, never an internal error."""
    assert len(RUN_FOLDERS) > 100
    failed = []
    for i, folder in enumerate(RUN_FOLDERS):
        md = tmp_path / f"r{i}.md"
        rc = main(["report", str(folder), "-o", str(md)])
        err = capsys.readouterr().err
        assert "internal error" not in err, (folder, err)
        if rc:
            assert rc == 2 and err.count("\n") == 1, (folder, err)
            failed.append(folder)
            continue
        bench = _bench(folder)
        row = _row(md.read_text(), "Time per batch", folder.name)
        if bench is None:
            # no timings: the column is "–" or, a column of nothing else, left out
            assert row.get("time/batch", "–") == "–"
            continue
        median = bench["time_per_batch_s"]["median"]
        assert row["time/batch"] == fmt_ns(median * 1e9), folder
        rate = bench.get("sequences_per_s")
        if rate is not None:
            assert row["sequences/s"] == f"{rate:,.1f}"
    # the one sweep point whose capture died mid-write: its trace is cut short
    assert [f.name for f in failed] == ["jit_torch-h1024-s100-fp32"]
    assert not (failed[0] / "bench.json").exists()


def test_raw_trace_in_a_run_folder_keeps_the_run(tmp_path):
    """The raw trace named alone, beside the run's trace.parquet and records: the run's
    name, timings and command, as its folder gives them."""
    folder = S / "script" / "lstm_train"
    bench = _bench(folder)
    assert bench is not None
    md = tmp_path / "r.md"
    assert main(["report", str(folder / "trace.pt.trace.json.gz"), str(folder / "trace.parquet"),
                 "-o", str(md)]) == 0
    text = md.read_text()
    for label in ("lstm_train", "lstm_train #2"):
        row = _row(text, "Time per batch", label)
        assert row["time/batch"] == fmt_ns(bench["time_per_batch_s"]["median"] * 1e9)
        assert row["elapsed"] == f"{bench['elapsed_s']:.3f} s ({bench['batches']} batches)"
        assert row["model"] == "lstm\\_train.py"


def test_runs_are_named_by_folder_parents_and_labels(tmp_path, capsys):
    from traceviz.files.runfolder import run_names

    gpu = S / "gpu"
    paths = [gpu / "cudnn_torch" / "train", gpu / "fine_torch" / "train",
             gpu / "cudnn_torch" / "forward", S / "cpu" / "cudnn_torch",
             S / "cpu" / "cudnn_torch" / "trace.parquet", S / "cpu" / "cudnn_torch"]
    assert run_names(paths) == ["cudnn_torch/train", "fine_torch/train", "forward",
                                "cudnn_torch", "cudnn_torch #2", "cudnn_torch #3"]
    lone = tmp_path / "x" / "rank0.json.gz"
    lone.parent.mkdir()
    shutil.copy(shared(KINETO / "ampere_sampled_rank0.json.gz"), lone)
    assert run_names([lone]) == ["rank0"]
    a, b = S / "cpu" / "cudnn_torch", S / "cpu" / "cell_torch"
    assert main(["compare", str(a), str(b), "--label", "oneDNN", "--label", "cell loop",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [r["label"] for r in out["runs"]] == ["oneDNN", "cell loop"]
    assert out["differences"][0]["a"] == "oneDNN"
    for args, words in ((["--label", "a"], "--label: give one per run: 2 runs, 1 label"),
                        (["--label", "a", "--label", "a"], "'a' is given twice"),
                        (["--label", " ", "--label", "a"], "a label is blank")):
        assert main(["compare", str(a), str(b), *args]) == 2
        err = capsys.readouterr().err
        assert words in err and err.count("\n") == 1, err
    md = tmp_path / "r.md"
    assert main(["report", str(S / "cpu_sweep"), str(a), "--label", "the sweep",
                 "--label", "A", "-o", str(md)]) == 0
    text = md.read_text()
    assert "## Sweep: the sweep" in text and _row(text, "Environment", "A")


def test_mpe_says_which_run_is_longer_where_it_reads_both_ways(capsys):
    """cell_torch against the script's run: MPE above zero both ways (the script's first
    timed batch is 200x its last); the note names the run longer by its median."""
    import statistics

    a, b = S / "cpu" / "cell_torch", S / "script" / "lstm_train"
    ta, tb = _bench(a)["batch_times_s"], _bench(b)["batch_times_s"]
    n = min(len(ta), len(tb))
    ab = 100 * statistics.mean((x - y) / y for x, y in zip(ta[:n], tb[:n], strict=True))
    ba = 100 * statistics.mean((y - x) / x for x, y in zip(ta[:n], tb[:n], strict=True))
    assert ab > 0 and ba > 0  # the case the table's sign alone cannot rank
    assert main(["compare", str(a), str(b), "--json"]) == 0
    both = json.loads(capsys.readouterr().out)["mpe_both_ways"]
    ma, mb = (_bench(p)["time_per_batch_s"]["median"] for p in (a, b))
    assert len(both) == 1 and both[0]["mpe_ab"] == pytest.approx(ab)
    assert both[0]["mpe_ba"] == pytest.approx(ba)
    assert both[0]["longer"] == ("cell_torch" if ma > mb else "lstm_train")
    assert main(["compare", str(a), str(b), "--width", "200"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    longer, shorter = (("cell_torch", ma), ("lstm_train", mb))[:: 1 if ma > mb else -1]
    assert f"by the median timed batch {longer[0]} is longer ({fmt_ns(longer[1] * 1e9)} " \
           f"against {fmt_ns(shorter[1] * 1e9)})" in out
    assert "above zero both ways" in out


def test_batch_size_in_a_copied_script_folder(tmp_path, capsys):
    """A script's run folder whose config.json records the batch size (capture
    --batch-size), read from its raw trace alone: sequences/s = batch / median batch."""
    run = tmp_path / "train_bs"
    run.mkdir()
    src = S / "script" / "lstm_train"
    for name in ("bench.json", "meta.json", "trace.pt.trace.json.gz"):
        shutil.copy(src / name, run / name)
    cfg = json.loads((src / "config.json").read_text()) | {"batch_size": 4}
    (run / "config.json").write_text(json.dumps(cfg))
    assert main(["compare", str(run), str(src), "--json"]) == 0
    runs = json.loads(capsys.readouterr().out)["runs"]
    median = _bench(src)["time_per_batch_s"]["median"]
    assert runs[0]["label"] == "train_bs" and runs[1]["label"] == "lstm_train"
    assert runs[0]["sequences_per_s"] == pytest.approx(4 / median)
    assert runs[0]["time_per_sample_s"] == pytest.approx(median / 4)
    assert runs[1]["sequences_per_s"] is None  # no batch size recorded
    assert main(["compare", str(run), str(src), "--width", "160"]) == 0
    lines = capsys.readouterr().out.splitlines()
    per_sample = next(x for x in lines if "time per sample" in x).split()
    assert per_sample[-3:] == [*fmt_ns(median / 4 * 1e9).split(), "–"]
    md = tmp_path / "r.md"
    assert main(["report", str(run), "-o", str(md)]) == 0
    capsys.readouterr()
    row = _row(md.read_text(), "Time per batch", "train_bs")
    assert row["sequences/s"] == f"{4 / median:,.1f}" and row["shape"] == "b4"
    assert row["time/sample"] == fmt_ns(median / 4 * 1e9)
    cfg["batch_size"] = "four"
    (run / "config.json").write_text(json.dumps(cfg))
    assert main(["report", str(run), "-o", str(tmp_path / "bad.md")]) == 2
    err = capsys.readouterr().err
    assert "field batch_size is \"four\", not a whole number or null" in err
    assert err.count("\n") == 1


def _capture(tmp_path: Path, name: str, *args: str) -> Path:
    out = tmp_path / name
    r = subprocess.run([*TRACEVIZ, "capture", "--out", str(out), *args], capture_output=True,
                       text=True, timeout=600)
    # torchrun's traceback fills the end: a rank's own last words come before it
    assert r.returncode == 0, r.stderr[-6000:]
    return out


@pytest.mark.capture
def test_report_on_every_example_captured(tmp_path):
    """Every script in examples/ captured on the CPU with few steps, then one Markdown and
    one HTML report of them all: each run under its folder's name, the LSTM's sequences/s
    its --batch-size over its median timed batch."""
    needs("torch")
    needs("tensorflow")
    py = sys.executable
    runs = {
        "lstm": _capture(tmp_path, "lstm", "--warmup", "1", "--profile-steps", "2",
                         "--batch-size", "4", "--", py, str(EXAMPLES / "lstm_train.py"),
                         "--steps", "6"),
        "mlp": _capture(tmp_path, "mlp", "--slice", "0.02", "--", py,
                        str(EXAMPLES / "mlp_infer.py"), "--batches", "5"),
        "cnn": _capture(tmp_path, "cnn", "--warmup", "1", "--profile-steps", "2", "--", py,
                        str(EXAMPLES / "cnn_marked.py"), "--steps", "5"),
        "keras": _capture(tmp_path, "keras", "--warmup", "1", "--profile-steps", "2", "--",
                          py, str(EXAMPLES / "keras_fit.py"), "--batches", "6"),
        "ddp": _capture(tmp_path, "ddp", "--ranks", "2", "--warmup", "1", "--profile-steps",
                        "2", "--", py, str(EXAMPLES / "ddp_lstm.py"), "--steps", "5"),
    }
    assert set(RUN_FILES) <= {p.name for p in runs["lstm"].iterdir()}
    assert json.loads((runs["lstm"] / "config.json").read_text())["batch_size"] == 4
    examples = {p.name for p in EXAMPLES.glob("*.py")}
    assert examples == {"lstm_train.py", "mlp_infer.py", "cnn_marked.py", "keras_fit.py",
                        "ddp_lstm.py"}  # a new example joins this test
    md = tmp_path / "all.md"
    inputs = [str(runs[k]) for k in ("lstm", "mlp", "cnn", "keras", "ddp")]
    assert main(["report", *inputs, "-o", str(md)]) == 0
    text = md.read_text()
    bench = _bench(runs["lstm"])
    assert bench is not None
    median = bench["time_per_batch_s"]["median"]
    row = _row(text, "Time per batch", "lstm")
    assert row["time/batch"] == fmt_ns(median * 1e9)
    assert row["sequences/s"] == f"{4 / median:,.1f}"
    for k in ("mlp", "cnn", "keras"):
        b = _bench(runs[k])
        assert b is not None
        timed = b.get("time_per_batch_s")  # time slices without timed ones: none
        assert _row(text, "Time per batch", k)["time/batch"] == \
            ("–" if timed is None else fmt_ns(timed["median"] * 1e9))
        assert _row(text, "Time per batch", k)["sequences/s"] == "–"  # no batch size
    assert "ddp: rank" in text  # the job's slowest rank is one of the runs
    html = tmp_path / "all.html"
    assert main(["report", *inputs, "--label", "LSTM", "--label", "MLP", "--label", "CNN",
                 "--label", "Keras", "--label", "DDP", "-o", str(html)]) == 0
    page = html.read_text()
    for label in ("MLP", "CNN", "Keras", "DDP: rank"):  # each run's heading (in Bokeh's JSON)
        assert f"&lt;h2&gt;{label}" in page, label
    assert f"&lt;h2&gt;LSTM&lt;/h2&gt;&lt;p&gt;{median * 1e3:,.3f} ms per batch" in page


def test_report_on_a_profile_folder_with_its_batch_size(tmp_path):
    """A traceviz.profile() folder given batch_size: config.json records it, and the
    report's sequences/s is it over the median timed step, from the folder alone too."""
    torch = needs("torch")
    import traceviz

    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(),
                                torch.nn.Linear(16, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(6, 8)
    with traceviz.profile(steps=2, warmup=1, out=tmp_path / "nb", batch_size=6) as p:
        for _ in range(8):
            model(x).pow(2).mean().backward()
            opt.step()
    assert json.loads((p.run_dir / "config.json").read_text())["batch_size"] == 6
    median = p.bench["time_per_batch_s"]["median"]
    (p.run_dir / "trace.parquet").unlink()  # the folder read from its raw trace as well
    md = tmp_path / "r.md"
    assert main(["report", str(p.run_dir), "-o", str(md)]) == 0
    row = _row(md.read_text(), "Time per batch", "nb")
    assert row["time/batch"] == fmt_ns(median * 1e9)
    # no run has a model name: the column of nothing but "–" is left out
    assert row["sequences/s"] == f"{6 / median:,.1f}" and "model" not in row
