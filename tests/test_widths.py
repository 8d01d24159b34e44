"""No figure is ever cut: every command that prints tables, at widths 60 to 200 and piped,
keeps each line within the width, cuts no figure, and prints only numbers that its
``--json`` holds (a column a narrow terminal leaves out is named, never cut)."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from tests.conftest import H200, SHARED_TRACES, shared_argv
from traceviz.cli import main

ROOT = Path(__file__).resolve().parents[1]
GPU = ROOT / "sample_traces" / "gpu"
CPU = ROOT / "sample_traces" / "cpu"

CASES: dict[str, list[str]] = {
    "analyze gpu": ["analyze", str(GPU / "cudnn_torch-fp16" / "train")],
    "analyze gpu by config": ["analyze", str(GPU / "fine_torch" / "train"), "--by", "config",
                              "--top", "8"],
    "analyze cpu": ["analyze", str(CPU / "jit_torch")],
    "analyze modules": ["analyze", str(ROOT / "sample_traces" / "script" / "lstm_train")],
    "analyze graph": ["analyze", str(GPU / "graph_torch" / "train"), "--critical-path"],
    "analyze nccl": ["analyze", str(SHARED_TRACES / "kineto" / "a100_nccl.json.gz")],
    "analyze wide": ["analyze", str(GPU / "fine_torch" / "train"), "--wide", "--top", "8"],
    "compare": ["compare", str(GPU / "cudnn_torch" / "train"),
                str(GPU / "cudnn_torch-fp16" / "train"), str(GPU / "fine_torch" / "train")],
    "amp": ["amp", str(GPU / "cudnn_torch" / "train"), str(GPU / "cudnn_torch-bf16" / "train")],
    "advise": ["advise", str(GPU / "fine_torch" / "train")],
    "critical path": ["analyze", str(SHARED_TRACES / "kineto" / "a100_alexnet.json.gz"),
                      "--critical-path", "[param|pytorch.model.alex_net|0|0|0|measure|forward]"],
    "whatif": ["whatif", str(GPU / "cudnn_torch" / "train")],
    "ladder": ["ladder", "--from", str(H200)],
    "whatif brief": ["whatif", str(GPU / "cudnn_torch" / "train"), "--brief"],
    # a step window past its mark, three overlapped streams, the path's device part
    "analyze deepseek": ["analyze", str(SHARED_TRACES / "foreign" / "kineto" /
                                        "deepseek_v3_train.json"), "--critical-path"],
    "whatif serialized": ["whatif", str(SHARED_TRACES / "foreign" / "kineto" /
                                        "deepseek_v3_train.json"), "--brief",
                          "--scenario", "drop_stream_sync"],
}
WIDTHS = (60, 80, 100, 120, 160, 200, None)  # None: piped, no --width

# a figure: a signed number with thousands commas and decimals, and its unit
_NUMBER = re.compile(r"(?<![\w.<…])([+\-−]?)(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?"
                     r"(?:(?: |[ ]*\n[ ]*)?(ns|µs|ms|s|%|x|GiB|MiB|KiB|B|GB|G)(?![\w]))?"
                     r"(?![\w…]|\.\d)")
# what rich leaves of a cut figure: "65.…", "1.994 …", "292.…"
_CUT = re.compile(r"(?<![\w<])\d[\d,]*\.\d*…|(?<![\w<])\d(?:[\d,.]*\d)? …")
_SCALE = {"ns": (1, 1e-9), "µs": (1e3, 1e-6), "ms": (1e6, 1e-3), "s": (1e9, 1)}


def _walk(x, numbers: list[float], strings: list[str]) -> None:
    if isinstance(x, dict):
        for k, v in x.items():
            strings.append(str(k))
            _walk(v, numbers, strings)
    elif isinstance(x, list):
        for v in x:
            _walk(v, numbers, strings)
    elif isinstance(x, bool) or x is None:
        return
    elif isinstance(x, (int, float)):
        if math.isfinite(x):
            numbers.append(abs(float(x)))
    else:
        strings.append(str(x))


def _candidates(x: float, unit: str | None) -> list[float]:
    """What a JSON number ``x`` prints as in ``unit``: ns (and seconds) for times,
    fractions (and percents) for %, bytes for binary sizes, and plain or per 10^9/10^12
    for counts, GFLOP, GB and TFLOP/s."""
    if unit in _SCALE:
        ns, s = _SCALE[unit]
        return [x / ns, x / s]
    if unit == "%":
        return [100 * x, x]
    if unit in ("GiB", "MiB", "KiB", "B"):
        return [x / {"GiB": 1 << 30, "MiB": 1 << 20, "KiB": 1 << 10, "B": 1}[unit]]
    return [x, x / 1e9, x / 1e12]


def _found(token: re.Match, numbers: list[float], text: str) -> bool:
    sign, whole, frac, unit = token.groups()  # noqa: RUF059 (the sign: values compare by size)
    value = float(whole.replace(",", "") + (frac or ""))
    digits = len(frac) - 1 if frac else 0
    tol = 0.5 * 10 ** -digits + 1e-9 * max(value, 1)
    if any(abs(c - value) <= tol for x in numbers for c in _candidates(x, unit)):
        return True
    # a figure inside a sentence the JSON holds (advice evidence, notes, names)
    return re.sub(r"\s+", " ", token.group(0)).lstrip("+-−") in text


def _figures(out: str) -> list[re.Match]:
    """The figures of ``out``, but for the line naming the columns a width left out (a
    unit wrapped onto the next line stays with its number)."""
    text = "\n".join(line.rstrip() for line in out.splitlines()
                     if not line.startswith("left out at "))
    return list(_NUMBER.finditer(text))


@pytest.fixture(scope="module")
def json_of():
    cache: dict[str, tuple[list[float], str]] = {}

    def get(case: str, capsys) -> tuple[list[float], str]:
        if case not in cache:
            assert main([*CASES[case], "--json"]) == 0
            numbers: list[float] = []
            strings: list[str] = []
            _walk(json.loads(capsys.readouterr().out), numbers, strings)
            cache[case] = (sorted(numbers), "\n".join(strings))
        return cache[case]

    return get


@pytest.mark.parametrize("width", WIDTHS, ids=lambda w: f"w{w or 'piped'}")
@pytest.mark.parametrize("case", list(CASES))
def test_no_figure_is_cut(case, width, json_of, capsys):
    argv = shared_argv(CASES[case]) + ([] if width is None else ["--width", str(width)])
    numbers, strings = json_of(case, capsys)
    assert main(argv) == 0
    out = capsys.readouterr().out
    limit = width or 120  # piped: 120 columns
    assert max(len(line) for line in out.splitlines()) <= limit
    assert not _CUT.findall(out), _CUT.findall(out)
    figures = _figures(out)
    assert len(figures) > 10
    missing = [f.group(0) for f in figures if not _found(f, numbers, strings)]
    assert not missing, missing[:20]
    if width is not None and width <= 80 and case.startswith(("analyze", "compare")):
        assert f"left out at {width} columns: " in out  # what left is named


def test_models_table_fits(capsys):
    for width in (60, 80, 120):
        assert main(["models", "--width", str(width)]) == 0
        out = capsys.readouterr().out
        assert max(len(line) for line in out.splitlines()) <= width
        assert "…" not in out
    assert main(["models", "--json"]) == 0
    names = [v["name"] for v in json.loads(capsys.readouterr().out)]
    assert main(["models", "--width", "60"]) == 0
    out = capsys.readouterr().out
    assert all(n in out for n in names)


def test_the_checks_find_a_cut_figure():
    """The detectors themselves: a cropped figure, a figure the JSON lacks."""
    assert _CUT.findall("share 65.… x") and _CUT.findall("total 1.994 … ")
    assert not _CUT.findall("Array<char*, 3…")
    numbers = [12_617_000.0, 0.078, 3.0]
    found = {f.group(0): _found(f, numbers, "") for f in _figures("12.617 ms 7.8% 3 4.1 ms")}
    assert found == {"12.617 ms": True, "7.8%": True, "3": True, "4.1 ms": False}
