"""The variant registry (runners/__init__.py) is the one list: every runner's model map,
the CLI, the sample scripts and the variants table agree with it."""

from __future__ import annotations

import ast
import json
import re

import pytest

from tests.conftest import ROOT, needs
from traceviz.cli import main
from traceviz.runners import DEVICES, FRAMEWORKS, VARIANTS, variants


def _agree(model_map: set[str], registry: set[str]) -> None:
    assert model_map == registry, (f"only in the model map: {sorted(model_map - registry)}; "
                                   f"only in the registry: {sorted(registry - model_map)}")


def _models_literal(path) -> set[str]:
    """A runner's ``MODELS = (...)`` read without importing its framework."""
    tree = ast.parse(path.read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", "") for t in node.targets] \
                == ["MODELS"]:
            return set(ast.literal_eval(node.value))
    raise AssertionError(f"{path}: no MODELS tuple")


def test_registry_matches_the_torch_model_map():
    needs("torch")
    from traceviz.runners.torch.variants import MODELS

    _agree(set(MODELS), {v.name for v in variants("torch")})


def test_registry_matches_the_tensorflow_maps():
    from traceviz.runners.tensorflow import (
        keras_lstms as tf_models,  # numpy only; TF is imported inside
    )

    _agree(set(tf_models.VARIANTS), {v.name for v in variants("tensorflow")})
    assert set(tf_models.EXEC_CHOICE) == {v.name for v in VARIANTS.values() if v.exec_modes}


@pytest.mark.parametrize("framework,runner", [("jax", "jax.py"), ("mxnet", "mxnet_gluon.py")])
def test_registry_matches_single_variant_runners(framework, runner):
    _agree(_models_literal(ROOT / "runners" / runner), {v.name for v in variants(framework)})


def test_every_variant_has_a_known_framework_and_devices():
    assert {v.framework for v in VARIANTS.values()} == set(FRAMEWORKS)
    for v in VARIANTS.values():
        assert v.devices and set(v.devices) <= set(DEVICES), v
        assert v.gpu_only == (v.devices == ("cuda",))
    assert [v.name for v in variants(device="cpu")] == \
        [n for n, v in VARIANTS.items() if "cpu" in v.devices]


def test_models_names_lists_the_registry(capsys):
    assert main(["models", "--names"]) == 0
    assert capsys.readouterr().out.split() == list(VARIANTS)
    assert main(["models", "--names", "--framework", "torch", "--device", "cpu"]) == 0
    listed = capsys.readouterr().out.split()
    assert listed == [v.name for v in variants("torch", "cpu")] and "graph_torch" not in listed
    assert main(["models", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in rows] == list(VARIANTS)
    assert {r["name"]: tuple(r["devices"]) for r in rows} == \
        {n: v.devices for n, v in VARIANTS.items()}


def test_no_variant_list_outside_the_registry():
    """Scripts and benchmarks ask the registry; a hand-written list of variant names
    elsewhere would drift from it."""
    # six names in a row: a framework's whole list (a study's chosen few are fine)
    name = "(?:" + "|".join(VARIANTS) + ")"
    listing = re.compile(rf"\b{name}(?:[\s,\"'\\]+{name}\b){{5}}")
    places = [*(ROOT / "sample_traces").glob("*.sh"), *(ROOT / "benchmarks").glob("*.py"),
              *(ROOT / "traceviz").rglob("*.py")]
    offenders = [str(p.relative_to(ROOT)) for p in places if listing.search(p.read_text())]
    assert offenders == []


def test_models_says_how_to_install_a_missing_framework(capsys, tmp_path, monkeypatch):
    """A framework that is not here is named with the command that makes it available,
    as capture says: MXNet's interpreter, absent from a folder without ./.venv-mxnet."""
    import json

    from traceviz.cli import main
    from traceviz.runners import FRAMEWORKS, MXNET_PYTHON_VAR

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(MXNET_PYTHON_VAR, raising=False)
    assert main(["models", "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    mx = rows["gluon_mxnet"]
    assert not mx["available"] and mx["why_not"] == FRAMEWORKS["mxnet"].missing()
    assert "traceviz env mxnet" in mx["why_not"]
