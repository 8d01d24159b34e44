"""The inputs ``tests/fuzz_native.py`` feeds the compiled Kineto reader: pieces of real
event arrays (the bytes ``decode_piece`` gets), from the real traces, the bad-input corpus
and the property-based fuzz tests' generator, then mutated byte-wise and token-wise
(flips, truncations, splices, deep nesting, huge and oddly spelled numbers, escapes,
duplicate keys, invalid UTF-8).

Nothing here imports the compiled reader: it only makes bytes.
"""

from __future__ import annotations

import gzip
import random
import re
import tempfile
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

from tests.conftest import shared_traces

# at most this much of one trace's event array is cut into seed pieces (the inputs stay
# small: a sanitized reader is ~3x slower, and small inputs reach more edges per second)
SEED_BYTES_PER_TRACE = 1 << 20
PIECE_SIZES = (64, 512, 4096, 32768)
SEEDS_PER_TRACE = 100
MAX_SEED = 64 << 10

NUMBERS = [b"1e400", b"-1e400", b"1e308", b"1.7976931348623157e308", b"4.9e-324",
           b"99999999999999999999999", b"9223372036854775807", b"9223372036854775808",
           b"-9223372036854775808", b"-9223372036854775809", b"18446744073709551615",
           b"18446744073709551616", b"0.0000000001", b"1.5e3", b"1E+2", b"1e-2", b"-0",
           b"-0.0", b"0.1234567", b"1.0005", b"1.0015", b"123456789012345678.5",
           b"9000000000000000.000", b"8999999999999999.9999", b"00", b"01", b"1.", b".5",
           b"-", b"1e", b"1e+", b"NaN", b"Infinity", b"-Infinity", b"+1", b"0x10",
           b"1" * 400, b"0." + b"0" * 400 + b"1", b"2147483647", b"2147483648",
           b"-2147483649", b"4294967296", b"1.5", b"true", b"false", b"null", b'"12"',
           b'"0x0"', b'""', b"[]", b"{}", b'"ProfilerStep#18446744073709551616"']
ESCAPES = [b"\\u0000", b"\\ud83d\\ude00", b"\\ud800", b"\\udc00", b"\\ud800\\u0041",
           b"\\n", b'\\"', b"\\/", b"\\\\", b"\\u00e9", b"\\u20ac", b"\\uFFFF", b"\\x41",
           b"\\u12", b"\\U0041", b"\\", b"\\ud83d", b"\\ud83d\\ud83d", b"\\b\\f\\r\\t",
           "é€😀".encode(), b"\xc3", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xff", b"\x00",
           b"\x1f", b"\xc0\xaf", b"\xe2\x82"]
KEYS = [b"ph", b"cat", b"name", b"pid", b"tid", b"ts", b"dur", b"args", b"id",
        b"correlation", b"device", b"stream", b"bytes", b"grid", b"block",
        b"registers per thread", b"shared memory", b"Input type", b"Concrete Inputs",
        b"Input Dims", b"In msg nelems", b"Out msg nelems", b"dtype", b"Group size",
        b"Process Group Name", b"Collective name", b"Bytes", b"Total Allocated",
        b"Device Id", b"External id"]
VALUES = [b'"X"', b'"i"', b'"kernel"', b'"cpu_op"', b'"cuda_runtime"', b'"gpu_memcpy"',
          b'"cpu_instant_event"', b'"[memory]"', b'"user_annotation"',
          b'"gpu_user_annotation"', b'"ProfilerStep#7"', b'"aten::copy_"', b'"Memcpy HtoD"',
          b"[1, 2, 3]", b'{"correlation": 5, "device": 0, "stream": 7}', *NUMBERS]
_NUMBER = re.compile(rb"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")
_STRING_START = re.compile(rb'"[^"\\]')


def pieces_of(document: bytes, rng: random.Random) -> list[bytes]:
    """A document's event array cut at element boundaries (``}, {``, as the import cuts
    it) into pieces of about one of ``PIECE_SIZES``; the last piece ends at the last
    ``}`` before the array's ``]``; a document without the key gives its whole text."""
    from traceviz.parsers.jsonstream import _SEP

    key = re.search(rb'"traceEvents"\s*:\s*\[', document)
    body = document[key.end():] if key else document
    end = body.rfind(b"}", 0, max(0, body.rfind(b"]")) or len(body)) + 1
    body = body[:end] if end > 0 else body
    target, pieces, pos = rng.choice(PIECE_SIZES), [], 0
    for m in _SEP.finditer(body):
        if m.start() + 1 - pos >= target:
            pieces.append(body[pos:m.start() + 1])
            pos = m.end() - 1
            target = rng.choice(PIECE_SIZES)
    pieces.append(body[pos:])
    return pieces


def _inflate(path: Path) -> bytes:
    data = path.read_bytes()
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


def real_seeds(rng: random.Random) -> list[bytes]:
    """Pieces of every real Kineto trace's event array (from its first megabyte), up to
    ``SEEDS_PER_TRACE`` of each, none over ``MAX_SEED``."""
    from tests.diagnosis_paths import FOREIGN, FOREIGN_FILES
    from traceviz.parsers.jsonstream import _SEP

    paths = shared_traces("kineto") + [FOREIGN / "kineto" / n for n in FOREIGN_FILES["kineto"]]
    seeds = []
    for path in paths:
        if not path.is_file():
            continue
        text = _inflate(path)
        if len(text) > SEED_BYTES_PER_TRACE:  # cut after a whole element, and close
            start = text.find(b"traceEvents")
            last = None
            for last in _SEP.finditer(text, max(0, start), start + SEED_BYTES_PER_TRACE):  # noqa: B007
                pass
            if last is not None:
                text = text[:last.start() + 1] + b"]}"
        pieces = [p for p in pieces_of(text, rng) if 0 < len(p) <= MAX_SEED]
        seeds += rng.sample(pieces, min(SEEDS_PER_TRACE, len(pieces)))
    return seeds


def corpus_seeds(rng: random.Random) -> list[bytes]:
    """Pieces of every Kineto input of the bad-input corpus (tests/corpus), regressions
    included (inputs over 4 MB left out; not the hostile cases: their gzip bombs take
    10 s to build)."""
    from tests.corpus.generate import kineto_cases, regression_cases

    seeds = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for case in kineto_cases() + regression_cases():
            if not any(".json" in a for a in case.argv):
                continue
            with tempfile.TemporaryDirectory() as d:
                try:
                    case.setup(Path(d))
                except Exception:  # noqa: BLE001 (a case this machine cannot set up)
                    continue
                for f in Path(d).rglob("*.json*"):
                    if f.is_file() and f.stat().st_size < 4 << 20:
                        try:
                            seeds += pieces_of(_inflate(f), rng)
                        except (OSError, EOFError, gzip.BadGzipFile):
                            seeds.append(f.read_bytes())
    return [s for s in seeds if 0 < len(s) <= MAX_SEED]


def generated(rng: random.Random) -> Iterator[bytes]:
    """Endless documents from the property-based fuzz test's generator (tests/test_fuzz.py:
    real events with fields set to any JSON value, deleted, copied; damaged bytes)."""
    from hypothesis.errors import NonInteractiveExampleWarning

    from tests.test_fuzz import kineto_files

    strategy = kineto_files()
    while True:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", NonInteractiveExampleWarning)
            yield bytes(strategy.example())


def _numbers(data: bytes, rng: random.Random) -> bytes:
    spans = [m.span() for m in _NUMBER.finditer(data, rng.randrange(len(data)))][:50]
    if not spans:
        return data
    a, b = rng.choice(spans)
    return data[:a] + rng.choice(NUMBERS) + data[b:]


def _escape(data: bytes, rng: random.Random) -> bytes:
    spans = [m.start() for m in _STRING_START.finditer(data, rng.randrange(len(data)))][:50]
    at = rng.choice(spans) + 1 if spans else rng.randrange(len(data) + 1)
    return data[:at] + rng.choice(ESCAPES) + data[at:]


def _nest(data: bytes, rng: random.Random) -> bytes:
    depth = rng.choice((2, 63, 64, 65, 127, 128, 129, 255, 256, 257, 1000, 5000, 100000))
    opener, closer = rng.choice(((b"[", b"]"), (b'{"a":', b"}")))
    value = opener * depth + b"1" + closer * depth
    if rng.random() < 0.2:  # unclosed
        value = value[:rng.randrange(len(value))]
    return _put_key(data, rng, rng.choice(KEYS), value)


def _put_key(data: bytes, rng: random.Random, key: bytes, value: bytes) -> bytes:
    """``"key": value,`` inserted after an object's opening brace (a duplicate key when
    the object has it already)."""
    braces = [m.start() for m in re.finditer(rb"\{", data[:1 << 16])]
    at = rng.choice(braces) + 1 if braces else 0
    return data[:at] + b'"' + key + b'": ' + value + b"," + data[at:]


def _duplicate(data: bytes, rng: random.Random) -> bytes:
    return _put_key(data, rng, rng.choice(KEYS), rng.choice(VALUES))


def _flip(data: bytes, rng: random.Random) -> bytes:
    out = bytearray(data)
    for _ in range(rng.choice((1, 1, 2, 8))):
        out[rng.randrange(len(out))] ^= 1 << rng.randrange(8)
    return bytes(out)


def _byte(data: bytes, rng: random.Random) -> bytes:
    at = rng.randrange(len(data))
    return data[:at] + rng.choice(b'"\\{}[],:\x00\x80\xff\xc3\xed 0-e.') .to_bytes(1, "big") \
        + data[at + 1:]


def _truncate(data: bytes, rng: random.Random) -> bytes:
    return data[:rng.randrange(len(data))]


def _remove(data: bytes, rng: random.Random) -> bytes:
    a = rng.randrange(len(data))
    return data[:a] + data[a + rng.choice((1, 1, 2, 16, 256)):]


def _repeat(data: bytes, rng: random.Random) -> bytes:
    a = rng.randrange(len(data))
    b = min(len(data), a + rng.choice((1, 8, 64, 1024)))
    return data[:b] + data[a:b] * rng.choice((1, 2, 100)) + data[b:]


def _whitespace(data: bytes, rng: random.Random) -> bytes:
    spans = [m.start() for m in re.finditer(rb"[,:]", data[:1 << 16])]
    if not spans:
        return data
    at = rng.choice(spans)
    ws = rng.choice((b" ", b"\n\t ", b"\r\n", b" " * 300, b"\x0b", b"\xa0"))
    return data[:at] + ws + data[at:at + 1] + ws + data[at + 1:]


MUTATORS: list[Callable[[bytes, random.Random], bytes]] = [
    _flip, _byte, _truncate, _remove, _repeat, _numbers, _numbers, _numbers, _escape,
    _escape, _nest, _duplicate, _duplicate, _whitespace]


def mutate(data: bytes, other: bytes, rng: random.Random) -> bytes:
    """``data`` after 1 to 4 mutations (one of them, sometimes, a splice with ``other``)."""
    for _ in range(rng.choice((1, 1, 2, 4))):
        if not data:
            return other[:rng.randrange(len(other) + 1)]
        if rng.random() < 0.1 and other:
            data = data[:rng.randrange(len(data))] + other[rng.randrange(len(other)):]
        else:
            data = rng.choice(MUTATORS)(data, rng)
    return data


