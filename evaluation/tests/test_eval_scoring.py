"""Precision, recall and F1 as the paper defines them (§5.1.3), and agreement between two methods."""

import random

import numpy as np
import pytest

from evaluation.scoring import agreement, score


def test_counts_and_the_papers_formulas():
    labels = [True, True, True, False, False, False, True, False]
    pred = [True, False, True, True, False, False, True, False]
    s = score(labels, pred)
    assert (s.tp, s.fp, s.fn, s.tn) == (3, 1, 1, 3)
    assert s.precision == pytest.approx(3 / 4)
    assert s.recall == pytest.approx(3 / 4)
    assert s.f1 == pytest.approx(3 / (3 + 0.5 * (1 + 1)))


def test_f1_is_the_harmonic_mean_of_precision_and_recall():
    rng = random.Random(0)
    for _ in range(200):
        n = rng.randint(1, 50)
        y = [rng.random() < 0.4 for _ in range(n)]
        p = [rng.random() < 0.5 for _ in range(n)]
        s = score(y, p)
        if s.tp:
            assert s.f1 == pytest.approx(2 * s.precision * s.recall / (s.precision + s.recall))
        assert s.tp + s.fp + s.fn + s.tn == n
        assert s.flagged == sum(p) and s.duplicates == sum(y)


def test_empty_denominators():
    nothing = score([False, False], [False, False])
    assert (nothing.precision, nothing.recall, nothing.f1) == (1.0, 1.0, 1.0)
    missed = score([True, False], [False, False])
    assert (missed.precision, missed.recall, missed.f1) == (1.0, 0.0, 0.0)
    wrong = score([False, False], [True, False])
    assert (wrong.precision, wrong.recall, wrong.f1) == (0.0, 1.0, 0.0)


def test_bad_inputs_are_errors():
    with pytest.raises(ValueError, match="length"):
        score([True], [True, False])
    with pytest.raises(ValueError, match="booleans"):
        score([0, 2], [0, 1])
    with pytest.raises(ValueError, match="one-dimensional"):
        score(np.zeros((2, 2), bool), np.zeros((2, 2), bool))
    assert score(np.array([1, 0]), np.array([1, 1])).tp == 1  # 0/1 integers are accepted


def test_agreement():
    a = [True, True, False, False, True]
    b = [True, False, False, True, True]
    ag = agreement(a, b)
    assert (ag.n, ag.both, ag.only_a, ag.only_b, ag.neither) == (5, 2, 1, 1, 1)
    assert ag.rate == pytest.approx(3 / 5)
    assert not ag.identical
    same = agreement(a, a)
    assert same.identical and same.rate == 1.0 and same.kappa == 1.0
    assert agreement([True] * 4, [False] * 4).kappa == pytest.approx(0.0)
    d = ag.to_dict()
    assert d["rate"] == ag.rate and d["identical"] is False
