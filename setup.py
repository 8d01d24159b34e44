"""Package discovery: every package under ``traceviz/``, ``runners/`` and ``analyses/`` is
found, none listed by hand (a subpackage added later ships without editing this file).

``runners/`` and ``analyses/`` are installed as ``traceviz.runners`` and
``traceviz.analyses`` (``[tool.setuptools.package-dir]`` in ``pyproject.toml``); a
``[tool.setuptools.packages.find]`` table cannot name packages under another prefix than
their folder's, hence these few lines. Everything else is in ``pyproject.toml``.
"""

from setuptools import find_packages, setup

MAPPED = {"traceviz.runners": "runners", "traceviz.analyses": "analyses"}

packages = find_packages(include=["traceviz", "traceviz.*"])
for name, folder in MAPPED.items():
    packages += [name, *(f"{name}.{sub}" for sub in find_packages(folder))]

setup(packages=packages)
