"""Every command block of README.md and docs/learning.md, run as written on the CPU.

The ``bash`` blocks' lines that start with ``dexrl``, ``.venv/bin/dexrl``, ``make`` or
``.venv/bin/python bench/`` (backslash continuations joined, ``#`` comments dropped) and the
``console`` blocks' ``$ `` lines are the commands; they run in the page's order, from a fresh
working folder holding ``.venv`` and ``bench`` (links to this checkout's), so that the relative
paths the docs show (``.venv/bin/dexrl``, ``runs/...``, ``bench/...``) mean what they say and
nothing is written into the checkout. Each file's commands share that folder, as one user's would.

What the test changes, and nothing else:

- length, for time only: ``runner.max_steps=2`` appended to a ``train`` of a built-in task
  (``reach``, ``reach_cued``; the LIBERO ``--smoke`` run is one step already);
  ``--episodes-per-task 2`` for ``eval``; ``--seeds 0 --steps 2 --eval-episodes 2`` for
  ``bench/reach_learning.py`` (every arm and every mask still runs);
- placeholders: a path with ``<time>`` (``runs/reach_cued_pi0_<time>``) becomes the one folder
  the earlier commands created that matches it;
- ``dexrl`` (a ``console`` block's ``$ dexrl``, for an activated venv) runs ``.venv/bin/dexrl``;
- a command already run on the page (same words after the above) is not run again; its output
  is checked against the later block;
- ``COLUMNS=250``; the bench's default ``--out`` (a new temporary folder, which its ``curves:``
  line names) is removed after the checks.

Commands that cannot run here are skipped by :data:`SKIPPED`, each with its reason; the test
fails when a command is neither run nor listed, and when a listed one left the docs. A block's
``# or --model dm0`` alternatives are not run (the bench's DM0 command trains and evaluates the
cued DM0 through the same commands).

Checked, beside exit code 0: every output line a ``console`` block shows (numbers and ``...``
match any), a run folder with ``curves.png`` and the last step's checkpoint after each ``train``
of a built-in task, the blind bound line and ``results.json`` after a ``reach_cued`` ``eval``
(in the default folder ``RUN/eval/global_step_N-reach_cued``), and the bench's ``eval`` and
``curves:`` lines. A quick test (in ``make test``) checks the step counts the pages quote against
the shipped configs: the cued figures' ``--steps`` are the cued configs' ``runner.max_steps``,
the reach run's "step 1 of 20" the reach config's.
"""

from __future__ import annotations

import glob
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from dexrl.config.compose import compose

ROOT = Path(__file__).resolve().parents[2]
PAGES = ["README.md", "docs/learning.md"]
DEXRL = ".venv/bin/dexrl"
STEPS = 2  # global steps of a shortened train
EPISODES = 2  # per target of a shortened eval

# Commands not run, with the reason (the command as the page writes it, comments dropped).
SKIPPED = {
    "make install": "builds the venv this test runs in, from the network",
    "make test": "the whole default suite, of which this slow test is not part; minutes",
    "dexrl download Dexmal/libero-db-pi0": "a hub download (network)",
    "dexrl doctor --suite libero_spatial --model pi0 --ckpt Dexmal/libero-db-pi0":
        "needs the downloaded checkpoint and, to pass, a GPU node",
    "dexrl train --suite libero_spatial --model pi0 --ckpt Dexmal/libero-db-pi0":
        "a real PPO run on GPUs with a downloaded checkpoint",
}


@dataclass
class Command:
    """One command of a page: its words, and the output lines a console block shows."""

    line: int
    argv: list[str]
    shown: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return " ".join(self.argv)


def commands(page: str) -> list[Command]:
    """The commands of ``page``'s bash and console blocks, in order."""
    text = (ROOT / page).read_text()
    found = []
    for block in re.finditer(r"^```(bash|console)\n(.*?)^```", text, re.S | re.M):
        first = text[:block.start()].count("\n") + 2
        lines = block.group(2).replace("\\\n", " ").splitlines()
        if block.group(1) == "bash":
            for i, line in enumerate(lines):
                argv = shlex.split(line, comments=True)
                if argv and (argv[0] in ("dexrl", DEXRL, "make")
                             or argv[:1] == [".venv/bin/python"] and argv[1].startswith("bench/")):
                    found.append(Command(first + i, argv))
        else:
            for i, line in enumerate(lines):
                if line.startswith("$ "):
                    found.append(Command(first + i, shlex.split(line[2:], comments=True)))
                elif found and line.strip() and line.strip() != "...":
                    found[-1].shown.append(line)
    return found


def _set(argv: list[str], flag: str, *values: str) -> list[str]:
    """``argv`` with ``flag``'s values (all words up to the next flag) replaced by ``values``."""
    i = argv.index(flag)
    end = i + 1
    while end < len(argv) and not argv[end].startswith("-"):
        end += 1
    return [*argv[:i + 1], *values, *argv[end:]]


def prepared(argv: list[str], cwd: Path) -> list[str]:
    """The command as run: shortened and with placeholders filled (the module docstring)."""
    argv = [DEXRL if a == "dexrl" else a for a in argv]
    filled = []
    for a in argv:
        if "<time>" in a:
            hits = glob.glob(a.replace("<time>", "*"), root_dir=cwd)
            assert len(hits) == 1, f"{a}: {hits} in {cwd}"
            a = hits[0]
        filled.append(a)
    argv = filled
    if argv[:2] == [DEXRL, "train"] and argv[argv.index("--suite") + 1].startswith("reach"):
        argv = [*argv, f"runner.max_steps={STEPS}"]
    if argv[:2] == [DEXRL, "eval"] and "--episodes-per-task" in argv:
        argv = _set(argv, "--episodes-per-task", str(EPISODES))
    if argv[1:2] == ["bench/reach_learning.py"]:
        argv = _set(_set(_set(argv, "--seeds", "0"), "--steps", str(STEPS)),
                    "--eval-episodes", str(EPISODES))
    return argv


def _pattern(shown: str) -> re.Pattern[str]:
    """A console block's output line as a regex: numbers, ``...`` and ``<time>`` match any."""
    parts = re.split(r"(\.\.\.|<time>|-?\d+(?:[.:]\d+)*)", shown.strip())
    number = r"-?\d+(?:[.:]\d+)*"
    body = "".join(r".*?" if p in ("...", "<time>") else r"-?[\d.:]+" if re.fullmatch(number, p)
                   else re.escape(p) for p in parts)
    return re.compile(r"^\s*" + body)


def check_output(cmd: Command, argv: list[str], out: str, cwd: Path) -> None:
    """The page's claims about this command's output and files."""
    lines = out.splitlines()
    for shown in cmd.shown:
        pattern = _pattern(shown)
        assert any(pattern.match(line) for line in lines), f"{cmd.line}: {shown!r} not in\n{out}"
    if argv[:2] == [DEXRL, "train"] and argv[argv.index("--suite") + 1].startswith("reach"):
        step = f"checkpoints/global_step_{STEPS}"
        assert any(line.strip().startswith("checkpoint ") and line.endswith(step)
                   for line in lines), out
        curves = next(line.split()[-1] for line in lines if line.strip().startswith("curves "))
        run = (cwd / curves).resolve().parent
        assert (run / "curves.png").is_file() and run.parent == (cwd / "runs").resolve(), run
        assert (run / step / "dexrl_complete.json").is_file(), run
    if argv[:2] == [DEXRL, "eval"] and "reach_cued" in argv:
        assert "Blind bound: 33.3 %" in out, out
        results = cwd / argv[argv.index("--ckpt") + 1] / "eval" / f"global_step_{STEPS}-reach_cued"
        assert (results / "results.json").is_file(), out
    if argv[1:2] == ["bench/reach_learning.py"]:
        for arm in ("ppo", "control", "ablation"):
            assert re.search(rf"^\S+ +{arm} +0 ", out, re.M), out
        assert len(re.findall(r"^ +eval .* success [\d.]+ \(per target", out, re.M)) == 6, out
        assert re.search(r"^curves: .*seeds\.png$", out, re.M), out
        bench_out = Path(re.search(r"^curves: (.*)/seeds\.png$", out, re.M).group(1))
        if bench_out.name.startswith("reach-bench-"):  # its default --out, a temporary folder
            shutil.rmtree(bench_out, ignore_errors=True)


def check_quoted_steps(page: str, cmds: list[Command]) -> None:
    """Step counts the page quotes are the shipped configs' (cheap claims, no run needed)."""
    for cmd in cmds:
        if cmd.argv[1:2] == ["bench/reach_learning.py"] and "reach_cued" in cmd.argv:
            (model,) = cmd.argv[cmd.argv.index("--models") + 1:][:1]
            steps = int(cmd.argv[cmd.argv.index("--steps") + 1])
            shipped = compose(f"reach_cued_ppo_dexbotic_{model}").runner.max_steps
            assert steps == shipped, (page, cmd.line, model, steps, shipped)
        for shown in cmd.shown:
            total = re.search(r"starting at step 1 of (\d+)", shown)
            if total and "--suite" in cmd.argv:
                suite, model = (cmd.argv[cmd.argv.index(f) + 1] for f in ("--suite", "--model"))
                shipped = compose(f"{suite}_ppo_dexbotic_{model}").runner.max_steps
                assert int(total.group(1)) == shipped, (page, cmd.line, shipped)


def workdir(tmp_path: Path) -> Path:
    """A fresh folder where the docs' relative paths work (links to .venv and bench)."""
    cwd = tmp_path / "user"
    cwd.mkdir()
    (cwd / ".venv").symlink_to(Path(sys.prefix))
    (cwd / "bench").symlink_to(ROOT / "bench")
    return cwd


def test_every_command_is_run_or_skipped_and_quoted_steps_are_shipped() -> None:
    """The split of the pages' commands, the skip list's staleness, and the step counts the
    pages quote against the shipped configs (quick: no process, so in ``make test`` too)."""
    texts = {c.text for page in PAGES for c in commands(page)}
    assert set(SKIPPED) <= texts, set(SKIPPED) - texts
    assert len(texts - set(SKIPPED)) >= 5, texts
    for page in PAGES:
        check_quoted_steps(page, commands(page))


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES)
def test_the_commands_of_a_page_run_as_written(page: str, tmp_path: Path) -> None:
    cwd = workdir(tmp_path)
    cmds = commands(page)
    env = {**os.environ, "COLUMNS": "250"}  # TMPDIR stays: Ray's socket paths must be short
    done: dict[str, tuple[list[str], str]] = {}
    for cmd in cmds:
        if cmd.text in SKIPPED:
            continue
        argv = prepared(cmd.argv, cwd)
        key = " ".join(argv)
        if key not in done:
            start = time.perf_counter()
            proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True,
                                  timeout=1200, check=False)
            out = proc.stdout + proc.stderr
            print(f"{page}:{cmd.line}: {key}  ({time.perf_counter() - start:.0f} s)")
            assert proc.returncode == 0, (f"{page}:{cmd.line}: {key} exited {proc.returncode}\n"
                                          f"{out[-6000:]}")
            done[key] = (argv, out)
        check_output(cmd, *done[key], cwd)
