"""Package discovery: every package under ``traceviz/``, ``runners/`` and ``analyses/`` is
found, none listed by hand (a subpackage added later ships without editing this file).

``runners/`` and ``analyses/`` are installed as ``traceviz.runners`` and
``traceviz.analyses`` (``[tool.setuptools.package-dir]`` in ``pyproject.toml``); a
``[tool.setuptools.packages.find]`` table cannot name packages under another prefix than
their folder's, hence these few lines. A build starts without the previous build's
``build/lib``. Everything else is in ``pyproject.toml``.
"""

import shutil
from pathlib import Path

from setuptools import find_packages, setup

MAPPED = {"traceviz.runners": "runners", "traceviz.analyses": "analyses"}

packages = find_packages(include=["traceviz", "traceviz.*"])
for name, folder in MAPPED.items():
    packages += [name, *(f"{name}.{sub}" for sub in find_packages(folder))]

# setuptools copies modules into build/lib and never removes one: a module deleted from
# the source lived on in wheels built from the folder (pip install ., pip wheel .)
shutil.rmtree(Path(__file__).resolve().parent / "build" / "lib", ignore_errors=True)

setup(packages=packages)
