"""Table access to an Nsight Systems export, whatever its container.

nsys writes the same tables as SQLite (``.sqlite``), as Arrow IPC streams concatenated in
one file (``--type arrow``, 2022.x), or as one file per table in a folder (``parquetdir`` /
``arrowdir``, newer releases). Tables and columns differ across versions, so a reader asks
for the columns it wants and gets those that exist; a missing table reads as no rows.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from traceviz.errors import TraceVizError
from traceviz.parsers.nsys.guard import ReadGuard
from traceviz.parsers.numbers import checked_ints


class ExportTables:
    """Base: ``names`` lists the tables, ``read`` returns a frame of the present columns;
    ``odd_names``: tables left unread, their names not UTF-8 (no nsys table's is)."""

    names: set[str]
    odd_names: list[str] = []

    def columns(self, table: str) -> list[str]:
        raise NotImplementedError

    def _read(self, table: str, columns: list[str]) -> pd.DataFrame:
        raise NotImplementedError

    def read(self, table: str, columns: Iterable[str]) -> pd.DataFrame:
        """Every asked-for column, in order; one the table lacks reads as all NULL (None),
        like a column an older nsys left NULL. A missing table reads as no rows."""
        columns = list(columns)
        if table not in self.names:
            return pd.DataFrame(columns=columns)
        have = set(self.columns(table))
        wanted = [c for c in columns if c in have]
        if not wanted:
            return pd.DataFrame(columns=columns)
        df = self._read(table, wanted)
        for c in columns:
            if c not in df:
                df[c] = pd.Series(None, index=df.index, dtype=object)
        return df[columns]

    def holding_values(self, table: str, columns: Iterable[str]) -> list[str]:
        """Those of ``columns`` the table has with a value on some row (columns that are
        NULL throughout need not be read)."""
        have = set(self.columns(table)) if table in self.names else set()
        return [c for c in columns if c in have and self._any_value(table, c)]

    def _any_value(self, table: str, column: str) -> bool:
        raise NotImplementedError

    def close(self) -> None:
        pass

    def __enter__(self) -> ExportTables:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SqliteTables(ExportTables):
    def __init__(self, path: Path):
        uri = f"file:{path.resolve()}?mode=ro&immutable=1"
        try:
            self._db = sqlite3.connect(uri, uri=True)
            # every statement below runs under the guard: bounded, and ended by a signal
            self._guard = ReadGuard(self._db, path)
            with self._guard.query("sqlite_master"):
                # as bytes: a name that is not UTF-8 would fail the whole list
                rows = self._db.execute("SELECT CAST(name AS BLOB) FROM sqlite_master WHERE "
                                        "type IN ('table', 'view')").fetchall()
        except sqlite3.DatabaseError as e:
            raise TraceVizError(f"{path}: not a readable SQLite database ({e})") from None
        except UnicodeDecodeError:  # SQLite's own message quotes the schema's bad bytes
            raise TraceVizError(f"{path}: not a readable SQLite database (its schema, "
                                "sqlite_master, names a table in bytes that are not UTF-8 "
                                "and does not parse)") from None
        self.path = path
        self.names = _table_names([r[0] for r in rows], self)

    def columns(self, table: str) -> list[str]:
        try:
            with self._guard.query(table):
                return [r[1] for r in self._db.execute(f'PRAGMA table_info("{table}")')]
        except sqlite3.DatabaseError as e:  # a view over a dropped table, a damaged page
            raise TraceVizError(f"{self.path}: cannot read table {table} ({e})") from None

    def _any_value(self, table: str, column: str) -> bool:
        try:
            with self._guard.query(table):
                return self._db.execute(f'SELECT 1 FROM "{table}" WHERE "{column}" IS NOT '
                                        "NULL LIMIT 1").fetchone() is not None
        except sqlite3.DatabaseError as e:
            raise TraceVizError(f"{self.path}: cannot read table {table} ({e})") from None

    def _read(self, table: str, columns: list[str]) -> pd.DataFrame:
        """The rows in chunks, each made a frame at once: the rows of a large table as
        Python tuples would take several times the table (a million NVTX ranges: 600 MB),
        and each chunk's repeated texts share one string object."""
        cols = ", ".join(f'"{c}"' for c in columns)
        try:
            parts = self._chunks(table, f'SELECT {cols} FROM "{table}"', columns)
        except sqlite3.OperationalError:
            # text that is not UTF-8 (a damaged or hand-edited export) reads with U+FFFD;
            # decoding every text in Python costs a second per million, so only here
            self._db.text_factory = lambda b: b.decode("utf-8", "replace")
            try:
                parts = self._chunks(table, f'SELECT {cols} FROM "{table}"', columns)
            except sqlite3.DatabaseError as e:
                raise TraceVizError(f"{self.path}: cannot read table {table} ({e})") from None
            finally:
                self._db.text_factory = str
        except sqlite3.DatabaseError as e:
            raise TraceVizError(f"{self.path}: cannot read table {table} ({e})") from None
        if not parts:
            return pd.DataFrame(columns=columns)
        return pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]

    def _chunks(self, table: str, query: str, columns: list[str]) -> list[pd.DataFrame]:
        parts = []
        with self._guard.query(table):
            cursor = self._db.execute(query)
            while rows := cursor.fetchmany(CHUNK_ROWS):
                self._guard.rows(table, len(rows) * len(columns))
                parts.append(_chunk(rows, columns))
        return parts

    def connection(self) -> tuple[sqlite3.Connection, ReadGuard]:
        """The connection and its guard, for a reader's own queries (each statement inside
        ``guard.query``)."""
        return self._db, self._guard

    def close(self) -> None:
        self._db.close()


CHUNK_ROWS = 1 << 16


def _chunk(rows: list[tuple], columns: list[str]) -> pd.DataFrame:
    """Rows as a frame typed as ``pandas.read_sql_query`` types them (whole numbers with a
    NULL as floats), every text column's repeats one object."""
    df = pd.DataFrame.from_records(rows, columns=columns, coerce_float=True)
    for c in columns:
        if df[c].dtype == object:
            codes, uniques = pd.factorize(df[c].to_numpy(object))
            values = np.append(np.asarray(uniques, dtype=object), [None])
            df[c] = values[codes]  # -1 (NULL) takes the last entry, None
    return df


def _table_names(raw: list[bytes | None], tables: ExportTables) -> set[str]:
    """The tables' names that are UTF-8 text (those traceviz asks for are ASCII); the
    others, written with U+FFFD, go to ``tables.odd_names``."""
    names, odd = set(), []
    for name in raw:
        try:
            names.add(bytes(name or b"").decode())
        except UnicodeDecodeError:
            odd.append(bytes(name or b"").decode("utf-8", "replace"))
    tables.odd_names = sorted(odd)
    return names


class ArrowTables(ExportTables):
    """Tables already in memory: the ``--type arrow`` file or a parquetdir/arrowdir folder."""

    def __init__(self, tables: dict[str, pa.Table]):
        self._tables = tables
        self.names = set(tables)
        self.odd_names = sorted(n for n in tables if "\ufffd" in n)  # see _arrow_streams

    def columns(self, table: str) -> list[str]:
        return self._tables[table].column_names

    def _any_value(self, table: str, column: str) -> bool:
        col = self._tables[table].column(column)
        return col.null_count < len(col)

    def _read(self, table: str, columns: list[str]) -> pd.DataFrame:
        try:
            return self._tables[table].select(columns).to_pandas()
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise TraceVizError(f"table {table}: unreadable columns ({e})") from None


def _arrow_streams(path: Path) -> dict[str, pa.Table]:
    """``nsys export --type arrow``: IPC streams back to back, each naming its table."""
    import pyarrow.ipc as ipc

    tables: dict[str, pa.Table] = {}
    with pa.memory_map(str(path)) as f:
        size = f.size()
        while f.tell() < size:
            try:
                table = ipc.open_stream(f).read_all()
            except pa.ArrowInvalid as e:
                if not tables:
                    raise TraceVizError(f"{path}: not an nsys Arrow export ({e})") from None
                raise TraceVizError(f"{path}: truncated Arrow stream after "
                                    f"{len(tables)} tables ({e})") from None
            # a name that is not UTF-8 keeps U+FFFD in its place: no table read by name
            name = (table.schema.metadata or {}).get(b"table_name", b"").decode(
                "utf-8", "replace")
            if not name:
                raise TraceVizError(f"{path}: Arrow stream without a table_name; "
                                    "not an nsys export")
            tables[name] = table
    return tables


def _table_folder(path: Path) -> dict[str, pa.Table]:
    """parquetdir / arrowdir: one ``<TABLE>.parquet`` or ``<TABLE>.arrow`` per table."""
    import pyarrow.ipc as ipc
    import pyarrow.parquet as pq

    tables: dict[str, pa.Table] = {}
    for f in sorted(path.iterdir()):
        try:
            if f.suffix == ".parquet":
                tables[f.stem] = pq.read_table(f)
            elif f.suffix == ".arrow":
                with pa.memory_map(str(f)) as src:
                    try:
                        tables[f.stem] = ipc.open_file(src).read_all()
                    except pa.ArrowInvalid:
                        src.seek(0)
                        tables[f.stem] = ipc.open_stream(src).read_all()
        except (pa.ArrowInvalid, OSError) as e:
            raise TraceVizError(f"{f}: unreadable table file ({e})") from None
    return tables


def open_tables(path: Path, fmt: str) -> ExportTables:
    if fmt == "nsys-sqlite":
        return SqliteTables(path)
    if fmt == "nsys-arrow":
        return ArrowTables(_arrow_streams(path))
    if fmt == "nsys-dir":
        return ArrowTables(_table_folder(path))
    raise ValueError(fmt)


def text_values(values: pd.Series) -> np.ndarray:
    """Strings from a text column that may hold NULL or BLOBs."""
    out = values.to_numpy(object)
    if pd.api.types.infer_dtype(out, skipna=True) in ("string", "empty"):
        return out
    # BLOBs or numbers where text belongs: only damaged or hand-made exports get here
    return np.array([v.decode("utf-8", "replace") if isinstance(v, bytes | bytearray)
                     else (None if v is None or v != v else str(v)) for v in out],
                    dtype=object)


def lookup_strings(strings: pd.Series, ids: pd.Series, missing: str | None) -> np.ndarray:
    """The texts of string ids (``StringIds``: id -> value); an id not there reads as
    ``missing``."""
    idx = strings.index.get_indexer(checked_ints(ids)[0])
    values = np.append(strings.to_numpy(object), np.array([missing], dtype=object))
    out = values[np.where(idx >= 0, idx, len(values) - 1)]
    if missing is not None:
        out = np.where(pd.isna(out), missing, out)
    return out
