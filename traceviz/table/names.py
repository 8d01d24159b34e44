"""Kernel and op names as a reader sees them: demangled, shortened to a width, and kept
apart from each other.

Names come from traces in every form: CUPTI's demangled C++ signatures (``void
at::native::vectorized_elementwise_kernel<4, ...>(int, ...)``), mangled symbols from ROCm
and cuDNN's CUTLASS kernels (``_ZN2ck...``), vendor names (``sm80_xmma_gemm_...``) and
framework ops (``aten::mm``). Mangled symbols are demangled once per distinct name with
``cpp_demangle`` (the gimli-rs Rust demangler), never by hand.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Sequence

import pandas as pd

# A qualifier ``ns::``: an identifier from its first ASCII letter or underscore, as the
# plain ``[A-Za-z_]\w*::`` would find it, but tried only where a word starts (group 1
# keeps the digits or other letters before that first letter). Tried inside words, the
# plain pattern runs to each word's end from every one of its characters: a 40 KB
# identifier took seconds.
_NAMESPACE = re.compile(r"\(anonymous namespace\)::|(?<!\w)([^\W_A-Za-z]*)[A-Za-z_]\w*::")
_LAMBDA = re.compile(r"::\{lambda[^{}]*\}|::operator\(\)\(\)( const)?|\{lambda[^{}]*\}")
_MANGLED = re.compile(r"_Z[A-Za-z0-9_]")

# The characters of a name that are read: three times the longest real kernel name seen
# (a CUTLASS convolution of 10,655). Shortening and classifying cost time per character
# (the category patterns together about 15 µs a character): a 1 MB name took seconds.
LONGEST_NAME = 1 << 15


def bounded(name: str) -> str:
    """``name`` as the name functions read it: whole up to ``LONGEST_NAME`` characters, a
    longer one by its first and last halves around ``…`` (where its function name and its
    suffixes are)."""
    if len(name) <= LONGEST_NAME:
        return name
    half = LONGEST_NAME // 2
    return name[:half] + "…" + name[-half:]


def demangle(name: str) -> str:
    """The C++ signature of an Itanium-mangled symbol (``_Z...``); anything else, or a
    symbol the demangler cannot read or one longer than any real one, as it is."""
    if not _MANGLED.match(name) or len(name) > LONGEST_NAME:
        return name
    try:
        from cpp_demangle import demangle as _demangle
    except ImportError:  # a missing optional wheel: keep names as recorded
        return name
    try:
        return _demangle(name)
    except (ValueError, RecursionError):
        return name


def demangled_categories(categories: pd.Index) -> pd.Index:
    """``categories`` (distinct names) with mangled symbols demangled, where the result
    stays distinct from every other name (categories must be unique)."""
    values = [str(c) for c in categories.tolist()]
    if not any(_MANGLED.match(v) for v in values):
        return categories
    out = [demangle(v) for v in values]
    seen: dict[str, int] = defaultdict(int)
    for v in out:
        seen[v] += 1
    return pd.Index([d if seen[d] == 1 else v for v, d in zip(values, out, strict=True)])


_MARKS = re.compile(r"[<>() ]")


def _function_part(s: str) -> str:
    """The function of a C++ signature without its return type: ``std::enable_if<...>::type
    vllm::fused_add_rms_norm_kernel<...>(...)`` -> ``vllm::fused_add_rms_norm_kernel<...>(...)``.
    A return type is what precedes the last space outside any ``<>``/``()``."""
    angle = paren = 0
    cut = 0
    for mark in _MARKS.finditer(s):  # the characters that matter, not every one
        ch, i = mark.group(), mark.start()
        if ch == "<" and not paren:  # "(8)>(0)" inside a template argument is no bracket
            angle += 1
        elif ch == ">" and not paren:
            angle = max(0, angle - 1)
        elif ch == "(":
            if not angle and paren == 0 and not s.startswith("(anonymous", i):
                break  # the argument list: what follows are parameters
            paren += 1
        elif ch == ")":
            paren = max(0, paren - 1)
        elif ch == " " and not angle and not paren:
            cut = i + 1
    return s[cut:]


def _simplified(name: str, depth: int, namespaces: bool = False) -> str:
    """No namespaces (unless ``namespaces``), return type, argument lists or lambdas;
    templates to ``depth``."""
    s = _LAMBDA.sub("", _function_part(name[5:] if name.startswith("void ") else name))
    if not namespaces:
        s = _NAMESPACE.sub(r"\1", s)
    out = []
    angle = paren = 0
    # bracket by bracket: the text between two brackets is kept or left out whole (a
    # character at a time cost ~0.1 ms a kernel name, in every table that shows names)
    for part in _BRACKETS.split(s):
        if part == "(":
            paren += 1
        elif part == ")":
            paren = max(0, paren - 1)
        elif paren:
            continue
        elif part == "<":
            angle += 1
            if angle <= depth:
                out.append(part)
            elif angle == depth + 1:
                out.append("…")
        elif part == ">":
            if angle <= depth:
                out.append(part)
            angle = max(0, angle - 1)
        elif angle <= depth:
            out.append(part)
    return re.sub(r"\s+>", ">", re.sub(r"\s+", " ", "".join(out))).strip()


_BRACKETS = re.compile(r"([()<>])")


def _cut(s: str, width: int) -> str:
    return s if len(s) <= width else s[: max(width - 1, 0)] + "…"


def middle_cut(s: str, width: int) -> str:
    """``s`` on one line of at most ``width`` characters: where it is longer, its
    beginning (a third) and its end (the rest) around ``…``. The end of a recorded name
    is what tells it apart (``Optimizer.step#AdamW.step``, ``module: LSTM → lstm``)."""
    if len(s) <= width:
        return s
    if width < 4:
        return _cut(s, width)
    head = (width - 1) // 3
    return s[:head] + "…" + s[len(s) - (width - 1 - head):]


def distinct_labels(names: Sequence[str], width: int) -> list[str]:
    """Names as recorded (ranges, modules; any name ``--wide`` shows whole), each on one
    line of at most ``width`` characters (``middle_cut``); different names that read alike
    once cut get ``#1``, ``#2``, as ``distinct_names``' last resort."""
    texts = [str(n) for n in names]
    uniq = list(dict.fromkeys(texts))
    shown = dict(zip(uniq, _numbered(uniq, [middle_cut(n, width) for n in uniq], width,
                                     middle_cut), strict=True))
    return [shown[t] for t in texts]


def short_name(name: str, width: int = 60) -> str:
    """A readable kernel name: no namespaces, return type, argument lists or templates
    below depth 2.

    ``void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>,
    at::detail::Array<char*, 3> >(int, ...)`` -> ``vectorized_elementwise_kernel<4,
    CUDAFunctor_add<float>, Array<char*, 3>>``, cut to ``width`` (a plain name, without
    templates or parameters, around a middle ``…``: its end tells it apart).
    """
    if "<" not in name and "(" not in name:  # a plain name (aten::mm, volta_sgemm_128x64_nn)
        return middle_cut(name, width)
    # "(3 others)", "(no phase)": a label, not a signature
    return _cut(_simplified(demangle(bounded(name)), 2) or name, width)


# The forms a name is told apart by, each more detailed than the one before: where two
# names read alike in one, the next shows more (all template levels; then namespaces, as
# DeepSeek's grouped GEMMs ``device_kernel<dpsk::...::fp8_ptp128c::GemmKernel>`` differ
# only there; then the signature with its arguments; then the name as recorded).
_FORMS = (lambda raw, d: _simplified(d, 10_000),
          lambda raw, d: _simplified(d, 10_000, namespaces=True),
          lambda raw, d: d, lambda raw, d: raw)
_QUALIFIERS = re.compile(r"(?:(?:\(anonymous namespace\)|[A-Za-z_]\w*)::)*")


def distinct_names(names: Sequence[str] | pd.Series | pd.Categorical, width: int,
                   among: Sequence[str] | pd.Index | None = None) -> list[str]:
    """The names shown together (a table's rows, a legend), each as short as it can be
    at ``width`` and no two different names alike: ``short_name`` where that is unique
    among them, otherwise the function name and then the part where the clashing names
    differ, their common prefix and (where it does not fit) common suffix left out
    (``EigenMetaKernel<…scalar_sum_op<float>…``; ``device_kernel<fp8_ptp128c::GemmKernel>``
    where only a namespace differs). Names that still read the same at this width get a
    ``#k`` suffix. Worked out once per distinct name (a categorical's categories), so
    the same name reads the same on every row. ``among``: more names the shown ones must
    not read like (a few kernels named in a line of text, told apart from every kernel
    of the trace, as the tables show them)."""
    codes, distinct = pd.factorize(pd.Series(names, dtype=object).astype(str), sort=False)
    uniq = [str(n) for n in distinct]
    if among is not None:
        shown_set = set(uniq)
        uniq += [n for n in dict.fromkeys(str(a) for a in among) if n not in shown_set]
    shown = [short_name(n, width) for n in uniq]
    stems = [_stem(s, width) for s in shown]
    demangled: dict[int, str] = {}
    # names told apart within one clash may read like a name of another: those clash
    # anew, and the larger set differs earlier (a few rounds; then #k)
    for _ in range(4):
        groups: dict[str, list[int]] = defaultdict(list)
        for i, s in enumerate(shown):
            groups[s].append(i)
        clashes = [rows for rows in groups.values() if len(rows) > 1]
        if not clashes:
            break
        for rows in clashes:
            named = [(bounded(uniq[i]), demangled.setdefault(i, demangle(bounded(uniq[i]))),
                      stems[i]) for i in rows]
            _refine(rows, named, shown, width, 0)
    shown = _numbered(uniq, shown, width)
    return [shown[c] for c in codes]


def _stem(short: str, width: int) -> str:
    """What a shown name starts with before the part that differs: a short name's
    function name, up to its first ``<``; the first third of a plain name."""
    m = re.match(r"[^<]*<", short)
    return m.group(0) if m else short[: max(width // 3, 8)].removesuffix("…")


def _refine(rows: list[int], named: list[tuple[str, str, str]], shown: list[str], width: int,
            level: int) -> None:
    """Show each of ``rows`` (names that read alike; ``named``: each one's recorded and
    demangled name and its stem) by the part of its form at ``level`` where they differ;
    those still alike split further on their own common parts, or at the next level."""
    if level >= len(_FORMS):
        return  # alike as recorded, at this width: _numbered tells them apart
    forms = [_FORMS[level](raw, d) for raw, d, _ in named]
    if len(set(forms)) < 2:
        _refine(rows, named, shown, width, level + 1)
        return
    start, end = _common_parts(forms)
    windows = [_window(f, start, end, n[2], width) for f, n in zip(forms, named, strict=True)]
    sub: dict[str, list[int]] = defaultdict(list)
    for k, w in enumerate(windows):
        sub[w].append(k)
    for w, ks in sub.items():
        if len({forms[k] for k in ks}) < 2:
            for k in ks:
                shown[rows[k]] = w
            continue
        deeper = _common_parts([forms[k] for k in ks]) != (start, end)
        # alike on a longer common part: split on it; else show more of each name
        _refine([rows[k] for k in ks], [named[k] for k in ks], shown, width,
                level if deeper else level + 1)


def _common_parts(forms: list[str]) -> tuple[int, int]:
    """Where distinct ``forms`` start to differ and how long their common ending is,
    both moved to a word's edge so that the part shown reads whole (``scalar_sum_op``,
    ``tilesize128x128x8``), and never overlapping."""
    first, last = min(forms), max(forms)
    start = 0
    while start < min(len(first), len(last)) and first[start] == last[start]:
        start += 1
    # a name that is another's with a part left out would show nothing: keep a little
    # of its ending in what is shown
    shortest = min(len(f) for f in forms) - start
    shortest -= min(shortest, 8)
    end = 0
    rev = [f[::-1] for f in forms]
    while end < shortest and len({r[end] for r in rev}) == 1:
        end += 1
    f = forms[0]
    return _word_edge(f, start, -1), len(f) - _word_edge(f, len(f) - end, 1)


def _word_edge(f: str, i: int, step: int, most: int = 12) -> int:
    """``i`` moved (back for ``step`` -1, on for +1) to the edge of the word it is in,
    so that what is shown reads whole: ``scalar_sum_op``, ``tilesize128x128x16``. At
    most ``most`` characters: from inside a longer word, to its nearest ``_``."""
    def word(k: int) -> bool:
        return 0 <= k < len(f) and (f[k].isalnum() or f[k] == "_")

    ahead = (lambda j: j - 1) if step < 0 else (lambda j: j)
    if not word(ahead(i)) or not word(ahead(i) - step):
        return i  # already at an edge
    j = i
    while abs(j - i) < most and word(ahead(j)):
        j += step
    if not word(ahead(j)):
        return j
    parts = f[min(i, j):max(i, j)]
    cut = parts.rfind("_") if step < 0 else parts.find("_")
    return i if cut < 0 else min(i, j) + cut + (1 if step < 0 else 0)


def _window(form: str, start: int, end: int, stem: str, width: int) -> str:
    """``form`` shown from ``start``, after its function name (``stem``), with its common
    ending of ``end`` characters where it fits (else ``…``). What is skipped reads ``…``,
    except namespace qualifiers alone, which short names drop anyway."""
    middle = form[start: len(form) - end]
    tail = form[len(form) - end:]
    at = form.find(stem) if stem else -1
    if start == 0:
        head = ""
    elif at >= 0 and at + len(stem) <= start:
        skipped = form[at + len(stem): start]
        head = stem + ("" if _QUALIFIERS.fullmatch(skipped) else "…")
    else:
        head = "…"
    rest = "…" if tail else ""
    for text in (head + middle + tail, head + middle + rest):
        if len(text) <= width:
            return text
    if len(head) > 1:  # the function name gives up room to the part that differs
        short = _cut(head.removesuffix("…"), max(width // 2 - 2, 8))
        head = short if short.endswith("…") else head
    return _cut(head + middle + rest, width)


def _numbered(names: Sequence[str], shown: list[str], width: int,
              cut: Callable[[str, int], str] = _cut) -> list[str]:
    """The last resort: different names that still read the same get ``#1``, ``#2``...
    in order of appearance, after their text cut to leave room for the tag (texts that
    read alike once cut are numbered together)."""
    by_text: dict[str, list[int]] = defaultdict(list)
    for i, s in enumerate(shown):
        by_text[s].append(i)
    clashing = [i for rows in by_text.values()
                if len({names[i] for i in rows}) > 1 for i in rows]
    out = list(shown)
    by_base: dict[str, list[int]] = defaultdict(list)
    for i in clashing:
        by_base[cut(shown[i].removesuffix("…"), width - 4)].append(i)
    for base, rows in by_base.items():
        kinds = list(dict.fromkeys(names[i] for i in rows))
        for i in rows:
            out[i] = f"{base} #{kinds.index(names[i]) + 1}"
    return out
