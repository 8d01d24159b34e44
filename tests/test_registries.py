"""The two registries: what-if scenarios (``analyses/whatif/scenarios.py``, one
``ScenarioSpec`` row each) and advice rules (``analyses/advice/rules.py``, one ``RuleSpec``
row each). Every row is complete, what is derived from the rows is what the commands used
before the rows existed, and a scenario or a rule added as one row runs."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from tests.conftest import ROOT, SHARED_TRACES, shared
from tests.handmade import row, trace
from traceviz import load
from traceviz.analyses.advice import advising as advice_engine
from traceviz.analyses.advice.advising import Context, advise
from traceviz.analyses.advice.finding import Finding, RuleSpec
from traceviz.analyses.advice.rules import RULES, SHARED_SCENARIOS, THEMES
from traceviz.analyses.whatif.engine import whatif
from traceviz.analyses.whatif.scenarios import (
    DEFAULT_SCENARIOS,
    LAUNCH_SCENARIOS,
    SCENARIOS,
    ScenarioSpec,
    parse_scenario,
    parse_scenarios,
)
from traceviz.cli import main
from traceviz.errors import UsageError

DIFF_CONTROL = SHARED_TRACES / "kineto" / "a100_diff_control.json.gz"
CPU_TRACE = ROOT / "sample_traces" / "cpu" / "fine_torch"
GPU_TRACE = ROOT / "sample_traces" / "gpu" / "fine_torch" / "train"


# -- scenarios ---------------------------------------------------------------------------

def test_every_scenario_row_is_complete():
    for name, spec in SCENARIOS.items():
        assert spec.name == name
        assert callable(spec.transform)
        assert spec.nothing_to_change.strip(), name
        assert spec.cpu_reason is None or spec.cpu_reason.strip(), name
        assert spec.needs_steps is None or spec.needs_steps.strip(), name
        # a CPU trace has no launch calls: a scenario rewriting them says why it cannot
        assert not spec.rewrites_launches or spec.cpu_reason, name
    assert [n for n, s in SCENARIOS.items() if s.takes_factor] == ["gemm_speedup",
                                                                   "host_speedup"]


def test_derived_sets_are_the_ones_the_commands_used():
    assert LAUNCH_SCENARIOS == ("cuda_graphs", "fuse_pointwise", "merge_gemms",
                                "batch_input_gemms", "drop_stream_sync")
    assert [n for n, s in SCENARIOS.items() if s.needs_steps] == ["cuda_graphs"]
    assert DEFAULT_SCENARIOS == ("cuda_graphs", "fuse_pointwise", "no_casts",
                                 "gemm_speedup=2", "host_speedup=2")
    assert all(len(parse_scenarios(s)) == 1 for s in DEFAULT_SCENARIOS)


def test_parse_errors_name_the_known_scenarios():
    with pytest.raises(UsageError) as e:
        parse_scenario("warp")
    assert f"known: {', '.join(SCENARIOS)}" in str(e.value)
    with pytest.raises(UsageError, match="needs a factor"):
        parse_scenario("gemm_speedup")
    with pytest.raises(UsageError, match="takes no value"):
        parse_scenario("no_casts=2")
    with pytest.raises(UsageError, match="appears twice"):
        parse_scenarios("no_casts+no_casts")


def test_nothing_to_change_is_the_rows_text(monkeypatch):
    """A trace without casts: no_casts does not apply, in its row's words (and in whatever
    words the row holds)."""
    t = trace(row("step", "ProfilerStep#1", 0, 10_000, step=1),
              row("runtime", "cudaLaunchKernel", 0, 1_000, corr=1),
              row("kernel", "k", 1_500, 2_000, corr=1))
    s = whatif(t, ("no_casts",)).scenario("no_casts")
    assert not s.applies and s.reason == SCENARIOS["no_casts"].nothing_to_change
    monkeypatch.setitem(SCENARIOS, "no_casts",
                        replace(SCENARIOS["no_casts"], nothing_to_change="nothing cast here"))
    assert whatif(t, ("no_casts",)).scenario("no_casts").reason == "nothing cast here"


def _halve_device(g, _):
    """Every device row runs twice as fast: a real transform written as a user would."""
    if not len(g.d_dur):
        return g, []
    return g.with_changes(d_dur=g.d_dur // 2), ["every device row runs 2x faster"]


def test_a_scenario_added_as_one_row(monkeypatch, capsys):
    """One row, and whatif --scenario accepts it, replays it on a real trace, joins it
    with others by +, and refuses it on a CPU trace in the row's words."""
    monkeypatch.setitem(SCENARIOS, "halve_device", ScenarioSpec(
        "halve_device", _halve_device, "no device row in the trace"))
    assert main(["whatif", str(shared(DIFF_CONTROL)), "--json", "--scenario", "halve_device",
                 "--scenario", "gemm_speedup=2", "--scenario", "halve_device+no_casts"]) == 0
    out = {s["name"]: s for s in json.loads(capsys.readouterr().out)["scenarios"]}
    halve = out["halve_device"]
    assert halve["applies"] and halve["assumptions"][0] == "every device row runs 2x faster"
    # it halves every row gemm_speedup=2 halves, and more: it saves at least as much
    assert halve["saving_ns"] > 0 and halve["saving_ns"] >= out["gemm_speedup=2"]["saving_ns"]
    assert out["halve_device+no_casts"]["parts"] == ["halve_device", "no_casts"]

    cpu = load(CPU_TRACE)
    s = whatif(cpu, ("halve_device",)).scenario("halve_device")
    assert not s.applies and s.reason == "no device row in the trace"
    monkeypatch.setitem(SCENARIOS, "halve_device", replace(
        SCENARIOS["halve_device"], cpu_reason="a CPU trace has no device rows"))
    s = whatif(cpu, ("halve_device",)).scenario("halve_device")
    assert not s.applies and s.reason == "a CPU trace has no device rows"


# -- advice rules ------------------------------------------------------------------------

def test_the_shared_set_is_what_the_rules_declare():
    """The scenarios advise replays once for all rules: the rows' declarations, in the
    scenario registry's order, the same set as before the rows declared them."""
    declared = [s for r in RULES for s in r.scenarios]
    assert set(SHARED_SCENARIOS) == set(declared) and len(SHARED_SCENARIOS) == len(
        set(declared))
    # the input's scenario, and the launch remedies beside it (what they add once the
    # input is overlapped: advice/host.py)
    assert SHARED_SCENARIOS == ("cuda_graphs", "fuse_pointwise", "no_casts", "host_speedup=2",
                                "overlap_input", "overlap_input+cuda_graphs",
                                "overlap_input+host_speedup=2", "drop_host_stalls")
    order = list(SCENARIOS)
    names = [parse_scenarios(s)[0][0] for s in SHARED_SCENARIOS]
    assert names == sorted(names, key=order.index)


def test_every_rule_has_a_theme_and_known_scenarios():
    assert [r.name for r in RULES] == [  # the order advise runs them in: it breaks ties
        "no_kernel_activity",
        "device_bound", "communication", "startup", "input_pipeline", "host_bound", "attention",
        "kernel_sequences", "casts", "autocast_precision", "syncs_in_steps",
        "pageable_memcpy", "serialized_copies", "long_gaps", "tensor_core_shapes", "tf32_off",
        "tf32_off_kernels", "memory_bound_gemms", "memory_headroom", "noisy",
        "profiled_unlike_timed", "streams_never_overlap"]
    for r in RULES:
        assert r.theme in THEMES, r.name
        # a rule lives in its theme's module
        assert r.rule.__module__ == f"traceviz.analyses.advice.{r.theme}", r.name
        for text in r.scenarios:
            assert parse_scenarios(text), (r.name, text)  # parses, every part known
        assert all(name in SCENARIOS for name in r.alone), r.name
    assert {r.theme for r in RULES} == set(THEMES)  # no theme without a rule
    for theme in THEMES:
        assert (ROOT / "analyses" / "advice" / f"{theme}.py").is_file()


def test_a_rule_prices_only_what_its_row_declares():
    """Findings name the scenarios of the rows; a scenario no row declares is refused."""
    found, _ = advise(load(GPU_TRACE))
    priced = {f.saving_scenario for f in found if f.saving_scenario}
    assert priced  # host_bound and kernel_sequences price theirs on this trace
    alone = {n for r in RULES for n in r.alone}
    assert all(s in SHARED_SCENARIOS or parse_scenarios(s)[0][0] in alone for s in priced)
    with pytest.raises(ValueError, match="in no rule's row"):
        Context(load(CPU_TRACE)).saving("gemm_speedup=2")


def test_a_rule_added_as_one_row(monkeypatch):
    """One function and one row, and advise runs it in its place and prices it from the
    shared replay."""
    def every_cast(ctx: Context) -> Finding | None:
        saving = ctx.saving("no_casts")
        return Finding("every_cast", "Casts", ["some"], "cast less", saving, "no_casts")

    monkeypatch.setattr(advice_engine, "RULES",
                        (*RULES, RuleSpec(every_cast, "precision", scenarios=("no_casts",))))
    t = load(ROOT / "sample_traces" / "gpu" / "cudnn_torch-bf16" / "train")
    found, _ = advise(t)
    f = next(f for f in found if f.rule == "every_cast")
    assert f.saving_ns == whatif(t, ("no_casts",)).scenario("no_casts").saving_ns > 0


def test_whatif_help_lists_every_scenario_of_the_registry(monkeypatch, capsys):
    """``whatif --help`` is drawn from the rows (a new row is in it), and building the
    parser, which every command does, imports no scenario (the help is computed when
    shown)."""
    import subprocess
    import sys

    from traceviz.analyses.whatif import scenarios
    from traceviz.analyses.whatif.transforms import gemm_speedup
    from traceviz.cli import main

    monkeypatch.setitem(scenarios.SCENARIOS, "halve_device", scenarios.ScenarioSpec(
        "halve_device", gemm_speedup, "nothing", takes_factor=True))
    with pytest.raises(SystemExit):
        main(["whatif", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for name, spec in scenarios.SCENARIOS.items():
        assert (f"{name}=X" if spec.takes_factor else name) in text
    assert "default: " + ", ".join(scenarios.DEFAULT_SCENARIOS) in text
    code = ("import sys\nfrom traceviz.cli import main\n"
            "try:\n    main(['analyze', '--help'])\nexcept SystemExit:\n    pass\n"
            "assert 'traceviz.analyses.whatif.scenarios' not in sys.modules\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
