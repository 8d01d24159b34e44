"""bench.json's utilization, energy and first-call figures, from their raw inputs: a
busy loop's CPU time, a RAPL tree written here (wrap-around included), warm-up times."""

from __future__ import annotations

import time

import pytest

from traceviz.runners import capture_protocol
from traceviz.runners.usage import counter_delta, rapl_domains, usage_probe


def _rapl_tree(root, packages: dict[str, tuple[int, int]]):
    """sysfs' powercap layout: intel-rapl:N/{energy_uj,max_energy_range_uj} and a
    sub-domain (intel-rapl:N:0, the cores: part of the package, never added again)."""
    for name, (energy, wrap) in packages.items():
        for d in (root / name, root / f"{name}:0"):
            d.mkdir(parents=True)
            (d / "energy_uj").write_text(f"{energy}\n")
            (d / "max_energy_range_uj").write_text(f"{wrap}\n")


def test_counter_delta_wraps_once():
    assert counter_delta(100, 250, 1000) == 150
    # 1000 -> wraps to 0 after 1000: 990..1000 is 10, 0..40 is 40, +1 for the wrap step
    assert counter_delta(990, 40, 1000) == 51


def test_rapl_domains_are_the_packages(tmp_path):
    _rapl_tree(tmp_path, {"intel-rapl:0": (5, 99), "intel-rapl:1": (7, 99)})
    assert [(d.name, w) for d, w in rapl_domains(tmp_path)] == [("intel-rapl:0", 99),
                                                                ("intel-rapl:1", 99)]
    assert rapl_domains(tmp_path / "absent") == []


def test_rapl_energy_over_the_phase_with_a_wrap(tmp_path):
    wrap = 262_143_328_850
    _rapl_tree(tmp_path, {"intel-rapl:0": (wrap - 1_000_000, wrap),
                          "intel-rapl:1": (3_000_000, wrap)})
    start, stop = usage_probe(rapl=tmp_path)
    start()
    # during the phase package 0 wraps (1 J to the top, then 2.5 J), package 1 adds 4 J
    (tmp_path / "intel-rapl:0" / "energy_uj").write_text("2500000\n")
    (tmp_path / "intel-rapl:1" / "energy_uj").write_text("7000000\n")
    u = stop()
    want = (1_000_000 + 1 + 2_500_000 + 4_000_000) / 1e6
    assert u["energy_source"] == "rapl" and u["energy_j"] == pytest.approx(want)
    assert any("whole CPU package" in n for n in u["notes"])


def test_cpu_percent_of_a_busy_loop_and_absent_energy(tmp_path):
    start, stop = usage_probe(rapl=tmp_path)  # no counters there
    start()
    t0, cpu0 = time.perf_counter(), time.process_time()
    while time.perf_counter() - t0 < 0.3:
        pass
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    u = stop()
    # the probe's whole-phase mean is this process's CPU time over the phase's wall time
    assert u["cpu_percent"] == pytest.approx(100 * cpu / wall, rel=0.15)
    assert u["cpu_samples"] >= 3 and u["cpu_percent_max"] >= u["cpu_percent"] * 0.8
    assert u["energy_j"] is None
    assert any(n.startswith("energy absent: no readable RAPL") for n in u["notes"])
    assert any("a CPU run" in n for n in u["notes"])


def test_a_gpu_probe_without_a_readable_gpu_says_why(tmp_path):
    start, stop = usage_probe(gpu=(None, 0), rapl=tmp_path)
    start()
    u = stop()
    if "gpu_util_percent" not in u:  # no GPU, driver or pynvml here: a note, no figure
        assert any(n.startswith("GPU utilization and power absent") for n in u["notes"])


def _phases(warm, times, usage=None):
    return capture_protocol.Phases(times, sum(times), [times[0]], warm, True, None, [], usage)


def test_first_call_is_the_warmup_above_the_median():
    warm, times = [2.0, 0.5, 0.12, 0.1], [0.1, 0.11, 0.09]
    bench = capture_protocol.bench_figures(_phases(warm, times), batch=4, losses=[3.0, 2.5, 2.0])
    assert bench["first_call_s"] == pytest.approx((2.0 - 0.1) + (0.5 - 0.1) + (0.12 - 0.1))
    assert bench["loss_per_batch"] == [3.0, 2.5, 2.0] and bench["loss_first_batch"] == 4


def test_energy_per_batch_and_sequence():
    usage = {"energy_j": 6.0, "energy_source": "rapl", "notes": []}
    bench = capture_protocol.bench_figures(_phases([0.1], [0.1, 0.1, 0.1], usage), batch=4)
    u = bench["utilization"]
    assert u["energy_per_batch_j"] == 2.0 and u["energy_per_sequence_j"] == 0.5
    assert "loss_per_batch" not in bench


class _FakeNvml:
    """pynvml's calls the probe makes, answering from fixed counters: utilization 40 then
    60 %, power 250 W, the energy counter at 1,000,000 mJ and 1,000,000 + 7,500 mJ."""

    class NVMLError(Exception):
        pass

    def __init__(self, energy_supported: bool = True):
        self.energy = [1_000_000, 1_007_500]
        self.util = [40, 60]
        self.supported = energy_supported
        self.bus_ids: list[str] = []

    def nvmlInit(self):
        pass

    def nvmlDeviceGetHandleByPciBusId(self, bus_id):
        self.bus_ids.append(bus_id)
        return "gpu0"

    def nvmlDeviceGetHandleByIndex(self, index):
        return f"gpu{index}"

    def nvmlDeviceGetUtilizationRates(self, handle):
        import types

        value = self.util.pop(0) if len(self.util) > 1 else self.util[0]  # 40, then 60
        return types.SimpleNamespace(gpu=value)

    def nvmlDeviceGetPowerUsage(self, handle):
        return 250_000  # mW

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):
        if not self.supported:
            raise self.NVMLError("Not Supported")
        return self.energy.pop(0)


def test_nvml_figures_over_the_phase(monkeypatch, tmp_path):
    import sys

    fake = _FakeNvml()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    start, stop = usage_probe(gpu=("00000000:3B:00.0", 0), rapl=tmp_path)
    start()
    time.sleep(0.3)  # several 50 ms samples
    u = stop()
    assert fake.bus_ids == ["00000000:3B:00.0"]
    assert u["energy_source"] == "nvml" and u["energy_j"] == pytest.approx(7.5)  # mJ -> J
    assert u["gpu_samples"] >= 3 and u["gpu_power_w"] == pytest.approx(250.0)
    # 40 once, then 60 for every later sample
    n = u["gpu_samples"]
    assert u["gpu_util_percent"] == pytest.approx((40 + 60 * (n - 1)) / n)
    bench = capture_protocol.bench_figures(_phases([0.1], [0.1] * 5, u), batch=8)
    assert bench["utilization"]["energy_per_batch_j"] == pytest.approx(1.5)
    assert bench["utilization"]["energy_per_sequence_j"] == pytest.approx(1.5 / 8)


def test_nvml_without_an_energy_counter(monkeypatch, tmp_path):
    import sys

    monkeypatch.setitem(sys.modules, "pynvml", _FakeNvml(energy_supported=False))
    start, stop = usage_probe(gpu=(None, 0), rapl=tmp_path)
    start()
    u = stop()
    assert u["energy_j"] is None and u["energy_source"] is None
    assert any("no NVML energy counter" in n for n in u["notes"])
