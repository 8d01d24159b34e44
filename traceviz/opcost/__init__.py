"""FLOPs and bytes of one framework op, from the shapes and dtypes its trace recorded.

Every formula of the efficiency figures lives here, each beside its source. Inputs are
an op's name and its ``details`` text (``dims:[...] types:[...]``, plus ``concrete:[...]``
for the ops whose scalar arguments matter), as the Kineto parser keeps them with
``record_shapes``. Called once per distinct (name, details), never per event.

Rules that hold for every op:
- FLOPs count multiply and add apart (a multiply-add is 2), as cuBLAS, the LSTM studies
  and TraceLens count them; a matrix op's bias (addmm, baddbmm, linear, convolution)
  adds one FLOP per output element, as TraceLens counts addmm's.
- Bytes are the op's unique traffic: every tensor input read once and every output
  written once, at its recorded dtype (a lower bound: caches, re-reads and workspaces
  are not counted). An in-place op writes its first input.
- A figure that cannot be computed (no shapes, an unknown dtype, a negative dimension, a
  value past int64) is ``None`` with a note saying why, never a guess.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from traceviz.opcost.matrix import _MATRIX, CONCRETE_OPS, MODELLED_MATRIX_OPS
from traceviz.opcost.pointwise import _base, _modelled_pointwise, _pointwise
from traceviz.opcost.shapes import (
    DTYPE_BYTES,
    DTYPE_PRECISION,
    INT64_MAX,
    _Bad,
    _bytes_of,
    _NoDtype,
    parse_details,
)

# an XSpace op's own figures (parsers/xspace/event_rows.py writes them into details)
XLA_COST = re.compile(r"xla_flops:(-?\d+) xla_bytes:(-?\d+)")

__all__ = ["CONCRETE_OPS", "DTYPE_BYTES", "DTYPE_PRECISION", "MODELLED_MATRIX_OPS", "Cost",
           "has_model", "op_cost", "parse_details"]


@dataclass(frozen=True)
class Cost:
    """One op call's work. ``unit``: "matrix" (tensor/matrix cores may run it) or
    "vector"; ``precision``: fp64/fp32/fp16/bf16/fp8 or None; ``rule``: the formula's
    name (the table in docs/metrics.md)."""

    flops: int | None
    bytes: int | None
    precision: str | None
    unit: str
    rule: str
    note: str = ""


def has_model(name: str) -> bool:
    """Whether ``name`` has a formula (with shapes recorded it gets figures)."""
    return name in _MATRIX or _modelled_pointwise(_base(name))


@functools.lru_cache(maxsize=1 << 16)
def op_cost(name: str, details: str) -> Cost | None:
    """The work of one call of op ``name`` with recorded ``details``; None when no
    formula covers the op; a Cost with None figures and a note when one does but the
    record cannot feed it (no shapes, unknown dtype, absurd sizes)."""
    if details.startswith("xla_flops:"):
        return _xla_cost(name, details)
    matrix = _MATRIX.get(name)
    base = _base(name)
    if matrix is None and not _modelled_pointwise(base):
        return None
    unit = "matrix" if matrix else "vector"
    a = parse_details(details)
    if a is None:
        why = "an unreadable shape record" if details.startswith("dims:") else \
            "no shapes recorded"
        return Cost(None, None, None, unit, name, why)
    try:
        if matrix is not None:
            flops, tensors = matrix(a)
        else:
            flops, tensors = _pointwise(base, a)
        float_types = [t for _, t in tensors if t in DTYPE_PRECISION]
        precision = DTYPE_PRECISION.get(float_types[0]) if float_types else None
        note = ""
        try:
            nbytes: int | None = _bytes_of(tensors)
        except _NoDtype as e:  # shapes without dtypes: FLOPs, no bytes
            nbytes, note = None, str(e)
    except _Bad as e:
        return Cost(None, None, None, unit, name, str(e))
    except (TypeError, ValueError, IndexError, OverflowError) as e:
        return Cost(None, None, None, unit, name, f"unreadable shapes ({e})")
    if flops > INT64_MAX or (nbytes or 0) > INT64_MAX:
        return Cost(None, None, precision, unit, name, "FLOPs or bytes past int64")
    return Cost(int(flops), None if nbytes is None else int(nbytes), precision, unit, name,
                note)


def _xla_cost(name: str, details: str) -> Cost:
    """An XSpace op's own figures (XLA's cost analysis: ``xla_flops:F xla_bytes:B``, -1
    where absent); its precision is not recorded."""
    m = XLA_COST.match(details)
    if m is None:
        return Cost(None, None, None, "xla", name, "an unreadable XLA cost record")
    flops, nbytes = int(m.group(1)), int(m.group(2))
    if flops > INT64_MAX or nbytes > INT64_MAX:
        return Cost(None, None, None, "xla", name, "FLOPs or bytes past int64")
    return Cost(flops if flops >= 0 else None, nbytes if nbytes >= 0 else None, None, "xla",
                name, "XLA's cost analysis (the trace's own figures)")
