"""What traceviz says of TensorFlow/Keras profiles recorded by other projects
(``../shared/traces/foreign/xplane/``): casts, the device's derived peak, the host's time
between ops, streams of copies, log directories given at their parent. Each ``.xplane.pb``
of the Keras windows has a sibling ``.trace.json.gz`` the same profiler wrote: the
expected figures are read from it (plain ``json``, Python loops), never from traceviz."""

from __future__ import annotations

import gzip
import json
from decimal import Decimal
from functools import lru_cache
from pathlib import Path

import pytest

from tests.conftest import SHARED_TRACES
from traceviz import load
from traceviz.analyses.summary.figures import summarize

XPLANE = SHARED_TRACES / "foreign" / "xplane"
KERAS = XPLANE / "keras_semi_supervised_cv"


def _here(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"{path} is not here (../shared/traces/foreign)")
    return path


@lru_cache(maxsize=4)
def _sibling(name: str) -> tuple[dict, ...]:
    """The complete events of a Keras window's ``.trace.json.gz``."""
    with gzip.open(_here(KERAS / f"{name}.trace.json.gz"), "rt") as f:
        doc = json.load(f, parse_float=Decimal)
    return tuple(e for e in doc["traceEvents"] if e.get("ph") == "X")


def _ns(v) -> int:
    return int((Decimal(str(v)) * 1000).to_integral_value())


def _stream_rows(name: str) -> list[dict]:
    """Device rows on the GPU's stream lines (pid 1, small tids; the other GPU lines
    repeat them per kind)."""
    return [e for e in _sibling(name) if e["pid"] == 1 and int(e["tid"]) < 1 << 16]


def _op_type(e: dict) -> str:
    """A kernel's TF op type: ``annotation`` is ``name:Type``."""
    return str(e.get("args", {}).get("annotation", "")).rsplit(":", 1)[-1]


def test_inline_conversions_are_not_casts_only_tf_cast_ops_are():
    """ReluGrad's kernels convert the comparison's bool to float inside the product:
    FP32 work. The casts are the kernels TF's Cast op ran."""
    rows = _stream_rows("resnet_s5")
    cast = [e for e in rows if _op_type(e) == "Cast"]
    relu = [e for e in rows if _op_type(e) == "ReluGrad"
            and "TensorConversionOp" in e["name"]]
    assert len(relu) == 50 and len(cast) == 8
    trace = load(_here(KERAS / "resnet_s5.xplane.pb"))
    s = summarize(trace)
    assert s.casts.count == len(cast)
    assert s.casts.total_ns == sum(_ns(e["dur"]) for e in cast)
    k = trace.kernels()
    relu_rows = k[k["op"].astype(str) == "ReluGrad"]
    assert len(relu_rows) == len(relu) and not relu_rows["is_cast"].any()
    assert set(relu_rows["category"].astype(str)) <= {"elementwise", "reduction", "other"}
