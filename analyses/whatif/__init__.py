"""Scenarios: the registry, their graph transforms, the engine that replays them.

The face keeps the import path of ``traceviz.analyses.whatif`` (once one module): the
registry of ``scenarios.py`` (one ``ScenarioSpec`` row per scenario), the transforms'
shared constant, and the replay of ``engine.py``.
"""

from traceviz.analyses.whatif.engine import Scenario, WhatIf, whatif
from traceviz.analyses.whatif.scenarios import (
    DEFAULT_SCENARIOS,
    LAUNCH_SCENARIOS,
    SCENARIOS,
    ScenarioSpec,
    Transform,
    parse_scenario,
    parse_scenarios,
)
from traceviz.analyses.whatif.transforms import MATRIX_CATEGORIES

__all__ = [
    "DEFAULT_SCENARIOS", "LAUNCH_SCENARIOS", "MATRIX_CATEGORIES", "SCENARIOS", "Scenario",
    "ScenarioSpec", "Transform", "WhatIf", "parse_scenario", "parse_scenarios", "whatif",
]
