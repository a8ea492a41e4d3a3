"""The performance simulator: Lustre clusters and jobs on SimGrid (docs/simulator.md).

`iez sim SCENARIO.toml -o DIR` runs a scenario: `scenario` reads it, `kinds` (one table) says
whether `workload`'s generators or a trace's records (`trace`) make each job, `placement` lays
out their files, `description` writes the engine's input, `engine` runs the C++ engine (sim/),
`results` reads its output, `bounds` gives the physical limits, `plot` draws, and `study` ties
one scenario's runs together.
"""
