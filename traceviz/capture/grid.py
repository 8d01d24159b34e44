"""``traceviz sweep``: every point of a grid captured in its own runner subprocess.

Writes ``sweep.parquet`` (one row per point) after every point, atomically, so a sweep
that is interrupted can go on with ``--resume``; a failing point is recorded with its
error and the sweep moves on.
"""

from __future__ import annotations

import io
import itertools
import shutil
import tarfile
import tempfile
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from traceviz.errors import TraceVizError
from traceviz.files.fileio import atomic_output
from traceviz.runners.benchdefs import NOISY_MAX_OVER_MIN

SWEEP_FILE = "sweep.parquet"


@dataclass
class SweepSpec:
    models: list[str]
    batches: list[int | None]
    hiddens: list[int | None]
    seqs: list[int | None]
    amps: list[str | None]
    preset: str = "deepbench"
    mode: str | None = None
    device: str = "cpu"
    layers: int | None = None
    warmup: int = 2
    max_warmup: int = 15
    steps: int = 5
    profile_steps: int = 2

    def points(self) -> list[dict]:
        return [
            {"model": m, "batch": b, "hidden": h, "seq": s, "amp": a}
            for m, b, h, s, a in itertools.product(self.models, self.batches, self.hiddens,
                                                   self.seqs, self.amps)
        ]


def point_id(p: dict) -> str:
    parts = [p["model"]]
    for key, tag in (("batch", "b"), ("hidden", "h"), ("seq", "s")):
        if p[key] is not None:
            parts.append(f"{tag}{p[key]}")
    parts.append(p["amp"] or "fp32")
    return "-".join(parts)


# what sweep-plot and report read from a sweep table
SWEEP_COLUMNS = ("point", "model", "batch", "hidden", "seq", "amp", "status")


def load_sweep(path: Path) -> pd.DataFrame:
    try:
        df = pd.read_parquet(path)
    except (OSError, ValueError, ImportError) as e:
        raise TraceVizError(f"{path}: not a readable sweep table ({e})") from None
    missing = [c for c in SWEEP_COLUMNS if c not in df]
    if "status" in df and (df["status"] == "ok").any() and "time_per_batch_s" not in df:
        missing.append("time_per_batch_s")
    if missing:
        raise TraceVizError(f"{path}: not a traceviz sweep table (no column "
                            f"{', '.join(missing)})")
    return with_model_tflops(df)


def with_model_tflops(df: pd.DataFrame) -> pd.DataFrame:
    """The table with ``workload_flops`` and ``model_tflops`` on every captured point: a
    sweep written before the runners recorded them gets them from its preset and sizes
    (the workload the point ran, ``make_workload``) and its median time per batch."""
    from traceviz.runners.benchdefs import workload_flops
    from traceviz.runners.presets import make_workload

    df = df.copy()
    for col in ("workload_flops", "model_tflops"):
        if col not in df:
            df[col] = np.nan
    need = (df["status"] == "ok") & df["workload_flops"].isna() if "status" in df else \
        df["workload_flops"].isna()
    for i in np.flatnonzero(need.to_numpy()):
        r = df.iloc[i]
        try:
            w, _ = make_workload(str(r["preset"]), str(r.get("mode") or "") or None,
                                 str(r.get("device") or "cpu"), batch=int(r["batch"]),
                                 seq=int(r["seq"]), hidden=int(r["hidden"]),
                                 layers=int(r["layers"]) if "layers" in r and
                                 r["layers"] == r["layers"] else None)
        except (TraceVizError, KeyError, TypeError, ValueError):
            continue
        df.iat[i, df.columns.get_loc("workload_flops")] = workload_flops(w.to_dict())["total"]
    t = df.get("time_per_batch_s", np.nan)
    df["model_tflops"] = df["model_tflops"].fillna(df["workload_flops"] / t / 1e12)
    # the NOISY verdict (bench.json's rule); a sweep written before has min and max only
    if "time_min_s" in df and "time_max_s" in df:
        spread = df["time_max_s"] / df["time_min_s"] > NOISY_MAX_OVER_MIN
        if "noisy" not in df:
            df["noisy"] = spread.where(df["time_min_s"].notna())
        else:
            df["noisy"] = df["noisy"].where(df["noisy"].notna(), spread)
    return df


def _row(point: dict, spec: SweepSpec, run_dir: Path, result=None, error: str = "") -> dict:
    row = {"point": point_id(point), **point, "amp": point["amp"] or "none",
           "preset": spec.preset, "device": spec.device, "run_dir": str(run_dir),
           "status": "ok" if result is not None else "failed", "error": error}
    if result is None:
        return row
    from traceviz.analyses.compare.runs import run_figures

    w = result.trace.meta["workload"]
    fig = run_figures(result.trace, point_id(point))
    bench = result.bench
    row.update({
        "batch": w["batch"], "hidden": w["hidden"], "seq": w["seq"], "layers": w["layers"],
        "mode": w["mode"],
        "time_per_batch_s": bench["time_per_batch_s"]["median"],
        "time_min_s": bench["time_per_batch_s"]["min"],
        "time_max_s": bench["time_per_batch_s"]["max"],
        "time_cv": bench["time_per_batch_s"].get("cv"),
        "noisy": bench["time_per_batch_s"].get("noisy"),
        "cpu_threads": (result.trace.meta.get("runner") or {}).get("cpu_threads"),
        "sequences_per_s": bench["sequences_per_s"],
        "elapsed_s": bench["elapsed_s"],
        "busy_ns": fig.busy_ns, "span_ns": fig.span_ns, "idle_fraction": fig.idle_fraction,
        "cpu_trace": fig.cpu_trace,
        "launch_bound_fraction": fig.launch_bound_fraction,
        "queued_idle_ns": fig.queued_idle_ns,
        "framework_overhead_fraction": fig.idle_fraction if fig.cpu_trace else None,
        "cast_share": fig.cast_ns / fig.busy_ns if fig.busy_ns else None,
        "kernel_count": fig.kernel_count,
        "top_kernel": fig.top_kernel, "top_kernel_share": fig.top_kernel_share,
        "workload_flops": bench.get("workload_flops"), "model_tflops": fig.model_tflops,
        "mfu": fig.mfu, "peak_memory_bytes": fig.peak_memory_bytes,
        "first_call_s": bench.get("first_call_s"),
        "framework_compile_s": bench.get("framework_compile_s"),
        "loss_per_batch": bench.get("loss_per_batch"),
        "loss_first_batch": bench.get("loss_first_batch"),
    })
    usage = bench.get("utilization") or {}
    row.update({k: usage.get(k) for k in USAGE_COLUMNS})
    return row


# bench.json's utilization figures a sweep row keeps
USAGE_COLUMNS = ("cpu_percent", "gpu_util_percent", "gpu_power_w", "energy_per_batch_j",
                 "energy_per_sequence_j")


MARKER = ".traceviz-sweep"  # its content tells a worker whether it sees the driver's folder


def capture_point(point: dict, spec: SweepSpec, out_dir: str, marker: str) -> dict:
    """Capture one point and return its sweep row; runs wherever it is scheduled (this
    process, or a Ray worker on another node). A worker that sees the sweep folder (the
    marker file holds ``marker``) writes the run folder there; one that does not writes it
    to a temporary folder and ships it back in the row (``_archive``: tar.gz bytes)."""
    from traceviz.capture.parent import CaptureRequest, run_capture
    from traceviz.files.runclaim import prepare_run_dir
    from traceviz.runners.presets import make_workload

    out = Path(out_dir)
    pid = point_id(point)
    final = out / "points" / pid
    try:
        shared = (out / MARKER).read_text() == marker
    except OSError:
        shared = False
    scratch = None if shared else Path(tempfile.mkdtemp(prefix="traceviz-point-"))
    run_dir = final if scratch is None else scratch / pid
    try:
        workload, _ = make_workload(spec.preset, spec.mode, spec.device, batch=point["batch"],
                                    hidden=point["hidden"], seq=point["seq"],
                                    layers=spec.layers)
        req = CaptureRequest(point["model"], workload, spec.device, amp=point["amp"],
                             warmup=spec.warmup, max_warmup=spec.max_warmup,
                             steps=spec.steps, profile_steps=spec.profile_steps)
        prepare_run_dir(run_dir, force=True)
        row = _row(point, spec, final, run_capture(req, run_dir))
    except TraceVizError as e:
        row = _row(point, spec, final, error=str(e))
    if scratch is not None:
        if run_dir.is_dir():
            buf = io.BytesIO()
            with tarfile.open(fileobj=buf, mode="w:gz") as tar:
                tar.add(run_dir, arcname=pid)
            row["_archive"] = buf.getvalue()
        shutil.rmtree(scratch, ignore_errors=True)
    return row


def unpack_point(row: dict, out_dir: Path) -> dict:
    """Put a shipped run folder in place under ``out_dir/points`` (see ``capture_point``)."""
    archive = row.pop("_archive", None)
    if archive is None:
        return row
    points = out_dir / "points"
    target = points / row["point"]
    shutil.rmtree(target, ignore_errors=True)
    points.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        tar.extractall(points, filter="data")
    return row


# runs capture_point over (point, spec, out_dir, marker) jobs, yielding (job index, row or
# the exception that lost the point) as points finish: locally one by one, or on Ray
PointMap = Callable[[list[tuple]], Iterator[tuple[int, "dict | BaseException"]]]


def run_sweep(
    spec: SweepSpec,
    out_dir: Path,
    resume: bool = False,
    force: bool = False,
    on_start: Callable[[int, int, dict], None] | None = None,
    on_done: Callable[[int, int, dict], None] | None = None,
    point_map: PointMap | None = None,
) -> pd.DataFrame:
    """Capture every point not already done (``point_map``: where; default here, one after
    another); ``sweep.parquet`` is rewritten after every point. Returns the sweep table."""
    table_path = out_dir / SWEEP_FILE
    rows: dict[str, dict] = {}
    if table_path.exists():
        if resume:
            for r in load_sweep(table_path).to_dict("records"):
                rows[r["point"]] = r
        elif not force:
            raise TraceVizError(f"{table_path}: already exists (resume=True goes on with "
                                "it, force=True starts again)")
    from traceviz.runners import VARIANTS

    unknown = [m for m in spec.models if m not in VARIANTS]
    if unknown:  # a typo fails now; a variant that cannot run here fails as its point
        raise TraceVizError(f"unknown model {unknown[0]!r}; `traceviz models` lists them")
    points = spec.points()
    todo = [p for p in points if rows.get(point_id(p), {}).get("status") != "ok"]
    done = len(points) - len(todo)
    out_dir.mkdir(parents=True, exist_ok=True)
    marker = uuid.uuid4().hex
    with atomic_output(out_dir / MARKER, force=True) as tmp:
        tmp.write_text(marker)
    first = done + 1

    def local(jobs: list[tuple]) -> Iterator[tuple[int, dict | BaseException]]:
        for k, job in enumerate(jobs):
            if on_start:
                on_start(first + k, len(points), todo[k])
            yield k, capture_point(*job)

    if point_map is not None and on_start:  # all submitted at once
        for i, p in enumerate(todo, first):
            on_start(i, len(points), p)
    jobs = [(p, spec, str(out_dir), marker) for p in todo]
    for k, result in (point_map or local)(jobs):
        p = todo[k]
        if isinstance(result, BaseException):  # the worker or its node died
            line = (str(result).strip().splitlines() or [""])[0]
            row = _row(p, spec, out_dir / "points" / point_id(p),
                       error=f"{type(result).__name__}: {line}"[:500])
        else:
            row = unpack_point(result, out_dir)
        rows[point_id(p)] = row
        _write(table_path, rows)
        done += 1
        if on_done:
            on_done(done, len(points), row)
    order = {point_id(p): i for i, p in enumerate(points)}  # the grid's order, not finishing
    rows = dict(sorted(rows.items(), key=lambda kv: order.get(kv[0], len(order))))
    _write(table_path, rows)
    return _frame(rows)


def _frame(rows: dict[str, dict]) -> pd.DataFrame:
    return pd.DataFrame(list(rows.values()))


def _write(path: Path, rows: dict[str, dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_output(path, force=True) as tmp:
        _frame(rows).to_parquet(tmp, index=False)
