"""``advise``, ``whatif`` and ``report`` on a folder of rank traces (and its dataset): the
two LLaMA ranks (tensor parallel inference, two RTX 4090s) and the eight DLRM ranks (V100,
NCCL). The expected figures (the rank that sets the pace, the rank that launches last,
the waits, the collectives) are recomputed here from the raw JSON with plain Python."""

from __future__ import annotations

import gzip
import json
import re
from decimal import Decimal
from pathlib import Path

from tests.conftest import SHARED_TRACES, shared
from traceviz import load
from traceviz.analyses.advice.advising import Context
from traceviz.cli import main

KINETO = SHARED_TRACES / "foreign" / "kineto"
LLAMA = KINETO / "rtx4090_llama_tp2"
DLRM = KINETO / "h3_param_dlrm_8rank"


def _ns(v) -> int:
    return int((Decimal(str(v)) * 1000).to_integral_value())


def _raw(path: Path) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        return [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]


def _rank(path: Path) -> int:
    return int(re.search(r"(?:layers|worker)(\d)", path.name)[1])


def _collectives(path: Path) -> list[tuple[str, int, int]]:
    """(kernel name's kind, launch, start) of every NCCL kernel in start order, in ns on
    the traces' shared clock (the launch: the runtime call of its correlation id)."""
    ev = _raw(path)
    launch = {e["args"]["correlation"]: _ns(e["ts"]) for e in ev
              if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})}
    nccl = sorted((e for e in ev if e.get("cat") == "kernel" and e["name"].startswith("nccl")),
                  key=lambda e: _ns(e["ts"]))
    return [(re.match(r"nccl(?:Dev)?Kernel_([A-Za-z]+)_", e["name"])[1],
             launch[e["args"]["correlation"]], _ns(e["ts"])) for e in nccl]


def _arrivals(folder: Path) -> tuple[int, dict[int, int], dict[int, int], int]:
    """The rank that launches last most often, each rank's count of last launches, each
    rank's wait (latest start less its own, summed), and the collectives matched."""
    ranks = {_rank(p): _collectives(p) for p in folder.iterdir()}
    matched: dict[tuple[str, int], dict[int, tuple[int, int]]] = {}
    for r, rows in ranks.items():
        seen: dict[str, int] = {}
        for kind, launch, start in rows:
            k = seen[kind] = seen.get(kind, -1) + 1
            matched.setdefault((kind, k), {})[r] = (launch, start)
    last = [max(sorted(m), key=lambda r: m[r][0]) for m in matched.values()]
    counts = {r: last.count(r) for r in ranks}
    waits = {r: sum(max(x[1] for x in m.values()) - m[r][1] for m in matched.values())
             for r in ranks}
    return max(counts, key=lambda r: counts[r]), counts, waits, len(matched)


def _json(capsys, *argv: str) -> dict:
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def test_advise_on_the_llama_ranks(capsys):
    """Rank 1 has the longer trace (no steps: the span) and sets the pace; it launches
    last into all 19 collectives; rank 0 waits for it; the verdict and the run are rank
    1's, and the job's finding follows its first."""
    straggler, counts, waits, n = _arrivals(shared(LLAMA))
    assert (straggler, counts[1], n) == (1, 19, 19)
    extent = {}
    for p in LLAMA.iterdir():
        dev = [e for e in _raw(p) if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
        extent[_rank(p)] = max(_ns(e["ts"]) + _ns(e["dur"]) for e in dev) - \
            min(_ns(e["ts"]) for e in dev)
    out = _json(capsys, "advise", str(LLAMA), "--json")
    assert out["slowest_rank"] == max(extent, key=lambda r: extent[r]) == 1
    assert [(r["rank"], r["bound"], r["mode"], r["parallel"]) for r in out["ranks"]] == \
        [(0, "communication", "inference", ["tensor"]),
         (1, "communication", "inference", ["tensor"])]
    assert out["run"]["mode"] == "inference" and out["run"]["parallel"] == ["tensor"]
    assert out["bound"]["by"] == "communication"
    a = out["arrivals"]
    assert (a["straggler"], a["collectives"]) == (1, 19)
    assert {r["rank"]: r["wait_ns"] for r in a["per_rank"]} == waits
    assert [(f["from"], f["rule"]) for f in out["findings"]][:2] == \
        [("rank 1", "communication"), ("job", "straggler")]
    job = out["findings"][1]
    assert job["title"] == "Rank 1 launches last into all 19 collectives"
    assert job["rank"] is None and out["findings"][0]["rank"] == 1
    # the last all-gather is as long on both ranks: its time is its own, not a wait
    assert any(e.startswith("the longest collective, all_gather 10 of 10")
               and "not a wait" in e for e in job["evidence"])
    comm = out["findings"][0]
    assert "bucket_cap_mb" not in comm["action"] and "tensor" in comm["action"]

    assert main(["advise", str(LLAMA), "--width", "100"]) == 0
    text = capsys.readouterr().out
    assert "[job] Rank 1 launches last into all 19 collectives" in text
    assert "The run (rank 1): inference" in text


def test_advise_on_the_dlrm_ranks(capsys):
    """Rank 1's step (its ProfilerStep) is the longest; rank 7 launches last into 5 of
    the 8 collectives; each rank's verdict is the one `advise` gives its trace alone."""
    straggler, counts, waits, n = _arrivals(shared(DLRM))
    assert (straggler, counts[7], n) == (7, 5, 8)
    step = {_rank(p): next(_ns(e["dur"]) for e in _raw(p)
                           if e["name"].startswith("ProfilerStep#")) for p in DLRM.iterdir()}
    out = _json(capsys, "advise", str(DLRM), "--json")
    assert out["slowest_rank"] == max(step, key=lambda r: step[r]) == 1
    assert {r["rank"]: r["step_ns"] for r in out["ranks"]} == step
    files = {_rank(p): p for p in DLRM.iterdir()}
    for r in (1, 7):  # the verdict of one rank's trace alone, in this process
        assert out["ranks"][r]["bound"] == Context(load(files[r])).bound.by
    assert out["run"]["mode"] == "training"
    assert out["run"]["parallel"] == ["data", "embedding"]
    a = out["arrivals"]
    assert a["straggler"] == 7 and a["collectives"] == 8
    assert {r["rank"]: r["wait_ns"] for r in a["per_rank"]} == waits
    assert ("job", "straggler") in [(f["from"], f["rule"]) for f in out["findings"]]
    assert {f["from"] for f in out["findings"]} == {"job", "rank 1"}


def test_whatif_on_both_folders(capsys):
    """Every rank replayed together, the collectives every rank ran joined."""
    for folder in (shared(LLAMA), shared(DLRM)):
        _, _, _, n = _arrivals(folder)
        out = _json(capsys, "whatif", str(folder), "--json", "--scenario", "host_speedup=2")
        assert out["collectives"] == n
        assert [r["rank"] for r in out["per_rank"]] == sorted(_rank(p) for p in folder.iterdir())
        assert out["replayed_ns"] == max(r["replayed_ns"] for r in out["per_rank"])


def test_a_dataset_answers_as_its_folder(capsys, tmp_path):
    """`import` the LLaMA ranks: advise and whatif on the dataset say what they say on
    the folder."""
    ds = tmp_path / "ds"
    assert main(["import", str(shared(LLAMA)), "-o", str(ds)]) == 0
    capsys.readouterr()
    folder = _json(capsys, "advise", str(LLAMA), "--json")
    data = _json(capsys, "advise", str(ds), "--json")
    for key in ("slowest_rank", "ranks", "bound", "run"):
        assert data[key] == folder[key], key
    assert data["arrivals"]["straggler"] == 1
    w = [_json(capsys, "whatif", str(p), "--json", "--scenario", "no_casts")
         for p in (LLAMA, ds)]
    assert w[0]["collectives"] == w[1]["collectives"] == 19
    assert w[0]["replayed_ns"] == w[1]["replayed_ns"]


def test_report_of_a_job(capsys, tmp_path):
    """The job's sections first (its ranks, the arrivals, the findings), then its slowest
    rank as a run: in Markdown (DLRM) and in HTML (LLaMA)."""
    md = tmp_path / "dlrm.md"
    assert main(["report", str(shared(DLRM)), "-o", str(md)]) == 0
    text = md.read_text()
    head = text.index("## h3\\_param\\_dlrm\\_8rank: the ranks")
    assert head < text.index("## h3\\_param\\_dlrm\\_8rank: arrivals at the collectives") \
        < text.index("## Environment")
    table = text[head:].split("\n\n")[2].splitlines()
    assert len(table) == 2 + 8 and "| 1 (slowest) |" in text
    assert "Rank 7 launches last into 5 of 8 collectives" in text
    assert "h3\\_param\\_dlrm\\_8rank: rank 1 (the slowest)" in text
    page = tmp_path / "llama.html"
    assert main(["report", str(shared(LLAMA)), "-o", str(page)]) == 0
    html = page.read_text()
    assert "rtx4090_llama_tp2: the ranks" in html
    assert "Rank 1 launches last into all 19 collectives" in html
    assert html.index("rtx4090_llama_tp2: the ranks") < html.index(
        "rtx4090_llama_tp2: rank 1 (the slowest)")
