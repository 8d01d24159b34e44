"""What an NVTX range's text says: a step mark, an op (and its recorded shapes), or an
annotation. Read with Arrow's string kernels over the whole column: an nsys export of an
``emit_nvtx`` run has a distinct text per range (its sequence numbers), so nothing is
saved by reading each distinct text once, and pandas' string methods loop in Python."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from traceviz.table.steps import STEP_MARK, step_numbers

# ATen ops named plainly (traceviz's own CPU op ranges); other "ns::name" ranges are user
# or library ranges (TensorRT's "ExecutionContext::enqueue"), kept as annotations
NVTX_OP = r"^aten::[\pL\pN_]"  # Python's \w: RE2's is ASCII only
# what emit_nvtx appends to every RecordFunction range (ops, autograd functions)
EMIT_NVTX_SUFFIX = r", (?:seq|op_id) = \d+"
# emit_nvtx(record_shapes=True) (nsys --pytorch=autograd-shapes-nvtx) appends the input
# shapes: "aten::mm, seq = 4, op_id = 7, sizes = [[2, 3], [3, 4]], input_op_ids = [...]"
NVTX_SIZES = r", sizes = (?P<s>\[(?:\[[-\d, ]*\](?:, )?)*\])"
# ``analyze --raw-range-names``: an emit_nvtx range keeps its whole text ("aten::mm, seq =
# 4, op_id = 7") as a range of its own instead of being folded into its op's name
_RAW_NAMES: ContextVar[bool] = ContextVar("raw_range_names", default=False)


@contextmanager
def raw_range_names(on: bool = True) -> Iterator[None]:
    """Inside: NVTX texts are read as written (no op folding, no shapes)."""
    token = _RAW_NAMES.set(on)
    try:
        yield
    finally:
        _RAW_NAMES.reset(token)


def read_ranges(text: pd.Series) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per range text: its step number (-1: none), kind (``step``, ``op``,
    ``annotation``), name (an op's text up to its first comma, stripped) and details
    (an op's recorded shapes as ``dims:[...] types:[]``: NVTX carries no dtypes, so the
    efficiency figures get FLOPs but no bytes; else "")."""
    arr = pa.array(text.to_numpy(object), type=pa.string())

    def found(pattern: str, ignore_case: bool = False) -> np.ndarray:
        return pc.fill_null(pc.match_substring_regex(arr, pattern, ignore_case=ignore_case),
                            False).to_numpy(zero_copy_only=False)

    step_no = np.full(len(arr), -1, dtype=np.int64)
    marks = np.flatnonzero(found(STEP_MARK.pattern, ignore_case=True))
    if len(marks):  # the Python rule (its digit limit) on the few texts that look like one
        step_no[marks] = step_numbers(text.iloc[marks].to_numpy(object))[0]
    is_step = step_no >= 0
    is_op = (found(NVTX_OP) | found(EMIT_NVTX_SUFFIX)) & ~is_step
    if _RAW_NAMES.get():  # every range as written: an annotation with its whole text
        is_op[:] = False
    kind = np.where(is_step, "step", np.where(is_op, "op", "annotation")).astype(object)
    # "aten::mm, seq = 4, op_id = 7, sizes = [...]" -> "aten::mm"
    head = pc.utf8_trim_whitespace(pc.list_element(pc.split_pattern(arr, ",", max_splits=1),
                                                   0))
    name = np.where(is_op, head.to_numpy(zero_copy_only=False), text.to_numpy(object))
    sizes = pc.struct_field(pc.extract_regex(arr, NVTX_SIZES), [0])
    dims = pc.binary_join_element_wise("dims:", sizes, " types:[]", "")
    details = np.where(is_op, pc.fill_null(dims, "").to_numpy(zero_copy_only=False), "")
    return step_no, kind, name.astype(object), details.astype(object)
