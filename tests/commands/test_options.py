"""The flags several verbs share (dexrl/commands/options.py): written once, so each reads the
same in every verb that has it."""

from __future__ import annotations

import importlib

import click
import pytest
import typer

from dexrl.errors import DexrlError

VERBS = ("train", "validate", "doctor", "resume")
SHARED = {"--suite": ("train", "validate", "doctor"), "--model": ("train", "validate", "doctor"),
          "--config-name": ("train", "validate", "doctor"),
          "--mode": ("train", "validate", "doctor"), "--algo": ("train", "validate", "doctor"),
          "--noise": ("train", "validate", "doctor"), "--ckpt": ("train", "doctor"),
          "--ray-address": ("train", "resume", "doctor"), "--verbose": ("train", "resume"),
          "--stall-timeout": ("train", "resume")}


def _params(verb: str) -> dict[str, click.Parameter]:
    app = typer.Typer()
    importlib.import_module(f"dexrl.commands.{verb}").mount(app)
    command = typer.main.get_command(app)
    return {opt: p for p in command.params for opt in p.opts}


@pytest.mark.parametrize("flag", sorted(SHARED))
def test_a_shared_flag_is_the_same_in_every_verb(flag: str) -> None:
    found = {verb: _params(verb).get(flag) for verb in VERBS}
    have = sorted(verb for verb, param in found.items() if param is not None)
    assert have == sorted(SHARED[flag])
    first = found[have[0]]
    for verb in have[1:]:
        param = found[verb]
        assert (param.help, param.default, param.opts, param.envvar) == (
            first.help, first.default, first.opts, first.envvar), (flag, verb)


def test_mode_help_names_every_mode() -> None:
    from dexrl.config.modes import MODES

    help_text = _params("train")["--mode"].help
    assert all(mode in help_text for mode in MODES)


def test_the_overrides_argument_is_the_same_where_hydra_composes() -> None:
    helps = {verb: _params(verb)["overrides"].help for verb in ("train", "validate", "doctor")}
    assert len(set(helps.values())) == 1


@pytest.mark.parametrize("progress", ["a training run's progress", "a resumed run's progress"])
def test_json_needs_dry_run(progress: str) -> None:
    from dexrl.commands.options import refuse_json_without_dry_run

    refuse_json_without_dry_run(True, True, progress=progress, as_data="the plan")
    refuse_json_without_dry_run(False, False, progress=progress, as_data="the plan")
    with pytest.raises(DexrlError) as err:
        refuse_json_without_dry_run(True, False, progress=progress, as_data="the plan")
    assert err.value.code == "flags-json-needs-dry-run"
    assert err.value.message.startswith(f"--json needs --dry-run: {progress} is lines of text")
