"""Success-rate statistics: Wilson score intervals and the exact McNemar test (pure Python)."""

from __future__ import annotations

import math
from dataclasses import dataclass

Z_95 = 1.959963984540054  # two-sided 95 % standard normal quantile


def wilson_interval(successes: int, trials: int, z: float = Z_95) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion (95 % by default).

    Unlike the normal approximation it stays inside [0, 1] and is informative at 0/n and n/n,
    where LIBERO numbers often sit.

    Raises:
        ValueError: ``trials`` < 1 or ``successes`` outside [0, trials].
    """
    if trials < 1 or not 0 <= successes <= trials:
        raise ValueError(f"need 0 <= successes <= trials and trials >= 1, got {successes}/{trials}")
    p = successes / trials
    z2 = z * z
    centre = (p + z2 / (2 * trials)) / (1 + z2 / trials)
    half = z / (1 + z2 / trials) * math.sqrt(p * (1 - p) / trials + z2 / (4 * trials * trials))
    # At 0/n and n/n one bound is exactly 0 or 1; rounding must not move it.
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == trials else min(1.0, centre + half)
    return low, high


@dataclass(frozen=True)
class McNemar:
    """Exact McNemar test on paired binary outcomes.

    Attributes:
        only_a: Pairs where A succeeded and B failed.
        only_b: Pairs where B succeeded and A failed.
        p_value: Two-sided exact p-value (binomial with p = 1/2 on the discordant pairs).
    """

    only_a: int
    only_b: int
    p_value: float

    @property
    def discordant(self) -> int:
        """Pairs whose outcomes differ (the only ones that carry evidence)."""
        return self.only_a + self.only_b


def mcnemar_exact(only_a: int, only_b: int) -> McNemar:
    """Exact two-sided McNemar test from the two discordant counts.

    ``p = min(1, 2 * P[X <= min(b, c)])`` with ``X ~ Binomial(b + c, 1/2)``; 1 when no pair is
    discordant.
    """
    if only_a < 0 or only_b < 0:
        raise ValueError(f"discordant counts must be >= 0, got {only_a}, {only_b}")
    n = only_a + only_b
    if n == 0:
        return McNemar(only_a, only_b, 1.0)
    tail = sum(math.comb(n, k) for k in range(min(only_a, only_b) + 1))
    # Integer arithmetic up to the final division: exact for any n LIBERO produces.
    return McNemar(only_a, only_b, min(1.0, 2 * tail / 2**n))
