"""A mutation run: each mutant below applied to a scratch copy of HEAD, and the tests that
must kill it run there. `python tests/mutation.py [--list] [ID ...]`, from the repository
root; docs/contributing.md ("Mutation runs") says what counts and how to add one."""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import namedtuple

# old: text of the committed file that occurs there exactly once; new: what replaces it;
# tests: the pytest node ids that must kill it; why: the fault, in round 5's words
Mutant = namedtuple("Mutant", "id file old new tests why")

FIG = "smpnet/experiments/ab/figures.py"
HDR = "smpnet/include/smpnet.h"
T_FIG = "tests/test_ab_figures.py::"
T_LOCKS = "tests/test_ab_locks.py::"
T_SKB = "tests/test_ab_skbs.py::"

MUTANTS = [
    Mutant("label-swapped", FIG, "        return FASTER\n    if lo > 0:\n        return SLOWER",
           "        return SLOWER\n    if lo > 0:\n        return FASTER",
           [T_FIG + "test_the_label_is_the_intervals_side_of_zero_and_a_zero_end_is_no_difference"],
           "faster/slower swapped"),
    Mutant("label-zero-end-faster", FIG, "if hi < 0:", "if hi <= 0:",
           [T_FIG + "test_the_label_is_the_intervals_side_of_zero_and_a_zero_end_is_no_difference"],
           "an interval touching 0 called faster"),
    Mutant("control-base-twice", FIG, "ctl = _paired(aa, base)", "ctl = _paired(base, base)",
           [T_FIG + "test_each_variant_is_paired_against_the_baseline_and_the_control_is_its_copy"],
           "the A/A control pairing the baseline with itself"),
    Mutant("control-last-variant", FIG,
           'base, aa = variants[0], next(r for r in rows if r["role"] == CONTROL)',
           "base, aa = variants[0], variants[-1]",
           [T_FIG + "test_each_variant_is_paired_against_the_baseline_and_the_control_is_its_copy"],
           "the A/A control using the last variant (instead of the baseline)"),
    Mutant("paired-sign-flipped", FIG,
           'stats.paired_abba(a["samples"], b["samples"], stats.per_op_diff)',
           'stats.paired_abba(b["samples"], a["samples"], stats.per_op_diff)',
           [T_FIG + "test_each_variant_is_paired_against_the_baseline_and_the_control_is_its_copy"],
           "every paired difference's sign flipped"),
    Mutant("contended-ops-per-s", FIG, "sum(done) / (max(r[1] for r in per) / tsc_hz)",
           "sum(done) / (min(r[1] for r in per) / tsc_hz)",
           [T_FIG + "test_a_contended_rounds_figures_are_its_cpus_together"],
           "contended ops/s wrong"),
    Mutant("contended-cost-per-op", FIG, "cost.append(sum(r[1] for r in per) / max(1, sum(done)))",
           "cost.append(max(r[1] for r in per) / max(1, sum(done)))",
           [T_FIG + "test_a_contended_rounds_figures_are_its_cpus_together"],
           "contended cost per op wrong"),
    Mutant("contended-fairness", FIG, "fair.append(_fairness([r[0] for r in per], cpu_roles))",
           "fair.append(_fairness([r[1] for r in per], cpu_roles))",
           [T_FIG + "test_a_contended_rounds_figures_are_its_cpus_together"],
           "contended fairness wrong"),
    Mutant("builtin-ratio-doubled", FIG, "lambda x, y: x / y", "lambda x, y: 2 * x / y",
           [T_FIG + "test_a_variants_ratio_over_a_built_in_is_its_cost_over_the_tests"],
           "the built-in ratio doubled"),
    Mutant("abba-order-lost", "smpnet/experiments/ab/rounds.py",
           "for i in pass_order(every, r):", "for i in range(every):",
           [T_FIG + "test_the_uncontended_rounds_run_in_abba_order"], "ABBA order lost"),
    Mutant("contended-check-skipped", "smpnet/experiments/ab/__init__.py",
           '_check(m, entries, labels, where, ops, "contended")', "pass",
           ["tests/test_ab.py::test_a_check_runs_after_the_contended_rounds_too"],
           "SMPNET_CHECK skipped after contended rounds"),
    Mutant("init-as-check", HDR, "v->init = smpnet_hooks_[k].fn;",
           "v->check = smpnet_hooks_[k].fn;",
           ["tests/test_ab.py::test_an_init_runs_before_the_rounds_and_a_check_after"],
           "INIT hooks run as checks"),
    Mutant("user-popf-ignored", HDR, "(flags), SMPNET_LOCK_ARGS, SMPNET_BUILD_POPF,",
           "(flags), SMPNET_LOCK_ARGS, 0,",
           [T_LOCKS + "test_a_users_irqsave_saves_the_flags_and_restores_them_as_built"],
           "`--restore popf` ignored for user code"),
    Mutant("hold-spends-think", HDR, "tsc_spend_until(smpnet_env->hold_cycles,",
           "tsc_spend_until(smpnet_env->think_cycles,",
           [T_LOCKS + "test_hold_cycles_change_only_the_variants_that_hold"],
           "`hold()` spending the think cycles"),
    Mutant("user-irqsave-nopushf", HDR, "SMPNET_STOP_IF(_raw_spin_lock_irqsave(",
           "SMPNET_STOP_IF(_raw_spin_lock_irqsave_nopushf(",
           [T_LOCKS + "test_a_users_irqsave_saves_the_flags_and_restores_them_as_built"],
           "a user's `spin_lock_irqsave` compiled as the no-pushf control"),
    Mutant("build-key-no-debug", "smpnet/experiments/ab/build.py",
           "[compile_args(debug), build_flags.define_macros(debug),",
           "[compile_args(False), build_flags.define_macros(False),",
           ["tests/test_ab_build.py::"
            "test_the_cache_key_follows_source_name_headers_flags_and_build_options"],
           "the build cache key ignoring a debug core"),
    Mutant("build-key-without-the-name", "smpnet/experiments/ab/build.py",
           'h.update(source.encode() + b"\\0" + c_string(name).encode() + b"\\0")',
           "h.update(source.encode())",
           ["tests/test_ab_build.py::"
            "test_the_cache_key_follows_source_name_headers_flags_and_build_options"],
           "a copy of a file under another name loading an object whose messages name the first"),
    Mutant("build-reads-a-held-pipe", "smpnet/experiments/ab/compiler.py",
           "                    p.wait()\n                raise",
           "                    p.communicate()\n                raise",
           ["tests/test_ab_build.py::test_a_compiler_past_the_bound_is_stopped_with_its_children"],
           "a build past its bound waiting on a pipe a process outside the compiler holds"),
    Mutant("build-env-cflags-dropped", "smpnet/experiments/ab/compiler.py",
           'for v in ("CFLAGS", "CPPFLAGS"):', 'for v in ("CPPFLAGS",):',
           ["tests/test_ab_build.py::test_the_compilers_commands_take_the_environment_as_distutils_does"],
           "the environment's CFLAGS left out of a user's build"),
    Mutant("build-key-without-the-compiler", "smpnet/experiments/ab/build.py",
           "compiler.identity(), _core_identity()", "_core_identity()",
           ["tests/test_ab_build.py::test_the_cache_key_follows_the_programs_path_finds_and_the_"
            "search_path"],
           "a user's object kept across another compiler or an upgraded one"),
    Mutant("build-key-stat-not-followed", "smpnet/experiments/ab/compiler.py",
           "st = os.stat(found) if found else None", "st = os.lstat(found) if found else None",
           ["tests/test_ab_build.py::test_the_cache_key_follows_the_programs_path_finds_and_the_"
            "search_path"],
           "the compiler known by its alternatives link: an upgrade behind it keeps old objects"),
    Mutant("build-key-first-word-only", "smpnet/experiments/ab/compiler.py",
           'for word in dict.fromkeys(words + ["as", "ld"]):',
           'for word in dict.fromkeys(words[:1] + ["as", "ld"]):',
           ["tests/test_ab_build.py::test_the_cache_key_follows_the_programs_path_finds_and_the_"
            "search_path"],
           "the compiler behind a wrapper (ccache gcc) and the linker left out of the key"),
    Mutant("build-relative-cc-in-the-build-directory", "smpnet/experiments/ab/compiler.py",
           "    cc[:1], ldshared[:1] = map(_program, cc[:1]), map(_program, ldshared[:1])\n", "",
           ["tests/test_ab_build.py::test_a_relative_compiler_is_the_users_not_the_build_"
            "directorys"],
           "CC=./cc looked for in the build's own directory"),
    Mutant("pv-no-kick", "smpnet/kernel/qspinlock_paravirt.h",
           "\tpv_kick_node(decode_tail(c, next));\n", "",
           ["tests/test_paravirt_locks.py::test_the_pv_hand_off_kicks_a_halted_successor"],
           "pvqspinlock not kicking a halted successor"),
    Mutant("unlock-bh-enables-first", "smpnet/kernel/spinlock_api_smp.h",
           "\t__do_raw_spin_unlock(c, l, algo, check, build);\n\tlocal_bh_enable_ip(c, check, build);",
           "\tlocal_bh_enable_ip(c, check, build);\n\t__do_raw_spin_unlock(c, l, algo, check, build);",
           ["tests/test_kernel_build.py::test_spin_unlock_bh_releases_the_lock_before_it_enables_bhs"],
           "`spin_unlock_bh` enabling BHs before the unlock"),
    Mutant("no-fsync-before-rename", "smpnet/report/output_writers.py",
           "        os.fsync(fd)\n        os.close(fd)\n        fd = None\n        os.replace(",
           "        os.close(fd)\n        fd = None\n        os.replace(",
           ["tests/test_output.py::test_a_replaced_file_is_on_disk_before_it_takes_the_name"],
           "no fsync before the atomic rename"),
    Mutant("compare-one-run-a-side", "smpnet/report/compare.py",
           "        if min(len(sa), len(sb)) < 2:\n            return None, None", "",
           ["tests/test_compare_verdict.py::test_one_run_a_side_has_no_noise_to_judge"],
           "compare judging from one run a side"),
    Mutant("arp-jiffy-hz-minus-1", "smpnet/core/arp.pyx", "h.tick_cycles = hdr.tsc_hz / hz",
           "h.tick_cycles = hdr.tsc_hz / (hz - 1)",
           ["tests/test_arp.py::test_host_as_jiffy_is_the_tsc_hz_over_hz"],
           "host A's jiffy tsc_hz / (HZ - 1), not tsc_hz / HZ"),
    Mutant("roles-all-zero", "smpnet/experiments/ab/rounds.py",
           "role=cpu_roles[ctx.cpu] if cpu_roles else 0,", "role=0,",
           ["tests/test_ab_roles.py::test_each_cpu_runs_its_roles_code"],
           "every CPU running the first role, whatever --roles says"),
    Mutant("contended-units-unchecked", "smpnet/experiments/ab/__init__.py",
           "rounds.counted(sum(c[4] for c in runs[i][-1]), p.unit,",
           "(lambda *a: None)(sum(c[4] for c in runs[i][-1]), p.unit,",
           ["tests/test_ab_roles.py::test_a_unit_never_counted_ends_the_run"],
           "a contended round with no unit of work reported as one unit's cost"),
    Mutant("local-lock-irq-leaves-irqs-on", "smpnet/include/smpnet_local_lock.h",
           "do { local_irq_disable(); local_lock_acquire(this_cpu_ptr(lock)); }",
           "do { local_lock_acquire(this_cpu_ptr(lock)); }",
           ["tests/test_ab_percpu.py::"
            "test_local_lock_guards_this_cpus_data_as_a_kernel_without_rt_builds_it"],
           "local_lock_irq() without IRQs off"),
    Mutant("debug-net-warn-evaluated", "smpnet/include/smpnet_bug.h",
           "#define SMPNET_UNEVALUATED(e)\t\t((void)sizeof((long)(e)))",
           "#define SMPNET_UNEVALUATED(e)\t\t((void)(e))",
           ["tests/test_ab_percpu.py::"
            "test_local_lock_guards_this_cpus_data_as_a_kernel_without_rt_builds_it"],
           "DEBUG_NET_WARN_ON_ONCE() running its condition without CONFIG_DEBUG_NET"),
    Mutant("static-key-nop-jumps", "smpnet/include/smpnet_jump_label.h",
           '__asm__ goto(".byte 0x0f, 0x1f, 0x44, 0x00, 0x00" : : : : l_yes);',
           '__asm__ goto("jmp %l[l_yes]" : : : : l_yes);',
           ["tests/test_ab_jump_label.py::"
            "test_a_static_key_takes_the_branch_it_is_defined_with_in_code"],
           "a key defined off taking its branch"),
    Mutant("static-key-a-test", "smpnet/include/smpnet_jump_label.h",
           "unlikely(SMPNET_KEY_IS(x, static_key_true) ? arch_static_branch_jump() :",
           "unlikely(READ_ONCE((x)->key.enabled) ? arch_static_branch_jump() :",
           ["tests/test_ab_jump_label.py::"
            "test_a_static_key_takes_the_branch_it_is_defined_with_in_code"],
           "static_branch_unlikely() a load and test of the key, not code"),
    Mutant("jiffies-never-set", "smpnet/include/smpnet.h",
           "\tsmpnet_jiffies_at(e->c, tsc_read_unordered());\n", "",
           ["tests/test_ab_jiffies.py::"
            "test_jiffies_tick_at_hz_between_rounds_and_compare_across_the_wrap"],
           "jiffies stuck at INITIAL_JIFFIES"),
    Mutant("time-after-unsigned", "smpnet/include/smpnet_jiffies.h",
           "\t\t\t\t && ((long)((b) - (a)) < 0))",
           "\t\t\t\t && ((a) > (b)))",
           ["tests/test_ab_jiffies.py::"
            "test_jiffies_tick_at_hz_between_rounds_and_compare_across_the_wrap"],
           "time_after() wrong across the wrap"),
    Mutant("test-and-set-bit-unlocked", "smpnet/include/smpnet_bitops.h",
           'SMPNET_TEST_AND(test_and_set_bit, "lock ", "btsq")',
           'SMPNET_TEST_AND(test_and_set_bit, "", "btsq")',
           ["tests/test_ab_kernel_lib.py::"
            "test_lists_bits_and_minmax_behave_as_the_kernels_and_a_bit_lock_excludes"],
           "test_and_set_bit() without its lock prefix"),
    Mutant("min-evaluates-twice", "smpnet/include/smpnet_minmax.h",
           "#define min(x, y)\t\tSMPNET_CMP(x, y, <)",
           "#define min(x, y)\t\t((x) < (y) ? (x) : (y))",
           ["tests/test_ab_kernel_lib.py::"
            "test_lists_bits_and_minmax_behave_as_the_kernels_and_a_bit_lock_excludes"],
           "min() evaluating an argument twice"),
    Mutant("list-add-tail-at-head", "smpnet/include/smpnet_list.h",
           "{ __list_add(new_, head->prev, head); }", "{ __list_add(new_, head, head->next); }",
           ["tests/test_ab_kernel_lib.py::"
            "test_lists_bits_and_minmax_behave_as_the_kernels_and_a_bit_lock_excludes"],
           "list_add_tail() adding at the head"),
    Mutant("printk-evaluates-its-arguments", "smpnet/include/smpnet_printk.h",
           "({ if (0) smpnet_no_printk(fmt, ##__VA_ARGS__); 0; })",
           "({ smpnet_no_printk(fmt, ##__VA_ARGS__); 0; })",
           ["tests/test_ab_kernel_lib.py::"
            "test_attributes_kconfig_tests_and_printk_as_a_kernel_function_carries_them"],
           "a message's arguments evaluated in the op"),
    Mutant("is-enabled-always", "smpnet/include/smpnet_attributes.h",
           "#define IS_ENABLED(option)\t(IS_BUILTIN(option) || IS_MODULE(option))",
           "#define IS_ENABLED(option)\t1",
           ["tests/test_ab_kernel_lib.py::"
            "test_attributes_kconfig_tests_and_printk_as_a_kernel_function_carries_them"],
           "IS_ENABLED() of an option the file does not set"),
    Mutant("percpu-records-uncoloured", "smpnet/experiments/ab/rounds.py",
           '            ("ab_colour", _record(PERCPU_COLOUR), 1),\n', "",
           ["tests/test_ab_percpu.py::test_each_kind_of_record_begins_at_a_page_offset_of_its_own"],
           "the per-CPU records beginning pages, as the shared ones do"),
    Mutant("percpu-section-uncoloured", "smpnet/include/smpnet_percpu.ld",
           "\t\t. += 0x400;\n", "",
           ["tests/test_ab_percpu.py::test_each_kind_of_record_begins_at_a_page_offset_of_its_own"],
           "this_cpu_off at a page's start, as the shared record"),
    Mutant("local-lock-no-preempt-disable", "smpnet/include/smpnet_local_lock.h",
           "do { preempt_disable(); local_lock_acquire(this_cpu_ptr(lock)); }",
           "do { local_lock_acquire(this_cpu_ptr(lock)); }",
           ["tests/test_ab_percpu.py::"
            "test_local_lock_guards_this_cpus_data_as_a_kernel_without_rt_builds_it"],
           "local_lock() leaving preemption on"),
    Mutant("msecs-to-jiffies-truncates", "smpnet/include/smpnet_jiffies.h",
           "(unsigned long)(((u64)(unsigned int)(m) * HZ + 999) / 1000))",
           "(unsigned long)(((u64)(unsigned int)(m) * HZ) / 1000))",
           ["tests/test_ab_jiffies.py::"
            "test_jiffies_tick_at_hz_between_rounds_and_compare_across_the_wrap"],
           "a timeout in ms made shorter by the conversion"),
    Mutant("min-captures-a-callers-name", "smpnet/include/smpnet_minmax.h",
           "SMPNET_CMP_(x, y, op, __UNIQUE_ID(x_), __UNIQUE_ID(y_))",
           "SMPNET_CMP_(x, y, op, x_, y_)",
           ["tests/test_ab_kernel_lib.py::"
            "test_lists_bits_and_minmax_behave_as_the_kernels_and_a_bit_lock_excludes"],
           "min() whose temporaries take a caller's variables' names"),
    Mutant("percpu-reserve-page-aligned", "smpnet/include/smpnet_percpu.h",
           "aligned(SMP_CACHE_BYTES), unused", "aligned(4096), unused",
           ["tests/test_ab_percpu.py::test_each_kind_of_record_begins_at_a_page_offset_of_its_own"],
           "alloc_percpu()'s first object at a page's start, as the shared record"),
    Mutant("percpu-align-of-the-offset", "smpnet/include/smpnet_percpu.h",
           "at = ((base + smpnet_percpu_reserved + align - 1) & ~(align - 1)) - base;",
           "at = (smpnet_percpu_reserved + align - 1) & ~(align - 1);",
           ["tests/test_ab_percpu.py::"
            "test_per_cpu_data_as_the_kernel_declares_it_adds_up_on_every_cpu"],
           "alloc_percpu() aligning the reserve's offset, not the address"),
    Mutant("this-cpu-off-zero", "smpnet/include/smpnet_percpu.h",
           "\t\tsmpnet_per_cpu_offset(e, e->cpu);", "\t\t0;",
           ["tests/test_ab_qspinlock.py::"
            "test_a_this_cpu_ptr_another_cpu_reads_is_the_publishers_copy"],
           "this_cpu_ptr() the reader's own copy on another CPU"),
    Mutant("qspinlock-unlinked", "smpnet/include/smpnet_qspinlock_slowpath.h",
           "\t\tWRITE_ONCE(prev->next, node);\n", "",
           ["tests/test_ab_qspinlock.py::test_the_kernels_qspinlock_excludes_on_every_path"],
           "a queued waiter never linked behind its predecessor"),
    Mutant("skb-free-always-local", "smpnet/kernel/ab_skb.h",
           "if (skb->alloc_cpu == (uint32_t)c->cpu)", "if (1)",
           [T_SKB + "test_the_example_frees_remotely_or_defers_as_its_variant_says"],
           "another CPU's skb freed into this CPU's cache, no remote free"),
    Mutant("skb-defer-frees", "smpnet/include/smpnet_skbuff.h",
           "smpnet_skb_ops_->defer_free(smpnet_cpu, smpnet_skb_(skb));",
           "smpnet_skb_ops_->free(smpnet_cpu, smpnet_skb_(skb));",
           [T_SKB + "test_the_example_frees_remotely_or_defers_as_its_variant_says"],
           "skb_attempt_defer_free() a plain free"),
    Mutant("skb-double-free-unchecked", "smpnet/experiments/ab/skbs.py",
           "    if twice or stale:", "    if False:",
           [T_SKB + "test_an_skb_freed_twice_fails_the_run"],
           "an skb freed twice let through"),
    Mutant("referee-empty-twin", "smpnet/experiments/kernel/referee.py",
           "TWIN_OPS = (2 * UNROLL, UNROLL)", "TWIN_OPS = (UNROLL, 0)",
           ["tests/test_referee.py::test_an_op_is_a_program_of_twice_the_ops_less_its_twin"],
           "the kernel's op less an empty program, which hides the test run's cost"),
    Mutant("referee-pair-irqs-on", "smpnet/experiments/kernel/referee.py",
           "return bpf.irqs_off(ids, op * n) if t.irqs_off else op * n", "return op * n",
           ["tests/test_referee.py::test_the_pair_with_irqs_off_runs_between_the_irq_save_and_restore"],
           "the pair with IRQs off run with them on"),
    Mutant("referee-in-pair-twin-irqsave", "smpnet/experiments/kernel/referee.py",
           '                                      test == "irq_save_restore_in_pair")',
           "                                      True)",
           ["tests/test_referee.py::test_irq_save_restore_inside_a_pair_is_a_pair_with_them_less_"
            "one_without"],
           "the IRQ save and restore inside a pair timed against a twin that saves them too"),
    Mutant("referee-this-cpu-inc-one-a-loop", "smpnet/experiments/kernel/referee.py",
           '"this_cpu_inc", False, _core.TB_PROG_OPS)', '"this_cpu_inc", False)',
           ["tests/test_referee_model.py::test_the_models_per_cpu_increment_is_the_programs_run_of_them"],
           "the model's per-CPU increment's empty loop taken whole from each op of 128"),
    Mutant("referee-this-cpu-inc-16-a-loop", "smpnet/kernel/time_bench.h",
           "\t\t_Pragma(\"GCC unroll 128\")\n\t\tfor (int j = 0; j < TB_PROG_OPS; j++)\n\t\t\t*value",
           "\t\t_Pragma(\"GCC unroll 16\")\n\t\tfor (int j = 0; j < TB_PROG_OPS; j++)\n\t\t\t*value",
           ["tests/test_referee_model.py::test_the_models_per_cpu_increment_is_the_programs_run_of_them"],
           "the model's per-CPU increments 16 to a loop iteration, which a Zen 3 renames"),
    Mutant("referee-this-cpu-inc-on-the-stack", "smpnet/kernel/time_bench.h",
           "volatile uint64_t *value = &this_lstats(c)->packets;",
           "volatile uint64_t on_stack = this_lstats(c)->packets, *value = &on_stack;",
           ["tests/test_referee_model.py::test_the_models_per_cpu_increment_is_the_programs_run_of_them"],
           "the model's per-CPU increment on a stack slot, not this CPU's per-CPU word"),
    Mutant("referee-calls-16", "smpnet/kernel/time_bench.h",
           "for (int j = 0; j < TB_PROG_OPS; j++) {", "for (int j = 0; j < TB_UNROLL; j++) {",
           ["tests/test_referee_model.py::test_the_models_helper_call_is_calls_back_to_back_as_the_kernels"],
           "the model's helper calls 16 to a loop iteration, not a run of 128 as the programs'"),
    Mutant("pv-no-prefetchw", "smpnet/kernel/qspinlock_paravirt.h",
           "\t\tif (next)\n\t\t\tprefetchw(decode_tail(c, next));\n\t}\n\tif (pv_wait_head_or_lock",
           "\t}\n\tif (pv_wait_head_or_lock",
           ["tests/test_paravirt_locks.py::test_the_slow_paths_prefetch_the_next_node_for_writing"],
           "the PV slow path not fetching the next node's line for writing, as qspinlock.c does"),
    Mutant("referee-one-lock-page", "smpnet/experiments/kernel/referee_contended.py",
           'return (pages[r % len(pages)][0] if test == "spin_lock_pair" else m, _model_side,',
           "return (m, _model_side,",
           ["tests/test_referee.py::test_kernel_prints_the_referee_beside_the_model"],
           "the model's contended lock pair in one segment's page for the whole run, where the "
           "kernel's fresh maps take a page or two a round"),
    Mutant("referee-eight-lock-segments", "smpnet/experiments/kernel/referee_contended.py",
           'range(lock_segments(rounds) if "spin_lock_pair" in tests else 1)',
           'range(8 if "spin_lock_pair" in tests else 1)',
           ["tests/test_referee_contended.py::"
            "test_the_model_takes_a_fresh_segment_each_round_as_the_kernel_fresh_maps"],
           "the model's lock pair on 8 segments' pages all run, where the kernel's rounds "
           "draw fresh maps"),
    Mutant("referee-rounds-from-run-rounds", "smpnet/experiments/kernel/referee.py",
           '"referee_rounds": referee_rounds,',
           '"referee_rounds": max(rounds, stats.MIN_SAMPLES),',
           ["tests/test_referee.py::test_the_uncontended_rows_take_rounds_of_their_own"],
           "the referee's uncontended rows on the run's --rounds again, where --referee-rounds "
           "gives them their own (a busy host's 10 rounds span the 2nd to 9th)"),
    Mutant("referee-round-across-a-move-judged", "smpnet/experiments/kernel/referee_contended.py",
           "if near[0] == near[1]:",
           "if True:",
           ["tests/test_referee_contended.py::"
            "test_a_row_whose_cpus_moved_is_figured_on_one_placements_rounds"],
           "a round across a move of the CPUs placed by its first trip, though its two sides "
           "may have run at two placements"),
    Mutant("referee-slot-offsets-512", "smpnet/experiments/kernel/referee_contended.py",
           "s * locks.strides[0]) % mmap.PAGESIZE", "s * locks.strides[0]) % 512",
           ["tests/test_referee_contended.py::test_the_model_has_a_lock_slot_at_every_line_of_a_page"],
           "the model's lock slots matched to the kernel's by a line's offset in 512 bytes, "
           "not its page offset"),
    Mutant("kernel-text-padded", "smpnet/experiments/kernel/kernel_text.py",
           "while end and _PADDING.match(body[end - 1][1]):",
           "while False:",
           ["tests/test_kernel_text.py::test_a_functions_padding_is_left_out_of_its_listing"],
           "a function's listing runs on through the int3 that pad it to the next symbol"),
    Mutant("locks-a-line-apart", "smpnet/experiments/common/lockbench.py",
           "layout.LOCK_SLOT if dense else layout.padded",
           "layout.LOCK_SLOT if True else layout.padded",
           ["tests/test_contended.py::test_every_algorithms_lock_lies_at_the_same_page_offset"],
           "each algorithm's lock a cache line after the last, at another page offset, where a "
           "contended lock's cost goes with its page offset"),
    Mutant("ab-shared-copies-a-line-apart", "smpnet/experiments/ab/rounds.py",
           '("ab_shared", _record(_whole_pages(obj.shared_size)), copies)',
           '("ab_shared", _record(obj.shared_size), copies)',
           ["tests/test_ab_percpu.py::test_every_copy_of_the_state_lies_at_the_same_page_offset"],
           "each copy's shared state a cache line after the last, at another page offset, "
           "where a contended line's cost goes with its page offset"),
    Mutant("ab-percpu-copies-unpadded", "smpnet/experiments/ab/rounds.py",
           "    while n * stride % PAGE:\n        n += 1\n", "",
           ["tests/test_ab_percpu.py::test_every_copy_of_the_state_lies_at_the_same_page_offset"],
           "each copy's per-CPU records right after the last copy's, not on pages of their own"),
]

# Left out: no test can kill them, the program behaving the same with or without them
EQUIVALENT = [
    ("smpnet/report/compare.py `_significant` (line 233 at 5c273de): "
     "`if len(x) + len(y) < 3: return None, None`, since removed",
     "a pooled side holds 2 runs or more, so with runs on either side there are 3 values "
     "or more; and stats.mean_diff_ci refuses fewer than 3 values itself, with the "
     "ValueError _significant catches as (None, None): the check never changed an answer"),
    ("smpnet/kernel/spinlock.h, pv_queued_spin_lock()'s hand-off (line 454 at 5c273de): "
     "`__atomic_store_n(&decode_tail(c, next)->locked, 1, __ATOMIC_RELEASE)` made RELAXED",
     "on x86-64 a release store is a plain mov and gcc -O2 moves nothing across this one: "
     "the core builds byte for byte the same (checked 2026-12-06, gcc, x86-64); not "
     "equivalent on a weakly ordered CPU"),
]

TIMEOUT_S = 600
# what every copy starts from, fixed when the run starts: a commit made or a core rebuilt
# in the working tree meanwhile changes nothing in the run
Base = namedtuple("Base", "root commit core")


def in_core(path):
    """Whether setup.py compiles `path` into smpnet/_core (_core.pyx, with the
    smpnet/core/ files it includes and the smpnet/kernel/ headers it cimports);
    smpnet/include/ is compiled at run time by `ab` itself."""
    return path == "smpnet/_core.pyx" or path.startswith(("smpnet/core/", "smpnet/kernel/"))


def run(cmd, cwd, env=None):
    """(exit code, output), or (None, output) past TIMEOUT_S. In a session of its own, so
    that a timeout or Ctrl-C ends the workers pytest started too."""
    p = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out = p.communicate(timeout=TIMEOUT_S)[0]
        return p.returncode, out
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        return None, p.communicate()[0] + f"\n(timed out after {TIMEOUT_S} s)"
    finally:
        if p.returncode is None:        # Ctrl-C: the group goes with us
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def scratch(base, work, mutant=None):
    """A copy of the commit in `work` (committed files only: edits in the working tree stay
    out), the mutant applied, with a core: the working tree's, or rebuilt where the
    mutant is in it. (the copy, None), or (None, why) when the rebuild failed."""
    tree = os.path.join(work, "tree")
    os.mkdir(tree)
    archive = subprocess.run(["git", "archive", base.commit], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", tree], input=archive.stdout, check=True)
    if mutant:
        path = os.path.join(tree, mutant.file)
        with open(path) as f:
            text = f.read()
        with open(path, "w") as f:
            f.write(text.replace(mutant.old, mutant.new))
    if mutant and in_core(mutant.file):
        rc, out = run([sys.executable, "setup.py", "build_ext", "--inplace", "-q"], tree)
        if rc != 0:
            return None, "rebuild failed: " + out
    else:
        for so in os.listdir(base.core):
            shutil.copy2(os.path.join(base.core, so), os.path.join(tree, "smpnet"))
    return tree, None


def pytest(work, tree, tests):
    """pytest on `tests` in the copy: its smpnet imported (PYTHONPATH, for subprocesses
    too), a fresh ab build cache and pytest's temporary files in `work`, private (the
    build cache refuses a directory others can write above it)."""
    cache, temp = os.path.join(work, "cache"), os.path.join(work, "tmp")
    os.mkdir(cache, 0o700)
    # COLUMNS: pytest's summary line keeps more of the failed assertion
    env = dict(os.environ, PYTHONPATH=tree, SMPNET_CACHE_DIR=cache, COLUMNS="200")
    return run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                "--basetemp", temp, *tests], tree, env)


def attempt(base, name, tests, mutant=None):
    """(pytest's exit code or None, its output) for `tests` on a copy of the commit, the
    mutant applied; the copy removed after."""
    work = os.path.join(base.root, name)
    os.mkdir(work, 0o700)
    try:
        tree, why = scratch(base, work, mutant)
        return pytest(work, tree, tests) if tree else (None, why)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def tail(out, n=15):
    return "\n".join("    " + line for line in out.strip().splitlines()[-n:])


def check_table(chosen, commit):
    """One line and exit 2 for a mutant whose old text is not in the commit's file exactly
    once (else the replacement would change nothing, or more than the fault)."""
    for m in chosen:
        shown = subprocess.run(["git", "show", f"{commit}:{m.file}"], capture_output=True,
                               text=True)
        count = shown.stdout.count(m.old) if shown.returncode == 0 else 0
        if count != 1:
            print(f"mutation.py: {m.id}: its old text occurs {count} times in {m.file} at "
                  f"{commit[:7]}, not once", file=sys.stderr)
            sys.exit(2)


def main(argv):
    by_id = {m.id: m for m in MUTANTS}
    if "--list" in argv:
        for m in MUTANTS:
            print(f"{m.id:26} {m.file:36} {m.why}")
        return 0
    unknown = [a for a in argv if a not in by_id]
    if unknown:
        print(f"mutation.py: unknown mutant {unknown[0]!r} (--list names them)", file=sys.stderr)
        return 2
    chosen = [by_id[a] for a in argv] or MUTANTS
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                            check=True).stdout.strip()
    check_table(chosen, commit)
    cores = [f for f in os.listdir("smpnet") if f.startswith("_core") and f.endswith(".so")]
    if not cores:
        print("mutation.py: no built core in smpnet/ (python setup.py build_ext --inplace)",
              file=sys.stderr)
        return 2
    if subprocess.run(["git", "diff", "--quiet", commit, "--", "smpnet/_core.pyx",
                       "smpnet/core", "smpnet/kernel"]).returncode:
        print("mutation.py: warning: this tree's core sources differ from HEAD; the copies "
              "take its smpnet/_core*.so all the same, which may not be HEAD's", file=sys.stderr)
    started = time.monotonic()
    root = tempfile.mkdtemp(prefix="smpnet-mutation-")
    try:
        base = Base(root, commit, os.path.join(root, "core"))
        os.mkdir(base.core)
        for so in cores:
            shutil.copy2(os.path.join("smpnet", so), base.core)
        # a mutant is killed only by a test that passes without it
        tests = sorted({t for m in chosen for t in m.tests})
        print(f"unmutated HEAD ({commit[:7]}): {len(tests)} tests", file=sys.stderr)
        rc, out = attempt(base, "head", tests)
        if rc != 0:
            print(f"mutation.py: the tests fail on HEAD unmutated (exit {rc}):\n{tail(out)}",
                  file=sys.stderr)
            return 2
        results = []
        for k, m in enumerate(chosen, 1):
            print(f"[{k}/{len(chosen)}] {m.id}: {m.file}"
                  + (" (rebuilding the core)" if in_core(m.file) else ""), file=sys.stderr)
            t0 = time.monotonic()
            rc, out = attempt(base, m.id, m.tests, m)
            # exit 1: a test failed; 0: all passed; anything else says nothing of the mutant
            result = {1: "killed", 0: "survived"}.get(rc, "error")
            results.append((m, result, time.monotonic() - t0, out))
        print(f"HEAD {commit[:7]}\n{'mutant':26} {'file':36} {'result':8} seconds")
        for m, result, s, out in results:
            print(f"{m.id:26} {m.file:36} {result:8} {s:7.1f}")
            if result == "killed":      # by which test, and its assertion (pytest's -ra line)
                print(next(("    " + line[:200] for line in out.splitlines()
                            if line.startswith("FAILED ")), ""))
            else:
                print(tail(out))
        print("\nequivalent, left out:")
        for where, why in EQUIVALENT:
            print(f"  {where}: {why}")
        killed = sum(r == "killed" for _, r, _, _ in results)
        print(f"\nkilled {killed} of {len(results)} ({100 * killed / len(results):.0f} %) "
              f"in {time.monotonic() - started:.0f} s")
        return 0 if killed >= 0.95 * len(results) else 1
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    os.chdir(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))    # so that finally runs
    try:
        sys.exit(main(sys.argv[1:]))
    except KeyboardInterrupt:
        sys.exit(130)
