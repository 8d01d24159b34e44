"""Names no real trace holds, 1 MB long, through the name functions and every name pattern:
each call costs well under a second of CPU (a 40 KB name took seconds in a quadratic
pattern, a run of spaces minutes), and says what the name says. The regex pieces that
keep patterns linear find exactly what the plain patterns find."""

from __future__ import annotations

import random
import re
import time
from collections.abc import Callable

import pandas as pd
import pytest

from traceviz.algos.patterns import in_line, in_word
from traceviz.analyses.advice.runkind import BACKWARD_OP, OPTIMIZER_KERNEL
from traceviz.analyses.compare.amp_precision import _types
from traceviz.analyses.efficiency.workload import _precision_of_names
from traceviz.opcost.peaks import find, link_peak
from traceviz.table.classify import (
    cast_kernel_flags,
    category_codes,
    collective_kind,
    tensor_core_flags,
)
from traceviz.table.input_calls import input_framework
from traceviz.table.names import (
    LONGEST_NAME,
    bounded,
    demangle,
    distinct_labels,
    distinct_names,
    short_name,
)
from traceviz.table.schema import CATEGORIES

MB = 1 << 20
CPU_S = 1.0  # CPU seconds a call may take (a busy machine slows wall time, not this)


def _rep(unit: str, tail: str = "") -> str:
    """``unit`` repeated whole to at least 1 MB, then ``tail``."""
    return unit * (MB // len(unit) + 1) + tail


# (shape, name, its short name at 40 columns, category, a cast kernel, collective kind):
# what a name of 1 MB says is read from its first and last 16,384 characters
SHAPES = [
    ("identifier", "void ns::kernel_" + "a" * MB + "<float>(int)",
     "kernel_" + "a" * 32 + "…", "other", False, None),
    ("namespace chain", _rep("a::") + "kernel<int>(int)", "a…kernel<int>", "other", False,
     None),
    ("anonymous namespaces", _rep("(anonymous namespace)::") + "k<int>(int)", "::k<int>",
     "other", False, None),
    ("spaces", "k" + " " * MB + "x<int>", "x<int>", "other", False, None),
    ("spaces before a clone", "fmha" + " " * MB + "[clone .kd]",
     "fmha" + " " * 9 + "…" + " " * 15 + "[clone .kd]", "attention", False, None),
    ("templates", "k" + "<" * (MB // 2) + ">" * (MB // 2), "k<<…>>>", "other", False, None),
    ("template list", "void k<" + _rep("a<b>, ") + "c>(int)",
     "k" + "<a<b>, a<b>, a<b>, a<b>, a<b>, a<b>, a…"[:-1] + "…", "other", False, None),
    ("lambdas", _rep("::{lambda") + "<int>", "::" + "{" * 37 + "…", "other", False, None),
    ("mangled", "_ZN" + _rep("3abc") + "E", "_ZN3abc3abc3a…c3abc3abc3abc3abc3abc3abcE",
     "other", False, None),
    ("BatchPrefill", _rep("BatchPrefill") + "Kernel",
     "BatchPrefillB…hPrefillBatchPrefillKernel", "attention", False, None),
    ("copy_kernel", _rep("copy_kernel ") + "WithCast", "copy_kernel c…ernel copy_kernel WithCast",
     "elementwise", True, None),
    ("reformat", _rep("reformat") + "kernel", "reformatrefor…rmatreformatreformatkernel",
     "elementwise", True, None),
    ("nccl", "ncclDevKernel_" + _rep("nccl") + "Send", "ncclDevKernel…clncclncclncclncclncclSend",
     "communication", False, "send_recv"),
    ("DeepEP", _rep("deep_ep") + "::ep::" + _rep("::ep::") + "notify",
     "deep_epdeep_e…::::ep::::ep::::ep::notify", "communication", False, "notify"),
    ("Cijk_", _rep("Cijk_") + "_BB_", "Cijk_Cijk_Cij…k_Cijk_Cijk_Cijk_Cijk__BB_", "gemm", False,
     None),
    ("Tensile", "Cijk_Alik_Bljk_BBS_BH_" + _rep("MT64x64x32_"),
     "Cijk_Alik_Blj…x32_MT64x64x32_MT64x64x32_", "gemm", False, None),
    ("Eigen cast", "TensorAssignOp<TensorMap<a<b>c>, TensorConversionOp<" + "a" * MB,
     "TensorAssignOp<TensorMap<a…c>, TensorCo…", "other", False, None),
]
PRECISION = {"identifier": "fp32", "Tensile": "bf16"}  # <float>; Tensile's _BB_: bf16


def _cpu(fn: Callable[[], object]) -> tuple[object, float]:
    start = time.process_time()
    out = fn()
    return out, time.process_time() - start


@pytest.mark.parametrize("shape, name, short, category, cast, kind", SHAPES,
                         ids=[s[0] for s in SHAPES])
def test_a_1mb_name_costs_under_a_second_per_call(shape, name, short, category, cast, kind):
    index = pd.Index([name])
    calls = {
        "short_name": (lambda: short_name(name, 40), short),
        "distinct_names": (lambda: distinct_names([name, name + "x", "other"], 40)[2], "other"),
        "distinct_labels": (lambda: len(distinct_labels([name, name + "x"], 40)[0]), 40),
        "demangle": (lambda: demangle(name) == name, True),
        "category": (lambda: CATEGORIES[category_codes(index)[0]], category),
        "cast": (lambda: bool(cast_kernel_flags(index)[0]), cast),
        "collective": (lambda: collective_kind(name), kind),
        "tensor core": (lambda: bool(tensor_core_flags(index)[0]), shape == "Tensile"),
        "precision": (lambda: _precision_of_names(index)[0], PRECISION.get(shape, "unknown")),
        "backward": (lambda: bool(BACKWARD_OP.search(name)), False),
        "optimizer": (lambda: bool(OPTIMIZER_KERNEL.search(name)), False),
        "input": (lambda: input_framework(name), None),
        "types": (lambda: _types(pd.Series([name]))[0], ""),
        "device": (lambda: (find(name), link_peak(name)), (None, None)),
    }
    for what, (fn, want) in calls.items():
        got, cpu = _cpu(fn)
        assert got == want, (shape, what)
        assert cpu < CPU_S, (shape, what, cpu)


def test_a_name_up_to_the_limit_is_read_whole():
    name = "k" * LONGEST_NAME
    assert bounded(name) is name
    longer = "a" * LONGEST_NAME + "b"
    assert bounded(longer) == "a" * (LONGEST_NAME // 2) + "…" + "a" * (LONGEST_NAME // 2 - 1) + "b"
    assert len(bounded("x" * MB)) == LONGEST_NAME + 1


@pytest.mark.parametrize("shape, unit", [
    ("many A in a word", "BatchPrefill"), ("many A in a line", "copy_kernel "),
    ("many A between words", "deep_ep::"), ("Tensile", "Cijk_"), ("spaces", " "),
    ("types", " types:["), ("DataLoader", "DataLoader")])
def test_the_patterns_stay_linear(shape, unit):
    """The patterns rewritten on 1 MB of one unit: linear time, so under a second; the plain
    ones (kept here) need minutes for the same."""
    text = _rep(unit)
    patterns = [OPTIMIZER_KERNEL, BACKWARD_OP,
                re.compile(in_line(in_word("copy_kernel", "*", r"[^\w\n]"), "WithCast")),
                re.compile(in_word("Cijk_", "+?", "_BB"), re.IGNORECASE)]
    for rx in patterns:
        _, cpu = _cpu(lambda rx=rx: rx.search(text))
        assert cpu < CPU_S, (shape, rx.pattern[:60], cpu)


PIECES = ["ab", "ba", "a", "b", "x", "_", " ", "\n", ":", "::", "Cijk_", "_BB", "B", "c"]
CASES = [  # (plain pattern, the same from in_word/in_line)
    (r"ab\w*ba", in_word("ab", "*", "ba")),
    (r"ab\w+?ba", in_word("ab", "+?", "ba")),
    (r"a\w*b", in_word("a", "*", "b")),
    (r"Cijk_\w+?_BB", in_word("Cijk_", "+?", "_BB")),
    (r"ab\w*::", in_word("ab", "*", "::")),
    (r"b\w*$", in_word("b", "*", "$")),
    (r"ab.*ba", in_line("ab", "ba")),
    (r"::.*x", in_line("::", "x")),
    (r"ab\w*::.*x", in_line(in_word("ab", "*", "::"), "x")),
    (r"ab\w*\W.*x", in_line(in_word("ab", "*", r"[^\w\n]"), "x") + "|"
     + in_word("ab", "*", r"\n") + r"[^\n]*x"),
]


@pytest.mark.parametrize("plain, piece", CASES, ids=[c[0] for c in CASES])
def test_the_pieces_find_what_the_plain_pattern_finds(plain, piece):
    rng = random.Random(61)
    a, b = re.compile(plain), re.compile(piece)
    for _ in range(20_000):
        s = "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 12)))
        assert bool(a.search(s)) == bool(b.search(s)), (plain, s)
