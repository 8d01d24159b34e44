"""The what-if tables of docs/whatif.md: identity-replay error and each scenario's predicted saving
on every GPU trace in ../shared/traces/, and predicted against measured on the committed
H100 captures (sample_traces/gpu).

    python benchmarks/whatif_table.py [--shared ../shared/traces]

Times are the analysis windows (per step where the trace has steps) of profiled runs.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from traceviz import load
from traceviz.analyses.replay.measure import window_time
from traceviz.analyses.whatif.engine import whatif
from traceviz.analyses.whatif.scenarios import DEFAULT_SCENARIOS
from traceviz.render.report import md_table
from traceviz.units import fmt_ns, fmt_pct

ROOT = Path(__file__).resolve().parents[1]
H100 = ROOT / "sample_traces" / "gpu"
SKIP = {"cpu_only.json.gz", "a100_cupti_counters.json.gz"}  # no device rows


def shared_traces(shared: Path) -> list[Path]:
    return sorted([p for p in (shared / "kineto").glob("*.json.gz") if p.name not in SKIP]
                  + list((shared / "nsys").glob("*.sqlite"))
                  + list((shared / "xplane").glob("*.xplane.pb.gz")))


def replay_table(paths: list[Path]) -> str:
    rows = []
    for p in paths:
        w = whatif(load(p))
        per = w.steps or 1
        name = p.name if p.name != "trace.parquet" else f"{p.parent.parent.name} {p.parent.name}"
        row = [name, fmt_ns(w.measured_ns / per), fmt_pct(w.replay_error),
               fmt_pct(w.step_error_max) if w.step_error_max is not None else "-"]
        for s in w.scenarios:
            row.append(fmt_pct(s.saving_fraction) if s.applies else "n/a")
        rows.append(row)
    head = ["trace", "measured (per step)", "identity error", "worst step",
            *[f"{s} saves" for s in DEFAULT_SCENARIOS]]
    return md_table(pd.DataFrame(rows, columns=head))


def _per_step(path: Path) -> float:
    w = window_time(load(path))
    return w.span_ns / max(len(w.per_step), 1)


def _matrix_per_step(path: Path) -> float:
    t = load(path)
    k = t.kernels()
    k = k[k["step"] >= 0]
    return float(k.loc[k["category"].isin(["gemm", "rnn", "attention"]), "dur_ns"].sum()
                 / max(k["step"].nunique(), 1))


def pairs_table() -> str:
    rows = []
    for mode in ("forward", "train"):
        for before, after, scenario in (("fused_torch", "graph_torch", "cuda_graphs"),
                                        ("cell_torch", "graph_torch", "cuda_graphs"),
                                        ("naive8_torch", "fused_torch", "fuse_pointwise"),
                                        ("fine_torch", "fused_torch", "fuse_pointwise")):
            a = H100 / before / mode / "trace.parquet"
            b = H100 / after / mode / "trace.parquet"
            rows.append(_pair(a, b, before, after, mode, scenario))
    for model in ("cudnn_torch", "fused_torch", "naive8_torch", "jit_torch"):
        a = H100 / model / "train" / "trace.parquet"
        b = H100 / f"{model}-bf16" / "train" / "trace.parquet"
        x = _matrix_per_step(a) / _matrix_per_step(b)
        rows.append(_pair(a, b, model, f"{model} bf16", "train", f"gemm_speedup={x:.2f}"))
    return md_table(pd.DataFrame(rows, columns=["from", "to", "mode", "scenario",
                                             "from measured", "predicted",
                                             "to measured", "prediction error"]))


def _pair(a: Path, b: Path, before: str, after: str, mode: str, scenario: str) -> list[str]:
    w = whatif(load(a), (scenario,))
    predicted = w.scenarios[0].predicted_ns / max(w.steps, 1)
    measured = _per_step(b)
    return [before, after, mode, scenario, fmt_ns(w.measured_ns / max(w.steps, 1)),
            fmt_ns(predicted), fmt_ns(measured), fmt_pct(predicted / measured - 1)]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shared", type=Path, default=ROOT.parent / "shared" / "traces")
    args = p.parse_args()
    print("### Identity replay and scenario savings (../shared/traces)\n")
    print(replay_table(shared_traces(args.shared)))
    print("\n### Identity replay, H100 captures (sample_traces/gpu)\n")
    print(replay_table(sorted(H100.glob("*/*/trace.parquet"))))
    print("\n### Predicted against measured, H100 captures\n")
    print(pairs_table())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
