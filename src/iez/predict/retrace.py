"""When to trace again (docs/references.md#s000-retrace): if, in a run, iez-PL cannot find more than 50% of the
files the run creates in the plan, the prediction no longer fits the job, so miniRecorder, AIPA
and the allocator run again."""

from __future__ import annotations

from iez.predict.arima import PredictionError


def needs_retrace(hits: int, misses: int, threshold: float = 0.5) -> bool:
    """True when more than `threshold` of a run's file creations missed the plan (hits: files
    placed from the plan; misses: files the plan did not hold). A run that created nothing
    gives no evidence: False."""
    if hits < 0 or misses < 0:
        raise PredictionError(f"plan hits and misses must be counts, got {hits} and {misses}")
    if not 0 <= threshold <= 1:
        raise PredictionError(f"re-trace threshold must be a fraction in [0, 1], got {threshold}")
    total = hits + misses
    return total > 0 and misses / total > threshold
