"""Run one dexrl launch in this process (the smoke tests start it as a subprocess).

Usage: python smoke_run.py RUN_DIR train|resume [override ...]

``$DEXRL_SMOKE_EXT`` names the RLinf extension module (default: dexrl's own),
``$DEXRL_SMOKE_STALL_S`` the stall timeout (default 600 s), ``$DEXRL_SMOKE_CONFIG`` the shipped
config to overlay (default: LIBERO-Spatial π0).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from dexrl.bridge.launch.driver import launch
from dexrl.bridge.launch.spec import LaunchOptions, LaunchSpec
from dexrl.bridge.registry import EXT_MODULE
from dexrl.checkpoints.files.steps import pick_checkpoint
from dexrl.config.compose import compose
from dexrl.config.owned_keys import set_run_folder
from dexrl.config.resume_rules import check_steps_left, planned_steps
from dexrl.config.run_paths import open_run
from dexrl.training.progress import ProgressPrinter

CONFIG = os.environ.get("DEXRL_SMOKE_CONFIG", "libero_spatial_ppo_dexbotic_pi0")


def main(run_dir: str, mode: str, *overrides: str) -> int:
    ext = os.environ.get("DEXRL_SMOKE_EXT", EXT_MODULE)
    if mode == "train":
        cfg = compose(CONFIG, ["+smoke=cpu", *overrides])
        resume, total = None, planned_steps(cfg)
    else:
        from omegaconf import OmegaConf

        cfg = OmegaConf.merge(open_run(run_dir).config, OmegaConf.from_dotlist(list(overrides)))
        resume = pick_checkpoint(Path(run_dir))
        total = check_steps_left(cfg, resume.step)
    set_run_folder(cfg, Path(run_dir), resume.path if resume else None)
    stall_s = float(os.environ.get("DEXRL_SMOKE_STALL_S", "600"))
    spec = LaunchSpec(cfg, Path(run_dir), True, resume, total,
                      LaunchOptions(stall_timeout=stall_s), ext_module=ext)
    return launch(spec, on_progress=ProgressPrinter())


if __name__ == "__main__":
    from dexrl.errors import DexrlError

    try:
        sys.exit(main(*sys.argv[1:]))
    except DexrlError as exc:
        print(exc.render(), file=sys.stderr)
        sys.exit(2)
