"""The compiled Kineto reader under AddressSanitizer and UndefinedBehaviorSanitizer, against
msgspec and the Python reader, for a bounded time (``tests/fuzz_native.py``): the saved
findings of ``tests/corpus/native/`` first, then mutated pieces of the real traces, the
corpus and the fuzz test's generator. ``TRACEVIZ_FUZZ_NATIVE_SECONDS`` sets the time spent
feeding inputs (default 150 s; the build and the seeds add about 20 s).

Skipped where no C compiler or no ASan runtime is found; failed there in CI
(``TRACEVIZ_REQUIRE_FRAMEWORKS=1``), like any tool CI installs.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.conftest import KINETO, ROOT, missing
from tests.fuzz_native import NO_COMPILER, _runtime, compiler

SECONDS = int(os.environ.get("TRACEVIZ_FUZZ_NATIVE_SECONDS", "150"))
SAVED = sorted((ROOT / "tests" / "corpus" / "native").glob("*.json"))


@pytest.mark.slow
@pytest.mark.shared(KINETO)
def test_native_reader_under_sanitizers(tmp_path):
    cc = compiler()
    if cc is None:
        missing("no C compiler (CC, gcc or cc): the compiled Kineto reader cannot be built "
                "to fuzz it under the sanitizers")
    if not os.path.isabs(_runtime(cc, "libasan.so")):
        missing(f"{cc} has no AddressSanitizer runtime (libasan.so)")
    r = subprocess.run([sys.executable, "-m", "tests.fuzz_native", "--seconds", str(SECONDS),
                        "--out", str(tmp_path), "--replay", *map(str, SAVED)],
                       cwd=ROOT, capture_output=True, text=True, timeout=SECONDS + 300)
    assert r.returncode != NO_COMPILER, r.stderr
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-8000:]
    m = re.search(r"([\d,]+) inputs .*: ([\d,]+) read by the compiled reader", r.stdout)
    assert m, r.stdout
    inputs, read = (int(g.replace(",", "")) for g in m.groups())
    # the saved findings, then the mutated inputs: the compiled reader read some of them
    assert inputs > len(SAVED) and read >= len(SAVED), r.stdout


@pytest.mark.parametrize("saved", SAVED, ids=[p.stem for p in SAVED])
def test_saved_findings_read_alike(saved, monkeypatch):
    """Each saved finding, without the sanitizers: ``decode_piece`` gives the Python
    reader's answer (the same columns, or the same error) with the compiled reader."""
    from tests.fuzz_native_child import end_to_end
    from traceviz.parsers.kineto import native

    if native.reader() != "native":
        missing("the compiled Kineto reader is not built here (pip install -e . with a C "
                "compiler)")
    monkeypatch.setenv("TRACEVIZ_READER", "native")  # end_to_end sets it for each reader
    assert end_to_end(saved.read_bytes()) is None
