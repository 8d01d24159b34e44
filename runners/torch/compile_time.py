"""The compiling PyTorch variants' compile time, read from the running torch, and the
progress events a capture shows while their first call compiles. The parsers import
nothing; ``compile_seconds`` imports torch (inside a runner process, or a test).

TorchDynamo records the time of each function it times under a key in
``torch._dynamo.utils.compilation_time_metrics`` (a dict of key -> list of seconds, named
``compilation_metrics`` before torch 2.1). A frame's compile, Inductor's included, is
``compile_inner``: ``_compile.<locals>.compile_inner`` while it was a nested function,
``_compile.compile_inner`` since; AOTAutograd compiles a training graph's backward lazily,
at its first backward, under ``backward._backward_impl``. ``compile_times(repr="str")``
prints the same dict as a table: "key, seconds" lines where the ``tabulate`` package is
missing, tabulate's whitespace-aligned columns where it is installed.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from traceviz.runners.capture_protocol import emit

FORWARD_KEY = "compile_inner"     # a key ending so: a frame's compile
BACKWARD_KEY = "_backward_impl"   # a key ending so: a lazily compiled backward
NOTHING = "torch._dynamo compiled nothing in this process"
_ROW = re.compile(r"^(\S+?),?\s+(.+)$")  # a key (no spaces), then its seconds


def _total(values: object) -> float | None:
    if isinstance(values, (int, float)):
        values = [values]
    if not isinstance(values, (list, tuple)) or not values:
        return None
    try:
        total = float(sum(float(v) for v in values))
    except (TypeError, ValueError):
        return None
    return total if math.isfinite(total) and total > 0 else None


def from_metrics(metrics: Mapping[str, Any]) -> tuple[float | None, list[str]]:
    """Seconds compiled in ``compilation_time_metrics`` (forward frames plus lazily
    compiled backwards) and the keys they came from."""
    total, keys = 0.0, []
    for suffix in (FORWARD_KEY, BACKWARD_KEY):
        for key, values in metrics.items():
            seconds = _total(values)
            if str(key).endswith(suffix) and seconds is not None:
                total += seconds
                keys.append(str(key))
    return (total, keys) if keys else (None, [])


def text_rows(text: str) -> dict[str, list[float]]:
    """``compile_times(repr="str")``'s table as key -> seconds: "key, s1, s2" lines (no
    tabulate) or "key   s1, s2" columns (tabulate); headers and rules are skipped."""
    rows: dict[str, list[float]] = {}
    for line in str(text or "").splitlines():
        m = _ROW.match(line.strip())
        if not m:
            continue
        try:
            values = [float(v) for v in m.group(2).replace(",", " ").split()]
        except ValueError:  # the header, tabulate's rule
            continue
        if values and all(math.isfinite(v) for v in values):
            rows[m.group(1)] = values
    return rows


def from_phases(phases: Mapping[str, Any]) -> float | None:
    """``calculate_time_spent()``'s frame compiles plus lazily compiled backwards."""
    parts = [_total(phases.get(k)) for k in ("entire_frame_compile",
                                              "entire_backward_compile")]
    found = [p for p in parts if p is not None]
    return sum(found) if found else None


def compile_seconds() -> tuple[float | None, str]:
    """torch.compile's own compile time in this process so far, and where it came from:
    ``compilation_time_metrics``, else ``compile_times()``'s text, else
    ``calculate_time_spent()``; None where nothing was compiled."""
    from torch._dynamo import utils

    metrics = getattr(utils, "compilation_time_metrics", None)
    if metrics is None:
        metrics = getattr(utils, "compilation_metrics", None)
    if isinstance(metrics, Mapping):
        seconds, keys = from_metrics(metrics)
        if seconds is not None:
            return seconds, f"torch._dynamo.utils.compilation_time_metrics: {' + '.join(keys)}"
    if hasattr(utils, "compile_times"):
        seconds, keys = from_metrics(text_rows(utils.compile_times(repr="str",
                                                                   aggregate=True)))
        if seconds is not None:
            return seconds, f"torch._dynamo.utils.compile_times(): {' + '.join(keys)}"
    if hasattr(utils, "calculate_time_spent"):
        seconds = from_phases(utils.calculate_time_spent())
        if seconds is not None:
            return seconds, ("torch._dynamo.utils.calculate_time_spent(): "
                             "entire_frame_compile + entire_backward_compile")
    return None, NOTHING


# the variants whose framework reports its own compile time, and how it is read
COMPILED = ("compile_torch", "compile_full_torch")
SCRIPTED = ("jit_torch", "static_torch")


def compile_time(variant: str) -> dict:
    """bench.json's ``framework_compile_s`` (None where the framework reports none) and
    ``framework_compile_note`` (where it came from, or why it is absent)."""
    if variant in COMPILED:
        seconds, note = compile_seconds()
        return {"framework_compile_s": seconds, "framework_compile_note": note}
    if variant in SCRIPTED:
        return {"framework_compile_s": None, "framework_compile_note":
                "TorchScript reports no compile time of its own; its scripting, tracing "
                "and profiling runs are in first_call_s"}
    return {"framework_compile_s": None, "framework_compile_note": "eager: nothing compiled"}


def compile_mode(variant: str, lstm: Any, device_type: str) -> str | None:
    """torch.compile's mode for a compiling variant (None for the others)."""
    if variant == "compile_full_torch":
        return lstm.mode or ("reduce-overhead" if device_type == "cuda" else "default")
    return "default" if variant == "compile_torch" else None


def announce_compile(step: Callable[[], Any], mode: str) -> Callable[[], Any]:
    """``step`` that reports its first call as the compile: a ``compile`` event with
    ``state`` "start" before it, "done" and its seconds after (the capture shows it
    with the time elapsed while it runs)."""
    import time

    first = [True]

    def announced() -> Any:
        if not first[0]:
            return step()
        first[0] = False
        what = f"torch.compile, mode {mode}"
        emit("compile", state="start", what=what, mode=mode)
        t = time.perf_counter()
        out = step()
        emit("compile", state="done", what=what, mode=mode, seconds=time.perf_counter() - t)
        return out

    return announced
