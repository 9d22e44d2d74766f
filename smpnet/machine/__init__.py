"""The emulated machine: the shared segment (segment) and its records as
numpy dtypes (layout), the machine that runs one pinned worker per emulated
CPU (machine, workers, watchdog), the CPU lists (cpus), the machine's facts
and the TSC's Hz (sysinfo, tsc), the load seen on the CPUs around a run
(load) and the process's own signals (process).

May import: smpnet._core, smpnet.errors, smpnet.seeds, smpnet.jsonfile (the
base) and each other; nothing that measures, reports or experiments
(tests/test_architecture.py checks). Importing this package loads nothing:
entry imports process before anything heavy.
"""
