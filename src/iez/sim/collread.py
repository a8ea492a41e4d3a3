"""Two-phase collective reads as the simulator runs them (docs/simulator.md, "Collective reads").

A collective read has two phases: aggregators read the file, then send each rank the bytes it
asked for over the compute network. The two ways differ in how the file is cut among aggregators:

- `romio`, ROMIO's generic two-phase read (the Lustre driver writes collectively its own way but
  reads through the common code): one aggregator per node (`cb_config_list` "*:1",
  docs/references.md#romio-hints), the access range cut into equal contiguous file domains whose
  ends sit on stripe boundaries (docs/references.md#romio-file-domains). A domain spans many
  stripes, so every OST serves every aggregator at once: seed 003's Fig. 4.
- `lustre`, seed 003's Lustre-aware read (docs/references.md#s003-figs4-5): one aggregator per
  OST of the file, reading only that OST's stripes, so each OST serves one client (Fig. 5);
  aggregators are ranks taken one per node in turn, as `libiez/src/collread.c` takes them.

Pure: extents and layouts in, the aggregators' reads and the exchange out.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from dataclasses import dataclass
from typing import Callable, Iterable

from iez.errors import ConfigError
from iez.layout.layout import FileLayout
from iez.layout.raid0 import range_bytes
from iez.sim.workload import Extent

MODES = ("off", "romio", "lustre")


@dataclass(frozen=True)
class TwoPhase:
    reads: dict[tuple[int, str, int, int], int]  # (reading node, path, component, stripe) -> bytes
    exchange: dict[tuple[int, int], int]  # (from node, to node) -> bytes, the nodes apart


def _domains(start: int, end: int, aggregators: int, unit: int) -> list[int]:
    """The inner boundaries of `aggregators` equal domains of [start, end), each moved to the
    nearest multiple of `unit` (ROMIO's file domain alignment)."""
    size = -(-(end - start) // aggregators)
    cuts: list[int] = []
    for k in range(1, aggregators):
        b = start + k * size
        b = (b + unit // 2) // unit * unit
        cuts.append(min(max(b, cuts[-1] if cuts else start), end))
    return cuts


def _turns(ranks: Iterable[int], node_of: Callable[[int], int]) -> list[int]:
    """Ranks one per node in turn: the first rank of every node, then the second, ..."""
    per_node: dict[int, list[int]] = defaultdict(list)
    for r in sorted(set(ranks)):
        per_node[node_of(r)].append(r)
    cols = [per_node[n] for n in sorted(per_node)]
    return [c[i] for i in range(max(map(len, cols))) for c in cols if i < len(c)]


def two_phase(mode: str, extents: Iterable[Extent], layouts: dict[str, FileLayout],
              node_of: Callable[[int], int]) -> TwoPhase:
    """What each node reads for the others and what it then sends them, file by file (a
    collective call is on one file)."""
    if mode not in MODES[1:]:
        raise ConfigError(f"collective_read {mode!r} is not one of {', '.join(MODES)}")
    by_path: dict[str, list[Extent]] = defaultdict(list)
    for e in extents:
        if e.length > 0:
            by_path[e.path].append(e)
    reads: dict[tuple[int, str, int, int], int] = defaultdict(int)
    exchange: dict[tuple[int, int], int] = defaultdict(int)

    def read(reader: int, path: str, lay: FileLayout, lo: int, hi: int, owner: int) -> None:
        for (c, s), n in range_bytes(lay, lo, hi).items():
            reads[(reader, path, c, s)] += n
        if reader != owner:
            exchange[(reader, owner)] += hi - lo

    for path, exts in by_path.items():
        lay = layouts.get(path)
        if lay is None:
            raise ConfigError(f"no layout for {path}")
        parts = lay.parts()
        if mode == "romio":
            nodes = sorted({node_of(e.rank) for e in exts})
            start, end = min(e.offset for e in exts), max(e.offset + e.length for e in exts)
            cuts = _domains(start, end, len(nodes), parts[0].layout.stripe_size)
            bounds = [start, *cuts, end]
            for e in exts:
                lo, hi = e.offset, e.offset + e.length
                k = bisect.bisect_right(cuts, lo)
                while lo < hi:
                    top = min(hi, bounds[k + 1])
                    if top > lo:
                        read(nodes[k], path, lay, lo, top, node_of(e.rank))
                    lo, k = max(lo, top), k + 1
        else:
            osts = list(dict.fromkeys(o for p in parts for o in p.layout.osts[:p.layout.stripe_count]))
            aggs = _turns((e.rank for e in exts), node_of)[:len(osts)]
            reader = {o: node_of(aggs[k % len(aggs)]) for k, o in enumerate(osts)}
            for e in exts:
                owner = node_of(e.rank)
                for (c, s), n in range_bytes(lay, e.offset, e.offset + e.length).items():
                    r = reader[parts[c].layout.osts[s]]
                    reads[(r, path, c, s)] += n
                    if r != owner:
                        exchange[(r, owner)] += n
    return TwoPhase(dict(reads), dict(exchange))
