"""Every case of the bad-input corpus (tests/corpus/generate.py): exit 0 or 2, exactly
one ``traceviz: error:`` line on 2 (with the expected words), never a traceback or an
internal error, nothing left behind but the expected outputs, under 10 s of CPU time each
(CPU time, not wall time: a busy machine slows a case down without making it cost more;
the wall-time bound is only there to catch a hang)."""

from __future__ import annotations

import fnmatch
import time
from pathlib import Path

import pytest

from tests.conftest import shared
from tests.corpus.generate import BERT, MI250, TINY, cases
from traceviz.cli import main

CASES = cases()
# a value wrapped into a wrong number is a RuntimeWarning from numpy: make it a failure
pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")


@pytest.mark.shared(MI250, TINY, BERT)
def test_corpus_is_large_enough():
    assert len(CASES) >= 250
    readers = {c.id.split("/")[0] for c in CASES}
    assert readers >= {"kineto", "mxnet", "nsys", "xplane", "parquet", "sweep", "output",
                       "ranks"}


def _files(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() if p.is_file() else b""
            for p in d.rglob("*") if p.is_file() or p.is_fifo()}


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_case(case, tmp_path, capsys):
    for path in case.needs:
        shared(path)
    d = tmp_path / "case"
    d.mkdir()
    case.setup(d)
    before = _files(d)
    argv = [a.replace("{d}", str(d)) for a in case.argv]
    started, cpu = time.perf_counter(), time.process_time()
    code = main(argv)
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    out, err = capsys.readouterr()
    assert "Traceback" not in err and "internal error" not in err, err
    errors = [line for line in err.splitlines() if line.startswith("traceviz: error:")]
    if case.expect == -1:
        assert code in (0, 2), err
    else:
        assert code == case.expect, err
    if code == 2:
        assert len(errors) == 1, err
        assert case.says in errors[0], errors[0]
    else:
        assert not errors, err
    assert cpu < 10, f"{case.id} took {cpu:.1f} s of CPU time"
    assert elapsed < 120, f"{case.id} took {elapsed:.0f} s: a hang?"
    after = _files(d)
    assert not [f for f in after if f.endswith(".tmp")], "temporary file left behind"
    new = [f for f in after if f not in before]
    stray = [f for f in new if not any(fnmatch.fnmatch(f, pat) for pat in case.outputs)]
    assert not stray, f"unexpected files: {stray}"
    for f in case.keep:
        assert after.get(f) == before.get(f), f"{f} changed"
