"""Text a trace controls is escaped for where it goes, hostile input costs bounded work,
and wrong values are noted or refused, never shown as figures (the corpus,
``tests/corpus/hostile.py``, holds the exit codes and error lines; these tests read
what was written)."""

from __future__ import annotations

import gzip
import json
import sqlite3
import zlib

import pyarrow.parquet as pq
import pytest

from tests.conftest import SHARED_TRACES, shared, shared_parquet
from traceviz.cli import main
from traceviz.parsers import jsonstream
from traceviz.render.escape import file_name, markdown, visible

HOSTILE = "<img src=x onerror=alert(1)>"
TITLE = "\x1b]0;owned\x07"
CLEAR = "\x1b[2J"


def _parquet_with(tmp_path, name: str, change) -> str:
    t = pq.read_table(shared_parquet("kineto", "mi250_rocm_train.json.gz"))
    meta = json.loads(t.schema.metadata[b"traceviz"])
    change(meta)
    path = tmp_path / name
    pq.write_table(t.replace_schema_metadata({b"traceviz": json.dumps(meta).encode()}), path)
    return str(path)


def test_markdown_report_renders_a_hostile_device_name_inert(tmp_path, capsys):
    markdown_lib = pytest.importorskip("markdown")
    src = _parquet_with(tmp_path, "t.parquet", lambda m: m.update(devices={"0": HOSTILE}))
    assert main(["report", src, "-o", str(tmp_path / "r.md")]) == 0
    text = (tmp_path / "r.md").read_text()
    assert HOSTILE not in text
    html = markdown_lib.markdown(text, extensions=["tables"])
    assert "<img src=x" not in html and "onerror=alert(1)&gt;" in html
    # shown as the text it is, in its table cell
    assert "&lt;img src=x onerror=alert(1)&gt;</td>" in html


def test_markdown_escape_keeps_the_text():
    markdown_lib = pytest.importorskip("markdown")
    for raw in ("a|b", "[x](javascript:alert(1))", "*bold* _it_ `code`", "# h", "a\\b"):
        html = markdown_lib.markdown(f"| c |\n|---|\n| {markdown(raw)} |",
                                     extensions=["tables"])
        cell = html.split("<td>")[1].split("</td>")[0]
        assert cell == raw.replace("&", "&amp;"), (raw, cell)


def _kineto_named(tmp_path, name: str) -> str:
    doc = {"traceEvents": [
        {"ph": "X", "cat": "kernel", "name": name, "ts": 1, "dur": 2, "pid": 0, "tid": 7,
         "args": {"device": 0, "stream": 7}},
        {"ph": "X", "cat": "kernel", "name": "other", "ts": 5, "dur": 3, "pid": 0,
         "tid": 7, "args": {"device": 0, "stream": 7}}]}
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    return str(path)


@pytest.mark.parametrize("width", ["120", "40"])
def test_terminal_shows_control_characters_and_markup_as_text(tmp_path, capsys, width):
    name = f"k{TITLE}[bold]b[/bold]{CLEAR}" + "x" * 40
    assert main(["analyze", _kineto_named(tmp_path, name), "--width", width]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    if width == "120":  # its beginning as cut; wide, the whole name, as text
        assert "k\\x1b]0;owned" in out
        assert main(["analyze", _kineto_named(tmp_path, name), "--width", "200", "--wide"]) == 0
        assert "k\\x1b]0;owned\\x07[bold]b[/bold]\\x1b[2J" in capsys.readouterr().out


def test_a_line_break_in_a_name_starts_no_row(tmp_path, capsys):
    """A kernel named with a line break could print a row of its own making: it is shown
    as ``\\x0a`` in the one row of that kernel."""
    assert main(["analyze", _kineto_named(tmp_path, "k\nfake_kernel 99.9%"),
                 "--width", "160", "--wide"]) == 0
    out = capsys.readouterr().out
    assert "k\\x0afake_kernel 99.9%" in out
    assert not any(ln.strip().startswith("fake_kernel") for ln in out.splitlines())


def test_error_line_shows_control_characters(tmp_path, capsys):
    assert main(["analyze", str(tmp_path / f"a{CLEAR}.json")]) == 2
    err = capsys.readouterr().err
    assert "\x1b" not in err and "a\\x1b[2J.json: no such file" in err


def test_visible_escapes_every_control_character():
    text = "".join(map(chr, range(0x20))) + "\x7f\x9b\u202e"
    shown = visible(text)
    assert shown.isprintable() and shown.count("\\x") == 34 and "\\u202e" in shown


def test_labels_give_distinct_chart_files(tmp_path, capsys):
    a = _parquet_with(tmp_path, "a b.parquet", lambda m: None)
    b = _parquet_with(tmp_path, "a_b.parquet", lambda m: None)
    assert main(["report", a, b, "-o", str(tmp_path / "r.md")]) == 0
    pies = sorted(p.name for p in (tmp_path / "r_files").glob("pie_*.png"))
    assert len(pies) == 2 and pies[0] != pies[1]
    assert file_name("a b") != file_name("a_b") == "a_b"


def test_array_splitter_searches_each_byte_about_once(monkeypatch):
    """Whitespace after an element, read in 64 KB blocks: the separator search covers the
    input a bounded number of times (it searched the whole growing buffer after every
    read: 16 MB in 64 KB blocks was 2,000 times the input)."""
    scanned = []
    real = jsonstream._SEP

    class Counting:
        def finditer(self, buf, pos=0):
            scanned.append(len(buf) - pos)
            return real.finditer(buf, pos)

        def search(self, *a):
            return real.search(*a)

    monkeypatch.setattr(jsonstream, "_SEP", Counting())
    body = b'{"traceEvents": [{"a": 1}' + b" " * (16 << 20) + b"]}"
    import io

    chunks = jsonstream.ArrayChunks(io.BytesIO(body), b"traceEvents", chunk_bytes=64 << 10)
    pieces = list(chunks)
    assert b"".join(p.data for p in pieces).strip() == b'{"a": 1}'
    assert sum(scanned) < 3 * len(body)


def test_gzip_bomb_is_refused_early_and_the_limit_can_be_raised(tmp_path, capsys,
                                                                 monkeypatch):
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    data = comp.compress(b'{"traceEvents": [') + b"".join(
        comp.compress(b" " * (1 << 20)) for _ in range(300)) + comp.compress(b"]}") \
        + comp.flush()
    path = tmp_path / "bomb.json.gz"
    path.write_bytes(data)
    assert main(["analyze", str(path)]) == 2
    err = capsys.readouterr().err
    assert "inflates to more than 256 MB" in err and "TRACEVIZ_MAX_INFLATE_RATIO" in err
    monkeypatch.setenv("TRACEVIZ_MAX_INFLATE_RATIO", "0")  # no limit: read to its end
    assert main(["analyze", str(path)]) == 2
    assert "no profiler events" in capsys.readouterr().err
    monkeypatch.setenv("TRACEVIZ_MAX_INFLATE_RATIO", "lots")
    assert main(["analyze", str(path)]) == 2
    assert "TRACEVIZ_MAX_INFLATE_RATIO='lots': not a number" in capsys.readouterr().err


def test_xspace_past_the_memory_limit_is_refused(capsys, monkeypatch):
    path = shared(SHARED_TRACES / "xplane" / "tf24_bert_amp_gpu.xplane.pb.gz")
    inflated = len(gzip.decompress(path.read_bytes()))
    monkeypatch.setenv("TRACEVIZ_MAX_XSPACE_MB", str(inflated / (1 << 20) * 0.9))
    assert main(["analyze", str(path)]) == 2
    assert "an XSpace of more than" in capsys.readouterr().err
    monkeypatch.setenv("TRACEVIZ_MAX_XSPACE_MB", str(inflated / (1 << 20) * 1.1))
    assert main(["analyze", str(path), "--json"]) == 0


def test_element_limit(tmp_path, capsys, monkeypatch):
    big = {"ph": "X", "cat": "cpu_op", "name": "n", "ts": 1, "dur": 2, "pid": 1, "tid": 1,
           "args": {"blob": "x" * (3 << 20)}}
    data = json.dumps({"traceEvents": [big, big, big]}).encode()
    (tmp_path / "t.json").write_bytes(data)  # cut into byte ranges
    (tmp_path / "t.json.gz").write_bytes(gzip.compress(data))  # streamed
    monkeypatch.setenv("TRACEVIZ_IMPORT_WORKERS", "1")
    for name in ("t.json", "t.json.gz"):
        monkeypatch.setenv("TRACEVIZ_MAX_ELEMENT_MB", "1")
        assert main(["analyze", str(tmp_path / name)]) == 2, name
        assert "one event array element holds more than 1 MB" in capsys.readouterr().err
        monkeypatch.setenv("TRACEVIZ_MAX_ELEMENT_MB", "8")
        assert main(["analyze", str(tmp_path / name), "--json"]) == 0, name
        capsys.readouterr()


def test_nsys_rows_without_times_are_counted(tmp_path, capsys):
    path = tmp_path / "r.sqlite"
    path.write_bytes(shared(SHARED_TRACES / "nsys" / "rtx3080_tiny.sqlite").read_bytes())
    db = sqlite3.connect(path)
    db.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = start - 5")
    kernels = db.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    db.commit()
    db.close()
    assert main(["analyze", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert f"{kernels} rows dropped: no start or end time (NULL), or an end before the " \
           "start" in out["notes"]


def test_kineto_text_durations_and_null_names_are_counted(tmp_path, capsys):
    with gzip.open(shared(SHARED_TRACES / "kineto" / "mi250_rocm_train.json.gz")) as f:
        doc = json.load(f)
    kernels = [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]
    for e in kernels[:3]:
        e["dur"] = str(e["dur"])
    for e in kernels[3:5]:
        e["name"] = None
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    assert main(["analyze", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert "3 events dropped: a duration that is not a number (text, null, true...)" \
        in out["notes"]
    assert "2 events dropped: no name (null)" in out["notes"]
    assert out["kernels"]["count"] == len(kernels) - 5


def test_json_output_has_no_nan(tmp_path, capsys):
    import shutil

    from tests.conftest import ROOT

    run = tmp_path / "run"
    shutil.copytree(ROOT / "sample_traces" / "cpu" / "cell_torch", run,
                    ignore=shutil.ignore_patterns("trace.parquet"))
    bench = json.loads((run / "bench.json").read_text())
    bench["loss_per_batch"] = [float("nan")] * len(bench["batch_times_s"])
    (run / "bench.json").write_text(json.dumps(bench))
    assert main(["analyze", str(run), "--json"]) == 0
    text = capsys.readouterr().out
    json.loads(text, parse_constant=lambda c: pytest.fail(f"{c} in --json"))
