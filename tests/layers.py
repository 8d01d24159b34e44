"""The rules ``tests/test_project.py`` holds the package to, read from each module's parsed
source: which modules and libraries it imports (absolute, relative, lazy, through
``importlib``; the ``else:`` of ``if TYPE_CHECKING:`` is a runtime import), which file I/O
it calls, how long its functions are, and which flat modules form a family.

Each function takes source text, so a test can inject a blind spot into a string and see
the rule catch it, without editing a real module."""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROJECT = "traceviz"

# ``importlib.import_module(name)`` with a name the code computes: each helper that does
# this is named here with its reason, and its callers' literal names are read as imports
# (a computed name anywhere else fails ``dynamic_problems``)
IMPORT_HELPERS: dict[str, str] = {
    "bokeh_module": "Bokeh's modules typed as Any (its stubs do not list the models); every "
              "caller passes a literal bokeh.* name",
}
# Modules imported by their file's name from the folder they sit in (``sys.path`` holds
# it): the MXNet runner runs in an interpreter without traceviz and loads these so
BY_PATH: dict[str, set[str]] = {
    "traceviz.runners": {"capture_protocol", "benchdefs", "synthetic", "usage"},
}


def modules() -> dict[str, Path]:
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


def _typing_only(tree: ast.AST) -> set[int]:
    """The nodes that run only under a type checker: the body of ``if TYPE_CHECKING:``
    (its ``else:`` runs), the ``else:`` of ``if not TYPE_CHECKING:``."""
    def names_it(test: ast.expr) -> bool:
        return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
            isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")

    out: set[int] = set()
    for n in ast.walk(tree):
        if not isinstance(n, ast.If):
            continue
        if names_it(n.test):
            block = n.body
        elif isinstance(n.test, ast.UnaryOp) and isinstance(n.test.op, ast.Not) and names_it(
                n.test.operand):
            block = n.orelse
        else:
            continue
        out |= {id(x) for stmt in block for x in ast.walk(stmt)}
    return out


def _package(name: str, path: Path | None) -> str:
    """The package a relative import in module ``name`` starts from."""
    return name if path is not None and path.name == "__init__.py" else name.rpartition(".")[0]


def _dotted(n: ast.expr) -> str | None:
    """``a.b.c`` of a name or attribute chain, else None."""
    if isinstance(n, ast.Name):
        return n.id
    if isinstance(n, ast.Attribute) and (base := _dotted(n.value)):
        return f"{base}.{n.attr}"
    return None


def _literal_name(arg: ast.expr) -> str | None:
    """The module name a call passes: a string, or an f-string's literal start up to its
    first field (``f"traceviz.cli.{m}"``: somewhere in ``traceviz.cli``)."""
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    if isinstance(arg, ast.JoinedStr) and arg.values and isinstance(
            c := arg.values[0], ast.Constant) and str(c.value).endswith(".") and str(
            c.value).strip("."):
        return str(c.value).rstrip(".") + ".*"
    return None


def _dynamic(tree: ast.AST) -> list[tuple[ast.Call, ast.expr | None]]:
    """Every call that imports by name: ``importlib.import_module``, ``__import__``, and
    the helpers of ``IMPORT_HELPERS``; with the argument that names the module."""
    out = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Call):
            f = _dotted(n.func) or ""
            if f.rpartition(".")[2] in {"import_module", "__import__", *IMPORT_HELPERS}:
                out.append((n, n.args[0] if n.args else None))
    return out


def _inside(tree: ast.AST) -> dict[int, str]:
    """For every node, the name of the function it sits in ('' at module level)."""
    where: dict[int, str] = {}

    def visit(node: ast.AST, fn: str) -> None:
        for child in ast.iter_child_nodes(node):
            name = child.name if isinstance(
                child, (ast.FunctionDef, ast.AsyncFunctionDef)) else fn
            where[id(child)] = name
            visit(child, name)
    visit(tree, "")
    return where


def imported_names(source: str, name: str, path: Path | None = None) -> set[str]:
    """Every module name the code imports at run time, absolute (``a.b`` of ``from a
    import b`` too: it may be a module), top level or lazy, relative ones resolved against
    the module's package, ``import_module``'s literal names; a name ending in ``.*`` is
    any module under that package."""
    tree = ast.parse(source)
    skip = _typing_only(tree)
    out: set[str] = set()
    for n in ast.walk(tree):
        if id(n) in skip:
            continue
        if isinstance(n, ast.Import):
            out |= {a.name for a in n.names}
        elif isinstance(n, ast.ImportFrom):
            base = n.module or ""
            if n.level:
                pkg = _package(name, path).split(".")
                pkg = pkg[:len(pkg) - (n.level - 1)]
                base = ".".join(pkg + ([n.module] if n.module else []))
            out |= {f"{base}.{a.name}" if a.name != "*" else base for a in n.names}
    pkg = _package(name, path)
    for call, arg in _dynamic(tree):
        if id(call) not in skip and arg is not None and (lit := _literal_name(arg)):
            out.add(f"{pkg}{lit}" if lit.startswith(".") else lit)
    return {f"{pkg}.{d}" if d.split(".")[0] in BY_PATH.get(pkg, ()) else d for d in out}


def dynamic_problems(source: str) -> list[str]:
    """Imports by a name the code computes, so no rule can read them: fine only inside a
    helper that ``IMPORT_HELPERS`` names (its callers are read instead)."""
    tree = ast.parse(source)
    where = _inside(tree)
    return [f"line {call.lineno}: {ast.unparse(call)}" for call, arg in _dynamic(tree)
            if (arg is None or _literal_name(arg) is None)
            and where.get(id(call)) not in IMPORT_HELPERS]


def project_imports(source: str, name: str, mods: dict[str, Path],
                    path: Path | None = None) -> set[str]:
    """The package's modules ``source`` (module ``name``) imports, at the top or inside a
    function (a lazy import is a dependency too), relative and by ``import_module``;
    the body of ``if TYPE_CHECKING:`` aside."""
    def module_of(dotted: str) -> set[str]:
        if dotted.endswith(".*"):
            pkg = dotted[:-2]
            return {m for m in mods if m == pkg or m.startswith(pkg + ".")}
        while dotted and dotted not in mods:
            dotted = dotted.rpartition(".")[0]
        return {dotted} if dotted else set()

    return {m for d in imported_names(source, name, path)
            if d == PROJECT or d.startswith(PROJECT + ".") for m in module_of(d)}


def libraries(source: str, name: str = "", path: Path | None = None) -> set[str]:
    """The third-party libraries ``source`` (module ``name``) imports (top-level names),
    anywhere: top level, lazy, by ``import_module``, and under ``if TYPE_CHECKING:`` (a
    type of a library is a dependency of the design all the same)."""
    tree = ast.parse(source)
    names: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            names |= {a.name for a in n.names}
        elif isinstance(n, ast.ImportFrom) and not n.level and n.module:
            names.add(n.module)
    names |= {lit for _, arg in _dynamic(tree) if arg is not None
              and (lit := _literal_name(arg)) and not lit.startswith(".")}
    tops = {d.split(".")[0] for d in names} - BY_PATH.get(_package(name, path), set())
    return {t for t in tops if t and t != PROJECT and t not in sys.stdlib_module_names}


# File I/O, by the names of the calls that do it (a name the code imported is read as the
# module's: ``from json import load`` is ``json.load``): whole functions of a module, and
# methods that only files and paths have
IO_FUNCTIONS = re.compile(
    r"(builtins\.open|io\.open|os\.(remove|unlink|rename|replace|renames|makedirs|mkdir|rmdir"
    r"|removedirs|open|listdir|scandir|walk|truncate|link|symlink|path\.(exists|isfile|isdir"
    r"|getsize|getmtime))|shutil\..*|tempfile\..*|glob\..*|(json|pickle|marshal|tomllib)"
    r"\.(dump|load)|numpy\.(save|savez|savez_compressed|savetxt|load|loadtxt|genfromtxt"
    r"|fromfile|memmap)|pandas\.(read_.*|HDFStore|ExcelWriter)|pyarrow\.(parquet|csv|feather"
    r"|json|orc|dataset|ipc)\..*|pyarrow\.(input_stream|output_stream|memory_map|OSFile)"
    r"|(gzip|bz2|lzma|tarfile|webbrowser)\.open|zipfile\.ZipFile|sqlite3\.connect"
    r"|matplotlib\.pyplot\.savefig)$")
IO_METHODS = {"write_text", "write_bytes", "read_text", "read_bytes", "open", "unlink",
              "mkdir", "touch", "rmdir", "iterdir", "rglob", "symlink_to", "hardlink_to",
              "savefig", "to_parquet", "to_feather", "to_pickle", "to_excel", "to_hdf",
              "to_sql", "to_stata", "to_orc", "tofile", "write_table", "read_table",
              "read_parquet", "read_csv", "read_json"}
# methods that write to a path only when given one (``df.to_csv()`` returns the text)
IO_WITH_PATH = {"to_csv", "to_json", "to_html", "to_latex", "to_markdown", "to_string",
                "to_xml"}
# methods whose name other types share (``str.replace``, ``DataFrame.rename``): file I/O
# when called on a path built in place (``Path(...)``, ``folder / name``)
IO_ON_PATHS = {"rename", "replace", "exists", "is_file", "is_dir", "stat", "glob"}


def _aliases(tree: ast.AST) -> dict[str, str]:
    """Each name an import binds, to the module or object it stands for."""
    out = {"open": "builtins.open"}
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            out |= {(a.asname or a.name.split(".")[0]): (a.name if a.asname else
                                                         a.name.split(".")[0])
                    for a in n.names}
        elif isinstance(n, ast.ImportFrom) and n.module and not n.level:
            out |= {(a.asname or a.name): f"{n.module}.{a.name}" for a in n.names}
    return out


def _is_path(n: ast.expr) -> bool:
    """A path built in place, or a name that says it holds one (``self.trace_path``)."""
    return (isinstance(n, ast.BinOp) and isinstance(n.op, ast.Div)) or (
        isinstance(n, ast.Call) and (_dotted(n.func) or "").endswith("Path")) or bool(
        re.search(r"(path|dir|folder|file)$", (_dotted(n) or "").rpartition(".")[2]))


def _in_memory(tree: ast.AST) -> set[str]:
    """The names bound to an in-memory file (``buf = io.BytesIO()``): writing to one is
    no file I/O."""
    return {t.id for n in ast.walk(tree) if isinstance(n, ast.Assign)
            and isinstance(n.value, ast.Call) and (_dotted(n.value.func) or "").rpartition(
                ".")[2] in {"BytesIO", "StringIO"}
            for t in n.targets if isinstance(t, ast.Name)}


def _io_call(n: ast.Call, aliases: dict[str, str], memory: set[str]) -> bool:
    if n.args and isinstance(n.args[0], ast.Name) and n.args[0].id in memory:
        return False
    dotted = _dotted(n.func)
    if dotted:
        head, _, rest = dotted.partition(".")
        qualified = ".".join(filter(None, [aliases.get(head, head), rest]))
        if IO_FUNCTIONS.match(qualified) or (qualified == "duckdb.connect" and (
                n.args or n.keywords) and ast.unparse((n.args or [n.keywords[0].value])[0])
                not in {"':memory:'", '":memory:"'}):
            return True
    if not isinstance(n.func, ast.Attribute):
        return False
    method = n.func.attr
    return method in IO_METHODS or (method in IO_WITH_PATH and bool(
        n.args or {k.arg for k in n.keywords} & {"path_or_buf", "buf", "path"})) or (
        method in IO_ON_PATHS and _is_path(n.func.value))


def file_io(source: str) -> list[str]:
    """The calls in ``source`` that read or write files or folders (``line N: call``)."""
    tree = ast.parse(source)
    aliases, memory = _aliases(tree), _in_memory(tree)
    return [f"line {n.lineno}: {ast.unparse(n.func)}" for n in ast.walk(tree)
            if isinstance(n, ast.Call) and _io_call(n, aliases, memory)]


def long_functions(source: str, limit: int = 80) -> list[str]:
    """Every function or method over ``limit`` lines, its docstring and nested functions
    included (``name (lines)``; from ``def`` to its last line, decorators aside)."""
    return [f"{n.name} ({n.end_lineno - n.lineno + 1})" for n in ast.walk(ast.parse(source))
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
            and n.end_lineno is not None and n.end_lineno - n.lineno + 1 > limit]


def families(names: list[str], size: int = 3) -> set[str]:
    """The families among a folder's flat modules and subpackages (``names``, without
    ``.py``): ``size`` or more that share their first word, singular or plural, the head
    counted (``report``, ``report_html``, ``report_ranges``; ``ranges``, ``range_gpu``,
    ``range_kernels``)."""
    words = [n.split("_")[0].removesuffix("s") for n in names if not n.startswith("_")]
    return {w for w in words if words.count(w) >= size}


# The third-party libraries each part may import (top level, lazy, typing-only alike):
# what the code imports, so that a new one is a decision. A part not named imports none.
LIBRARIES: dict[str, set[str]] = {
    "algos": {"numpy", "pandas"},
    "table": {"numpy", "pandas", "pyarrow", "cpp_demangle"},
    "opcost": {"numpy"},
    "files": {"pyarrow", "isal"},
    "system": {"ray", "numpy"},  # numpy: imported with its BLAS on one thread (blas.py)
    "trace": {"numpy", "pandas", "pyarrow"},
    "notebook": {"numpy", "pandas"},
    "parsers": {"numpy", "pandas", "pyarrow", "msgspec", "google"},  # google: protobuf
    "analyses": {"numpy", "pandas"},
    # each runner's framework, its profiler's NVTX and the GPU's counters
    "runners": {"torch", "tensorflow", "keras", "jax", "mxnet", "numpy", "nvtx", "pynvml"},
    "render": {"numpy", "pandas", "rich", "matplotlib", "bokeh"},
    "capture": {"numpy", "pandas", "torch"},  # torch: ``traceviz.profile()`` in process
    "rankset": {"pandas", "pyarrow", "duckdb"},
    "cli": {"rich", "matplotlib"},
}
NO_FILE_IO = {"analyses", "render"}  # they take results and tables, never paths


def wrong_libraries(sources: dict[str, str], part_of: Callable[[str], str]) -> list[str]:
    """Each import of a library its module's part (``part_of``) may not import."""
    mods = modules()
    return sorted(f"{m} imports {lib} ({part_of(m)} may not)" for m, src in sources.items()
                  for lib in libraries(src, m, mods.get(m))
                  if lib not in LIBRARIES.get(part_of(m), set()))


def file_io_in(sources: dict[str, str], part_of: Callable[[str], str]) -> list[str]:
    """The file I/O calls in the modules of the parts that do none (``NO_FILE_IO``)."""
    return [f"{m} {hit}" for m, src in sources.items() if part_of(m) in NO_FILE_IO
            for hit in file_io(src)]
