"""What a command resolves once and hands to ``whatif`` and the scenarios that read it: the
trace's analysis windows and the device's peak."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from traceviz.opcost.peaks import Peak


@dataclass(frozen=True)
class Given:
    """``windows``: the trace's analysis windows (``work.analysis_windows``), per device.
    ``peak``: the device's peak the command resolved (``--peak``, or the one its summary's
    efficiency found); None: the trace's device's row of the peak table, or the peak the
    trace states, as ``efficiency`` finds it."""

    windows: dict[int, pd.DataFrame]
    peak: Peak | None = None
