"""Package discovery: every package under ``traceviz/``, ``runners/`` and ``analyses/`` is
found, none listed by hand (a subpackage added later ships without editing this file).

``runners/`` and ``analyses/`` are installed as ``traceviz.runners`` and
``traceviz.analyses`` (``[tool.setuptools.package-dir]`` in ``pyproject.toml``); a
``[tool.setuptools.packages.find]`` table cannot name packages under another prefix than
their folder's, hence these few lines. A build starts without the previous build's
``build/lib``. Everything else is in ``pyproject.toml``.

The C extensions are optional: a machine without a C compiler (or Python headers)
installs the pure-Python package, which gives the same results more slowly. The Kineto
reader (``traceviz/parsers/kineto_native.c``) falls back to the Python reader (``traceviz
env`` says which one is used), the interval walk (``traceviz/algos/intervals_native.c``)
to its numpy version.
"""

import shutil
import sys
from pathlib import Path

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

MAPPED = {"traceviz.runners": "runners", "traceviz.analyses": "analyses"}

packages = find_packages(include=["traceviz", "traceviz.*"])
for name, folder in MAPPED.items():
    packages += [name, *(f"{name}.{sub}" for sub in find_packages(folder))]

# setuptools copies modules into build/lib and never removes one: a module deleted from
# the source lived on in wheels built from the folder (pip install ., pip wheel .)
shutil.rmtree(Path(__file__).resolve().parent / "build" / "lib", ignore_errors=True)



class OptionalBuildExt(build_ext):
    """Builds each C extension when it can, else warns and leaves it out: the package
    works without them (each has a Python fallback)."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as e:  # no compiler at all (DistutilsPlatformError, ...)
            self._skipped(e)

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as e:  # the compiler failed (CompileError, LinkError, ...)
            self._skipped(e, ext.name)

    def _skipped(self, e: Exception, name: str = "") -> None:
        what = FALLBACKS.get(name, "traceviz's C extensions were not built; their Python "
                                   "fallbacks will be used")
        print(f"warning: {what} ({e})", file=sys.stderr)


# compiled with Python's own flags (-O3 on Linux)
NATIVE = Extension("traceviz.parsers._kineto_native",
                   sources=["traceviz/parsers/kineto_native.c"],
                   # its parts, included by the one source file: a change rebuilds it
                   depends=[f"traceviz/parsers/kineto_native/{h}.h"
                            for h in ("columns", "scan", "event")],
                   optional=True)

# the innermost interval around each query by one walk (the op tree of every import)
WALK = Extension("traceviz.algos._intervals_native",
                 sources=["traceviz/algos/intervals_native.c"], optional=True)

FALLBACKS = {
    NATIVE.name: "traceviz's compiled Kineto reader was not built; the Python reader will "
                 "be used",
    WALK.name: "traceviz's compiled interval walk was not built; its numpy version will be "
               "used",
}

setup(packages=packages, ext_modules=[NATIVE, WALK],
      cmdclass={"build_ext": OptionalBuildExt})
