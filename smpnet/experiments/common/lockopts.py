"""The lock experiments' command-line options: --algo (with `host`, the
lock a kernel on this host runs), --variant, --restore, --check,
--kernel-build, and a contended run's own; shared by `locks`,
`contended`, `defer` and `ab`.
"""
from ...errors import BadInput
from ...experiment import Option, bounded_value, parse_list
from ...machine import kernel_build, sysinfo
from .lockbench import ALGOS, RESTORES, VARIANTS


def kernel_build_option(several=False):
    """--kernel-build: the shape of the lock entry points (one build, or
    with `several` a list of them)."""
    what = "kernel builds" if several else "the kernel build"
    return Option("--kernel-build",
                  f"{what} the lock entry points and local_bh_enable() follow: a "
                  f"shape, inline code or calls ({', '.join(kernel_build.SHAPES)}), an "
                  f"x86 one with its return ({kernel_build.SAFE_RET}: SRSO's safe-RET "
                  f"thunk, {kernel_build.RET_THUNK}: a jmp to a ret; default a plain "
                  f"ret), e.g. x86-preempt{kernel_build.SAFE_RET}; or {kernel_build.HOST} "
                  "(the default: the host's own, read from its config and sysfs)",
                  default=kernel_build.HOST, metavar="LIST" if several else "NAME")


def add_kernel_build_option(p, several=False):
    kernel_build_option(several).add_to(p)


def kernel_builds(arg, several=False):
    """--kernel-build's builds and the record of how they were chosen
    (kernel_build.resolve); one only unless `several`."""
    names = [n.strip() for n in arg.split(",")]
    if any(not n for n in names):
        raise BadInput(f"--kernel-build {arg!r}: an empty name")
    if len(names) > 1 and not several:
        raise BadInput(f"--kernel-build {arg!r}: one build here (the uncontended suite, "
                       "locks without --contended, takes a list)")
    return kernel_build.resolve(names)


def host_build():
    """A plan's kernel build: the host's, and how it was chosen."""
    builds, record = kernel_builds(kernel_build.HOST)
    return {"kernel_build": builds[0], "kernel_build_record": record}


HOST_ALGO = "host"


def host_algo():
    """The lock a kernel on this host runs, as results record it:
    {"algo", "why"} (kernel_build.host_lock())."""
    algo, why = kernel_build.host_lock(sysinfo.cpuid_hypervisor(), kvm=sysinfo.cpuid_kvm())
    return {"algo": algo, "why": why}


def parse_algos(text):
    """--algo's list (parse_list), `host` being the lock a kernel on this
    host runs; (the algorithms, host_algo() or None)."""
    items = [t.strip() for t in (text or "").split(",")]
    if HOST_ALGO not in items:
        return parse_list(text, ALGOS, "lock algorithm"), None
    host = host_algo()
    if host["algo"] in items:
        raise BadInput(f"--algo {text!r}: host is {host['algo']} here, listed twice")
    return (parse_list(",".join(host["algo"] if t == HOST_ALGO else t for t in items), ALGOS,
                       "lock algorithm"), host)


def algo_host_lines(p):
    """What --algo host stood for, in a line, when it was asked."""
    host = p.get("algo_host")
    return [f"# --algo host: {host['algo']} ({host['why']})"] if host else []


def one_algo(option, text):
    """One algorithm (ab's --algo, defer's --lock), `host` allowed."""
    if text == HOST_ALGO:
        host = host_algo()
        return host["algo"], host
    if text not in ALGOS:
        raise BadInput(f"{option} takes one lock algorithm: {', '.join(ALGOS)} or {HOST_ALGO}")
    return text, None


def algo_option(default="qspinlock", several=True):
    """--algo: lock algorithms, a list or (not `several`) one, or host."""
    if several:
        return Option("--algo", f"lock algorithms: {','.join(ALGOS)}, all, or host (the one a "
                                f"kernel on this host runs: info says which) (default: "
                                f"{default})", default=default, metavar="LIST")
    return Option("--algo", f"the lock algorithm spin_lock() is built with: "
                            f"{', '.join(ALGOS)} or host, the one a kernel here runs "
                            f"(default: {default})", default=default, metavar="ALGO")


def add_algo_option(p, default="qspinlock", several=True):
    algo_option(default, several).add_to(p)


def restore_check_options(check="run the lock/IRQ checker and report what it finds"):
    """--restore and --check (`check`: what the checker does in this experiment)."""
    return (Option("--restore", "local_irq_restore: sti = Linux 5.12+ (default), popf = older "
                                "kernels", choices=RESTORES, default="sti"),
            Option("--check", check, switch=True, default=False))


def add_restore_check_options(p, check="run the lock/IRQ checker and report what it finds"):
    for option in restore_check_options(check):
        option.add_to(p)


def add_lock_options(p, algo_default="qspinlock", several_builds=False):
    """--algo, --variant, --restore, --check, --kernel-build: what every
    lock experiment takes."""
    add_algo_option(p, algo_default)
    p.add_argument("--variant", default="all", metavar="LIST",
                   help=f"lock variants: {','.join(VARIANTS)} or all (default: all)")
    add_restore_check_options(p)
    add_kernel_build_option(p, several_builds)


# A contended run's defaults. REPEAT rounds: with 10 paired rounds the
# 95 % interval of a median (stats.median_ci) is the 2nd to 9th of the 10
# values, so one disturbed round can neither make nor hide a difference
# (at stats.MIN_SAMPLES = 6 it is [min, max], and one round decides);
# docs/experiments/contended.md shows two runs' rankings agreeing with it.
HOLD_CYCLES, THINK_CYCLES, DURATION, REPEAT = 0, 0, 0.2, 10

# the options only a contended run takes (`locks` without --contended refuses them)
CONTENDED_ONLY = ("--hold-cycles", "--think-cycles", "--duration", "--repeat", "--scale",
                  "--rng-seed")


def contended_options(which="", duration=DURATION, repeat=REPEAT, sweeps=True,
                      side="algorithm and variant"):
    """The options of a contended run (`which`: the help's prefix; its
    defaults, and what one run's `side` is; `sweeps`: --scale and
    --rng-seed too). No default set here: a run that is not contended
    refuses them, and the experiment applies the defaults it names."""
    out = [Option(option, f"{which}{what}" + (", a sweep such as 0,100,1000" if sweeps else "")
                  + f" (default: {default})", bounded_value(option),
                  metavar="LIST" if sweeps else "N")
           for option, what, default in (
               ("--hold-cycles", "critical-section lengths in TSC cycles", HOLD_CYCLES),
               ("--think-cycles", "TSC cycles of work outside the lock between a release and "
                                  "the next acquire", THINK_CYCLES))]
    out += [Option("--duration", f"{which}seconds per run of one {side} (default: {duration})",
                   bounded_value("--duration"), metavar="S"),
            Option("--repeat", f"{which}rounds; each round runs every {side} once (default: "
                               f"{repeat})", bounded_value("--repeat"), metavar="R")]
    if sweeps:
        out += [Option("--scale", f"{which}emulated CPU counts to run on, a sweep such as 1,2 "
                                  "(the first N selected CPUs; more than are selected with "
                                  "--oversubscribe, round-robin; default: all selected)",
                       bounded_value("--scale"), metavar="LIST"),
                Option("--rng-seed", f"{which}RNG seed of the rounds' order (default: a random "
                                     "one, recorded in the result)", bounded_value("--rng-seed"),
                       metavar="N")]
    return tuple(out)


def add_contended_options(p, which="", duration=DURATION, repeat=REPEAT, sweeps=True,
                          side="algorithm and variant"):
    for option in contended_options(which, duration, repeat, sweeps, side):
        option.add_to(p)
