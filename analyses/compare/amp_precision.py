"""Mixed precision that ran another precision than asked: under bf16 autocast, PyTorch's
cuDNN LSTM (``aten::_cudnn_rnn``) runs in FP16 (``c10::Half``), its weights copied
``float -> c10::Half`` on every call. Read from the recorded dtypes (torch.profiler's
``record_shapes``); the copies' kernels are those launched inside those ``aten::copy_``
calls.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from traceviz.algos.intervals import innermost_enclosing
from traceviz.algos.optree import thread_key
from traceviz.table.classify import MATRIX_OPS
from traceviz.table.schema import is_in
from traceviz.units import fmt_ns

if TYPE_CHECKING:
    from traceviz.trace import Trace

HALF, BF16, FP32 = "c10::Half", "c10::BFloat16", "float"


@dataclass(frozen=True)
class PrecisionMismatch:
    asked: str                  # "bf16"
    ran: str                    # "fp16"
    ops: dict[str, int]         # matrix op -> calls that ran FP16
    copies: int                 # float -> c10::Half copies (aten::copy_ calls)
    copy_kernels: int
    copy_ns: int                # their kernels' device time
    steps: int

    def to_dict(self) -> dict[str, Any]:
        """The totals, and ``per_step`` as ``text`` prints them."""
        per = max(self.steps, 1)
        return asdict(self) | {"per_step": {
            "ops": {op: n / per for op, n in self.ops.items()}, "copies": self.copies / per,
            "copy_kernels": self.copy_kernels / per, "copy_ns": self.copy_ns / per}}

    def text(self) -> str:
        per = max(self.steps, 1)
        unit = " per step" if self.steps else ""
        ops = ", ".join(f"{op} ({n / per:,.0f}{unit})" for op, n in self.ops.items())
        return (f"asked for {self.asked}, ran {self.ran}: {ops} ran on {HALF} tensors; "
                f"{self.copies / per:,.0f} copies float -> {HALF}{unit} feed it "
                f"({self.copy_kernels / per:,.0f} kernels, {fmt_ns(self.copy_ns / per)}"
                f"{unit})")


# " types:\[(.*?)\]" tried from the first " types:[" of each line only (a lookahead that
# captures, then its capture: atomic): from every one of many on a line, ".*?" ran to the
# line's end each time (quadratic). A line's first one finds a "]" if any later one does.
_TYPES = re.compile(r"(?<![^\n])(?=(?P<to>[^\n]*? types:\[))(?P=to)(?P<types>[^\n]*?)\]")


def _types(details: pd.Series) -> pd.Series:
    return details.astype(str).str.extract(_TYPES, expand=True)["types"].fillna("")


def precision_mismatch(trace: Trace) -> PrecisionMismatch | None:
    """Matrix ops that ran FP16 in a run that asked for bf16 (its ``amp``, else ops that
    recorded ``c10::BFloat16`` tensors), with the float -> half copies that fed them."""
    ev = trace.events
    ops = ev[is_in(ev["kind"], "op")]
    if not len(ops):
        return None
    types = _types(ops["details"])
    asked = trace.meta.get("amp")
    if asked is None and "amp" not in trace.meta:
        asked = "bf16" if types.str.contains(BF16, regex=False).any() else None
    if asked != "bf16":
        return None
    first = types.str.extract(r'^"([^"]*)"', expand=False).fillna("")
    names = ops["name"].astype(str)
    # every floating-point tensor half (autocast casts a half input of a bf16 op itself)
    half = names.isin(MATRIX_OPS).to_numpy() & (first == HALF).to_numpy() & ~(
        types.str.contains(BF16, regex=False) | types.str.contains(f'"{FP32}"', regex=False)
    ).to_numpy()
    if not half.any():
        return None
    per_op = names[half].value_counts()
    to_half = (names == "aten::copy_").to_numpy() & types.str.startswith(
        f'"{HALF}", "{FP32}"').to_numpy()
    copies = ops[to_half]
    kernels = ev[is_in(ev["kind"], "kernel") & ev["launch_ts_ns"].notna().to_numpy()]
    calls = kernels["launch_ts_ns"].astype(np.int64).to_numpy()
    # the launch call's thread: the row that carries the kernel's launch id
    rt = ev[is_in(ev["kind"], "runtime") & (ev["launch_id"].to_numpy() >= 0)]
    by_id = pd.DataFrame({"pid": rt["pid"].to_numpy(), "tid": rt["tid"].to_numpy()},
                         index=rt["launch_id"].to_numpy())
    by_id = by_id[~by_id.index.duplicated()]
    where = by_id.reindex(kernels["launch_id"].to_numpy())
    ok = where["pid"].notna().to_numpy()
    inside = np.full(len(kernels), -1)
    if len(copies) and ok.any():
        inside[ok] = innermost_enclosing(
            thread_key(copies["pid"].to_numpy(), copies["tid"].to_numpy()),
            copies["ts_ns"].to_numpy(), (copies["ts_ns"] + copies["dur_ns"]).to_numpy(),
            thread_key(where["pid"].to_numpy()[ok].astype(np.int64),
                       where["tid"].to_numpy()[ok].astype(np.int64)), calls[ok])
    fed = inside >= 0
    steps = int(ev.loc[is_in(ev["kind"], "step"), "step"].nunique())
    return PrecisionMismatch(
        asked="bf16", ran="fp16", ops={str(k): int(v) for k, v in per_op.items()},
        copies=int(to_half.sum()), copy_kernels=int(fed.sum()),
        copy_ns=int(kernels["dur_ns"].to_numpy()[fed].sum()), steps=steps)
