"""Each component's public module: every name it lists resolves to the object its home module defines, and
importing the module imports none of them (the CLI starts without TFX or torch)."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

PUBLIC = [
    f"torchtfx.components.{c}.public" for c in ("champion", "csv_input", "data_gate", "promoter", "torch_trainer")
]


@pytest.mark.parametrize("name", PUBLIC)
def test_every_public_name_resolves_from_its_home(name):
    public = importlib.import_module(name)
    assert public.__all__
    for attribute in public.__all__:
        assert getattr(public, attribute) is not None
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        _ = public.nope


def test_importing_the_public_modules_imports_no_framework():
    probe = (
        "import sys\n"
        + "".join(f"import {name}\n" for name in PUBLIC)
        + "print(sorted(m for m in ('tfx', 'tensorflow', 'torch', 'mlflow') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["[]"]
