"""The ``dexrl.models`` package itself."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.spawns
def test_package_import_is_light() -> None:
    code = (
        "import sys, dexrl.models; print(any(m in sys.modules for m in ('torch', 'transformers')))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"
