"""What ``dexrl eval`` was asked for: its options, as given, in one value built once by the
command and passed down to :func:`dexrl.evaluation.session.prepare` and
:func:`dexrl.evaluation.settings.resolve_settings` (which fill the defaults and check them)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class EvalRequest:
    """The options of one evaluation, unchecked; ``None`` means "the default" (see
    :class:`dexrl.evaluation.settings.EvalSettings` for the values used).

    Attributes:
        ckpt: ``--ckpt``: a checkpoint path or a downloaded repo id.
        suite: ``--suite``: a LIBERO suite or dexrl task name (an alias is fine).
        tasks: ``--tasks``: task ids as typed (``0,3-5``); None: all.
        episodes_per_task: ``--episodes-per-task``.
        num_envs: ``--num-envs``.
        seed: ``--seed``.
        num_steps: ``--num-steps``: denoising steps.
        action_chunk: ``--action-chunk``: actions per policy call.
        max_episode_steps: ``--max-episode-steps``: the horizon.
        video: ``--video``: none, failures or all.
        out: ``--out``: the output folder.
        overwrite: ``--overwrite``.
        compare: ``--compare``: another results.json.
        base: ``--base``: the base checkpoint of RLinf weights.
        device: ``--device``.
        dtype: ``--dtype``.
        allow_suite_mismatch: ``--allow-suite-mismatch``.
        protocol: ``--protocol``: standard or training (None: by the checkpoint's form).
        allow_protocol_mismatch: ``--allow-protocol-mismatch``: pair with ``--compare`` results
            of another protocol.
        verbose: ``--verbose``: third-party output on the terminal instead of the log.
        torch_compile: ``--torch-compile``: the policy call's torch.compile mode (None: eager).
        cuda_graph: ``--cuda-graph``: replay the policy call as CUDA graphs.
        env_overrides: The ``key=value`` env config overrides.
    """

    ckpt: str
    suite: str
    tasks: str | None = None
    episodes_per_task: int = 50
    num_envs: int | None = None
    seed: int = 0
    num_steps: int | None = None
    action_chunk: int | None = None
    max_episode_steps: int | None = None
    video: str = "none"
    out: str | None = None
    overwrite: bool = False
    compare: str | None = None
    base: str | None = None
    device: str = "auto"
    dtype: str | None = None
    allow_suite_mismatch: bool = False
    protocol: str | None = None
    allow_protocol_mismatch: bool = False
    verbose: bool = False
    torch_compile: str | None = None
    cuda_graph: bool = False
    env_overrides: tuple[str, ...] = ()
