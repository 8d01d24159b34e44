"""Runs and sweeps written up like the seeds' reports (Markdown or HTML).

``build_report`` turns figures already computed (``RunFigures`` with their ``Summary``,
sweep tables) into sections (text, a table, charts); ``to_markdown`` keeps the charts
as PNG files beside the .md, ``to_html`` embeds them in one self-contained file.
"""

from __future__ import annotations

import base64
import html
import io
from dataclasses import dataclass, field

import pandas as pd

from traceviz.analyses.amp import amp_breakdown, amp_pairs
from traceviz.analyses.compare import RunFigures, mpe_table
from traceviz.render.terminal import amp_rows, amp_verdict
from traceviz.units import fmt_ns, fmt_pct


@dataclass
class Section:
    title: str
    text: str = ""
    table: pd.DataFrame | None = None
    images: list[tuple[str, bytes]] = field(default_factory=list)  # (file name, PNG)


def _png(fig) -> bytes:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def _safe(label: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in label)


def build_report(figs: list[RunFigures], sweeps: list[tuple[str, pd.DataFrame]]
                 ) -> list[Section]:
    """Sections for runs (their figures) and sweeps (label, sweep table)."""
    from traceviz.render.charts import amp_waterfall, category_bars, kernel_pie, sweep_plots

    sections: list[Section] = []
    if figs:
        env = pd.DataFrame([{
            "run": f.label,
            "framework": f"{(f.meta.get('runner') or {}).get('framework', '?')} "
                         f"{(f.meta.get('runner') or {}).get('framework_version', '')}".strip(),
            "device": (f.meta.get("runner") or {}).get("device_name")
            or ", ".join((f.meta.get("devices") or {}).values()) or "?",
            "source": f.meta.get("source_format", "?"),
        } for f in figs])
        sections.append(Section("Environment", table=env))
        rows = []
        for f in figs:
            w = f.meta.get("workload") or {}
            bench = f.meta.get("bench") or {}
            t = bench.get("time_per_batch_s") or {}
            rows.append({
                "run": f.label, "model": f.meta.get("model", "–"),
                "preset": f.meta.get("preset", "–"), "mode": w.get("mode", "–"),
                "amp": f.meta.get("amp") or "none",
                "shape": f"b{w.get('batch')} s{w.get('seq')} {w.get('layers')}x{w.get('hidden')}"
                if w else "–",
                "time/batch": "–" if not t else f"{t['median']:.4f} s",
                "min": "–" if not t else f"{t['min']:.4f}",
                "max": "–" if not t else f"{t['max']:.4f}",
                "elapsed": "–" if not bench else f"{bench['elapsed_s']:.3f} s "
                                                  f"({bench['batches']} batches)",
                "sequences/s": "–" if not bench else f"{bench['sequences_per_s']:,.1f}",
            })
        sections.append(Section("Time per batch, elapsed and sequences/s",
                                "Benchmark phase without the profiler (median of the timed "
                                "batches, device synchronised).", pd.DataFrame(rows)))
        bound = pd.DataFrame([{
            "run": f.label, "trace": "CPU" if f.cpu_trace else "GPU",
            "busy/step": fmt_ns(f.busy_ns / f.per_step),
            "span/step": fmt_ns(f.span_ns / f.per_step),
            "idle (CPU: framework overhead)": fmt_pct(f.idle_fraction),
            "launch-bound (waiting for host)": fmt_pct(f.launch_bound_fraction),
            "queued idle/step": "–" if f.queued_idle_ns is None
            else fmt_ns(f.queued_idle_ns / f.per_step),
            "cast time/step": fmt_ns(f.cast_ns / f.per_step),
            "tensor-core share": fmt_pct(f.tensor_core_share),
        } for f in figs])
        sections.append(Section(
            "Idle and launch-bound fractions",
            "Per step window: idle = 1 - busy / span; launch-bound = the share of the span "
            "in which the device was idle with nothing launched pending (waiting for the "
            "host); queued idle = idle while launched work waited.", bound))
        pies = Section("Where the time goes",
                       "Top kernels (leaf framework ops on a CPU trace) and others.")
        for f in figs:
            pies.images.append((f"pie_{_safe(f.label)}.png", _png(kernel_pie(f.summary))))
        if len(figs) > 1:
            pies.images.append(("categories.png", _png(category_bars(figs))))
        sections.append(pies)
        if len(figs) > 1:
            mpe = mpe_table(figs).map(lambda v: "–" if pd.isna(v) else f"{v:+.1f}%")
            sections.append(Section("Mean percentage error", "Time per batch, row vs "
                                    "column, over the timed batches paired in order; negative: "
                                    "the column is slower.", mpe.reset_index(names="run")))
        for a, b in amp_pairs(figs):
            br = amp_breakdown(a, b)
            sections.append(Section(
                f"AMP breakdown: {a.label} → {b.label}", amp_verdict(br),
                pd.DataFrame(amp_rows(br), columns=["part", "time per step"]),
                [(f"amp_{_safe(b.label)}.png", _png(amp_waterfall(br, a.label, b.label)))]))
    for label, df in sweeps:
        cols = [c for c in ("point", "status", "time_per_batch_s", "sequences_per_s",
                            "idle_fraction", "launch_bound_fraction", "cast_share",
                            "top_kernel", "error") if c in df]
        table = df[cols].copy()
        for c in ("time_per_batch_s", "sequences_per_s", "idle_fraction",
                  "launch_bound_fraction", "cast_share"):
            if c in table:
                table[c] = table[c].map(lambda v: "–" if pd.isna(v) else f"{v:.4g}")
        images = [(f"{_safe(label)}_{name}.png", _png(fig))
                  for name, fig in sweep_plots(df).items()]
        sections.append(Section(f"Sweep: {label}",
                                f"{(df['status'] == 'ok').sum()} of {len(df)} points captured.",
                                table, images))
    return sections


def md_table(df: pd.DataFrame) -> str:
    """A GitHub-flavoured Markdown table of ``df``'s columns (not its index)."""
    cols = [str(c) for c in df.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in df.itertuples(index=False):
        lines.append("| " + " | ".join(str(v).replace("|", "\\|") for v in row) + " |")
    return "\n".join(lines)


def to_markdown(sections: list[Section], title: str, image_dir: str) -> tuple[str, dict]:
    """The Markdown text and ``{relative path: PNG bytes}`` to write beside it."""
    out, files = [f"# {title}", ""], {}
    for s in sections:
        out += [f"## {s.title}", ""]
        if s.text:
            out += [s.text, ""]
        if s.table is not None:
            out += [md_table(s.table), ""]
        for name, png in s.images:
            rel = f"{image_dir}/{name}"
            files[rel] = png
            out += [f"![{name}]({rel})", ""]
    return "\n".join(out), files


def to_html(sections: list[Section], title: str) -> str:
    """One self-contained HTML file: tables inline, charts as embedded PNG."""
    body = [f"<h1>{html.escape(title)}</h1>"]
    for s in sections:
        body.append(f"<h2>{html.escape(s.title)}</h2>")
        if s.text:
            body.append(f"<p>{html.escape(s.text)}</p>")
        if s.table is not None:
            body.append(s.table.to_html(index=False, escape=True, border=0))
        for name, png in s.images:
            data = base64.b64encode(png).decode()
            body.append(f'<img alt="{html.escape(name)}" src="data:image/png;base64,{data}">')
    style = ("body{font-family:sans-serif;max-width:1100px;margin:2em auto}"
             "table{border-collapse:collapse;margin:1em 0}td,th{padding:3px 8px;"
             "border-bottom:1px solid #ddd;text-align:right}img{max-width:100%}")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}"
            f"</title><style>{style}</style></head><body>{''.join(body)}</body></html>")
