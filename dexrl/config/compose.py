"""Compose the shipped Hydra tree (``conf/``, installed as ``dexrl.conf``): find a config by
suite and policy, compose it with overrides (checked by :mod:`dexrl.config.overrides`), and turn
Hydra's errors into one-line DexrlErrors."""

from __future__ import annotations

import re
import warnings
from importlib import resources
from pathlib import Path

from omegaconf import DictConfig, OmegaConf, open_dict
from omegaconf.errors import OmegaConfBaseException

from dexrl.catalog import SUITES, config_name, did_you_mean, policies
from dexrl.config.dotted import flatten
from dexrl.config.overrides import TRAINING, malformed_error, parse_overrides, unknown_key_error
from dexrl.errors import DexrlError, one_line


def conf_dir() -> Path:
    """Directory of the Hydra tree shipped inside the installed package."""
    return Path(str(resources.files("dexrl.conf")))


def _shipped_files() -> list[str]:
    return sorted(p.stem for p in conf_dir().glob("*.yaml"))


def plugin_configs() -> dict[str, tuple[str, list[str]]]:
    """Config name of each plugin policy × suite -> (template config, overrides composing it)."""
    out: dict[str, tuple[str, list[str]]] = {}
    for policy in policies().values():
        if policy.builtin:
            continue
        for suite in policy.suites:
            name = f"{suite}_ppo_{policy.model_type}"
            out[name] = (f"{suite}_ppo_{policy.template}", [
                f"hydra.searchpath=[pkg://{policy.config_package}]",
                f"+model@actor.model={policy.model_config_name}",
                f"runner.logger.experiment_name={name}",
                *policy.settings,
            ])
    return out


def list_configs() -> list[str]:
    """Names of every top-level config (``<suite>_ppo_<model_type>``), plugins' included."""
    return sorted({*_shipped_files(), *plugin_configs()})


def shipped_matrix() -> list[tuple[str, str, str]]:
    """(suite, policy, config name) for every suite × policy with a config."""
    names = set(list_configs())
    return [
        (s, p, config_name(s, p))
        for s in SUITES
        for p in policies()
        if config_name(s, p) in names
    ]


def resolve_config_name(suite: str | None, model: str | None, name: str | None) -> str:
    """Pick the top-level config from ``--config-name`` or ``--suite``/``--model``."""
    if name:
        stem = name[:-5] if name.endswith(".yaml") else name
        if stem not in list_configs():
            raise DexrlError(
                f"no shipped config named '{stem}'.{did_you_mean(stem, list_configs())}",
                "run `dexrl configs` to list them",
                where="--config-name",
                code="config-not-found",
            )
        return stem
    if not suite or not model:
        missing = "--suite" if not suite else "--model"
        raise DexrlError(
            f"{missing} is required when --config-name is not given",
            "e.g. `--suite libero_spatial --model pi0`",
            where=missing,
            code="config-selection-incomplete",
        )
    stem = config_name(suite, model)
    if stem not in list_configs():
        raise DexrlError(
            f"no shipped config for suite '{suite}' with model '{model}' ({stem})",
            "run `dexrl configs` to list them",
            code="config-not-found",
        )
    return stem


def compose(name: str, overrides: list[str] | None = None) -> DictConfig:
    """Compose a shipped top-level config with Hydra overrides.

    Raises:
        DexrlError: for malformed or unknown overrides, missing files or unreadable YAML.
    """
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.errors import HydraException

    overrides = list(overrides or [])
    parse_overrides(overrides, TRAINING)  # names a malformed item before Hydra sees them all
    source, base = plugin_configs().get(name, (name, []))
    try:
        with warnings.catch_warnings():
            # version_base 1.1 is RLinf's choice too; Hydra's migration notice is noise here.
            warnings.simplefilter("ignore")
            with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.1"):
                cfg = hydra_compose(config_name=source, overrides=[*base, *overrides])
    except (HydraException, OmegaConfBaseException) as exc:
        raise _hydra_error(exc, name, overrides) from None
    except Exception as exc:  # YAML scanner errors and friends surface here
        if type(exc).__module__.startswith("yaml"):
            raise DexrlError(
                f"unreadable YAML in config '{name}': {one_line(exc, typed=False)}",
                "fix the YAML syntax in that file",
                code="config-yaml-unreadable",
            ) from None
        raise
    if "hydra" in cfg:
        with open_dict(cfg):
            del cfg["hydra"]
    return cfg


def to_yaml(cfg: DictConfig, resolve: bool = True) -> str:
    """The config as YAML, interpolations resolved by default."""
    return OmegaConf.to_yaml(cfg, resolve=resolve)


def config_keys(name: str) -> list[str]:
    """Every dotted leaf key of a shipped config (no overrides), for did-you-mean hints."""
    return list(flatten(OmegaConf.to_container(compose(name), resolve=False)))


def _hydra_error(exc: BaseException, name: str, overrides: list[str]) -> DexrlError:
    text = one_line(exc, typed=False)
    key = re.search(r"Could not override '([^']+)'", text) or re.search(
        r"Key '([^']+)' is not in struct", text
    )
    if key:
        suggestion = did_you_mean(key.group(1), config_keys(name)) if overrides else ""
        return unknown_key_error(key.group(1), TRAINING, suggestion)
    if "Could not find" in text or "MissingConfig" in type(exc).__name__:
        return DexrlError(f"missing config file while composing '{name}': {text}",
                          "reinstall dexrl or fix the defaults list", code="config-file-missing")
    if "OverrideParse" in type(exc).__name__ or "parse" in text.lower():
        return malformed_error(text)
    return DexrlError(f"could not compose config '{name}': {text}",
                      "check the overrides and the config files", code="config-compose-failed")


def suite_of(cfg: DictConfig, suite: str | None) -> str | None:
    """The LIBERO suite a config trains on (from the flag, else from the env group)."""
    return suite if suite and suite.startswith("libero_") else OmegaConf.select(
        cfg, "env.train.task_suite_name", default=suite)


def renders(cfg: DictConfig, split: str | None = None) -> bool:
    """Whether the config's envs (or those of ``split``: train, eval) are LIBERO's, which render
    with OpenGL in env subprocesses; dexrl's own tasks (``dexrl_env``) need neither."""
    return any(OmegaConf.select(cfg, f"env.{s}") is not None
               and not OmegaConf.select(cfg, f"env.{s}.dexrl_env", default=None)
               for s in ((split,) if split else ("train", "eval")))
