"""The controller's HTTP fast path (iez.controller.server.plan_protocol): a GET of a held plan
with a known token is answered in uvicorn's httptools protocol, everything else goes on to the
ASGI application. A real uvicorn server (uvloop, httptools) in this process, real sockets on
loopback, replies read with h11; the ASGI side is `ServedPlans` over the controller's `Plans`,
counting what reaches it, in front of a small ASGI app standing for FastAPI."""

from __future__ import annotations

import random
import socket
import threading
import time
from types import SimpleNamespace
from typing import Iterator

import h11
import pytest
import uvicorn

from iez.controller.api import ServedPlans
from iez.controller.server import plan_protocol
from iez.controller.service import PlanResult, Plans
from iez.tokens import Tokens

SITE, ADMIN = "s" * 32, "a" * 32
BIG = bytes(random.Random(1).choices(b"abcdefgh\n", k=256 << 10))  # larger than the transport's buffer


class Counted(ServedPlans):
    """ServedPlans counting the requests that reach the ASGI side."""

    def __init__(self, *args) -> None:
        super().__init__(*args)
        self.seen: list[str] = []

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http":
            self.seen.append(f"{scope['method']} {scope['path']}")
        await super().__call__(scope, receive, send)


async def downstream(scope, receive, send) -> None:
    """Stands for FastAPI: reads the whole body, answers with what it was asked."""
    if scope["type"] != "http":
        return
    size = 0
    while True:
        msg = await receive()
        size += len(msg.get("body", b""))
        if not msg.get("more_body"):
            break
    body = f"downstream {scope['method']} {scope['path']} {size}".encode()
    await send({"type": "http.response.start", "status": 418, "headers": [(b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


@pytest.fixture(scope="module")
def server() -> Iterator[SimpleNamespace]:
    plans = Plans()
    job = PlanResult("ready", "job", 3, b"# iez plan\n/fs/a S=1048576,c=1,o=2\n")
    plans.put("job", None, job, 0)  # the coming run's plan, and the same asked by its number
    plans.put("job", 3, job, 0)
    plans.put("big", None, PlanResult("ready", "big", 1, BIG), 0)
    pending = PlanResult("pending", "wait", 2, reason="waiting for fresh OST statistics")

    def held_plan(app: str, run: int | None) -> PlanResult | None:  # as Controller.held_plan: no database
        return pending if app == "wait" else plans.get(app, run)

    served = Counted(downstream, SimpleNamespace(held_plan=held_plan), Tokens(SITE, ADMIN))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = uvicorn.Config(served, host="127.0.0.1", port=port, log_level="warning", access_log=False,
                            http=plan_protocol(served), loop="uvloop", lifespan="off")
    srv = uvicorn.Server(config)
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not srv.started:
        assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
        time.sleep(0.02)
    yield SimpleNamespace(port=port, served=served, plans=plans)
    srv.should_exit = True
    thread.join(10)


def request(target: str, token: str | None = SITE, method: str = "GET", version: str = "1.1",
            extra: tuple[tuple[str, str], ...] = (), body: bytes = b"") -> bytes:
    lines = [f"{method} {target} HTTP/{version}", "Host: x"]
    lines += [f"Authorization: Bearer {token}"] if token else []
    lines += [f"{k}: {v}" for k, v in extra]
    lines += [f"Content-Length: {len(body)}"] if body else []
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def exchange(port: int, chunks: list[bytes], replies: int | list[str], pause: float = 0.0) -> list:
    """Send `chunks` on one connection, then read the replies to requests of the methods listed
    (or `replies` GETs): (status, headers without date, body) each, then whether the server
    closed the connection after them. h11 parses; it is told each request only to know its
    method, the bytes sent are ours."""
    methods = ["GET"] * replies if isinstance(replies, int) else replies
    conn = h11.Connection(h11.CLIENT)
    out: list = []
    with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
        for c in chunks:
            s.sendall(c)
            if pause:
                time.sleep(pause)
        for method in methods:
            conn.send(h11.Request(method=method, target="/", headers=[("Host", "x")]))
            conn.send(h11.EndOfMessage())
            while True:
                ev = conn.next_event()
                if ev is h11.NEED_DATA:
                    data = s.recv(1 << 16)
                    if not data:
                        return [*map(tuple, out), True]
                    conn.receive_data(data)
                elif isinstance(ev, h11.Response):
                    out.append([ev.status_code, [(k, v) for k, v in ev.headers if k != b"date"], b""])
                elif isinstance(ev, h11.Data):
                    out[-1][2] += ev.data
                elif isinstance(ev, h11.EndOfMessage):
                    break
            if conn.their_state is h11.MUST_CLOSE:
                return [*map(tuple, out), s.recv(1) == b""]
            conn.start_next_cycle()
        return [*map(tuple, out), False]


def test_a_pending_plan_is_answered_before_asgi_as_asgi_would(server):
    """A polled pending plan: the route's 202 with its reason, byte for byte on both paths, and
    the connection kept for the next poll."""
    server.served.seen.clear()
    fast, slow, closed = exchange(server.port, [request("/apps/wait/plan"), request("/apps/wait/pla%6E")], 2)
    assert fast == slow and fast[0] == 202 and not closed
    assert b"waiting for fresh OST statistics" in fast[2] and (b"content-type", b"application/json") in fast[1]
    assert server.served.seen == ["GET /apps/wait/plan"]


def test_a_held_plan_is_answered_before_asgi_as_asgi_would(server):
    """The same reply, byte for byte but the date, as ServedPlans gives on the ASGI path (a
    percent-encoded path goes there); a 304 for a tag held; only the encoded path reaches ASGI."""
    server.served.seen.clear()
    fast, slow, closed = exchange(server.port, [request("/apps/job/plan"), request("/apps/job/pla%6E")], 2)
    assert fast == slow and fast[0] == 200 and fast[2].startswith(b"# iez plan") and not closed
    assert server.served.seen == ["GET /apps/job/plan"]  # the encoded one, as uvicorn decoded it
    etag = dict(fast[1])[b"etag"].decode()
    (s304, h304, b304), (s304b, h304b, _), _ = exchange(
        server.port, [request("/apps/job/runs/3/plan", extra=(("If-None-Match", f'"x", W/{etag}'),)),
                      request("/apps/job/runs/3/pla%6E", extra=(("If-None-Match", etag),))], 2)
    assert s304 == s304b == 304 and b304 == b"" and h304 == h304b and (b"content-length", b"0") not in h304
    assert server.served.seen == ["GET /apps/job/plan", "GET /apps/job/runs/3/plan"]


@pytest.mark.parametrize("req", [
    request("/apps/job/plan", token=None), request("/apps/job/plan", token="x" * 32),
    request("/apps/job/plan", extra=(("Authorization", "Basic " + SITE),)),
    request("/apps/job/plan", method="HEAD"), request("/apps/job/plan", method="POST", body=b"{}"),
    request("/apps/nope/plan"), request("/apps/job/runs/4/plan"), request("/apps/job/plan/"),
    request("/health"),
])
def test_anything_else_goes_on_to_the_application(server, req):
    server.served.seen.clear()
    (status, _, body), _ = exchange(server.port, [req], [req.split(b" ")[0].decode()])
    assert status == 418 and len(server.served.seen) == 1, body  # downstream's answer


def test_keep_alive_close_and_http_1_0_as_uvicorn(server):
    """HTTP/1.0 and `Connection: close` get `connection: close` and the socket is closed after
    the reply, on both paths; a body sent with a GET is skipped and the next request answered."""
    for target in ("/apps/job/plan", "/apps/job/pla%6E"):
        (status, headers, _), closed = exchange(server.port, [request(target, version="1.0")], 1)
        assert status == 200 and (b"connection", b"close") in headers and closed
        (status, headers, _), closed = exchange(server.port, [request(target, extra=(("Connection", "close"),))], 1)
        assert status == 200 and (b"connection", b"close") in headers and closed
    first, second, closed = exchange(server.port, [request("/apps/job/plan", body=b"ignored") + request("/apps/job/plan")], 2)
    assert first[0] == second[0] == 200 and first == second and not closed


KINDS = {  # a request and what its reply's body starts with
    "plan": (request("/apps/job/plan"), b"# iez plan"),
    "big": (request("/apps/big/plan"), BIG[:64]),
    "asgi plan": (request("/apps/job/pla%6E"), b"# iez plan"),
    "other": (request("/health"), b"downstream GET /health 0"),
    "post": (request("/apps/job/traces", method="POST", body=b"x" * 300), b"downstream POST /apps/job/traces 300"),
    "no token": (request("/apps/job/plan", token=None), b"downstream GET /apps/job/plan 0"),
}


@pytest.mark.parametrize("seed", range(12))
def test_pipelined_mixtures_arrive_whole_and_in_order(server, seed):
    """Seeded fuzz: requests of every kind pipelined on one connection, the byte stream cut at
    random places (some cuts inside a request line or a header), read only after all is sent:
    every reply is complete and in request order, whichever path answered it and while the
    server's writes are paused by a reader that is not reading."""
    rng = random.Random(seed)
    kinds = [rng.choice(list(KINDS)) for _ in range(rng.randint(5, 40))]
    stream = b"".join(KINDS[k][0] for k in kinds)
    cuts = sorted(rng.sample(range(1, len(stream)), min(len(stream) - 1, rng.randint(0, 12))))
    chunks = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)])]
    methods = [KINDS[k][0].split(b" ")[0].decode() for k in kinds]
    *replies, closed = exchange(server.port, chunks, methods, pause=0.002 if seed % 2 else 0.0)
    assert len(replies) == len(kinds) and not closed
    for kind, (status, _, body) in zip(kinds, replies):
        want = KINDS[kind][1]
        assert body.startswith(want), (kind, body[:80])
        if kind == "big":
            assert body == BIG
        assert status == (200 if "plan" in kind or kind == "big" else 418), kind


def test_a_client_that_does_not_read_gets_its_replies_when_it_reads(server):
    """100 pipelined fetches of a 256 KiB plan sent before reading any reply: replies past the
    transport's buffer take uvicorn's path, which waits for the reader (no reply is lost, none
    reordered)."""
    n = 100
    *replies, closed = exchange(server.port, [request("/apps/big/plan") * n], n)
    assert len(replies) == n and all(r[0] == 200 and r[2] == BIG for r in replies) and not closed


def test_a_plan_cleared_is_asked_of_the_application(server):
    """Plans cleared (a write that may change them) are no longer answered before ASGI."""
    server.served.seen.clear()
    held = dict(server.plans.known)
    server.plans.clear()
    try:
        (status, _, _), _ = exchange(server.port, [request("/apps/job/plan")], 1)
        assert status == 418 and server.served.seen == ["GET /apps/job/plan"]
    finally:
        for (app, run), plan in held.items():
            server.plans.put(app, run, plan, server.plans.generation)
