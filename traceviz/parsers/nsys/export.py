"""Nsight Systems' own tools, run to turn a report into an SQLite export: ``nsys export``
for a ``.nsys-rep`` or ``.qdrep``, and the ``QdstrmImporter`` for the raw ``.qdstrm`` that
``nsys profile`` leaves when it cannot find its importer."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from traceviz.errors import TraceVizError


def nsys_binary() -> str | None:
    return shutil.which("nsys")


def export_sqlite(report: Path, out: Path) -> Path:
    """``nsys export --type sqlite`` of a ``.nsys-rep`` (or ``.qdstrm``, imported first)."""
    nsys = nsys_binary()
    if nsys is None:
        raise TraceVizError(f"{report}: reading a {report.suffix} report needs Nsight Systems "
                            "(`nsys`) on PATH; export it elsewhere with `nsys export "
                            "--type sqlite` and pass the .sqlite")
    if report.suffix == ".qdstrm":
        report = import_qdstrm(report, nsys)
    cmd = [nsys, "export", "--type", "sqlite", "--force-overwrite", "true",
           "--output", str(out), str(report)]
    done = subprocess.run(cmd, capture_output=True)
    if done.returncode != 0 or not out.is_file():
        said = _last_line(done)
        # nsys says "Version number is invalid" of a report from a newer release; a
        # damaged report fails otherwise, and the version is no way out there
        newer = (f"; this is {_version(nsys)}: a report recorded by a newer one opens with "
                 "that version's `nsys export --type sqlite` (pass the .sqlite)"
                 if "version" in said.lower() else "")
        raise TraceVizError(f"{report}: nsys export failed ({said}){newer}")
    return out


def _version(nsys: str) -> str:
    """``nsys --version``'s text ("NVIDIA Nsight Systems version 2022.4.2.1-df9881f")."""
    try:
        done = subprocess.run([nsys, "--version"], capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return "an nsys of unknown version"
    text = _last_line(done)
    return text if done.returncode == 0 and "version" in text.lower() else \
        "an nsys of unknown version"


def _last_line(done: subprocess.CompletedProcess) -> str:
    """What a tool said last (its output may not be UTF-8: it may echo the input)."""
    text = (done.stderr or done.stdout or b"").decode("utf-8", "replace").strip()
    return (text.splitlines()[-1:] or ["no output"])[0][:300]


def import_qdstrm(qdstrm: Path, nsys: str) -> Path:
    """Turn nsys' raw stream into a report. ``nsys profile`` does this itself unless it
    cannot find its importer (seen with Debian's 2022.4 package), so run it directly."""
    base = Path(nsys).resolve().parent.parent  # .../nsight-systems[/<version>]
    candidates = sorted(base.glob("**/QdstrmImporter")) + \
        sorted(Path("/usr/lib/nsight-systems").glob("**/QdstrmImporter"))
    if not candidates:
        raise TraceVizError(f"{qdstrm}: nsys left a raw .qdstrm and no QdstrmImporter was "
                            "found next to it")
    done = subprocess.run([str(candidates[0]), "-i", str(qdstrm)], capture_output=True)
    rep = qdstrm.with_suffix(".nsys-rep")
    if done.returncode != 0 or not rep.is_file():
        raise TraceVizError(f"{qdstrm}: QdstrmImporter failed ({_last_line(done)})")
    return rep
