"""The running kernel's BTF (/sys/kernel/btf/vmlinux): which type is which
kernel function, a kfunc's id for the referee's programs. Docs:
docs/experiments/kernel.md, "The kernel as referee".
"""
import errno
import struct

from ..common.bpf import BpfError

VMLINUX_BTF = "/sys/kernel/btf/vmlinux"
# the bytes each BTF kind's record carries after its 12-byte head (vlen: its count)
_BTF_EXTRA = {1: lambda n: 4, 3: lambda n: 12, 4: lambda n: 12 * n, 5: lambda n: 12 * n,
              6: lambda n: 8 * n, 13: lambda n: 8 * n, 14: lambda n: 4, 15: lambda n: 12 * n,
              17: lambda n: 4, 19: lambda n: 12 * n}
BTF_KIND_FUNC = 12


def vmlinux_func_ids(names, path=VMLINUX_BTF):
    """{name: BTF id} of the kernel functions among `names` the running
    kernel's BTF declares (those it lacks are left out); OSError where it
    cannot be read, BpfError where it is not BTF."""
    with open(path, "rb") as f:
        data = f.read()
    magic, _, _, hdr_len, type_off, type_len, str_off, _ = struct.unpack_from("<HBBIIIII", data)
    if magic != 0xEB9F:
        raise BpfError(f"{path}: not BTF", errno.EINVAL)
    types, strings = hdr_len + type_off, hdr_len + str_off
    wanted = {n.encode(): n for n in names}
    out, pos, type_id = {}, types, 1
    while pos < types + type_len:
        name_off, info, _ = struct.unpack_from("<III", data, pos)
        kind, vlen = info >> 24 & 0x1F, info & 0xFFFF
        if kind == BTF_KIND_FUNC:
            at = strings + name_off
            name = data[at:data.index(b"\0", at)]
            if name in wanted:
                out[wanted[name]] = type_id
        pos += 12 + _BTF_EXTRA.get(kind, lambda n: 0)(vlen)
        type_id += 1
    return out
