"""Write a tiny dexrl policy plugin (an installed distribution) into a folder, for the tests.

The folder holds the package and its ``.dist-info`` (METADATA and ``entry_points.txt``), which is
what ``pip install`` leaves in site-packages: putting the folder on ``sys.path`` or
``PYTHONPATH`` installs it for :mod:`importlib.metadata`, in this process, in subprocesses and in
Ray workers. The policy is ``dexrl_tiny_ext``'s state-only policy (``tests/helpers/ext`` must be
importable where it is built).

With ``with_checkpoint`` the plugin also declares a :class:`~dexrl.catalog.ModelSpec` and ships
``checkpoint.py``: a ``write`` hook that makes a real checkpoint folder of its own (config.json,
safetensors weights and the tokenizer file its spec asks for) and the spec's tensor check.
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

CHECKPOINT_PY = """\
from pathlib import Path

import torch
from safetensors.torch import save_file

from dexrl.errors import Finding

MODEL_TYPE = {model_type!r}
# The tensors of dexrl_tiny_ext.TinyPolicy (8-d state, hidden 16, 7-d actions, 5 per chunk).
SHAPES = {{"body.linear.weight": [16, 8], "body.linear.bias": [16], "mean.weight": [35, 16],
          "mean.bias": [35], "log_std": [35], "value_head.weight": [1, 16],
          "value_head.bias": [1]}}


def write(path):
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text('{{"model_type": "%s"}}' % MODEL_TYPE)
    (path / "vocab.txt").write_text("pick\\nplace\\n")
    save_file({{k: torch.zeros(s) for k, s in SHAPES.items()}}, str(path / "model.safetensors"))


def check_tensors(config, tensors, *, config_source, weights_source):
    wrong = sorted(k for k, s in SHAPES.items()
                   if k not in tensors or list(tensors[k].shape) != s)
    if not wrong:
        return []
    return [Finding("error", weights_source, "tiny tensors missing or mis-shaped: "
                    + ", ".join(wrong), "rewrite the checkpoint with the plugin's write hook")]
"""
SPEC_ARGS = ("smoke_checkpoint={package!r} + '.checkpoint:write', "
             "model=ModelSpec(tokenizer_files=(('vocab.txt',),), params=(791.0, 791.0), "
             "check_tensors={package!r} + '.checkpoint:check_tensors')")


def write_plugin(root: Path, package: str, *, name: str | None = None,
                 model_type: str | None = None, dist: str | None = None,
                 policy_args: str = "", with_config: bool = True, import_error: bool = False,
                 builder: str | None = None, with_checkpoint: bool = False) -> Path:
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
        with_checkpoint: Ship ``checkpoint.py`` and declare its spec and smoke hook.

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
        from pathlib import Path


        def build(cfg, torch_dtype):
            from dexrl_tiny_ext import build as build_tiny

            model = build_tiny(cfg, torch_dtype)
            weights = Path(str(cfg.get("model_path"))) / "model.safetensors"
            if LOADS_WEIGHTS:
                from safetensors.torch import load_file

                model.load_state_dict(load_file(str(weights)))
            return model
    """).replace("LOADS_WEIGHTS", str(with_checkpoint)))
    if with_checkpoint:
        (pkg / "checkpoint.py").write_text(CHECKPOINT_PY.format(model_type=model_type))
        policy_args = SPEC_ARGS.format(package=package) + (", " + policy_args if policy_args
                                                           else "")
    (pkg / "declaration.py").write_text(
        ("import dexrl_module_that_does_not_exist  # noqa: F401\n" if import_error else "")
        + "from dexrl.catalog import ModelSpec, Policy\n\n"
        + f"POLICY = Policy({name!r}, {model_type!r}, 'A tiny state-only test policy',\n"
        + f"                {builder or package + '.policy:build'!r},\n"
        + f"                config_package={package + '.conf'!r}, {policy_args})\n")
    info = root / f"{dist.replace('-', '_')}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        f"[dexrl.policies]\n{name} = {package}.declaration:POLICY\n")
    return root
