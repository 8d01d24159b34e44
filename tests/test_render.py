"""Golden files for the rich output at a fixed width; name shortening; categories."""

from __future__ import annotations

import io
import os

import pytest
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from tests.conftest import KINETO, ROOT, shared
from traceviz.analyses import summarize
from traceviz.parsers import load
from traceviz.render.terminal.summary import print_summary, render_summary
from traceviz.table.classify import CAST_KERNEL, _category_of
from traceviz.table.names import short_name
from traceviz.units import fmt_ns, fmt_pct

GOLDEN = ROOT / "tests" / "golden"


def _plain(cell) -> str:
    return Text.from_markup(cell).plain if isinstance(cell, str) else Text(cell).plain \
        if not isinstance(cell, Text) else cell.plain


def _structure(renderable) -> list[str]:
    """What the summary says, independent of how rich lays it out: each table as its
    title, headers and rows (cells as plain text, `` | `` between), each text as is."""
    if isinstance(renderable, Group):
        return [line for r in renderable.renderables for line in _structure(r)]
    if isinstance(renderable, Table):
        columns = [[_plain(c) for c in col.cells] for col in renderable.columns]
        lines = [f"## {_plain(renderable.title or '')}",
                 " | ".join(_plain(col.header) for col in renderable.columns)]
        lines += [" | ".join(row) for row in zip(*columns, strict=True)]
        if renderable.caption:
            lines.append(f"caption: {_plain(renderable.caption)}")
        return lines
    return _plain(renderable).splitlines()


@pytest.mark.parametrize("name", ["a100_alexnet", "mi250_rocm_train", "cpu_only"])
def test_golden_summary(name):
    """The golden file holds the summary's tables cell by cell (a rich release that
    draws tables differently does not change it); the layout is checked for width."""
    trace = load(shared(KINETO / f"{name}.json.gz"))
    trace.meta["source_file"] = f"{name}.json.gz"  # the same on every machine
    summary = summarize(trace)
    got = "\n".join(_structure(render_summary(summary, top=10, width=100))) + "\n"
    golden = GOLDEN / f"{name}_w100.txt"
    if os.environ.get("TRACEVIZ_UPDATE_GOLDEN"):
        golden.write_text(got)
    assert got == golden.read_text()

    buf = io.StringIO()
    print_summary(Console(file=buf, width=100, color_system=None, force_terminal=False),
                  summary, top=10)
    lines = buf.getvalue().splitlines()
    assert max(len(line) for line in lines) <= 100
    for top in summary.kernels["name"].head(1):
        # its beginning, which a cut keeps (at the end, or in the middle of a plain name)
        assert any(short_name(top, 200)[:12] in line for line in lines)


def test_short_name():
    long = ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
            "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, "
            "at::detail::Array<char*, 3>)")
    expected = "vectorized_elementwise_kernel<4, CUDAFunctor_add<float>, Array<char*, 3>>"
    assert short_name(long, 80) == expected
    assert short_name("aten::mm") == "aten::mm"
    assert short_name("volta_sgemm_128x64_nn") == "volta_sgemm_128x64_nn"
    assert len(short_name(long, 30)) == 30 and short_name(long, 30).endswith("…")


@pytest.mark.parametrize("name,category", [
    ("volta_sgemm_128x64_nn", "gemm"),
    ("sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x64", "gemm"),
    ("nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NNT", "gemm"),
    ("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x64_16x4_tn_align4>(Params)", "gemm"),
    ("aten::addmm", "gemm"),
    ("RNN_blockPersist_fp_LSTM<float, float, float, 128, 1, 1>", "rnn"),
    ("void at::native::(anonymous namespace)::lstm_cell_forward<float, float, int, 2>", "rnn"),
    ("aten::mkldnn_rnn_layer", "rnn"),
    ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", "communication"),
    ("void at::native::reduce_kernel<128, 4, at::native::ReduceOp<float>>", "reduction"),
    ("triton_red_fused_sum_0", "reduction"),
    ("triton_poi_fused_add_sigmoid_0", "elementwise"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>",
     "elementwise"),
    ("aten::sigmoid", "elementwise"),
    ("aten::normal_", "elementwise"),
    ("aten::empty", "other"),
])
def test_categories(name, category):
    assert _category_of(name) == category


def test_cast_kernel_names():
    assert CAST_KERNEL.search("void at::native::unrolled_elementwise_kernel<at::native::"
                              "direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}, "
                              "LoadWithCast<1>, StoreWithCast<1> >")
    assert CAST_KERNEL.search("void at::native::vectorized_elementwise_kernel<4, "
                              "at::native::bfloat16_copy_kernel_cuda(at::TensorIteratorBase&)>")
    assert not CAST_KERNEL.search("void at::native::unrolled_elementwise_kernel<"
                                  "at::native::CUDAFunctor_add<double>, LoadWithCast<2>, "
                                  "StoreWithCast<1> >")


def test_fmt_ns():
    assert fmt_ns(999) == "999 ns"
    assert fmt_ns(1500) == "1.5 µs"
    assert fmt_ns(2_500_000) == "2.500 ms"
    assert fmt_ns(3e9) == "3.000 s"
    assert fmt_ns(None) == "–"


def test_names_with_brackets_print_as_they_are(tmp_path, capsys):
    """Names from traces are text, not rich markup: `k[/cfg]` crashed analyze (exit 3),
    `f(T) [with T = float]` lost its bracket."""
    import gzip
    import json

    from traceviz.cli import main

    with gzip.open(shared(KINETO / "mi250_rocm_train.json.gz")) as f:
        doc = json.load(f)
    kernels = [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]
    first = kernels[0]["name"]
    for e in kernels:
        if e["name"] == first:
            e["name"] = "k[/cfg] [with T = float]"
    path = tmp_path / "brackets.json"
    path.write_text(json.dumps(doc))
    assert main(["analyze", str(path), "--width", "200", "--wide"]) == 0
    out = capsys.readouterr().out
    assert "k[/cfg] [with T = float]" in out
    assert main(["compare", str(path), str(path)]) == 0


def test_plural():
    from traceviz.units import plural

    assert plural(1, "step") == "1 step" and plural(2, "gap") == "2 gaps"
    assert plural(0, "other") == "0 others" and plural(1234, "call") == "1,234 calls"


def test_header_says_summed_over_gpus_and_copies_apart():
    """A 2-GPU window: span and busy add up per GPU (not wall time) and say so; the share
    of device time in copies is shown beside busy."""
    from traceviz.analyses import summarize

    t = load(shared(KINETO.parent / "nsys" / "h100_2gpu_window.sqlite"))
    s = summarize(t)
    assert len(s.devices) == 2
    text = "\n".join(_structure(render_summary(s, width=160)))
    assert f"span (summed over 2 GPUs) | {fmt_ns(s.span_ns)}" in text
    cats = s.categories.set_index("category")["total_ns"]
    copies = (cats.get("memcpy", 0) + cats.get("memset", 0)) / s.device_total_ns
    assert f"copies (memcpy/memset) {fmt_pct(copies)} of device time" in text


@pytest.mark.parametrize("width", [60, 70, 80, 100, 120, 160, 200])
def test_phase_table_never_cuts_a_figure(width):
    """The phases table fits any width by leaving whole columns out (and saying which);
    every figure it shows is whole: the wall time of each phase appears as computed."""
    import io

    from traceviz.analyses import summarize

    path = ROOT / "sample_traces" / "gpu" / "cudnn_torch" / "train" / "trace.parquet"
    s = summarize(load(path))
    buf = io.StringIO()
    print_summary(Console(file=buf, width=width, color_system=None, force_terminal=False), s)
    out = buf.getvalue()
    start = out.index("Phases")
    # the phases table alone: up to the next section (the host wait's names may shorten)
    block = out[start:min(out.find(t, start) % (len(out) + 1) for t in
                          ("Host wait by cause", "Launch overhead"))]
    assert "…" not in block
    assert max(len(line) for line in block.splitlines()) <= width
    for r in s.phases.itertuples(index=False):
        assert fmt_ns(r.wall_ns / s.steps) in block
        assert fmt_ns(r.busy_ns / s.steps) in block


def test_a_copied_run_folder_names_its_own_raw_trace(capsys):
    """The committed H100 runs were imported on another machine (/tmp/...): the header
    names the raw trace beside the table, which exists."""
    from pathlib import Path

    from traceviz.cli import main
    from traceviz.trace import Trace

    run = ROOT / "sample_traces" / "gpu" / "graph_torch" / "train"
    t = Trace.load(run / "trace.parquet")
    assert Path(t.meta["source_file"]) == run / "trace.pt.trace.json.gz"
    assert main(["analyze", str(run), "--width", "200"]) == 0
    assert str(run / "trace.pt.trace.json.gz") in capsys.readouterr().out


@pytest.mark.parametrize("trace", [KINETO / "a100_diff_control.json.gz",
                                   KINETO.parent / "nsys" / "h100_2gpu_window.sqlite",
                                   KINETO / "cpu_only.json.gz"])
def test_table_widths_are_rich_measures(trace, monkeypatch):
    """Fitting measures a table from its cells' text, not by rendering it: the same width
    rich measures, for every table analyze fits, at every width and form tried (each
    form's measure is a sum of its columns' widths, taken once per table)."""
    from traceviz.render.terminal import fit

    own = fit._form_width
    seen = []

    def both(sizes: fit._Sizes, kept: list[int], two_lines: bool) -> int:
        cols = sizes.cols
        table = fit._build("", [cols[i] for i in kept],
                           [[(cols[i], row[i]) for i in kept] for row in sizes.rows],
                           two_lines, sizes.name_width, sizes.wide, measuring=True)
        seen.append((tuple(c.header for c in cols), own(sizes, kept, two_lines),
                     fit._width(table), fit.measured_width(table)))
        return seen[-1][3]

    monkeypatch.setattr(fit, "_form_width", both)
    s = summarize(load(trace), with_efficiency=True)
    for width in (40, 72, 100, 160):
        for wide in (False, True):
            print_summary(Console(file=io.StringIO(), width=width), s, top=15, wide=wide)
    assert seen and all(ours == cells == rich for _, ours, cells, rich in seen), \
        [s for s in seen if not s[1] == s[2] == s[3]][:5]
