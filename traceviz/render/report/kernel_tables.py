"""The tables and bars of a run in ``report.html``: its top kernels (CPU ops on a CPU
trace: a sortable table with a filter, full names on hover), its categories and its
efficiency figures. Times as the terminal writes them (``fmt_ns``), rows numbered from 1,
FLOP rates in the unit of the run's kind (``units.flop_rate``)."""

from __future__ import annotations

import html
from typing import Any

from traceviz.units import flop_rate, fmt_ns

NAME_CHARS = 200          # a hover's name, at most
PALETTE = {"gemm": "#1f77b4", "attention": "#9467bd", "rnn": "#17becf",
           "elementwise": "#2ca02c", "reduction": "#bcbd22", "cast": "#d62728",
           "memcpy": "#8c564b", "memset": "#e377c2", "communication": "#ff7f0e",
           "other": "#7f7f7f", "launch": "#555555", "host wait": "#ff9896"}


def bokeh_module(module: str) -> Any:
    """A Bokeh module as ``Any``: its models are made at run time, and its type stubs do
    not list them (mypy would reject ``bokeh.models.Div``)."""
    import importlib

    return importlib.import_module(module)


def time_column(field: str, title: str, width: int) -> Any:
    """A column of ns figures, sorted by the number and shown as ``fmt_ns`` writes it
    (the source holds ``<field>_text`` beside ``field``)."""
    models = bokeh_module("bokeh.models")
    return models.TableColumn(field=field, title=title, width=width,
                              formatter=models.HTMLTemplateFormatter(
                                  template=f"<%- {field}_text %>"))


def times(values: Any) -> dict[str, list]:
    """ns figures and their text, for ``time_column``."""
    return {"ns": [int(v) for v in values], "text": [fmt_ns(v) for v in values]}


def kernels_table(i: int, s: Any) -> Any:
    """The kernels, sortable by any column; a filter box narrows them by name."""
    column = bokeh_module("bokeh.layouts").column
    models = bokeh_module("bokeh.models")

    from traceviz.table.names import distinct_names

    what = "CPU op" if s.cpu_trace else "kernel"
    k = s.kernels.head(200)
    full = [str(n)[:10 * NAME_CHARS] for n in k["name"]]
    total, mean = times(k["total_ns"]), times(k["mean_ns"])
    src = models.ColumnDataSource({
        "rank": list(range(1, len(k) + 1)),
        "name": distinct_names(list(k["name"].astype(str)), 80), "full": full,
        "category": k["category"].astype(str).tolist(), "count": k["count"].tolist(),
        "total": total["ns"], "total_text": total["text"],
        "mean": mean["ns"], "mean_text": mean["text"],
        "share": (100 * k["share"]).round(2).tolist()})
    view = models.CDSView(filter=models.BooleanFilter([True] * len(k)))
    name_fmt = models.HTMLTemplateFormatter(
        template='<span title="<%- full %>"><%- value %></span>')
    TableColumn = models.TableColumn
    cols = [TableColumn(field="rank", title="#", width=40),
            TableColumn(field="name", title=f"{what} (hover: full name)", formatter=name_fmt,
                        width=420),
            TableColumn(field="category", title="category", width=90),
            TableColumn(field="count", title="count", width=60),
            time_column("total", "total", 90), time_column("mean", "mean", 80),
            TableColumn(field="share", title="share %",
                        formatter=models.NumberFormatter(format="0.00"), width=70)]
    # no index column (Bokeh's counts from 0): the "#" column is the rank by total time
    table = models.DataTable(source=src, view=view, columns=cols, sortable=True,
                             reorderable=False, index_position=None, height=260,
                             sizing_mode="stretch_width", name=f"kernels-{i}")
    box = models.TextInput(placeholder=f"filter {what}s by name", width=320)
    box.js_on_change("value", models.CustomJS(args={"src": src, "view": view}, code="""
const q = cb_obj.value.toLowerCase();
view.filter.booleans = src.data["full"].map(n => n.toLowerCase().includes(q));
src.change.emit();
"""))
    return column(box, table, sizing_mode="stretch_width")


def categories(i: int, s: Any) -> Any:
    models = bokeh_module("bokeh.models")
    figure = bokeh_module("bokeh.plotting").figure

    c = s.categories[s.categories["total_ns"] > 0].sort_values("total_ns")
    src = models.ColumnDataSource({"category": c["category"].astype(str).tolist(),
                                   "ms": (c["total_ns"] / 1e6).tolist(),
                                   "time": [fmt_ns(v) for v in c["total_ns"]],
                                   "share": (100 * c["share"]).round(1).tolist(),
                                   "color": [PALETTE.get(x, "#7f7f7f") for x in c["category"]]})
    what = "CPU op" if s.cpu_trace else "Device"
    p = figure(y_range=list(src.data["category"]), height=40 + 24 * len(c), width=560,
               title=f"{what} time per category (ms, whole trace)", toolbar_location=None,
               name=f"categories-{i}")
    p.hbar(y="category", right="ms", height=0.7, color="color", source=src)
    p.add_tools(models.HoverTool(tooltips=[("category", "@category"), ("time", "@time"),
                                           ("share", "@share %")]))
    return p


def efficiency(s: Any) -> Any:
    """The op groups' rates: GFLOP/s and GB/s with two decimals on a CPU trace (whose
    figures read 0.00 TFLOP/s and 0 GB/s otherwise), no peak columns without a peak."""
    Div = bokeh_module("bokeh.models").Div

    from traceviz.render.terminal.efficiency import shapes_text as shapes

    e = s.efficiency
    unit, scale = flop_rate(e.cpu)
    peaks = e.peak is not None or not e.cpu
    g = e.groups.head(10)
    rows = "".join(
        f"<tr><td>{html.escape(str(r.op))}</td><td>{html.escape(shapes(str(r.dims)))}</td>"
        f"<td>{fmt_ns(r.time_ns)}</td><td>{_n(r.tflops * scale)}</td>"
        f"<td>{_n(r.gbps, 2 if e.cpu else 0)}</td>"
        + (f"<td>{_n(None if r.pct_peak is None else 100 * r.pct_peak, 1)}</td>"
           f"<td>{html.escape(str(r.bound or '-'))}</td>" if peaks else "") + "</tr>"
        for r in g.itertuples(index=False))
    head = "".join(f"<th>{h}</th>" for h in ["op", "shapes", "time", unit, "GB/s"]
                   + (["% of peak", "bound"] if peaks else []))
    return Div(text=f"<h3>Efficiency: op groups by {'CPU op' if e.cpu else 'device'} time"
                    f"</h3><table><tr>{head}</tr>{rows}</table>",
               sizing_mode="stretch_width")


def _n(x: Any, digits: int = 2) -> str:
    return "–" if x is None or x != x else f"{float(x):,.{digits}f}"
