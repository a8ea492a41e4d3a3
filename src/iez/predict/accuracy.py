"""How good a prediction was, once the run it predicted has happened.

Definition (used by tests, the bench and `iez predict`): pair predicted and actual requests by
file name. A pair scores 1 − min(1, |predicted bytes − actual bytes| / actual bytes) (an empty
actual file scores 1 only if predicted empty) when its stripe count and MPI rank also match
exactly, and 0 otherwise. Files predicted but not created, and files created but not predicted,
score 0. Accuracy is the mean score over all those files (the union of both name sets), so both
missing and spurious files cost. Two empty runs agree perfectly (1.0).
"""

from __future__ import annotations

from typing import Sequence

from iez.request import Request


def score(predicted: Request, actual: Request) -> float:
    """One file's score (the two requests name the same file)."""
    if predicted.stripe_count != actual.stripe_count or predicted.rank != actual.rank:
        return 0.0
    if actual.write_bytes == 0:
        return 1.0 if predicted.write_bytes == 0 else 0.0
    return 1.0 - min(1.0, abs(predicted.write_bytes - actual.write_bytes) / actual.write_bytes)


def accuracy(predicted: Sequence[Request], actual: Sequence[Request]) -> float:
    """Mean per-file score over the union of predicted and actual file names (see module doc)."""
    pred = {q.path: q for q in predicted}
    real = {q.path: q for q in actual}
    union = pred.keys() | real.keys()
    if not union:
        return 1.0
    return sum(score(pred[p], real[p]) for p in pred.keys() & real.keys()) / len(union)
