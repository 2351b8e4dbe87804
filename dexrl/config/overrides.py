"""``key=value`` overrides: one parser, one value typing, one applier, and every error about them.

Overrides reach three configs, each a :data:`Target`:

- ``TRAINING``: the training config Hydra composes (``train``, ``validate``, ``doctor``);
  :func:`dexrl.config.compose.compose` checks them here, then hands the text to Hydra.
- ``RUN``: a run's saved config (``resume``), applied here with :func:`apply_overrides`.
- ``ENV``: LIBERO's env config (``eval``), applied here too.

Syntax: the training and run configs take Hydra's grammar (``+key=value`` adds a key, ``++key``
adds or sets it); a malformed item, one without a key and a sweep (``key=a,b``) are refused by
name. The env config's values are free text (an instruction may hold commas or quotes Hydra's
grammar refuses), so its items are only split at the first ``=`` and take no prefix.

Values applied here are typed as YAML, by OmegaConf's loader (``3`` an int, ``[a,b]`` a list,
``null`` None, quotes make a string); Hydra types the training config's itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Literal

from omegaconf import DictConfig, OmegaConf, open_dict

from dexrl.errors import DexrlError, one_line

Target = Literal["training", "run", "env"]
TRAINING: Target = "training"  # composed by Hydra: train, validate, doctor
RUN: Target = "run"  # a run's saved config: resume
ENV: Target = "env"  # LIBERO's env config: eval


@dataclass(frozen=True)
class Override:
    """One ``key=value`` item, parsed."""

    text: str  # as given
    key: str  # the dotted key, without a ``+``/``++`` prefix
    value: str  # the text after the first ``=`` ('' when there is none)
    adds: bool = False  # ``+key`` / ``++key``: the key may be new


def parse_overrides(items: Sequence[str], target: Target) -> list[Override]:
    """Parse every item for ``target``; the first bad one is refused by name.

    Raises:
        DexrlError: ``override-syntax``, ``override-no-key`` or ``override-sweep`` (training and
            run configs), ``eval-env-override-syntax`` (env config).
    """
    if target == ENV:
        return [_env_item(item) for item in items]
    _check_grammar(list(items))
    parsed = []
    for item in items:
        key, _, value = item.partition("=")
        parsed.append(Override(item, key.lstrip("+"), value, adds=key.startswith("+")))
    return parsed


def _env_item(item: str) -> Override:
    key, sep, value = item.partition("=")
    key = key.strip()
    if not sep or not key:
        raise DexrlError("an env override must be key=value", "e.g. "
                         "init_params.camera_heights=224", where=item,
                         code="eval-env-override-syntax")
    return Override(item, key, value)


def _check_grammar(items: list[str]) -> None:
    """Parse each item with Hydra's own grammar so that the bad one can be named."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    parser = OverridesParser.create()
    for i, item in enumerate(items):
        try:
            (parsed,) = parser.parse_overrides([item])
        except HydraException:
            raise DexrlError(f"malformed override '{item}'", _syntax_fix(item, items[i + 1:]),
                             where="overrides", code="override-syntax") from None
        if not parsed.key_or_group:
            raise DexrlError(f"override '{item}' has no key", "write key=value",
                             where="overrides", code="override-no-key")
        if parsed.is_sweep_override():
            raise DexrlError(
                f"override '{item}' is a sweep; dexrl runs one experiment at a time",
                "pass a single value (quote a list: key='[a,b]')",
                where="overrides",
                code="override-sweep",
            )


def _syntax_fix(bad: str, rest: list[str]) -> str:
    """The fix for an override Hydra cannot parse, guessing the usual slips."""
    key, eq, value = bad.partition("=")
    if eq and value.startswith("="):
        return f"use a single '=': `{key}={value.lstrip('=')}`"
    value = rest[1:2] if rest[:1] == ["="] else [v for v in rest[:1] if "=" not in v]
    if not eq and value:
        return f"write the key and value as one word: `{bad}={value[0]}` (no spaces around '=')"
    if not eq:
        return f"write `{bad}=VALUE` (key=value, no spaces around '='; ~{bad} deletes a key)"
    return ("overrides are key=value, e.g. `runner.max_steps=10` (+key=value adds a key; quote "
            "values with spaces or brackets)")


def apply_overrides(cfg: DictConfig, overrides: Sequence[Override], target: Target) -> None:
    """Set each override in ``cfg`` (in place, in order), its value typed as YAML.

    A key ``cfg`` lacks is refused unless the override adds it (``+key``). The run config
    (``resume``) refuses such a key up front and merges a value freely (a mapping may bring new
    keys below an existing one); the env config (``eval``) is merged in struct mode, so that
    OmegaConf names whatever does not apply.

    Raises:
        DexrlError: ``override-unknown-key`` (run config); ``eval-env-override-invalid`` (env
            config: an unknown key or a value that does not apply).
    """
    for override in overrides:
        if target != ENV and not override.adds and OmegaConf.select(
                cfg, override.key, default=_ABSENT) is _ABSENT:
            raise unknown_key_error(override.key, target)
        try:
            with open_dict(cfg) if target != ENV else nullcontext():
                cfg.merge_with_dotlist([f"{override.key}={override.value}"])
        except Exception as exc:  # omegaconf's and YAML's errors for what does not apply
            if target != ENV:
                raise
            raise _env_invalid(override, exc) from None


_ABSENT = object()


def _env_invalid(override: Override, exc: Exception) -> DexrlError:
    return DexrlError(f"bad env override: {one_line(exc, typed=False, words=12)}",
                      "use key=value with a key of the LIBERO env config (e.g. "
                      "init_params.camera_heights=224)", where=override.text,
                      code="eval-env-override-invalid")


def unknown_key_error(key: str, target: Target, suggestion: str = "") -> DexrlError:
    """An override of a key the config does not have (``suggestion``: a did-you-mean suffix)."""
    if target == RUN:
        return DexrlError(f"unknown config key '{key}' in overrides",
                          "check the run's config.yaml, or prefix the override with + to add "
                          "a key", where="overrides", code="override-unknown-key")
    return DexrlError(
        f"unknown config key '{key}' in overrides.{suggestion}",
        "check the spelling (`dexrl validate ... --print` shows every key), "
        "or prefix the override with + to add a new key",
        where="overrides",
        code="override-unknown-key",
    )


def malformed_error(text: str) -> DexrlError:
    """An override Hydra's composition could not parse (``text``: Hydra's words)."""
    return DexrlError(f"malformed override: {text}",
                      "overrides are key=value, quote values with spaces",
                      code="override-syntax")
