"""What the controller reads from the interaction database beyond `Txn`'s own operations: the
work still to do, which is how it recovers after a crash. Nothing is queued in memory; the
database says it all:

- predict: an application whose newest traced run that created files, or read striped files
  collectively (its plan asks for the Lustre-aware collective read), has no prediction of a later
  run (a run that only read otherwise teaches prediction nothing);
- allocate: a predicted run that is neither traced nor planned (uploaded requests, or a
  prediction made just before a crash).

Plans are served as stored (the `plans` table: rendered once, when the run is placed), so a
restarted controller serves every plan it made before without rendering it again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from sqlalchemy import func, or_, select

from iez.cluster import Cluster
from iez.db import Txn
from iez.db.schema import applications, predictions, runs, traced_requests
from iez.pipeline import plan_text
from iez.request import Placement


@dataclass(frozen=True)
class Work:
    kind: str  # "predict" | "allocate"
    app: str
    run: int  # predict: the newest traced run that created files or read collectively; allocate: the run to place
    version: int = 0  # allocate: the newest prediction's id (a new upload is new work)

    @property
    def target(self) -> int:
        """The run whose plan this work leads to."""
        return self.run + 1 if self.kind == "predict" else self.run

    @property
    def key(self) -> tuple:
        return (self.kind, self.app, self.run, self.version)


def pending_work(tx: Txn) -> list[Work]:
    """Everything the controller still has to do, oldest application first."""
    c = tx.conn
    created = select(traced_requests.c.id).where(traced_requests.c.run_id == runs.c.id).exists()
    # the run's meta as add_trace stores it (json.dumps): a non-empty `collective_reads` list
    collective = runs.c.meta.like('%"collective_reads": ["%')
    traced = dict(c.execute(select(applications.c.name, func.max(runs.c.number))
                            .join(runs, runs.c.app_id == applications.c.id)
                            .where(runs.c.traced_at.is_not(None), or_(created, collective))
                            .group_by(applications.c.name)).all())
    predicted = dict(c.execute(select(applications.c.name, func.max(runs.c.number))
                               .join(runs, runs.c.app_id == applications.c.id)
                               .join(predictions, predictions.c.run_id == runs.c.id)
                               .group_by(applications.c.name)).all())
    unplanned = c.execute(select(applications.c.name, runs.c.number, func.max(predictions.c.id))
                          .join(runs, runs.c.app_id == applications.c.id)
                          .join(predictions, predictions.c.run_id == runs.c.id)
                          .where(runs.c.traced_at.is_(None), runs.c.planned_policy.is_(None))
                          .group_by(applications.c.name, runs.c.number)
                          .order_by(func.max(predictions.c.id))).all()
    work = [Work("allocate", app, number, pid) for app, number, pid in unplanned]
    work += [Work("predict", app, last) for app, last in sorted(traced.items())
             if predicted.get(app) is None or predicted[app] <= last]
    return work


@dataclass(frozen=True)
class RunState:
    traced: bool
    planned_policy: str  # whose placements its plan carries, "" when it has none


def run_state(tx: Txn, app: str, number: int) -> RunState | None:
    """Whether run `number` of `app` has a trace and whose plan it follows; None when there is no
    such run. One query (not every run of the application, with its files counted)."""
    r = tx.conn.execute(select(runs.c.traced_at, runs.c.planned_policy)
                        .join(applications, runs.c.app_id == applications.c.id)
                        .where(applications.c.name == app, runs.c.number == number)).first()
    return None if r is None else RunState(r.traced_at is not None, r.planned_policy or "")


def plan_body(tx: Txn, app: str, number: int, policy: str, cluster: Cluster, placed: Sequence[Placement],
              created: float) -> bytes:
    """The plan file (docs/plan-format.md) of run `number`, as served."""
    return plan_text(tx, app, number, policy, cluster, placed, created).encode()


def render_plan(tx: Txn, app: str, number: int, policy: str) -> bytes:
    """The plan file of run `number` from `policy`'s stored placements (a run placed before plans
    were stored)."""
    chosen = next(s for s in tx.placement_sets(app, number) if s.policy == policy)
    cluster, snap = tx.snapshot(chosen.snapshot_id)
    return plan_body(tx, app, number, policy, cluster, chosen.placements, snap.time)
