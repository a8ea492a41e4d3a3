"""iez: an end-to-end I/O control plane for HPC parallel file systems (Lustre first)."""

__version__ = "0.1.0"
