"""Where each simulated file lives: a resolved layout per file, from an allocation policy
(`iez.alloc.registry`: rr, qos, bpio, iez-paper, balanced), from a given OST list, or as a trace saw it.

Files of all jobs that use the same policy and layout option are placed in one call, in job
order, so a global policy sees the whole workload at once, as iez's controller does for
concurrent applications. A job with placement "list" and layout "hierarchical" gets its
composite layout here (`hierarchical`), so a scenario can state seed 001's layouts exactly
(docs/references.md#s001-hierarchical).
"""

from __future__ import annotations

from collections.abc import Sequence

from iez.alloc.policy import AllocOptions
from iez.alloc.registry import get_policy, names
from iez.cluster import Cluster, Snapshot
from iez.errors import AllocationError, ConfigError
from iez.layout.hierarchical import Grouping, composite, extents
from iez.layout.layout import LUSTRE_EOF, Component, FileLayout, Layout
from iez.request import Request
from iez.sim.description import client_names
from iez.sim.scenario import JobEntry
from iez.sim.workload import Workload


def hierarchical(osts: Sequence[int], size: int, subfiles: int, subset_size: int, stripe_size: int) -> FileLayout:
    """Seed 001's hierarchical striping as a PFL layout (docs/references.md#s001-hierarchical),
    its subsets given rather than chosen: `subfiles` components cut as `iez.layout.hierarchical`
    cuts them (whole stripe rounds, the last to EOF), component k striped over OST subset
    k mod (len(osts) // subset_size), subset j being osts[j * subset_size:(j + 1) * subset_size],
    as the paper's (M, 2, 2*i). Subsets are disjoint; components share a subset only when there
    are more components than subsets, which Lustre allows and the paper avoids."""
    if subset_size > len(osts):
        raise ConfigError(f"subset size {subset_size} exceeds the {len(osts)} listed OSTs")
    if subfiles < 1:
        raise ConfigError("a hierarchical layout needs at least one subfile")
    if subfiles == 1:
        return FileLayout(components=(Component(0, LUSTRE_EOF, Layout(stripe_size=stripe_size,
                                                                      osts=tuple(osts[:subset_size]))),))
    try:
        spans = extents(size, Grouping(subfiles, subset_size), stripe_size)
    except AllocationError as e:
        raise ConfigError(str(e)) from None
    n = len(osts) // subset_size
    return composite(spans, stripe_size, [osts[(k % n) * subset_size:(k % n + 1) * subset_size]
                                          for k in range(len(spans))])


def _writers(wl: Workload, path: str) -> set[int]:
    """The ranks that write `path`; for a file the job only reads, those that read it (they
    wrote it in the run that made it)."""
    def ranks(kind: str) -> set[int]:
        return {e.rank for ph in wl.phases if ph.kind == kind for e in ph.extents if e.path == path}

    return ranks("write") or ranks("read")


def _segments(wl: Workload, path: str) -> int:
    """The most contiguous extents any one writer of `path` writes (adjacent ones merged)."""
    spans: dict[int, list[tuple[int, int]]] = {}
    for ph in wl.phases:
        if ph.kind == "write":
            for e in ph.extents:
                if e.path == path:
                    spans.setdefault(e.rank, []).append((e.offset, e.offset + e.length))
    most = 0
    for mine in spans.values():
        mine.sort()
        most = max(most, 1 + sum(b[0] > a[1] for a, b in zip(mine, mine[1:])))
    return most


def _read(wl: Workload, path: str) -> int:
    """Bytes the job reads back from `path`: the allocator counts them in the job's time."""
    return sum(e.length for ph in wl.phases if ph.kind == "read" for e in ph.extents if e.path == path)


def _transfer(wl: Workload) -> int:
    return max((ph.call_size for ph in wl.phases if ph.kind == "write"), default=0)


def place(cluster: Cluster, jobs: list[tuple[JobEntry, Workload]], seed: int = 0) -> dict[str, FileLayout]:
    """Each file's layout; `seed` is the rr / qos generator's (AllocOptions.seed)."""
    layouts: dict[str, FileLayout] = {}
    by_policy: dict[tuple[str, int, str], list[Request]] = {}
    known = set(cluster.ost_indices())
    # With a topology, each file is placed for the node of the rank that creates it (bpio binds it
    # to that node's paths); the jobs' nodes are numbered as description.build numbers them.
    nodes = client_names(cluster, sum(wl.nodes for _, wl in jobs)) if cluster.topology else []
    first = 0
    for entry, wl in jobs:
        comm = wl.ranks
        first, base = first + wl.nodes, first
        if entry.placement == "list":
            bad = [i for i in entry.osts if i not in known]
            if bad:
                raise ConfigError(f"job {wl.name}: osts {bad} are not OSTs of the cluster")
            for k, f in enumerate(wl.files):
                if entry.layout == "hierarchical":
                    # Split writing: by default one subfile per writer of the file.
                    parts = entry.subfiles or max(1, len(_writers(wl, f.path)))
                    try:
                        layouts[f.path] = hierarchical(entry.osts, f.size, parts, entry.subset_size, f.stripe_size)
                    except ConfigError as e:
                        raise ConfigError(f"job {wl.name}: {e}") from None
                    continue
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
                reqs = by_policy.setdefault((entry.placement, fixed, entry.layout), [])
                shared = len(wl.files) == 1 and wl.ranks > 1
                writers = _writers(wl, f.path)
                rank = 0 if shared else k
                host = nodes[base + wl.node_of(min(writers, default=rank))] if nodes else ""
                reqs.append(Request(path=f.path, write_bytes=round(f.size * entry.planned), stripe_count=f.stripe_count,
                                    rank=rank, app=wl.name, comm_size=comm if shared else 1,
                                    writers=len(writers), transfer_size=_transfer(wl),
                                    writer_segments=_segments(wl, f.path), grows=entry.grows, host=host,
                                    read_bytes=_read(wl, f.path)))
    snapshot = Snapshot.from_cluster(cluster)
    for (name, fixed, layout), reqs in by_policy.items():
        opts = AllocOptions(stripe_method="fixed", stripe_size=fixed, layout=layout, seed=seed) if fixed \
            else AllocOptions(layout=layout, seed=seed)
        for req, pl in zip(reqs, get_policy(name).place(reqs, cluster, snapshot, opts)):
            layouts[req.path] = pl.layout
    return layouts
