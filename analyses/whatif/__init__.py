"""Scenarios: the registry, their graph transforms, the engine that replays them.

The face keeps the import path of ``traceviz.analyses.whatif`` (once one module): the
names of ``engine.py``.
"""

from traceviz.analyses.whatif.engine import (
    DEFAULT_SCENARIOS,
    LAUNCH_SCENARIOS,
    MATRIX_CATEGORIES,
    SCENARIOS,
    Scenario,
    Transform,
    WhatIf,
    parse_scenario,
    parse_scenarios,
    whatif,
)

__all__ = [
    "DEFAULT_SCENARIOS", "LAUNCH_SCENARIOS", "MATRIX_CATEGORIES", "SCENARIOS", "Scenario",
    "Transform", "WhatIf", "parse_scenario", "parse_scenarios", "whatif",
]
