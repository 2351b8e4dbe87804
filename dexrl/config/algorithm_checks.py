"""Checks of the algorithm (GRPO's groups, its critic, reward filtering) and of the exploration
noise (flow_noise), on a composed training config; like :mod:`dexrl.config.checks`, without
rlinf, Ray or torch.

Design notes: docs/algorithms.md.
"""

from __future__ import annotations

from dexrl.config.algorithms import is_grouped
from dexrl.config.settings import Settings, given
from dexrl.errors import Finding


def check_grpo(s: Settings, sizes: dict[str, int], mode: str) -> list[Finding]:
    """GRPO's rules: real groups (size > 1, the env's equal to the algorithm's, whole groups on
    every actor rank), the actor-only loss, no critic to carry, a synchronous runner (``mode``:
    the run's, :func:`dexrl.config.modes.run_mode`)."""
    if not is_grouped(s):
        return []
    adv = s.algorithm.adv_type
    group = given(s.algorithm.group_size, 1)
    findings: list[Finding] = []
    if mode == "async":
        return [Finding("error", "algorithm.adv_type",
                        f"{adv} cannot run in async mode: RLinf's async PPO trains with the "
                        "decoupled actor-critic loss, whose critic GRPO does not have",
                        "run GRPO synchronously (drop --mode async), or use --algo ppo with "
                        "--mode async", code="mode-async-grpo")]
    if group <= 1:
        findings.append(Finding("error", "algorithm.group_size",
                                f"adv_type {adv} compares the episodes of a group, and groups of "
                                f"{group} leave every episode alone (RLinf asserts > 1)",
                                "set algorithm.group_size to 2 or more (RLinf's GRPO configs: "
                                "8); --algo grpo sets it", code="algorithm-group-size"))
    env_group = given(s.env.train.group_size, 1)
    if group > 1 and env_group != group:
        findings.append(Finding("error", "env.train.group_size",
                                f"the envs start groups of {env_group} from one initial state but "
                                f"the advantage compares groups of {group}: each group would mix "
                                "episodes of different starts",
                                "set env.train.group_size=${algorithm.group_size} (--algo grpo "
                                "does)", code="algorithm-env-group-mismatch"))
    envs = given(s.env.train.total_num_envs, 0)
    actors, env_ranks = sizes.get("actor", 0), sizes.get("env", 0)
    # Where the env ranks cannot hold whole groups, the env check says so (env-groups-uneven).
    env_whole = bool(env_ranks) and envs % env_ranks == 0 and (envs // env_ranks) % group == 0
    if (group > 1 and env_whole and actors and envs % actors == 0
            and (envs // actors) % group):
        findings.append(Finding("error", "env.train.total_num_envs",
                                f"{envs // actors} envs per actor rank ({envs} over {actors}) "
                                f"do not hold whole groups of {group}: RLinf groups each rank's "
                                "episodes in order, so a group would straddle two ranks",
                                f"use a multiple of {actors * group} envs",
                                code="algorithm-groups-split"))
    train = s.env.train
    resets = [k for k, on in (("auto_reset", train.auto_reset),
                              ("ignore_terminations", train.ignore_terminations)) if on is True]
    if resets:
        findings.append(Finding("error", f"env.train.{resets[0]}",
                                f"adv_type {adv} scores whole episodes, and RLinf marks where "
                                "they end only with env.train.auto_reset and "
                                "ignore_terminations false (its actor otherwise fails on a "
                                "missing loss mask)", "set env.train.auto_reset=false "
                                "env.train.ignore_terminations=false (the shipped training "
                                "envs' values)", code="algorithm-grpo-episodes"))
    loss = s.algorithm.loss_type
    if loss != "actor":
        findings.append(Finding("error", "algorithm.loss_type",
                                f"{loss} trains a critic on GAE returns, which adv_type {adv} "
                                "does not compute", "set algorithm.loss_type=actor",
                                code="algorithm-grpo-loss"))
    if s.actor.model.add_value_head is True:
        findings.append(Finding("warning", "actor.model.add_value_head",
                                f"adv_type {adv} computes no values: the value head is built, "
                                "synced and saved but never trained",
                                "set actor.model.add_value_head=false (--algo grpo does)",
                                code="algorithm-value-head-unused"))
    return findings


def check_reward_filter(s: Settings) -> list[Finding]:
    """``filter_rewards``: bounds in order, and groups to filter."""
    if s.algorithm.filter_rewards is not True:
        return []
    low, high = s.algorithm.rewards_lower_bound, s.algorithm.rewards_upper_bound
    findings: list[Finding] = []
    if isinstance(low, (int, float)) and isinstance(high, (int, float)) and low > high:
        findings.append(Finding("error", "algorithm.rewards_lower_bound",
                                f"{low} is above rewards_upper_bound={high}: every group would "
                                "be filtered out and nothing trained",
                                "use a lower bound at or below the upper one",
                                code="algorithm-filter-bounds"))
    if given(s.algorithm.group_size, 1) <= 1:
        findings.append(Finding("warning", "algorithm.filter_rewards",
                                "with group_size 1 every group is one episode: each episode whose "
                                "return lies outside the bounds is dropped from training",
                                "use it with GRPO's groups (--algo grpo), where it drops groups "
                                "that all failed or all succeeded",
                                code="algorithm-filter-ungrouped"))
    return findings


def check_noise(s: Settings) -> list[Finding]:
    """flow_noise's std range and scoring; an entropy bonus that has nothing to act on."""
    findings: list[Finding] = []
    method = s.actor.model.dexbotic.noise_method
    if method == "flow_noise":
        where = "actor.model.dexbotic.noise_logvar_range"
        value = s.actor.model.dexbotic.noise_logvar_range
        bounds = list(value) if isinstance(value, list) else None
        if (bounds is None or len(bounds) != 2
                or not all(isinstance(b, (int, float)) and not isinstance(b, bool)
                           for b in bounds) or not 0 < bounds[0] <= bounds[1]):
            findings.append(Finding("error", where, f"{value} is not a std range [min, max]",
                                    "use two numbers with 0 < min ≤ max (RLinf's default: "
                                    "[0.08, 0.16])", code="policy-setting-out-of-range"))
        if s.actor.model.joint_logprob is not True:
            findings.append(Finding("warning", "actor.model.joint_logprob",
                                    "flow_noise with one scored step: only one random denoising "
                                    "step is noisy, so the noise head learns from one step per "
                                    "call", "set actor.model.joint_logprob=true (--noise "
                                    "flow_noise does), as πRL's Flow-Noise does",
                                    code="policy-flow-noise-one-step"))
    bonus = given(s.algorithm.entropy_bonus, 0)
    if method in ("flow_sde", "flow_cps") and isinstance(bonus, (int, float)) and bonus > 0:
        findings.append(Finding("warning", "algorithm.entropy_bonus",
                                f"{method}'s noise scale is fixed, so its entropy is a constant: "
                                "the bonus changes no gradient",
                                "use it with actor.model.dexbotic.noise_method=flow_noise (a "
                                "learned std), or set it to 0", code="algorithm-entropy-constant"))
    return findings


__all__ = ["check_grpo", "check_noise", "check_reward_filter"]
