from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_TRACES = ROOT.parent / "shared" / "traces"
KINETO = SHARED_TRACES / "kineto"


@pytest.fixture(scope="session")
def kineto_dir() -> Path:
    if not KINETO.is_dir():
        pytest.fail(f"real traces not found at {KINETO}: the tests need ../shared beside the repo")
    return KINETO
