"""IO-Cop controller speed: request rate and latency, each against a baseline
measured in the same run.

- transport: one request's round trip (HELLO) over the ZeroMQ ROUTER socket (CURVE, signed) and
  the raw-TCP line socket, against an HTTP server doing nothing (FastAPI on uvicorn, httpx
  keep-alive client): the measurement behind choosing ZeroMQ (docs/iocop.md); and against a
  --trusted-network controller (plain ZeroMQ, unsigned): what authentication costs;
- a grant: ACQUIRE + RELEASE by one client (state saved to SQLite before each reply), against
  two bare round trips;
- churn: 1,000 C clients x 3 cycles under exclusive, grants per second, against one C client
  doing the same 3,000 cycles alone, three rounds interleaved (the median ratio against the goal); and the release-to-grant hand-off between two clients;
- wait estimate: one ESTIMATE with 10,000 claims queued, per policy, in the steady state and the
  first after a departure, against a HELLO (in process, and its round trip over ZeroMQ), with the
  goal (< 1 ms) beside each; and the old path, which ran the policy forward with a full decide at
  every expected end, with 1,000 queued.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import zmq

from iez.access import protocol as P
from iez.access.auth import Signer
from iez.access.token_client import AccessClient
from iez.access.server import spawn
from iez.tokens import new_token
from iez.zmqauth import curve_client

TOKEN = new_token()  # this run's site token; main() hands it to the clients through the environment

ROOT = Path(__file__).resolve().parent.parent
CLIENT = ROOT / "build" / "iocop" / "iocop-client"
N = 3000
CHURN_GOAL = 0.5  # 1,000 clients churning get at least half the grants per second of one alone
CHURN_ROUNDS = 3

HTTP_SERVER = textwrap.dedent("""
    import sys, uvicorn
    from fastapi import FastAPI
    app = FastAPI()
    @app.post("/hello")
    def hello():
        return {"ok": True}
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="error")
""")


def timed(fn, n=N) -> tuple[float, float, float]:
    """median and p99 latency (s), and requests per second, of n calls after a warm-up."""
    for _ in range(min(200, n)):
        fn()
    lat = []
    t0 = time.perf_counter()
    for _ in range(n):
        a = time.perf_counter()
        fn()
        lat.append(time.perf_counter() - a)
    total = time.perf_counter() - t0
    lat.sort()
    return lat[len(lat) // 2], lat[int(0.99 * len(lat))], n / total


def show(name: str, m: tuple[float, float, float]) -> None:
    print(f"  {name}: median {m[0] * 1e6:.0f} us, p99 {m[1] * 1e6:.0f} us, {m[2]:,.0f} requests/s")


def req(endpoint: str, token: str) -> zmq.Socket:
    """A REQ socket as the clients make it: CURVE with the token's keys, plain without one."""
    sock = zmq.Context.instance().socket(zmq.REQ)
    curve_client(sock, token)
    sock.connect(endpoint)
    return sock


def transport(ctl, plain) -> float:
    """Prints the round trips; returns the median over ZeroMQ with CURVE (the clients' path)."""
    import socket

    import httpx

    sock, psock = req(ctl.zmq, TOKEN), req(plain.zmq, "")
    zs, ls = Signer(TOKEN), Signer(TOKEN)  # signed as every client signs

    def z():
        sock.send_string(zs.sign("HELLO", time.time()))
        sock.recv()

    def p():
        psock.send_string("HELLO")
        psock.recv()

    host, port = ctl.line_addr.rsplit(":", 1)
    conn = socket.create_connection((host, int(port)))
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    f = conn.makefile("rb")

    def line():
        conn.sendall(ls.sign("HELLO", time.time()).encode() + b"\n")
        f.readline()

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        hport = s.getsockname()[1]
    http = subprocess.Popen([sys.executable, "-c", HTTP_SERVER, str(hport)], stderr=subprocess.DEVNULL)
    try:
        client = httpx.Client()
        deadline = time.monotonic() + 30
        while True:
            try:
                client.post(f"http://127.0.0.1:{hport}/hello")
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        zm, lm, pm = timed(z), timed(line), timed(p)
        hm = timed(lambda: client.post(f"http://127.0.0.1:{hport}/hello"), n=N // 3)
    finally:
        http.kill()
        http.wait()
    print("transport, one request round trip on loopback:")
    show("ZeroMQ ROUTER (REQ client; CURVE, signed)", zm)
    show("ZeroMQ ROUTER, trusted network (plain ZeroMQ, unsigned)", pm)
    show("raw-TCP line socket (signed)", lm)
    show("HTTP baseline (FastAPI/uvicorn, httpx)", hm)
    print(f"  HTTP / ZeroMQ median latency: {hm[0] / zm[0]:.1f}x; ZeroMQ / HTTP rate: {zm[2] / hm[2]:.1f}x")
    print(f"  CURVE and signature / trusted network, median latency: {zm[0] / pm[0]:.2f}x")
    sock.close(0)
    psock.close(0)
    conn.close()
    return zm[0]


def grants(ctl) -> None:
    c = AccessClient(ctl.zmq, "1:bench")
    c._registered()
    sock = req(ctl.zmq, TOKEN)
    signer = Signer(TOKEN)

    def hello2():
        for _ in range(2):
            sock.send_string(signer.sign("HELLO", time.time()))
            sock.recv()

    def cycle():
        c._call(P.format_request("ACQUIRE", c.appid, c._secret, "io"), 5)
        tok = c._call(P.format_request("HEARTBEAT", c.appid, c._secret), 5).opt("token")
        c._call(P.format_request("RELEASE", c.appid, c._secret, tok), 5)

    base = timed(hello2, n=N // 2)
    m = timed(cycle, n=N // 3)
    print("grant cycle (ACQUIRE, HEARTBEAT, RELEASE; SQLite commit before each reply that changes state):")
    show("one cycle", m)
    print(f"  cycle / two bare round trips: {m[0] / base[0]:.2f}x (three requests, two of them saving state)")
    c.close()
    sock.close(0)


def churn(tmp: Path) -> None:
    if not CLIENT.exists():
        print(f"churn: {CLIENT} missing (cmake --build build)")
        return
    ctl = spawn(tmp / "churn.db", "--heartbeat", "1", token=TOKEN, events=tmp / "churn.jsonl")
    out = tmp / "churn.out"
    rounds = []  # (alone s, many s, failed): interleaved, the machine's load moves
    try:
        for r in range(CHURN_ROUNDS):
            t0 = time.perf_counter()
            p = subprocess.run([str(CLIENT), ctl.line_addr, f"0:alone{r}", "--cycles", str(N)],
                               capture_output=True, text=True)
            alone = time.perf_counter() - t0
            assert p.returncode == 0, p.stderr
            t0 = time.perf_counter()
            with open(out, "ab") as f:
                procs = [subprocess.Popen([str(CLIENT), ctl.line_addr, f"{i}:churn{r}", "--cycles", "3",
                                           "--timeout-ms", "20000"], stdout=f, stderr=subprocess.STDOUT)
                         for i in range(1000)]
            bad = sum(1 for p in procs if p.wait() != 0)
            rounds.append((alone, time.perf_counter() - t0, bad))
    finally:
        ctl.stop()
    rows = [line.split("\t") for line in out.read_text().splitlines()]
    seq = sorted((float(r[4]) if r[0] == "grant" else float(r[3]), r[0]) for r in rows if r[0] in ("grant", "release"))
    hand = [b[0] - a[0] for a, b in zip(seq, seq[1:]) if a[1] == "release" and b[1] == "grant"]
    print(f"churn, exclusive (every grant waits for the previous release), C clients on the line socket, "
          f"{CHURN_ROUNDS} interleaved rounds (load {os.getloadavg()[0]:.0f}):")
    for alone, many, bad in rounds:
        print(f"  1 client x {N} cycles alone: {N / alone:,.0f} grants/s; 1,000 clients x 3 cycles (process start-up "
              f"included): {3000 / many:,.0f} grants/s, {bad} failed; / alone: {alone / many:.2f}x")
    ratio = statistics.median(alone / many for alone, many, _ in rounds)
    failed = sum(bad for _, _, bad in rounds)
    print(f"  median / alone: {ratio:.2f}x (goal >= {CHURN_GOAL:g}x, within 2x of alone: "
          f"{'met' if ratio >= CHURN_GOAL and not failed else 'NOT met'})")
    print(f"  release-to-next-grant hand-off (client clocks): median {statistics.median(hand) * 1e3:.2f} ms, "
          f"p99 {sorted(hand)[int(0.99 * len(hand))] * 1e3:.2f} ms")


ESTIMATE_GOAL = 1e-3  # s, one wait estimate with 10,000 claims queued
QUEUED = 10_000
# (policy, k): each policy as `iez access serve` starts it, and k-concurrent and fair-share with four slots
ESTIMATE_CASES = [("exclusive", 1), ("k-concurrent", 1), ("k-concurrent", 4), ("priority", 1), ("fair-share", 1),
                  ("fair-share", 4), ("ost-aware", 1)]


def queued(name: str, n: int, k: int = 1):
    """An in-process AccessQueue under `name` with k holders and about n claims waiting, from 16
    users on 16 OSTs (one each), one user's claims at a higher priority; the secrets."""
    from iez.access.admission import Rule, make_policy
    from iez.access.queue import AccessQueue, Settings

    c = AccessQueue(make_policy(name, k=k), Settings(priorities=(Rule("user", "u3", 5.0),)), now=0.0)
    secrets = {}
    for i in range(n + 2):  # the last one registers but does not queue: it asks where it would stand
        app = f"{i}:w"
        reply = c.handle(f"REGISTER\t{app}\tosts={i % 16}\tuser=u{i % 16}", 0.0).reply
        secrets[app] = reply.split("\t")[1]
        if i <= n:
            c.handle(f"ACQUIRE\t{app}\t{secrets[app]}\tio\texpect={1 + i % 7}", 0.0)
    return c, secrets


def cpu(fn) -> float:
    """CPU time (s) of this thread for one call: the machine is shared, wall time is not ours."""
    t0 = time.thread_time()
    fn()
    return time.thread_time() - t0


def cpu_median(fn, n: int, budget: float = 1.0) -> float:
    """Median CPU time of up to n calls, fewer (at least 3) once they have taken `budget` s."""
    times: list[float] = []
    while len(times) < n and (len(times) < 3 or sum(times) < budget):
        times.append(cpu(fn))
    return statistics.median(times)


def estimate_cost(round_trip: float) -> None:
    """ESTIMATE in process with 10,000 claims queued, per policy: in the steady state (the queue
    unchanged, after a claim joined, for a claim not queued) and the first after a departure (a
    holder released and the next was granted; a claim in the middle cancelled), against a HELLO
    handled in process and a HELLO round trip over ZeroMQ, both measured in this run; and the old
    path (run decide forward at every expected end) with 1,000 queued."""
    from iez.access.admission import simulate

    print(f"wait estimate (in process, CPU time, medians; goal < {ESTIMATE_GOAL * 1e3:g} ms with "
          f"{QUEUED:,} claims queued, in every case):")
    for name, k in ESTIMATE_CASES:
        c, secrets = queued(name, QUEUED, k)
        t = 1.0
        last, probe = f"{QUEUED}:w", f"{QUEUED + 1}:w"

        def ask(app):
            return lambda: c.handle(f"ESTIMATE\t{app}\t{secrets[app]}", t)

        hello = cpu_median(lambda: c.handle("HELLO", t), 1000)
        ask(last)()
        unchanged = cpu_median(ask(last), 200)
        probed = cpu_median(ask(probe), 200)
        stranger = "new:w"  # a user with no claim: under fair-share its claim would start a group
        secrets[stranger] = c.handle(f"REGISTER\t{stranger}\tuser=unew\tosts=0", t).reply.split("\t")[1]
        strangers: list[float] = []
        joins: list[float] = []
        released: list[float] = []
        cancelled: list[float] = []
        releases: list[float] = []
        cancels: list[float] = []
        for i in range(20):
            if i >= 3 and sum(joins + released + cancelled) > 3.0:
                break  # slow enough: three of each tell
            app = f"j{i}:w"  # a claim joins at the back, then asks
            secrets[app] = c.handle(f"REGISTER\t{app}\tuser=u{i % 16}\tosts={i % 16}", t).reply.split("\t")[1]
            c.handle(f"ACQUIRE\t{app}\t{secrets[app]}\tio\texpect=2", t)
            joins.append(cpu(ask(app)))
            strangers.append(cpu(ask(stranger)))  # its first ask since the queue changed
            t += 0.5  # a holder releases, the next is granted; then the first estimate
            holder = c.holding()[0]
            rel = f"RELEASE\t{holder.appid}\t{secrets[holder.appid]}\t{holder.token}"
            releases.append(cpu(lambda: c.handle(rel, t)))
            released.append(cpu(ask(last)))
            ask(last)()
            mid = c.waiting()[len(c.waiting()) // 2].appid  # a claim in the middle leaves
            cancels.append(cpu(lambda: c.handle(f"CANCEL\t{mid}\t{secrets[mid]}", t)))
            cancelled.append(cpu(ask(last)))
        steady = {"unchanged": unchanged, "not queued": probed, "after a join": statistics.median(joins),
                  "not queued, a new user's first ask": statistics.median(strangers)}
        departed = {"after a release": statistics.median(released), "after a cancel": statistics.median(cancelled)}
        label = f"{name} (k={k})" if name in ("k-concurrent", "fair-share") else name
        print(f"  {label} (HELLO in process {hello * 1e6:.1f} us; the RELEASE itself "
              f"{statistics.median(releases) * 1e6:,.0f} us, the CANCEL {statistics.median(cancels) * 1e6:,.0f} us):")
        for case, figures in (("steady state", steady), ("first after a departure", departed)):
            worst = max(figures.values())
            print(f"    {case}: " + ", ".join(f"{what} {v * 1e6:,.0f} us" for what, v in figures.items())
                  + f"; worst {worst / round_trip:.2f}x a HELLO round trip ({round_trip * 1e6:.0f} us), "
                  f"{worst / hello:,.0f}x a HELLO in process; goal < {ESTIMATE_GOAL * 1e3:g} ms: "
                  f"{'met' if worst < ESTIMATE_GOAL else 'NOT met'}")
    c, secrets = queued("exclusive", 1000)
    ask_last = f"ESTIMATE\t1000:w\t{secrets['1000:w']}"
    w, h = c.waiting(), c.holding()
    old = cpu(lambda: simulate(c.policy, w, h, c.state.usage, 1.0, c.duration))
    new = cpu_median(lambda: c.handle(ask_last, 1.0), 50)
    print(f"  old path (exclusive, 1,000 queued): {old * 1e3:,.0f} ms, {old / new:,.0f}x an estimate now")


def main() -> None:
    os.environ["IEZ_TOKEN"] = TOKEN  # AccessClient and the iocop-client processes sign with it
    os.environ.pop("IEZ_TOKEN_FILE", None)
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        ctl = spawn(tmp / "state.db", "--heartbeat", "1", token=TOKEN)
        plain = spawn(tmp / "plain.db", "--trusted-network", line_bind="")
        try:
            round_trip = transport(ctl, plain)
            grants(ctl)
        finally:
            ctl.stop()
            plain.stop()
        churn(tmp)
        estimate_cost(round_trip)


if __name__ == "__main__":
    main()
