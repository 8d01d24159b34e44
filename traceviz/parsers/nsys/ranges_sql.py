"""An export's NVTX ranges read by SQL into a few integer columns, apart from the events
table, for ``analyze``'s Ranges section: a million ranges are 1M rows of the events table
(~100 bytes each, and the objects of every step that makes them), where the section needs
a name code, a style, a start, an end and a thread per range.

SQL does the work ``nsys stats --report nvtxsum`` does in SQL: the range event types
only, the open ranges' end (the export's last NVTX time), the texts registered in
``StringIds`` first, then the range's own; each distinct inline text is numbered once in
a temporary table, so every row reads as integers. SQLite hands the integers over as
one decimal text per block of rows (``group_concat``), which numpy parses: no Python
object per value (fetching tuples took twice as long). Names are then made once per
distinct (text, domain, process, style), by the reader's own rules (``read_ranges``,
``domains``, demangling), so the figures are those of the rows the reader would make.

Only an export of NVTX ranges alone is read so (no CUDA rows, no step or op ranges, no
range named after a collective or an input call: those feed the other sections), and
only when every value is what the reader takes as is; any other export is read whole,
row by row, as before. ``ranges_apart()``
asks for it: ``analyze`` without outputs that draw the rows (``--export``,
``--perfetto``, ``--plot``, ``--critical-path``)."""

from __future__ import annotations

import sqlite3

import numpy as np
import pandas as pd

from traceviz.parsers.normalize import BASE_COLUMNS, finish
from traceviz.parsers.nsys.apart import ranges_apart, wanted  # noqa: F401 (also from here)
from traceviz.parsers.nsys.checks import KERNEL, RUNTIME
from traceviz.parsers.nsys.nvtx import PAYLOAD_COLUMNS, domains
from traceviz.parsers.nsys.table_access import SqliteTables, text_values
from traceviz.parsers.nvtx_text import read_ranges
from traceviz.table.classify import collective_kind
from traceviz.table.input_calls import input_framework
from traceviz.table.meta import TraceMeta
from traceviz.table.names import demangled_categories
from traceviz.trace import Trace

NVTX = "NVTX_EVENTS"
# NvtxPushPopRange, NvtxStartEndRange and their NVTXT twins; the domain-create event
RANGE_TYPES = "59, 60, 70, 71"
STARTEND_TYPES = "60, 71"
DOMAIN_CREATE = 75
# tables whose rows are other sections' figures: an export holding any is read whole
OTHER_TABLES = (KERNEL, RUNTIME, "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
                "CUDA_GPU_MEMORY_USAGE_EVENTS")
BLOCK_ROWS = 1 << 17  # rows per decimal text: ~5 MB of text at a time
MAX_SPAN_NS = 2 ** 62  # normalize's: rows ending further from the first start are dropped
STYLES = ["PushPop", "StartEnd"]
DOMAINS = 1 << 15  # domain ids below it fit a row's key beside its text and style

def ranges_of(tables: SqliteTables, strings: pd.Series) -> pd.DataFrame | None:
    """The export's NVTX ranges, one row each in the table's order, as ``range_rows``
    reads them from the events table: ``name`` (categorical), ``style`` (categorical
    PushPop/StartEnd), ``start_ns``, ``end_ns`` (from the first range's start: the
    trace's origin), ``pid``, ``tid``, ``is_step``; ``origin_ns`` in ``attrs``. None
    where the export is not one of NVTX ranges alone whose values all read as is (it is
    then read whole)."""
    if NVTX not in tables.names or any(tables.holding_values(t, ["start"]) for t in OTHER_TABLES
                                       if t in tables.names):
        return None
    have = set(tables.columns(NVTX))
    if not {"start", "end", "eventType", "globalTid"} <= have:
        return None
    db, guard = tables.connection()
    try:
        with guard.query(NVTX):
            # columns NULL throughout are not read (most exports fill textId or text, not
            # both), found in one scan (a LIMIT 1 query per column scans the whole table
            # for each column that is NULL throughout: 10 of them took 2 s)
            asked = [c for c in ("textId", "text", "domainId", "category", *PAYLOAD_COLUMNS)
                     if c in have]
            n, t_start, t_end, d_min, d_max, *counts = db.execute(
                f"SELECT total(eventType IN ({RANGE_TYPES})), max(start), max(\"end\"), "
                + ("min(domainId), max(domainId)" if "domainId" in have else "0, 0")
                + "".join(f', count("{c}")' for c in asked) + f" FROM {NVTX}").fetchone()
            held = {c for c, k in zip(asked, counts, strict=True) if k}
            # qualified: inside the text subquery a bare "text" is the temporary table's
            col = {c: f'{NVTX}."{c}"' if c in held else "NULL"
                   for c in ("textId", "text", "domainId")}
            extra = [c for c in ("category", *PAYLOAD_COLUMNS) if c in held]
            # a category or payload that is no number is a note of the reader's; a domain
            # id past DOMAINS would not fit the row's key
            # (SQLite orders numbers before texts: a text id is the largest)
            if not n or not isinstance(d_max, int | None) or (d_min or 0) < 0 \
                    or (d_max or 0) >= DOMAINS or extra and db.execute(
                    f"SELECT 1 FROM {NVTX} WHERE " + " OR ".join(
                        f"typeof(\"{c}\") NOT IN ('integer', 'real', 'null')" for c in extra)
                    + " LIMIT 1").fetchone():
                return None
            if "text" in held:  # the texts written inline, each numbered once (in the
                # connection's own temporary database: the export is opened read-only)
                db.execute("CREATE TEMP TABLE traceviz_texts (id INTEGER PRIMARY KEY, "
                           "text TEXT UNIQUE)")
                db.execute(f"INSERT INTO temp.traceviz_texts (text) SELECT DISTINCT \"text\" "
                           f"FROM {NVTX} WHERE text IS NOT NULL AND eventType IN "
                           f"({RANGE_TYPES}, {DOMAIN_CREATE})")
            inline = dict(db.execute("SELECT id, text FROM temp.traceviz_texts").fetchall()) \
                if "text" in held else {}
        # the reader's end of an open range: the export's last NVTX time
        t_max = max(int(t_start), int(t_end if t_end is not None else t_start))
        rows = _columns(tables, int(n), t_max, col)
    except (sqlite3.OperationalError, TypeError, ValueError):
        # a view (no rowid), a value that is no integer: the reader reads it and says what
        return None
    if rows is None:
        return None
    start, end = rows[0], rows[1]
    keep = end >= start  # a range ending before it starts is no row (the reader's rule)
    if not keep.all():
        rows = [a[keep] for a in rows]
        start, end = rows[0], rows[1]
    del keep
    if not len(start) or start.min() < 0 or int(end.max()) - int(start.min()) >= MAX_SPAN_NS:
        return None  # rows the reader drops, with a note
    del start, end
    return _named(tables, strings, inline, col, rows)


def _text_key(col: dict[str, str], strings: bool) -> str:
    """A range's text as one integer: its ``StringIds`` id + 1 where registered, else
    minus its inline text's number, else 0 (no text)."""
    registered = f"WHEN {col['textId']} IN (SELECT id FROM StringIds WHERE id >= 0) " \
        f"THEN {col['textId']} + 1 " if strings and col["textId"] != "NULL" else ""
    inline = f"-(SELECT id FROM temp.traceviz_texts t WHERE t.text = {col['text']})" \
        if col["text"] != "NULL" else "0"
    return f"CASE {registered}WHEN {col['text']} IS NULL THEN 0 ELSE {inline} END"


def _columns(tables: SqliteTables, n: int, t_max: int, col: dict[str, str]
             ) -> list[np.ndarray] | None:
    """(start, end, globalTid, key) of every range row, in the table's order, the key
    ``(text key * DOMAINS + domain) * 2 + start/end style``, a block of rows at a time:
    each column one decimal text (a row's values concatenated into one text cost SQLite
    twice the time); None where a value is missing (its column's count falls short). A
    value that is no integer fails numpy's parse: ValueError."""
    db, guard = tables.connection()
    fields = ["start", f"coalesce(\"end\", {t_max})", "globalTid",
              f"(({_text_key(col, 'StringIds' in tables.names)}) * {DOMAINS} + "
              f"coalesce({col['domainId']}, 0)) * 2 + (eventType IN ({STARTEND_TYPES}))"]
    query = (f"SELECT count(*), {', '.join(f'group_concat({f})' for f in fields)} FROM {NVTX} "
             f"WHERE rowid >= ? AND rowid < ? AND eventType IN ({RANGE_TYPES})")
    out = [np.empty(n, dtype=np.int64) for _ in fields]
    at = 0
    with guard.query(NVTX):
        lo, hi = db.execute(f"SELECT min(rowid), max(rowid) FROM {NVTX}").fetchone()
        for a in range(int(lo), int(hi) + 1, BLOCK_ROWS):
            rows, *texts = db.execute(query, (a, a + BLOCK_ROWS)).fetchone()
            if not rows:
                continue
            if at + rows > n:
                return None
            guard.rows(NVTX, rows * len(fields))
            for column, text in zip(out, texts, strict=True):
                # parsed in C, no object per value
                values = np.fromstring(text or "", dtype=np.int64, sep=",")
                if len(values) != rows:
                    return None
                column[at:at + rows] = values
            at += rows
    return out if at == n else None


def _named(tables: SqliteTables, strings: pd.Series, inline: dict[int, str],
           col: dict[str, str], rows: list[np.ndarray]) -> pd.DataFrame | None:
    """The rows (``_columns``, a list this empties: each column freed once read) named
    as the reader names them, once per distinct (thread, key), and sorted as the section
    reads them (by thread, then start, the longest first), one column at a time: no
    second copy of the rows at once."""
    start, end, gtid, key = rows
    rows.clear()
    origin = int(start.min())
    start -= origin
    end -= origin
    t_code, threads = _codes(gtid)
    del gtid
    k_code, keys = _codes(key)
    del key
    pair, pairs = _codes(t_code.astype(np.int64) * len(keys) + k_code)
    del k_code
    threads = np.asarray(threads, dtype=np.int64)
    p_thread = threads[pairs // len(keys)]
    p_key = np.asarray(keys, dtype=np.int64)[pairs % len(keys)]
    texts = np.array([_text(int(t), strings, inline) for t in p_key // 2 // DOMAINS],
                     dtype=object)
    _, kind, name, _ = read_ranges(pd.Series(texts, dtype=object))
    if (kind != "annotation").any():  # steps and ops are other sections' rows
        return None
    made = _made(tables, strings, inline, col)
    if made is None:
        return None
    d_code, d_names = domains(made, p_thread & np.int64(~0xFFFFFF), p_key // 2 % DOMAINS)
    name = name.astype(object)
    qualified = d_code >= 0
    name[qualified] = d_names[d_code[qualified]] + ":" + name[qualified]
    cats, remap = np.unique(name.astype(str), return_inverse=True)
    cats = demangled_categories(pd.Index(cats))  # as the events table names them
    if any(collective_kind(c) is not None or input_framework(c) is not None for c in cats):
        # on a trace of ranges alone, ranges named after a collective are its
        # communication and after an input call its input pipeline: other sections' rows
        return None
    # threads in (pid, tid) order
    t_pid, t_tid = (threads >> 24) & 0xFFFFFF, threads & 0xFFFFFF
    t_rank = np.empty(len(threads), dtype=np.int32)
    t_rank[np.lexsort((t_tid, t_pid))] = np.arange(len(threads), dtype=np.int32)
    np.invert(end, out=end)  # ~end = -end - 1, in place: the longest first, no copy
    order = np.lexsort((end, start, t_rank[t_code]))
    np.invert(end, out=end)
    pair = pair[order]
    t_code = t_code[order]
    start, end = start[order], end[order]
    del order
    out = pd.DataFrame({
        "name": pd.Categorical.from_codes(remap.reshape(-1).astype(np.int32)[pair],
                                          categories=cats),
        "style": pd.Categorical.from_codes((p_key % 2).astype(np.int8)[pair],
                                           categories=STYLES),
        "start_ns": start, "end_ns": end,
        # 24 bits each (globalTid's fields)
        "pid": t_pid.astype(np.int32)[t_code], "tid": t_tid.astype(np.int32)[t_code],
        "is_step": np.zeros(len(start), dtype=bool)}, copy=False)
    del pair, t_code, start, end
    out.attrs["origin_ns"] = origin
    return out


def _codes(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each value's place among the distinct values (sorted), as int32. Not
    ``pd.factorize``: its hash table is sized for every row being distinct (32 MB for a
    million int64, the largest transient of the read); here a sorted copy and the codes."""
    uniques = np.unique(values)
    return np.searchsorted(uniques, values).astype(np.int32), uniques


def _text(key: int, strings: pd.Series, inline: dict[int, str]) -> str:
    """A text key's text (``range_texts``' rule: the registered string, else the inline
    text, else ``<unnamed range>``)."""
    value = strings.get(key - 1) if key > 0 else inline.get(-key) if key < 0 else None
    if isinstance(value, bytes | bytearray):
        value = text_values(pd.Series([value], dtype=object))[0]
    return "<unnamed range>" if value is None or value != value else str(value)


def _made(tables: SqliteTables, strings: pd.Series, inline: dict[int, str],
          col: dict[str, str]) -> pd.DataFrame | None:
    """The domain-create events: process ``p``, domain id ``d``, ``name``, in order;
    None where an id is no integer (the reader reads it and says what)."""
    db, guard = tables.connection()
    with guard.query(NVTX):
        rows = db.execute(
            f"SELECT globalTid, coalesce({col['domainId']}, 0), "
            f"{_text_key(col, 'StringIds' in tables.names)} FROM {NVTX} "
            f"WHERE eventType = {DOMAIN_CREATE}").fetchall()
    if not all(isinstance(g, int | None) and isinstance(d, int) for g, d, _ in rows):
        return None
    rows = [((g or 0) & ~0xFFFFFF, d, k) for g, d, k in rows]
    names = [_text(int(k), strings, inline) for _, _, k in rows]
    return pd.DataFrame({"p": np.array([r[0] for r in rows], dtype=np.int64),
                         "d": np.array([r[1] for r in rows], dtype=np.int64),
                         "name": np.array(names, dtype=object)})


def ranges_trace(ranges: pd.DataFrame, meta: TraceMeta, notes: list[str]) -> Trace:
    """A trace of no events, its NVTX ranges (``ranges_of``) in ``Trace.nvtx_ranges``."""
    if notes:
        meta["notes"] = notes
    columns = [*BASE_COLUMNS, "link_pid", "details"]
    trace = finish(pd.DataFrame({c: pd.Series(dtype=object if c in ("kind", "name", "details")
                                              else np.int64) for c in columns}),
                   meta, link_pid="link_pid")
    trace.meta["origin_ns"] = int(ranges.attrs["origin_ns"])
    trace.nvtx_ranges = ranges
    return trace
