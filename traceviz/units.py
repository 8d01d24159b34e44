"""Human-readable figures (all inputs in ns)."""

from __future__ import annotations


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


def flop_rate(cpu: bool) -> tuple[str, float]:
    """The unit a FLOP rate is shown in and the factor from TFLOP/s (the analyses'
    unit): GFLOP/s for CPU ops (a CPU's rates read 0.00 in TFLOP/s), TFLOP/s for a
    device's kernels."""
    return ("GFLOP/s", 1e3) if cpu else ("TFLOP/s", 1.0)


def fmt_rate(tflops: float | None, cpu: bool, digits: int = 2) -> str:
    """A FLOP rate given in TFLOP/s, in the unit ``flop_rate`` picks, with it."""
    if tflops is None or tflops != tflops:
        return "–"
    unit, scale = flop_rate(cpu)
    return f"{tflops * scale:,.{digits}f} {unit}"
