"""Utilization and energy over a runner's timed phase: the process's CPU % (sampled), a
GPU's utilization and power from NVML, energy from NVML's counter (GPU) or RAPL (CPU).

Standard library only (``pynvml``, from ``nvidia-ml-py``, is imported where a GPU is
asked for). A figure that cannot be read is absent, with a note saying why.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

SAMPLE_S = 0.05  # the sampler's period: short timed phases still get a few samples
RAPL = Path("/sys/class/powercap")


def _cpu_seconds() -> float:
    # this process's user + system time, finer than os.times' clock ticks; its children
    # (a DataLoader's workers) apart
    return time.process_time()


def rapl_domains(root: Path = RAPL) -> list[tuple[Path, int]]:
    """The readable RAPL package counters (``intel-rapl:N``, not their sub-domains) and
    each one's wrap-around range in µJ."""
    found = []
    for d in sorted(root.glob("intel-rapl:*")):
        if d.name.count(":") != 1:
            continue
        try:
            (d / "energy_uj").read_text()
            found.append((d, int((d / "max_energy_range_uj").read_text())))
        except (OSError, ValueError):
            continue
    return found


def rapl_read(domains: list[tuple[Path, int]]) -> list[int]:
    return [int((d / "energy_uj").read_text()) for d, _ in domains]


def counter_delta(start: int, end: int, wrap: int) -> int:
    """end - start of a counter that wraps to 0 after ``wrap`` (one wrap at most)."""
    return end - start if end >= start else end + wrap + 1 - start


class _Nvml:
    """One GPU through NVML; ``error`` says why not where it cannot be read."""

    def __init__(self, bus_id: str | None, index: int):
        self.error = ""
        self.handle: Any = None
        try:
            import pynvml  # nvidia-ml-py

            self.nv = pynvml
            pynvml.nvmlInit()
            try:
                self.handle = pynvml.nvmlDeviceGetHandleByPciBusId(bus_id) if bus_id \
                    else None
            except pynvml.NVMLError:
                self.handle = None
            if self.handle is None:  # NVML's index: right where no devices are hidden
                self.handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        except ImportError:
            self.error = "pynvml is not installed (pip install nvidia-ml-py)"
        except Exception as e:  # NVMLError: no driver, no such device, no permission
            self.error = f"NVML: {e}"

    def sample(self) -> tuple[float, float] | None:
        """(utilization %, power W), or None where NVML does not give them."""
        try:
            util = self.nv.nvmlDeviceGetUtilizationRates(self.handle).gpu
            return float(util), self.nv.nvmlDeviceGetPowerUsage(self.handle) / 1e3
        except Exception:
            return None

    def energy_mj(self) -> int | None:
        try:  # Volta and later; older GPUs raise NVMLError_NotSupported
            return int(self.nv.nvmlDeviceGetTotalEnergyConsumption(self.handle))
        except Exception:
            return None


def usage_probe(gpu: tuple[str | None, int] | None = None, rapl: Path = RAPL
                ) -> tuple[Callable[[], None], Callable[[], dict]]:
    """(start, stop) around the timed phase: ``stop()`` returns its utilization figures.
    ``gpu``: (PCI bus id, index) of the GPU the run uses; None on a CPU run. ``rapl``:
    where the RAPL counters are (sysfs' powercap)."""
    state: dict[str, Any] = {}
    notes: list[str] = []
    nvml = _Nvml(*gpu) if gpu is not None else None
    if gpu is None:
        notes.append("GPU utilization and power absent: a CPU run")
    elif nvml is not None and nvml.error:
        notes.append(f"GPU utilization and power absent: {nvml.error}")
        nvml = None
    domains = rapl_domains(rapl) if nvml is None else []
    cpu_samples: list[float] = []
    gpu_samples: list[tuple[float, float]] = []
    stop_flag = threading.Event()

    def sampler() -> None:
        last_wall, last_cpu = time.perf_counter(), _cpu_seconds()
        while not stop_flag.wait(SAMPLE_S):
            wall, cpu = time.perf_counter(), _cpu_seconds()
            if wall > last_wall:
                cpu_samples.append(100 * (cpu - last_cpu) / (wall - last_wall))
            last_wall, last_cpu = wall, cpu
            if nvml is not None and (s := nvml.sample()) is not None:
                gpu_samples.append(s)

    def start() -> None:
        stop_flag.clear()
        state["thread"] = threading.Thread(target=sampler, daemon=True)
        state["thread"].start()  # first: starting it is no part of the phase
        state.update(rapl=rapl_read(domains) if domains else None,
                     nvml_mj=nvml.energy_mj() if nvml else None,
                     wall=time.perf_counter(), cpu=_cpu_seconds())

    def stop() -> dict:
        wall, cpu = time.perf_counter() - state["wall"], _cpu_seconds() - state["cpu"]
        stop_flag.set()
        state["thread"].join()
        out: dict[str, Any] = {
            "wall_s": wall,
            # the whole phase's mean (exact), and the highest of the sampled periods
            "cpu_percent": 100 * cpu / wall if wall > 0 else None,
            "cpu_percent_max": max(cpu_samples) if cpu_samples else None,
            "cpu_samples": len(cpu_samples),
            "cpu_count": os.cpu_count(),
        }
        energy, source = None, None
        if nvml is not None:
            if gpu_samples:
                out["gpu_util_percent"] = sum(u for u, _ in gpu_samples) / len(gpu_samples)
                out["gpu_power_w"] = sum(p for _, p in gpu_samples) / len(gpu_samples)
                out["gpu_samples"] = len(gpu_samples)
            else:
                notes.append("GPU utilization and power absent: NVML gave no sample "
                             f"(the phase lasted {wall:.3f} s; one every {SAMPLE_S} s)")
            end = nvml.energy_mj()
            if end is not None and state["nvml_mj"] is not None:
                energy, source = (end - state["nvml_mj"]) / 1e3, "nvml"
            else:
                notes.append("energy absent: this GPU has no NVML energy counter")
        elif domains and state["rapl"] is not None:
            end_uj = rapl_read(domains)
            energy = sum(counter_delta(a, b, wrap) for a, b, (_, wrap)
                         in zip(state["rapl"], end_uj, domains, strict=True)) / 1e6
            source = "rapl"
            notes.append("RAPL counts the whole CPU package: every process on it, not this "
                         "one alone")
        elif nvml is None:
            notes.append(f"energy absent: no readable RAPL counter under {rapl} (none on "
                         "this machine, or not readable without privileges)")
        out["energy_j"] = energy
        out["energy_source"] = source
        out["notes"] = notes
        return out

    return start, stop
