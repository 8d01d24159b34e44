"""Two different kernels never read alike, in the terminal's kernel table, the pie legend
and the HTML report: on real traces whose kernels differ only deep in their templates
(or, DeepSeek-V3's grouped GEMMs, only in a namespace), the names shown are distinct
exactly where the raw file's names are, and each shows a part of its own full name."""

from __future__ import annotations

import gzip
import json
import re
from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from tests.conftest import SHARED_TRACES, shared  # noqa: E402
from traceviz.cli import main  # noqa: E402
from traceviz.table.names import demangle  # noqa: E402

FOREIGN = SHARED_TRACES / "foreign" / "kineto"
DEEPSEEK = FOREIGN / "deepseek_v3_train.json"
TRACES = [DEEPSEEK, FOREIGN / "h7_tracelens_h100_owlv2.json.gz",
          FOREIGN / "h4_tracelens_b200_eager.json.gz"]
TOP = 15


def _raw_kernel_totals(path: Path) -> dict[str, float]:
    """Summed duration (µs) per kernel name, straight from the JSON's kernel events."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        events = json.load(f)["traceEvents"]
    totals: dict[str, float] = defaultdict(float)
    for e in events:
        if e.get("ph") == "X" and str(e.get("cat", "")).lower() == "kernel":
            totals[e["name"]] += float(e.get("dur", 0))
    return totals


def _top(totals: dict[str, float], n: int) -> list[str]:
    return [k for k, _ in sorted(totals.items(), key=lambda kv: -kv[1])[:n]]


def _tokens(text: str) -> set[str]:
    return set(re.findall(r"\w+", text))


def _shown_words(shown: str) -> tuple[set[str], set[str]]:
    """The words of a shown name: those read whole, and those beside a ``…`` (which may
    be cut there)."""
    pieces = re.sub(r" #\d+$", "", shown).split("…")
    whole: set[str] = set()
    edge: set[str] = set()
    for i, piece in enumerate(pieces):
        found = [(m.group(0), m.start(), m.end()) for m in re.finditer(r"\w+", piece)]
        for word, start, end in found:
            cut = (i > 0 and start == 0) or (i < len(pieces) - 1 and end == len(piece))
            (edge if cut else whole).add(word)
    return whole, edge


def _made_of(shown: str, full: str) -> bool:
    """``shown`` reads as a part of ``full``: its whole words are words of ``full``, its
    cut words parts of ``full``."""
    whole, edge = _shown_words(shown)
    return whole <= _tokens(full) and all(w in full for w in edge)


def _table_names(out: str) -> list[str]:
    """The name column of the "Top kernels" table in ``analyze``'s output."""
    lines = out[out.index("Top kernels by total time"):].splitlines()
    rows = []
    for line in lines[1:]:
        m = re.match(r"^\s+(\d+)\s{3}(.+?)(?:\s{2,}|$)", line)
        if m:
            rows.append((int(m.group(1)), m.group(2)))
        elif rows and not line.strip():
            break
    assert [r for r, _ in rows] == list(range(1, len(rows) + 1))
    return [name for _, name in rows]


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.name.split(".")[0])
@pytest.mark.parametrize("width", [80, 120])
def test_top_kernel_names_are_distinct_where_the_raw_names_are(path, width, capsys):
    totals = _raw_kernel_totals(path)
    top = _top(totals, TOP)
    assert main(["analyze", str(path), "--top", str(TOP), "--width", str(width)]) == 0
    shown = _table_names(capsys.readouterr().out)
    assert len(shown) == len(top)
    assert len(set(shown)) == len(set(top))  # rows per name: unique, so shown unique
    for i, name in enumerate(shown):
        # each shown name is made of words of its own row's full name (rows tied on
        # total time may come in either order)
        tied = [k for k in top if abs(totals[k] - totals[top[i]]) < 1e-6]
        assert any(_made_of(name, demangle(k)) for k in tied), (name, tied)


def test_deepseek_grouped_gemms_show_what_differs(capsys):
    """The three grouped GEMMs differ only in a namespace (``fp8_dptp128c_acc``,
    ``fp8_ptp128c``, ``m_grouped_fp8_ptp128c``): three names, each with a word only its
    full name has; the full names whole in ``--json`` and ``--wide``."""
    totals = _raw_kernel_totals(shared(DEEPSEEK))
    gemms = sorted(k for k in totals if "GemmKernel" in k)
    assert len(gemms) == 3
    own = {k: _tokens(k) - set().union(*(_tokens(o) for o in gemms if o != k)) for k in gemms}
    assert all(own.values())
    top = _top(totals, TOP)
    for width in (80, 120, 200):
        assert main(["analyze", str(DEEPSEEK), "--top", str(TOP), "--width", str(width)]) == 0
        shown = dict(zip(top, _table_names(capsys.readouterr().out), strict=True))
        assert len({shown[k] for k in gemms}) == 3
        for k in gemms:
            assert set().union(*_shown_words(shown[k])) & own[k], (shown[k], own[k])
    assert main(["analyze", str(DEEPSEEK), "--top", str(TOP), "--json"]) == 0
    listed = [r["name"] for r in json.loads(capsys.readouterr().out)["top_kernels"]]
    assert set(gemms) <= set(listed)
    assert main(["analyze", str(DEEPSEEK), "--top", str(TOP), "--wide", "--width", "400"]) == 0
    wide = capsys.readouterr().out
    assert all(k in wide for k in gemms)


def test_deepseek_pie_legend_tells_the_gemms_apart():
    import traceviz
    from traceviz.analyses import summarize
    from traceviz.render.charts import kernel_pie

    totals = _raw_kernel_totals(shared(DEEPSEEK))
    gemms = sorted(k for k in totals if "GemmKernel" in k)
    fig = kernel_pie(summarize(traceviz.load(DEEPSEEK)), "deepseek")
    labels = [t.get_text().rsplit("  ", 1)[0] for t in fig.axes[0].get_legend().get_texts()]
    plt.close(fig)
    assert len(set(labels)) == len(labels)
    shown = [lab for lab in labels if lab.startswith("device_kernel<")
             and not lab.startswith("device_kernel<Flash")]
    assert len(shown) == 3  # each GEMM above 1% of kernel time has its own slice
    for k in gemms:
        own = _tokens(k) - set().union(*(_tokens(o) for o in gemms if o != k))
        assert sum(bool(set().union(*_shown_words(lab)) & own) for lab in shown) == 1


def test_names_in_lines_of_text_are_told_apart_from_every_kernel(capsys):
    """A line that names a few kernels (advise's repeated sequence, the critical path's
    kernels off the path) names each GEMM so that it is not taken for another GEMM of
    the trace: none reads as the bare ``device_kernel<GemmKernel>``."""
    assert len([k for k in _raw_kernel_totals(shared(DEEPSEEK)) if "GemmKernel" in k]) == 3
    assert main(["advise", str(DEEPSEEK), "--width", "200"]) == 0
    advise = capsys.readouterr().out
    assert main(["analyze", str(DEEPSEEK), "--critical-path", "--width", "200"]) == 0
    path = capsys.readouterr().out
    assert "A sequence of" in advise and "off the path" in path
    for out in (advise, path):
        assert "device_kernel<GemmKernel>" not in out
        assert re.search(r"device_kernel<[\w…]*(ptp128c|acc)", out)
