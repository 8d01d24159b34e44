"""Project-level promises: ruff-clean, analyze without torch/tensorflow, one launch-API list."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from tests.conftest import KINETO, ROOT


def test_ruff_clean():
    ruff = shutil.which("ruff") or str(ROOT / ".venv" / "bin" / "ruff")
    if not shutil.which(ruff):
        pytest.fail("ruff is part of the test extras and should be installed")
    r = subprocess.run([ruff, "check", str(ROOT)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("trace", [KINETO / "a100_alexnet.json.gz",
                                   KINETO.parent / "xplane" / "tf24_bert_amp_gpu.xplane.pb.gz"])
def test_analyze_needs_no_deep_learning_framework(tmp_path, trace):
    code = (
        "import sys\n"
        "for m in ('torch', 'tensorflow', 'jax', 'keras'):\n"
        "    sys.modules[m] = None  # any import of them now fails\n"
        "from traceviz.cli import main\n"
        f"sys.exit(main(['analyze', {str(trace)!r}, '--json']))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert '"kernels"' in r.stdout


def test_launch_api_names_live_in_one_module():
    hits = [p for p in (ROOT / "traceviz").rglob("*.py")
            if "cudaLaunchKernelExC" in p.read_text()]
    hits += [p for p in (ROOT / "analyses").rglob("*.py") if "cudaLaunchKernelExC" in p.read_text()]
    assert [p.name for p in hits] == ["launch_apis.py"]
