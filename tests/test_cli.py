"""The CLI as a user meets it: import, analyze (--json/--export/--plot), refusing overwrites."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest

from tests.conftest import KINETO, shared
from tests.rawref import Reference
from traceviz.cli import main
from traceviz.trace import Trace

ALEXNET = KINETO / "a100_alexnet.json.gz"


def test_import_writes_parquet_and_refuses_overwrite(tmp_path, capsys):
    out = tmp_path / "t.parquet"
    assert main(["import", str(shared(ALEXNET)), "-o", str(out)]) == 0
    trace = Trace.load(out)
    assert (trace.events["kind"] == "kernel").sum() == Reference(ALEXNET).kernel_count
    assert trace.meta["source_format"] == "kineto"
    assert trace.meta["devices"]["0"].startswith("NVIDIA A100")
    before = out.read_bytes()
    capsys.readouterr()
    assert main(["import", str(ALEXNET), "-o", str(out)]) == 2
    assert "already exists" in capsys.readouterr().err
    assert out.read_bytes() == before
    assert main(["import", str(ALEXNET), "-o", str(out), "--force"]) == 0
    assert list(tmp_path.iterdir()) == [out]  # no temporary files left behind


def test_format_is_detected_from_content(tmp_path):
    odd = tmp_path / "no_extension"
    shutil.copy(shared(ALEXNET), odd)
    assert main(["import", str(odd), "-o", str(tmp_path / "x.parquet")]) == 0
    plain = tmp_path / "plain.txt"
    import gzip
    plain.write_bytes(gzip.decompress(ALEXNET.read_bytes()))
    assert main(["import", str(plain), "-o", str(tmp_path / "y.parquet")]) == 0
    a = Trace.load(tmp_path / "x.parquet").events
    b = Trace.load(tmp_path / "y.parquet").events
    pd.testing.assert_frame_equal(a, b, check_categorical=False)


def test_parquet_round_trip_keeps_every_column(tmp_path):
    from traceviz.parsers import load

    trace = load(shared(KINETO / "v100_ns_resolution.json.gz"))
    trace.save(tmp_path / "t.parquet")
    back = Trace.load(tmp_path / "t.parquet")
    # categories may come back as Arrow-backed strings: same values, another index dtype
    pd.testing.assert_frame_equal(trace.events, back.events, check_categorical=False)
    for col in ("kind", "name", "op", "launch_api", "category"):
        assert isinstance(back.events[col].dtype, pd.CategoricalDtype)
        pd.testing.assert_series_equal(trace.events[col].astype(str),
                                       back.events[col].astype(str))
    assert back.meta == json.loads(json.dumps(trace.meta))


def test_analyze_json_has_documented_keys(capsys):
    assert main(["analyze", str(shared(ALEXNET)), "--json", "--top", "5"]) == 0
    d = json.loads(capsys.readouterr().out)
    ref = Reference(ALEXNET)
    assert d["kernels"]["count"] == ref.kernel_count
    assert d["kernels"]["total_ns"] == ref.kernel_total_ns
    kernel_calls = [e for e in ref.launches if e["name"].startswith("cudaLaunchKernel")]
    assert d["launches"]["count"] == len(kernel_calls) == 79
    assert d["launches"]["matched"] + d["copies"]["matched"] == ref.matched_launches == 98
    assert d["graphs"]["launches"] == 0
    assert d["busy_ns"] == ref.busy_ns()  # no steps: the whole trace is the scope
    assert d["scope"] == "trace"
    span, busy, wait, queued = ref.busy_split()[0]
    assert (d["span_ns"], d["host_wait_ns"], d["queued_idle_ns"]) == (span, wait, queued)
    assert d["idle_ns"] == d["span_ns"] - d["busy_ns"] == wait + queued
    assert d["launch_bound_fraction"] == wait / span
    assert d["idle_fraction"] == 1 - busy / span
    assert d["framework_overhead_fraction"] is None
    assert d["devices"][0]["queue_depth"]["max"] >= 1
    assert {s["stream"] for s in d["streams"]} == {
        e["args"]["stream"] for e in ref.device}
    assert set(d["categories"]) >= {"gemm", "attention", "rnn", "elementwise", "reduction",
                                    "cast", "memcpy", "memset", "communication", "other"}
    assert len(d["top_kernels"]) == 5
    assert d["top_kernels"][0]["total_ns"] >= d["top_kernels"][1]["total_ns"]
    assert d["casts"]["total_ns"] == 0


def test_analyze_parquet_equals_analyze_raw(tmp_path, capsys):
    out = tmp_path / "t.parquet"
    main(["import", str(shared(ALEXNET)), "-o", str(out)])
    capsys.readouterr()
    main(["analyze", str(ALEXNET), "--json"])
    raw = json.loads(capsys.readouterr().out)
    main(["analyze", str(out), "--json"])
    pq = json.loads(capsys.readouterr().out)
    raw.pop("source"), pq.pop("source")
    assert raw == pq


def test_export_tables(tmp_path):
    trace_file = shared(KINETO / "a100_80gb_queue.json.gz")
    assert main(["analyze", str(trace_file), "--export", str(tmp_path), "--json"]) == 0
    ref = Reference(trace_file)
    kernels = pd.read_parquet(tmp_path / "kernels.parquet")
    launches = pd.read_parquet(tmp_path / "launches.parquet")
    casts = pd.read_parquet(tmp_path / "casts.parquet")
    assert len(kernels) == ref.kernel_count
    assert kernels["dur_ns"].sum() == ref.kernel_total_ns
    assert len(launches) == len(ref.launches)
    assert launches["matched"].sum() == ref.matched_launches
    assert {"host_ns", "delay_ns", "device_ns"} <= set(launches.columns)
    assert (casts["kind"] == "kernel").sum() == len(ref.cast_kernels()) > 0
    # refuses to overwrite without --force, and leaves the files as they were
    before = (tmp_path / "kernels.parquet").read_bytes()
    assert main(["analyze", str(trace_file), "--export", str(tmp_path), "--json"]) == 2
    assert (tmp_path / "kernels.parquet").read_bytes() == before
    assert main(["analyze", str(trace_file), "--export", str(tmp_path), "--json",
                 "--force"]) == 0


def test_plot_writes_png_and_svg(tmp_path, capsys):
    """The trace records no allocator events: no memory chart, and a line says why."""
    assert main(["analyze", str(shared(KINETO / "ampere_sampled_rank0.json.gz")),
                 "--plot", str(tmp_path)]) == 0
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["kernels_pie.png", "kernels_pie.svg", "launch_overhead.png",
                     "launch_overhead.svg", "roofline.png", "roofline.svg"]
    assert "memory chart not written: the trace records no memory" in capsys.readouterr().err
    assert (tmp_path / "kernels_pie.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert b"<svg" in (tmp_path / "launch_overhead.svg").read_bytes()[:2000]


def test_rich_output_names_the_numbers(capsys):
    assert main(["analyze", str(shared(ALEXNET)), "--width", "120"]) == 0
    out = capsys.readouterr().out
    for text in ("Top kernels by total time", "Categories", "Launch overhead",
                 "launch-bound fraction", "Cast ops (AMP)", "NVIDIA A100"):
        assert text in out


@pytest.mark.parametrize("argv", [["--version"], ["analyze", "--help"], ["import", "--help"]])
def test_help_and_version(argv, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 0
    assert capsys.readouterr().out


def test_errors_name_options_as_keywords_and_the_cli_as_flags(tmp_path, capsys):
    from traceviz.errors import InputError, RunFailed, TraceVizError, UsageError
    from traceviz.runners.presets import make_workload

    with pytest.raises(UsageError) as e:
        make_workload("ptb_lm", None, "cpu", workers=-1)
    assert str(e.value) == "workers: must be 0 or more"
    assert e.value.cli_text() == "--workers: must be 0 or more"
    exists = TraceVizError("x.parquet: already exists", option="force", action="replace it")
    assert str(exists) == "x.parquet: already exists (pass force=True to replace it)"
    assert exists.cli_text() == "x.parquet: already exists (use --force to replace it)"
    assert {c.exit_code for c in (TraceVizError, InputError, UsageError, RunFailed)} == {2}
    # through the CLI: the flag's spelling, one line, exit 2
    out = tmp_path / "t.parquet"
    out.write_bytes(b"mine")
    assert main(["import", str(shared(ALEXNET)), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--force" in err and out.read_bytes() == b"mine"


def test_debug_shows_the_cause_of_a_handled_error(tmp_path, capsys, monkeypatch):
    """Errors raised ``from None`` keep the user's line short; TRACEVIZ_DEBUG=1 shows
    what caused them too."""
    bad = tmp_path / "bad.xplane.pb"
    bad.write_bytes(b"\x0a\xff\xff\xff\xff\x0f junk")  # protobuf's DecodeError, raised from None
    assert main(["analyze", str(bad)]) == 2
    quiet = capsys.readouterr().err
    assert quiet.startswith("traceviz: error:") and "Traceback" not in quiet
    monkeypatch.setenv("TRACEVIZ_DEBUG", "1")
    assert main(["analyze", str(bad)]) == 2
    loud = capsys.readouterr().err
    assert "Traceback" in loud and loud.rstrip().endswith(quiet.strip())
    assert "DecodeError" in loud and "which was reported as" in loud


def test_help_imports_no_pandas():
    """`traceviz --help` and a usage error answer before pandas, pyarrow, matplotlib or a
    framework is imported (issue 20's start-up: 0.1 s measured, not timed here)."""
    import subprocess
    import sys

    code = ("import sys\nfrom traceviz.cli import main\n"
            "for argv in (['--help'], ['capture', '--help'], ['analyze', '--help']):\n"
            "    try:\n        main(argv)\n    except SystemExit:\n        pass\n"
            "heavy = {'pandas', 'pyarrow', 'matplotlib', 'torch', 'tensorflow', 'duckdb'}\n"
            "print(sorted(heavy & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"
