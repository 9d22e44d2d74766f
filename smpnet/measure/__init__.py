"""The measurement: the time_bench harness (time_bench), the statistics and
the verdict rules (stats), the machine fact under each seed's verdict
(verdict_facts), and the calibration profiles, the host kernel's measured
costs that the models charge (calibration).

calibration is here, below the experiments, and not in the kernel
experiment that measures a profile: loopback, arp, all and the command line
charge or read one, and verdict_facts names the one a verdict charged.

May import: the base (smpnet._core, errors, seeds, jsonfile), the machine
(smpnet.machine) and each other; never the output, the record of an
experiment or an experiment (tests/test_architecture.py checks).
"""
