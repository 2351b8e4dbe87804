"""Write a tiny dexrl policy plugin (an installed distribution) into a folder, for the tests.

The folder holds the package and its ``.dist-info`` (METADATA and ``entry_points.txt``), which is
what ``pip install`` leaves in site-packages: putting the folder on ``sys.path`` or
``PYTHONPATH`` installs it for :mod:`importlib.metadata`, in this process, in subprocesses and in
Ray workers. The policy is ``dexrl_tiny_ext``'s state-only policy (this folder must be importable
where it is built).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

MODEL_YAML = """\
# A tiny state-only policy, merged over the template's actor.model.
model_type: {model_type}
action_dim: 7
num_action_chunks: 5
hidden: 8
"""


def write_plugin(root: Path, package: str, *, name: str | None = None,
                 model_type: str | None = None, dist: str | None = None,
                 policy_args: str = "", with_config: bool = True, import_error: bool = False,
                 builder: str | None = None) -> Path:
    """Write package ``package`` declaring policy ``name`` (default: the package name).

    Args:
        root: The folder to put on ``sys.path`` / ``PYTHONPATH``.
        package: The importable package (also names the distribution unless ``dist`` is given).
        name: Policy (and entry point) name.
        model_type: RLinf model type (default ``<name>_state``).
        dist: Distribution name.
        policy_args: Extra ``Policy(...)`` keyword arguments, as source text.
        with_config: Ship ``conf/model/<model_type>.yaml``.
        import_error: Make the declaration module fail on import.
        builder: ``Policy.builder`` (default: the package's ``policy:build``).

    Returns:
        ``root``.
    """
    name = name or package
    model_type = model_type or f"{name}_state"
    dist = dist or package.replace("_", "-")
    pkg = root / package
    (pkg / "conf" / "model").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "conf" / "__init__.py").write_text("")
    if with_config:
        (pkg / "conf" / "model" / f"{model_type}.yaml").write_text(
            MODEL_YAML.format(model_type=model_type))
    (pkg / "policy.py").write_text(textwrap.dedent("""\
        def build(cfg, torch_dtype):
            from dexrl_tiny_ext import build as build_tiny

            return build_tiny(cfg, torch_dtype)
    """))
    (pkg / "declaration.py").write_text(
        ("import dexrl_module_that_does_not_exist  # noqa: F401\n" if import_error else "")
        + "from dexrl.catalog import Policy\n\n"
        + f"POLICY = Policy({name!r}, {model_type!r}, 'A tiny state-only test policy',\n"
        + f"                {builder or package + '.policy:build'!r},\n"
        + f"                config_package={package + '.conf'!r}, {policy_args})\n")
    info = root / f"{dist.replace('-', '_')}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        f"[dexrl.policies]\n{name} = {package}.declaration:POLICY\n")
    return root
