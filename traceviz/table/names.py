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
from collections.abc import Sequence

import pandas as pd

_NAMESPACE = re.compile(r"(?:\(anonymous namespace\)|[A-Za-z_]\w*)::")
_LAMBDA = re.compile(r"::\{lambda[^{}]*\}|::operator\(\)\(\)( const)?|\{lambda[^{}]*\}")
_MANGLED = re.compile(r"_Z[A-Za-z0-9_]")


def demangle(name: str) -> str:
    """The C++ signature of an Itanium-mangled symbol (``_Z...``); anything else, or a
    symbol the demangler cannot read, as it is."""
    if not _MANGLED.match(name):
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


def _function_part(s: str) -> str:
    """The function of a C++ signature without its return type: ``std::enable_if<...>::type
    vllm::fused_add_rms_norm_kernel<...>(...)`` -> ``vllm::fused_add_rms_norm_kernel<...>(...)``.
    A return type is what precedes the last space outside any ``<>``/``()``."""
    angle = paren = 0
    cut = 0
    for i, ch in enumerate(s):
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


def _simplified(name: str, depth: int) -> str:
    """No namespaces, return type, argument lists or lambdas; templates to ``depth``."""
    s = _function_part(name[5:] if name.startswith("void ") else name)
    s = _NAMESPACE.sub("", _LAMBDA.sub("", s))
    out = []
    angle = paren = 0
    for ch in s:
        if ch == "(":
            paren += 1
        elif ch == ")":
            paren = max(0, paren - 1)
        elif paren:
            continue
        elif ch == "<":
            angle += 1
            if angle <= depth:
                out.append(ch)
            elif angle == depth + 1:
                out.append("…")
        elif ch == ">":
            if angle <= depth:
                out.append(ch)
            angle = max(0, angle - 1)
        elif angle <= depth:
            out.append(ch)
    return re.sub(r"\s+>", ">", re.sub(r"\s+", " ", "".join(out))).strip()


def _cut(s: str, width: int) -> str:
    return s if len(s) <= width else s[: max(width - 1, 0)] + "…"


def short_name(name: str, width: int = 60) -> str:
    """A readable kernel name: no namespaces, return type, argument lists or templates
    below depth 2.

    ``void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>,
    at::detail::Array<char*, 3> >(int, ...)`` -> ``vectorized_elementwise_kernel<4,
    CUDAFunctor_add<float>, Array<char*, 3>>``, cut to ``width``.
    """
    if "<" not in name and "(" not in name:  # a plain name (aten::mm, volta_sgemm_128x64_nn)
        return _cut(name, width)
    # "(3 others)", "(no phase)": a label, not a signature
    return _cut(_simplified(demangle(name), 2) or name, width)


def _common_prefix(strings: Sequence[str]) -> int:
    first, last = min(strings), max(strings)
    n = 0
    while n < min(len(first), len(last)) and first[n] == last[n]:
        n += 1
    return n


def _window(full: str, start: int, width: int) -> str:
    """``head…`` + the part of ``full`` from ``start``: the function name first (up to its
    first ``<``, at most half the width), then what differs."""
    if start <= 0:
        return _cut(full, width)
    stem = re.match(r"[^<]*<?", full)
    templated = stem is not None and stem.group(0).endswith("<")
    head = full[: min(len(stem.group(0)) if stem else 0,
                      max(width // 2 - 2 if templated else width // 3, 8), start)]
    # back up to the start of the word that differs (a few characters at most), so that
    # it reads whole: "scalar_sum_op", "tilesize128x128x8"
    back = start
    while back > len(head) and start - back < 8 and (full[back - 1].isalnum()
                                                      or full[back - 1] == "_"):
        back -= 1
    start = back
    return _cut(head + "…" + full[start:], width)


def distinct_names(names: Sequence[str], width: int) -> list[str]:
    """``short_name`` of each of ``names`` at ``width``, except where two different names
    would read the same: those show their function name, then the part where they differ
    (``EigenMetaKernel<…scalar_sum_op<float>…`` and ``EigenMetaKernel<…scalar_product_op…``).
    Names that still read the same at this width get a ``#k`` suffix, so that no two rows
    of a table look alike."""
    shown = [short_name(n, width) for n in names]
    groups: dict[str, list[int]] = defaultdict(list)
    for i, s in enumerate(shown):
        groups[s].append(i)
    for rows in groups.values():
        if len({names[i] for i in rows}) < 2:
            continue
        fulls = [_simplified(demangle(names[i]), 10_000) for i in rows]
        _refine(rows, fulls, shown, width)
    return _numbered(names, shown, width)


def _refine(rows: list[int], fulls: list[str], shown: list[str], width: int) -> None:
    """Show each of ``rows`` from where its group's full forms start to differ; groups
    that still collide split further on their own longer common prefix."""
    start = _common_prefix(fulls) if len(set(fulls)) > 1 else 0
    windows = [_window(f, start, width) for f in fulls]
    sub: dict[str, list[int]] = defaultdict(list)
    for k, w in enumerate(windows):
        sub[w].append(k)
    for w, ks in sub.items():
        distinct = {fulls[k] for k in ks}
        if len(ks) > 1 and len(distinct) > 1 and _common_prefix([fulls[k] for k in ks]) > start:
            _refine([rows[k] for k in ks], [fulls[k] for k in ks], shown, width)
        else:
            for k in ks:
                shown[rows[k]] = w


def _numbered(names: Sequence[str], shown: list[str], width: int) -> list[str]:
    """The last resort: rows of different names that still read the same get ``#1``,
    ``#2``... in order of appearance."""
    by_text: dict[str, list[int]] = defaultdict(list)
    for i, s in enumerate(shown):
        by_text[s].append(i)
    out = list(shown)
    for text, rows in by_text.items():
        kinds = list(dict.fromkeys(names[i] for i in rows))
        if len(kinds) < 2:
            continue
        for i in rows:
            tag = f" #{kinds.index(names[i]) + 1}"
            out[i] = _cut(text.removesuffix("…"), width - len(tag)) + tag
    return out
