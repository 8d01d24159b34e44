"""Sanitizer fuzzing of the compiled Kineto reader against the Python one, its oracle.

    python -m tests.fuzz_native [--seconds 180] [--out DIR] [--seed N]

1. Builds ``traceviz/parsers/kineto_native.c`` with AddressSanitizer and
   UndefinedBehaviorSanitizer (``CC``, else gcc or cc; any UB aborts) into a temporary
   folder.
2. Runs a child interpreter with libasan preloaded (the interpreter itself is not built
   with ASan) that loads that build as ``traceviz.parsers._kineto_native`` and feeds it,
   for ``--seconds``, pieces of event arrays (``tests/fuzz_mutate.py``: the real traces,
   the bad-input corpus, the fuzz test's generator, each mutated), and now and then a whole
   document. Each input the compiled reader accepts is checked twice:

   * raw: ``read_events`` against msgspec's decoding of the same bytes with the Python
     reader's event layout: the input must be valid for msgspec (and UTF-8) and every field
     of every event the same (``None``, "not mine", is always allowed: the Python reader
     then decodes);
   * end to end (pieces): ``decode_piece`` under ``TRACEVIZ_READER=native`` and
     ``=python``: the same status, the same columns, the same drop counts, or the same
     error.

3. A sanitizer report, a crash or a mismatch fails the run (exit 1); the input is saved
   in ``--out`` (default ``./fuzz-native-findings``) under a name the last lines print.
   Exit 77, with one line, where no C compiler is found.

Leaks are not checked (``detect_leaks=0``): the interpreter's own allocations at exit
would drown the reader's; the reader frees its buffers with its result.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "traceviz" / "parsers" / "kineto_native.c"
MODULE = "traceviz.parsers._kineto_native"
NO_COMPILER = 77
SANITIZER_EXIT = 86  # a sanitizer's report, told apart from a mismatch (1)
FLAGS = ["-shared", "-fPIC", "-g", "-O1", "-fsanitize=address,undefined",
         "-fno-sanitize-recover=all", "-fno-omit-frame-pointer"]


def compiler() -> str | None:
    """The C compiler to build with: ``CC`` (its first word), else gcc, else cc."""
    named = os.environ.get("CC", "").split()
    for cc in ([named[0]] if named else ["gcc", "cc"]):
        if shutil.which(cc):
            return shutil.which(cc)
    return None


def build(cc: str, out: Path, source: Path = SOURCE, name: str = "_kineto_native") -> Path:
    """The sanitized extension module ``name``, built from ``source`` alone (no
    setuptools): the Kineto reader by default."""
    target = out / (name + sysconfig.get_config_var("EXT_SUFFIX"))
    cmd = [cc, *FLAGS, f"-I{sysconfig.get_paths()['include']}", str(source), "-o", str(target)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(f"fuzz_native: the sanitized build failed:\n{' '.join(cmd)}\n"
                         f"{r.stderr[-3000:]}")
    return target


def _runtime(cc: str, name: str) -> str:
    return subprocess.run([cc, f"-print-file-name={name}"], capture_output=True,
                          text=True).stdout.strip()


def sanitizer_env(cc: str) -> dict[str, str]:
    """The child's environment: libasan first in the process (the interpreter is not
    built with it), every report fatal, with its stack."""
    env = dict(os.environ)
    env["LD_PRELOAD"] = " ".join(filter(None, [_runtime(cc, "libasan.so"),
                                               env.get("LD_PRELOAD", "")]))
    env["ASAN_OPTIONS"] = (f"detect_leaks=0:exitcode={SANITIZER_EXIT}:abort_on_error=0:"
                           "allocator_may_return_null=1:detect_stack_use_after_return=0")
    env["UBSAN_OPTIONS"] = f"halt_on_error=1:print_stacktrace=1:exitcode={SANITIZER_EXIT}"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env.pop("TRACEVIZ_READER", None)
    return env


def _sanitizer_lines(stderr: str) -> list[str]:
    marks = ("ERROR: AddressSanitizer", "runtime error:", "SUMMARY: ", "ERROR: Undefined")
    return [line for line in stderr.splitlines() if any(m in line for m in marks)]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.fuzz_native",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=180, help="how long to feed inputs")
    p.add_argument("--out", type=Path, default=Path("fuzz-native-findings"),
                   help="where a failing input is saved")
    p.add_argument("--seed", type=int, default=None, help="the mutations' seed (default: "
                   "the time; the run prints it)")
    p.add_argument("--replay", type=Path, nargs="+", default=[], metavar="FILE",
                   help="saved inputs to check first (a name holding 'document': a whole "
                   "document); --seconds 0 checks only them")
    args = p.parse_args(argv)
    cc = compiler()
    if cc is None:
        print("fuzz_native: no C compiler (CC, gcc, cc): the sanitized reader cannot be "
              "built", file=sys.stderr)
        return NO_COMPILER
    seed = args.seed if args.seed is not None else int(time.time())
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="fuzz-native-") as d:
        built = build(cc, Path(d))
        current = Path(d) / "current.bin"
        cmd = [sys.executable, "-m", "tests.fuzz_native_child", str(built), str(current),
               str(args.out), str(args.seconds), str(seed),
               *(str(f.resolve()) for f in args.replay)]
        r = subprocess.run(cmd, cwd=ROOT, env=sanitizer_env(cc), capture_output=True,
                           text=True, errors="replace")
        sys.stdout.write(r.stdout)
        if r.returncode in (0, 1):
            sys.stderr.write(r.stderr[-6000:])
            return r.returncode
        # a sanitizer's report or a crash: the input being read is in ``current``
        data = current.read_bytes() if current.exists() else b""
        mode = Path(f"{current}.mode")
        kind = "document" if mode.exists() and mode.read_bytes() == b"d" else "piece"
        saved = args.out / f"sanitizer-{kind}-{hashlib.sha1(data).hexdigest()[:12]}.json"
        saved.write_bytes(data)
        report = _sanitizer_lines(r.stderr)
        sys.stderr.write(r.stderr[-8000:])
        print(f"\nfuzz_native: FAILED (exit {r.returncode}, seed {seed}): "
              f"{report[0] if report else 'the child crashed'}\n"
              f"fuzz_native: the input ({len(data):,} bytes) is saved as {saved}",
              file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
