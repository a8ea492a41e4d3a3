"""The controller's live dashboard: one page of plain HTML and JavaScript (no build step) that
polls `GET /dashboard/state` and redraws: the OSTs and OSSs of the global view (usage, load,
rates, staleness, OSTCost), the applications with their plans, plan hits and misses, the
worker's queue, and IO-Cop's holders and queue when the controller is told where IO-Cop is
(`iez controller --iocop ENDPOINT`).

Auth: the page and its script hold no data and need no token; the state needs the site token,
which the reader types into the page (kept in the tab's sessionStorage, sent as a Bearer
header). The admin token is refused there (403), so it is never typed into a browser page.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from iez.errors import IezError, one_line

if TYPE_CHECKING:
    from iez.controller.service import Controller

STATIC = Path(__file__).with_name("static")
PAGES = {"/dashboard": ("dashboard.html", "text/html; charset=utf-8"),
         "/dashboard/dashboard.js": ("dashboard.js", "text/javascript; charset=utf-8")}
MAX_APPS = 200  # applications listed; the newest by name order beyond that are counted, not shown
RUNS_SHOWN = 5  # the newest runs of each application
IOCOP_TIMEOUT = 1.0  # seconds IO-Cop may take to answer STATUS before the page says it did not


def page(path: str) -> tuple[bytes, str]:
    """The static file served at `path` and its media type."""
    name, media = PAGES[path]
    return (STATIC / name).read_bytes(), media


def iocop_state(endpoint: str, token: str) -> dict[str, Any]:
    """IO-Cop's holders and queue by its STATUS request, or why not."""
    if not endpoint:
        return {"configured": False}
    from iez.access.token_client import fetch_status

    try:
        got = fetch_status(endpoint, IOCOP_TIMEOUT, token)
    except IezError as e:
        return {"configured": True, "endpoint": endpoint, "error": one_line(e)}
    return {"configured": True, "endpoint": endpoint, "holders": got["holders"], "waiting": got["waiting"]}


def state(controller: Controller) -> dict[str, Any]:
    """Everything the page shows, in one JSON document."""
    with controller.db.begin() as tx:
        names = tx.apps()
    apps = []
    for name in names[:MAX_APPS]:
        st = controller.app_status(name)
        runs = st["runs"]
        planned = [r for r in runs if r["planned"] and not r["traced"]]
        apps.append({"app": name, "runs": runs[-RUNS_SHOWN:], "n_runs": len(runs),
                     "plan_hits": sum(r["plan_hits"] for r in runs),
                     "plan_misses": sum(r["plan_misses"] for r in runs),
                     "next_plan": planned[-1] if planned else None,
                     "pending": st["pending"], "retrace": st["retrace"]})
    with controller.lock:
        counters = {"done": dict(controller.done), "errors": dict(controller.errors),
                    "messages": dict(controller.messages)}
    return {"cluster": controller.cluster_view(), "health": controller.health(), "apps": apps,
            "apps_not_shown": max(0, len(names) - MAX_APPS), "counters": counters,
            "policy": controller.policy.name,
            "iocop": iocop_state(controller.settings.iocop, controller.settings.site_key)}
