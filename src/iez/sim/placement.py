"""Where each simulated file lives: a resolved layout per file, from an allocation policy
(`iez.alloc.registry`: rr, qos, bpio, iez-paper, balanced), from a given OST list, or as a trace saw it.

Files of all jobs that use the same policy and layout option are placed in one call, in job
order, so a global policy sees the whole workload at once, as iez's controller does for
concurrent applications; for Lustre's rr and qos that call is one allocator stream, into which
a job's `others_per_create` draws other jobs' creates (a busy MDS). Lustre's policies place
first; iez's and the papers' then see the live load the files placed so far put on the OSTs
(`View`), as the controller's global view shows it. A job with placement "list" and layout "hierarchical" gets its
composite layout here (`hierarchical`), so a scenario can state seed 001's layouts exactly
(docs/references.md#s001-hierarchical).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields
from typing import Any, Callable

import numpy as np

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


# The layouts placed so far -> the statistics iez's controller would read while those files are
# written (study.live_view: the collectors' OST I/O rates).
View = Callable[[dict[str, FileLayout]], Snapshot]
# Placements already computed, by what they were computed from (`place`'s `cache`).
Cache = dict[tuple[Any, ...], list[tuple[Cluster, Snapshot, list[FileLayout]]]]
OTHERS = "/.others/"  # where the other jobs' creates of an allocator stream are named (never placed)


def _others(entry: JobEntry, wl: Workload, reqs: list[Request], seed: int, position: int) -> list[Request]:
    """The job's requests with other jobs' creates drawn in before each (entry.others_per_create
    on average, Poisson): one allocator stream, as a busy MDS serves it (docs/references.md#l-alloc-shared-state)."""
    rng = np.random.default_rng([seed, position])
    counts = rng.poisson(entry.others_per_create, len(reqs))
    stripes = entry.others_stripe_count or (wl.files[0].stripe_count if wl.files else 1,)
    drawn = rng.choice(stripes, int(counts.sum())).tolist()
    out: list[Request] = []
    for req, n in zip(reqs, counts.tolist()):
        out += [Request(path=f"{OTHERS}{wl.name}/{len(out)}", write_bytes=0, stripe_count=drawn.pop(), app="others")
                for _ in range(n)]
        out.append(req)
    return out


def _key(name: str, reqs: list[Request]) -> tuple[Any, ...]:
    """What a policy's placement of `reqs` depends on, every field of every request (hash and ==
    leave some out); Lustre's allocator is not told the creating node."""
    drop = {"host"} if name in names(kind="lustre") else set()
    keep = [f.name for f in fields(Request) if f.name not in drop]
    return tuple(tuple(getattr(r, f) for f in keep) for r in reqs)


def place(cluster: Cluster, jobs: list[tuple[JobEntry, Workload]], seed: int = 0, *,
          placed: dict[str, FileLayout] | None = None, cache: Cache | None = None,
          view: View | None = None) -> dict[str, FileLayout]:
    """Each file's layout; `seed` is the rr / qos generator's (AllocOptions.seed) and draws the
    other jobs' creates (JobEntry.others_per_create).

    `placed`: layouts of files made before (a job all of whose files are there is not placed
    again; the answer holds them too). Lustre's policies place first, from the cluster as it stands; then, with `view`,
    iez's and the papers' policies are given the statistics the controller's global view would
    hold while the files placed so far are written, as the controller gives them. `cache`:
    placements kept across calls (a scenario's runs), reused when a policy is asked the same
    again on the same cluster and statistics; the same results, without placing again."""
    layouts: dict[str, FileLayout] = dict(placed or {})
    by_policy: dict[tuple[str, int, str], list[Request]] = {}
    known = set(cluster.ost_indices())
    # With a topology, each file is placed for the node of the rank that creates it (bpio binds it
    # to that node's paths); the jobs' nodes are numbered as description.build numbers them.
    nodes = client_names(cluster, sum(wl.nodes for _, wl in jobs)) if cluster.topology else []
    first = 0
    for position, (entry, wl) in enumerate(jobs):
        comm = wl.ranks
        first, base = first + wl.nodes, first
        if wl.files and all(f.path in layouts for f in wl.files):
            continue
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
            lustre = entry.placement in names(kind="lustre")
            mine: dict[int, list[Request]] = {}
            for k, f in enumerate(wl.files):
                # Lustre's own allocators keep the file's stripe size (the file-system default
                # in the benchmarks); iez's policies size stripes themselves (docs/references.md#s000-method2).
                fixed = f.stripe_size if lustre else 0
                reqs = mine.setdefault(fixed, [])
                shared = len(wl.files) == 1 and wl.ranks > 1
                writers = _writers(wl, f.path)
                rank = 0 if shared else k
                host = nodes[base + wl.node_of(min(writers, default=rank))] if nodes else ""
                reqs.append(Request(path=f.path, write_bytes=round(f.size * entry.planned), stripe_count=f.stripe_count,
                                    rank=rank, app=wl.name, comm_size=comm if shared else 1,
                                    writers=len(writers), transfer_size=_transfer(wl),
                                    writer_segments=_segments(wl, f.path), grows=entry.grows, host=host,
                                    read_bytes=_read(wl, f.path)))
            for fixed, reqs in mine.items():
                if lustre and entry.others_per_create:
                    reqs = _others(entry, wl, reqs, seed, position)
                by_policy.setdefault((entry.placement, fixed, entry.layout), []).extend(reqs)
    snapshot = Snapshot.from_cluster(cluster)
    later = [g for g in by_policy if g[0] not in names(kind="lustre")]
    for group in [g for g in by_policy if g not in later] + later:
        if later and group == later[0] and view and layouts:
            snapshot = view(layouts)
        name, fixed, layout = group
        reqs = by_policy[group]
        opts = AllocOptions(stripe_method="fixed", stripe_size=fixed, layout=layout, seed=seed) if fixed \
            else AllocOptions(layout=layout, seed=seed)
        key = (name, fixed, layout, seed, _key(name, reqs))
        hit = next((got for c, snap, got in (cache or {}).get(key, ()) if c == cluster and snap == snapshot), None)
        if hit is None:
            hit = [pl.layout for pl in get_policy(name).place(reqs, cluster, snapshot, opts)]
            if cache is not None:
                cache.setdefault(key, []).append((cluster, snapshot, hit))
        for req, lay in zip(reqs, hit):
            if not req.path.startswith(OTHERS):
                layouts[req.path] = lay
    return layouts
