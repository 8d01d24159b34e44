"""``report`` on every trace of ``../shared/traces``: report.html and report.md each
written (exit 0, one ``wrote`` line), or a file no reader takes refused in one line.

The content checked: the HTML's kernel table holds every kernel record of the raw file
(its counts summed against the records read by ``tests/diagnosis_events``, no traceviz
code), and the Markdown's busy and span per step are the HTML's. Time: the Markdown
report reads the trace the HTML report loaded (``load_with_progress`` remembered per
path), and a ``.qdrep`` is exported by nsys once for both the raw reader and traceviz;
the largest are ``slow`` (CI runs them: it deselects nothing). Measured on 2 cores shared
with four other test suites: 37 min for the 77 cases, 23 of them the 13 slow ones.
"""

from __future__ import annotations

import html
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import SHARED_TRACES, missing, shared, shared_traces
from tests.diagnosis_paths import FOREIGN, FOREIGN_FILES, UNREADABLE, cli

# every file of ../shared/traces that is a trace, and the two rank folders (a job each)
TRACES = [*shared_traces(), *(FOREIGN / f / n for f, names in FOREIGN_FILES.items()
                              for n in names)]
JOBS = [FOREIGN / "kineto" / "h3_param_dlrm_8rank", FOREIGN / "kineto" / "rtx4090_llama_tp2"]
# files of ../shared/traces that no reader takes, each refused in one line (exit 2) with
# these words: a corrupt XSpace, reports of an nsys newer than the installed one (they read
# where a newer nsys is installed), TensorBoard's trace-viewer JSON beside the XSpaces
KERAS = FOREIGN / "xplane" / "keras_semi_supervised_cv"
REFUSED = {
    UNREADABLE["xprof_tpu_inference_2_CORRUPTED"]: "not a readable XSpace protobuf",
    UNREADABLE["cs336_myrun_nsys2026"]: "Version number is invalid",
    FOREIGN / "nsys" / "llama_demo.nsys-rep": "Version number is invalid",
    FOREIGN / "nsys" / "llama_real_inference_simulation.nsys-rep": "Version number is invalid",
    **{KERAS / f"{n}.trace.json.gz": "the trace holds no profiler events"
       for n in ("alexnet_s1", "alexnet_s3tune", "resnet_s5")},
}
# over 45 s for both reports and the raw reading, measured on 2 cores shared with four
# other test suites (most others take 10-30 s there): the reports exported by nsys, the
# largest kernel counts
SLOW = {"abacus_titanrtx_report1.qdrep", "flux_gtx1650_report20.qdrep",
        "tensoriterator_report1.qdrep", "darknet_xavier_report1.qdrep",
        "llama_real_inference_simulation.sqlite", "v100_19k_kernels.json.gz",
        "h7_tracelens_h100_owlv2.json.gz", "v100_diff_test.json.gz",
        "tf24_bert_amp_gpu.xplane.pb.gz", "a100_80gb_queue.json.gz",
        "h2_param_2080ti_resnet.json.gz", "h1_kineto_v100_resnet50.pt.trace.json.gz",
        "a100_diff_control.json.gz"}
# XSpace copies the raw reader counts as kernels (no memcpy stat on them): named so
XSPACE_COPY = re.compile(r"^(Copy(DeviceTo|HostTo)\w*|Memcpy\w*|Memset\w*)$")
LABEL = "run"


def _param(path: Path):
    return pytest.param(path, id=path.name, marks=[pytest.mark.slow] * (path.name in SLOW))


@pytest.fixture
def remembered(monkeypatch):
    """``load_with_progress`` once per path: the second report reads the Trace the first
    loaded (the figures are the same; the parse is not repeated)."""
    from traceviz.cli import base

    loaded: dict[Path, object] = {}
    real = base.load_with_progress

    def load(path, stack, rows=None):
        if path not in loaded:
            loaded[path] = real(path, stack, rows)
        return loaded[path]

    monkeypatch.setattr(base, "load_with_progress", load)
    return loaded


def _reports(path: Path, tmp_path: Path) -> tuple[str, str]:
    """report.html, then report.md, of ``path`` (labelled ``LABEL``): their text."""
    out = {}
    for name in ("report.html", "report.md"):
        target = tmp_path / name
        rc, _, err = cli("report", str(path), "--label", LABEL, "-o", str(target))
        assert "internal error" not in err and "Traceback" not in err, err
        # rich wraps a long line at 80 columns, inside a long path too: compared unspaced
        said = "".join(err.split())
        want = "".join(f"wrote {target}".split())
        assert rc == 0 and re.fullmatch(rf"{re.escape(want)}\(\d+sections\)", said), err
        out[name] = target.read_text()
    return out["report.html"], out["report.md"]


def _bokeh(page: str) -> tuple[list[str], dict]:
    """The texts of the HTML page's Bokeh documents (unescaped), and the columns of its
    first kernel table."""
    texts: list[str] = []
    table: dict = {}
    for m in re.finditer(r'<script type="application/json" id="[^"]*">(.*?)</script>', page,
                         re.S):
        stack = [json.loads(m.group(1))]
        while stack:
            x = stack.pop()
            if isinstance(x, str):
                texts.append(html.unescape(x))
            elif isinstance(x, dict):
                stack.extend(x.values())
            elif isinstance(x, list):
                pairs = x and all(isinstance(p, list) and len(p) == 2 and isinstance(p[0], str)
                                  for p in x)
                if pairs and not table and {"full", "count"} <= {p[0] for p in x}:
                    table = dict(x)
                stack.extend(x)
    return texts, table


def _raw_kernels(path: Path) -> int:
    """Kernel records in the raw file, read without traceviz."""
    from tests.diagnosis_events import read

    if ".xplane.pb" in path.name:
        try:
            from tensorflow.tsl.profiler.protobuf import xplane_pb2  # noqa: F401
        except ImportError as e:
            missing(f"TensorFlow's XSpace schema is not importable ({e})")
    ev = read(path)
    kernel = ev.dev_kernel
    if ".xplane.pb" in path.name:
        kernel = kernel & ~np.array([bool(XSPACE_COPY.match(str(n))) for n in ev.dev_name],
                                    dtype=bool)
    return int(kernel.sum())


def _md_row(md: str, title: str) -> dict[str, str]:
    part = md.split(f"## {title}", 1)[1].split("\n## ", 1)[0]
    lines = [x for x in part.splitlines() if x.startswith("|")]
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:]]
    row, = (r for r in rows if r[0] == LABEL)
    return dict(zip(head, row, strict=True))


@pytest.mark.parametrize("path", [_param(p) for p in TRACES])
def test_report_on_every_shared_trace(path, tmp_path, monkeypatch, remembered):
    shared(path)
    if path.suffix in (".qdrep", ".nsys-rep"):
        if not shutil.which("nsys"):
            missing("nsys is not on PATH: a .qdrep is read through `nsys export`")
        from tests.diagnosis_formats import exported
        from traceviz.parsers.nsys import nsys_reader

        done = exported(path)  # nsys' export, once: the raw reader's and traceviz's
        monkeypatch.setattr(nsys_reader, "export_sqlite",
                            lambda report, out: Path(shutil.copyfile(done, out)))
    page, md = _reports(path, tmp_path)
    texts, table = _bokeh(page)
    heading = [m for t in texts if (m := re.search(
        r"<h2>run</h2><p>busy (.+?) of (.+?) per profiled step", t))]
    assert len(heading) == 1, "no run heading in the HTML"
    assert sum(table["count"]) == _raw_kernels(path)
    bound = _md_row(md, "What bounds the step")
    assert (bound["busy/step"], bound["span/step"]) == heading[0].groups()
    env = _md_row(md, "Environment")
    assert env["source"].replace("\\", "") in {"kineto", "nsys-sqlite", "nsys-rep", "xplane"}


def _raw_rank(path: Path) -> tuple[int, list[int]]:
    """A rank file's ``distributedInfo.rank`` and its ProfilerStep durations (ns)."""
    import gzip

    with (gzip.open(path) if path.suffix == ".gz" else path.open("rb")) as f:
        doc = json.load(f)
    steps = [round(float(e["dur"]) * 1000) for e in doc["traceEvents"]
             if str(e.get("name", "")).startswith("ProfilerStep#")]
    return int(doc["distributedInfo"]["rank"]), steps


@pytest.mark.parametrize("folder", [_param(p) for p in JOBS])
def test_report_on_the_shared_rank_folders(folder, tmp_path):
    """A folder of rank traces is a job: a row per rank (numbered by the file's
    distributedInfo.rank), and the slowest rank's run; where each rank holds one step,
    the slowest is the longest step, its span that step's duration."""
    from traceviz.render.escape import markdown
    from traceviz.units import fmt_ns

    files = sorted(shared(folder).iterdir())
    page, md = _reports(folder, tmp_path)
    part = md.split(f"## {LABEL}: the ranks", 1)[1].split("\n## ", 1)[0]
    assert f"{len(files)} ranks." in part
    rows = {r[0].split()[0]: r for r in (
        [c.strip() for c in line.strip("|").split("|")] for line in part.splitlines()
        if line.startswith("| ") and line[2].isdigit())}
    raw = {f: _raw_rank(f) for f in files}
    assert {rows[str(rank)][1] for rank, _ in raw.values()} == {markdown(f.name) for f in files}
    for f, (rank, _) in raw.items():
        assert rows[str(rank)][1] == markdown(f.name)
    if all(len(steps) == 1 for _, steps in raw.values()):
        _, (rank, steps) = max(raw.items(), key=lambda kv: kv[1][1][0])
        assert rows[str(rank)][0] == f"{rank} (slowest)" and rows[str(rank)][2] == \
            fmt_ns(steps[0])
    assert f"&lt;h2&gt;{LABEL}: rank" in page or any(
        f"<h2>{LABEL}: rank" in t for t in _bokeh(page)[0])


@pytest.mark.parametrize("path", list(REFUSED), ids=lambda p: p.name)
def test_report_refuses_what_no_reader_takes(path, tmp_path):
    shared(path)
    for name in ("report.html", "report.md"):
        rc, _, err = cli("report", str(path), "-o", str(tmp_path / name))
        if rc == 0 and path.suffix == ".nsys-rep":  # a newer nsys exports it
            continue
        assert rc == 2 and len(err.splitlines()) == 1 and REFUSED[path] in err, err
        assert not (tmp_path / name).exists()


def test_every_shared_trace_is_reported():
    """A file added to ../shared/traces joins the tests above (or is named as refused)."""
    root = shared(SHARED_TRACES)
    files = {p for p in root.rglob("*") if p.is_file() and p.name != "README.md"}
    assert files == set(TRACES) | set(REFUSED)
