"""Success-rate statistics: Wilson score intervals and the exact McNemar test (scipy's binomtest).

scipy is imported inside the functions: it takes about a second, and the commands that import
this module for a constant (``dexrl export``) should not pay it.
"""

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
    from scipy.stats import binomtest

    # scipy takes a confidence level and turns it back into z = ndtri((1 + level) / 2).
    ci = binomtest(successes, trials).proportion_ci(confidence_level=math.erf(z / math.sqrt(2)),
                                                    method="wilson")
    # At 0/n and n/n one bound is exactly 0 or 1; rounding must not move it.
    low = 0.0 if successes == 0 else max(0.0, float(ci.low))
    high = 1.0 if successes == trials else min(1.0, float(ci.high))
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
    from scipy.stats import binomtest

    # Two-sided with p = 1/2: the null distribution is symmetric, so this is 2 * P[X <= min].
    return McNemar(only_a, only_b, float(binomtest(min(only_a, only_b), n, 0.5).pvalue))
