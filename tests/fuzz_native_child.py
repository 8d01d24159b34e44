"""The child of ``tests/fuzz_native.py``: runs under the sanitizers, loads the sanitized
build of the compiled Kineto reader and compares it with the Python reader on mutated
inputs (``tests/fuzz_mutate.py``).

    python -m tests.fuzz_native_child BUILT CURRENT OUT SECONDS SEED [REPLAY...]

Before each input is read it is written to ``CURRENT`` (and its mode, piece or document,
to ``CURRENT.mode``), so that the parent can save it when a sanitizer ends the process.
A mismatch is saved in ``OUT`` and counted; the run goes on (exit 1 at its end). The
``REPLAY`` files are checked first (a file named ``*document*`` as a document).
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import os
import random
import sys
import time
import typing
from pathlib import Path
from types import ModuleType

MODULE = "traceviz.parsers._kineto_native"
MAX_FINDINGS = 20


def load(path: str) -> ModuleType:
    """The sanitized build, in place of any other before traceviz imports it."""
    loader = importlib.machinery.ExtensionFileLoader(MODULE, path)
    spec = importlib.util.spec_from_file_location(MODULE, path, loader=loader)
    assert spec is not None
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    sys.modules[MODULE] = mod
    return mod


class Oracle:
    """msgspec with the Python reader's event layout, and the field names and attributes
    of the compiled reader's columns."""

    def __init__(self, native: ModuleType):
        import msgspec

        try:
            from traceviz.parsers.kineto import events as ev
        except ImportError:
            from traceviz.parsers import kineto_events as ev
        self.msgspec, self.native = msgspec, native
        self.events, self.document = ev.EVENTS, ev.DOCUMENT
        event_type = typing.get_args(ev.EVENTS.type)[0]
        self.ev_attr = {f.encode_name: f.name for f in msgspec.structs.fields(event_type)}
        args_type = next(a for a in typing.get_args(
            typing.get_type_hints(event_type)["args"]) if a is not type(None))
        self.arg_attr = {f.encode_name: f.name for f in msgspec.structs.fields(args_type)}
        self.odd = msgspec.json.Decoder(int | float | str | bool | None)

    def value(self, e, key: str, default):
        if key in self.ev_attr:
            return getattr(e, self.ev_attr[key])
        return default if e.args is None else getattr(e.args, self.arg_attr[key])

    def diff(self, data: bytes, out: dict, document: bool) -> str | None:
        """Why ``out`` (the compiled reader's answer) is not what msgspec reads, or None;
        ``"declined"`` when a value it set aside does not decode (the Python reader then
        decodes the whole input, as it does for None)."""
        import numpy as np
        import pyarrow as pa

        odd = np.frombuffer(out["odd"], dtype=np.int64).reshape(-1, 4)
        odd_at = {}
        for row, field, start, end in odd.tolist():
            try:
                odd_at[row, field] = self.odd.decode(data[start:end])
            except self.msgspec.DecodeError:
                return "declined"
        try:
            data.decode("utf-8")
            if document:
                doc = self.document.decode(data)
                events = doc.traceEvents
                if events is self.msgspec.UNSET:
                    return "accepted a document without traceEvents"
            else:
                events = self.events.decode(b"[" + data + b"]")
        except (UnicodeDecodeError, self.msgspec.DecodeError, RecursionError) as e:
            return f"accepted what the Python reader refuses ({type(e).__name__}: {e})"
        n = out["n"]
        if n != len(events):
            return f"{n} events, msgspec {len(events)}"
        for key in ("ph", "cat", "name"):
            off, text, valid = (pa.py_buffer(b) for b in out[key])
            got = pa.StringArray.from_buffers(n, off, text, valid).to_pylist()
            want = [self.value(e, key, None) for e in events]
            if got != want:
                return _first(key, got, want)
        raw_keys = [k for k in self.native_raw_keys(out) if k in self.ev_attr
                    or k in self.arg_attr]
        for key in raw_keys:
            off, text = (pa.py_buffer(b) for b in out[key])
            got = pa.BinaryArray.from_buffers(pa.binary(), n, [None, off, text]).to_pylist()
            want = [bytes(self.value(e, key, b"")) for e in events]
            if got != want:
                return _first(key, got, want)
        for f, key in enumerate(self.native.INT_FIELDS):
            values = np.frombuffer(out[key][0], dtype=np.int64)
            tags = np.frombuffer(out[key][1], dtype=np.uint8)
            want = [self.value(e, key, None) for e in events]
            got = [None if t == 0 else int(v) if t == 1 else odd_at.get((i, f), "<no odd>")
                   for i, (v, t) in enumerate(zip(values.tolist(), tags.tolist(), strict=True))]
            if [(type(g), g) for g in got] != [(type(w), w) for w in want]:
                return _first(key, got, want)
        if document:
            for key, (start, end) in out.get("meta", {}).items():
                got = self.msgspec.json.decode(data[start:end])
                if got != getattr(doc, key):
                    return f"meta {key}: {got!r}, msgspec {getattr(doc, key)!r}"
        return None

    def native_raw_keys(self, out: dict) -> list[str]:
        skip = {"n", "odd", "meta", "ph", "cat", "name", *self.native.INT_FIELDS}
        return [k for k in out if k not in skip]


def _first(key: str, got: list, want: list) -> str:
    i = next((i for i, (g, w) in enumerate(zip(got, want, strict=False)) if g != w or type(g) is not
              type(w)), min(len(got), len(want)))
    g = got[i] if i < len(got) else "<none>"
    w = want[i] if i < len(want) else "<none>"
    return f"{key} of event {i}: {g!r}, msgspec {w!r}"


def end_to_end(data: bytes) -> str | None:
    """``decode_piece`` under each reader: the same answer, or why not."""
    import pandas as pd

    from traceviz.parsers.jsonstream import Piece
    from traceviz.parsers.kineto import decode_piece

    answers = []
    for reader in ("native", "python"):
        os.environ["TRACEVIZ_READER"] = reader
        try:
            answers.append(decode_piece(Piece(data)))
        except Exception as e:  # noqa: BLE001 (compared: the same error from both)
            answers.append(("raised", f"{type(e).__name__}: {e}"))
    (sa, va), (sb, vb) = answers
    if sa != sb:
        return f"status {sa} ({str(va)[:200]}), Python reader: {sb} ({str(vb)[:200]})"
    if sa != "ok":
        return None if va == vb else f"error {va!r}, Python reader: {vb!r}"
    (fa, ca), (fb, cb) = va, vb
    if dict(ca) != dict(cb):
        return f"drop counts {dict(ca)}, Python reader: {dict(cb)}"
    try:
        pd.testing.assert_frame_equal(fa, fb)
    except AssertionError as e:
        return f"columns differ: {' '.join(str(e).split())[:400]}"
    return None


class Run:
    def __init__(self, native: ModuleType, current: Path, out: Path):
        self.oracle = Oracle(native)
        self.native = native
        self.fd = os.open(current, os.O_WRONLY | os.O_CREAT, 0o644)
        self.mode_fd = os.open(f"{current}.mode", os.O_WRONLY | os.O_CREAT, 0o644)
        self.out = out
        self.counts = {"inputs": 0, "documents": 0, "read": 0, "declined": 0,
                       "mismatches": 0}

    def check(self, data: bytes, document: bool) -> None:
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, data, 0)
        os.pwrite(self.mode_fd, b"d" if document else b"p", 0)
        self.counts["inputs"] += 1
        self.counts["documents"] += document
        # the document check beside the reader (plan.whole_document), on the same bytes
        needle = b'"traceEvents"' if document else data[7:7 + len(data) % 5]
        if self.native.ascii_count(data, needle) != (data.isascii(), data.count(needle)):
            self.finding(data, document, f"ascii_count(data, {needle!r}): "
                         f"{self.native.ascii_count(data, needle)}, bytes: "
                         f"{(data.isascii(), data.count(needle))}")
        out = self.native.read_events(data, document=document)
        if out is None:
            self.counts["declined"] += 1
            return
        why = self.oracle.diff(data, out, document)
        if why == "declined":
            self.counts["declined"] += 1
            return
        self.counts["read"] += 1
        if why is None and not document:
            why = end_to_end(data)
        if why is not None:
            self.finding(data, document, why)

    def finding(self, data: bytes, document: bool, why: str) -> None:
        self.counts["mismatches"] += 1
        digest = hashlib.sha1(data).hexdigest()[:12]
        name = self.out / f"mismatch-{'document' if document else 'piece'}-{digest}.json"
        name.write_bytes(data)
        print(f"fuzz_native: MISMATCH ({len(data):,} bytes, saved as {name}): {why}",
              flush=True)


def feed(run: Run, seconds: float, seed: int) -> None:
    from tests.fuzz_mutate import corpus_seeds, generated, mutate, pieces_of, real_seeds

    rng = random.Random(seed)
    seeds = real_seeds(rng) + corpus_seeds(rng)
    documents = generated(rng)
    print(f"fuzz_native: {len(seeds):,} seed pieces; feeding for {seconds:.0f} s "
          f"(seed {seed})", flush=True)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and run.counts["mismatches"] < MAX_FINDINGS:
        r = rng.random()
        if r < 0.05:  # a whole document from the fuzz test's generator, and its pieces
            doc = next(documents)
            run.check(doc, document=True)
            for piece in rng.sample(pieces := pieces_of(doc, rng), min(3, len(pieces))):
                run.check(piece, document=False)
            continue
        data = rng.choice(seeds)
        if r > 0.1:
            data = mutate(data, rng.choice(seeds), rng)
        if rng.random() < 0.08:
            doc = b'{"schemaVersion": 1, "traceEvents": [' + data + b'], "traceName": "t"}'
            run.check(mutate(doc, data, rng) if rng.random() < 0.5 else doc, document=True)
        else:
            run.check(data, document=False)


def main(argv: list[str]) -> int:
    built, current, out, seconds, seed, *replay = argv
    native = load(built)
    run = Run(native, Path(current), Path(out))
    started = time.monotonic()
    try:
        from traceviz.parsers.kineto import native as glue
    except ImportError:
        glue = None
    if glue is not None:  # the reader the import uses is the sanitized build
        assert getattr(glue, "_native", native) is native, "the sanitized build is not used"
    for f in replay:  # saved findings first
        run.check(Path(f).read_bytes(), document="document" in Path(f).name)
    if float(seconds) > 0:
        feed(run, float(seconds), int(seed))
    c = run.counts
    print(f"fuzz_native: {c['inputs']:,} inputs ({c['documents']:,} whole documents) in "
          f"{time.monotonic() - started:.0f} s, seed {seed}: {c['read']:,} read by the "
          f"compiled reader and compared, {c['declined']:,} declined (left to the Python "
          f"reader); {c['mismatches']} mismatches, no sanitizer report", flush=True)
    return 1 if c["mismatches"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
