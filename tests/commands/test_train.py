"""`dexrl train` / `dexrl resume` through the real CLI: plans and every refusal, without Ray.

The end-to-end smoke run (train one step, resume to the next) is in
tests/scenarios/test_smoke.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.cli import run
from helpers.modes import UMASKS, expected, modes, umask
from omegaconf import OmegaConf
from typer.testing import CliRunner

from dexrl.checkpoints.files.steps import mark_complete
from dexrl.config.resume_rules import config_diff, unsafe_changes
from dexrl.runs.layout import MANIFEST_FILE, checkpoints_dir
from dexrl.runs.record import resolved, use_wandb_run_id, write_run_files

runner = CliRunner()
SPATIAL_PI0 = ["--suite", "libero_spatial", "--model", "pi0"]


def test_dry_run_prints_the_plan_and_writes_nothing(cwd: Path) -> None:
    result = run("train", *SPATIAL_PI0, "--dry-run", "--gpus-per-node", "4")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "actor    4 rank(s) on 0:0, 0:1, 0:2, 0:3" in out
    assert "env steps        122,880" in out  # 64 envs × 8 epochs × 240 steps
    assert "training samples 24,576" in out  # 64 × 8 × 240/5
    assert "optimizer steps  96" in out  # 4 update epochs × 24,576 / 1,024
    assert "Memory estimate per GPU" in out and "Launch command:" in out
    assert list(cwd.iterdir()) == []


ONE_GPU = ["--gpus-per-node", "1", "env.train.total_num_envs=8", "actor.global_batch_size=128"]


def _gpu_of(monkeypatch: pytest.MonkeyPatch, gb: float | None) -> None:
    """This machine's GPUs as the doctor's probe would read them (the smallest, in GB)."""
    from dexrl.doctor import cuda

    monkeypatch.setattr(cuda, "smallest_gpu_gb", lambda timeout=60.0: gb)


def test_a_24gb_gpu_gets_the_24gb_plan_in_the_dry_run(cwd: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    _gpu_of(monkeypatch, 25.4)
    result = run("train", *SPATIAL_PI0, "--dry-run", "--json", *ONE_GPU)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    plan = doc["memory_plan"]
    assert plan["name"] == "24gb" and plan["gpu_gb"] == 25.4 and plan["asked"] == "auto"
    assert plan["settings"]["actor.enable_offload"] is True
    gpu0 = doc["plan"]["memory_gb_per_gpu"][0]
    assert gpu0["gb"] == plan["estimates_gb"]["24gb"] < 25.4 * 0.9
    # the control: an 80 GB GPU keeps the shipped settings
    _gpu_of(monkeypatch, 85.0)
    shipped = json.loads(run("train", *SPATIAL_PI0, "--dry-run", "--json", *ONE_GPU).stdout)
    assert shipped["memory_plan"]["name"] == "80gb" and shipped["memory_plan"]["settings"] == {}


def test_a_plan_that_cannot_fit_is_refused_with_the_one_that_does(
        cwd: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _gpu_of(monkeypatch, 25.4)
    result = run("train", *SPATIAL_PI0, "--memory-plan", "80gb", *ONE_GPU)
    assert result.exit_code == 2
    assert "[memory-plan-does-not-fit]" in result.stderr
    assert "hint: use --memory-plan 24gb" in result.stderr
    assert list(cwd.iterdir()) == []
    unknown = run("train", *SPATIAL_PI0, "--memory-plan", "16gb", "--dry-run")
    assert unknown.exit_code == 2 and "[flags-memory-plan-unknown]" in unknown.stderr


def test_the_dry_run_names_the_plan_and_a_kept_override(cwd: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    _gpu_of(monkeypatch, None)  # no GPU facts: a named plan is applied unchecked
    result = run("train", *SPATIAL_PI0, "--dry-run", "--memory-plan", "24gb", *ONE_GPU,
                 "actor.micro_batch_size=32")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "Memory plan: 24gb (--memory-plan 24gb; not checked: no GPU facts)" in out
    assert "  kept your actor.micro_batch_size=32 over the plan's 16" in out
    assert "  sets rollout.enable_offload=true" in out
    assert "Moved off the GPU, per global step" in out


@pytest.mark.parametrize("model", ["pi0", "dm0"])
def test_a_smoke_dry_run_sizes_the_tiny_model_it_would_train(cwd: Path, model: str) -> None:
    """Not the real model's 3 B parameters, 28 GB checkpoints and 33 GB of memory."""
    result = run("train", "--suite", "libero_spatial", "--model", model, "--smoke", "--dry-run")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    model_line = next(line for line in lines if line.startswith("Model:"))
    assert " k parameters" in model_line, model_line
    disk = next(line for line in lines if line.startswith("Checkpoints:"))
    assert disk.endswith(("kB of disk", "MB of disk")), disk
    heading = next(i for i, line in enumerate(lines) if line.startswith("Memory estimate per GPU"))
    memory = lines[heading + 1]
    assert float(memory.split("≈")[1].split()[0]) < 3, memory
    assert list(cwd.iterdir()) == [] or [p.name for p in cwd.iterdir()] == ["home"]


def test_plan_sizes_agree_with_what_the_adapter_trains(tiny_pi0_dir: Path) -> None:
    from dexrl.bridge.policies.chain import RLSettings
    from dexrl.bridge.policies.pi0 import Pi0RLPolicy
    from dexrl.checkpoints.policy import load_policy
    from dexrl.training.plan import checkpoint_sizes

    policy = Pi0RLPolicy(load_policy(tiny_pi0_dir), RLSettings(num_steps=4, num_action_chunks=5,
                                                           train_expert_only=True))
    model = {n: p for n, p in policy.named_parameters() if not n.startswith("value_head.")}
    trainable = sum(p.numel() for p in model.values() if p.requires_grad)
    assert checkpoint_sizes(tiny_pi0_dir) == (sum(p.numel() for p in model.values()), trainable)


def test_dry_run_shows_the_worker_groups_per_node_of_a_two_node_placement(cwd: Path) -> None:
    result = run("train", *SPATIAL_PI0, "--smoke", "--dry-run", "cluster.num_nodes=2",
                 "~cluster.component_placement",
                 "+cluster.component_placement={actor:0,env\\,rollout:1}")
    assert result.exit_code == 0, result.output
    assert "  node 0: actor ×1\n  node 1: env ×1, rollout ×1\n" in result.stdout


def test_a_folder_whose_driver_was_killed_says_so(cwd: Path) -> None:
    from helpers.killed_run import write_killed_run

    folder = cwd / "killed"
    (folder / "checkpoints" / "global_step_1").mkdir(parents=True)
    mark_complete(folder / "checkpoints" / "global_step_1", 1)
    (folder / "config.yaml").write_text("{}")
    write_killed_run(folder, 1)
    result = run("train", *SPATIAL_PI0, "--smoke", "--run-dir", str(folder))
    assert result.exit_code == 2
    assert "[run-folder-not-empty]" in result.stderr
    assert ("the last run of this folder was interrupted during step 2" in result.stderr
            and "the last complete checkpoint is global_step_1" in result.stderr)


def test_dry_run_refuses_a_broken_config(cwd: Path) -> None:
    result = run("train", *SPATIAL_PI0, "--dry-run", "env.train.total_num_envs=63")
    assert result.exit_code == 2
    assert "has 1 error(s); nothing was started [config-invalid]" in result.stderr
    assert "63 envs do not divide over 8 env processes" in result.stderr


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["--smoke", "--ckpt", "x"], "flags-smoke-ckpt"),
        (["--ckpt", "/does/not/exist"], "checkpoint-not-found"),
        (["--ckpt", "Dexmal/libero-db-pi0"], "hub-not-downloaded"),
        ([], "checkpoint-not-found"),
        (["--smoke", "--ray-address", "127.0.0.1:1"], "ray-unreachable"),
        (["--smoke", "runner.max_stepz=1"], "override-unknown-key"),
    ],
)
def test_bad_input_is_refused_before_anything_starts(cwd: Path, args: list[str],
                                                     code: str) -> None:
    result = run("train", *SPATIAL_PI0, "--run-dir", str(cwd / "run"), *args)
    assert result.exit_code == 2, result.output
    assert f"[{code}]" in result.stderr
    assert "Traceback" not in result.output
    assert not (cwd / "run").exists()


@pytest.mark.parametrize(("args", "where"), [
    (["--suite", "reach_cue"], "unknown-suite"),
    (["--suite", "reach_cued", "env.train.reach_cued.targets=[[0.5,0,0]]"],
     "env.train.reach_cued.targets"),
    (["--suite", "reach_cued", "env.train.reach_cued.colors=[red,green]"],
     "env.train.reach_cued.colors"),
    (["--suite", "reach_cued", "env.eval.init_params.camera_heights=8"], "env.eval.init_params"),
])
def test_bad_cued_task_input_is_one_error_and_writes_nothing(cwd: Path, args: list[str],
                                                             where: str) -> None:
    result = run("train", *args, "--model", "dm0", "--smoke", "--run-dir", str(cwd / "run"))
    assert result.exit_code == 2, result.output
    assert where in result.stderr and result.stderr.count("error:") == 1
    assert "Traceback" not in result.output
    assert not (cwd / "run").exists()


def test_no_gpu_points_at_smoke_and_doctor(cwd: Path, tiny_pi0_dir: Path) -> None:
    result = run("train", *SPATIAL_PI0, "--ckpt", str(tiny_pi0_dir), "--run-dir", "r")
    assert result.exit_code == 2
    assert "[train-no-gpu]" in result.stderr and "--smoke" in result.stderr
    assert "dexrl doctor" in result.stderr
    assert not (cwd / "r").exists()


def test_checkpoint_of_the_wrong_model_type(cwd: Path, tmp_path: Path) -> None:
    from dexrl.models.dm0.tiny import write_tiny_dm0

    dm0 = write_tiny_dm0(tmp_path / "dm0")
    result = run("train", *SPATIAL_PI0, "--ckpt", str(dm0), "--run-dir", "r")
    assert result.exit_code == 2
    assert "checkpoint is 'dexbotic_dm0' but the config trains 'dexbotic_pi0'" in result.stderr


def test_a_run_dir_holding_another_run_is_not_overwritten(cwd: Path) -> None:
    (cwd / "run").mkdir()
    (cwd / "run" / "config.yaml").write_text("a: 1\n")
    result = run("train", *SPATIAL_PI0, "--smoke", "--run-dir", "run")
    assert result.exit_code == 2
    assert "[run-folder-not-empty]" in result.stderr and "dexrl resume" in result.stderr
    assert (cwd / "run" / "config.yaml").read_text() == "a: 1\n"
    assert sorted(p.name for p in (cwd / "run").iterdir()) == ["config.yaml"]


def fake_run(root: Path, steps: dict[int, bool]) -> Path:
    """A run folder as `train` leaves it: config, manifest and checkpoints (complete or not)."""
    from dexrl.config.compose import compose

    cfg = resolved(compose("libero_spatial_ppo_dexbotic_pi0", ["+smoke=cpu"]))
    root.mkdir()
    write_run_files(root, cfg, ["dexrl", "train"], {"smoke": True})
    for step, complete in steps.items():
        path = checkpoints_dir(root) / f"global_step_{step}" / "actor"
        path.mkdir(parents=True)
        if complete:
            mark_complete(path.parent, step)
    return root


def test_resume_refuses_changes_to_the_experiment_with_a_diff(cwd: Path) -> None:
    run_dir = fake_run(cwd / "run", {1: True})
    result = run("resume", str(run_dir), "runner.max_steps=3", "actor.optim.lr=1e-3")
    assert result.exit_code == 2
    assert "[resume-unsafe-changes]" in result.stderr
    assert "actor.optim.lr: 5e-06 -> 0.001" in result.stderr
    assert "--allow-changes" in result.stderr


@pytest.mark.parametrize(
    ("steps", "args", "code"),
    [
        ({}, ["--step", "1"], "checkpoint-step-not-found"),  # without --step: starts again
        ({1: True, 2: False}, ["--step", "2"], "checkpoint-incomplete"),
        ({1: True}, ["--step", "5"], "checkpoint-step-not-found"),
        ({1: True}, [], "resume-nothing-left"),
        ({1: True}, ["runner.max_stepz=3"], "override-unknown-key"),
        ({1: True}, ["runner.max_steps=3", "env.train.total_num_envs=0"],
         "resume-unsafe-changes"),
    ],
)
def test_resume_refusals(cwd: Path, steps: dict[int, bool], args: list[str],
                         code: str) -> None:
    run_dir = fake_run(cwd / "run", steps)
    before = sorted(str(p) for p in run_dir.rglob("*"))
    result = run("resume", f"{run_dir}/", *args)
    assert result.exit_code == 2, result.output
    assert f"[{code}]" in result.stderr
    assert sorted(str(p) for p in run_dir.rglob("*")) == before


def test_resume_needs_a_run_folder(cwd: Path) -> None:
    result = run("resume", str(cwd))
    assert result.exit_code == 2
    assert "[run-no-config]" in result.stderr


def test_safe_resume_changes_are_accepted() -> None:
    from dexrl.config.compose import compose

    old = resolved(compose("libero_spatial_ppo_dexbotic_pi0"))
    new = OmegaConf.merge(old, {"runner": {"max_steps": 900, "save_interval": 10,
                                           "logger": {"logger_backends": ["wandb"]}}})
    diff = config_diff(old, new)
    assert {k for k, _, _ in diff} == {"runner.max_steps", "runner.save_interval",
                                       "runner.logger.logger_backends"}
    assert unsafe_changes(diff) == []


def test_manifest_records_versions_and_command(cwd: Path) -> None:
    run_dir = fake_run(cwd / "run", {})
    manifest = json.loads((run_dir / MANIFEST_FILE).read_text())
    assert manifest["command"] == ["dexrl", "train"] and manifest["smoke"] is True
    for dist in ("dexrl", "rlinf", "torch", "transformers", "mujoco"):
        assert manifest["versions"][dist], dist
    assert manifest["host"]


def test_wandb_run_id_is_kept_for_resume(cwd: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WANDB_RUN_ID", raising=False)
    first = use_wandb_run_id(cwd)
    assert use_wandb_run_id(cwd) == first
    import os

    assert os.environ["WANDB_RUN_ID"] == first


def test_dry_run_reports_the_training_prefix_cache(cwd: Path) -> None:
    key = "actor.model.dexbotic.prefix_cache"
    result = run("train", *SPATIAL_PI0, "--dry-run", "--gpus-per-node", "8",
                 f"{key}.device_gb=16", f"{key}.host_gb=24")
    assert result.exit_code == 0, result.output
    # 3,072 samples per actor rank × ≈10.3 MB of π0 prefix keys/values (bf16)
    assert ("Training prefix cache per actor rank: ≈31.7 GB for all samples; ≈16.0 GB on the "
            "GPU, ≈15.7 GB pinned on the host") in result.stdout
    assert "100% of samples computed once; ≈1.00 prefix passes" in result.stdout
    assert "Attention: eager (reference; sdpa: GPU lever, default off)" in result.stdout
    off = run("train", *SPATIAL_PI0, "--dry-run", f"{key}.device_gb=0", f"{key}.host_gb=0")
    assert "0% of samples computed once; ≈4.00 prefix passes" in off.stdout
    bad = run("train", *SPATIAL_PI0, "--dry-run", f"{key}.device_gb=-1")
    assert bad.exit_code == 2 and f"{key}.device_gb" in bad.stderr
    assert "Traceback" not in bad.output


def test_dry_run_says_how_many_global_steps_run(cwd: Path) -> None:
    result = run("train", *SPATIAL_PI0, "--dry-run")
    assert result.exit_code == 0, result.output
    assert "Global steps: 300 (runner.max_steps)" in result.stdout.splitlines()
    negative = run("train", "--suite", "reach", "--model", "pi0", "--dry-run",
                   "runner.max_steps=-3")
    assert negative.exit_code == 0, negative.output
    lines = negative.stdout.splitlines()
    assert ("Global steps: 1000 (runner.max_steps=-3 is negative: RLinf runs runner.max_epochs "
            "= 1000 steps)") in lines
    assert any(line.startswith("Checkpoints: ") and "200 save(s)" in line  # every 5 steps
               for line in lines)
    assert "warning: runner.max_steps: -3 is negative" in negative.stdout
    capped = run("train", "--suite", "reach", "--model", "pi0", "--dry-run",
                 "runner.max_steps=2000")
    assert ("Global steps: 1000 (runner.max_steps=2000 is capped by runner.max_epochs = 1000)"
            in capped.stdout.splitlines())


def test_help_says_what_smoke_and_suite_are() -> None:
    text = " ".join(run("train", "--help").stdout.split())
    assert "LIBERO suite (e.g. libero_spatial) or built-in task (reach, reach_cued)." in text
    assert ("Tiny random model on the CPU. LIBERO suites: one env, one step; built-in tasks "
            "(reach, reach_cued): their shipped steps and envs.") in text
    for verb in ("validate", "eval", "doctor"):
        assert "or built-in task (reach, reach_cued)" in " ".join(
            run(verb, "--help").stdout.split()), verb


@pytest.mark.parametrize("mask", UMASKS)
@pytest.mark.parametrize("model_type", ["dexbotic_pi0", "dexbotic_dm0"])
def test_the_smoke_checkpoint_gets_the_umask_modes(tmp_path: Path, mask: int,
                                                    model_type: str) -> None:
    """safetensors creates model.safetensors 0600; the run folder's copy is 0644 under 022."""
    from dexrl.training.session import write_smoke_checkpoint

    with umask(mask):
        ckpt = write_smoke_checkpoint(tmp_path, model_type)
    assert ckpt == tmp_path / "smoke-checkpoint"
    assert (ckpt / "model.safetensors").is_file()
    assert modes(ckpt) == expected(ckpt, mask)
    assert [p.name for p in tmp_path.iterdir()] == ["smoke-checkpoint"]  # no staging left
