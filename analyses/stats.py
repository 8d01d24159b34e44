"""Small numeric helpers shared by the analyses."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


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
