"""The --cpus syntax."""
import pytest

from smpnet import BadInput
from smpnet.machine.cpus import format_cpus, parse_cpus

ALLOWED = [0, 1, 2, 3, 8]


@pytest.mark.parametrize("spec,expected", [
    ("all", ALLOWED), (None, ALLOWED), ("0", [0]), ("0,1", [0, 1]), ("0-3", [0, 1, 2, 3]),
    ("3,0-1", [0, 1, 3]), (" 1 , 2 ", [1, 2]), ("8", [8]), ([2, 0], [0, 2]),
    ("0000000001", [1]), ("0" * 5000 + "1", [1]),
    # spaces anywhere around the numbers, as people type them
    ("0 - 3", [0, 1, 2, 3]), ("1 -2", [1, 2]), (" 0 ,\t1-2 ", [0, 1, 2]),
])
def test_valid(spec, expected):
    assert parse_cpus(spec, ALLOWED) == expected


@pytest.mark.parametrize("spec,message", [
    ("", "empty"), ("  ", "empty"), ("4", "not in this process's affinity set"),
    ("0-4", "CPU 4 is not in"), ("0,0", "listed twice"), ("0-2,1", "listed twice"),
    ("abc", "not a CPU number"), ("1-", "not a CPU number"), ("3-1", "runs backwards"),
    ("-1", "not a CPU number"), ("0,,1", "not a CPU number"), ([], "empty"),
    ([0, "1"], "integers"),
    # int() takes these; a CPU list must not
    ("0_1", "not a CPU number"), ("+1", "not a CPU number"), ("\uff11", "not a CPU number"),
    ("0-\uff13", "not a CPU number"), ("1 2", "not a CPU number"), ("0x1", "not a CPU number"),
    # the range's top named, not swallowed into a generic syntax error
    ("0-9", "CPU 9 is not in this process's affinity set"),
    ("0-4000000000", "CPU 4000000000 is not in"), ("9999999999", "CPU 9999999999 is not in"),
    ("1" * 5000, "CPU 111111111111... is not in"), ("0-" + "9" * 5000, "CPU 999999999999... is"),
])
def test_invalid(spec, message):
    with pytest.raises(BadInput, match=message):
        parse_cpus(spec, ALLOWED)


@pytest.mark.parametrize("cpus,text", [([0, 1, 2, 5], "0-2,5"), ([3], "3"), ([], ""), ([4, 0, 1], "0-1,4")])
def test_format(cpus, text):
    assert format_cpus(cpus) == text


def test_format_round_trips():
    assert parse_cpus(format_cpus(ALLOWED), ALLOWED) == ALLOWED


def test_range_past_the_affinity_set_names_the_cpu():
    with pytest.raises(BadInput, match=r"^CPU 5 is not in this process's affinity set \(0-1\)$"):
        parse_cpus("0-5", [0, 1])
