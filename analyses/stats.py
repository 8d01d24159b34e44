"""Small numeric helpers shared by the analyses."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class Distribution:
    """Median, 90th percentile and max of a set of ns values (None when empty)."""

    count: int
    median_ns: float | None
    p90_ns: float | None
    max_ns: float | None

    @classmethod
    def of(cls, values: np.ndarray) -> Distribution:
        v = np.asarray(values, dtype=np.float64)
        v = v[~np.isnan(v)]
        if len(v) == 0:
            return cls(0, None, None, None)
        return cls(len(v), float(np.median(v)), float(np.percentile(v, 90)), float(v.max()))


def share(part: float, whole: float) -> float | None:
    return float(part) / float(whole) if whole else None


def plain_row(r: dict) -> dict:
    """A table row with numpy scalars as Python values and NaN as None (for JSON)."""
    return {k: (None if pd.isna(v) else v.item() if hasattr(v, "item") else v)
            for k, v in r.items()}
