"""The main job (`iez demo`, `make demo`): seed 000's evaluation on an emulated cluster."""
