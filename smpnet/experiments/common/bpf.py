"""bpf(2) from Python, with no compiler and no library: BTF, maps, programs
assembled from raw instructions (as the kernel's verifier selftests write
them), BPF_PROG_TEST_RUN, and whether this host lets the kernel referee
(kernel's referee.py; info says it). Docs: docs/experiments/kernel.md,
"The kernel as referee".
"""
import ctypes
import errno
import mmap
import os
import platform
import struct

# include/uapi/linux/bpf.h
BPF_MAP_CREATE, BPF_MAP_LOOKUP_ELEM, BPF_PROG_LOAD = 0, 1, 5
BPF_PROG_TEST_RUN, BPF_BTF_LOAD = 10, 18
BPF_MAP_TYPE_ARRAY, BPF_MAP_TYPE_PERCPU_ARRAY = 2, 6
BPF_F_MMAPABLE = 1 << 10    # an array map user space can map: its values page-aligned
# The programs' type: a tc classifier. Its test run (bpf_prog_test_run_skb()
# in net/bpf/test_run.c) runs the program `repeat` times and nothing else;
# XDP's, for repeat > 1, first points the XDP dispatcher at the program and
# back after (bpf_prog_change_xdp()): a text patch, about 16 ms each here,
# whose IPIs land in the other CPUs' timed runs.
BPF_PROG_TYPE_SCHED_CLS = 3
DONE = 2        # what a program returns when it ran through (tc's value, unread)
# helpers (enum bpf_func_id)
FUNC_map_lookup_elem, FUNC_get_numa_node_id, FUNC_probe_read_kernel = 1, 42, 113
FUNC_spin_lock, FUNC_spin_unlock = 93, 94
# atomic operations (BPF_STX | BPF_ATOMIC): imm
BPF_ADD, BPF_FETCH, BPF_XCHG, BPF_CMPXCHG = 0x00, 0x01, 0xe0 | 0x01, 0xf0 | 0x01
SYS_BPF = {"x86_64": 321, "aarch64": 280}
ATTR_SIZE = 128
R0, R1, R2, R3, R6, R10 = 0, 1, 2, 3, 6, 10
LINE = 64               # x86's cache line
LINE_VALUE = 2 * LINE   # an array map value that holds one whole line wherever it starts


class BpfError(OSError):
    """A bpf(2) command the kernel refused: errno, and the verifier's log."""

    def __init__(self, what, err, log=""):
        self.log = log
        super().__init__(err, f"{what}: {os.strerror(err)}")


_libc = ctypes.CDLL(None, use_errno=True)


def sys_bpf(cmd, attr, what):
    """bpf(cmd, attr): the result (an fd or 0); BpfError on a refusal."""
    nr = SYS_BPF.get(platform.machine())
    if nr is None:
        raise BpfError(what, errno.ENOSYS)
    buf = ctypes.create_string_buffer(bytes(attr).ljust(ATTR_SIZE, b"\0"), ATTR_SIZE)
    ret = _libc.syscall(ctypes.c_long(nr), ctypes.c_int(cmd), buf, ctypes.c_uint(ATTR_SIZE))
    if ret < 0:
        raise BpfError(what, ctypes.get_errno())
    return ret, buf.raw


# ------------------------------------------------------------ instructions

def insn(code, dst=0, src=0, off=0, imm=0):
    """struct bpf_insn: code, dst:4 | src:4, s16 off, s32 imm."""
    return struct.pack("<BBhi", code, dst | (src << 4), off, imm)


def mov64_imm(dst, imm):
    return insn(0xb7, dst, imm=imm)


def mov64_reg(dst, src):
    return insn(0xbf, dst, src)


def add64_imm(dst, imm):
    return insn(0x07, dst, imm=imm)


def st_w(dst, off, imm):       # *(u32 *)(dst + off) = imm
    return insn(0x62, dst, off=off, imm=imm)


def ldx_dw(dst, src, off):     # dst = *(u64 *)(src + off)
    return insn(0x79, dst, src, off)


def stx_dw(dst, src, off):     # *(u64 *)(dst + off) = src
    return insn(0x7b, dst, src, off)


def atomic_dw(op, dst, src, off):   # BPF_STX | BPF_ATOMIC | BPF_DW
    return insn(0xdb, dst, src, off, op)


def call(func):
    return insn(0x85, imm=func)


def kfunc_call(btf_id):        # BPF_CALL, src BPF_PSEUDO_KFUNC_CALL: a kernel function by BTF id
    return insn(0x85, src=2, imm=btf_id)


def jeq_imm(dst, imm, off):
    return insn(0x15, dst, off=off, imm=imm)


def exit_insn():
    return insn(0x95)


def ld_map_fd(dst, fd):        # BPF_LD | BPF_IMM | BPF_DW, src BPF_PSEUDO_MAP_FD: two slots
    return insn(0x18, dst, 1, imm=fd) + insn(0)


def ld_imm64(dst, value):      # BPF_LD | BPF_IMM | BPF_DW: two slots, the low word first
    value &= (1 << 64) - 1
    return (insn(0x18, dst, imm=struct.unpack("<i", struct.pack("<I", value & 0xffffffff))[0])
            + insn(0, imm=struct.unpack("<i", struct.pack("<I", value >> 32))[0]))


def lookup_or_exit(map_fd, body):
    """The program every referee test is: look up key 0 of `map_fd` (its
    value's address in r6), then `body` (instructions), then return
    DONE; a failed lookup returns 0 at once."""
    head = (st_w(R10, -4, 0) + mov64_reg(R2, R10) + add64_imm(R2, -4) + ld_map_fd(R1, map_fd)
            + call(FUNC_map_lookup_elem))
    n = len(body) // 8
    return (head + jeq_imm(R0, 0, n + 1) + mov64_reg(R6, R0) + body
            + mov64_imm(R0, DONE) + exit_insn())


# ------------------------------------------------------------ BTF

BTF_KIND_INT, BTF_KIND_STRUCT = 1, 4
BTF_INT_SIGNED = 1
# where struct val's cnt lies after its lock (btf_spin_lock_value()), as
# lock_slot's counter after its lock (spinlock_types.h)
SPIN_LOCK_CNT = 8


def btf_spin_lock_value(at=0, size=16, lock=b"bpf_spin_lock"):
    """The BTF of `struct val { struct bpf_spin_lock lock; int pad; long cnt; }`
    with the lock `at` bytes into a value of `size` (a map value the verifier
    lets bpf_spin_lock() take: the lock is found by its struct's name, `lock`)
    and of `int`: (blob, int's id, struct val's id)."""
    names = b"\0int\0" + lock + b"\0val\0lock\0pad\0cnt\0long\0"

    def name(text):
        return names.index(b"\0" + text + b"\0") + 1

    types = b"".join([
        # 1: int
        struct.pack("<III", name(b"int"), BTF_KIND_INT << 24, 4),
        struct.pack("<I", BTF_INT_SIGNED << 24 | 32),
        # 2: struct bpf_spin_lock { int val; }
        struct.pack("<III", name(lock), BTF_KIND_STRUCT << 24 | 1, 4),
        struct.pack("<III", name(b"val"), 1, 0),
        # 3: long
        struct.pack("<III", name(b"long"), BTF_KIND_INT << 24, 8),
        struct.pack("<I", BTF_INT_SIGNED << 24 | 64),
        # 4: struct val { struct bpf_spin_lock lock; int pad; long cnt; }
        struct.pack("<III", name(b"val"), BTF_KIND_STRUCT << 24 | 3, size),
        struct.pack("<III", name(b"lock"), 2, 8 * at),        # bit offsets
        struct.pack("<III", name(b"pad"), 1, 8 * at + 32),
        struct.pack("<III", name(b"cnt"), 3, 8 * (at + SPIN_LOCK_CNT)),
    ])
    header = struct.pack("<HBBIIIII", 0xeB9F, 1, 0, 24, 0, len(types), len(types), len(names))
    return header + types + names, 1, 4


IRQ_KFUNCS = ("bpf_local_irq_save", "bpf_local_irq_restore")


def irq_save_restore(ids):
    """bpf_local_irq_save() and bpf_local_irq_restore() (kfuncs of
    kernel/bpf/helpers.c, Linux 6.14 and later; `ids` their BTF ids) of
    flags on the stack: local_irq_save() and local_irq_restore(), each a call."""
    return irqs_off(ids, b"", -16)


def irqs_off(ids, body, flags_at=-8):
    """`body` between irq_save_restore()'s two calls, of flags `flags_at`
    bytes into the stack: a lock pair's own save there finds IRQs off, so
    its restore skips sti."""
    flags = mov64_reg(R1, R10) + add64_imm(R1, flags_at)
    return (flags + kfunc_call(ids["bpf_local_irq_save"]) + body
            + flags + kfunc_call(ids["bpf_local_irq_restore"]))


# kernel/bpf/rqspinlock.c's lock pairs (Linux 6.15 on): the same lock with
# IRQs saved and restored around it or not, so that their difference is
# what local_irq_save() and local_irq_restore() cost inside a pair
RES_KFUNCS = ("bpf_res_spin_lock", "bpf_res_spin_unlock", "bpf_res_spin_lock_irqsave",
              "bpf_res_spin_unlock_irqrestore")


def res_spin_lock_pair(ids, at=0, irqsave=False):
    """bpf_res_spin_lock() and bpf_res_spin_unlock() (or their _irqsave and
    _irqrestore, of flags on the stack) of the lock `at` bytes into the value
    at r6 (a map value of spin_lock_map(k, at, RES_SPIN_LOCK)); `ids`: their
    BTF ids. The lock can fail (a deadlock or a timeout found): the program
    then returns its error, and the verifier knows the lock is held only where
    it returned 0."""
    lock = mov64_reg(R1, R6) + (add64_imm(R1, at) if at else b"")
    flags = mov64_reg(R2, R10) + add64_imm(R2, -8) if irqsave else b""
    fns = RES_KFUNCS[2:] if irqsave else RES_KFUNCS[:2]
    return (lock + flags + kfunc_call(ids[fns[0]]) + jeq_imm(R0, 0, 1) + exit_insn()
            + lock + flags + kfunc_call(ids[fns[1]]))


def spin_lock_pair(at=0, counted=False):
    """bpf_spin_lock() and bpf_spin_unlock() of the lock `at` bytes into the
    value at r6 (a map value of spin_lock_map(k, at)); `counted`: the
    value's cnt + 1 between the two, under the lock (load, add, store), as
    lock_hammer counts its critical sections."""
    cnt = at + SPIN_LOCK_CNT
    inside = ldx_dw(R1, R6, cnt) + add64_imm(R1, 1) + stx_dw(R6, R1, cnt) if counted else b""
    lock = mov64_reg(R1, R6) + (add64_imm(R1, at) if at else b"")
    return lock + call(FUNC_spin_lock) + inside + lock + call(FUNC_spin_unlock)


# ------------------------------------------------------------ objects

class Bpf:
    """The fds this process made (BTF, maps, programs), all closed by
    close() or at the end of a `with`: nothing stays loaded."""

    def __init__(self):
        self.fds = []
        self.value_size = {}    # map fd -> its value's size: what a lookup copies out
        self._line_start = None
        self.mappings = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        while self.mappings:
            self.mappings.pop().close()
        while self.fds:
            self.value_size.pop(self.fds[-1], None)
            os.close(self.fds.pop())

    def _keep(self, fd):
        self.fds.append(fd)
        return fd

    def drop(self, *fds):
        """Close programs (or maps) of this object's before the end."""
        for fd in fds:
            self.fds.remove(fd)
            self.value_size.pop(fd, None)
            os.close(fd)

    def btf(self, blob):
        raw = ctypes.create_string_buffer(blob, len(blob))
        log = ctypes.create_string_buffer(4096)
        attr = struct.pack("<QQIII", ctypes.addressof(raw), ctypes.addressof(log), len(blob),
                           len(log), 1)
        try:
            fd, _ = sys_bpf(BPF_BTF_LOAD, attr, "BTF load")
        except BpfError as e:
            e.log = log.value.decode(errors="replace")
            raise
        return self._keep(fd)

    def map(self, kind, value_size, btf=None, name=b"smpnet", flags=0):
        """An array map of one entry (per-CPU or not), key u32."""
        key_id, value_id, btf_fd = (btf[1], btf[2], btf[0]) if btf else (0, 0, 0)
        attr = (struct.pack("<IIIIIII", kind, 4, value_size, 1, flags, 0, 0)
                + name[:15].ljust(16, b"\0") + struct.pack("<IIII", 0, btf_fd, key_id, value_id))
        fd, _ = sys_bpf(BPF_MAP_CREATE, attr, "map create")
        self.value_size[fd] = value_size
        return self._keep(fd)

    def mapped(self, value_size):
        """(a map, its value mapped into this process): an mmapable array
        map of one entry, whose value begins a page (kernel/bpf/arraymap.c),
        so the line at its offset 0 is the program's and the mapping's
        alike. Unmapped by close(); a forked worker inherits the mapping."""
        fd = self.map(BPF_MAP_TYPE_ARRAY, value_size, flags=BPF_F_MMAPABLE)
        self.mappings.append(mmap.mmap(fd, mmap.PAGESIZE, mmap.MAP_SHARED,
                                       mmap.PROT_READ | mmap.PROT_WRITE))
        return fd, self.mappings[-1]

    def lookup(self, map_fd):
        """The value of key 0, all of it: the kernel copies the map's whole
        value (a buffer sized otherwise would be overrun)."""
        key = ctypes.c_uint32(0)
        value = ctypes.create_string_buffer(self.value_size[map_fd])
        attr = struct.pack("<IIQQQ", map_fd, 0, ctypes.addressof(key), ctypes.addressof(value), 0)
        sys_bpf(BPF_MAP_LOOKUP_ELEM, attr, "map lookup")
        return value.raw

    def line_start(self):
        """Where the first whole cache line begins in a LINE_VALUE-byte array
        map's value. struct bpf_array's value[] follows its header 8-aligned
        (include/linux/bpf.h), so offset 0 of a value may share its line
        with the header, and a small value's last bytes with the next slab
        object (here values begin 56 bytes into a line: the lock pair's lock
        and counter fell in two lines). A program stores its value's address
        in the value (a pointer leak: root's); the maps of one size and type
        come from one slab cache and begin alike. Asked once."""
        if self._line_start is None:
            self._line_start = -self.value_address(self.map(BPF_MAP_TYPE_ARRAY, LINE_VALUE)) % LINE
        return self._line_start

    def value_address(self, m, at=0):
        """Where map `m`'s value lies in the kernel: a program stores the
        value's address in it, `at` bytes in (a pointer leak: root's)."""
        prog = self.prog(lookup_or_exit(m, stx_dw(R6, R6, at)), b"value_address")
        test_run(prog, 1)
        self.drop(prog)
        return struct.unpack_from("<Q", self.lookup(m), at)[0]

    def prog(self, insns, name=b"smpnet"):
        """A tc program (BPF_PROG_TYPE_SCHED_CLS) from raw instructions; BpfError with the verifier's
        log when it is refused. Loaded without a log first: a long program's
        log can overflow the buffer, which fails the load (ENOSPC) even where
        the verifier accepts the program; the log is asked for on a refusal."""
        code = ctypes.create_string_buffer(insns, len(insns))
        lic = ctypes.create_string_buffer(b"GPL")
        log = ctypes.create_string_buffer(1 << 16)

        def load(level):
            attr = (struct.pack("<IIQQIIQII", BPF_PROG_TYPE_SCHED_CLS, len(insns) // 8,
                                ctypes.addressof(code), ctypes.addressof(lic), level,
                                len(log) if level else 0, ctypes.addressof(log) if level else 0,
                                0, 0)
                    + name[:15].ljust(16, b"\0"))
            return sys_bpf(BPF_PROG_LOAD, attr, "program load")[0]

        try:
            fd = load(0)
        except BpfError as first:
            try:
                fd = load(1)        # accepted after all (a refusal that did not repeat)
            except BpfError as e:
                if e.errno == errno.ENOSPC:
                    e = first       # the log overflowed: the first refusal's reason stands
                e.log = log.value.decode(errors="replace")[-2000:]
                raise e from None
        return self._keep(fd)


RES_SPIN_LOCK = b"bpf_res_spin_lock"      # res_spin_lock_pair()'s lock's struct


def spin_lock_map(k, at=0, lock=b"bpf_spin_lock"):
    """An array map, through `k` (a Bpf), whose value's BTF declares the
    struct bpf_spin_lock that spin_lock_pair(at) takes (or `lock`), `at`
    bytes into a LINE_VALUE-byte value (k.line_start(): the lock and its
    counter alone in one cache line, as a lock slot of the model's)."""
    blob, key_id, value_id = btf_spin_lock_value(at, LINE_VALUE, lock)
    return k.map(BPF_MAP_TYPE_ARRAY, LINE_VALUE, (k.btf(blob), key_id, value_id))


def refused():
    """Why the kernel cannot referee here, or None: not x86-64 (the model's
    figures are x86's), or bpf(2) refused the most the referee asks of it,
    a program that takes a BTF-declared spin lock (not root, unprivileged
    BPF off, lockdown, no BTF). What it loads it closes."""
    if platform.machine() != "x86_64":
        return f"not x86-64 ({platform.machine()}): the model's figures are x86's"
    try:
        with Bpf() as k:
            k.prog(lookup_or_exit(spin_lock_map(k), spin_lock_pair()))
    except BpfError as e:
        why = {errno.EPERM: "not permitted (it needs root: CAP_BPF and CAP_PERFMON, or "
                            "CAP_SYS_ADMIN)",
               errno.EACCES: "refused by the verifier or a lockdown",
               errno.ENOSYS: "no bpf(2) here"}.get(e.errno, str(e))
        return f"bpf(2) {why}"
    return None


PACKET = bytes(64)   # what a test run gets: one Ethernet-sized frame of zeros


def test_run(prog_fd, repeat):
    """BPF_PROG_TEST_RUN: the program `repeat` times on this CPU; returns
    (mean ns per run as the kernel timed it, the program's return value)."""
    data = ctypes.create_string_buffer(PACKET, len(PACKET))
    attr = struct.pack("<IIIIQQII", prog_fd, 0, len(PACKET), 0, ctypes.addressof(data), 0,
                       repeat, 0)
    _, out = sys_bpf(BPF_PROG_TEST_RUN, attr, "test run")
    retval, = struct.unpack_from("<I", out, 4)
    duration, = struct.unpack_from("<I", out, 36)
    return duration, retval
