"""The kernel as referee's judgement and its table (referee_text.py): a row
judged on its whole interval, what is not judged and why, and the lines
under the table. Timing is the benchmarks' and the note's, never asserted here."""
from smpnet.experiments.kernel import referee, referee_text


def _row(test, kernel, model, **extra):
    return {"test": test, "kernel_cycles": kernel, "kernel_cycles_lo": kernel,
            "kernel_cycles_hi": kernel, "model_cycles": model, "model_cycles_lo": model,
            "model_cycles_hi": model, "model_test": "t", "model_over_kernel": model / kernel,
            "model_over_kernel_lo": model / kernel, "model_over_kernel_hi": model / kernel,
            "cpus": "1", "rounds": 6, "unroll": referee.UNROLL, "kernel_runs": "k", **extra}


def test_the_text_gives_what_sti_costs_inside_the_pair_and_how_each_row_was_timed():
    p = {"referee_algo": "pvqspinlock", "kernel_build": "x86-preempt"}
    rows = [_row("spin_lock_pair", 116.0, 110.0, twin_ops=referee.UNROLL),
            _row("spin_lock_pair_irqs_off", 109.5, 107.5, twin_ops=referee.UNROLL,
                 irqs_off=True)]
    text = referee_text.text(p, rows)
    assert "the kernel's pair costs 6.5 cycles less, the model's 2.5" in text
    assert "a program of 256 ops unrolled less its twin of 128)" in text
    # contended rows are still timed against an empty twin: the heading says so
    text = referee_text.text(p, rows + [_row("fetch_add_contended", 20.0, 21.0, contended=True,
                                        line_round_trip_cycles=139.4,
                                        line_round_trip_cycles_min=131.0,
                                        line_round_trip_cycles_max=228.0)])
    assert "its twin of 128; contended: 128 ops less an empty twin" in text
    # the contended rows' rounds (kernel --rounds) in the heading where they are not
    # the uncontended ones' (--referee-rounds)
    assert "x86-preempt), 6 rounds, TSC cycles" in text
    trips = {f"line_round_trip_cycles{s}": 139.4 for s in ("", "_min", "_max")}
    assert "x86-preempt), 6 rounds (contended: 10), TSC cycles" in referee_text.text(
        p, rows + [_row("xchg_contended", 20.0, 21.0, contended=True, rounds=10, **trips)])
    assert "round trip between the first two CPUs, before each round and after the last: 139 " \
           "cycles (median; 131 .. 228)" in text
    assert "round trip" not in referee_text.text(p, rows)
    # without the IRQs-off row, no line; a row saved before the twin says so
    assert "what sti costs" not in referee_text.text(p, rows[:1])
    old = [_row("xchg", 5.0, 5.4)]
    assert "128 ops unrolled per run, its empty twin subtracted" in referee_text.text(p, old)


def test_an_emulated_row_is_not_judged_and_says_what_it_leaves_out():
    row = {"test": "irq_save_restore", "kernel_cycles": 23.6, "model_cycles": 6.1,
           "model_over_kernel_lo": 0.2, "model_over_kernel_hi": 0.3, "emulated": "cli and sti"}
    assert referee_text.within(row) is None
    assert referee_text.within({**row, "emulated": ""}) is False
    assert next(t for t in referee.TESTS if t.name == "irq_save_restore").emulated
    # the text: what the emulation leaves out, alone or inside a lock pair
    p = {"referee_algo": "pvqspinlock", "kernel_build": "x86-preempt"}
    alone = _row("irq_save_restore", 23.6, 6.1, emulated="cli and sti")
    pair = _row("irq_save_restore_in_pair", 17.6, 4.5, emulated="cli and sti",
                model_test="spin_lock_unlock_irqsave", model_less="spin_lock_unlock")
    text = referee_text.text(p, [alone, pair])
    assert "spin_lock_unlock_irqsave less spin_lock_unlock" in text     # the model's test
    assert ("irq_save_restore: emulated, not judged: cli and sti; the kernel's op costs 17.5 "
            "cycles more than the model's: what the emulation leaves out, on its own") in text
    assert ("irq_save_restore_in_pair: emulated, not judged: cli and sti; the kernel's op "
            "costs 13.1 cycles more than the model's: what the emulation leaves out, inside "
            "a lock pair") in text
    # the pair as the model's would cost with them: only where both rows ran
    lock = _row("spin_lock_pair", 113.9, 109.7)
    assert ("the model's pair would cost 122.8 against the kernel's 113.9: 1.078"
            in referee_text.text(p, [lock, alone, pair]))
    assert "would cost" not in referee_text.text(p, [lock, alone])


def test_a_row_is_judged_on_its_whole_interval_and_not_under_a_cycle():
    row = {"kernel_cycles": 12.0, "model_over_kernel_lo": 0.95, "model_over_kernel_hi": 1.05}
    assert referee_text.within(row) is True
    assert referee_text.within({**row, "model_over_kernel_hi": 1.11}) is False
    assert referee_text.within({**row, "model_over_kernel_lo": 0.89}) is False
    assert referee_text.within({**row, "kernel_cycles": referee_text.JUDGED_CYCLES * 0.9}) is None
    # contended: the wider bounds
    wide = {**row, "contended": True, "model_over_kernel_lo": 0.81, "model_over_kernel_hi": 1.24}
    assert referee_text.within(wide) is True
    assert referee_text.within({**wide, "contended": False}) is False
    assert referee_text.within({**wide, "model_over_kernel_hi": 1.26}) is False
