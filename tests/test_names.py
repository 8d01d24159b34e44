"""Names a reader can tell apart: mangled symbols demangled by cpp_demangle, shortened
names that keep the function, rows that never read alike, ``--wide`` whole names, every
name on one line at any width."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import KINETO, ROOT, shared
from tests.rawref import Reference
from traceviz.parsers import load
from traceviz.table.names import (
    demangle,
    distinct_labels,
    distinct_names,
    middle_cut,
    short_name,
)

NCCL = KINETO / "a100_nccl.json.gz"

VLLM = ("std::enable_if<(((8)>(0)))&&(_typeConvert<c10::BFloat16>::exists), void>::type "
        "vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, c10::BFloat16*, "
        "c10::BFloat16 const*, float, int, int)")
EIGEN = ("void Eigen::internal::EigenMetaKernel<Eigen::TensorEvaluator<Eigen::TensorAssignOp<"
         "Eigen::TensorMap<Eigen::Tensor<float, 1, 1, long>, 16>, Eigen::TensorCwiseBinaryOp<"
         "Eigen::internal::scalar_{op}_op<float, float>, Eigen::TensorMap<Eigen::Tensor<float "
         "const, 1, 1, long>, 16> const> const> const, Eigen::GpuDevice>, long>("
         "Eigen::TensorEvaluator<>, long)")


def test_mangled_kernels_are_demangled_on_load():
    """The two CUTLASS wgrad kernels of the NCCL trace are recorded mangled (``_ZN19cutlass_
    cudnn_train6Kernel...``): the trace names them by their C++ signature, one name per
    symbol, with the raw file's call counts."""
    raw = Reference(shared(NCCL))
    mangled = Counter(e["name"] for e in raw.kernels if e["name"].startswith("_Z"))
    assert len(mangled) == 2
    t = load(NCCL)
    k = t.events[t.events["kind"] == "kernel"]
    names = k["name"].astype(str)
    assert not names.str.startswith("_Z").any()
    for symbol, count in mangled.items():
        signature = demangle(symbol)
        assert signature.startswith("void cutlass_cudnn_train::Kernel<cutlass_cudnn_train::"
                                    "conv::kernel::ImplicitGemmConvolution<")
        assert (names == signature).sum() == count
    # what is not a mangled symbol, or not a well-formed one, stays as recorded
    assert demangle("aten::mm") == "aten::mm"
    assert demangle("_Z") == "_Z" and demangle("_ZN2ck") == "_ZN2ck"
    assert demangle("_Z3fooi") == "foo(int)"


def test_short_name_keeps_the_function_not_its_return_type():
    assert short_name(VLLM, 60) == "fused_add_rms_norm_kernel<BFloat16, 8>"
    assert short_name("(12 others)") == "(12 others)"


@pytest.mark.parametrize("width", [16, 24, 32, 44, 60])
def test_rows_never_read_alike(width):
    """The NCCL trace's kernels (two CUTLASS kernels that differ only deep in their
    templates, cuDNN batch-norm kernels that differ in one argument) and Eigen kernels that
    differ in their functor: as many shown names as distinct names, at every width."""
    t = load(shared(NCCL))
    names = sorted(set(t.events.loc[t.events["kind"] == "kernel", "name"].astype(str)))
    names += [EIGEN.format(op=op) for op in ("sum", "product", "difference")]
    shown = distinct_names(names, width)
    assert len(set(shown)) == len(names)
    assert all(len(s) <= width for s in shown)
    # the same name twice reads the same (rows per launch configuration)
    assert distinct_names([names[0], names[0]], width) == [short_name(names[0], width)] * 2
    # without a clash, a name reads as short_name has it
    alone = [n for n in names if short_name(n, width) not in
             {short_name(m, width) for m in names if m != n}]
    assert alone and all(shown[names.index(n)] == short_name(n, width) for n in alone)


def test_what_tells_rows_apart_is_shown():
    shown = distinct_names([EIGEN.format(op="sum"), EIGEN.format(op="product")], 44)
    assert shown[0].startswith("EigenMetaKernel<") and "scalar_sum_op" in shown[0]
    assert "scalar_product_op" in shown[1]
    sm80 = ["sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_stage3_warpsize2x2x1",
            "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x64x8_stage3_warpsize2x2x1"]
    a, b = distinct_names(sm80, 30)
    assert "128x128x8" in a and "64x64x8" in b


def test_wide_gives_names_priority(capsys):
    """``--wide``: every listed name up to half the width whole, and on one line: every
    row of the table holds its figures."""
    from traceviz.analyses import summarize
    from traceviz.cli import main

    s = summarize(load(shared(NCCL)))
    assert main(["analyze", str(NCCL), "--wide", "--width", "200", "--top", "10"]) == 0
    out = capsys.readouterr().out
    for name in s.kernels["name"].head(10):
        if len(name) <= 100:
            assert name in out
    table = _rows(out, "Top kernels by total time")
    assert len(table) == 11  # ten rows and "(N others)", each one line with its share
    assert all(line.rstrip().endswith("%") for line in table)
    assert main(["analyze", str(NCCL), "--width", "200", "--top", "10"]) == 0
    narrow = capsys.readouterr().out
    long = [n for n in s.kernels["name"].head(10) if len(n) > 60]
    assert long and not any(n in narrow for n in long)


def _rows(out: str, title: str) -> list[str]:
    """The rows of the table under ``title``: from below its header's rule to the first
    blank line."""
    lines = out.split(title, 1)[1].splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.strip().startswith("─")) + 1
    end = next(i for i in range(start, len(lines)) if not lines[i].strip())
    return lines[start:end]


def test_a_name_as_recorded_keeps_its_end():
    """A middle cut keeps the beginning (a third) and the end: the end tells
    ``Optimizer.step#AdamW.step`` from ``Optimizer.step#SGD.step``."""
    name = "optimizer → Optimizer.step#AdamW.step"
    assert middle_cut(name, 24) == name[:7] + "…" + name[-16:] == "optimiz….step#AdamW.step"
    assert middle_cut("Optimizer.step#AdamW.step", 25) == "Optimizer.step#AdamW.step"
    assert len(middle_cut("x" * 100, 30)) == 30
    a, b = distinct_labels(["optimizer → Optimizer.step#AdamW.step",
                            "optimizer → Optimizer.step#SGD.step"], 20)
    assert a.endswith("#AdamW.step") and b.endswith("#SGD.step") and len(a) == 20
    # alike once cut: numbered, as distinct_names' last resort
    c, d = distinct_labels(["a" * 10 + "X" + "b" * 30, "a" * 10 + "Y" + "b" * 30], 20)
    assert c != d and c.endswith("#1") and d.endswith("#2")
    # a plain kernel name keeps its end too
    assert short_name("volta_sgemm_128x64_nn_with_a_long_tail_of_words", 20).endswith(
        "words")


@pytest.mark.parametrize("width", [60, 120, 200])
def test_range_names_are_never_folded(width, capsys):
    """The script run's ranges (``optimizer → Optimizer.step#SGD.step``, nested module
    ranges): each row on one line with its figures at any width, the name's end shown."""
    from traceviz.cli import main

    run = ROOT / "sample_traces" / "script" / "lstm_train"
    assert main(["analyze", str(run), "--width", str(width)]) == 0
    out = capsys.readouterr().out
    table = _rows(out, "Ranges by total time")
    assert len(table) == 10  # the ten range names, one line each
    assert all("%" in line for line in table)  # the share column
    names = [line.split("   ")[0].strip() for line in table]
    assert any(n.endswith("step#SGD.step") for n in names)
    assert any(n.endswith("#SGD.zero_grad") for n in names)
    assert any(n.endswith("lstm (LSTM)") for n in names)


def _per_character(s: str, depth: int) -> str:
    """``_simplified``'s bracket walk as first written, a character at a time: the
    reference its bracket-by-bracket walk must equal."""
    out, angle, paren = [], 0, 0
    for ch in s:
        if ch == "(":
            paren += 1
        elif ch == ")":
            paren = max(0, paren - 1)
        elif paren:
            continue
        elif ch == "<":
            angle += 1
            if angle <= depth:
                out.append(ch)
            elif angle == depth + 1:
                out.append("…")
        elif ch == ">":
            if angle <= depth:
                out.append(ch)
            angle = max(0, angle - 1)
        elif angle <= depth:
            out.append(ch)
    return "".join(out)


def _return_type_cut(s: str) -> str:
    """``_function_part`` a character at a time (the reference)."""
    angle = paren = cut = 0
    for i, ch in enumerate(s):
        if ch == "<" and not paren:
            angle += 1
        elif ch == ">" and not paren:
            angle = max(0, angle - 1)
        elif ch == "(":
            if not angle and paren == 0 and not s.startswith("(anonymous", i):
                break
            paren += 1
        elif ch == ")":
            paren = max(0, paren - 1)
        elif ch == " " and not angle and not paren:
            cut = i + 1
    return s[cut:]


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet="ab:<>() ,_{}1", max_size=40), st.sampled_from([0, 1, 2, 10_000]))
def test_names_are_walked_bracket_by_bracket_as_character_by_character(s, depth):
    """The shortening walks the text between brackets whole: the same name as a walk of
    every character, on bracket soup and on every kernel name of a real trace."""
    import re

    from traceviz.table import names

    assert names._function_part(s) == _return_type_cut(s)
    assert names._function_part("(anonymous namespace)::" + s) == \
        _return_type_cut("(anonymous namespace)::" + s)
    walked = names._simplified(s, depth, namespaces=True)
    cut = names._LAMBDA.sub("", _return_type_cut(s[5:] if s.startswith("void ") else s))
    assert walked == re.sub(r"\s+>", ">", re.sub(r"\s+", " ",
                                                 _per_character(cut, depth))).strip()


def test_real_kernel_names_shorten_as_character_by_character():
    import re

    from traceviz.table import names

    for name in load(shared(NCCL)).events["name"].cat.categories:
        s = names._LAMBDA.sub("", _return_type_cut(name[5:] if name.startswith("void ")
                                                   else name))
        s = names._NAMESPACE.sub(r"\1", s)
        want = re.sub(r"\s+>", ">", re.sub(r"\s+", " ", _per_character(s, 2))).strip()
        assert names._simplified(name, 2) == want
