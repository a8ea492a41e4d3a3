"""Where each simulated file lives: a resolved layout per file, from an allocation policy
(`iez.alloc.registry`: rr, qos, iez-paper, balanced), from a given OST list, or as a trace saw it.

Files of all jobs that use the same policy are placed in one call, in job order, so a global
policy sees the whole workload at once, as iez's controller does for concurrent applications.
"""

from __future__ import annotations

from iez.alloc.policy import AllocOptions
from iez.alloc.registry import get_policy, names
from iez.cluster import Cluster, Snapshot
from iez.errors import ConfigError
from iez.layout.layout import FileLayout, Layout
from iez.request import Request
from iez.sim.scenario import JobEntry
from iez.sim.workload import Workload

def place(cluster: Cluster, jobs: list[tuple[JobEntry, Workload]]) -> dict[str, FileLayout]:
    layouts: dict[str, FileLayout] = {}
    by_policy: dict[tuple[str, int], list[Request]] = {}
    known = set(cluster.ost_indices())
    for entry, wl in jobs:
        comm = wl.ranks
        if entry.placement == "list":
            bad = [i for i in entry.osts if i not in known]
            if bad:
                raise ConfigError(f"job {wl.name}: osts {bad} are not OSTs of the cluster")
            for k, f in enumerate(wl.files):
                osts = tuple(entry.osts[(k * f.stripe_count + s) % len(entry.osts)] for s in range(f.stripe_count))
                if len(set(osts)) != len(osts):
                    raise ConfigError(f"job {wl.name}: stripe count {f.stripe_count} exceeds its {len(entry.osts)} listed OSTs")
                layouts[f.path] = FileLayout(plain=Layout(stripe_size=f.stripe_size, osts=osts))
        elif entry.placement == "observed":
            for f in wl.files:
                if not f.osts:
                    raise ConfigError(f"job {wl.name}: the trace does not say which OSTs {f.path} got; "
                                      "give placement = \"rr\" (or another policy)")
                layouts[f.path] = FileLayout(plain=Layout(stripe_size=f.stripe_size, osts=f.osts))
        else:
            for k, f in enumerate(wl.files):
                # Lustre's own allocators keep the file's stripe size (the file-system default
                # in the benchmarks); iez's policies size stripes themselves (docs/references.md#s000-method2).
                fixed = f.stripe_size if entry.placement in names(kind="lustre") else 0
                reqs = by_policy.setdefault((entry.placement, fixed), [])
                shared = len(wl.files) == 1 and wl.ranks > 1
                reqs.append(Request(path=f.path, write_bytes=f.size, stripe_count=f.stripe_count,
                                    rank=0 if shared else k, app=wl.name, comm_size=comm if shared else 1))
    snapshot = Snapshot.from_cluster(cluster)
    for (name, fixed), reqs in by_policy.items():
        opts = AllocOptions(stripe_method="fixed", stripe_size=fixed) if fixed else AllocOptions()
        for req, pl in zip(reqs, get_policy(name).place(reqs, cluster, snapshot, opts)):
            layouts[req.path] = pl.layout
    return layouts
