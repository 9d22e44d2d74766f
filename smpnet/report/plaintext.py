"""--format email: any text report within 80 columns, for a patch review.

Kernel discussions happen in plain-text mail, where a line over 80 columns
is wrapped by someone else's mail client. Nothing here knows an
experiment: report.table() asks `width()` and, when a run's text is being
rendered narrow, lays a table out by `table()` below (headers wrapped over
lines, columns split into blocks that repeat the row's name, cells wrapped
within their column); `render()` then wraps any other line over the width
and puts the machine facts a reviewer needs in two lines on top.
"""
import contextlib
import textwrap

EMAIL_WIDTH = 80
_width = [None]   # the width text is being rendered to; None: as wide as it comes


def width():
    return _width[0]


@contextlib.contextmanager
def narrow(columns=EMAIL_WIDTH):
    """Render report tables within `columns` while inside."""
    old, _width[0] = _width[0], columns
    try:
        yield
    finally:
        _width[0] = old


def _wrap(text, w):
    """A cell's lines at most w wide: at spaces, else cut."""
    if len(text) <= w:
        return [text]
    return textwrap.wrap(text, w, break_on_hyphens=False) or [""]


def _longest_word(text):
    return max((len(x) for x in text.split()), default=0)


def table(cells, headers, numeric, limit, numbered=False):
    """cells: rows of strings; headers: strings; numeric: per column,
    right-aligned. Returns the lines of a table no line of which is over
    `limit` columns (unless a single word is), or None when it fits as it
    is. numbered: the first column is the row's number (see below)."""
    n = len(headers)
    natural = [max(len(r[i]) for r in [headers] + cells) for i in range(n)]
    if sum(natural) + 2 * (n - 1) <= limit and not numbered:
        return None   # it fits as it is: the caller's own layout
    # a header can wrap at its spaces; a cell wraps only when it is wider
    # than all the room a block has beside the row's name
    least = [min(max(_longest_word(r[i]) for r in [headers] + cells), limit) or 1
             for i in range(n)]
    want = [max([len(headers[i].split()[0]) if headers[i].split() else 0]
                + [_longest_word(headers[i])] + [len(r[i]) for r in cells]) for i in range(n)]
    # the leading text columns name the row: repeated in every block
    first = keys = 1 if numbered else 0
    while keys < min(first + 2, n - 1) and not numeric[keys] and \
            sum(want[:keys + 1]) + 2 * keys <= limit // 3:
        keys += 1
    room = limit - sum(want[:keys]) - 2 * keys
    want = want[:keys] + [min(w, max(room, least[i])) for i, w in enumerate(want)][keys:]
    blocks, block = [], []
    for i in range(keys, n):
        used = sum(want[j] + 2 for j in list(range(keys)) + block)
        if block and used + want[i] > limit:
            blocks.append(block)
            block = []
        block.append(i)
    blocks.append(block)
    if len(blocks) > 1 and not numbered and \
            len({tuple(r[:keys]) for r in cells}) < len(cells):
        # the repeated columns do not tell the rows apart: number them
        return table([[str(k + 1)] + r for k, r in enumerate(cells)], ["#"] + headers,
                     [True] + numeric, limit, numbered=True)
    out = []
    for b in blocks:
        cols = list(range(keys)) + b
        out += ([""] if out else []) + _block(cells, headers, numeric, cols,
                                              _widths(cols, natural, want, limit))
    return out


def _widths(cols, natural, least, limit):
    """Each column's width: its least, then the room left given to the
    columns that want more, the smallest want first (so most columns end
    whole, and only the widest wrap)."""
    w = {i: least[i] for i in cols}
    room = limit - sum(w.values()) - 2 * (len(cols) - 1)
    for i in sorted(cols, key=lambda i: natural[i] - least[i]):
        give = max(0, min(natural[i] - w[i], room))
        w[i] += give
        room -= give
    return w


def _block(cells, headers, numeric, cols, w):
    def lines_of(row, header=False):
        wrapped = [_wrap(row[i], w[i]) for i in cols]
        height = max(len(x) for x in wrapped)
        out = []
        for k in range(height):
            parts = []
            for i, x in zip(cols, wrapped):
                # a header's lines sit at its bottom, as a column's name does
                text = (x[k - (height - len(x))] if k >= height - len(x) else "") if header \
                    else (x[k] if k < len(x) else "")
                parts.append(text.rjust(w[i]) if numeric[i] and not header else text.ljust(w[i]))
            out.append("  ".join(parts).rstrip())
        return out

    body = [lines_of(r) for r in cells]
    spaced = any(len(x) > 1 for x in body)   # rows over several lines: a gap between them
    out = lines_of(headers, header=True) + ["  ".join("-" * w[i] for i in cols)]
    for k, x in enumerate(body):
        out += ([""] if spaced and k else []) + x
    return out


def _facts_line(label, parts, limit):
    """'label: a, b, c' with as many parts as fit in `limit` columns."""
    line = f"{label}:"
    for p in parts:
        if p is None:
            continue
        nxt = f"{line} {p}" if line.endswith(":") else f"{line}, {p}"
        if len(nxt) <= limit:
            line = nxt
    return line


def machine_lines(facts, limit=EMAIL_WIDTH):
    """The machine facts a reviewer weighs a figure by, in two lines: what
    the CPUs are and run under, then the clock and the build."""
    def cpulist(x):
        return ",".join(str(c) for c in x or []) or "none"
    gov = sorted(set((facts.get("governor") or {}).values()))
    hz = facts.get("tsc_hz")
    return [
        _facts_line("machine", [
            f"{facts.get('cpu_model') or 'unknown CPU'} ({facts.get('arch')})",
            f"CPUs {cpulist(facts.get('selected_cpus'))} of "
            f"{len(facts.get('online_cpus') or [])} online",
            f"{facts['hypervisor']} guest" if facts.get("hypervisor") else "bare metal",
            f"SMT siblings {facts['smt_siblings']}" if facts.get("smt_siblings") else "no SMT",
            f"Linux {facts.get('kernel')}",
            f"isolcpus {cpulist(facts.get('isolcpus'))}"], limit),
        _facts_line("clock", [
            f"TSC {hz / 1e9:.3f} GHz" if hz else "no TSC",
            f"governor {'/'.join(gov)}" if gov else "no cpufreq governor",
            f"turbo {'on' if facts['turbo'] else 'off'}" if facts.get("turbo") is not None
            else None,
            f"smpnet {facts.get('smpnet')}", f"Cython {facts.get('cython')}",
            f"Python {facts.get('python')}", f"numpy {facts.get('numpy')}"], limit),
    ]


def render(text, facts, limit=EMAIL_WIDTH):
    """The report for a mail: the machine in two lines, a blank line, then
    every line of `text` over `limit` wrapped at spaces, its continuation
    indented two more than the line."""
    out = machine_lines(facts, limit) + [""] if facts else []
    for line in text.splitlines():
        if len(line) <= limit:
            out.append(line)
            continue
        indent = line[:len(line) - len(line.lstrip())]
        more = indent + "  " if len(indent) + 2 < limit // 2 else ""
        out += textwrap.wrap(line.strip(), limit, initial_indent=indent,
                             subsequent_indent=more, break_on_hyphens=False) or [""]
    return "\n".join(out)
