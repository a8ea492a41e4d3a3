"""A small Python client of the controller's HTTP API (docs/controller.md), for `iez run` and scripts.

    from iez.controller.api_client import ControllerClient

    c = ControllerClient("http://mds0:8760", token)       # or ControllerClient.from_env()
    got = c.fetch_plan("hacc", wait=30)                   # PlanReply: status, run, text, reason
    if got.status == "ready":
        Path("hacc.plan").write_text(got.text)            # IEZ_PLAN for libiez
    c.upload_trace("hacc", "/scratch/traces/run7")        # after the run: the trace and miss counts
    c.upload_requests("ior", [Request("/mnt/fs/out.0", 1 << 30, 4)])
    c.cluster()                                           # the global view (GET /cluster)

Every failure (controller unreachable, timeout, refused token, rejected input) raises
`ControllerError`, one line, with `.status` the HTTP status (0 when there was no answer), so a
caller can run the job unchanged and warn, as `iez run` must.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from iez.cluster import HOST_NAME
from iez.tokens import client_token
from iez.errors import ConfigError, IezError
from iez.fields import MAX_RAND
from iez.plan import format_layout
from iez.request import Request

DEFAULT_URL = "http://127.0.0.1:8760"
TIMEOUT = 30.0  # seconds for one HTTP exchange
POLL = 1.0  # seconds between looks at a pending plan (the server suggests Retry-After)
BUSY_WAIT = 120.0  # seconds an upload retries while the controller answers 503 (busy reading others)


class ControllerError(IezError):
    def __init__(self, message: str, status: int = 0, retry_after: float = 0.0):
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


@dataclass(frozen=True)
class PlanReply:
    status: str  # "ready", "pending", "failed" or "none" (no plan: trace this run)
    app: str
    run: int | None = None
    text: str = ""  # the plan file, when ready
    reason: str = ""


def request_json(q: Request, observed: bool = False) -> dict[str, Any]:
    """A Request as the API's FileRequest object; `observed`: with what the trace saw (the layout
    the file got, whether it was read collectively)."""
    d: dict[str, Any] = {"path": q.path, "write_bytes": q.write_bytes, "stripe_count": q.stripe_count,
                         "rank": q.rank, "comm_size": q.comm_size, "create_time": q.create_time,
                         "api": q.api, "pool": q.pool, "writers": q.writers, "transfer_size": q.transfer_size,
                         "write_align": q.write_align, "placed": q.placed, "writer_segments": q.writer_segments,
                         "read_bytes": q.read_bytes, "read_size": q.read_size,
                         # a host name the controller would refuse is left out, not the whole upload
                         "host": q.host if HOST_NAME.fullmatch(q.host) else "", "final_path": q.final_path,
                         "name_random": q.name_random if q.name_random <= MAX_RAND else 0}
    if observed and q.observed is not None:
        d["observed"] = format_layout(q.observed)
    if observed and q.read_collective:  # sent only when set: a controller before the field refuses it
        d["read_collective"] = True
    return d


class ControllerClient:
    def __init__(self, url: str = DEFAULT_URL, token: str = "", timeout: float = TIMEOUT,
                 verify: bool | str = True) -> None:
        """`url`: the controller's base URL; `token`: the site (or admin) token; `verify`: TLS
        certificate checking, or the path of a CA bundle."""
        import httpx

        self.url = url.rstrip("/")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout, verify=verify)

    @classmethod
    def from_env(cls, url: str | None = None, timeout: float = TIMEOUT) -> "ControllerClient":
        """$IEZ_CONTROLLER (URL) and the site token (iez.tokens.client_token)."""
        try:
            token = client_token()
        except ConfigError as e:
            raise ControllerError(str(e)) from None
        return cls(url or os.environ.get("IEZ_CONTROLLER", DEFAULT_URL), token, timeout)

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> "ControllerClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, method: str, path: str, **kw: Any):
        import httpx

        try:
            r = self.http.request(method, path, **kw)
        except httpx.HTTPError as e:
            raise ControllerError(f"controller {self.url} unreachable: {type(e).__name__}: {e}".rstrip(": ")) from None
        if r.status_code >= 400:
            try:
                detail = r.json().get("detail", r.text)
            except ValueError:
                detail = r.text.strip()[:200]
            retry = r.headers.get("Retry-After", "")
            raise ControllerError(f"controller {self.url}: HTTP {r.status_code}: {detail}", r.status_code,
                                  float(retry) if retry.isdigit() else 0.0)
        return r

    # -- the API ---------------------------------------------------------------------------------

    def health(self) -> dict[str, Any]:
        """GET /health: status, database, pending work, the worker, fresh and stale OSTs (a
        ControllerError with status 503 when the worker is not running)."""
        return self._call("GET", "/health").json()

    def cluster(self) -> dict[str, Any]:
        """GET /cluster: the global view, every OST and OSS with its statistics and their age."""
        return self._call("GET", "/cluster").json()

    def app(self, app: str) -> dict[str, Any]:
        """GET /apps/APP: the application's runs, pending work, and whether to trace again."""
        return self._call("GET", f"/apps/{app}").json()

    def fetch_plan(self, app: str, run: int | None = None, wait: float = 0.0) -> PlanReply:
        """The plan of `app`'s coming run (or of run `run`). With `wait` > 0, a plan still being
        made is waited for up to that many seconds. status "none" means: trace this run."""
        path = f"/apps/{app}/plan" if run is None else f"/apps/{app}/runs/{run}/plan"
        deadline = time.monotonic() + wait
        while True:
            try:
                r = self._call("GET", path)
            except ControllerError as e:
                if e.status == 404:
                    return PlanReply("none", app, run, reason=str(e))
                if e.status == 409:
                    return PlanReply("failed", app, run, reason=str(e))
                raise
            if r.status_code == 200:
                return PlanReply("ready", app, int(r.headers.get("X-Iez-Run", run or 0)) or None, r.text)
            body = r.json()
            left = deadline - time.monotonic()
            if left <= 0:
                return PlanReply("pending", app, body.get("run"), reason=body.get("detail", ""))
            time.sleep(min(left, POLL))

    def upload_trace(self, app: str, trace: str | Path, run: int | None = None) -> dict[str, Any]:
        """Read a run's trace here (libiez shard directory or Darshan log, iez trace import's
        rules) and upload what it created and read, with its plan hits and misses and how the
        import decided (its notes, with the warnings)."""
        from iez.pipeline import load_trace

        t = load_trace(trace, app)
        return self.upload_ingested(app, t.ingested.requests, run, label=t.label, source=t.source, nprocs=t.nprocs,
                                    plan_hits=t.ingested.plan_hits, plan_misses=t.ingested.plan_misses,
                                    warnings=[str(w) for w in t.meta.get("warnings", []) + t.notes],
                                    reads=t.ingested.reads)

    def upload_ingested(self, app: str, requests: Sequence[Request], run: int | None = None, *, label: str = "",
                        source: str = "libiez", nprocs: int = 0, plan_hits: int = 0, plan_misses: int = 0,
                        warnings: Sequence[str] = (), reads: Sequence[Request] = ()) -> dict[str, Any]:
        """POST /apps/APP/traces: what a run created and what it only read. Returns the run number
        and accuracy notes."""
        body = {"run": run, "label": label, "source": source, "nprocs": nprocs, "plan_hits": plan_hits,
                "plan_misses": plan_misses, "warnings": list(warnings)[:1000],
                "requests": [request_json(q, observed=True) for q in requests],
                "reads": [request_json(q, observed=True) for q in reads]}
        return self._upload(f"/apps/{app}/traces", body)

    def upload_requests(self, app: str, requests: Sequence[Request], run: int | None = None) -> dict[str, Any]:
        """POST /apps/APP/requests: the files a coming run will create; the controller plans them."""
        body = {"run": run, "requests": [request_json(q) for q in requests]}
        return self._upload(f"/apps/{app}/requests", body)

    def _upload(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST an upload; while the controller is busy (503: it reads a few uploads at once, or
        its database is held back) try again after the Retry-After it gives, for up to BUSY_WAIT."""
        deadline = time.monotonic() + BUSY_WAIT
        while True:
            try:
                return self._call("POST", path, json=body).json()
            except ControllerError as e:
                left = deadline - time.monotonic()
                if e.status != 503 or left <= 0:
                    raise
                time.sleep(min(left, max(POLL, min(e.retry_after, 10.0))))

    def release(self, app: str) -> dict[str, Any]:
        """DELETE /apps/APP/plan (admin token): the app's planned runs that will not run stop
        reserving space in the global view."""
        return self._call("DELETE", f"/apps/{app}/plan").json()

    def allocate(self, app: str, run: int, policy: str | None = None,
                 capacity_weight: float | None = None) -> dict[str, Any]:
        """POST /apps/APP/runs/N/allocate (admin token): place run N again now."""
        body = {k: v for k, v in (("policy", policy), ("capacity_weight", capacity_weight)) if v is not None}
        return self._call("POST", f"/apps/{app}/runs/{run}/allocate", json=body).json()
