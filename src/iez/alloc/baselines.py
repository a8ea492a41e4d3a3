"""`rr` and `qos`: Lustre's own allocator (LOD, iez.alloc.lod), the baselines iez is measured
against. The requests are created one by one in create order, as the application's ranks would
create them, each asking for its stripe count and the stripe size of `AllocOptions`.

Lustre picks between the two by itself: QoS once free space differs by more than
qos_threshold_rr (17%) between OSTs, round-robin otherwise (docs/references.md#l-alloc-qos-switch). Here each
baseline is forced, so both can be compared on any cluster: `rr` runs LOD with
qos_threshold_rr = 100% (QoS never engages; 2.16+ skips it, older releases always find "same
space"), `qos` with 0% (QoS always, unless fewer than two OSTs are active).

The baselines see what Lustre sees: the snapshot's free space, shrinking by each placed file's
bytes (so a planned batch cannot overfill an OST), and not iez's reservations for other
applications' plans. Excluded OSTs are shown to LOD as inactive.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import Sequence

from iez.alloc.lod import LodAllocator
from iez.alloc.policy import AllocOptions, make_placements, tables
from iez.alloc.registry import Registration
from iez.cluster import Cluster, Snapshot
from iez.layout.layout import Layout
from iez.layout.raid0 import bytes_per_ost
from iez.request import Placement, Request

THRESHOLD = {"rr": 100, "qos": 0}  # lod.*.qos_threshold_rr, percent


class LodPolicy:
    """Lustre's own LOD allocator (RR or QoS by its threshold) behind the policy interface."""

    def __init__(self, name: str):
        self.name = name

    def place(self, requests: Sequence[Request], cluster: Cluster, snapshot: Snapshot,
              options: AllocOptions = AllocOptions()) -> list[Placement]:
        if not requests:
            return []
        # Validates the requests and sizes their stripes exactly as the other policies do.
        _, table = tables(requests, cluster, snapshot, options)
        lod = LodAllocator(replace(cluster, qos_threshold_rr=THRESHOLD[self.name]), seed=options.seed,
                           version=options.lustre_version)
        view = dict(snapshot.osts)
        for i in options.exclude:
            if i in view:
                view[i] = replace(view[i], state="inactive")
        seen = Snapshot(snapshot.time, view, snapshot.osses)  # LOD reads `view` as it changes
        lists: list[tuple[int, ...]] = [()] * len(requests)
        for i in table.order.tolist():
            r = requests[i]
            lay = lod.allocate(Layout(stripe_size=int(table.size[i]), stripe_count=int(table.lod_count[i]), pool=r.pool),
                               seen, now=r.create_time)
            lists[i] = lay.osts
            for ost, b in bytes_per_ost(lay, r.write_bytes).items():
                view[ost] = view[ost].debit(b)
        return make_placements(requests, table, lists, self.name)


POLICIES = {name: Registration(partial(LodPolicy, name), "lustre") for name in THRESHOLD}
