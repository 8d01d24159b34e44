"""Rank folders and datasets (issue 16): per-rank figures against the raw JSON, stragglers,
top kernels across ranks, a dataset read by DuckDB/polars/pyarrow that answers as the
folder does, also under a DuckDB memory limit smaller than the data."""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.rankgen import PAIR, make_ranks
from tests.conftest import KINETO, shared
from tests.rawref import load as raw_events
from tests.rawref import ns, union
from traceviz.cli import main
from traceviz.files.folders import rank_files
from traceviz.rankset.dataset import analyze_dataset
from traceviz.rankset.folder import analyze_folder, import_folder


@pytest.fixture(scope="module")
def pair_dir(tmp_path_factory):
    """The two ranks, one gzipped and one plain, as users' folders mix them."""
    for path in PAIR:
        shared(path)
    d = tmp_path_factory.mktemp("pair")
    shutil.copy(PAIR[0], d / PAIR[0].name)
    (d / PAIR[1].name.removesuffix(".gz")).write_bytes(gzip.decompress(PAIR[1].read_bytes()))
    return d


@pytest.fixture(scope="module")
def eight(tmp_path_factory):
    for path in PAIR:
        shared(path)
    return make_ranks(PAIR, 8, tmp_path_factory.mktemp("eight"))[0].parent


def _raw_comm(path: Path) -> tuple[int, int]:
    """(union of NCCL kernel time, the part overlapped by other kernels), per device."""
    comm_total = over = 0
    kernels = [e for e in raw_events(path) if e.get("cat") == "kernel"]
    for dev in {e["args"]["device"] for e in kernels}:
        mine = [(ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]), "nccl" in e["name"].lower())
                for e in kernels if e["args"]["device"] == dev]
        comm = [(s, e) for s, e, c in mine if c]
        comp = [(s, e) for s, e, c in mine if not c]
        comm_total += union(comm)
        # |A ∩ B| = |A| + |B| - |A ∪ B|
        over += union(comm) + union(comp) - union(comm + comp)
    return comm_total, over


@pytest.mark.shared(*PAIR)
def test_folder_figures_match_raw(pair_dir, capsys):
    assert main(["analyze", str(pair_dir), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [r["rank"] for r in doc["ranks"]] == [0, 1]  # distributedInfo.rank
    for r, path in zip(doc["ranks"], PAIR, strict=True):
        raw = [e for e in raw_events(path) if e.get("cat") == "kernel"]
        assert r["kernels"] == {"count": len(raw), "total_ns": sum(ns(e["dur"]) for e in raw)}
        comm, over = _raw_comm(path)
        assert (r["comm_ns"], r["comm_overlap_ns"]) == (comm, over) and comm > 0
        assert r["comm_overlap_fraction"] == pytest.approx(over / comm)
        steps = sorted((ns(e["ts"]), e["name"]) for e in raw_events(path)
                       if e.get("cat") == "user_annotation"
                       and e["name"].startswith("ProfilerStep#"))
        assert r["steps"] == len(steps) == 2
    # stragglers: per step, the rank whose window is longest
    for st in doc["stragglers"]:
        times = {r["rank"]: None for r in doc["ranks"]}
        assert st["ranks"] == len(times) and st["max_ns"] >= st["median_ns"]
        assert st["spread"] == pytest.approx(st["max_ns"] / st["median_ns"])
    top = doc["top_kernels"][0]
    assert top["name"].startswith("ncclKernel") and top["ranks"] == 2
    per_rank = [sum(ns(e["dur"]) for e in raw_events(p)
                    if e.get("cat") == "kernel" and e["name"] == top["name"]) for p in PAIR]
    assert (top["total_ns"], top["min_rank_ns"], top["max_rank_ns"]) == (
        sum(per_rank), min(per_rank), max(per_rank))


@pytest.mark.shared(*PAIR)
def test_notebook_ranks_is_analyze_json(pair_dir, tmp_path, capsys):
    """``traceviz.ranks(DIR)`` and ``traceviz.ranks(DATASET)`` are what ``analyze --json``
    prints; anything else is one TraceVizError line."""
    import traceviz

    assert main(["analyze", str(pair_dir), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    summary = traceviz.ranks(pair_dir)
    assert json.loads(json.dumps(summary.to_dict(top=15))) == printed  # analyze's --top
    assert [r.rank for r in summary.ranks] == [0, 1] and len(summary.top_kernels) > 10
    ds = tmp_path / "ds"
    assert main(["import", str(pair_dir), "-o", str(ds)]) == 0
    data = traceviz.ranks(ds, memory_limit="128MB").to_dict(top=15)
    assert data["ranks"] == printed["ranks"]
    key = lambda k: (k["name"], k["count"], k["total_ns"], k["min_rank_ns"])  # noqa: E731
    assert list(map(key, data["top_kernels"])) == list(map(key, printed["top_kernels"]))
    for bad, says in ((tmp_path / "none", "no such file"), (PAIR[0], "one trace"),
                      (tmp_path, "no trace files")):
        with pytest.raises(traceviz.TraceVizError, match=says):
            traceviz.ranks(bad)


@pytest.mark.shared(*PAIR)
def test_rank_kernels_per_name_match_raw():
    from traceviz.rankset.folder import folder_rank

    for rank, path in enumerate(PAIR):
        raw: dict[str, list[int]] = {}
        for e in raw_events(path):
            if e.get("cat") == "kernel":
                count_total = raw.setdefault(e["name"], [0, 0])
                count_total[0] += 1
                count_total[1] += ns(e["dur"])
        table = folder_rank(rank, str(path)).kernels
        got: dict[str, list[int]] = {}
        for name, count, total in zip(table["name"], table["count"], table["total_ns"],
                                      strict=True):
            got.setdefault(name, [0, 0])
            got[name][0] += int(count)
            got[name][1] += int(total)
        assert got == raw and len(raw) > 10
        assert list(table["total_ns"]) == sorted(table["total_ns"], reverse=True)


@pytest.mark.shared(*PAIR)
def test_kernel_totals_folded_in_batches_match_raw(monkeypatch):
    """The cross-rank kernel table, folded a few ranks at a time (so a folder of thousands
    of ranks keeps one row per kernel name), equals per-name tallies of the raw JSON:
    ranks having it, count, total, least rank total (0 where a rank lacks it), most."""
    from traceviz.analyses.compare.ranks import KernelTotals
    from traceviz.rankset.folder import folder_rank

    monkeypatch.setattr(KernelTotals, "BATCH", 2)
    tables = [folder_rank(k, str(p)).kernels for k, p in enumerate(PAIR)]
    raw = []
    for path in PAIR:
        per: dict[str, tuple[int, int]] = {}
        for e in raw_events(path):
            if e.get("cat") == "kernel":
                c, t = per.get(e["name"], (0, 0))
                per[e["name"]] = (c + 1, t + ns(e["dur"]))
        raw.append(per)
    order = [0, 1, 0, None, 1, 0, 1]  # None: a rank without kernels
    totals = KernelTotals()
    for k in order:
        totals.add(tables[0].iloc[:0] if k is None else tables[k])
    got = totals.table()
    assert totals.ranks == 7 and totals.ranks_without == 1
    names = set(raw[0]) | set(raw[1])
    assert set(got["name"]) == names
    # a copy kernel is a cast where its op converts a float format and not where it
    # copies integers: one name, two rows; together they hold the name's raw tallies
    by_name = got.groupby("name")[["count", "total_ns"]].sum()
    for name in names:
        per_rank = [0 if k is None else raw[k].get(name, (0, 0))[1] for k in order]
        count = sum(raw[k][name][0] for k in order if k is not None and name in raw[k])
        assert (by_name.loc[name, "count"], by_name.loc[name, "total_ns"]) == (
            count, sum(per_rank))
    split = got["name"].duplicated(keep=False)
    assert split.sum() < 0.1 * len(got)
    for row in got[~split].itertuples(index=False):
        per_rank = [0 if k is None else raw[k].get(row.name, (0, 0))[1] for k in order]
        having = [k for k in order if k is not None and row.name in raw[k]]
        assert (row.ranks, row.count, row.total_ns, row.min_rank_ns, row.max_rank_ns) == (
            len(having), sum(raw[k][row.name][0] for k in having), sum(per_rank),
            min(per_rank), max(per_rank))
        assert row.mean_per_rank_ns == pytest.approx(sum(per_rank) / 7)
    assert got["share"].sum() == pytest.approx(1.0)
    key = list(zip(-got["total_ns"], got["name"], strict=True))
    assert key == sorted(key)  # largest total first, equal totals by name


def test_ranks_numbered_by_name_then_order(tmp_path):
    from traceviz.rankset.folder import assign_ranks

    files = [tmp_path / n for n in ("worker3.json", "worker1.json")]
    ranks, _ = assign_ranks(files, [{}, {}])
    assert [(r.rank, r.path.name) for r in ranks] == [(3, "worker3.json"), (1, "worker1.json")]
    ranks, how = assign_ranks(files, [{"kineto_distributedInfo": {"rank": 1}}, {}])
    assert [r.rank for r in ranks] == [0, 1] and "order" in how  # rank 1 claimed twice


def test_dataset_answers_as_the_folder(eight, tmp_path, capsys):
    ds = tmp_path / "ds"
    assert main(["import", str(eight), "-o", str(ds), "--workers", "2"]) == 0
    assert sorted(p.name for p in ds.iterdir()) == (  # and the hidden lock files
        [".traceviz-import.lock", ".traceviz-read.lock", "_traceviz.json"]
        + [f"rank={k}" for k in range(8)])
    capsys.readouterr()
    assert main(["analyze", str(eight), "--json", "--top", "50"]) == 0
    folder = json.loads(capsys.readouterr().out)
    assert main(["analyze", str(ds), "--json", "--top", "50", "--memory-limit", "256MB"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [r["rank"] for r in folder["ranks"]] == list(range(8))
    assert data["ranks"] == folder["ranks"] and data["stragglers"] == folder["stragglers"]
    key = lambda k: (k["name"], k["count"], k["total_ns"], k["ranks"],  # noqa: E731
                     k["min_rank_ns"], k["max_rank_ns"])
    # the same rows in the same order (equal totals by name), from SQL as from the folder
    assert list(map(key, data["top_kernels"])) == list(map(key, folder["top_kernels"]))
    for doc in (data, folder):  # integers from SQL as from pandas
        assert all(type(v) is int for k in doc["top_kernels"] for v in key(k)[1:])
    # rank k is a copy of source k mod 2 with shifted times and ids: same figures
    for r in folder["ranks"]:
        twin = folder["ranks"][r["rank"] % 2]
        assert (r["kernels"], r["comm_ns"]) == (twin["kernels"], twin["comm_ns"])
    assert main(["import", str(eight), "-o", str(ds)]) == 2  # no overwrite without --force
    # a partition the metadata does not list (left by hand) is not read
    shutil.copytree(ds / "rank=7", ds / "rank=99")
    capsys.readouterr()
    assert main(["analyze", str(ds), "--json", "--top", "50"]) == 0
    assert json.loads(capsys.readouterr().out)["top_kernels"] == data["top_kernels"]


def test_dataset_read_by_duckdb_polars_and_pyarrow(eight, tmp_path):
    duckdb = pytest.importorskip("duckdb")
    pl = pytest.importorskip("polars")
    import pyarrow.dataset as pads

    ds = tmp_path / "ds"
    meta = import_folder(eight, ds, workers=1)
    events = sum(r["events"] for r in meta["ranks"].values())
    glob = str(ds / "rank=*" / "*.parquet")
    con = duckdb.connect()
    rows = con.execute("SELECT rank, count(*) FROM read_parquet(?, hive_partitioning=true) "
                       "GROUP BY rank ORDER BY rank", [glob]).fetchall()
    assert [r for r, _ in rows] == list(range(8)) and sum(c for _, c in rows) == events
    assert pl.scan_parquet(glob, hive_partitioning=True).select(pl.len()).collect().item() \
        == events
    d = pads.dataset(ds, format="parquet", partitioning="hive",
                     exclude_invalid_files=True)
    assert d.count_rows() == events and "rank" in d.schema.names


def test_duckdb_under_a_memory_limit_smaller_than_the_data(tmp_path):
    """6 ranks of the 19k-kernel V100 trace: over twice the event data DuckDB may hold; the
    figures are computed under the limit and match the in-memory ones."""
    folder = tmp_path / "v100"
    make_ranks([shared(KINETO / "v100_19k_kernels.json.gz")], 6, folder)
    ds = tmp_path / "ds"
    import_folder(folder, ds, workers=2)
    size = sum(p.stat().st_size for p in ds.rglob("*.parquet"))
    from traceviz.trace import Trace

    one = Trace.load(next(ds.glob("rank=0/*.parquet")))
    in_memory = int(one.events.memory_usage(deep=True).sum()) * 6
    assert in_memory > 2 * (24 << 20)  # the events of all ranks exceed the limit below
    limited = analyze_dataset(ds, memory_limit="24MB")
    free = analyze_folder(folder)
    assert [r.to_dict() for r in limited.ranks] == [r.to_dict() for r in free.ranks]
    a = limited.top_kernels.set_index("name")[["count", "total_ns", "ranks"]]
    b = free.top_kernels.set_index("name")[["count", "total_ns", "ranks"]]
    assert a.sort_index().astype("int64").equals(b.sort_index().astype("int64"))
    assert size > 0


def test_rank_folder_errors(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert main(["analyze", str(tmp_path / "empty")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no trace files in this folder" in err
    assert rank_files(tmp_path / "empty") == []
    d = tmp_path / "bad"
    d.mkdir()
    (d / "rank-0.json").write_text('{"traceEvents": [')
    assert main(["analyze", str(d)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "rank-0.json" in err
    assert main(["analyze", str(d), "--plot", str(tmp_path / "p")]) == 2
    assert "--plot, --export and --perfetto take one trace" in capsys.readouterr().err
    assert main(["analyze", str(d), "--perfetto", str(tmp_path / "t.json")]) == 2
    assert "--plot, --export and --perfetto take one trace" in capsys.readouterr().err
    # an input that holds no trace is named as the fault, before an existing output
    (tmp_path / "out").mkdir()
    assert main(["import", str(tmp_path / "empty"), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "empty: no trace files in this folder" in err
    assert list((tmp_path / "out").iterdir()) == []


@pytest.mark.shared(*PAIR)
def test_import_leaves_nothing_half_written(pair_dir, tmp_path, capsys):
    """A failing rank: a new dataset folder is gone, an earlier dataset stays as it was;
    the rank folder itself is refused as the output; an unfinished dataset is named so."""
    ds = tmp_path / "ds"
    assert main(["import", str(pair_dir), "-o", str(ds)]) == 0
    before = {p.relative_to(ds): p.read_bytes() for p in ds.rglob("*") if p.is_file()}
    bad = tmp_path / "bad"
    bad.mkdir()
    shutil.copy(PAIR[0], bad / PAIR[0].name)
    (bad / "rank-1.json").write_text('{"traceEvents": [')
    capsys.readouterr()
    assert main(["import", str(bad), "-o", str(tmp_path / "new")]) == 2
    assert "rank-1.json" in capsys.readouterr().err and not (tmp_path / "new").exists()
    assert main(["import", str(bad), "-o", str(ds), "--force"]) == 2
    after = {p.relative_to(ds): p.read_bytes() for p in ds.rglob("*") if p.is_file()}
    assert after == before
    assert main(["import", str(pair_dir), "-o", str(pair_dir)]) == 2
    assert "is the rank folder itself" in capsys.readouterr().err
    (ds / "_traceviz.json").unlink()
    assert main(["analyze", str(ds)]) == 2
    assert "incomplete rank dataset" in capsys.readouterr().err


def _rendered(renderable) -> str:
    from rich.console import Console

    console = Console(width=160, record=True, color_system=None, force_terminal=False,
                      file=open(os.devnull, "w"))  # noqa: SIM115 (closed with the console)
    console.print(renderable)
    console.file.close()
    return console.export_text()


@pytest.mark.shared(*PAIR)
def test_many_ranks_list_the_slowest_ranks_and_the_widest_steps():
    """Over 32 ranks the terminal lists the --top slowest ranks and the --top steps of
    widest max/median, plus one line of fastest/median/slowest; --json keeps every rank.
    Ranks are the real rank 0's figures with known, distinct step times."""
    from traceviz.analyses.compare.ranks import summarize_ranks
    from traceviz.rankset.folder import folder_rank
    from traceviz.render.terminal.summary import ranks_render
    from traceviz.units import fmt_ns

    base = folder_rank(0, str(PAIR[0]))
    assert base.step_ns and base.steps == 2
    n, steps, top = 40, 36, 5
    slow = {k: 1 + (k * 7 % n) / 1000 for k in range(n)}  # distinct: 7 is prime to 40
    # step s: ranks within 0.4% of each other but one, rank 3s mod n, slower by a distinct
    # amount ((11 s mod 36) / 2 %: 11 is prime to 36), not growing with s
    times = {k: {s: int(base.step_ns * (1 + (k + s) % 5 / 1000)
                        * (1 + (11 * s % steps) / 200 if k == 3 * s % n else 1))
                 for s in range(steps)} for k in range(n)}
    ranks = [dataclasses.replace(base, rank=k, step_ns=base.step_ns * slow[k],
                                 step_times=times[k]) for k in range(n)]
    summary = summarize_ranks(ranks)
    text = _rendered(ranks_render(summary, top=top))
    lines = [x.rstrip() for x in text.splitlines()]
    want = sorted(range(n), key=lambda k: -slow[k])[:top]
    title = lines.index(f"Ranks ({n}): the {top} slowest by median step")
    rows = [int(x.split()[0]) for x in lines[title + 4:title + 4 + top]]
    assert rows == want and lines[title + 4 + top].strip() == ""
    spread = next(x for x in lines if x.startswith("median step over all"))
    fast = min(range(n), key=lambda k: slow[k])
    assert f"fastest {fmt_ns(base.step_ns * slow[fast])} (rank {fast})" in spread
    assert f"slowest {fmt_ns(base.step_ns * slow[want[0]])} (rank {want[0]})" in spread
    # the steps of widest spread, from the step times themselves
    per_step = {s: sorted(times[k][s] for k in range(n)) for s in range(steps)}
    spread_of = {s: v[-1] / ((v[n // 2 - 1] + v[n // 2]) / 2) for s, v in per_step.items()}
    widest = sorted(sorted(spread_of, key=lambda s: -spread_of[s])[:top])
    title = next(i for i, x in enumerate(lines) if x.startswith("Slowest rank per step: the"))
    assert lines[title] == (f"Slowest rank per step: the {top} of {steps} steps with the "
                            "widest max/median")
    got = [[float(c) if "." in c else int(c) for c in x.split()[:3]]
           for x in lines[title + 4:title + 4 + top]]
    assert [g[0] for g in got] == widest and lines[title + 4 + top].strip() == ""
    for s, count, slowest in got:
        assert count == n and slowest == 3 * s % n and times[slowest][s] == per_step[s][-1]
    # 32 ranks (steps) or fewer: every rank (step), in order
    few = [dataclasses.replace(r, step_times={s: t for s, t in r.step_times.items() if s < 32})
           for r in ranks[:8]]
    lines = [x.rstrip() for x in _rendered(ranks_render(summarize_ranks(few), top=3)).splitlines()]
    title = lines.index("Ranks (8)")
    assert [int(x.split()[0]) for x in lines[title + 4:title + 12]] == list(range(8))
    assert not any(x.startswith("median step over all") for x in lines)
    title = lines.index("Slowest rank per step (slow, not late: see the arrivals)")
    assert [int(x.split()[0]) for x in lines[title + 4:title + 36]] == list(range(32))


@pytest.mark.parametrize(("text", "limit"), [("2GB", "2GB"), ("512mib", "512MiB"),
                                             (" 1.5 GiB ", "1.5GiB"), ("64kb", "64KB"),
                                             ("1024TiB", "1024TiB"), ("1b", "1B")])
def test_memory_limit_spellings(text, limit):
    """Each spelling traceviz passes on is one DuckDB takes."""
    import duckdb

    from traceviz.rankset.dataset import parse_memory_limit

    assert parse_memory_limit(text) == limit
    duckdb.connect().execute(f"SET memory_limit = '{limit}'")


@pytest.mark.parametrize("text", ["foo", "1GB'", "0", "0GB", "100", "-5GB", "2 GBs", "",
                                  "\uff12GB", "1.GB", "0.4B", "1025TiB", "2G"])
def test_a_bad_memory_limit_is_a_usage_error(eight, tmp_path, capsys, text):
    """DuckDB words these as SQL parser errors (an internal error before): one line naming
    the option and exit 2, and a TraceVizError from the notebook API."""
    import traceviz

    ds = tmp_path / "ds"
    assert main(["import", str(eight), "-o", str(ds)]) == 0
    capsys.readouterr()
    assert main(["analyze", str(ds), f"--memory-limit={text}"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("traceviz: error: --memory-limit:"), err
    assert "is not a memory size" in err[0]
    with pytest.raises(traceviz.TraceVizError, match="is not a memory size"):
        traceviz.ranks(ds, memory_limit=text)


def test_a_memory_limit_too_small_is_named_not_blamed_on_the_dataset(eight, tmp_path, capsys):
    """DuckDB running out of memory under the limit says so and names --memory-limit (it
    called the partition unreadable and asked to import again); the dataset is intact."""
    ds = tmp_path / "ds"
    assert main(["import", str(eight), "-o", str(ds)]) == 0
    capsys.readouterr()
    assert main(["analyze", str(ds), "--memory-limit", "1KB", "--json"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert "ran out of memory under the 1KB limit" in err and "--memory-limit" in err
    import traceviz

    with pytest.raises(traceviz.TraceVizError, match="memory_limit= in Python"):
        traceviz.ranks(ds, memory_limit="1KB")
    assert "import the rank folder again" not in err
    assert main(["analyze", str(ds), "--memory-limit", "256MB", "--json"]) == 0


def test_a_dataset_without_duckdb_installed_is_one_line(eight, tmp_path):
    """`analyze DATASET` needs the .[dist] extra; without DuckDB it says so (it was an
    internal error, exit 3), and the rank folder itself still needs no DuckDB."""
    ds = tmp_path / "ds"
    assert main(["import", str(eight), "-o", str(ds)]) == 0
    code = ("import sys\n"
            "sys.modules['duckdb'] = None  # any import of it now fails\n"
            "from traceviz.cli import main\n"
            "sys.exit(main(['analyze', sys.argv[1], '--json']))\n")
    r = subprocess.run([sys.executable, "-c", code, str(ds)], capture_output=True, text=True)
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and "needs DuckDB" in r.stderr and ".[dist]" in r.stderr
    r = subprocess.run([sys.executable, "-c", code, str(eight)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert len(json.loads(r.stdout)["ranks"]) == 8


@pytest.mark.parametrize("width", [40, 60, 80, 100, 120, 160])
def test_rank_tables_fit_the_width_without_cutting_a_figure(eight, capsys, width):
    """Narrow terminals: every line fits, every figure shown is whole (at 80 columns rich
    cropped the table mid-value, `14.` for 14.9%), and what is left out is named."""
    from traceviz.table.names import short_name
    from traceviz.units import fmt_ns, fmt_pct

    assert main(["analyze", str(eight), "--json", "--top", "5"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert main(["analyze", str(eight), "--width", str(width), "--top", "5"]) == 0
    lines = [x.rstrip() for x in capsys.readouterr().out.splitlines()]
    assert max(len(x) for x in lines) <= width
    title = lines.index("Ranks (8)")
    header_rows = 1 if not lines[title + 3].strip("─ ") else 2  # the rule under the header
    rows = lines[title + 3 + header_rows:title + 11 + header_rows]
    text = " ".join(lines)
    left = text[text.index("left out at"):].split(" (")[0] if "left out at" in text else ""
    tables = dict(x.split(": ") for x in left.split(": ", 1)[1].split("; ")) if left else {}
    assert set(tables) <= {"ranks", "stragglers", "arrivals", "top kernels"}
    named = tables.get("ranks", "").split(", ")
    assert left.startswith(f"left out at {width} columns: ") or not left
    assert bool(left) == (width <= 80)  # 100 columns hold every column of these ranks
    for line, r in zip(rows, data["ranks"], strict=True):
        per = r["steps"]
        # each column's figure is in the row, whole, unless the note names the column
        cells = {"rank": str(r["rank"]), "step (median)": fmt_ns(r["step_ns"]),
                 "busy": fmt_ns(r["busy_ns"] / per),
                 "launch-bound": fmt_pct(r["launch_bound_fraction"]),
                 "comm": fmt_ns(r["comm_ns"] / per),
                 "comm overlapped": fmt_pct(r["comm_overlap_fraction"]),
                 "kernels": f"{r['kernels']['count'] / per:,.0f}",
                 "top kernel": short_name(r["top_kernel"], 12)[:11]}
        assert line.split()[0] == str(r["rank"])
        for col, cell in cells.items():
            assert (f" {cell}" in f" {line}") != (col in named), (col, line, named)
    assert "step (median)" not in named and "comm overlapped" not in named
    if not left:
        assert all(fmt_ns(k["max_rank_ns"]) in text for k in data["top_kernels"])


@pytest.mark.shared(*PAIR)
def test_xplane_files_beside_other_traces_make_a_rank_folder(tmp_path, capsys):
    """A folder of only .xplane.pb host files is one profile run (one trace, its hosts
    merged); with traces of other formats beside them it is a folder of ranks: read as a
    profile run, the other files were left out without a word."""
    import traceviz
    from traceviz.files.folders import is_rank_folder

    xplane = shared(KINETO.parent / "xplane" / "tf24_bert_amp_gpu.xplane.pb.gz")
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(xplane, run / "host0.xplane.pb.gz")
    assert not is_rank_folder(run)
    assert traceviz.load(run).meta["source_format"] == "xplane"
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    shutil.copy(xplane, mixed / "rank-0.xplane.pb.gz")
    shutil.copy(PAIR[1], mixed / "rank-1.json.gz")
    assert is_rank_folder(mixed)
    with pytest.raises(traceviz.TraceVizError, match="a folder of 2 rank traces"):
        traceviz.load(mixed)
    assert main(["analyze", str(mixed), "--json"]) == 0
    ranks = json.loads(capsys.readouterr().out)["ranks"]
    one = traceviz.load(xplane).summary()
    assert [r["rank"] for r in ranks] == [0, 1]
    assert ranks[0]["kernels"]["count"] == one["kernels"]["count"] == 1330
    raw = [e for e in raw_events(PAIR[1]) if e.get("cat") == "kernel"]
    assert ranks[1]["kernels"] == {"count": len(raw), "total_ns": sum(ns(e["dur"]) for e in raw)}


@pytest.mark.shared(*PAIR)
def test_xplane_run_folders_and_log_directories_stay_one_trace(tmp_path):
    """A profile run's companions (TF's trace viewer JSON, JAX's Perfetto trace, memory
    profiles) do not make it a rank folder, and a log directory with a stray file at its top
    stays a log directory; a PyTorch trace beside an XSpace file is a rank."""
    from traceviz.files.folders import is_rank_folder

    xplane = shared(KINETO.parent / "xplane" / "tf24_bert_amp_gpu.xplane.pb.gz")
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(xplane, run / "host.xplane.pb.gz")
    for companion in ("perfetto_trace.json.gz", "host.trace.json.gz",
                      "host.memory_profile.json.gz"):
        (run / companion).write_bytes(gzip.compress(b"{}"))
    assert not is_rank_folder(run)
    logdir = tmp_path / "logdir"
    (logdir / "plugins" / "profile" / "2026_11_24").mkdir(parents=True)
    shutil.copy(xplane, logdir / "plugins" / "profile" / "2026_11_24" / "host.xplane.pb.gz")
    (logdir / "config.json").write_text("{}")
    assert not is_rank_folder(logdir)
    shutil.copy(PAIR[0], run / "worker0.pt.trace.json.gz")
    assert is_rank_folder(run)


def test_fitted_table_edge_cases():
    """No rows, short names, and a width nothing fits: the narrowest form, names at their
    minimum; the columns that leave are named in their drop order."""
    from traceviz.render.terminal.fit import NAME_MIN, Col, fitted_table
    from traceviz.render.terminal.summary import _KERNEL_COLS

    def width(table) -> int:
        return max(len(x.rstrip()) for x in _rendered(table).splitlines())

    table, left = fitted_table("t", _KERNEL_COLS, [], 30)
    assert table.row_count == 0 and width(table) <= 30
    row = ["k" * 40, "gemm", "8", "1,024", "1.000 s", "1.000 ms", "2.000 ms", "61.6%"]
    for w in (200, 100, 60, 44):
        table, left = fitted_table("t", _KERNEL_COLS, [row], w)
        assert width(table) <= w, w
        text = _rendered(table)
        assert all(cell in text for cell, c in zip(row[1:], _KERNEL_COLS[1:], strict=True)
                   if c.one_line not in left)
        order = sorted((c for c in _KERNEL_COLS if c.drop), key=lambda c: c.drop)
        assert left == [c.one_line for c in _KERNEL_COLS if c in order[:len(left)]]
    table, left = fitted_table("t", _KERNEL_COLS, [row], 10)  # below name + total
    assert set(left) == {c.one_line for c in _KERNEL_COLS if c.drop}
    assert "k" * ((NAME_MIN - 1) // 3) + "…" + "k" * (NAME_MIN - 1 - (NAME_MIN - 1) // 3) \
        in _rendered(table)  # a plain name, cut in the middle to the least
    short = [Col("name", "left", name=True), Col("n")]
    table, left = fitted_table("t", short, [["ab", "1"]], 40)
    assert left == [] and "ab" in _rendered(table)
