"""Human-readable figures (all inputs in ns)."""

from __future__ import annotations

import re


def fmt_ns(ns: float | None) -> str:
    if ns is None:
        return "–"
    ns = float(ns)
    a = abs(ns)
    if a >= 1e9:
        return f"{ns / 1e9:.3f} s"
    if a >= 1e6:
        return f"{ns / 1e6:.3f} ms"
    if a >= 1e3:
        return f"{ns / 1e3:.1f} µs"
    return f"{ns:.0f} ns"


def plural(n: int, word: str, many: str | None = None) -> str:
    """``1 step``, ``2 steps`` (``many``: an irregular plural)."""
    return f"{n:,} {word if n == 1 else many or word + 's'}"


def fmt_bytes(n: float | None) -> str:
    """Bytes in binary units (B, KiB, MiB, GiB), as allocators report them."""
    if n is None or n != n:
        return "-"
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= size:
            return f"{n / size:.2f} {unit}"
    return f"{int(n)} B"


def fmt_pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}%"


_NAMESPACE = re.compile(r"(?:\(anonymous namespace\)|[A-Za-z_]\w*)::")
_LAMBDA = re.compile(r"::\{lambda[^{}]*\}|::operator\(\)\(\)( const)?|\{lambda[^{}]*\}")


def short_name(name: str, width: int = 60) -> str:
    """A readable kernel name: no namespaces, argument lists or templates below depth 2.

    ``void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>,
    at::detail::Array<char*, 3> >(int, ...)`` -> ``vectorized_elementwise_kernel<4,
    CUDAFunctor_add<float>, Array<char*, 3>>``, cut to ``width``.
    """
    s = name[5:] if name.startswith("void ") else name
    if "<" not in s and "(" not in s:  # a plain name (aten::mm, volta_sgemm_128x64_nn)
        return s if len(s) <= width else s[: width - 1] + "…"
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
            if angle <= 2:
                out.append(ch)
            elif angle == 3:
                out.append("…")
        elif ch == ">":
            if angle <= 2:
                out.append(ch)
            angle = max(0, angle - 1)
        elif angle <= 2:
            out.append(ch)
    s = re.sub(r"\s+>", ">", re.sub(r"\s+", " ", "".join(out))).strip()
    return s if len(s) <= width else s[: width - 1] + "…"
