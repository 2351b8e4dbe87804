"""Which memory plan a launch runs with (``dexrl train --memory-plan``), and why.

``auto`` takes the largest plan (:data:`dexrl.config.memory_plans.PLANS`) whose per-GPU
estimate fits the smallest visible GPU with :data:`MARGIN` to spare; a named plan that does not
fit is refused before anything starts, naming the plan that does. Without GPU facts (a machine
without a driver) ``auto`` assumes the H100 the forecast assumes; ``--smoke`` runs on the CPU
and takes no plan unless one is named.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from dexrl.config.checks import Facts
from dexrl.config.memory_plans import AUTO, PLANS, MemoryPlan, apply_plan, plan_named
from dexrl.config.modes import place_async
from dexrl.config.request import ConfigRequest
from dexrl.config.validate import Validated, compose_request
from dexrl.errors import DexrlError
from dexrl.training.plan import make_plan
from dexrl.units import size

GB = 1e9
MARGIN = 0.10  # of the GPU's memory left free: allocator growth, fragmentation, other processes
ASSUMED_GPU_GB = 80.0  # no GPU facts: the forecast's H100 (80 GB HBM3; torch reports ≈85 GB)


@dataclass
class MemoryChoice:
    """The plan of a launch and how it was chosen.

    Attributes:
        asked: ``--memory-plan`` (``auto`` or a plan's name).
        name: The plan applied (None: none, ``--smoke`` with ``auto``).
        gpu_gb: Memory of the smallest GPU of this machine (None: no GPU facts).
        estimates: Plan name -> its per-GPU peak estimate (GB), for the plans estimated.
        settings: The settings the plan applied (dotted key -> value).
        kept: The plan's keys the user's ``key=value`` set too (key -> the user's value).
        reason: One line: why this plan.
    """

    asked: str
    name: str | None
    gpu_gb: float | None
    estimates: dict[str, float] = field(default_factory=dict)
    settings: dict[str, object] = field(default_factory=dict)
    kept: dict[str, str] = field(default_factory=dict)
    reason: str = ""

    @property
    def budget_gb(self) -> float | None:
        """What a plan's estimate may reach on this GPU (None: no GPU facts)."""
        return None if self.gpu_gb is None else self.gpu_gb * (1 - MARGIN)


def fits(estimate_gb: float, gpu_gb: float) -> bool:
    """Whether a per-GPU estimate fits a GPU of ``gpu_gb`` with :data:`MARGIN` to spare."""
    return estimate_gb <= gpu_gb * (1 - MARGIN)


def choose(asked: str, gpu_gb: float | None, smoke: bool,
           estimate_of: Callable[[MemoryPlan], float], *, every: bool = True
           ) -> MemoryChoice:
    """Pick the plan (``estimate_of(plan)``: its per-GPU peak in GB). ``every``: estimate each
    plan, for the dry run to show; otherwise only those the choice needs (``auto`` stops at
    the first that fits; ``--smoke`` with ``auto``, which takes none, estimates none).

    Raises:
        DexrlError: ``memory-plan-does-not-fit``: the named plan, or with ``auto`` every plan,
            needs more than the GPU holds with the margin.
    """
    estimates: dict[str, float] = {}

    def estimate(name: str) -> float:
        if name not in estimates:
            estimates[name] = estimate_of(plan_named(name))
        return estimates[name]

    if every:
        for plan in PLANS:
            estimate(plan.name)
    if smoke and asked == AUTO:
        if not every:
            return MemoryChoice(asked, None, None, reason="--smoke runs on the CPU")
        would = next((n for n, gb in estimates.items() if fits(gb, ASSUMED_GPU_GB)), "none")
        return MemoryChoice(asked, None, None, estimates, reason=(
            "--smoke runs on the CPU; this config at real size on an assumed "
            f"{ASSUMED_GPU_GB:.0f} GB H100 would get {would}"))
    card = gpu_gb if gpu_gb is not None else ASSUMED_GPU_GB
    where = (f"this machine's smallest GPU ({size(card * GB)})" if gpu_gb is not None
             else f"an assumed {ASSUMED_GPU_GB:.0f} GB H100 (this machine shows no GPU)")
    if asked != AUTO:
        name = plan_named(asked).name
        need = estimate(name)  # also what the launch runs: the plan applied to the config
        if gpu_gb is not None and not fits(need, card):
            fitting = [p.name for p in PLANS if fits(estimate(p.name), card)]
            raise _does_not_fit(f"memory plan {name} does not fit", estimates[name], card,
                                fitting, estimates)
        checked = ("fits " + where) if gpu_gb is not None else "not checked: no GPU facts"
        return MemoryChoice(asked, name, gpu_gb, estimates,
                            reason=f"--memory-plan {name}; {checked}")
    name = next((p.name for p in PLANS if fits(estimate(p.name), card)), None)
    if name is None:
        smallest = PLANS[-1].name
        raise _does_not_fit("no memory plan fits", estimates[smallest], card, [], estimates)
    return MemoryChoice(asked, name, gpu_gb, estimates,
                        reason=f"auto: the largest plan that fits {where} with {MARGIN:.0%} "
                               "to spare")


def _does_not_fit(what: str, need: float, card: float, fitting: list[str],
                  estimates: dict[str, float]) -> DexrlError:
    budget = card * (1 - MARGIN)
    table = ", ".join(f"{n} ≈{size(gb * GB)}" for n, gb in estimates.items())
    if fitting:
        hint = (f"use --memory-plan {fitting[0]} (≈{size(estimates[fitting[0]] * GB)} per GPU), "
                "or --memory-plan auto")
    else:
        hint = ("lower env.train.total_num_envs or actor.micro_batch_size, or spread the run "
                "over more GPUs (cluster.component_placement); `dexrl train --dry-run` shows "
                "the estimate")
    return DexrlError(f"{what} this GPU: the estimate is ≈{size(need * GB)} per GPU, the "
                      f"GPU holds {size(card * GB)} ({size(budget * GB)} with {MARGIN:.0%} "
                      f"spare); nothing was started", hint, details=[f"estimates: {table}"],
                      code="memory-plan-does-not-fit")


def render_choice(choice: MemoryChoice | None) -> list[str]:
    """The memory plan lines of the dry run."""
    if choice is None:
        return []
    lines = [f"Memory plan: {choice.name or 'none'} ({choice.reason})"]
    if choice.name is not None:
        plan = plan_named(choice.name)
        lines.append(f"  {plan.summary}")
        for key, value in choice.settings.items():
            lines.append(f"  sets {key}={_text(value)}")
        for key, value in choice.kept.items():
            lines.append(f"  kept your {key}={value} over the plan's "
                         f"{_text(choice.settings[key])}")
    card = choice.gpu_gb if choice.gpu_gb is not None else None
    parts = []
    for name, gb in choice.estimates.items():
        fit = "" if card is None else (" fits" if fits(gb, card) else " does not fit")
        parts.append(f"{name} ≈{size(gb * GB)}{fit}")
    if parts:
        lines.append("  per-GPU estimate of each plan: " + ", ".join(parts)
                     + f" (a plan fits a card of at least its estimate / {1 - MARGIN:.1f})")
    return lines


def choice_record(choice: MemoryChoice | None) -> dict[str, Any] | None:
    """:func:`render_choice` as data (``--dry-run --json``; sizes in GB)."""
    if choice is None:
        return None
    return {"asked": choice.asked, "name": choice.name, "reason": choice.reason,
            "gpu_gb": choice.gpu_gb, "budget_gb": choice.budget_gb, "margin": MARGIN,
            "estimates_gb": choice.estimates,
            "settings": {k: v for k, v in choice.settings.items()},
            "kept_user_values": choice.kept}


def _text(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def compose_with_plan(asked: ConfigRequest, memory_plan: str, gpu_gb: float | None,
                      per_node: int, *, dry_run: bool) -> tuple[Validated, MemoryChoice]:
    """Compose the config a launch asks for with the memory plan :func:`choose` picks.

    The config is composed once; each plan's settings go on a copy
    (:func:`dexrl.config.memory_plans.apply_plan`), which is estimated
    (:func:`dexrl.training.plan.make_plan`). ``--smoke`` with ``auto`` takes no plan (its dry
    run still estimates each, to say what a GPU would get). A config that cannot be estimated
    (its errors are reported by the checks that follow) gets no plan.

    Raises:
        DexrlError: ``memory-plan-does-not-fit`` (:func:`choose`).
    """
    plain = compose_request(asked.suite, asked.model, asked.config_name,
                            asked.hydra_overrides())
    if asked.smoke and memory_plan == AUTO and not dry_run:
        return plain, MemoryChoice(AUTO, None, None, reason="--smoke runs on the CPU")
    planned: dict[str, tuple[Any, dict[str, object], dict[str, str]]] = {}

    def estimate_of(plan: MemoryPlan) -> float:
        planned[plan.name] = applied = apply_plan(plain.cfg, plan, asked.overrides)
        place_async(applied[0], per_node, asked.smoke)
        # a GPU run's estimate, --smoke's too: what its config needs at real size on a GPU
        estimate = make_plan(applied[0], Facts(None, per_node))
        return max(estimate.memory_gb_per_gpu.values(), default=0.0)

    try:
        choice = choose(memory_plan, gpu_gb, asked.smoke, estimate_of, every=dry_run)
    except DexrlError:
        raise
    except Exception:  # the checks that follow name what is wrong
        return plain, MemoryChoice(memory_plan, None, gpu_gb,
                                   reason="the config has errors")
    if choice.name is None:
        return plain, choice
    cfg, choice.settings, choice.kept = planned[choice.name]
    return Validated(plain.name, cfg, list(plain.findings)), choice
