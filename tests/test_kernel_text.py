"""What the referee's programs run, read from the kernel's text
(kernel_text.py): the listing, its summary, and the padding left out."""
import pytest

from conftest import bpf_root as root
from smpnet.experiments.common import bpf
from smpnet.experiments.kernel import kernel_text


def test_the_summary_names_where_each_function_branches_out():
    f = {"bpf_spin_lock": ["ffffffff81000000: call 0xffffffff81000100 <__bpf_spin_lock_irqsave>",
                           "ffffffff81000005: xor %eax,%eax",
                           "ffffffff81000007: jne 0xffffffff81000009 <bpf_spin_lock+0x9>",
                           "ffffffff81000009: jmp 0xffffffff82000000 <its_return_thunk>"],
         "its_return_thunk": ["ffffffff82000000: ret"]}
    assert kernel_text.summary(f) == [
        "bpf_spin_lock: 4 instructions; call __bpf_spin_lock_irqsave, jmp its_return_thunk",
        "its_return_thunk: 1 instructions"]


def test_a_functions_padding_is_left_out_of_its_listing():
    # srso_alias_return_thunk as a Zen 4 boot has it: a thousand int3 up to the next symbol
    thunk = [(0x10b, "call 0xffffffff81104104"), (0x110, "ud2")] + [(0x112 + i, "int3")
                                                                    for i in range(1000)]
    assert kernel_text.unpadded(thunk) == thunk[:2]
    # alignment nops after the last jump go; a nop something branches to, before it, stays
    body = [(0x90, "je 0x9d"), (0x98, "jmp 0xffffffff8110410b"), (0x9d, "nopl 0x0(%rax,%rax,1)"),
            (0xa2, "jmp 0x92"), (0xa4, "nop"), (0xa5, "data16 cs nopw 0x0(%rax,%rax,1)"),
            (0xb0, "xchg %ax,%ax"), (0xb2, "int3")]
    assert kernel_text.unpadded(body) == body[:4]
    assert kernel_text.unpadded([(0, "int3")]) == []
    # the kernel's 8-byte nop (BYTES_NOP8) is padding too; real instructions are not
    assert kernel_text.unpadded([(0, "ret"), (1, "ds nopl 0x0(%rax,%rax,1)")]) == [(0, "ret")]
    real = [(i, insn) for i, insn in enumerate(["int $0x3", "int1", "ud2", "pause",
                                                 "notrack jmp *%rax", "ret"])]
    assert all(kernel_text.unpadded(real[:i + 1]) == real[:i + 1] for i in range(len(real)))


@root
def test_the_helpers_are_read_back_from_the_kernel_and_a_bad_address_is_refused():
    functions, why = kernel_text.listing()
    if why and why.startswith("no objdump"):
        assert not functions
        return
    assert why is None, why
    syms = dict((name, a) for a, name in kernel_text.kallsyms())
    for helper in kernel_text.HELPERS:
        # the listing starts at the symbol's own address, and every helper
        # branches somewhere by name (its body, a return thunk) or returns
        assert functions[helper][0].startswith(f"{syms[helper]:x}: ")
        assert any(" <" in x or x.endswith(": ret") for x in functions[helper]), helper
    assert len(functions) <= kernel_text.MAX_FUNCTIONS
    # each ends at its last instruction, not in the padding up to the next symbol
    assert not [name for name, body in functions.items()
                if not body or kernel_text._PADDING.match(body[-1].split(": ", 1)[1])]
    with bpf.Bpf() as k:
        with pytest.raises(bpf.BpfError, match="read of kernel memory at 0x0"):
            kernel_text.read_kernel(k, 0, 16)
