"""Statistics for reported figures: medians, spreads, and intervals on deltas.

Every bootstrap's generator starts from a fixed RNG seed (`rng_seed`; in
smpnet a plain "seed" is one of the kernel patches), so the same samples
always give the same interval."""
import math

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


# Student's t, the 0.975 quantile (two-sided 95 %), for 1..30 degrees of
# freedom (the standard table); past 30 the Cornish-Fisher expansion, which
# gives the table's 2.042 at 30 and 1.980 at 120.
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
         2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
         2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)
_Z975 = 1.959964


def t975(df):
    """The 0.975 quantile of Student's t with `df` (>= 1) degrees of freedom."""
    if df < 1:
        raise ValueError(f"Student's t needs 1 degree of freedom or more, got {df}")
    if df <= len(_T975):
        return _T975[int(df) - 1]
    z = _Z975
    return z + (z ** 3 + z) / (4 * df) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * df ** 2)


def mean_diff_ci(a, b):
    """mean(a) - mean(b) with Student's two-sample 95 % interval, the
    variance pooled over both sides (a and b are runs of one
    machine: their spread is the machine's, whichever build ran), so one
    side may have a single value when the other has two or more. Returns
    (delta, (low, high)); a ValueError with fewer than 3 values in all, or
    with no spread among them (copies of one run would make any difference,
    however small, real)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    df = len(a) + len(b) - 2
    if len(a) == 0 or len(b) == 0 or df < 1:
        raise ValueError("the two sides need 3 values or more between them")
    ss = sum(float(((x - x.mean()) ** 2).sum()) for x in (a, b))
    if ss == 0:
        raise ValueError("no spread between the values: nothing to judge a difference by")
    half = t975(df) * math.sqrt(ss / df * (1 / len(a) + 1 / len(b)))
    d = float(a.mean() - b.mean())
    return d, (d - half, d + half)


# Pairs (or samples a side) for any verdict: the fewest for which the order
# statistics give a median an interval of 95 % or more (median_ci): with n
# pairs the widest, [min, max], misses the median with probability 2^(1-n),
# 6.25 % at n = 5 and 3.1 % at n = 6.
MIN_SAMPLES = 6


def _order_rank(n, confidence):
    """The largest k such that [x(k), x(n+1-k)] (1-based order statistics)
    covers the median with probability >= confidence, or 0 when even
    [min, max] falls short. P(median < x(k)) = P(Binomial(n, 1/2) < k);
    counted in integers, exact for any n."""
    k, below, total = 0, 0, 2 ** n      # below = 2^n * P(B < k)
    miss = round((1 - confidence) * 10 ** 6)
    while k < (n + 1) // 2:
        below += math.comb(n, k)          # now 2^n * P(B < k + 1)
        if 2 * below * 10 ** 6 > miss * total:
            break
        k += 1
    return k


def median_ci(values, confidence=0.95):
    """median(values), with a distribution-free interval: the order
    statistics [x(k), x(n+1-k)] that cover the median with at least
    `confidence` whatever the distribution (the sign-test interval). For
    paired differences, one value per pair. With too few values for
    `confidence` (n < 6 at 95 %), the interval is [min, max] and covers
    less: callers give no verdict below MIN_SAMPLES. Returns (median,
    (low, high)). (A percentile bootstrap of the median, used before, is
    too narrow with a few pairs: with 3 it is about [min, max], which an
    A/A comparison excludes zero from 25 % of the time.)"""
    x = np.sort(np.asarray(values, dtype=float))
    n = len(x)
    if n == 0:
        raise ValueError("no values")
    k = max(_order_rank(n, confidence), 1)
    return float(np.median(x)), (float(x[k - 1]), float(x[n - k]))


def median_fields(name, values):
    """{name: median, name_lo, name_hi: its 95 % interval}, by median_ci:
    a row's figure as the kernel experiment's rows carry it."""
    med, (lo, hi) = median_ci(values)
    return {name: med, f"{name}_lo": lo, f"{name}_hi": hi}


def paired(a, b, op):
    """op(a[k], b[k]) over the pairs whose values are both there (not
    None): (median, [95 % interval], pairs) by median_ci, or None with
    fewer than MIN_SAMPLES pairs."""
    d = [op(x, y) for x, y in zip(a, b) if x is not None and y is not None]
    if len(d) < MIN_SAMPLES:
        return None
    med, ci = median_ci(d)
    return med, list(ci), len(d)


def abba_blocks(x):
    """x's rounds summed two at a time, rounds 2k and 2k+1, which run in
    opposite orders (A B, then B A): in each sum a drift linear in time adds
    alike to both sides. An odd last round is left out."""
    return [x[k] + x[k + 1] for k in range(0, len(x) - 1, 2)]


def paired_abba(a, b, op):
    """paired() over ABBA blocks of two rounds (abba_blocks()) of two
    sides' rounds, run in the same rounds."""
    return paired(abba_blocks(a), abba_blocks(b), op)


def per_op_diff(a, b):
    """a - b per op, from two ABBA blocks' sums of two rounds each."""
    return (a - b) / 2


def gain(a, b):
    """a over b, in %."""
    return (a - b) / b * 100


# The labels (docs/design.md, "Statistics")
REPRODUCED = "reproduced"
SMALLER = "smaller than the seed's"
LARGER = "larger than the seed's"
NO_MEASURABLE = "no measurable difference"
OPPOSITE = "opposite"
NO_DIFFERENCE = "no difference"
INCONCLUSIVE = "inconclusive"
DIFFERENCE = "difference found"
# a reproduction's interval overlaps [SIZE_LOW, SIZE_HIGH] x the seed's effect
SIZE_LOW, SIZE_HIGH = 0.5, 2.0


def verdict(interval, size=None):
    """The label for a claim of an effect > 0 whose seed measured `size`
    (same unit as the interval; None: the seed gave none, only a
    direction): **opposite** when the whole interval is below zero, **no
    measurable difference** when it contains zero; otherwise, in the
    claimed direction, **smaller than the seed's** when the interval lies
    wholly below half the seed's size, **larger than the seed's** when
    wholly above twice it, and **reproduced** when it overlaps
    [half, twice]."""
    lo, hi = interval
    if hi < 0:
        return OPPOSITE
    if lo <= 0:
        return NO_MEASURABLE
    if size is None:
        return REPRODUCED
    if hi < SIZE_LOW * size:
        return SMALLER
    if lo > SIZE_HIGH * size:
        return LARGER
    return REPRODUCED


def equivalence(interval, margin=None):
    """The label for a claim of no difference: **no difference** when the
    interval lies within +-margin, **inconclusive** when it contains zero
    but reaches past the margin, **difference found** when it excludes
    zero. Without a margin (an A/A control: any difference is false), the
    interval containing zero is **no measurable difference**."""
    lo, hi = interval
    if lo > 0 or hi < 0:
        return DIFFERENCE
    if margin is None:
        return NO_MEASURABLE
    return NO_DIFFERENCE if -margin <= lo and hi <= margin else INCONCLUSIVE


def judge(claim, measured, interval, pairs=None):
    """A verdict: the claim (a seeds.SEED_* record) with what was measured
    here, in the claim's unit, and its label by the claim's rule. A claim
    with a `size` also gets `size_ratio`: [measured, low, high] / size."""
    v = dict(claim, measured=measured, interval=list(interval))
    if "margin" in claim:
        v["verdict"] = equivalence(interval, claim["margin"])
    else:
        v["verdict"] = verdict(interval, claim.get("size"))
        if claim.get("size"):
            v["size_ratio"] = [x / claim["size"] for x in (measured, *interval)]
    if pairs is not None:
        v["pairs"] = pairs
    return v


def control(sides, measured, interval):
    """An A/A control's result: the same pipeline with both sides identical
    (`sides` says how), whose honest answer is "no measurable difference";
    anything else is a false difference this machine produced, and marks
    the real verdict beside it as unreliable (`reliable`)."""
    label = equivalence(interval)
    return {"sides": sides, "measured": measured, "interval": list(interval),
            "verdict": label, "reliable": label == NO_MEASURABLE}


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
