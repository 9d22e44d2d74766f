"""Which CPU runs which role of a file's SMPNET_ROLES in `ab`'s contended
mode (uncontended, one CPU runs every role in turn). Docs:
docs/experiments/ab.md, "The file"."""
from ...errors import BadInput


def names(text):
    """SMPNET_ROLES' names from the object's stringified list ("consumer,
    producer"); BadInput for one not a plain name (`a = 1`: its place would
    not be its number)."""
    out = tuple(n.strip() for n in text.split(",") if n.strip())
    bad = [n for n in out if not n.isidentifier()]
    if bad:
        raise BadInput(f"SMPNET_ROLES({bad[0]}): roles are names, numbered in their order")
    return out


def assign(obj, given, ncpus, contended):
    """Each contended CPU's role name (the file's SMPNET_ROLES), or None for
    a file without roles: --roles, one name per CPU in CPU order, or the
    file's order (CPU i the i-th role, the last role on every CPU left).
    BadInput where a role would have no CPU."""
    names = obj.cpu_roles
    if not names:
        if given is not None:
            raise BadInput(f"--roles: {obj.name} declares no SMPNET_ROLES")
        return None
    if not contended:
        if given is not None:
            raise BadInput("--roles: for a contended run only (uncontended, one CPU runs every "
                           "role in turn)")
        return None
    if given is None:
        roles = [names[min(i, len(names) - 1)] for i in range(ncpus)]
    else:
        roles = [r.strip() for r in given.split(",")]
        bad = [r for r in roles if r not in names]
        if bad:
            raise BadInput(f"--roles: no role {bad[0]!r} in {obj.name} (its roles: "
                           f"{', '.join(names)})")
        if len(roles) != ncpus:
            raise BadInput(f"--roles {given}: {len(roles)} role(s) for {ncpus} CPUs (one a CPU, "
                           "in CPU order)")
    idle = [n for n in names if n not in roles]
    if idle:
        raise BadInput(f"{obj.name}: role {idle[0]!r} has no CPU of the {ncpus} ("
                       f"{len(names)} roles need {len(names)} CPUs or more; --roles gives "
                       "each CPU its role)")
    return roles
