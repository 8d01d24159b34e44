"""Project-level promises: ruff-clean, analyze without torch/tensorflow, one launch-API list."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

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
    """Every module of the installed package, by its import name (``analyses/`` and
    ``runners/`` are mapped into ``traceviz``)."""
    roots = {"traceviz": ROOT / "traceviz", "traceviz.runners": ROOT / "runners",
             "traceviz.analyses": ROOT / "analyses"}
    mods = {}
    for pkg, root in roots.items():
        for f in root.rglob("*.py"):
            parts = list(f.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            mods[".".join([pkg, *parts])] = f
    return mods


def _imports(path: Path, mods: dict[str, Path]) -> set[str]:
    """The package's modules ``path`` imports, at the top or inside a function (a lazy
    import is a dependency too); ``if TYPE_CHECKING:`` blocks aside."""
    import ast

    tree = ast.parse(path.read_text())
    typing_only = {id(x) for n in ast.walk(tree) if isinstance(n, ast.If)
                   and "TYPE_CHECKING" in ast.unparse(n.test) for x in ast.walk(n)}

    def module_of(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    out = set()
    for n in ast.walk(tree):
        if id(n) in typing_only:
            continue
        if isinstance(n, ast.ImportFrom) and n.level == 0 and (n.module or "").startswith(
                "traceviz"):
            out |= {module_of(f"{n.module}.{a.name}") for a in n.names}
        elif isinstance(n, ast.Import):
            out |= {module_of(a.name) for a in n.names if a.name.startswith("traceviz")}
    return out - {None}


def test_no_import_circle():
    """No module imports, even lazily, a module that imports it back (through any chain):
    each part stays readable and testable on its own."""
    import graphlib

    mods = _modules()
    graph = {m: _imports(f, mods) - {m} for m, f in mods.items()}
    # a package imports its own modules (``parsers/__init__`` re-exports ``load``); the
    # edge from a module to its package is the one Python adds, not a design dependency
    for m in graph:
        graph[m] = {d for d in graph[m] if not m.startswith(d + ".")}
    try:
        list(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as e:
        pytest.fail(f"import circle: {' -> '.join(e.args[1])}")
    assert len(graph) > 80 and graph["traceviz.normalize"] >= {"traceviz.trace"}


def test_no_module_over_400_lines():
    long = {str(f.relative_to(ROOT)): n for f in _modules().values()
            if (n := len(f.read_text().splitlines())) > 400}
    assert not long


def test_tests_read_only_the_shared_traces_they_know():
    """A test takes the real traces from ``conftest.SHARED_TRACE_FILES`` by name, never by
    listing ``../shared/traces`` (a README, result files or run folders placed there are
    not traces), and every trace named there exists."""
    import re

    from tests.conftest import SHARED_TRACES, shared_traces

    listing = re.compile(r"(SHARED_TRACES|KINETO|NSYS|XPLANE|shared_dir|kineto_dir)\b[^\n]*"
                         r"\.(r?glob|iterdir)\(|os\.(listdir|scandir|walk)\([^)]*shared")
    hits = [f"{p.name}:{n}" for p in sorted((ROOT / "tests").rglob("*.py"))
            for n, line in enumerate(p.read_text().splitlines(), 1) if listing.search(line)]
    assert not hits, hits
    missing = [str(p.relative_to(SHARED_TRACES)) for p in shared_traces() if not p.is_file()]
    assert not missing, f"named in tests/conftest.py but not in ../shared/traces: {missing}"


def test_ci_runs_exactly_the_readme_test_command():
    """``.ci/run`` ends in the README's test command, word for word."""
    readme = (ROOT / "README.md").read_text()
    block = readme.split("Run the tests", 1)[1].split("```sh\n", 1)[1].split("\n```", 1)[0]
    ci = (ROOT / ".ci" / "run").read_text().rstrip().splitlines()
    assert block.strip() == ci[-1].strip()
    assert "-n 2" in block and "set -euo pipefail" in ci
