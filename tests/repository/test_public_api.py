"""dexrl's public Python API (``dexrl/__init__.py``): each name stays importable from ``dexrl``
and stays what it is, wherever its module moves; ``import dexrl`` stays light."""

from __future__ import annotations

import inspect
import subprocess
import sys

import pytest

import dexrl

# The public names and the parameters user code passes them: a move keeps both.
PUBLIC = {
    "load_policy": ["ckpt_dir", "device", "dtype", "norm_mode"],
    "load_eval_policy": ["source", "device", "dtype"],
    "resolve_checkpoint": ["path", "base"],
    "checkpoint_model_type": ["ckpt_dir"],
}


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_each_public_function_is_importable_with_its_parameters(name: str) -> None:
    value = getattr(__import__("dexrl", fromlist=[name]), name)
    assert list(inspect.signature(value).parameters) == PUBLIC[name]


def test_the_public_names_are_exactly_these() -> None:
    """A name added to or dropped from the API is a decision: this test is updated with it."""
    assert sorted(dexrl.__all__) == sorted([*PUBLIC, "DexrlError", "__version__"])
    assert set(dexrl.__all__) <= set(dir(dexrl))


def test_the_error_type_is_the_one_dexrl_raises() -> None:
    from dexrl import DexrlError
    from dexrl.errors import DexrlError as raised

    assert DexrlError is raised and issubclass(DexrlError, Exception)
    assert isinstance(dexrl.__version__, str) and dexrl.__version__


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'load_polcy'"):
        dexrl.load_polcy  # noqa: B018


def test_the_old_models_path_still_loads_with_a_deprecation_warning() -> None:
    """``from dexrl.models import load_policy`` once was the documented path."""
    with pytest.warns(DeprecationWarning, match="from dexrl import load_policy"):
        from dexrl.models import load_policy
    assert load_policy is dexrl.load_policy


@pytest.mark.spawns
def test_import_dexrl_imports_nothing_heavy() -> None:
    code = ("import sys, dexrl; "
            "print(sorted(m for m in ('torch', 'transformers', 'omegaconf', 'numpy') "
            "if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    assert result.stdout.strip() == "[]"
