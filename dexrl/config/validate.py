"""Compose a config, then run every check on it: the one workflow behind ``train``,
``resume`` and ``validate`` (what one refuses, the others refuse too)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig

from dexrl.config.checks import Facts, run_config_checks
from dexrl.config.compose import compose, resolve_config_name, suite_of
from dexrl.config.modes import place_async
from dexrl.config.owned_keys import owned_override_findings, without_owned
from dexrl.config.settings import Settings

if TYPE_CHECKING:
    from dexrl.errors import Finding


NORM_MODE_KEY = "actor.model.dexbotic.norm_mode"


@dataclass
class Validated:
    """A composed config, everything the checks found, and its typed settings (read once the
    config is complete: :func:`check_composed`)."""

    name: str
    cfg: DictConfig
    findings: list[Finding]
    settings: Settings | None = None

    def norm_mode(self) -> dict[str, Any]:
        """The checkpoint normalization the config asks for, as ``validate --json`` reports it
        (``set``: the config names one; else the adapters' mean_std)."""
        mode = (self.settings or Settings.read(self.cfg)).actor.model.dexbotic.norm_mode
        return {"key": NORM_MODE_KEY, "value": mode or "mean_std", "set": bool(mode)}


def compose_and_check(
    suite: str | None,
    model: str | None,
    config_name: str | None,
    overrides: list[str],
    gpus_per_node: int = 8,
    cpu_only: bool = False,
) -> Validated:
    """Compose the chosen config with overrides and run every config check.

    What ``train`` refuses in a config is found here, for ``train`` and ``validate`` alike:
    overrides of the fields dexrl sets
    (:func:`dexrl.config.owned_keys.owned_override_findings`; they are
    left out of the composition), then :func:`dexrl.config.checks.run_config_checks`.
    """
    return check_composed(compose_request(suite, model, config_name, overrides), suite,
                          gpus_per_node, cpu_only)


def compose_request(suite: str | None, model: str | None, config_name: str | None,
                    overrides: list[str]) -> Validated:
    """:func:`compose_and_check`'s first half: the composed config, its findings only those of
    overrides of the fields dexrl sets. ``train`` completes the config (its run folder) before
    :func:`check_composed` checks it."""
    name = resolve_config_name(suite, model, config_name)
    owned = owned_override_findings(overrides)
    return Validated(name, compose(name, without_owned(overrides)), owned)


def check_composed(composed: Validated, suite: str | None, gpus_per_node: int = 8,
                   cpu_only: bool = False) -> Validated:
    """:func:`compose_and_check`'s second half: every config check on a composed config (an
    async run on GPUs first gets its default placement, :func:`dexrl.config.modes.place_async`)."""
    cfg = composed.cfg
    place_async(cfg, gpus_per_node, cpu_only)
    facts = Facts(suite=suite_of(cfg, suite), gpus_per_node=gpus_per_node, cpu_only=cpu_only)
    settings = Settings.read(cfg)
    found = run_config_checks(cfg, facts, settings)
    return Validated(composed.name, cfg, composed.findings + found, settings)
