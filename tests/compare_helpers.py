"""What the compare test modules share: a refusal's one line and exit code
2, a locks row of given samples, a result file written from a dict."""
import json

from smpnet.cli import main


def _compare_json(capsys, a, b):
    capsys.readouterr()
    assert main(["compare", str(a), str(b), "--json"]) == 0
    text = capsys.readouterr().out

    def no_constant(c):
        raise AssertionError(f"compare --json wrote {c}")
    return json.loads(text, parse_constant=no_constant)


def _one_line_exit_2(capsys, argv, *expect):
    capsys.readouterr()
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("smpnet-bench: "), captured.err
    for e in expect:
        assert e in lines[0], lines[0]
    return lines[0]


def _locks_row(samples, test="t"):
    return {"test": test, "algo": None, "variant": None, "restore": "sti", "contended": False,
            "cycles": sorted(samples)[len(samples) // 2], "samples": samples,
            "cycles_min": min(samples), "cycles_max": max(samples)}


def _write(path, content):
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(json.dumps(content))
    return path
