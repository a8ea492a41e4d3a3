"""Real workload programs iez runs as applications: `iez-bench` (IOR-like, HACC-IO-like), and ordinary
programs (tar, rsync, sqlite3, ...) traced and placed to measure the plan hit rate."""
