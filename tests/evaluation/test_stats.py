"""Wilson intervals and the exact McNemar test against published values and scipy."""

from __future__ import annotations

import pytest
from scipy.stats import binomtest

from dexrl.evaluation.stats import mcnemar_exact, wilson_interval


@pytest.mark.parametrize(
    ("k", "n", "low", "high"),
    [  # Wilson 95 % intervals as tabulated by statsmodels' proportion_confint(method="wilson")
        (0, 10, 0.0, 0.2775),
        (1, 10, 0.0179, 0.4042),
        (5, 10, 0.2366, 0.7634),
        (10, 10, 0.7225, 1.0),
        (0, 2, 0.0, 0.6576),
    ],
)
def test_wilson_known_values(k: int, n: int, low: float, high: float) -> None:
    got = wilson_interval(k, n)
    assert got == pytest.approx((low, high), abs=5e-5)


@pytest.mark.parametrize(("k", "n"), [(0, 1), (3, 7), (49, 50), (488, 500), (250, 500)])
def test_wilson_matches_scipy(k: int, n: int) -> None:
    ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    assert wilson_interval(k, n) == pytest.approx((ci.low, ci.high), abs=1e-12)


def test_wilson_edges_are_exact() -> None:
    assert wilson_interval(0, 50)[0] == 0.0
    assert wilson_interval(50, 50)[1] == 1.0


@pytest.mark.parametrize(("k", "n"), [(1, 0), (-1, 5), (6, 5)])
def test_wilson_rejects_impossible_counts(k: int, n: int) -> None:
    with pytest.raises(ValueError):
        wilson_interval(k, n)


@pytest.mark.parametrize(
    ("b", "c", "p"),
    [(1, 6, 0.125), (0, 5, 0.0625), (0, 0, 1.0), (3, 3, 1.0), (10, 0, 2 / 1024)],
)
def test_mcnemar_known_values(b: int, c: int, p: float) -> None:
    result = mcnemar_exact(b, c)
    assert result.p_value == pytest.approx(p, rel=1e-12)
    assert (result.only_a, result.only_b, result.discordant) == (b, c, b + c)


@pytest.mark.parametrize(("b", "c"), [(2, 9), (17, 30), (120, 95), (400, 350)])
def test_mcnemar_equals_two_sided_sign_test(b: int, c: int) -> None:
    expected = binomtest(min(b, c), b + c, 0.5).pvalue
    assert mcnemar_exact(b, c).p_value == pytest.approx(expected, rel=1e-9)


def test_mcnemar_is_symmetric_and_rejects_negatives() -> None:
    assert mcnemar_exact(4, 11).p_value == mcnemar_exact(11, 4).p_value
    with pytest.raises(ValueError):
        mcnemar_exact(-1, 3)
