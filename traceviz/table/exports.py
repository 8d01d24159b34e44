"""The tables ``analyze --export DIR`` writes, one Parquet file each (the notebook API
returns the same tables): their names in the order written, and what each holds.

``analyses/summary/tables.py`` builds them in this order, the command line names them from
here, and the documentation's table of them (docs/formats.md, "Exported tables") is made
from ``EXPORTS``. Standard library only: the command line's parser reads the names without
importing pandas.
"""

from __future__ import annotations

KERNEL_COLUMNS = [
    "name", "category", "kind", "ts_ns", "dur_ns", "device", "stream", "step", "correlation",
    "launch_id", "launch_api", "launch_ts_ns", "launch_dur_ns", "launch_delay_ns", "op",
    "is_cast", "details", "phase",
]
OP_COLUMNS = [
    "name", "category", "ts_ns", "dur_ns", "self_ns", "depth", "is_leaf", "is_work", "parent",
    "pid", "tid", "step", "is_cast",
]


def _code(columns: list[str]) -> str:
    return f"`{', '.join(columns)}`"


# file stem -> its columns, in Markdown (the docs' table prints it as written)
EXPORTS: dict[str, str] = {
    "kernels": _code(KERNEL_COLUMNS),
    "launches": "one row per launch call: `launch_id, api, population` "
                "(kernel/graph/memcpy/memset), `ts_ns, host_ns, pid, tid, step, correlation, "
                "device_count, device_ns, delay_ns, first_kernel, device, matched`; "
                "`delay_ns` and `device` are nullable integers, null on a call that reached "
                "no device row",
    "casts": "the `kernels.parquet` columns, cast rows only",
    "ops": f"{_code(OP_COLUMNS)}; `parent` is the row number of the enclosing op (-1 at "
           "the top)",
    "phases": "`phase, ranges, wall_ns, busy_ns, kernels, kernel_ns, casts, cast_ns` (whole "
              "trace, not per step)",
    "efficiency": "one row per op group: `op, dims, types, precision, unit, peak_key, calls, "
                  "kernels, time_ns, flops, bytes, tflops, gbps, intensity, pct_peak, "
                  "pct_bw, bound`",
    "memory": "the allocator's total after each event: `ts_ns, device, total` (bytes)",
    "ranges": "the Ranges table, per range name and style: `name, style, instances, "
              "total_ns, share, avg_ns, med_ns, min_ns, max_ns, std_ns, parent, depth, "
              "gpu_ops, proj_ns, kernels, kernel_ns`",
    "range_instances": "one row per range: `name, style, start_ns, end_ns, dur_ns, pid, "
                       "tid, is_step, parent` (its row in this table, -1 at the top), "
                       "`depth`, and the device work launched inside: `proj_start_ns, "
                       "proj_ns` (-1 where none), `gpu_ops, kernels, kernel_ns`",
}
