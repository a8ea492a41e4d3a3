"""The main job (`iez demo`, `make demo`): the iez paper's evaluation on an emulated cluster
(docs/references.md#s000-testbed)."""
