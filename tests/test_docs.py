"""The documentation: the site builds with MkDocs in strict mode (a broken internal link or
anchor fails it, and a test shows that it does), the README stays a short entry page with
the two commands, and the output excerpt it shows is still what traceviz prints."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys

import pytest

from tests.conftest import H200, ROOT, SHARED_TRACES, shared_argv

README = ROOT / "README.md"
DOCS = ROOT / "docs"
INSTALL_AND_RUN = ("python3 -m venv .venv && .venv/bin/pip install -q -e '.[torch]' && "
                   ".venv/bin/traceviz capture --model cudnn_torch")


def _build(root, site) -> subprocess.CompletedProcess:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict",
                           "-f", str(root / "mkdocs.yml"), "-d", str(site)],
                          cwd=root, env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    site = tmp_path_factory.mktemp("site")
    done = _build(ROOT, site)
    assert done.returncode == 0, done.stdout + done.stderr
    return site


def test_site_builds_strict(site):
    """`mkdocs build --strict` (not `-q`, which hides the warnings strict counts): no
    warning, so no broken link, anchor or docstring problem."""
    for page in ("index.html", "analyze/index.html", "api/index.html", "DESIGN/index.html",
                 "contributing/index.html", "img/analyze.svg"):
        assert (site / page).is_file(), page
    api = (site / "api" / "index.html").read_text()
    for name in ("traceviz.load", "traceviz.ranks", "Trace", "kernels", "summary", "advise"):
        assert name in api, name
    contributing = (site / "contributing" / "index.html").read_text()
    assert "Add a parser" in contributing  # CONTRIBUTING.md itself, included


@pytest.mark.parametrize("link", ["nope.md", "failures.md#no-such-anchor"])
def test_a_broken_link_fails_the_build(tmp_path, link):
    """The check can fail: the same site with one broken link or anchor does not build."""
    copy = tmp_path / "repo"
    copy.mkdir()
    shutil.copy(ROOT / "mkdocs.yml", copy)
    shutil.copy(ROOT / "CONTRIBUTING.md", copy)
    shutil.copytree(DOCS, copy / "docs")
    page = copy / "docs" / "import.md"
    page.write_text(page.read_text() + f"\nSee [nowhere]({link}).\n")
    done = _build(copy, tmp_path / "site")
    assert done.returncode != 0
    assert link in done.stdout + done.stderr


def test_readme_is_short_and_keeps_both_commands():
    text = README.read_text()
    assert len(text.splitlines()) <= 250
    ci_test_command = (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1]
    assert ci_test_command.startswith("python3 -m venv .venv")
    assert ci_test_command in text
    assert INSTALL_AND_RUN in text
    assert "source .venv/bin/activate" in text
    assert "![" in text and "(docs/img/analyze.svg)" in text


def test_readme_links_point_at_files():
    """README's relative links (docs pages on GitHub) name files that exist, except the
    page that arrives with `traceviz capture -- python train.py`."""
    for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", README.read_text()):
        if target != "docs/your-code.md":
            assert (ROOT / target).exists(), target


def _structure(text: str) -> list[str]:
    """What the output says, not its figures: digits as 0, runs of spaces as one."""
    return [re.sub(r" +", " ", re.sub(r"\d", "0", line)).strip()
            for line in text.splitlines()]


def test_output_excerpt_matches_the_current_output():
    """docs/img/analyze.txt (the text of the SVG the README shows) has the same lines,
    titles, headers and rows as `traceviz analyze` prints now; the trace is committed,
    so the figures match too. `python docs/make_screens.py` rewrites both files."""
    sys.path.insert(0, str(DOCS))
    try:
        import make_screens
    finally:
        sys.path.remove(str(DOCS))
    current = make_screens.text_of(make_screens.record())
    committed = (DOCS / "img" / "analyze.txt").read_text()
    hint = "run: python docs/make_screens.py"
    assert _structure(committed) == _structure(current), hint
    assert committed == current, hint
    svg = (DOCS / "img" / "analyze.svg").read_text()
    assert svg.startswith("<svg") and "Top&#160;kernels&#160;by&#160;total&#160;time" in svg


HISTORY = [
    (r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b", "a commit hash"),
    (r"\bsessions?\b", "'session'"),
    (r"(?<![\w/`])#\d+\b|\bissue\b|\bPR\b", "an issue or pull-request number"),
    # "random seed" and `--seed` are the option; "the seed's", "the seeds" the shorthand
    (r"(?<!random )(?<!-)\bseeds?\b", "internal shorthand for the reproduced studies"),
    (r"\.\./shared\b", "a path outside the repository"),
]


@pytest.mark.parametrize("page", sorted(p.name for p in DOCS.glob("*.md")
                                        if p.name != "DESIGN.md") + ["README.md"])
def test_user_documentation_holds_no_project_history(page):
    text = (README if page == "README.md" else DOCS / page).read_text()
    for pattern, what in HISTORY:
        found = re.search(pattern, text)
        assert found is None, f"{page}: {what}: {found.group(0)!r}"


# -- the example commands ------------------------------------------------------------------

def _doc_commands() -> list[tuple[str, str]]:
    """Every ``traceviz`` command in the docs' code blocks: (page, command), a trailing
    comment left out, a line ending in ``\\`` joined with the next."""
    found = []
    for page in sorted(DOCS.glob("*.md")):
        block, pending = False, ""
        for line in page.read_text().splitlines():
            if line.strip().startswith("```"):
                block, pending = not block, ""
                continue
            text = pending + line.strip()
            pending = ""
            if not block or not re.match(r"(\$ )?traceviz ", text):
                continue
            if text.endswith("\\"):
                pending = text[:-1] + " "
                continue
            found.append((page.name, re.split(r"\s+#\s", text.removeprefix("$ "))[0].strip()))
    return found


def _argv(command: str) -> list[str]:
    """The command's arguments with the docs' placeholders filled: ``[--plot DIR]`` and
    ``[--resume]`` given, ``[ADDRESS]`` and ``[runs/C ...]`` left out, ``pb[.gz]`` read
    ``pb.gz``, ``...`` a variant, ``N`` 2, ``$w`` 0, ``<run>`` run."""
    text = re.sub(r"\[(--[^\]]+)\]", r"\1", command)
    text = re.sub(r"(\S)\[([^\]\s]+)\]", r"\1\2", text)
    text = re.sub(r"\s\[[^\]]*\]", "", text)
    text = text.replace("$w", "0").replace("<run>", "run")
    argv = shlex.split(text)[1:]
    return [{"...": "cudnn_torch", "N": "2"}.get(a, a) for a in argv]


DOC_COMMANDS = _doc_commands()


def test_the_docs_show_commands():
    pages = {page for page, _ in DOC_COMMANDS}
    assert len(DOC_COMMANDS) >= 90 and {"analyze.md", "capture.md", "whatif.md"} <= pages


@pytest.mark.parametrize(("page", "command"), DOC_COMMANDS,
                         ids=[f"{p}:{c[:60]}" for p, c in DOC_COMMANDS])
def test_every_example_command_is_one_traceviz_reads(page, command):
    """Each example's command and options are ones traceviz's parser accepts (the values
    too: a number where one is asked, a choice among the choices)."""
    from traceviz.cli import build_parser

    args = build_parser().parse_args(_argv(command))
    assert args.command == _argv(command)[0]


# the docs' stand-in inputs, read as committed traces; outputs go to a temporary folder
STAND_INS = {
    "trace.parquet": "sample_traces/gpu/cudnn_torch/train/trace.parquet",
    "trace.json.gz": "sample_traces/script/lstm_train/trace.pt.trace.json.gz",
    "report.sqlite": "sample_traces/nsys/cudnn_torch_train/report.sqlite",
    "host.xplane.pb.gz": str(SHARED_TRACES / "xplane" / "tf24_bert_amp_gpu.xplane.pb.gz"),
    "runs/cudnn_torch/": "sample_traces/gpu/cudnn_torch/train",
    "runs/A": "sample_traces/gpu/fused_torch/train",
    "runs/B": "sample_traces/gpu/graph_torch/train",
    "runs/streams_torch": str(H200 / "streams_torch"),
}
OUTPUTS = ("charts/", "out/", "t.json", "DIR")


def _runnable(command: str) -> bool:
    """An example whose inputs are committed traces (or stand-ins for them)."""
    argv = _argv(command)
    paths = [a for a in argv[1:] if "/" in a or a in STAND_INS]
    return argv[0] in ("analyze", "advise", "whatif", "compare") and bool(paths) and all(
        a.startswith("sample_traces/") or a in STAND_INS or a in OUTPUTS for a in paths)


RUNNABLE = [(p, c) for p, c in DOC_COMMANDS if _runnable(c)]


def test_the_runnable_examples_are_many():
    assert len(RUNNABLE) >= 15


@pytest.mark.parametrize(("page", "command"), RUNNABLE,
                         ids=[f"{p}:{c[:60]}" for p, c in RUNNABLE])
def test_each_example_on_committed_traces_runs(page, command, tmp_path, monkeypatch, capsys):
    """The examples that name committed traces (``sample_traces/...``), or stand-ins
    read as real traces of their kind (``trace.parquet``, ``trace.json.gz``,
    ``report.sqlite``, run folders ``runs/A``), run and succeed as written."""
    from traceviz.cli import main

    monkeypatch.chdir(ROOT)
    # a stand-in from ../shared: skipped where it is missing, naming it
    argv = shared_argv([STAND_INS.get(a, str(tmp_path / a) if a in OUTPUTS else a)
                        for a in _argv(command)])
    assert main(argv) == 0, command
    out = capsys.readouterr().out
    assert out.strip(), command


# -- the tables made from the registries ---------------------------------------------------

def _docs_tables():
    """``docs/tables.py``, loaded as the site's hook loads it."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("traceviz_docs_tables", DOCS / "tables.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


TABLES = _docs_tables()
REGISTRIES = TABLES.registry_names()
# where each table is shown
TABLE_PAGES = {"variants": "models", "scenarios": "whatif", "rules": "advise",
               "sections": "analyze", "exports": "formats"}


def test_every_registry_has_its_table():
    assert set(TABLE_PAGES) == set(REGISTRIES) == set(TABLES.BUILDERS)
    # the counts this page was written with, at least: a registry read empty would pass
    # the tests below
    assert {k: len(v) >= n for (k, v), n in zip(REGISTRIES.items(), (25, 12, 22, 20, 9),
                                                strict=True)} == dict.fromkeys(REGISTRIES, True)


@pytest.mark.parametrize("kind", sorted(TABLE_PAGES))
def test_each_generated_table_lists_every_entry(site, kind):
    """The built page holds a table row for every entry of the registry, read from the
    registry now, and the marker is gone."""
    html = (site / TABLE_PAGES[kind] / "index.html").read_text()
    missing = [n for n in REGISTRIES[kind] if f"<td><code>{n}</code></td>" not in html]
    assert missing == [], f"{kind} table on {TABLE_PAGES[kind]}.md lacks {missing}"
    assert "generated:" not in html


def _first_columns(text: str) -> list[tuple[str, set[str]]]:
    """Each Markdown table of a page: its first header, the `code` names of its first
    column (``[]`` left out: ``devices[]`` is the key ``devices``)."""
    tables: list[tuple[str, set[str]]] = []
    previous = ""
    for line in text.splitlines():
        if line.startswith("|"):
            first = line.split("|")[1].strip()
            if not previous.startswith("|"):
                tables.append((first, set()))
            elif not first.startswith("---"):
                tables[-1][1].update(n.removesuffix("[]")
                                     for n in re.findall(r"`([^`]+)`", first))
        previous = line
    return tables


@pytest.mark.parametrize("page", sorted(p.name for p in DOCS.glob("*.md")) + ["CONTRIBUTING.md"])
def test_no_page_holds_a_hand_written_copy(page):
    """A Markdown table whose first column names more than half of a registry's entries is
    a copy of the registry by hand, which drifts: the page holds the marker instead."""
    from traceviz.runners import FRAMEWORKS, variants

    text = (ROOT / page if page == "CONTRIBUTING.md" else DOCS / page).read_text()
    # a framework's variants are a table of their own
    groups = [*REGISTRIES.items(),
              *(("variants", [v.name for v in variants(fw)]) for fw in FRAMEWORKS)]
    for header, names in _first_columns(text):
        # the `--json` keys and what each means (the test below); the ladder's rungs,
        # variants beside the study's figures
        if header in ("key", "rung"):
            continue
        for kind, entries in groups:
            assert len(names & set(entries)) * 2 <= len(entries), \
                f"{page}: a hand-written {kind} table; write <!-- generated: {kind} -->"


def test_a_marker_becomes_its_table_and_an_unknown_one_fails():
    page = "Before.\n\n<!-- generated: variants mxnet -->\n\nAfter.\n"
    out = TABLES.expand(page)
    assert "generated" not in out
    assert "| `gluon_mxnet` |" in out and out.startswith("Before.") and out.endswith("After.\n")
    with pytest.raises(KeyError):
        TABLES.expand("<!-- generated: nothing -->")
    inline = "A page writes `<!-- generated: NAME -->` on a line of its own.\n"
    assert TABLES.expand(inline) == inline  # a marker named in a sentence stays text


def test_the_json_keys_table_names_every_key():
    """Formats' table of `analyze --json` keys says what each key means, which no
    registry holds: it is written by hand, and names every key the sections write."""
    from traceviz.analyses.summary.registry import json_keys

    text = (DOCS / "formats.md").read_text()
    tables = dict(_first_columns(text.split("## `analyze --json` keys")[1].split("\n## ")[0]))
    assert set(json_keys()) - tables["key"] == set()
