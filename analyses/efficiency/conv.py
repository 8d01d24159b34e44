"""Convolutions' shapes from related records, where an op's own record lacks what its
FLOP count needs.

A convolution's count needs its output's spatial size. Kineto records Concrete Inputs
(stride, padding, dilation) only since PyTorch 2.x; before, a forward convolution's
record holds its input and weight shapes and nothing else. Its output's shape is still
in the trace: the backward of a convolution receives the output's gradient, of the
output's shape, and records it beside the input and weight (``cudnn_``, ``miopen_`` and
``mkldnn_convolution_backward`` as [input, grad_output, weight], ``convolution_backward``
as [grad_output, input, weight]). A forward op takes the output
shape of the backward records with its input and weight shapes when they all agree on
one (two convolutions of equal input and weight shapes but other strides leave it
without); the two halves of an old backward (``*_backward_input``, ``*_backward_weight``)
take the shapes of the backward op they run inside. The shapes go into the details text
as ``conv:[input, weight, output]``, which ``traceviz.opcost`` reads; an op that gets
none and records no stride has no FLOPs ("shape incomplete").
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from traceviz.algos.intervals import innermost_enclosing
from traceviz.algos.optree import thread_key
from traceviz.opcost import parse_details
from traceviz.opcost.matrix import CONV_ARGS, CONV_BACKWARD_PARTS

# op: positions of (input, grad_output, weight) in its recorded dims, and of its
# transposed flag in Concrete Inputs (None: never transposed), from ATen's schemas
FULL_BACKWARD: dict[str, tuple[int, int, int, int | None]] = {
    "aten::cudnn_convolution_backward": (0, 1, 2, None),
    "aten::miopen_convolution_backward": (0, 1, 2, None),
    "aten::mkldnn_convolution_backward": (0, 1, 2, None),
    "aten::convolution_backward": (1, 0, 2, 7),
}


def _shapes(name: str, details: str) -> list | None:
    """[input, weight, output] of a backward record (its grad_output is the output's
    shape); None for a transposed one or an unreadable record."""
    a = parse_details(details)
    if a is None:
        return None
    x_at, go_at, w_at, t_at = FULL_BACKWARD[name]
    if t_at is not None and a.scalar(t_at) == "True":
        return None
    x, go, w = a.tensor(x_at), a.tensor(go_at), a.tensor(w_at)
    if not x or not go or not w or not len(x[0]) == len(go[0]) == len(w[0]) >= 3:
        return None
    return [x[0], w[0], go[0]]


def _own(details: str) -> tuple[list, list] | None:
    """The first two tensor shapes of a forward's record: its input and weight."""
    a = parse_details(details)
    if a is None:
        return None
    ts = [t[0] for i in range(min(len(a.dims), 3)) if (t := a.tensor(i))]
    return (ts[0], ts[1]) if len(ts) >= 2 else None


def _lacking(codes: np.ndarray, names: pd.Index, details: np.ndarray,
             ops: tuple[str, ...]) -> np.ndarray:
    """Rows (``codes`` into the distinct ``names``) of the ops ``ops`` whose record has
    shapes and no Concrete Inputs."""
    rows = np.flatnonzero(np.isin(np.asarray(names, dtype=object), ops)[codes]) \
        if len(names) else np.zeros(0, dtype=np.int64)
    if not len(rows):
        return rows
    d_codes, d_uniques = pd.factorize(pd.Series(details[rows], dtype=object))
    text = pd.Series(d_uniques, dtype=object).astype(str)
    keep = (text.str.startswith("dims:") & ~text.str.contains(" concrete:", regex=False))
    return rows[keep.to_numpy()[d_codes]]


def with_related_shapes(ev: pd.DataFrame, op_row: np.ndarray, names: np.ndarray,
                        details: np.ndarray) -> np.ndarray:
    """``details`` (per work row, of the op ``op_row`` it ran for) with
    ``conv:[input, weight, output]`` appended where a convolution's record lacks its
    stride and padding and a related record gives the shapes (see the module's
    docstring)."""
    codes, distinct = pd.factorize(pd.Series(names, dtype=object), use_na_sentinel=False)
    forward = _lacking(codes, distinct, details, tuple(CONV_ARGS))
    halves = _lacking(codes, distinct, details, tuple(CONV_BACKWARD_PARTS))
    if not len(forward) and not len(halves):
        return details
    full = np.flatnonzero(ev["name"].isin(list(FULL_BACKWARD)).to_numpy())
    if not len(full):
        return details
    out = details.copy()
    # each distinct backward record read once
    pair = pd.DataFrame({"name": ev["name"].iloc[full].astype(str).to_numpy(),
                         "details": ev["details"].iloc[full].astype(str).to_numpy()})
    codes, uniq = pd.MultiIndex.from_frame(pair).factorize()
    shapes = [_shapes(n, d) for n, d in uniq]
    if len(forward):
        _forward(out, forward, shapes)
    if len(halves):
        _halves(out, halves, op_row, ev, full, codes, shapes)
    return out


def _forward(out: np.ndarray, rows: np.ndarray, shapes: list) -> None:
    """Forward rows: the output shape the backward records of the same input and weight
    shapes agree on."""
    seen: dict[str, set[str]] = {}
    for s in shapes:
        if s is not None:
            seen.setdefault(json.dumps(s[:2]), set()).add(json.dumps(s[2]))
    codes, uniq = pd.factorize(pd.Series(out[rows], dtype=object))
    new = []
    for text in uniq:
        own = _own(str(text))
        outs = seen.get(json.dumps(list(own))) if own else None
        new.append(f"{text} conv:[{json.dumps(own[0])}, {json.dumps(own[1])}, "
                   f"{next(iter(outs))}]" if own and outs and len(outs) == 1 else text)
    out[rows] = np.asarray(new, dtype=object)[codes]


def _halves(out: np.ndarray, rows: np.ndarray, op_row: np.ndarray, ev: pd.DataFrame,
            full: np.ndarray, codes: np.ndarray, shapes: list) -> None:
    """Backward halves: the shapes of the backward op around them on their thread."""
    ops = np.unique(op_row[rows])
    pid, tid = ev["pid"].to_numpy(), ev["tid"].to_numpy()
    ts = ev["ts_ns"].to_numpy(np.int64)
    end = ts + ev["dur_ns"].to_numpy(np.int64)
    around = innermost_enclosing(thread_key(pid[full], tid[full]), ts[full], end[full],
                                 thread_key(pid[ops], tid[ops]), ts[ops])
    # per work row: its op's place in ``ops``, then the enclosing backward's shapes
    at = around[np.searchsorted(ops, op_row[rows])]
    text = np.array([""] + [json.dumps(s) if s else "" for s in shapes], dtype=object)
    related = text[np.where(at >= 0, codes[np.maximum(at, 0)] + 1, 0)]
    has = related != ""
    out[rows[has]] = out[rows[has]] + " conv:" + related[has]
