"""The output: the JSON envelope and the text tables (report), the email
format (plaintext), the pictures (plot), --output (output, output_target,
output_writers), the progress lines on stderr (progress), and reading a
result back to compare two (results, compare).

May import: the base (smpnet._core, errors, seeds, jsonfile), the machine
(smpnet.machine), the measurement (smpnet.measure) and each other; and the
registry (smpnet.experiments) alone of what is above, to learn the
experiments (plot, results), never an experiment by name or its helpers
(tests/test_architecture.py checks both).
"""
