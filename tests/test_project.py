"""Project-level promises: ruff-clean, analyze without torch/tensorflow, one launch-API list,
the layers and the layout (docs/layout.md)."""

from __future__ import annotations

import functools
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests import layers
from tests.conftest import KINETO, ROOT


def test_ruff_clean():
    ruff = shutil.which("ruff") or str(ROOT / ".venv" / "bin" / "ruff")
    if not shutil.which(ruff):
        pytest.fail("ruff is part of the test extras and should be installed")
    r = subprocess.run([ruff, "check", str(ROOT)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("trace", [KINETO / "a100_alexnet.json.gz",
                                   KINETO.parent / "xplane" / "tf24_bert_amp_gpu.xplane.pb.gz"])
def test_analyze_needs_no_deep_learning_framework(tmp_path, trace):
    code = (
        "import sys\n"
        "for m in ('torch', 'tensorflow', 'jax', 'keras'):\n"
        "    sys.modules[m] = None  # any import of them now fails\n"
        "from traceviz.cli import main\n"
        f"sys.exit(main(['analyze', {str(trace)!r}, '--json']))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert '"kernels"' in r.stdout


def test_launch_api_names_live_in_one_module():
    hits = [p for p in (ROOT / "traceviz").rglob("*.py")
            if "cudaLaunchKernelExC" in p.read_text()]
    hits += [p for p in (ROOT / "analyses").rglob("*.py") if "cudaLaunchKernelExC" in p.read_text()]
    assert [p.name for p in hits] == ["launch_apis.py"]


def _modules() -> dict[str, Path]:
    return layers.modules()


def _imports(path: Path, mods: dict[str, Path], name: str) -> set[str]:
    """The package's modules module ``name`` imports (``tests/layers.py``): absolute,
    relative, lazy, by ``importlib``, in the ``else:`` of ``if TYPE_CHECKING:``."""
    return layers.project_imports(path.read_text(), name, mods, path)


def test_no_import_circle():
    """No module imports, even lazily, a module that imports it back (through any chain):
    each part stays readable and testable on its own."""
    import graphlib

    graph = _graph()
    # a package imports its own modules (``parsers/__init__`` re-exports ``load``); the
    # edge from a module to its package is the one Python adds, not a design dependency
    for m in graph:
        graph[m] = {d for d in graph[m] if not m.startswith(d + ".")}
    try:
        list(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as e:
        pytest.fail(f"import circle: {' -> '.join(e.args[1])}")
    assert len(graph) > 80 and graph["traceviz.parsers.normalize"] >= {"traceviz.trace"}


# The layers: each part of the package by the prefixes of its modules (the first match),
# and the parts each one may import. Read bottom up: definitions, the table and its
# algorithms, files and the machine, the Trace, parsers, analyses, renderers, the
# orchestration (capture, ladder, rank sets), the command line. docs/layout.md draws it.
PARTS: tuple[tuple[str, str], ...] = (
    # shared definitions, standard library only: errors, units, and what a run's benchmark
    # figures mean (the runners write them, the analyses read them)
    ("traceviz.errors", "definitions"), ("traceviz.units", "definitions"),
    ("traceviz.runners.benchdefs", "definitions"),
    ("traceviz.system.install_hint", "install_hint"),
    ("traceviz.runners", "runners"), ("traceviz.analyses", "analyses"),
    ("traceviz.render", "render"), ("traceviz.cli", "cli"), ("traceviz.entry", "cli"),
    ("traceviz.__main__", "cli"), ("traceviz.parsers", "parsers"), ("traceviz.table", "table"),
    ("traceviz.algos", "algos"), ("traceviz.opcost", "opcost"), ("traceviz.files", "files"),
    ("traceviz.system", "system"), ("traceviz.trace", "trace"), ("traceviz.capture", "capture"),
    ("traceviz.notebook_api", "notebook"),
    ("traceviz.ladder", "ladder"), ("traceviz.rankset", "rankset"), ("traceviz", "face"),
)
BELOW_TRACE = {"definitions", "algos", "table", "opcost"}
ALLOWED: dict[str, set[str]] = {
    "definitions": set(),
    "install_hint": {"definitions"},
    "algos": {"definitions"},
    "table": {"definitions", "algos"},
    "opcost": {"definitions"},
    "files": {"definitions"},
    "system": {"definitions", "install_hint"},
    # the table and its load/save: nothing above it
    "trace": BELOW_TRACE | {"files"},
    # the notebook API (t.summary(), .kernels()) calls the analyses, lazily, and its
    # display (_repr_html_, print) the notebook renderer, lazily: only that (test below)
    "notebook": BELOW_TRACE | {"trace", "analyses", "render"},
    "parsers": BELOW_TRACE | {"trace", "files", "system", "install_hint"},
    # pure functions over a Trace: no parser, renderer, CLI, runner or file I/O
    "analyses": BELOW_TRACE,
    # the capture processes: nothing of the parent side but errors and install hints
    "runners": {"definitions", "install_hint"},
    # results in, text and figures out (the ladder's rungs name the ladder table's rows)
    "render": BELOW_TRACE | {"trace", "analyses", "ladder"},
    "capture": BELOW_TRACE | {"trace", "files", "system", "install_hint", "parsers",
                              "analyses", "runners", "notebook"},
    "rankset": BELOW_TRACE | {"trace", "files", "system", "install_hint", "parsers",
                              "analyses"},
    "ladder": BELOW_TRACE | {"trace", "files", "system", "install_hint", "parsers",
                             "analyses", "runners", "capture"},
    "cli": {p for _, p in PARTS} - {"cli"},
    "face": {p for _, p in PARTS} - {"cli", "face"},
}


def part_of(module: str) -> str:
    return next(p for prefix, p in PARTS if module == prefix or module.startswith(prefix + "."))


def wrong_directions(graph: dict[str, set[str]]) -> list[str]:
    """Every import (``module -> imported``) that the table above does not allow."""
    return sorted(f"{m} -> {d} ({part_of(m)} may not import {part_of(d)})"
                  for m, deps in graph.items() for d in deps
                  if part_of(m) != part_of(d) and part_of(d) not in ALLOWED[part_of(m)])


@functools.cache
def _read_graph() -> dict[str, frozenset[str]]:
    mods = _modules()
    return {m: frozenset(_imports(f, mods, m) - {m}) for m, f in mods.items()}


def _graph() -> dict[str, set[str]]:
    return {m: set(d) for m, d in _read_graph().items()}


def test_every_import_goes_the_way_the_layers_allow():
    assert not wrong_directions(_graph())


def test_the_trace_imports_of_render_only_its_display():
    """The notebook API's display is its renderer's (``render/notebook.py`` and
    ``notebook_results.py``, escaped by ``render/escape.py``); no other renderer is its
    to call, and the table-only ``Trace`` imports no analysis and no renderer."""
    graph = _graph()
    render = {d for d in graph["traceviz.notebook_api"] if part_of(d) == "render"}
    assert render == {"traceviz.render.notebook", "traceviz.render.notebook_results",
                      "traceviz.render.escape"}
    assert not {part_of(d) for d in graph["traceviz.trace"]} & {"analyses", "render"}


def test_a_wrong_direction_is_caught():
    """The check fails on an analysis importing a renderer, a runner importing the capture
    side, a parser importing an analysis, as it would on the real graph."""
    graph = _graph()
    graph["traceviz.analyses.work"] = graph["traceviz.analyses.work"] | {
        "traceviz.render.charts"}
    graph["traceviz.runners.torch.torch_runner"] = graph["traceviz.runners.torch.torch_runner"] | {
        "traceviz.capture.parent"}
    graph["traceviz.parsers.kineto"] = graph["traceviz.parsers.kineto"] | {
        "traceviz.analyses.work"}
    graph["traceviz.analyses.timings"] = graph["traceviz.analyses.timings"] | {
        "traceviz.runners.capture_protocol"}
    assert [w.split(" (")[0] for w in wrong_directions(graph)] == [
        "traceviz.analyses.timings -> traceviz.runners.capture_protocol",
        "traceviz.analyses.work -> traceviz.render.charts",
        "traceviz.parsers.kineto -> traceviz.analyses.work",
        "traceviz.runners.torch.torch_runner -> traceviz.capture.parent"]


def test_every_module_has_a_part():
    assert all(part_of(m) for m in _modules())


def _folders() -> dict[str, list[str]]:
    """Each folder of the package: its flat modules and subpackages, by name."""
    return {str(d.relative_to(ROOT)): [f.stem for f in d.glob("*.py")]
            + [p.name for p in d.iterdir() if (p / "__init__.py").exists()]
            for top in ("analyses", "runners", "traceviz")
            for d in [ROOT / top, *(x for x in (ROOT / top).rglob("*") if x.is_dir())]}


def test_the_layout_has_no_flat_family():
    """At most 12 flat modules in analyses/ and runners/, 16 in traceviz/; no three modules
    or subpackages of a folder named by one word, the family's head counted (a family is a
    package); no subpackage named like a public function of ``traceviz`` (it would
    shadow it)."""
    limits = {"analyses": 12, "runners": 12, "traceviz": 16}
    for folder, limit in limits.items():
        flat = sorted(f.stem for f in (ROOT / folder).glob("*.py"))
        assert len(flat) <= limit, (folder, flat)
    found = {d: fam for d, names in _folders().items() if (fam := layers.families(names))}
    assert not found
    import traceviz

    shadowed = {d.name for d in (ROOT / "traceviz").iterdir()
                if (d / "__init__.py").exists()} & set(traceviz.__all__)
    assert not shadowed


def test_no_module_over_400_lines():
    long = {str(f.relative_to(ROOT)): n for f in _modules().values()
            if (n := len(f.read_text().splitlines())) > 400}
    assert not long


def test_no_function_over_80_lines():
    """A function or method, its docstring included, fits on a screen and a half."""
    long = {m: h for m, f in _modules().items() if (h := layers.long_functions(f.read_text()))}
    assert not long


def wrong_libraries(sources: dict[str, str]) -> list[str]:
    return layers.wrong_libraries(sources, part_of)


def file_io(sources: dict[str, str]) -> list[str]:
    return layers.file_io_in(sources, part_of)


@functools.cache
def _sources() -> dict[str, str]:
    return {m: f.read_text() for m, f in _modules().items()}


def test_each_part_imports_only_its_libraries():
    assert not wrong_libraries(_sources())


def test_analyses_and_render_read_and_write_no_file():
    """Files are read and written by parsers, files, capture, rankset, ladder, runners
    and the CLI; an analysis or a renderer gets tables and results."""
    assert not file_io(_sources())


def test_every_import_names_its_module():
    """``importlib.import_module`` with a computed name hides a dependency from the rules
    above: only in a helper ``layers.IMPORT_HELPERS`` names with its reason."""
    assert not {m: p for m, src in _sources().items() if (p := layers.dynamic_problems(src))}


def _injected(module: str, source: str) -> list[str]:
    """The wrong directions the real graph gets once ``module`` also holds ``source``."""
    graph, mods = _graph(), _modules()
    real = set(wrong_directions(graph))
    graph[module] = graph[module] | layers.project_imports(source, module, mods, mods[module])
    return [w.split(" (")[0] for w in wrong_directions(graph) if w not in real]


def test_the_blind_spots_are_caught():
    """What the rules once missed, each injected into a real module: a relative import, the
    ``else:`` of ``if TYPE_CHECKING:``, ``importlib``, a computed module name, file I/O with
    no traceviz import, a terminal library in an analysis, a family's head, a long
    function."""
    work, fileio = "traceviz.analyses.work", "traceviz.files.fileio"
    assert _injected(work, "from ..files.fileio import atomic_output\n") == [f"{work} -> {fileio}"]
    assert _injected("traceviz.analyses.summary.waits", "from ...files import fileio\n") == [
        f"traceviz.analyses.summary.waits -> {fileio}"]
    assert _injected(work, "if TYPE_CHECKING:\n    import traceviz.files.fileio\n") == []
    assert _injected(work, "if TYPE_CHECKING:\n    pass\nelse:\n    import traceviz.files."
                           "fileio\n") == [f"{work} -> {fileio}"]
    assert _injected(work, "import importlib\nimportlib.import_module('traceviz.render.charts')"
                     ) == [f"{work} -> traceviz.render.charts"]
    assert _injected(work, "__import__('traceviz.cli.analyze')\n") == [
        f"{work} -> traceviz.cli.analyze"]
    assert layers.dynamic_problems("import importlib\ndef f(m):\n"
                                   "    return importlib.import_module(m)\n")
    read = "import pandas as pd\ndef f(p):\n    return pd.read_parquet(p)\n"
    assert file_io({work: read}) == [f"{work} line 3: pd.read_parquet"]
    assert file_io({work: "def f(out, t):\n    t.to_csv(out)\n    (out / 'x').rename('y')\n"})
    assert file_io({"traceviz.render.charts": "def f(fig):\n    fig.savefig('a.png')\n"})
    assert wrong_libraries({work: "def f():\n    from rich.table import Table\n"}) == [
        f"{work} imports rich (analyses may not)"]
    assert layers.families(["report", "report_html", "report_ranges"]) == {"report"}
    assert layers.long_functions("def f():\n" + "    x = 1\n" * 80) == ["f (81)"]
    assert not layers.long_functions("def f():\n" + "    x = 1\n" * 79)


def test_tests_read_only_the_shared_traces_they_know():
    """A test takes the real traces from ``conftest.SHARED_TRACE_FILES`` by name, never by
    listing ``../shared/traces`` (a README, result files or run folders placed there are
    not traces)."""
    import re

    listing = re.compile(r"(SHARED_TRACES|KINETO|NSYS|XPLANE|shared_dir|kineto_dir)\b[^\n]*"
                         r"\.(r?glob|iterdir)\(|os\.(listdir|scandir|walk)\([^)]*shared")
    hits = [f"{p.name}:{n}" for p in sorted((ROOT / "tests").rglob("*.py"))
            for n, line in enumerate(p.read_text().splitlines(), 1) if listing.search(line)]
    assert not hits, hits


def test_tests_reach_shared_through_conftest():
    """A path into ../shared is built from conftest's ``SHARED`` (``SHARED_TRACES``,
    ``KINETO``, ``H200``), never spelled again, so that ``conftest.shared`` and the
    ``shared`` mark know it (they skip a test whose file is not there)."""
    import re

    spelled = re.compile(r"""(\.parent|parents\[\d\]|ROOT)\s*/\s*["']shared["']""")
    hits = [f"{p.name}:{n}" for p in sorted((ROOT / "tests").rglob("*.py"))
            if p.name != "conftest.py"
            for n, line in enumerate(p.read_text().splitlines(), 1) if spelled.search(line)]
    assert not hits, hits


def test_a_missing_shared_file_skips_naming_it(monkeypatch):
    """``conftest.shared``: a file of ../shared that is not there skips the test with one
    reason naming it, fails it in CI; a path elsewhere is a mistake in the test."""
    from _pytest.outcomes import Failed, Skipped

    from tests import conftest

    absent = conftest.SHARED_TRACES / "kineto" / "no_such_trace.json.gz"
    monkeypatch.setattr(conftest, "REQUIRE", False)
    with pytest.raises(Skipped, match=r"^needs \.\./shared/traces/kineto/no_such_trace\.json\.gz "
                                      r"\(traces from other projects, see README\)$"):
        conftest.shared(absent)
    with pytest.raises(Skipped, match="no_such_trace"):
        conftest.shared_argv(["analyze", str(absent), "--json"])
    assert conftest.shared_argv(["analyze", str(ROOT / "nope")]) == ["analyze", str(ROOT / "nope")]
    monkeypatch.setattr(conftest, "REQUIRE", True)
    with pytest.raises(Failed, match="no_such_trace.json.gz .*TRACEVIZ_REQUIRE_FRAMEWORKS=1"):
        conftest.shared(absent)
    with pytest.raises(ValueError, match="not under"):
        conftest.shared(ROOT / "sample_traces")


def test_every_shared_trace_named_exists():
    """Every trace ``conftest.SHARED_TRACE_FILES`` names is in ../shared/traces."""
    from tests.conftest import SHARED_TRACES, shared, shared_traces

    shared(SHARED_TRACES)
    missing = [str(p.relative_to(SHARED_TRACES)) for p in shared_traces() if not p.is_file()]
    assert not missing, f"named in tests/conftest.py but not in ../shared/traces: {missing}"


def test_ci_runs_exactly_the_readme_test_command():
    """``.ci/run`` ends in the README's test command, word for word."""
    readme = (ROOT / "README.md").read_text()
    block = readme.split("Run the tests", 1)[1].split("```sh\n", 1)[1].split("\n```", 1)[0]
    ci = (ROOT / ".ci" / "run").read_text().rstrip().splitlines()
    assert block.strip() == ci[-1].strip()
    assert "-n 2" in block and "set -euo pipefail" in ci


def test_the_heads_keep_their_import_paths():
    """Each family's head, once one module, is now a package whose face keeps its names:
    what users and notebooks imported still imports."""
    from traceviz.analyses import Summary, summarize
    from traceviz.analyses.advice import RULES, advise, advise_timed
    from traceviz.analyses.compare import RunFigures
    from traceviz.analyses.critical_path import critical_path
    from traceviz.analyses.efficiency import efficiency
    from traceviz.analyses.replay import build, solve
    from traceviz.analyses.summary import Summary as S2
    from traceviz.analyses.summary import summarize as s2
    from traceviz.analyses.whatif import SCENARIOS, WhatIf, whatif

    assert S2 is Summary and s2 is summarize and callable(whatif) and RULES
    assert {"cuda_graphs", "no_casts"} <= set(SCENARIOS) and WhatIf.__name__ == "WhatIf"
    assert all(callable(f) for f in (advise, advise_timed, critical_path, efficiency, build,
                                     solve)) and RunFigures.__name__ == "RunFigures"


@pytest.mark.parametrize("runner", ["torch", "tensorflow", "jax"])
def test_runners_start_as_modules(runner):
    """``python -m traceviz.runners.NAME`` is how ``capture`` starts a runner; the torch and
    tensorflow runners are packages (their ``__main__``)."""
    r = subprocess.run([sys.executable, "-m", f"traceviz.runners.{runner}", "--help"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "--config" in r.stdout
