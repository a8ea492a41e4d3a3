"""The emulated Lustre cluster: a directory that behaves as a Lustre client mount, with an
emulated MDS (layouts from Lustre's own allocator) and Lustre-style parameter trees.
Contract: docs/emulated.md."""
