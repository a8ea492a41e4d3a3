"""Traces: what a run created and wrote (libiez shards, Darshan logs) as normalised records."""
