"""Run-to-run spread of the benchmarks' medians, from N pytest-benchmark JSON files.

    for k in 1 2 3; do pytest bench/ --benchmark-only --benchmark-json=run$k.json; done
    python bench/spread.py run1.json run2.json run3.json

For each benchmark (by its full name), the median of every file that has it is
one sample; printed are their median, max/min - 1 and their median absolute
deviation, both in % of that median; then, per group, the benchmark with the
largest max/min - 1. --benchmark-compare-fail=median:X% is meaningful only with
X above the largest spread of the groups compared (docs/benchmarks.md).
Bad input (a missing or unreadable file, one that is not a benchmark JSON, fewer
than two files): one line on stderr and exit status 2.
"""
import json
import statistics
import sys


class BadInput(Exception):
    pass


def load(path):
    """{fullname: (group, median seconds)} of one --benchmark-json file."""
    try:
        with open(path) as f:
            data = json.load(f)
    except OSError as e:
        raise BadInput(f"{path}: {e.strerror or e}") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise BadInput(f"{path}: not JSON ({e})") from None
    benches = data.get("benchmarks") if isinstance(data, dict) else None
    if not isinstance(benches, list) or not benches:
        raise BadInput(f"{path}: not a pytest-benchmark JSON (no \"benchmarks\" list)")
    out = {}
    for b in benches:
        try:
            name, median = b["fullname"], b["stats"]["median"]
        except (TypeError, KeyError):
            raise BadInput(f"{path}: not a pytest-benchmark JSON (a benchmark without "
                           f"fullname or stats.median)") from None
        if isinstance(median, bool) or not isinstance(median, (int, float)) or not median > 0:
            raise BadInput(f"{path}: {name}: median {median!r} is not a positive time")
        out[name] = (b.get("group") or "(no group)", float(median))
    return out


def spread(medians):
    """(max/min - 1, median absolute deviation / median), both in %, of one
    benchmark's medians across runs; None for either with fewer than 2."""
    if len(medians) < 2:
        return None, None
    mid = statistics.median(medians)
    mad = statistics.median(abs(m - mid) for m in medians)
    return (max(medians) / min(medians) - 1) * 100, mad / mid * 100


def collect(runs):
    """[(group, fullname, [median of each run that has it])], by group and name."""
    seen = {}
    for run in runs:
        for name, (group, median) in run.items():
            seen.setdefault((group, name), []).append(median)
    return [(g, n, ms) for (g, n), ms in sorted(seen.items())]


def report(runs):
    """The lines to print: a row per benchmark, then the largest spread per group."""
    rows = collect(runs)
    lines = [f"{len(runs)} runs; spread of each benchmark's median across them "
             f"(max/min - 1, and the median absolute deviation, in % of the median)",
             f"{'group':<16} {'benchmark':<48} {'runs':>4} {'median':>12} "
             f"{'max/min-1':>10} {'MAD':>8}"]
    worst = {}
    for group, name, medians in rows:
        rng, mad = spread(medians)
        short = name.rsplit("::", 1)[-1]
        lines.append(f"{group:<16} {short:<48} {len(medians):>4} "
                     f"{statistics.median(medians):>12.6g} "
                     + (f"{rng:>9.2f}% {mad:>7.2f}%" if rng is not None else f"{'-':>10} {'-':>8}"))
        if rng is not None and (group not in worst or rng > worst[group][0]):
            worst[group] = (rng, mad, short)
    lines.append("")
    lines.append("largest spread per group (max/min - 1; that benchmark's MAD):")
    for group in sorted({g for g, _, _ in rows}):
        if group in worst:
            rng, mad, short = worst[group]
            lines.append(f"  {group:<16} {rng:6.2f} %  (MAD {mad:.2f} %, {short})")
        else:
            lines.append(f"  {group:<16} -  (in fewer than 2 runs)")
    missing = [n.rsplit("::", 1)[-1] for _, n, ms in rows if len(ms) < len(runs)]
    if missing:
        lines.append(f"not in every run: {', '.join(missing)}")
    return lines


def main(argv):
    try:
        if len(argv) < 2:
            raise BadInput("give two or more --benchmark-json files (usage: spread.py "
                           "run1.json run2.json ...)")
        runs = [load(p) for p in argv]
    except BadInput as e:
        print(f"spread.py: {e}", file=sys.stderr)
        return 2
    print("\n".join(report(runs)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
