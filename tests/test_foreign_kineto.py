"""What traceviz says of torch.profiler traces recorded by other projects
(``../shared/traces/foreign/kineto/``) where a figure is unknown: the devices a trace
names without recording their work, FLOP rates without shapes, a forward reference to
findings that are not there. Expected figures come from the raw JSON (plain ``json``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import SHARED_TRACES, shared
from traceviz.cli import main

FOREIGN = SHARED_TRACES / "foreign" / "kineto"


def _doc(path: Path) -> dict:
    with open(shared(path)) as f:
        return json.load(f)


@pytest.mark.parametrize("name", ["rtx3060_triton_attention_nocupti.json",
                                  "t4_resnet_cifar.json"])
def test_devices_and_their_properties_come_from_device_properties(name, capsys):
    """``deviceProperties`` names the GPU and states its multiprocessors, memory and
    compute capability; the header names it even where no device row was recorded
    (the RTX 3060 trace: CUDA activity off)."""
    path = shared(FOREIGN / name)
    props = _doc(path)["deviceProperties"]
    assert main(["analyze", str(path), "--json"]) == 0
    source = json.loads(capsys.readouterr().out)["source"]
    assert source["devices"] == {str(d["id"]): d["name"] for d in props}
    assert source["device_properties"] == {
        str(d["id"]): {"name": d["name"], "multiprocessors": d["numSms"],
                       "memory_bytes": d["totalGlobalMem"],
                       "compute_capability": f"{d['computeMajor']}.{d['computeMinor']}"}
        for d in props}
    assert main(["analyze", str(path), "--width", "200"]) == 0
    header = next(line for line in capsys.readouterr().out.splitlines()
                  if line.startswith("devices"))
    assert all(f"GPU {d['id']}: {d['name']}" in header for d in props)
    assert "–" not in header
