"""What `arp -d ; ping -c N` prints, from host A's ping results: the arp
experiment's transcripts, in iputils' format, the round trips'
distributions, and the pairs of first pings its verdicts take. The
addresses are the seed's (000's `arp -d 192.168.20.108`); nothing is sent
on a real network."""
import numpy as np

from ...machine import layout

PEER_IP = "192.168.20.108"
OWN_IP = "192.168.20.1"


def ping_ms(ms):
    """As iputils' ping prints a time: three significant digits, at most."""
    if ms < 1:
        return f"{ms:.3f}"
    if ms < 10:
        return f"{ms:.2f}"
    if ms < 100:
        return f"{ms:.1f}"
    return f"{ms:.0f}"


def transcript(results, hz_tsc, trials, count):
    """The median trial (by its first ping) of host A's ping results (the
    "ping" region), as ping prints it."""
    res = results[:trials * count]
    first = res["rtt"].reshape(trials, count)[:, 0]
    ok = np.flatnonzero(res["status"].reshape(trials, count)[:, 0] == layout.PING_OK)
    t = int(ok[np.argsort(first[ok])[len(ok) // 2]]) if len(ok) else 0
    lines = [f"# arp -d {PEER_IP} ; ping -c {count} {PEER_IP}",
             f"PING {PEER_IP} ({PEER_IP}) 56(84) bytes of data."]
    for k in range(count):
        r = res[t * count + k]
        if r["status"] == layout.PING_OK:
            lines.append(f"64 bytes from {PEER_IP}: icmp_seq={k + 1} ttl=64 "
                         f"time={ping_ms(r['rtt'] / hz_tsc * 1e3)} ms")
        elif r["status"] == layout.PING_ERROR:
            lines.append(f"From {OWN_IP} icmp_seq={k + 1} Destination Host Unreachable")
        else:
            lines.append(f"(no reply to icmp_seq={k + 1})")
    return lines


def answered(rtts):
    """The round trips that came back (NaN: not answered)."""
    return rtts[np.isfinite(rtts)]


def distribution(ms):
    """min, median, p99 and max of round trips, or None without any."""
    if len(ms) == 0:
        return None
    return {"min": float(ms.min()), "median": float(np.median(ms)),
            "p99": float(np.percentile(ms, 99)), "max": float(ms.max())}


def pairs(samples, a, b):
    """Per chunk, the median of a's first ping minus b's, trial by trial
    (the same phase of a tick), over the trials both answered (ms)."""
    if a not in samples or b not in samples:
        return []
    out = []
    for x, y in zip(samples[a], samples[b]):
        d = answered(x - y)
        out += [float(np.median(d))] if len(d) else []
    return out


def transcript_key(probe, phase):
    """Where a probe mode's transcript is kept in a phase's run."""
    return f"{probe} {phase}"
