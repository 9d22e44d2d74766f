"""Statistics for reported figures: medians, spreads, and intervals on deltas."""
import numpy as np

RESAMPLES = 4000


def median_diff_ci(a, b, confidence=0.95, resamples=RESAMPLES, seed=0):
    """median(a) - median(b), with a percentile-bootstrap interval.

    Each side is resampled on its own (the rounds are not paired). The
    generator is seeded, so the same samples always give the same interval.
    Returns (delta, (low, high)).
    """
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if len(a) == 0 or len(b) == 0:
        raise ValueError("both samples need values")
    rng = np.random.default_rng(seed)
    ma = np.median(a[rng.integers(0, len(a), (resamples, len(a)))], axis=1)
    mb = np.median(b[rng.integers(0, len(b), (resamples, len(b)))], axis=1)
    tail = (1 - confidence) / 2 * 100
    lo, hi = np.percentile(ma - mb, [tail, 100 - tail])
    return float(np.median(a) - np.median(b)), (float(lo), float(hi))


def verdict(interval, expect_positive=True):
    """The rule every smpnet verdict uses (README, "Verdicts"): the claim
    holds when the whole interval lies on the claimed side of zero; an
    interval that contains zero is no measurable difference."""
    lo, hi = interval
    if lo > 0:
        return "reproduced" if expect_positive else "not reproduced"
    if hi < 0:
        return "not reproduced" if expect_positive else "reproduced"
    return "no measurable difference"


def jain_fairness(values):
    """Jain's fairness index: 1 when every CPU got the same share, 1/n when
    one CPU got everything."""
    x = np.asarray(values, dtype=float)
    if len(x) == 0 or not x.any():
        return 0.0
    return float(x.sum() ** 2 / (len(x) * (x ** 2).sum()))
