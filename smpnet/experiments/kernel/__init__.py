"""kernel: the host kernel's own costs on this machine, beside the model.

Two parts. TCP request/response over 127.0.0.1, as tbench and netperf's
TCP_RR do it: a one-byte request and a one-byte reply on a TCP_NODELAY
connection, the loop in the C core (real send and recv system calls, no
Python in it), timed with the TSC. Client and server are two forked workers
pinned to one CPU (the first selected) or to two (the first two), the
placements alternated round by round after a warm-up round of each. No
root needed.

Then, as root on x86-64, the kernel as referee (referee.py): the kernel's
own spin lock pair, atomics, per-CPU increment and helper call timed inside
it by BPF test runs, beside smpnet's model of each in the same rounds.

Then ARP on a real link (ping_veth.py): `arp -d; ping -c N` between two
network namespaces joined by a veth pair, first and later echoes. It needs
root; without it, one warning says why it was skipped and the TCP part's
rows stand alone. It measures; it judges nothing: no verdict. The host's
sysctls that parameterise the models are recorded beside the figures.
"""
import os
import socket
from dataclasses import dataclass
from typing import Optional

from ... import _core
from ...errors import BadInput, OutputFailed, RunFailed
from ...experiment import Experiment, Metric, Outcome, Params, bounded
from ...machine.cpus import format_cpus
from ...machine.machine import Machine
from ...machine.tsc import tsc_info
from ...measure import calibration, stats
from ...report import output
from ...report.report import table
from . import kernel_text, netns, ping_veth, referee, referee_contended, referee_text

PLACEMENTS = ("same-cpu", "two-cpus")
SERVER, CLIENT = 0, 1           # the emulated CPU each end runs on
# the sysctls smpnet's models take a value from (net.core.X), where readable
SYSCTLS = ("netdev_max_backlog", "netdev_budget", "dev_weight", "skb_defer_max")
SYSCTL_DIR = "/proc/sys/net/core"
WARM_MAX = 1000                 # untimed transactions on each new connection
SLOW_TRANSACTION_S = 200e-6     # the watchdog's allowance per transaction


def add_options(p):
    p.add_argument("--transactions", type=bounded("--transactions"), default=20000,
                   metavar="N", help="transactions per round (default: 20000)")
    p.add_argument("--rounds", type=bounded("--rounds"), default=10, metavar="R",
                   help="measured rounds per placement, after one warm-up round; the "
                        "referee's contended rounds too, 6 at least (default: 10)")
    ref = p.add_mutually_exclusive_group()
    # default None, not ROUNDS: argparse takes a value equal to its default
    # (a cached small int) for no value, and would let --no-referee pass beside it
    ref.add_argument("--referee-rounds", type=bounded("--referee-rounds"), default=None,
                     metavar="R", help="the referee's rounds of its uncontended ops, about 0.3 s "
                     f"each (default: {referee.ROUNDS})")
    ref.add_argument("--no-referee", action="store_true",
                     help="leave the kernel as referee out (most of a default run's time)")
    p.add_argument("--trials", type=bounded("--trials"), default=20, metavar="T",
                   help="veth ping trials, after one warm-up trial (default: 20; needs root)")
    p.add_argument("--count", type=bounded("--count"), default=3, metavar="N",
                   help="ICMP echoes per veth ping trial, as ping -c (default: 3)")
    p.add_argument("--save", metavar="PATH",
                   help="write the measured costs as a calibration profile to PATH, which "
                        "loopback, arp and all take with --calibration PATH")


def read_sysctls(folder=SYSCTL_DIR):
    """{net.core.X: int} for the SYSCTLS this host has and lets us read."""
    out = {}
    for name in SYSCTLS:
        try:
            with open(os.path.join(folder, name)) as f:
                out[f"net.core.{name}"] = int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            continue
    return out


def params(args, cpus):
    if not cpus:
        raise BadInput("kernel needs at least one CPU")
    if args.save is not None:     # refused before the run, as --output is
        try:
            output.prepare(args.save).close()
        except BadInput as e:
            raise BadInput(str(e).replace("--output", "--save", 1)) from None
        out = getattr(args, "output", None)
        if out is not None and os.path.realpath(out) == os.path.realpath(args.save):
            raise BadInput(f"--save and --output are the same file ({args.save}): the result "
                           "would overwrite the profile")
    return _params(cpus, args.transactions, args.rounds, args.trials, args.count, args.save,
                   referee_rounds=(None if args.no_referee
                                   else args.referee_rounds or referee.ROUNDS))


@dataclass(frozen=True)
class KernelParams(Params):
    cpus: str
    transactions: int
    rounds: int
    placements: list
    sysctls: dict
    trials: int
    count: int
    save: Optional[str]             # --save PATH of the profile
    veth_skipped: Optional[str]     # why the veth ping cannot run here, before the run
    neigh_sysctls: dict
    neigh_model: dict
    # the referee's plan, or why it cannot run here (referee_skipped)
    referee_skipped: Optional[str] = None
    referee_rounds: Optional[int] = None            # its uncontended ops'
    referee_contended_rounds: Optional[int] = None
    referee_contended: Optional[list] = None
    referee_algo: Optional[str] = None
    kernel_build: Optional[str] = None
    kernel_build_record: Optional[dict] = None
    OPTIONAL = ("referee_skipped", "referee_rounds", "referee_contended_rounds",
                "referee_contended", "referee_algo", "kernel_build", "kernel_build_record")


def _params(cpus, transactions, rounds, trials, count, save=None,
            contended=referee_contended.CONTENDED, referee_rounds=referee.ROUNDS):
    """referee_rounds None: the referee left out (--no-referee)."""
    placements = list(PLACEMENTS if len(cpus) >= 2 else PLACEMENTS[:1])
    return KernelParams(cpus=format_cpus(cpus), transactions=transactions,
                        rounds=rounds, placements=placements, sysctls=read_sysctls(),
                        trials=trials, count=count, save=save,
                        veth_skipped=netns.can_admin_net(), **ping_veth.neigh_params(),
                        **(referee.plan(rounds, referee_rounds, contended) if referee_rounds
                           else {"referee_skipped": referee.NOT_ASKED}))


def plan(cpus, quick):
    """Inside `all`: a profile for the calibrated stages after it (a few
    seconds in quick mode, most of them the two-CPU round trips); quick,
    the referee's rounds are 6 and it has no contended rows (no seed's
    line takes them, and the lock pair alone took 2.7 s of 8.3)."""
    return _params(cpus, 3000 if quick else 20000, 6 if quick else 10, 10 if quick else 20, 3,
                   contended=() if quick else referee_contended.CONTENDED,
                   referee_rounds=stats.MIN_SAMPLES if quick else referee.ROUNDS)


def profile(cpus, params, outcome):
    """The calibration profile a run measured (measure/calibration.py);
    params: the run's record of them."""
    return calibration.from_kernel(outcome.rows, params, tsc_info()["tsc_hz"])


def warm(n):
    return min(n, WARM_MAX)


def seconds(p, cpus):
    per_round = 0.05 + (p.transactions + warm(p.transactions)) * 20e-6
    veth = 0 if p.veth_skipped else ping_veth.seconds(p.trials, p.count)
    ref = (referee.seconds(p.referee_rounds)
           + referee_contended.contended_seconds(p.referee_contended_rounds,
                                                 p.referee_contended)
           if p.referee_rounds else 0)
    return len(p.placements) * (p.rounds + 1) * per_round + veth + ref


def placement_cpus(placement, cpus):
    return [cpus[0]] if placement == "same-cpu" else list(cpus[:2])


def order(rounds, placements):
    """The placements round by round: in order, then reversed (ABBA)."""
    return [tuple(placements) if r % 2 == 0 else tuple(placements[::-1]) for r in range(rounds)]


def _check(what, n, result):
    cycles, wall_ns, done, err = result
    if err == _core.RR_PEER_CLOSED:
        raise RunFailed(f"{what}: the peer closed the connection after {done} of {n} transactions")
    if err:
        raise RunFailed(f"{what}: {os.strerror(err)} after {done} of {n} transactions")
    return cycles, wall_ns


def transact(ctx, listener, port, n):
    """One round, run by both workers: the server accepts and answers
    warm + n transactions; the client connects, warms up, and times n."""
    total = warm(n) + n
    if ctx.cpu == SERVER:
        conn, _ = listener.accept()
        with conn:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            _check("server", total, _core.tcp_rr(conn.fileno(), total, False))
        return None
    listener.close()   # the client's copy: only the server accepts
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        _check("client warm-up", warm(n), _core.tcp_rr(s.fileno(), warm(n), True))
        return _check("client", n, _core.tcp_rr(s.fileno(), n, True))


def run(cpus, p, progress=None):
    n, rounds, placements = p.transactions, p.rounds, p.placements
    refereed = p.referee_rounds is not None
    referee_steps = ([f"the kernel as referee: uncontended ops, CPU {cpus[0]}"]
                     + [f"the kernel as referee: {t} contended, CPUs {format_cpus(cpus)}"
                        for t in (p.referee_contended if len(cpus) > 1 else ())]
                     if refereed else [])
    warnings, decided = [], {}      # decided: what the run adds to its params' record
    if len(placements) < len(PLACEMENTS):
        warnings.append("two-cpus skipped: it needs two CPUs and one is selected")
    samples = {pl: ([], []) for pl in placements}     # (transactions/s, cycles per transaction)
    expected = 0.5 + (n + warm(n)) * SLOW_TRANSACTION_S
    machines = {pl: Machine(cpus=placement_cpus(pl, cpus), ncpus=2, oversubscribe=True)
                for pl in placements}
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        for m in machines.values():
            m.open()
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        port = listener.getsockname()[1]
        plan = [(None, pl) for pl in placements] + \
               [(r, pl) for r, pls in enumerate(order(rounds, placements)) for pl in pls]
        # one count over every part: the referee's (uncontended, then each
        # contended op), then the veth ping's warm-up and trials
        steps = len(plan) + len(referee_steps) + (0 if p.veth_skipped else p.trials + 1)
        for i, (r, pl) in enumerate(plan):
            if progress:
                progress(i, steps, f"{pl} " + ("warm-up" if r is None else f"round {r + 1}"))
            cycles, wall_ns = machines[pl].run(transact, listener, port, n,
                                               expected=expected)[CLIENT]
            if r is not None:
                samples[pl][0].append(n * 1e9 / max(wall_ns, 1))
                samples[pl][1].append(cycles / n)
    finally:
        listener.close()
        for m in machines.values():
            m.close()
    rows = []
    for pl in placements:
        tps, cyc = samples[pl]
        rate = stats.median_fields("tps", tps)
        rows.append({"test": "tcp_rr", "placement": pl,
                     "cpus": format_cpus(placement_cpus(pl, cpus)),
                     "transactions": n, "rounds": rounds,
                     **rate, **stats.median_fields("cycles", cyc),
                     "us": 1e6 / rate["tps"], "tps_samples": tps, "cycles_samples": cyc})
    if rounds < stats.MIN_SAMPLES:
        warnings.append(f"the intervals cover less than 95 %: give --rounds "
                        f"{stats.MIN_SAMPLES} or more")
    done = len(plan) + len(referee_steps)

    def referee_progress(i):
        if progress:
            progress(len(plan) + i, steps, referee_steps[i])
    rows += referee_part(cpus, p, warnings, decided, referee_progress)
    veth_progress = progress and (lambda i, n, what: progress(done + i, done + n, what))
    note = referee_text.seed_003_note(rows)
    rows += veth_part(cpus, p, veth_progress, warnings, decided)
    out = Outcome(p.record(**decided), rows, [], warnings,
                  {"seed_notes": {"003": note}} if note else {})
    if p.save:
        failed = save_profile(p.save, calibration.dumps(profile(cpus, out.params, out)))
        if failed:
            out.params["save_failed"] = failed
            out.warnings.append(failed)
            out.failures.append(failed)
    return out


def save_profile(path, text):
    """Write the profile to --save PATH, checked again now (its directory may
    have gone during the run); where it cannot go there, to a new file in
    the temporary directory. None, or the line that says where it went."""
    try:
        output.write(text, output.prepare(path))
        return None
    except BadInput as e:           # PATH can no longer take it: it goes elsewhere
        saved = output.save(text, "kernel-profile")
        why = str(e).replace("--output", "--save", 1)
    except OutputFailed as e:       # the write failed: output saved it already
        saved, why = e.saved, str(e).replace("--output", "--save", 1).split("; the result")[0]
    return (f"calibration profile not written: {why}; "
            + (f"it was saved to {saved}" if saved else "it could not be saved anywhere"))


def referee_part(cpus, p, warnings, decided, progress):
    """The referee's rows on the first CPU, or none and a warning saying why;
    the kernel's listing of what it ran goes to `decided`. progress(i): its
    i-th step begins (the uncontended rows, then each contended op)."""
    if p.referee_rounds is None:
        if p.referee_skipped != referee.NOT_ASKED:
            warnings.append(f"kernel referee skipped: {p.referee_skipped or 'not planned'}")
        return []
    tsc_hz, algo = tsc_info()["tsc_hz"], p.referee_algo
    progress(0)
    rows = referee.measure(cpus[0], tsc_hz, algo, p.kernel_build, p.referee_rounds, warnings)
    functions, why = kernel_text.listing()
    decided["kernel_text"] = functions
    if why:
        warnings.append(f"kernel referee: what it runs not listed: {why}")
    if not p.referee_contended:     # none planned (all --quick)
        return rows
    if len(cpus) < 2:
        warnings.append("kernel referee: no contended rows: they need two CPUs and one is "
                        "selected")
        return rows
    contended = referee_contended.measure_contended(
        cpus, tsc_hz, algo, p.kernel_build, p.referee_contended_rounds, p.referee_contended,
        lambda i: progress(1 + i))
    warnings += referee_contended.miscounted(contended) + referee_contended.moved(contended)
    return rows + contended


def veth_part(cpus, p, progress, warnings, decided):
    """The ARP part's rows, or none and a warning saying why it was skipped;
    the namespace's facts (or why it could not be made) go to `decided`."""
    if p.veth_skipped:
        warnings.append(f"veth ping skipped: {p.veth_skipped}")
        return []
    try:
        rows, facts, _ = ping_veth.run(cpus[0], p.trials, p.count, progress, warnings)
    except netns.Unavailable as e:
        decided["veth_skipped"] = str(e)
        warnings.append(f"veth ping skipped: {e}")
        return []
    decided.update(facts)
    return rows


def text(env, extra):
    p = env["params"]
    rows = [r for r in env["results"] if r.get("test", "tcp_rr") == "tcp_rr"]
    veth = [r for r in env["results"] if r.get("test") == "veth_ping"]
    ref = [r for r in env["results"] if r.get("placement") == referee.PLACEMENT]
    lines = [f"# kernel: TCP request/response over 127.0.0.1 (1-byte messages, TCP_NODELAY), "
             f"{p['rounds']} rounds of {p['transactions']} transactions per placement"]
    lines.append(table([(r["placement"], r["cpus"], r["tps"],
                         f"{r['tps_lo']:.0f} .. {r['tps_hi']:.0f}", r["cycles"],
                         f"{r['cycles_lo']:.0f} .. {r['cycles_hi']:.0f}", r["us"])
                        for r in rows],
                       ["placement", "cpus", "transactions/s", "95 % interval",
                        "cycles/transaction", "95 % interval", "us/transaction"]))
    sysctls = p.get("sysctls") or {}
    lines.append("host sysctls (the model's): " + (", ".join(
        f"{k} = {v} ({_core.NET_CORE_MODEL.get(k.rsplit('.', 1)[-1], '?')})"
        for k, v in sysctls.items()) or "none readable"))
    if ref:    # else the warnings say why there is none, in one line
        lines.append(referee_text.text(p, ref))
        if p.get("kernel_text"):
            lines.append("  what the helpers run here, read from this kernel's text (the "
                         "listing: params.kernel_text in the JSON):")
            lines += [f"    {x}" for x in kernel_text.summary(p["kernel_text"])]
    if veth:
        lines.append(veth_text(p, veth))
    if p.get("neigh_model"):
        lines.append("ARP neighbour defaults: this host's, A's veth0's, the model's (core/arp.pyx)")
        lines.append(ping_veth.neigh_text(p))
    if p.get("save_failed"):
        lines.append(p["save_failed"])
    elif p.get("save"):
        lines.append(f"calibration profile written to {p['save']} (give it to loopback, arp "
                     f"or all with --calibration {p['save']})")
    return "\n".join(lines)


def veth_text(p, veth):
    first = veth[0]
    lines = [f"# veth ping: arp -d; ping -c {p['count']} over a veth pair between two "
             f"namespaces, {p['trials']} trials (ICMP echo from the C core, CPU {first['cpus']})"]
    lines.append(table([(r["placement"], r["us"], f"{r['us_lo']:.3f} .. {r['us_hi']:.3f}",
                         r["cycles"], f"{r['cycles_lo']:.0f} .. {r['cycles_hi']:.0f}")
                        for r in veth],
                       ["echo", "us/round trip", "95 % interval", "cycles/round trip",
                        "95 % interval"]))
    if "first_over_later" in first:
        lines.append(f"first / later: {first['first_over_later']:.2f} times (cycles); "
                     f"the first echo waits for ARP resolution, the later ones do not")
    return "\n".join(lines)


EXPERIMENT = Experiment(
    name="kernel",
    help="the host kernel's real costs: TCP request/response over 127.0.0.1, ARP over veth",
    description="Times one-byte TCP request/response transactions over 127.0.0.1 "
                "(TCP_NODELAY) from the C core, real system calls, client and server pinned "
                "to one CPU and to two, rounds alternated: transactions per second and "
                "cycles per transaction with 95 % intervals, and the host's net.core "
                "sysctls. As root on x86-64, the kernel as referee: its own spin lock "
                "pair, atomics, per-CPU increment and helper call timed inside it (BPF "
                "test runs of hand-assembled programs), smpnet's model of each beside it, "
                "and model / kernel. Then, as root, ARP on a real link: arp -d; ping -c N over a veth "
                "pair between two namespaces smpnet makes and removes, first and later "
                "echoes (skipped with a warning without root), and the host's ARP "
                "neighbour defaults beside the model's. It calibrates; it gives no verdict.",
    add_options=add_options, params=params, seconds=seconds, run=run, text=text,
    # rows written before the veth part existed are all tcp_rr
    metric=Metric(("test", "placement"), "cycles", "cycles_samples", "cycles_lo", "cycles_hi",
                  defaults={"test": "tcp_rr"}),
    machine_options=False, plan=plan, calibrates=profile,
)
