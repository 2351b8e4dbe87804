"""The CLI shell: help, version, configs listing, error rendering, import weight."""

from __future__ import annotations

import subprocess
import sys

import pytest
from typer.testing import CliRunner

from dexrl import __version__
from dexrl.cli import VERBS, app, load_verb
from dexrl.config.compose import list_configs

runner = CliRunner()


def test_help_lists_verbs() -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for verb in ("validate", "configs"):
        assert verb in result.output


def test_version() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.output.strip() == f"dexrl {__version__}"


@pytest.mark.spawns
@pytest.mark.parametrize("module", ["dexrl", "dexrl.cli"])
def test_python_dash_m_runs_the_cli(module: str) -> None:
    """Clusters often launch through ``python -m``: both spellings are the CLI, exit codes too."""
    run = [sys.executable, "-m", module]
    done = subprocess.run([*run, "--version"], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout.strip()) == (0, f"dexrl {__version__}")
    done = subprocess.run([*run, "resume", "--bogus"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stderr.startswith("error: dexrl resume: No such option")


def test_usage_lines_name_arguments_in_capitals() -> None:
    usage = {verb: runner.invoke(app, [verb, "--help"]).output.splitlines()[0] for verb in VERBS}
    assert usage["resume"] == "Usage: dexrl resume [OPTIONS] RUN_DIR [OVERRIDES]..."
    assert usage["plot"] == "Usage: dexrl plot [OPTIONS] RUN_DIRS..."
    assert not [line for line in usage.values() if "{" in line or "}" in line]


def test_validate_help_has_examples() -> None:
    result = runner.invoke(app, ["validate", "--help"])
    assert result.exit_code == 0
    assert "dexrl validate --suite libero_spatial --model pi0" in result.output


def test_configs_lists_every_shipped_config() -> None:
    result = runner.invoke(app, ["configs"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    names = list_configs()
    assert len(names) == 14  # (5 LIBERO suites + reach + reach_cued) × 2 policies
    for name in names:
        assert name in result.output


def test_unknown_verb_is_a_usage_error() -> None:
    result = runner.invoke(app, ["trian"])
    assert result.exit_code == 2
    assert "Traceback" not in result.output


@pytest.mark.spawns
def test_help_and_validate_do_not_import_heavy_stacks(tmp_path) -> None:
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from dexrl.cli import app\n"
        "r = CliRunner().invoke(app, ['validate', '--suite', 'libero_spatial', '--model', 'pi0'])\n"
        "assert r.exit_code == 0, r.output\n"
        "heavy = sorted(m for m in ('torch', 'ray', 'rlinf', 'transformers') if m in sys.modules)\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


USAGE_ERRORS = [
    (["validate", "--bogus"], "error: dexrl validate: No such option: --bogus"),
    (["--bogus"], "error: dexrl: No such option: --bogus"),
    (["trian"], "error: dexrl: No such command 'trian'. Did you mean 'train'?"),
    (["validate", "--gpus-per-node", "0"], "Invalid value for '--gpus-per-node'"),
    (["validate", "--gpus-per-node", "-1"], "Invalid value for '--gpus-per-node'"),
    (["validate", "--gpus-per-node", "1.5"], "Invalid value for '--gpus-per-node'"),
    (["train", "--gpus-per-node", "-2"], "Invalid value for '--gpus-per-node'"),
    (["train", "--stall-timeout", "0"], "Invalid value for '--stall-timeout'"),
    (["train", "--stall-timeout", "soon"], "Invalid value for '--stall-timeout'"),
    (["resume", "runs/x", "--step", "-1"], "Invalid value for '--step'"),
    (["validate", "--explain"], "Option '--explain' requires an argument"),
]


def test_usage_errors_are_one_error_and_one_hint() -> None:
    for args, message in USAGE_ERRORS:
        result = runner.invoke(app, args)
        assert result.exit_code == 2
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 2 and message in lines[0], result.stderr
        assert lines[1].startswith("hint: `dexrl")


def test_verb_table_matches_the_verb_modules() -> None:
    """`dexrl --help` lists VERBS without importing them: each summary is the verb's own."""
    for name in VERBS:
        command = load_verb(name)
        assert command.name == name
        assert command.help.strip().splitlines()[0] == VERBS[name][1], name
    listing = " ".join(runner.invoke(app, ["--help"]).output.split())
    for name, (_, summary) in VERBS.items():
        assert f"{name} {summary}" in listing


@pytest.mark.spawns
@pytest.mark.parametrize("args", [["--help"], *([verb, "--help"] for verb in VERBS)])
def test_help_imports_no_heavy_stack(args: list[str]) -> None:
    """Help answers without torch, omegaconf/hydra, rich, rlinf or the hub client."""
    code = (
        "import sys\n"
        f"sys.argv = ['dexrl', *{args!r}]\n"
        "from dexrl.cli import main\n"
        "try:\n    main()\nexcept SystemExit as exc:\n    assert not exc.code, exc.code\n"
        "heavy = ('torch', 'omegaconf', 'hydra', 'rich', 'rlinf', 'huggingface_hub', 'pydantic')\n"
        "print(','.join(sorted(m for m in heavy if m in sys.modules)), file=sys.stderr)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "Usage: dexrl" in out.stdout
    assert out.stderr.strip().splitlines()[-1:] in ([], [""]), out.stderr
