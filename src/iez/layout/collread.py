"""When a run calls for libiez-mpi's Lustre-aware collective read (docs/libiez.md, "Lustre-aware
collective read"; docs/references.md#s003-figs4-5).

Seed 003's read gains where ROMIO's file domains make every OST serve many clients at once: a
file read with collective MPI-IO calls whose stripes lie on more than one OST. A file on one OST
is read by one aggregator either way. The control plane asks for the read in the plan
(`collread=lustre`, docs/plan-format.md) when the application's last traced run read such a file.

Pure: requests in, names out.
"""

from __future__ import annotations

from typing import Iterable

from iez.layout.layout import FileLayout
from iez.request import Request


def spans_osts(layout: FileLayout) -> bool:
    """The layout puts stripes on more than one OST (an OST list of two, or a count above one,
    -1 being every OST), in any component."""
    osts: set[int] = set()
    for c in layout.parts():
        if c.layout.osts:
            osts.update(c.layout.osts)
        elif c.layout.stripe_count > 1 or c.layout.stripe_count == -1:
            return True
    return len(osts) > 1


def striped_collective_reads(files: Iterable[Request]) -> list[str]:
    """The files read with collective MPI-IO calls and striped over more than one OST, by the
    layout the trace saw (a file whose layout is not known is left out)."""
    return sorted({q.path for q in files if q.read_collective and q.observed is not None and spans_osts(q.observed)})
