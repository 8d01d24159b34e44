"""The documentation: the site builds with MkDocs in strict mode (a broken internal link or
anchor fails it, and a test shows that it does), the README stays a short entry page with
the two commands, and the output excerpt it shows is still what traceviz prints."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest

from tests.conftest import ROOT

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
