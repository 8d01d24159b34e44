"""The documentation's tables of the registries, made from the registries when the site is
built (``hooks.py``): a page holds a marker on a line of its own, ``<!-- generated:
scenarios -->``, and the built page holds the table in its place, so a variant, scenario,
rule, section or exported table added to the code is in the docs without an edit there.

Each table reads only the registry's own fields: names, the rows' help text and the first
paragraph of a docstring. Importing the registries imports no deep-learning framework
(the runners' registry is standard library only; the analyses need pandas).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterable
from typing import Any

MARKER = re.compile(r"^<!-- generated: (\w+)((?: [\w-]+)*) -->$", re.MULTILINE)


def first_paragraph(doc: str | None) -> str:
    """A docstring's first paragraph on one line, its reST literals as Markdown code."""
    text = (doc or "").strip().split("\n\n")[0]
    return re.sub(r"``(.+?)``", r"`\1`", " ".join(text.split()))


def first_sentence(doc: str | None) -> str:
    """The first sentence of a docstring's first paragraph."""
    text = first_paragraph(doc)
    found = re.match(r"(.+?[.?])(?:\s|$)", text)
    return found.group(1) if found else text


def _table(header: Iterable[str], rows: Iterable[Iterable[str]]) -> str:
    head = list(header)
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows]
    return "\n".join(lines)


def variants_table(*frameworks: str) -> str:
    """The variants of these frameworks (all without one), as ``traceviz models`` lists
    them: name, where it runs, what it is."""
    from traceviz.runners import variants

    chosen = [v for fw in frameworks or (None,) for v in variants(fw)]
    return _table(("variant", "runs on", "what runs"), (
        (f"`{v.name}`", "GPU only" if v.gpu_only else ", ".join(v.devices).replace(
            "cuda", "GPU").replace("cpu", "CPU"), v.description) for v in chosen))


def scenarios_table() -> str:
    """Every what-if scenario, in the registry's order: its name (with ``=X`` where it
    takes a factor), what changes in the replay, what it needs of the trace, why it does
    not apply to a CPU trace, whether ``whatif`` replays it by default."""
    from traceviz.analyses.whatif.scenarios import DEFAULT_SCENARIOS, SCENARIOS

    default = {d.partition("=")[0] for d in DEFAULT_SCENARIOS}

    def needs(s: Any) -> str:
        return ", ".join(n for n, on in (("launch calls", s.rewrites_launches),
                                         ("step marks", s.needs_steps)) if on)

    return _table(("scenario", "what changes in the replay", "needs", "not on a CPU trace",
                   "by default"), (
        (f"`{s.name}{'=X' if s.takes_factor else ''}`", s.help, needs(s), s.cpu_reason or "",
         "yes" if s.name in default else "") for s in SCENARIOS.values()))


def rules_table() -> str:
    """Every advice rule, in the order ``advise`` runs them: its theme, when it fires
    (its function's docstring) and the scenarios its saving comes from."""
    from traceviz.analyses.advice.rules import RULES

    return _table(("rule", "theme", "fires when", "saving from"), (
        (f"`{r.name}`", r.theme, first_paragraph(r.rule.__doc__),
         ", ".join(f"`{s}`" for s in (*r.scenarios, *r.alone))) for r in RULES))


def section_doc(section: Any, shared: bool) -> str:
    """What a section holds: the first sentence of its module's docstring, or, where its
    module holds several sections, of its ``json`` function's."""
    json = section.json
    doc = json.__doc__ if shared else sys.modules[json.__module__].__doc__
    return first_sentence(doc)


def sections_table() -> str:
    """Every section of ``analyze``, in the order of ``--json``: its key, the top-level
    ``--json`` keys it writes, what it holds."""
    from traceviz.analyses.summary.registry import sections

    every = sections()
    homes = [s.json.__module__ for s in every]
    return _table(("section", "`--json` keys", "what it holds"), (
        (f"`{s.key}`", ", ".join(f"`{k}`" for k in s.json_keys),
         section_doc(s, homes.count(s.json.__module__) > 1)) for s in every))


def exports_table() -> str:
    """The files ``analyze --export DIR`` writes, in order, with their columns."""
    from traceviz.table.exports import EXPORTS

    return _table(("file", "columns"), ((f"`{n}.parquet`", cols) for n, cols in EXPORTS.items()))


def registry_names() -> dict[str, list[str]]:
    """Every registry's entries by the marker name of its table, as the table's first
    column writes them (``gemm_speedup=X``, ``kernels.parquet``)."""
    from traceviz.analyses.advice.rules import RULES
    from traceviz.analyses.summary.registry import sections
    from traceviz.analyses.whatif.scenarios import SCENARIOS
    from traceviz.runners import variants
    from traceviz.table.exports import EXPORTS

    return {
        "variants": [v.name for v in variants()],
        "scenarios": [s.name + ("=X" if s.takes_factor else "") for s in SCENARIOS.values()],
        "rules": [r.name for r in RULES],
        "sections": [s.key for s in sections()],
        "exports": [f"{n}.parquet" for n in EXPORTS],
    }


BUILDERS: dict[str, Callable[..., str]] = {
    "variants": variants_table, "scenarios": scenarios_table, "rules": rules_table,
    "sections": sections_table, "exports": exports_table,
}


def expand(markdown: str) -> str:
    """The page with each marker replaced by its table (``variants torch`` passes
    ``torch``); an unknown name is a KeyError, which fails the build."""
    return MARKER.sub(lambda m: BUILDERS[m.group(1)](*m.group(2).split()), markdown)
