"""The one list of host ranges that mean "the step waits for its input": a framework's
call for the next batch, or its host-to-device transfer, on the thread that runs the step.

Only the consumer's call counts. The data loader's own work on other processes or
threads (DataLoader workers, tf.data's private thread pool: ``Iterator::Model::
ParallelMapV2::...``) runs beside the step; what costs the step is how long the call
that asks for the batch lasts: the time it waited for a batch that was not ready.
"""

from __future__ import annotations

import functools
import re

import numpy as np
import pandas as pd

from traceviz.algos.categorical import each, per_distinct
from traceviz.algos.patterns import in_line

# (framework, pattern): the framework names the remedies (advice/actions.py)
INPUT_RANGES: tuple[tuple[str, re.Pattern[str]], ...] = (
    # torch.utils.data: the iterator's __next__, recorded by the profiler around every
    # batch ("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
    # "_MultiProcessingDataLoaderIter" with workers); "DataLoader.*__next__" from the
    # first DataLoader of a line (plain, quadratic time on a name holding it many times)
    ("torch", re.compile(in_line("DataLoader", "__next__"))),
    # tf.data: the op that takes the next element, and the iterator's root call made
    # inside it (deeper "Iterator::Model::Map..." ranges run on tf.data's threads)
    ("tf", re.compile(r"^(IteratorGetNext(Sync|AsOptional)?(Op::DoCompute)?|"
                      r"MultiDeviceIteratorGetNextFromShard|Iterator::(Model|Root))$")),
    # JAX: a host array put on the device (jax.device_put, or a jitted call's host
    # arguments), PjRt's TraceMe around the transfer's host side
    ("jax", re.compile(r"^DevicePut$")),
    # the data phase traceviz's own runners mark around fetching a batch
    ("traceviz", re.compile(r"^data$")),
)


@functools.lru_cache(maxsize=1 << 14)
def input_framework(name: str) -> str | None:
    """The framework whose input call ``name`` is (``torch``, ``tf``, ``jax``, ``traceviz``), or
    None when it is no input call."""
    for framework, pattern in INPUT_RANGES:
        if pattern.search(name):
            return framework
    return None


def input_range_mask(events: pd.DataFrame) -> np.ndarray:
    """bool per row: a host range (op or annotation) that asks for the next batch."""
    host = events["kind"].isin(("op", "annotation")).to_numpy() & \
        (events["device"].to_numpy() < 0)
    named = per_distinct(events["name"], each(lambda n: input_framework(n) is not None),
                         fill=False).astype(bool)
    return host & named


def input_frameworks(events: pd.DataFrame) -> list[str]:
    """The frameworks of the input calls in ``events``, most time first."""
    rows = events[input_range_mask(events)]
    if rows.empty:
        return []
    fw = per_distinct(rows["name"], each(input_framework))
    return list(pd.Series(rows["dur_ns"].to_numpy()).groupby(fw).sum()
                .sort_values(ascending=False).index)
