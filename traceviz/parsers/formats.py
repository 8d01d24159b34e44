"""The input formats ``load`` reads: one ``Format`` row each in ``FORMATS``, in the order
``detect_format`` asks them whether a file is theirs. A new format is its parser module
plus one row here (``register`` adds one at run time, before a row it names)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from traceviz.errors import TraceVizError
from traceviz.files.folders import is_nsys_folder, is_rank_folder, is_xplane_dir
from traceviz.trace import Trace

Progress = Callable[[int], None] | None
_JSON_START = re.compile(rb"^\s*[\[{]")
# an MXNet profile's own categories, in the first bytes of a Chrome-trace JSON (here, not
# in mxnet.py: sniffing a file does not import a parser)
_MXNET_SNIFF = re.compile(rb'"cat"\s*:\s*"(?:operator|MXNET_C_API)"')
_ARROW_STREAM = b"\xff\xff\xff\xff"  # IPC continuation marker
_NSYS_REPORTS = (b"NVIDIA Tegra Profiler Report", b"U3w[END]NVIDIA")


class Probe:
    """What a format's ``claims`` looks at: the path, whether it is a folder, the file's
    first 32 bytes (``magic``) and its decompressed first 64 KiB after any leading white
    space (``text``), each read once, when a row first asks (a folder has neither)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.is_dir = path.is_dir()

    @cached_property
    def magic(self) -> bytes:
        if self.is_dir:
            return b""
        with open(self.path, "rb") as f:
            return f.read(32)

    @cached_property
    def text(self) -> bytes:
        """Raises for a file that is empty or white space only: no text format holds it."""
        head = b"" if self.is_dir else first_text(self.path)
        if not head and not self.is_dir:
            raise TraceVizError(f"{self.path}: file is empty (nothing but white space)")
        return head


def first_text(path: Path, window: int = 1 << 16) -> bytes:
    """The (decompressed) file's first ``window`` bytes after any leading white space."""
    from traceviz.files.fileio import open_input

    with open_input(path) as f:
        while True:
            block = f.read(window)
            if not block:
                return b""
            text = block.lstrip()
            if text:
                return text + f.read(max(0, window - len(text)))


@dataclass(frozen=True)
class Format:
    """One input format.

    ``name``: what ``detect_format`` answers for it. ``claims(probe)``: whether a file (or
    folder) is of this format, from its name and first bytes (``Probe``); rows are asked
    in ``FORMATS``' order and the first that claims it reads it, so a row that claims by
    a file's name alone stands before the rows that read its bytes. ``parse(path,
    progress)``: the file read into a ``Trace`` (``progress``: called with bytes read, or
    None); None for a traceviz table, which ``Trace.load`` reads as saved. A parser
    module is imported by ``parse``, when its format is read, not before.
    """

    name: str
    claims: Callable[[Probe], bool]
    parse: Callable[[Path, Progress], Trace] | None


def _kineto(path: Path, progress: Progress) -> Trace:
    from traceviz.parsers import kineto

    return kineto.parse(path, progress=progress)


def _mxnet(path: Path, progress: Progress) -> Trace:
    from traceviz.parsers import mxnet

    return mxnet.parse(path)


def _xspace(path: Path, progress: Progress) -> Trace:
    from traceviz.parsers import xspace

    return xspace.parse(path)


def _nsys(fmt: str) -> Callable[[Path, Progress], Trace]:
    def parse(path: Path, progress: Progress) -> Trace:
        from traceviz.parsers import nsys

        return nsys.parse(path, fmt)
    return parse


def _looks_like_mxnet(p: Probe) -> bool:
    return not p.is_dir and bool(_JSON_START.match(p.text)) and bool(_MXNET_SNIFF.search(p.text))


FORMATS: list[Format] = [
    Format("nsys-dir", lambda p: p.is_dir and is_nsys_folder(p.path), _nsys("nsys-dir")),
    Format("parquet", lambda p: p.magic.startswith(b"PAR1"), None),
    Format("nsys-sqlite", lambda p: p.magic.startswith(b"SQLite format 3\x00"),
           _nsys("nsys-sqlite")),
    # protobuf has no magic number: the TF/JAX file name, or a profile log folder
    Format("xplane", lambda p: is_xplane_dir(p.path) and not is_rank_folder(p.path)
           if p.is_dir else ".xplane.pb" in p.path.name, _xspace),
    Format("nsys-rep", lambda p: not p.is_dir and (
        p.magic.startswith(_NSYS_REPORTS) or p.path.suffix in (".nsys-rep", ".qdrep", ".qdstrm")),
        _nsys("nsys-rep")),
    Format("nsys-arrow", lambda p: not p.is_dir and (p.magic.startswith(_ARROW_STREAM)
                                                     or p.path.suffix == ".arrow"),
           _nsys("nsys-arrow")),
    Format("mxnet", _looks_like_mxnet, _mxnet),
    Format("kineto", lambda p: not p.is_dir and bool(_JSON_START.match(p.text)), _kineto),
]


def register(fmt: Format, before: str | None = None) -> None:
    """Add a format's row: before the row named ``before`` (its claims asked first), else
    last. ``unregister`` takes it out again."""
    at = next((i for i, f in enumerate(FORMATS) if f.name == before), len(FORMATS))
    FORMATS.insert(at, fmt)


def unregister(name: str) -> None:
    FORMATS[:] = [f for f in FORMATS if f.name != name]


def format_named(name: str) -> Format:
    return next(f for f in FORMATS if f.name == name)
