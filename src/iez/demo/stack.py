"""The whole control plane on one machine, as real processes (the paper's architecture,
docs/references.md#s000-fig4): an emulated
cluster with its MDS, and `iez.controller.local.LocalControlPlane`'s collectors (one per OSS,
one on the MDS, ZeroMQ on loopback) and controller (HTTP, SQLite). Used by the demo and the
end-to-end tests; everything is stopped on exit, whatever happened."""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

from iez.alloc.registry import DEFAULT_POLICY
from iez.cluster import Cluster
from iez.controller.local import LocalControlPlane
from iez.emulated.mds_client import MdsClient, running_cluster
from iez.emulated.clusterdir import ClusterDir
from iez.errors import IezError

# s; the paper's is 60 s (references: s000-collect), which would make a demo wait minutes per step
COLLECT_INTERVAL = 1.0


@dataclass
class Stack:
    cd: ClusterDir
    cluster: Cluster
    plane: LocalControlPlane

    @property
    def url(self) -> str:
        return self.plane.url

    def client_env(self, base: dict[str, str]) -> dict[str, str]:
        """The environment of a job run with `iez run` against this controller."""
        return dict(base, IEZ_CONTROLLER=self.plane.url, IEZ_TOKEN=self.plane.site)

    def client(self, admin: bool = False):
        return self.plane.client(admin)

    def settle(self, timeout: float = 30.0) -> None:
        """Make the controller see the cluster as it is now, idle: the MDS rewrites its
        parameter trees, then every OST's reports arrive and show no I/O. Until then a rate
        measured over the previous run's last writes still reads as another job's live load,
        and the allocator would route around idle OSTs."""
        MdsClient(self.cd).refresh()
        since = time.time()
        deadline = time.monotonic() + timeout
        with self.client() as c:
            while True:
                view = c.cluster()
                if all(o["age"] is not None and view["time"] - o["age"] > since and not o.get("write_bps")
                       and not o.get("read_bps") for o in view["osts"]):
                    return
                if time.monotonic() > deadline:
                    raise IezError(f"the controller has no fresh statistics after {timeout:.0f} s (see {self.plane.dir})")
                time.sleep(0.2)


@contextmanager
def control_plane(workdir: Path, cluster: Cluster, seed: int | None = None, policy: str = DEFAULT_POLICY,
                  layout: str | None = None, layout_keep: Sequence[str] = ()) -> Iterator[Stack]:
    """Start the emulated cluster, its collectors and the controller; stop them all on exit.
    `layout` is the controller's layout mode (else the cluster's), `layout_keep` the
    applications that keep their asked layouts whatever the mode (docs/layouts.md "Modes")."""
    with running_cluster(workdir / "cluster", cluster, seed=seed) as cd, \
            LocalControlPlane(cd, workdir / "plane", interval=COLLECT_INTERVAL) as plane:
        plane.start_collectors()
        modes = (["--layout", layout] if layout else []) + [a for app in layout_keep for a in ("--layout-keep", app)]
        plane.start_controller("--no-gate", "--policy", policy, *modes)
        yield Stack(cd, cluster, plane)
