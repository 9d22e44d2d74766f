"""What several experiments share: locks on a machine and the uncontended
time_bench suite (lockbench: locks, contended, defer, null), the skb
allocator's regions and their audit (net: defer, loopback), and bpf(2)
(bpf: kernel's referee runs on it, info says whether it can).

A module here serves two experiments or more (tests/test_architecture.py
checks); what one experiment alone uses lives in its own package.

May import: the record (smpnet.experiment, smpnet.bounds), the output
(smpnet.report), the measurement (smpnet.measure), the machine
(smpnet.machine), the base (smpnet._core, errors, seeds, jsonfile) and each
other; never an experiment or the registry.
"""
