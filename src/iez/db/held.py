"""The bytes a run's placements put on each OST: the RAID-0 map of every file
(`iez.alloc.policy.job_bytes`). Summed once, when the placements are stored (table
`placed_bytes`), so that reserving other plans' space before a placement reads a row per OST, not
a row per file."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from iez.alloc.policy import Placements, job_bytes, stripe_bytes
from iez.request import Placement


def held_bytes(placed: Sequence[Placement]) -> dict[int, int]:
    """Bytes per OST of `placed`. A policy's `Placements` are mapped from their arrays in bulk
    (`stripe_bytes` of every stripe of the plain layouts); other layouts (PFL, hierarchical) and
    lists of `Placement`s file by file."""
    if not isinstance(placed, Placements):
        return job_bytes(placed)
    plain = placed.size > 0  # an unresolved size goes to the RAID-0 map, which refuses it
    plain[list(placed.non_plain())] = False
    out = job_bytes([placed[i] for i in np.flatnonzero(~plain).tolist()])
    count = np.diff(placed.offsets)
    f = np.repeat(np.arange(len(count)), count)  # the file of each stripe
    k = np.arange(len(placed.osts)) - placed.offsets[f]  # its stripe number
    held = stripe_bytes(placed.table.write_bytes[f], placed.size[f], count[f], k)
    held[~plain[f]] = 0
    used, where = np.unique(placed.osts[held > 0], return_inverse=True)
    total = np.zeros(len(used), dtype=np.int64)
    np.add.at(total, where.reshape(-1), held[held > 0])
    for i, b in zip(used.tolist(), total.tolist()):
        out[i] = out.get(i, 0) + b
    return out
