"""Wrong or oversized values in what the readers take: each case ends in exit 0 with one
``note:`` naming the field and what was left out, or in exit 2 with one ``traceviz:
error:`` line naming the file and the field; never an internal error (exit 3).

Cases: XSpace profiles whose every event is dropped (a GPU plane or a stream numbered past
32 bits, a plane of instant events only: the communication section saw no names at all)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from traceviz.cli import main
from traceviz.parsers.xspace_proto import xspace_class

DROPPED = ("3 events dropped: a time beyond 64-bit nanoseconds, or a device or stream "
           "number beyond 32 bits")


def _run(capsys, *argv: str) -> tuple[int, str, list[str]]:
    """Exit status, stdout and the lines of stderr of one command."""
    code = main([*argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in err and "internal error" not in err, err
    return code, out, err.splitlines()


def _analyze(capsys, path: Path) -> dict:
    code, out, err = _run(capsys, "analyze", str(path), "--json")
    assert code == 0 and err == [], err
    return json.loads(out)


# --- XSpace: every event dropped -------------------------------------------------------

def _space(plane: str, line: str, dur_ns: int):
    """One plane (``plane``), one line (``line``) of three events of ``dur_ns``."""
    space = xspace_class()()
    p = space.planes.add(name=plane)
    p.stat_metadata[1].id, p.stat_metadata[1].name = 1, "correlation_id"
    p.event_metadata[1].id, p.event_metadata[1].name = 1, "gemm_kernel"
    stream = p.lines.add(id=9, name=line, timestamp_ns=1_000)
    for i in range(3):
        e = stream.events.add(metadata_id=1, offset_ps=i * 1_000_000, duration_ps=dur_ns * 1000)
        if plane.startswith("/device:"):  # a kernel's launch id (on the host: a call)
            e.stats.add(metadata_id=1).int64_value = i + 1
    return space


XSPACES = {
    "gpu plane past 32 bits": (("/device:GPU:99999999999", "Stream #9(Kernel)", 500), DROPPED),
    "stream past 32 bits": (("/device:GPU:0", "Stream #99999999999(x)", 500), DROPPED),
    # host events of no duration are marks, not kept: the profile holds no rows
    "instant events only": (("/host:CPU", "python", 0), None),
}


@pytest.mark.parametrize("case", list(XSPACES))
def test_xspace_with_every_event_dropped(tmp_path, capsys, case):
    """The communication section sees a table with no names (it once ended in "could not
    convert string to float: 'other'"): no collectives; the drop is the one note the
    parser adds; report writes Markdown and HTML."""
    args, note = XSPACES[case]
    path = tmp_path / "p.xplane.pb"
    path.write_bytes(_space(*args).SerializeToString())
    d = _analyze(capsys, path)
    assert d["communication"] is None and d["ranges"] == [] and d["kernels"]["count"] == 0
    parser_notes = [n for n in d["notes"] if "dropped" in n]
    assert parser_notes == ([note] if note else [])
    for command in ("whatif", "advise"):
        code, _, err = _run(capsys, command, str(path))
        assert code in (0, 2) and len(err) <= 1, err
    for out in ("r.md", "r.html"):
        code, _, err = _run(capsys, "report", str(path), "-o", str(tmp_path / out))
        assert code == 0 and (tmp_path / out).stat().st_size > 0, err


def test_per_distinct_of_no_names():
    """No distinct values: the answer takes the fill's type (a text fill is no float)."""
    from traceviz.algos.categorical import each, per_distinct

    kinds = per_distinct(pd.Series([], dtype="category"), each(str.upper), fill="other")
    assert kinds.dtype == object and len(kinds) == 0
    missing = per_distinct(pd.Categorical([None, None]), each(str.upper), fill="other")
    assert missing.tolist() == ["other", "other"]
    assert per_distinct(pd.Categorical([]), each(len)).dtype.kind == "f"  # as before
