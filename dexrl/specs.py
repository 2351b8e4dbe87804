"""What a policy and a suite are: the declarations the catalog and plugins share.

:class:`Policy` (with its :class:`ModelSpec`) is what a plugin's entry point declares and what
:data:`POLICIES`, the built-ins, hold; :mod:`dexrl.plugins` checks declarations and
:mod:`dexrl.catalog` merges them. Only the standard library is imported here.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

BUILTIN = "dexrl"  # the distribution of the built-in policies

# Code a declaration refers to, imported only when used: a ``"module:attribute"`` string (what a
# plugin's entry point declares) or a function of no arguments that imports and returns it (what
# the built-ins declare, in their own package: dexrl.models.pi0.spec, dexrl.models.dm0.spec).
Reference = str | Callable[[], Any]


@dataclass(frozen=True)
class Suite:
    """A task suite and its standard evaluation horizon (openpi/RLinf standalone evals).

    Attributes:
        smoke: The ``conf/smoke`` overlay ``--smoke`` applies (``None``: the config is small
            enough for a CPU already, ``--smoke`` only adds the tiny checkpoint).
        libero: A LIBERO suite; else one of dexrl's own tasks.
        shipped_horizon: The episode horizon the shipped configs train and validate with, where
            it is not ``horizon``: RLinf's own configs' (``validate`` does not warn about it).
        eval_task: What ``dexrl eval`` asks about the suite's tasks: a :data:`Reference` to a
            :class:`dexrl.vec_env.EvalTask` (its goals, its envs, its blind bound).
    """

    name: str
    horizon: int
    num_tasks: int
    smoke: str | None = "cpu"
    libero: bool = True
    shipped_horizon: int | None = None
    eval_task: Reference = "dexrl.bridge.envs.libero:TASK"


_BUILTIN_TASK = "dexrl.bridge.envs.tasks:TASK"
SUITES: dict[str, Suite] = {
    s.name: s
    for s in (
        # shipped_horizon: RLinf's LIBERO configs train with these (conf/env/libero_*.yaml);
        # libero_90's 512 is cut to 400 in dexrl's files (docs/configs.md).
        Suite("libero_spatial", 220, 10, shipped_horizon=240),
        Suite("libero_object", 280, 10, shipped_horizon=240),
        Suite("libero_goal", 300, 10, shipped_horizon=320),
        Suite("libero_10", 520, 10, shipped_horizon=480),
        Suite("libero_90", 400, 90),
        # dexrl's built-in tasks (conf/env/reach*.yaml), for learning runs on a CPU; reach_cued
        # has 3 targets as shipped (its env config may set more).
        Suite("reach", 10, 1, smoke=None, libero=False, eval_task=_BUILTIN_TASK),
        Suite("reach_cued", 10, 3, smoke=None, libero=False, eval_task=_BUILTIN_TASK),
    )
}
LIBERO_SUITES = tuple(name for name, s in SUITES.items() if s.libero)
BUILTIN_TASKS = tuple(name for name, s in SUITES.items() if not s.libero)


@dataclass(frozen=True)
class ModelSpec:
    """What dexrl's checks, plan, eval and hub know about a model type, without importing it.

    References to code are :data:`Reference` values, imported only when used
    (:func:`load_reference`), so declaring a spec stays cheap.

    Attributes:
        tokenizer_files: Tokenizer files the checkpoint folder needs; any one name of each tuple.
        preprocessor: The folder needs ``preprocessor_config.json`` (the image processor).
        norm_stats: The folder needs ``norm_stats.json`` (state/action statistics), which the
            checks also parse.
        params: (total, trainable with ``train_expert_only``) parameter counts of the real
            model, for the memory and disk estimates of ``--dry-run`` (0: unknown).
        prefix_kv_bytes: Bytes of one sample's prefix keys/values in bf16 at the real size (the
            training prefix cache's unit, for ``--dry-run``; 0: unknown).
        memory_gb_per_sample: (a training sample's activations with ``train_expert_only``, a
            rollout sample's, a CUDA-graphed rollout sample's) in GB at the real size in bf16,
            for the memory estimate (0: the generic figures of :mod:`dexrl.training.memory`).
        extra_keys: ``"module:NAME"`` of the checkpoint entries the network does not use
            (fnmatch patterns; loading tolerates them, ``export`` reports them).
        check_tensors: ``"module:function"``, the deep checkpoint check ``download`` and
            ``doctor --ckpt`` run on the weight headers:
            ``function(config, tensors, *, config_source, weights_source) -> list[Finding]``
            (``tensors``: name -> :class:`dexrl.checkpoints.files.headers.TensorInfo`). None: not
            checked.
        check_config: ``"module:function"``, model-specific config checks ``validate`` runs:
            ``function(cfg) -> list[Finding]``. None: none.
        inference: ``"module:Class"``, the inference policy ``eval`` loads with
            ``Class.from_checkpoint(ckpt_dir, device=, dtype=, norm_mode=)``. None: no eval.
    """

    tokenizer_files: tuple[tuple[str, ...], ...] = ()
    preprocessor: bool = False
    norm_stats: bool = False
    params: tuple[float, float] = (0.0, 0.0)
    prefix_kv_bytes: float = 0.0
    memory_gb_per_sample: tuple[float, float, float] = (0.0, 0.0, 0.0)
    extra_keys: Reference | None = None
    check_tensors: Reference | None = None
    check_config: Reference | None = None
    inference: Reference | None = None


def load_reference(reference: Reference) -> Any:
    """What a :data:`Reference` of a declaration refers to, imported now."""
    if callable(reference):
        return reference()
    module, _, name = reference.partition(":")
    return getattr(importlib.import_module(module), name)


@dataclass(frozen=True)
class Policy:
    """A policy dexrl can train: one registry entry, built in or declared by a plugin.

    A plugin's entry point (group ``dexrl.policies``) resolves to one of these; importing it must
    stay cheap, so the builder and the smoke hook are :data:`Reference` values imported only
    when used.

    Attributes:
        name: The CLI name (``--model``), also the entry point's name for a plugin.
        model_type: The RLinf ``model_type`` the builder is registered under.
        description: One line for ``dexrl configs``.
        builder: ``"module:function"``; ``function(cfg, torch_dtype)`` returns the RLinf policy.
            None for the built-ins: their adapters are the bridge's
            (:data:`dexrl.bridge.registry.ADAPTERS`), the only package that imports RLinf.
        config_package: Importable package whose ``model/`` folder holds the model config.
        model_config: Name of that config in the ``model`` group (default: ``model_type``).
        template: Model type of the shipped configs a plugin policy is composed on.
        suites: The suites it trains on (default: every LIBERO suite).
        settings: Hydra overrides applied after the model config (its default settings).
        model: What dexrl knows about the policy's checkpoints (:class:`ModelSpec`).
        smoke_checkpoint: A :data:`Reference` to ``function(path)`` writing a tiny checkpoint
            for ``--smoke``, or ``None`` when the policy needs none.
        replaces_builtin: Whether a plugin may take over a built-in name or model type.
        distribution: The distribution that declares it (set by discovery for plugins).
    """

    name: str
    model_type: str
    description: str
    builder: Reference | None = None
    config_package: str = "dexrl.conf"
    model_config: str = ""
    template: str = "dexbotic_pi0"
    suites: tuple[str, ...] = LIBERO_SUITES
    model: ModelSpec = ModelSpec()
    settings: tuple[str, ...] = ()
    smoke_checkpoint: Reference | None = None
    replaces_builtin: bool = False
    distribution: str = BUILTIN

    @property
    def builtin(self) -> bool:
        """Shipped with dexrl (its top-level configs are files in ``dexrl.conf``)."""
        return self.distribution == BUILTIN

    @property
    def model_config_name(self) -> str:
        """The config's name in the ``model`` group."""
        return self.model_config or self.model_type
