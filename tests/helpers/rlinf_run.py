"""A tiny RLinf run folder in the layout ``dexrl train`` leaves, for eval and export tests.

``RUN_DIR/config.yaml`` and ``manifest.json`` are written as ``train`` writes them (resolved
config, run-folder fields set, ``actor.model.model_path`` naming the base checkpoint);
``checkpoints/global_step_N/actor/model_state_dict/full_weights.pt`` holds what RLinf saves for
dexrl's adapter: the network's ``model.*`` entries (here the base weights plus seeded noise,
standing in for training) and the critic's ``value_head.*``; the completion marker follows.
"""

from __future__ import annotations

from pathlib import Path

import torch


def training_state(base_dir: Path, seed: int, scale: float = 0.05) -> dict[str, torch.Tensor]:
    """The state dict dexrl's adapter would save after training from ``base_dir``."""
    from dexrl.checkpoints.policy import load_policy

    network = load_policy(base_dir).network
    generator = torch.Generator().manual_seed(seed)
    state = {k: (v + scale * torch.randn(v.shape, generator=generator).to(v.dtype)
                 if v.is_floating_point() else v)
             for k, v in network.state_dict().items()}
    width = network.config.expert.hidden_size
    state["value_head.weight"] = torch.randn((1, width), generator=generator)
    state["value_head.bias"] = torch.zeros(1)
    return state


def write_tiny_rlinf_run(run_dir: str | Path, base_dir: str | Path, *, step: int = 2,
                         seed: int = 1, suite: str = "libero_spatial",
                         model_type: str = "dexbotic_pi0",
                         overrides: tuple[str, ...] = ()) -> Path:
    """Write a run folder trained (in appearance) from ``base_dir``; returns the run folder.

    Args:
        run_dir: Folder to create.
        base_dir: A tiny checkpoint (``write_tiny_pi0`` or ``write_tiny_dm0``).
        step: The global step of the one checkpoint.
        seed: Seeds the weight perturbation.
        suite: Suite of the training config.
        model_type: Model type of ``base_dir`` (picks the shipped config).
        overrides: Extra config overrides (e.g. ``actor.model.num_action_chunks=4``).
    """
    from omegaconf import OmegaConf

    from dexrl.checkpoints.files.steps import mark_complete
    from dexrl.config.compose import compose
    from dexrl.config.owned_keys import set_run_folder
    from dexrl.hub.manifest import checkpoint_provenance
    from dexrl.runs.layout import WEIGHTS_IN_STEP
    from dexrl.runs.layout import step_dir as step_dir_of
    from dexrl.runs.record import resolved, write_run_files

    run_dir = Path(run_dir).absolute()
    cfg = compose(f"{suite}_ppo_{model_type}",
                  ["+smoke=cpu", f"actor.model.model_path={Path(base_dir).resolve()}",
                   *overrides])
    set_run_folder(cfg, run_dir)
    cfg = resolved(cfg)
    provenance = checkpoint_provenance(OmegaConf.select(cfg, "actor.model.model_path"))
    write_run_files(run_dir, cfg, ["dexrl", "train"],
                    {"checkpoint": provenance, "smoke": True, "suite": suite})
    step_dir = step_dir_of(run_dir, step)
    (step_dir / WEIGHTS_IN_STEP).parent.mkdir(parents=True, exist_ok=True)
    torch.save(training_state(Path(base_dir), seed), step_dir / WEIGHTS_IN_STEP)
    mark_complete(step_dir, step)
    return run_dir
