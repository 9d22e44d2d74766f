"""What the referee's programs run, read from the running kernel: the
helpers' bodies and the functions they call, as this boot patched them
(alternatives, return thunks), disassembled. Docs:
docs/experiments/kernel.md, "The kernel as referee".
"""
import bisect
import errno
import os
import re
import shutil
import subprocess
import tempfile

from ..common import bpf

HELPERS = ("bpf_spin_lock", "bpf_spin_unlock", "bpf_get_numa_node_id") + bpf.IRQ_KFUNCS
# listed, what they call named, not followed: rqspinlock's pairs differ by
# their IRQ save and restore, in their own bodies (its slow path and error
# report would crowd out the helpers' callees)
BODIES = bpf.RES_KFUNCS
MAX_FUNCTIONS = 20      # the helpers and what they call, breadth first
MAX_DEPTH = 2           # the helpers' callees and theirs: the slow path named, not walked
MAX_BYTES = 1024        # of one function: a lock's slow path is listed by name, not followed
TEXT_CHUNK = 512        # bytes of kernel memory one read_kernel() test run copies
_BRANCH = re.compile(r"\b(call|jmp)q?\s+0x([0-9a-f]+)$")
# what fills the bytes from a function's last instruction to the next symbol:
# int3 (the kernel pads with it) and nops of alignment; never run
_PADDING = re.compile(r"^(int3|((data16|cs|ds) )*(nop[a-z]*|xchg %ax,%ax))( |$)")


def read_kernel(k, address, size):
    """`size` bytes of the running kernel's memory at `address` (its text,
    as this boot patched it), copied by bpf_probe_read_kernel() into a map
    value by one test run per TEXT_CHUNK, through `k` (a bpf.Bpf): it needs
    CAP_PERFMON, as the referee's other programs do. BpfError if a read is
    refused."""
    m = k.map(bpf.BPF_MAP_TYPE_ARRAY, TEXT_CHUNK)
    out = b""
    for at in range(address, address + size, TEXT_CHUNK):
        # a failed read returns 0, not DONE: the map's bytes would be stale
        prog = k.prog(bpf.lookup_or_exit(
            m, bpf.mov64_reg(bpf.R1, bpf.R6) + bpf.mov64_imm(bpf.R2, TEXT_CHUNK)
            + bpf.ld_imm64(bpf.R3, at) + bpf.call(bpf.FUNC_probe_read_kernel)
            + bpf.jeq_imm(bpf.R0, 0, 2) + bpf.mov64_imm(bpf.R0, 0) + bpf.exit_insn()))
        if bpf.test_run(prog, 1)[1] != bpf.DONE:
            raise bpf.BpfError(f"read of kernel memory at {at:#x}", errno.EIO)
        out += k.lookup(m)
        os.close(k.fds.pop())       # this chunk's program: done with
    return out[:size]


def kallsyms(path="/proc/kallsyms"):
    """Text symbols as [(address, name)], sorted; empty where the addresses
    are hidden (kptr_restrict, not root)."""
    syms = []
    with open(path) as f:
        for line in f:
            addr, kind, name = line.split()[:3]
            if kind in "tTwW" and int(addr, 16):
                syms.append((int(addr, 16), name))
    return sorted(syms)


def _disassemble(code, address):
    """objdump's lines for `code` loaded at `address`: (address, text)."""
    with tempfile.NamedTemporaryFile(suffix=".bin") as f:
        f.write(code)
        f.flush()
        out = subprocess.run(["objdump", "-D", "-b", "binary", "-m", "i386:x86-64",
                              f"--adjust-vma={address:#x}", f.name],
                             capture_output=True, text=True, timeout=30, check=True).stdout
    lines = []
    for line in out.splitlines():
        parts = line.split("\t")
        if len(parts) >= 3 and parts[0].strip().endswith(":"):
            lines.append((int(parts[0].strip()[:-1], 16), " ".join(parts[2].split())))
    return lines


def listing(helpers=HELPERS, bodies=BODIES):
    """(functions, why): functions maps each name to its instructions, each
    "address: instruction" with a branch's target named (<name+off>), the
    helpers first, then what they call or jump to, breadth first; why is
    None, or why nothing could be listed (then functions is {})."""
    if not shutil.which("objdump"):
        return {}, "no objdump (binutils) to disassemble it"
    try:
        syms = kallsyms()
    except OSError as e:
        return {}, f"/proc/kallsyms: {e.strerror}"
    if not syms:
        return {}, "/proc/kallsyms hides the addresses (kptr_restrict)"
    start = {name: a for a, name in syms}
    ends = {a: b for (a, _), (b, _) in zip(syms, syms[1:])}
    addresses = [a for a, _ in syms]

    def named(target):
        # the last symbol at or below target (syms is sorted): a search, not
        # a scan of the 40,000 or more a kernel has, for each of the branches
        i = bisect.bisect_right(addresses, target) - 1
        if i < 0:
            return hex(target)
        a, name = syms[i]
        return name if a == target else f"{name}+{target - a:#x}"

    todo = [(h, 0) for h in helpers if h in start] + [(h, MAX_DEPTH) for h in bodies
                                                       if h in start]
    out = {}
    try:
        with bpf.Bpf() as k:
            while todo and len(out) < MAX_FUNCTIONS:
                name, depth = todo.pop(0)
                if name in out:
                    continue
                a = start[name]
                size = min(ends.get(a, a + MAX_BYTES) - a, MAX_BYTES)
                body = []
                for at, insn in _disassemble(read_kernel(k, a, size), a):
                    m = _BRANCH.search(insn)
                    if m:
                        target = int(m.group(2), 16)
                        insn += f" <{named(target)}>"
                        if (target in ends and not a <= target < a + size
                                and depth < MAX_DEPTH):
                            todo.append((named(target), depth + 1))
                    body.append((at, insn))
                out[name] = [f"{at:x}: {insn}" for at, insn in unpadded(body)]
    except (bpf.BpfError, subprocess.SubprocessError, OSError) as e:
        return {}, f"kernel text not read: {e}"
    return out, None


def unpadded(body):
    """A function's [(address, instruction)] without the padding after its
    last instruction: a thunk in a section of its own is followed by a
    thousand int3 up to the next symbol."""
    end = len(body)
    while end and _PADDING.match(body[end - 1][1]):
        end -= 1
    return body[:end]


def summary(functions):
    """One line per function: its size in instructions and where it
    branches to by name (calls, and jumps out of it: tail calls, the
    return thunk)."""
    lines = []
    for name, body in functions.items():
        out = []
        for insn in body:
            m = re.search(r"\b(call|jmp)q?\s+0x[0-9a-f]+ <([^>+]+)>$", insn)
            if m and m.group(2) != name:
                out.append(f"{m.group(1)} {m.group(2)}")
        lines.append(f"{name}: {len(body)} instructions" +
                     (f"; {', '.join(dict.fromkeys(out))}" if out else ""))
    return lines
