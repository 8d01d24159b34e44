"""Step marks, told by name: one rule for every format.

torch.profiler marks its steps ``ProfilerStep#N``; NVTX and user ranges (Nsight Systems
captures, MXNet tasks) say ``step N`` (``step_N``, ``step#N``, any case). The step column
is 32-bit: a mark whose number has more than nine digits is not taken as a step.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

PROFILER_STEP = re.compile(r"^ProfilerStep#(\d+)$")  # the only marks in a Kineto trace
STEP_MARK = re.compile(r"^(?:ProfilerStep#|step[ _#]?)(\d+)$", re.IGNORECASE)
MAX_DIGITS = 9


def step_family(name: str) -> str:
    """A step mark with its number as ``*`` (``ProfilerStep#5`` -> ``ProfilerStep#*``,
    ``step 3`` -> ``step *``): what every step of a run is called; any other name as is."""
    m = STEP_MARK.match(name)
    return name if m is None else name[:m.start(1)] + "*"


def step_numbers(names: pd.Index | pd.Series | np.ndarray,
                 pattern: re.Pattern = STEP_MARK) -> tuple[np.ndarray, np.ndarray]:
    """Per name: its step number (-1: not a step mark), and whether it is a mark whose
    number does not fit the step column."""
    if isinstance(names, pd.Index) and names.is_unique:  # distinct already (per_distinct)
        distinct, codes = names.tolist(), np.arange(len(names))
    else:
        # one match per distinct name (an nsys export repeats a few range texts many times)
        cat = pd.Categorical(np.asarray(names, dtype=object))
        distinct, codes = cat.categories.tolist(), cat.codes
    found = [pattern.match(str(n)) for n in distinct]
    digits = [m.group(1) if m else "" for m in found]
    number = np.array([int(d) if d and len(d) <= MAX_DIGITS else -1 for d in digits] + [-1],
                      dtype=np.int64)
    too_long = np.array([len(d) > MAX_DIGITS for d in digits] + [False], dtype=bool)
    # -1 (a missing name) picks the appended "not a step"
    return number[codes], too_long[codes]
