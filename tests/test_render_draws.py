"""Renderers only draw: no module under ``traceviz/render/`` calls an analysis.

What a command shows is assembled from the analyses before it is drawn
(``analyses/shown/``, the summaries, the advice); a renderer takes those results. Every
name a render module imports from ``traceviz.analyses`` (absolute or relative, at the top
or inside a function, under ``TYPE_CHECKING`` or not) is resolved, and only classes (a
dataclass, a NamedTuple, an enum), constants and type aliases pass; a function fails, and
so does a module of the analyses whose functions are called through it. Methods of the
results a renderer is given are theirs to call.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import typing
from pathlib import Path

import pytest

from tests.conftest import ROOT

RENDER = ROOT / "traceviz" / "render"
ANALYSES = "traceviz.analyses"

# reading the sections' registry computes nothing: the terminal puts the registered renders
# in the sections' print order
LOOKUPS = {("traceviz.analyses.summary.registry", "sections")}


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _absolute(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The module an ``ImportFrom`` names, relative imports resolved against ``module``."""
    if not node.level:
        return node.module or ""
    base = module.split(".")
    base = base if is_package else base[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _is_drawable(obj: object) -> bool:
    """A class, a constant or a type alias: what a renderer may take from the analyses."""
    if isinstance(obj, type) or typing.get_origin(obj) is not None:
        return True
    return not callable(obj) and not inspect.ismodule(obj)


def _attributes_used(tree: ast.AST, name: str) -> set[str]:
    """The attributes read from the name ``name`` (``name.attr``) anywhere in ``tree``."""
    return {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)
            and isinstance(n.value, ast.Name) and n.value.id == name}


def _module_uses(tree: ast.AST, module: str, bound: str) -> list[str]:
    """The functions of the analyses' ``module`` (bound to ``bound``) that ``tree`` reads."""
    mod = importlib.import_module(module)
    return [f"{module}.{a}" for a in sorted(_attributes_used(tree, bound))
            if not _is_drawable(getattr(mod, a, None))]


def _from_import(tree: ast.AST, source: str, alias: ast.alias) -> list[str]:
    """What ``from source import alias`` brings that is not the renderer's to take."""
    if (source, alias.name) in LOOKUPS:
        return []
    mod = importlib.import_module(source)
    if not hasattr(mod, alias.name):  # a submodule: its functions, where called
        try:
            return _module_uses(tree, f"{source}.{alias.name}", alias.asname or alias.name)
        except ModuleNotFoundError:  # not there (any more): nothing a renderer may take
            return [f"{source}.{alias.name} (not found)"]
    obj = getattr(mod, alias.name)
    if inspect.ismodule(obj):
        return _module_uses(tree, obj.__name__, alias.asname or alias.name)
    return [] if _is_drawable(obj) else [f"{source}.{alias.name}"]


def _import_module_calls(tree: ast.AST) -> list[str]:
    """``importlib.import_module("traceviz.analyses...")``: a module of the analyses by name."""
    return [str(n.args[0].value) for n in ast.walk(tree) if isinstance(n, ast.Call)
            and (getattr(n.func, "attr", None) or getattr(n.func, "id", None))
            == "import_module" and n.args and isinstance(n.args[0], ast.Constant)
            and str(n.args[0].value).startswith(ANALYSES)]


def analysis_calls(source: str, module: str, is_package: bool = False) -> list[str]:
    """The analysis functions (and modules) the render module ``module`` of ``source``
    takes from the analyses, as ``module.name``."""
    tree = ast.parse(source)
    found = _import_module_calls(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            src = _absolute(module, is_package, node)
            if src == ANALYSES or src.startswith(ANALYSES + "."):
                for alias in node.names:
                    found += _from_import(tree, src, alias)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(ANALYSES + "."):
                    # ``import a.b.c``: read as ``a.b.c.f``; ``as x``: as ``x.f``
                    bound = alias.asname or alias.name
                    found += _dotted_uses(tree, alias.name, bound)
    return sorted(set(found))


def _dotted_uses(tree: ast.AST, module: str, bound: str) -> list[str]:
    """The functions of ``module`` read through ``bound`` (a name, or a dotted path)."""
    if "." not in bound:
        return _module_uses(tree, module, bound)
    used = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)
            and ast.unparse(n.value) == bound}
    mod = importlib.import_module(module)
    return [f"{module}.{a}" for a in sorted(used) if not _is_drawable(getattr(mod, a, None))]


def _render_modules() -> list[Path]:
    return sorted(p for p in RENDER.rglob("*.py") if "__pycache__" not in p.parts)


def test_render_modules_are_found():
    names = {_module_name(p) for p in _render_modules()}
    assert {"traceviz.render.perfetto", "traceviz.render.report",
            "traceviz.render.report.html_page", "traceviz.render.terminal.summary"} <= names


@pytest.mark.parametrize("path", _render_modules(), ids=lambda p: str(p.relative_to(RENDER)))
def test_a_renderer_calls_no_analysis(path):
    calls = analysis_calls(path.read_text(), _module_name(path), path.name == "__init__.py")
    assert not calls, f"{path.relative_to(ROOT)} calls the analyses: {calls}"


FAKE = "traceviz.render.report.fake"  # where the injected sources below pretend to live


@pytest.mark.parametrize("source", [
    # absolute, at the top
    "from traceviz.analyses.work import analysis_windows\n"
    "def draw(trace):\n    return analysis_windows(trace)\n",
    # lazy, inside a function, renamed
    "def draw(trace):\n"
    "    from traceviz.analyses.timeline import idle_intervals as iv\n"
    "    return iv(trace)\n",
    # relative: traceviz.render.report.fake -> ...analyses
    "from ...analyses.work import analysis_windows\n",
    "from ...analyses import work\n"
    "def draw(trace):\n    return work.analysis_windows(trace)\n",
    # the module imported whole, a function called through it
    "import traceviz.analyses.timeline\n"
    "def draw(trace):\n    return traceviz.analyses.timeline.queue_depth(trace)\n",
    "import traceviz.analyses.timeline as tl\n"
    "def draw(trace):\n    return tl.lanes(trace)\n",
    # under TYPE_CHECKING, and by name
    "from typing import TYPE_CHECKING\n"
    "if TYPE_CHECKING:\n    pass\nelse:\n"
    "    from traceviz.analyses.compare.runs import kernel_diff\n",
    "import importlib\n"
    "def draw(trace):\n"
    "    return importlib.import_module('traceviz.analyses.work').analysis_windows(trace)\n",
])
def test_an_injected_analysis_call_is_caught(source):
    assert analysis_calls(source, FAKE)


def test_classes_constants_and_types_pass():
    source = ("from traceviz.analyses.compare.runs import CHANGES, RunFigures\n"
              "from ...analyses.shown.perfetto_tracks import PerfettoTracks\n"
              "from traceviz.analyses.summary.windows import DEVICE_WORK\n"
              "from traceviz.analyses import timeline\n"
              "def draw(rows: timeline.StepRows) -> None:\n    pass\n")
    assert analysis_calls(source, FAKE) == []
    # a relative import from a package's __init__ counts from the package itself
    assert analysis_calls("from ..analyses.work import analysis_windows\n",
                          "traceviz.render", is_package=True) == [
        "traceviz.analyses.work.analysis_windows"]
