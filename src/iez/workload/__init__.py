"""Real workload programs iez runs as applications: `iez-bench` (IOR-like, HACC-IO-like)."""
