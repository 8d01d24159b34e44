"""The peak throughput of a device, per precision and unit, and its memory bandwidth.

Each row is the vendor's published figure for one device as the trace names it (dense
math, no structured sparsity; boost clock where the vendor gives one), with its source.
``find(name)`` matches a trace's device name (Kineto ``deviceProperties``, nsys
``TARGET_INFO_GPU``, XSpace device planes); ``parse_peak`` reads a user's override
(``--peak``). Peaks in TFLOP/s, bandwidth in GB/s (10^9 bytes).

Keys: ``fp64``, ``fp32`` (vector/CUDA cores), ``tf32``, ``fp16``, ``bf16``, ``fp8``
(tensor/matrix cores, dense), ``fp64_matrix``, ``fp32_matrix`` (AMD matrix cores),
``bw`` (GB/s). A key a device lacks (no tensor cores, no FP8) is absent: work of that
precision is held against the vector peak (``applicable``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from traceviz.errors import UsageError


@dataclass(frozen=True)
class Peak:
    device: str                     # the name this row stands for
    figures: dict[str, float]       # key -> TFLOP/s (bw: GB/s)
    source: str
    note: str = ""
    pattern: str = field(default="", compare=False)
    # the figures hold only what is known (a peak derived from a device's properties: FP32
    # on its CUDA cores, no tensor cores): a precision or unit without its own key has no
    # peak, rather than the vector one a table row falls back to
    partial: bool = False

    @property
    def bandwidth(self) -> float | None:
        return self.figures.get("bw")

    def applicable(self, precision: str | None, unit: str, tf32: bool = False
                   ) -> tuple[str, float] | None:
        """(key, TFLOP/s) of the peak that work of ``precision`` on ``unit`` ("matrix"
        or "vector") is held against: an FP32 matrix op that ran TF32 tensor-core
        kernels against TF32; FP16/BF16/FP8 matrix ops against the tensor-core peak; a
        precision the device has no tensor path for against its vector peak."""
        if not isinstance(precision, str):  # None, or NaN from a table
            return None
        f = self.figures
        if self.partial:
            key = "fp64" if precision == "fp64" else "fp32"
            # FP32 on the FMA units is the one figure such a peak holds: half or TF32
            # tensor-core work, and FP32 matrix kernels that ran TF32, are not held to it
            plain = precision == key and not (unit == "matrix" and tf32)
            return (key, f[key]) if plain and key in f else None
        if unit == "matrix":
            if precision == "fp32":
                key = "tf32" if tf32 and "tf32" in f else \
                    "fp32_matrix" if "fp32_matrix" in f else "fp32"
            elif precision == "fp64":
                key = "fp64_matrix" if "fp64_matrix" in f else "fp64"
            else:
                key = precision if precision in f else "fp16" if "fp16" in f else "fp32"
        else:
            key = "fp64" if precision == "fp64" else "fp32"
        return (key, f[key]) if key in f else None


# Hopper's compute figures (dense) are the same across the SXM parts (H100, H200, GH200)
# and across the NVL parts: they differ in memory bandwidth
_HOPPER_SXM = {"fp64": 33.5, "fp64_matrix": 66.9, "fp32": 66.9, "tf32": 494.7,
               "fp16": 989.4, "bf16": 989.4, "fp8": 1978.9}
_HOPPER_NVL = {"fp64": 30.0, "fp64_matrix": 60.0, "fp32": 60.0, "tf32": 417.5,
               "fp16": 835.5, "bf16": 835.5, "fp8": 1670.5}
# (pattern on the lower-cased device name, device, figures, source, note); first match
# wins, so the more specific name comes first
_TABLE: list[tuple[str, str, dict[str, float], str, str]] = [
    (r"gtx 1080(?! ti)", "GeForce GTX 1080",
     {"fp64": 0.277, "fp32": 8.873, "bw": 320.0},
     "NVIDIA GeForce GTX 1080 whitepaper (2016), 1733 MHz boost", "no tensor cores"),
    (r"titan v\b", "NVIDIA TITAN V",
     {"fp64": 7.45, "fp32": 14.9, "fp16": 110.0, "bw": 652.8},
     "NVIDIA TITAN V specifications (2017)", ""),
    (r"\bm40\b", "Tesla M40",
     {"fp64": 0.213, "fp32": 6.84, "bw": 288.0},
     "NVIDIA Tesla M40 datasheet (2015), 1114 MHz boost", "no tensor cores"),
    (r"2080 ti", "GeForce RTX 2080 Ti",
     {"fp64": 0.42, "fp32": 13.45, "fp16": 53.8, "bw": 616.0},
     "NVIDIA Turing architecture whitepaper (2018), reference 1545 MHz boost",
     "fp16: tensor cores with FP32 accumulate (GeForce runs it at half the FP16-accumulate "
     "rate of 107.6)"),
    (r"\bt4\b", "Tesla T4", {"fp64": 0.25, "fp32": 8.1, "fp16": 65.0, "bw": 320.0},
     "NVIDIA T4 datasheet (2019)", ""),
    (r"\bl4\b", "NVIDIA L4",
     {"fp32": 30.3, "tf32": 60.0, "fp16": 121.0, "bf16": 121.0, "fp8": 242.5, "bw": 300.0},
     "NVIDIA L4 datasheet (2023); tensor figures halved from the sparse ones", ""),
    (r"\ba10g?\b", "NVIDIA A10",
     {"fp32": 31.2, "tf32": 62.5, "fp16": 125.0, "bf16": 125.0, "bw": 600.0},
     "NVIDIA A10 datasheet (2021); tensor figures halved from the sparse ones",
     "A10G (AWS) is matched to the A10's figures"),
    (r"\bl40s\b", "NVIDIA L40S",
     {"fp32": 91.6, "tf32": 183.0, "fp16": 362.05, "bf16": 362.05, "fp8": 733.0,
      "bw": 864.0},
     "NVIDIA L40S datasheet (2023); tensor figures halved from the sparse ones", ""),
    (r"\bv100s", "Tesla V100S PCIe",
     {"fp64": 8.2, "fp32": 16.4, "fp16": 130.0, "bw": 1134.0},
     "NVIDIA V100S datasheet (2019)", ""),
    (r"\bv100.*pcie", "Tesla V100 PCIe",
     {"fp64": 7.0, "fp32": 14.0, "fp16": 112.0, "bw": 900.0},
     "NVIDIA V100 datasheet (2020), PCIe", ""),
    (r"\bv100", "Tesla V100 SXM2",
     {"fp64": 7.8, "fp32": 15.7, "fp16": 125.0, "bw": 900.0},
     "NVIDIA V100 datasheet (2020), SXM2", ""),
    (r"a100.*(80gb|80 gb).*pcie|a100.*pcie.*80", "A100 80GB PCIe",
     {"fp64": 9.7, "fp64_matrix": 19.5, "fp32": 19.5, "tf32": 156.0, "fp16": 312.0,
      "bf16": 312.0, "bw": 1935.0}, "NVIDIA A100 datasheet (2021), 80GB PCIe", ""),
    (r"a100.*(80gb|80 gb)", "A100 80GB SXM",
     {"fp64": 9.7, "fp64_matrix": 19.5, "fp32": 19.5, "tf32": 156.0, "fp16": 312.0,
      "bf16": 312.0, "bw": 2039.0}, "NVIDIA A100 datasheet (2021), 80GB SXM", ""),
    (r"a100", "A100 40GB",
     {"fp64": 9.7, "fp64_matrix": 19.5, "fp32": 19.5, "tf32": 156.0, "fp16": 312.0,
      "bf16": 312.0, "bw": 1555.0}, "NVIDIA A100 datasheet (2021), 40GB", ""),
    (r"h100.*pcie", "H100 PCIe",
     {"fp64": 25.6, "fp64_matrix": 51.2, "fp32": 51.2, "tf32": 378.0, "fp16": 756.0,
      "bf16": 756.0, "fp8": 1513.0, "bw": 2000.0},
     "NVIDIA H100 datasheet (2023), PCIe; tensor figures halved from the sparse ones", ""),
    (r"h100 nvl", "H100 NVL",
     {**_HOPPER_NVL, "bw": 3900.0},
     "NVIDIA H100 datasheet (2023), NVL; tensor figures halved from the sparse ones", ""),
    (r"h100", "H100 SXM",
     {**_HOPPER_SXM, "bw": 3350.0},
     "NVIDIA H100 datasheet (2023), SXM5; tensor figures halved from the sparse ones", ""),
    (r"gh200.*(141|144)\s?gb", "GH200 (HBM3e)",
     {**_HOPPER_SXM, "bw": 4900.0},
     "NVIDIA GH200 Grace Hopper datasheet (2024), 144GB HBM3e; tensor figures halved from "
     "the sparse ones", ""),
    (r"gh200", "GH200 (HBM3)",
     {**_HOPPER_SXM, "bw": 4000.0},
     "NVIDIA GH200 Grace Hopper datasheet (2024), 96GB HBM3; tensor figures halved from the "
     "sparse ones", ""),
    (r"h200 nvl", "H200 NVL",
     {**_HOPPER_NVL, "bw": 4800.0},
     "NVIDIA H200 datasheet (2024), NVL; tensor figures halved from the sparse ones", ""),
    (r"h200", "H200 SXM",
     {**_HOPPER_SXM, "bw": 4800.0},
     "NVIDIA H200 datasheet (2024), SXM; tensor figures halved from the sparse ones", ""),
    (r"\bb200\b", "B200",
     {"fp64": 37.0, "fp64_matrix": 37.0, "fp32": 75.0, "tf32": 1100.0, "fp16": 2250.0,
      "bf16": 2250.0, "fp8": 4500.0, "bw": 7700.0},
     "NVIDIA HGX B200 datasheet (2025), per GPU; tensor figures halved from the sparse "
     "ones", ""),
    (r"mi250x(?!\s*/)", "AMD Instinct MI250X (one GCD)",
     {"fp64": 23.95, "fp64_matrix": 47.85, "fp32": 23.95, "fp32_matrix": 47.85,
      "fp16": 191.5, "bf16": 191.5, "bw": 1638.4},
     "AMD Instinct MI250X data sheet (2021), halved: a trace's device is one of its two "
     "GCDs", ""),
    (r"mi250", "AMD Instinct MI250 (one GCD)",
     {"fp64": 22.65, "fp64_matrix": 45.25, "fp32": 22.65, "fp32_matrix": 45.25,
      "fp16": 181.0, "bf16": 181.0, "bw": 1638.4},
     "AMD Instinct MI250 data sheet (2021), halved: a trace's device is one of its two "
     "GCDs", "ROCm names both cards 'AMD Instinct MI250X / MI250': the lower (MI250) "
     "figures are used; give the MI250X's with --peak"),
    (r"mi300x", "AMD Instinct MI300X",
     {"fp64": 81.7, "fp64_matrix": 163.4, "fp32": 163.4, "fp32_matrix": 163.4,
      "tf32": 653.7, "fp16": 1307.4, "bf16": 1307.4, "fp8": 2614.9, "bw": 5300.0},
     "AMD Instinct MI300X data sheet (2023), dense", ""),
]
PEAKS = [Peak(dev, fig, src, note, pat) for pat, dev, fig, src, note in _TABLE]

# What TF32 is taken to buy an FP32 GEMM whose shapes are unknown (compiled code, XLA and
# nsys traces record none): what ``tf32_speedup`` gives the small GEMMs such code runs
# (an LSTM's 64-row GEMM [64, 512] x [512, 2048] on an H100/H200: 1.98), far below the
# peak ratio
TF32_SPEEDUP_UNKNOWN_SHAPE = 2.0


def tf32_speedup(flops: np.ndarray, nbytes: np.ndarray, peak: Peak) -> np.ndarray:
    """The one FP32 -> TF32 GEMM model: each GEMM's time at FP32 over its time at TF32
    on the roofline, max(F / fp32 peak, B / bandwidth) over max(F / tf32 peak, B /
    bandwidth), between 1 and the peaks' ratio. A large GEMM, compute-bound, gains the
    peak ratio; a small one turns memory-bound at the TF32 peak and gains less (its
    bytes take as long as before). Where the bytes or FLOPs are unknown (NaN or <= 0),
    ``TF32_SPEEDUP_UNKNOWN_SHAPE`` (at most the peaks' ratio). ``peak`` must hold
    ``fp32`` and ``tf32``."""
    f = np.asarray(flops, dtype=float)
    b = np.asarray(nbytes, dtype=float)
    fp32, tf32 = peak.figures["fp32"] * 1e12, peak.figures["tf32"] * 1e12
    bw = (peak.bandwidth or np.inf) * 1e9
    known = np.isfinite(f) & np.isfinite(b) & (f > 0) & (b > 0)
    f, b = np.where(known, f, 1.0), np.where(known, b, 1.0)
    ratio = np.maximum(f / fp32, b / bw) / np.maximum(f / tf32, b / bw)
    return np.where(known, np.clip(ratio, 1.0, tf32 / fp32),
                    max(1.0, min(TF32_SPEEDUP_UNKNOWN_SHAPE, tf32 / fp32)))
KEYS = ("fp64", "fp64_matrix", "fp32", "fp32_matrix", "tf32", "fp16", "bf16", "fp8", "bw")

# FP32 results per clock per multiprocessor of an NVIDIA GPU, by compute capability (one
# fused multiply-add: 2 FLOPs): CUDA C++ Programming Guide, "Arithmetic Instructions",
# the throughput of 32-bit floating-point add, multiply, multiply-add
FP32_LANES = {"3.0": 192, "3.2": 192, "3.5": 192, "3.7": 192, "5.0": 128, "5.2": 128,
              "5.3": 128, "6.0": 64, "6.1": 128, "6.2": 128, "7.0": 64, "7.2": 64,
              "7.5": 64, "8.0": 64, "8.6": 128, "8.7": 128, "8.9": 128, "9.0": 128,
              "10.0": 128, "10.3": 128, "11.0": 128, "12.0": 128, "12.1": 128}
DERIVED_SOURCE = ("derived from the profile's device properties (FP32 lanes per "
                  "multiprocessor: CUDA C++ Programming Guide, Arithmetic Instructions)")


def derived(device: str, props: dict) -> Peak | None:
    """An NVIDIA device's peak from what its profile states about it (``props``, as
    ``meta["device_properties"]`` holds them: ``multiprocessors``, ``clock_mhz``,
    ``compute_capability``, ``memory_bandwidth_gbps``): FP32 on its CUDA cores where the
    three are known, and the stated bandwidth; None where neither is. Tensor-core peaks
    cannot be derived so (``partial``). Only for NVIDIA devices: ROCm profiles state AMD's
    gfx version in the same fields."""
    figures: dict[str, float] = {}
    how = []
    sms, mhz = _positive(props.get("multiprocessors")), _positive(props.get("clock_mhz"))
    cc = str(props.get("compute_capability") or "")
    lanes = FP32_LANES.get(cc)
    if lanes and sms is not None and mhz is not None:
        figures["fp32"] = round(sms * mhz * 1e6 * lanes * 2 / 1e12, 3)
        how.append(f"FP32 {figures['fp32']:g} TFLOP/s = {sms:g} multiprocessors x "
                   f"{mhz:g} MHz x {lanes} FP32 lanes (compute capability {cc}) x 2")
    if (bw := _positive(props.get("memory_bandwidth_gbps"))) is not None:
        figures["bw"] = bw
        how.append(f"memory bandwidth {bw:g} GB/s as stated")
    if not figures:
        return None
    source = DERIVED_SOURCE if "fp32" in figures else \
        "the profile's own device properties (memory bandwidth only)"
    return Peak(device, figures, source, "; ".join(how), partial=True)


def _positive(x: object) -> float | None:
    """A stated figure as a float, None where it is no positive number."""
    ok = isinstance(x, (int, float)) and not isinstance(x, bool) and 0 < x < 1e9
    return float(x) if ok and isinstance(x, (int, float)) else None


# the characters of a device name matched against the table: real ones hold a few dozen,
# and patterns such as "a100.*(80gb|80 gb).*pcie" cost cubic time over a long hostile one
DEVICE_NAME_READ = 256


def find(device_name: str | None) -> Peak | None:
    """The table's row for a device name as a trace spells it, or None."""
    if not device_name:
        return None
    text = device_name[:DEVICE_NAME_READ].lower()
    for p in PEAKS:
        if re.search(p.pattern, text):
            return p
    return None


def parse_peak(spec: str) -> Peak:
    """``--peak``: ``KEY=VALUE,...`` (TFLOP/s; bw in GB/s), a JSON file of the same keys
    (optionally with "device"), or the name of a device in the table (``h100 pcie``)."""
    path = Path(spec)
    if path.suffix == ".json" or path.is_file():
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError, RecursionError) as e:
            why = "nested too deeply" if isinstance(e, RecursionError) else e
            raise UsageError(f"{spec}: not a readable JSON peak file ({why})",
                             option="peak") from None
        if not isinstance(data, dict):
            raise UsageError(f"{spec}: a peak file holds one JSON object", option="peak")
        device = str(data.pop("device", path.stem))
        return Peak(device, _figures(data, spec), f"user file {path.name}")
    if "=" not in spec:
        found = find(spec)
        if found is None:
            raise UsageError(f"{spec!r} is no device of the peak table ("
                             + ", ".join(p.device for p in PEAKS) + ") and no KEY=VALUE list",
                             option="peak")
        return found
    parts = [p.strip() for p in spec.split(",")]
    keys = [p.split("=", 1)[0] for p in parts]
    if any("=" not in p for p in parts) or len(set(keys)) != len(keys):
        raise UsageError(f"{spec}: expected KEY=VALUE pairs, each key once", option="peak")
    return Peak("user", _figures(dict(p.split("=", 1) for p in parts), spec), "--peak")


def _figures(data: dict, spec: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for key, value in data.items():
        if key not in KEYS:
            raise UsageError(f"{spec}: unknown key {key!r} (keys: {', '.join(KEYS)})",
                             option="peak")
        try:
            v = float(value)
        except (TypeError, ValueError):
            raise UsageError(f"{spec}: {key} is not a number", option="peak") from None
        if not 0 < v < 1e9:
            raise UsageError(f"{spec}: {key} must be a positive figure below 10^9",
                             option="peak")
        out[key] = v
    if not out:
        raise UsageError(f"{spec}: no figures", option="peak")
    return out


# NVLink bandwidth of one GPU, one direction (GB/s): what nccl-tests' bus bandwidth of a
# collective inside one node is held against. Pattern on the lower-cased device name,
# first match wins; PCIe cards and parts not listed: unknown.
_LINKS: list[tuple[str, float, str]] = [
    (r"v100-sxm", 150.0, "NVLink 2, 6 links x 25 GB/s (Tesla V100 SXM2 datasheet)"),
    (r"a100-sxm|a100-pg509", 300.0, "NVLink 3, 12 links x 25 GB/s (A100 datasheet)"),
    (r"h800", 200.0, "NVLink 4, 400 GB/s both directions (H800 SXM datasheet)"),
    (r"h100 80gb hbm3|h100-sxm|h200|gh200", 450.0,
     "NVLink 4, 18 links x 25 GB/s (H100/H200 SXM datasheets)"),
    (r"b200|gb200", 900.0, "NVLink 5, 18 links x 50 GB/s (B200 datasheet)"),
]


def link_peak(device_name: str | None) -> tuple[float, str] | None:
    """(GB/s one direction, source) of the device's NVLink, or None where unknown."""
    text = (device_name or "")[:DEVICE_NAME_READ].lower()
    for pattern, gbs, source in _LINKS:
        if re.search(pattern, text):
            return gbs, source
    return None
