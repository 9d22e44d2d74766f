"""Statistics for reported figures: medians, spreads, and intervals on deltas.

Every bootstrap's generator starts from a fixed RNG seed (`rng_seed`; in
smpnet a plain "seed" is one of the kernel patches), so the same samples
always give the same interval."""
import numpy as np

RESAMPLES = 4000


def _bootstrap_medians(a, b, resamples, rng_seed):
    """The medians of `resamples` resamplings of each side, each side on its
    own (the rounds are not paired). The generator is seeded, so the same
    samples always give the same interval."""
    rng = np.random.default_rng(rng_seed)
    ma = np.median(a[rng.integers(0, len(a), (resamples, len(a)))], axis=1)
    mb = np.median(b[rng.integers(0, len(b), (resamples, len(b)))], axis=1)
    return ma, mb


def _interval(values, confidence):
    tail = (1 - confidence) / 2 * 100
    lo, hi = np.percentile(values, [tail, 100 - tail])
    return float(lo), float(hi)


def median_diff_ci(a, b, confidence=0.95, resamples=RESAMPLES, rng_seed=0):
    """median(a) - median(b), with a percentile-bootstrap interval.
    Returns (delta, (low, high))."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if len(a) == 0 or len(b) == 0:
        raise ValueError("both samples need values")
    ma, mb = _bootstrap_medians(a, b, resamples, rng_seed)
    return float(np.median(a) - np.median(b)), _interval(ma - mb, confidence)


MIN_SAMPLES = 3  # per side, for any verdict


def median_ci(values, confidence=0.95, resamples=RESAMPLES, rng_seed=0):
    """median(values), with a percentile-bootstrap interval: for paired
    differences, one value per pair. Returns (median, (low, high))."""
    x = np.asarray(values, dtype=float)
    if len(x) == 0:
        raise ValueError("no values")
    rng = np.random.default_rng(rng_seed)
    medians = np.median(x[rng.integers(0, len(x), (resamples, len(x)))], axis=1)
    return float(np.median(x)), _interval(medians, confidence)


def median_ratio_ci(a, b, confidence=0.95, resamples=RESAMPLES, rng_seed=0):
    """median(a) / median(b), with a percentile-bootstrap interval.
    Returns (ratio, (low, high))."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if len(a) == 0 or len(b) == 0 or np.median(b) == 0:
        raise ValueError("both samples need values, and b a non-zero median")
    ma, mb = _bootstrap_medians(a, b, resamples, rng_seed)
    return float(np.median(a) / np.median(b)), _interval(ma / mb, confidence)


def verdict(interval, claim="positive"):
    """The rule every smpnet verdict uses (docs/design.md, "Statistics").

    claim="positive" (the seed claims a difference > 0): "reproduced" when
    the whole interval lies above zero, "not reproduced" when it lies below,
    "no measurable difference" when it contains zero.
    claim="none" (the seed claims no measurable difference): "no measurable
    difference" when the interval contains zero, which is the seed's claim
    holding, and "not reproduced" when it does not.
    """
    lo, hi = interval
    if claim == "none":
        return "no measurable difference" if lo <= 0 <= hi else "not reproduced"
    if lo > 0:
        return "reproduced"
    if hi < 0:
        return "not reproduced"
    return "no measurable difference"


def jain_fairness(values):
    """Jain's fairness index: 1 when every CPU got the same share, 1/n when
    one CPU got everything."""
    x = np.asarray(values, dtype=float)
    if len(x) == 0 or not x.any():
        return 0.0
    return float(x.sum() ** 2 / (len(x) * (x ** 2).sum()))


def trimmed_mean(values, cut=0.1):
    """The mean of the values left after dropping the lowest and highest
    `cut` of them: robust to a few preempted samples, yet not rounded to
    whole cycles as a median of cycle counts is."""
    x = np.sort(np.asarray(values, dtype=float))
    k = int(len(x) * cut)
    return float(x[k:len(x) - k].mean()) if len(x) > 2 * k else float(x.mean())
