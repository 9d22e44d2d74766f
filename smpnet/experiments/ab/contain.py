"""A worker about to run a user's code: from here on it may not make a new
process (fork, vfork, clone without CLONE_THREAD, clone3) nor exec one. A
seccomp filter, assembled by hand as the kernel's seccomp selftests write
them, kills the worker with SIGSYS at the first try: the run ends naming the
variant and the CPU, and no process outlives it. Docs: docs/experiments/ab.md.
"""
import ctypes
import platform
import resource
import struct

# include/uapi/linux/filter.h, bpf_common.h
BPF_LD_W_ABS = 0x20         # BPF_LD | BPF_W | BPF_ABS
BPF_JEQ_K = 0x15            # BPF_JMP | BPF_JEQ | BPF_K
BPF_JSET_K = 0x45           # BPF_JMP | BPF_JSET | BPF_K
BPF_RET_K = 0x06            # BPF_RET | BPF_K
# include/uapi/linux/seccomp.h: struct seccomp_data { int nr; __u32 arch; __u64 ip; __u64 args[6]; }
DATA_NR, DATA_ARCH, DATA_ARG0 = 0, 4, 16
SECCOMP_RET_KILL_PROCESS = 0x80000000
SECCOMP_RET_ERRNO = 0x00050000
SECCOMP_RET_ALLOW = 0x7fff0000
AUDIT_ARCH_X86_64 = 0xc000003e
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
ENOSYS = 38
CLONE_THREAD = 0x00010000
# arch/x86/entry/syscalls/syscall_64.tbl
NR_CLONE, NR_FORK, NR_VFORK, NR_EXECVE, NR_EXECVEAT, NR_CLONE3 = 56, 57, 58, 59, 322, 435
KILLED = (NR_FORK, NR_VFORK, NR_EXECVE, NR_EXECVEAT)

# what the run says of a worker this filter killed (ab's _run() adds it)
WHY = ("it made a new process or ran a program (fork, clone, exec), which a variant's "
       "code may not: docs/experiments/ab.md")


def _insn(code, k, jt=0, jf=0):
    return struct.pack("<HBBI", code, jt, jf, k)


def program():
    """The filter's instructions: on x86-64, fork, vfork, execve and
    execveat kill the process; clone kills it unless it makes a thread
    (CLONE_THREAD in its flags, the first argument); clone3, whose flags
    lie in memory the filter cannot read, fails with ENOSYS, so that a
    thread's creation falls back to clone; everything else is allowed.
    Another architecture's system call kills the process."""
    n = len(KILLED)
    at = 4 + n                                      # clone3's test, after the killed calls'
    allow, kill, enosys = at + 4, at + 5, at + 6    # where the three returns stand

    def jump(frm, to):      # a jump's offset counts from the next instruction
        return to - frm - 1

    insns = [_insn(BPF_LD_W_ABS, DATA_ARCH),
             _insn(BPF_JEQ_K, AUDIT_ARCH_X86_64, jt=jump(1, 3), jf=jump(1, 2)),
             _insn(BPF_RET_K, SECCOMP_RET_KILL_PROCESS),
             _insn(BPF_LD_W_ABS, DATA_NR)]
    insns += [_insn(BPF_JEQ_K, nr, jt=jump(4 + i, kill)) for i, nr in enumerate(KILLED)]
    insns += [_insn(BPF_JEQ_K, NR_CLONE3, jt=jump(at, enosys)),
              _insn(BPF_JEQ_K, NR_CLONE, jf=jump(at + 1, allow)),
              _insn(BPF_LD_W_ABS, DATA_ARG0),                   # clone's flags, low word
              _insn(BPF_JSET_K, CLONE_THREAD, jt=jump(at + 3, allow), jf=jump(at + 3, kill)),
              _insn(BPF_RET_K, SECCOMP_RET_ALLOW),
              _insn(BPF_RET_K, SECCOMP_RET_KILL_PROCESS),
              _insn(BPF_RET_K, SECCOMP_RET_ERRNO | ENOSYS)]
    assert len(insns) == enosys + 1
    return b"".join(insns)


def contain():
    """Install the filter in this process (a worker, before it runs a
    user's code), and no core file at its death. Once per process; a no-op
    off x86-64, where ab does not run."""
    global _contained
    if _contained or platform.machine() != "x86_64":
        return
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    code = program()
    filt = ctypes.create_string_buffer(code, len(code))
    fprog = struct.pack("<HxxxxxxQ", len(code) // 8, ctypes.addressof(filt))
    libc = ctypes.CDLL(None, use_errno=True)
    if (libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
            or libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER,
                          ctypes.c_char_p(fprog), 0, 0) != 0):
        raise OSError(ctypes.get_errno(), "seccomp filter for a variant's worker")
    _contained = True


_contained = False
