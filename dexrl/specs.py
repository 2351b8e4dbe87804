"""What a policy and a suite are: the declarations the catalog and plugins share.

:class:`Policy` (with its :class:`ModelSpec`) is what a plugin's entry point declares and what
:data:`POLICIES`, the built-ins, hold; :mod:`dexrl.plugins` checks declarations and
:mod:`dexrl.catalog` merges them. Only the standard library is imported here.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

BUILTIN = "dexrl"  # the distribution of the built-in policies


@dataclass(frozen=True)
class Suite:
    """A task suite and its standard evaluation horizon (openpi/RLinf standalone evals).

    Attributes:
        smoke: The ``conf/smoke`` overlay ``--smoke`` applies (``None``: the config is small
            enough for a CPU already, ``--smoke`` only adds the tiny checkpoint).
        libero: A LIBERO suite (``dexrl eval`` runs those); else one of dexrl's own tasks.
    """

    name: str
    horizon: int
    num_tasks: int
    smoke: str | None = "cpu"
    libero: bool = True


SUITES: dict[str, Suite] = {
    s.name: s
    for s in (
        Suite("libero_spatial", 220, 10),
        Suite("libero_object", 280, 10),
        Suite("libero_goal", 300, 10),
        Suite("libero_10", 520, 10),
        Suite("libero_90", 400, 90),
        # dexrl's built-in tasks (conf/env/reach*.yaml), for learning runs on a CPU; reach_cued
        # has 3 targets as shipped (its env config may set more).
        Suite("reach", 10, 1, smoke=None, libero=False),
        Suite("reach_cued", 10, 3, smoke=None, libero=False),
    )
}
LIBERO_SUITES = tuple(name for name, s in SUITES.items() if s.libero)
BUILTIN_TASKS = tuple(name for name, s in SUITES.items() if not s.libero)


@dataclass(frozen=True)
class ModelSpec:
    """What dexrl's checks, plan, eval and hub know about a model type, without importing it.

    References to code are ``"module:attribute"`` strings, imported only when used
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
        extra_keys: ``"module:NAME"`` of the checkpoint entries the network does not use
            (fnmatch patterns; loading tolerates them, ``export`` reports them).
        check_tensors: ``"module:function"``, the deep checkpoint check ``download`` and
            ``doctor --ckpt`` run on the weight headers:
            ``function(config, tensors, *, config_source, weights_source) -> list[Finding]``
            (``tensors``: name -> :class:`dexrl.hub.weights.TensorInfo`). None: not checked.
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
    extra_keys: str | None = None
    check_tensors: str | None = None
    check_config: str | None = None
    inference: str | None = None


def load_reference(reference: str) -> Any:
    """Import a ``"module:attribute"`` reference of a declaration."""
    module, _, name = reference.partition(":")
    return getattr(importlib.import_module(module), name)


@dataclass(frozen=True)
class Policy:
    """A policy dexrl can train: one registry entry, built in or declared by a plugin.

    A plugin's entry point (group ``dexrl.policies``) resolves to one of these; importing it must
    stay cheap, so the builder and the smoke hook are ``"module:function"`` strings imported only
    when used.

    Attributes:
        name: The CLI name (``--model``), also the entry point's name for a plugin.
        model_type: The RLinf ``model_type`` the builder is registered under.
        description: One line for ``dexrl configs``.
        builder: ``"module:function"``; ``function(cfg, torch_dtype)`` returns the RLinf policy.
        config_package: Importable package whose ``model/`` folder holds the model config.
        model_config: Name of that config in the ``model`` group (default: ``model_type``).
        template: Model type of the shipped configs a plugin policy is composed on.
        suites: The suites it trains on (default: every LIBERO suite).
        settings: Hydra overrides applied after the model config (its default settings).
        model: What dexrl knows about the policy's checkpoints (:class:`ModelSpec`).
        smoke_checkpoint: ``"module:function"`` writing a tiny checkpoint to a path for
            ``--smoke``, or ``None`` when the policy needs none.
        replaces_builtin: Whether a plugin may take over a built-in name or model type.
        distribution: The distribution that declares it (set by discovery for plugins).
        always_register: Register even when the builder's module is not installed (built-ins
            that must fail loudly at build time instead of as "unknown model type").
    """

    name: str
    model_type: str
    description: str
    builder: str
    config_package: str = "dexrl.conf"
    model_config: str = ""
    template: str = "dexbotic_pi0"
    suites: tuple[str, ...] = LIBERO_SUITES
    model: ModelSpec = ModelSpec()
    settings: tuple[str, ...] = ()
    smoke_checkpoint: str | None = None
    replaces_builtin: bool = False
    distribution: str = BUILTIN
    always_register: bool = True

    @property
    def builtin(self) -> bool:
        """Shipped with dexrl (its top-level configs are files in ``dexrl.conf``)."""
        return self.distribution == BUILTIN

    @property
    def model_config_name(self) -> str:
        """The config's name in the ``model`` group."""
        return self.model_config or self.model_type


# The built-in models; the π0 figures follow the memory budget in the model notes (3.24 B
# parameters, ≈314 M trainable with train_expert_only). Prefix keys/values per sample: layers × 2 ×
# KV heads × head_dim × prefix tokens × 2 bytes; π0: 18 × 2 × 1 × 256 × (2·256 + 48); DM0 (the
# sizes bench/dm0_policy.py assumes): 28 × 2 × 8 × 128 × (2·169 + 200).
PI0 = ModelSpec(
    tokenizer_files=(("tokenizer.model",), ("tokenizer_config.json",)),
    preprocessor=True, norm_stats=True, params=(3.24e9, 0.314e9),
    prefix_kv_bytes=18 * 2 * 1 * 256 * 560 * 2,
    extra_keys="dexrl.models.pi0.loader:ALLOWED_EXTRA_KEYS",
    check_tensors="dexrl.hub.weights:check_pi0_tensors",
    inference="dexrl.models.pi0.policy:Pi0Policy",
)
DM0 = ModelSpec(
    tokenizer_files=(("vocab.json",), ("merges.txt",), ("tokenizer_config.json",)),
    norm_stats=True, params=(2.4e9, 0.45e9), prefix_kv_bytes=28 * 2 * 8 * 128 * 538 * 2,
    extra_keys="dexrl.models.dm0.loader:ALLOWED_EXTRA_KEYS",
    check_config="dexrl.config.checks:check_dm0_settings",
    inference="dexrl.models.dm0.policy:Dm0Policy",
)

POLICIES: dict[str, Policy] = {
    p.name: p
    for p in (
        Policy("pi0", "dexbotic_pi0", "Dexbotic π0: SigLIP + Gemma-2B with a Gemma action expert",
               "dexrl.bridge.pi0_policy:build", model=PI0,
               suites=(*LIBERO_SUITES, *BUILTIN_TASKS),
               smoke_checkpoint="dexrl.testing.tiny_pi0:write_tiny_pi0"),
        # dexbotic_dm0 is also an RLinf built-in, which dexrl replaces only once its own adapter
        # is installed.
        Policy("dm0", "dexbotic_dm0", "Dexbotic DM0: PE ViT-L/14@728 + Qwen3 with a Qwen3 expert",
               "dexrl.bridge.dm0_policy:build", template="dexbotic_dm0", model=DM0,
               suites=(*LIBERO_SUITES, *BUILTIN_TASKS),
               smoke_checkpoint="dexrl.testing.dm0:write_tiny_dm0", always_register=False),
    )
}
