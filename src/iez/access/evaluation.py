"""Seed 004's experiments, repeated (`iez access eval`; docs/references.md#s004-fig2 to #s004-fig9).

Protocol, on an emulated cluster with real processes: two IOR-like jobs (`iez.access.job`)
write files striped over their OSTs through the Python client while `iez access serve` runs:
- exclusive: the jobs take turns (their holds never overlap);
- ost-aware: disjoint OST sets share (the holds overlap), overlapping sets take turns;
- granularity: no control, coarse (one token per job) and fine (one per write call, the
  MPI_File_write_at case of docs/references.md#s004-fig8): grants, hand-offs between the jobs, token overhead per call;
- bursty phases under phase tokens: the second job waits once, then its I/O falls in the first
  job's compute (the phase shift of docs/references.md#s004-figs3-4, without a hand-tuned delay);
- lease: the holder is killed with SIGKILL; the waiter is granted within two heartbeats;
- protocol timings: an uncontended grant, a hand-off from one job's release to the other's grant.
The emulated cluster's disks are one local disk, so its bandwidth says nothing about OST
interference; bandwidth and end-to-end time come from the simulator (`iez sim`, SimGrid), on
seed 004's scenarios: `scenarios/seed004-iocop.toml` (s004-fig2, s004-fig8, s004-fig9) and
`scenarios/seed004_fig4.toml` (s004-figs3-4), reported beside the seed's figures.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

import iez
from iez.access.server import Spawned, spawn
from iez.tokens import new_token
from iez.errors import ConfigError

MIB = 1 << 20
SCENARIOS = Path(iez.__file__).resolve().parents[2] / "scenarios"

# Seed 004's figures: change of each instance against Instance0 alone (docs/references.md#s004-fig2,
# #s004-fig8, #s004-fig9), and of the coordinated bursty runs against the uncoordinated ones
# (#s004-figs3-4).
SEED = {
    ("concurrent", "write_bw"): ("-29.6%", "-30.3%"),
    ("fine", "write_bw"): ("-36.6%", "-48.52%"),
    ("coarse", "write_bw"): ("-1.14%", "+7.28%"),
    ("coarse", "end_to_end"): ("~0%", "+18.3%"),
    ("bursty", "end_to_end"): ("-19.47%", "-10.71%"),
    ("bursty_vs_alone", "end_to_end"): ("", "+7.9%"),
}


# -- measurements from timelines (pure) -------------------------------------------------------------
def intervals(timeline: list[dict]) -> list[tuple[float, float]]:
    """(grant, release) of each token a job held, as the job saw them."""
    out, start = [], None
    for e in timeline:
        if e["ev"] == "grant":
            start = e["t"]
        elif e["ev"] == "release" and start is not None:
            out.append((start, e["t"]))
            start = None
    return out


def overlap(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> float:
    """Seconds during which an interval of `a` and one of `b` are both open."""
    return sum(max(0.0, min(x1, y1) - max(x0, y0)) for x0, x1 in a for y0, y1 in b)


def handoffs(jobs: list[dict]) -> int:
    """How often the token passed from one job to the other (grants in time order)."""
    seq = sorted((e["t"], j["appid"]) for j in jobs for e in j["timeline"] if e["ev"] == "grant")
    return sum(1 for (_, a), (_, b) in zip(seq, seq[1:]) if a != b)


def waits(job: dict) -> list[float]:
    return [e["t"] - e["asked"] for e in job["timeline"] if e["ev"] == "grant"]


def read_events(path: Path) -> list[dict]:
    """A controller's event log (`iez access serve --events`), one JSON object a line."""
    return [json.loads(line) for line in path.read_text().splitlines()]


def contention(events: list[dict], apps: list[str]) -> list[dict]:
    """Per app, from the controller's events in its order: whether it asked while another of
    `apps` held a token, and whether each of its asks was granted at once (`waited` 0: decided
    in the ACQUIRE's own turn). Facts of the controller's order, not of the clients' clocks:
    sharing is "asked while another held, and granted at once"; taking turns is "asked while
    another held, and not granted at once"."""
    holders: set[str] = set()
    out = {a: {"asked_while_other_held": False, "granted_at_ask": True} for a in apps}
    for e in events:
        app = e.get("app")
        if app not in out:
            continue
        if e["ev"] == "acquire":
            out[app]["asked_while_other_held"] |= bool(holders - {app})
        elif e["ev"] == "grant":
            holders.add(app)
            out[app]["granted_at_ask"] &= e.get("waited", 0) == 0
        elif e["ev"] != "register":  # release, cancel, expire, revoke, ...: the claim ended
            holders.discard(app)
    return [out[a] for a in apps]


# -- running jobs ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Job:
    """An evaluation job running (`python -m iez.access.job`) and where its timeline will be."""

    proc: subprocess.Popen
    timeline: Path


class Bench:
    """An emulated cluster and a place for controllers and jobs."""

    def __init__(self, cd, work: Path, quick: bool):
        self.cd, self.work, self.quick = cd, work, quick
        self.n = 0
        self.token = new_token()  # this run's site token: its controllers and jobs sign with it

    def controller(self, *opts: str) -> tuple[Spawned, Path]:
        self.n += 1
        events = self.work / f"events-{self.n}.jsonl"
        return spawn(self.work / f"state-{self.n}.db", *opts, token=self.token, events=events,
                     log=self.work / "serve.log"), events

    def job(self, ctl: Spawned | None, name: str, osts: str, mode: str, barrier: bool = False, **kw) -> Job:
        """A job started; with `barrier` it waits, once set up, for `start` (jobs begin together)."""
        self.n += 1
        out = self.work / f"job-{self.n}-{name}.json"
        args = {"files": 1, "size": "4MiB" if self.quick else "16MiB", "transfer": "1MiB",
                "pace": "16MiB" if self.quick else "32MiB", "bursts": 1, "compute": 0.0, **kw}
        cmd = [sys.executable, "-m", "iez.access.job", "--server", ctl.zmq if ctl else "tcp://127.0.0.1:9",
               "--appid", f"{self.n}:{name}", "--dir", str(self.cd.fs / name), "--osts", osts,
               "--mode", mode if ctl else "off", "--timeline", str(out)] + (["--barrier"] if barrier else [])
        for k, v in args.items():
            if k == "declare":
                cmd += ["--declare-osts"] if v else []
            else:
                cmd += [f"--{k.replace('_', '-')}", str(v)]
        pipe = subprocess.PIPE if barrier else subprocess.DEVNULL
        p = subprocess.Popen(cmd, stdin=pipe, stdout=pipe, stderr=open(self.work / "jobs.log", "ab"), text=True,
                             env=dict(os.environ, IEZ_TOKEN=self.token, IEZ_TOKEN_FILE=""))
        return Job(p, out)

    def start(self, jobs: list[Job]) -> None:
        """Let jobs started with `barrier` go once every one is set up: their interpreters' start-up,
        however long, is behind them, and they ask for access at the same moment."""
        for j in jobs:
            assert j.proc.stdout is not None
            if j.proc.stdout.readline() != "ready\n":
                raise ConfigError(f"an evaluation job ended before it was ready; see {self.work / 'jobs.log'}")
        for j in jobs:
            assert j.proc.stdin is not None
            j.proc.stdin.write("go\n")
            j.proc.stdin.close()

    def results(self, jobs: list[Job]) -> list[dict]:
        out = []
        for j in jobs:
            if j.proc.wait(timeout=600):
                raise ConfigError(f"an evaluation job failed (exit {j.proc.returncode}); see {self.work / 'jobs.log'}")
            out.append(json.loads(j.timeline.read_text()))
        return out

    def osts_written(self, job: dict) -> list[int]:
        """The OSTs the job's files really sit on, read back from their layouts."""
        from iez.access.ostset import osts_of_paths

        name = job["appid"].split(":")[1]
        paths = sorted((self.cd.fs / name).iterdir())
        found = osts_of_paths([p for p in paths if p.name.startswith(job["appid"].replace(":", "_"))])
        if found is None:
            raise ConfigError(f"the layouts of {job['appid']}'s files in {self.cd.fs / name} cannot be read")
        return sorted(found)


def pair(bench: Bench, policy: str, osts: tuple[str, str], mode: str = "coarse", **kw) -> dict:
    ctl, events = bench.controller("--policy", policy, "--heartbeat", "0.5") if policy else (None, None)
    try:
        started = [bench.job(ctl, f"job{i}", o, mode, barrier=True, **kw) for i, o in enumerate(osts)]
        bench.start(started)
        jobs = bench.results(started)
    finally:
        if ctl:
            ctl.stop()
    seen = read_events(events) if events else []
    a, b = (intervals(j["timeline"]) for j in jobs)
    return {"policy": policy or "none", "mode": mode if policy else "off", "osts": list(osts),
            "osts_written": [bench.osts_written(j) for j in jobs],
            "hold_overlap_s": round(overlap(a, b), 4), "grants": [len(x) for x in (a, b)],
            "held_s": [round(sum(x1 - x0 for x0, x1 in x), 4) for x in (a, b)],
            "handoffs": handoffs(jobs), "token_wait_s": [round(sum(waits(j)), 4) for j in jobs],
            "waits_s": [[round(w, 4) for w in waits(j)] for j in jobs],
            "end_to_end_s": [round(j["end"] - j["start"], 4) for j in jobs],
            "calls": [len(j["writes"]) for j in jobs], "untokened": [j["untokened"] for j in jobs],
            "contention": contention(seen, [j["appid"] for j in jobs])}


def lease_expiry(bench: Bench) -> dict:
    hb = 0.5
    ctl, events = bench.controller("--heartbeat", str(hb))
    from iez.access.token_client import fetch_status

    try:
        slow = bench.job(ctl, "victim", "0-3", "coarse", size="64MiB", pace="1MiB")
        deadline = time.monotonic() + 60
        while not fetch_status(ctl.zmq, 5, bench.token)["holders"]:
            if time.monotonic() > deadline:
                raise ConfigError("the victim job never got its token")
            time.sleep(0.02)
        waiter = bench.job(ctl, "survivor", "0-3", "coarse")
        while not fetch_status(ctl.zmq, 5, bench.token)["waiting"]:
            if time.monotonic() > deadline:
                raise ConfigError("the survivor job never queued")
            time.sleep(0.02)
        time.sleep(3 * hb)
        t_kill = time.time()
        os.kill(slow.proc.pid, signal.SIGKILL)
        slow.proc.wait()
        survivor = bench.results([waiter])[0]
    finally:
        ctl.stop()
    ev = read_events(events)
    expire = next(e for e in ev if e["ev"] == "expire")
    grant = next(e for e in survivor["timeline"] if e["ev"] == "grant")
    return {"heartbeat_s": hb, "lease_s": 2 * hb, "revoked_after_kill_s": round(expire["t"] - t_kill, 4),
            "silent_s": expire["silent"], "survivor_granted_after_kill_s": round(grant["t"] - t_kill, 4)}


def timings(bench_jobs: list[dict]) -> dict:
    """Protocol costs as the clients measured them: the quickest grant (nobody in the way), and
    the hand-off from one job's release to the other job's grant."""
    first = [w for j in bench_jobs for w in waits(j)[:1]]
    seq = sorted([(e["t"], e["ev"], j["appid"]) for j in bench_jobs for e in j["timeline"]])
    hand = [b[0] - a[0] for a, b in zip(seq, seq[1:]) if a[1] == "release" and b[1] == "grant" and a[2] != b[2]]
    return {"uncontended_grant_ms": round(1000 * min(first), 3) if first else None,
            "handoff_ms_median": round(1000 * sorted(hand)[len(hand) // 2], 3) if hand else None,
            "handoffs_measured": len(hand)}


def protocol_experiments(work: Path, quick: bool, step: Callable[[str], None]) -> dict:
    from iez.cluster import make_cluster
    from iez.emulated.mds_client import running_cluster

    res: dict = {}
    with running_cluster(work / "emu", make_cluster(3, 5, 10 << 30)) as cd:
        bench = Bench(cd, work, quick)
        step("exclusive: two jobs take turns")
        res["exclusive"] = pair(bench, "exclusive", ("0-4", "2-6"))
        step("ost-aware: disjoint OSTs share")
        res["ost_aware_disjoint"] = pair(bench, "ost-aware", ("0-4", "5-9"), declare=True)
        step("ost-aware: overlapping OSTs take turns")
        res["ost_aware_overlapping"] = pair(bench, "ost-aware", ("0-4", "4-8"), declare=True)
        step("granularity: no control")
        res["none"] = pair(bench, "", ("0-7", "0-7"))
        step("granularity: coarse")
        res["coarse"] = pair(bench, "exclusive", ("0-7", "0-7"), "coarse")
        step("granularity: fine")
        res["fine"] = pair(bench, "exclusive", ("0-7", "0-7"), "fine")
        step("bursty phases under phase tokens")
        io = 4 / 16 if quick else 16 / 32  # seconds of I/O per burst at the pace
        res["bursty_phase"] = pair(bench, "exclusive", ("0-7", "0-7"), "phase", bursts=3, compute=round(1.5 * io, 3))
        step("lease expiry after kill -9")
        res["lease"] = lease_expiry(bench)
        jobs = [json.loads(p.read_text()) for p in sorted(work.glob("job-*-job*.json"))]
        res["timings"] = timings(jobs)
    return res


# -- the simulator ---------------------------------------------------------------------------------
def change(test: float, base: float) -> float:
    return test / base - 1


def simulator_experiments(out: Path, scenarios: Path, step: Callable[[str], None]) -> dict:
    from iez.sim.scenario import load_scenario, variants
    from iez.sim.study import run_all, summarise

    got: dict = {}
    for name in ("seed004-iocop.toml", "seed004_fig4.toml"):
        path = scenarios / name
        if not path.exists():
            raise ConfigError(f"scenario {path} not found (run from a checkout of iez, or pass --scenarios)")
        doc, base = load_scenario(path)
        vs = variants(doc, base)
        step(f"simulating {name}")
        runs = run_all(vs, out / path.stem)
        summarise(vs[0].scenario, runs, out / path.stem)
        got[path.stem] = {r.variant.label: {j.name: {m: j.metric(m) for m in ("write_bw", "end_to_end", "token_wait")}
                                            for j in r.results.jobs} for r in runs}
    fig = got["seed004-iocop"]
    alone = fig["alone"]["Instance0"]
    rows = []
    for run, metric in (("concurrent", "write_bw"), ("fine", "write_bw"), ("coarse", "write_bw"),
                        ("coarse", "end_to_end")):
        ours = [change(fig[run][j][metric], alone[metric]) for j in ("Instance1", "Instance2")]
        rows.append({"what": f"{metric} {run} vs alone", "seed": SEED[(run, metric)], "simulated": ours})
    b = got["seed004_fig4"]
    for run in ("iocop", "delayed"):
        ours = [change(b[run][j]["end_to_end"], b["uncoordinated"][j]["end_to_end"]) for j in ("Instance1", "Instance2")]
        rows.append({"what": f"end_to_end bursty, {run} vs uncoordinated", "seed": SEED[("bursty", "end_to_end")],
                     "simulated": ours})
    rows.append({"what": "end_to_end bursty Instance2, iocop vs alone", "seed": SEED[("bursty_vs_alone", "end_to_end")],
                 "simulated": [None, change(b["iocop"]["Instance2"]["end_to_end"], b["alone"]["Instance0"]["end_to_end"])]})
    return {"runs": got, "compare": rows}


# -- the report ------------------------------------------------------------------------------------
def pct(x: float | None) -> str:
    return "" if x is None else f"{x:+.1%}"


def report(res: dict) -> str:
    p = res.get("protocol", {})
    lines = ["# IO-Cop evaluation (seed 004)", ""]
    if p:
        lines += ["## Protocol on the emulated cluster (real processes)", "",
                  "| run | policy | mode | OSTs | hold overlap s | grants | hand-offs | token wait s | end-to-end s |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for key in ("exclusive", "ost_aware_disjoint", "ost_aware_overlapping", "none", "coarse", "fine", "bursty_phase"):
            r = p[key]
            lines.append(f"| {key} | {r['policy']} | {r['mode']} | {' / '.join(r['osts'])} | {r['hold_overlap_s']} | "
                         f"{r['grants'][0]} / {r['grants'][1]} | {r['handoffs']} | "
                         f"{r['token_wait_s'][0]} / {r['token_wait_s'][1]} | "
                         f"{r['end_to_end_s'][0]} / {r['end_to_end_s'][1]} |")
        bw = p["bursty_phase"]["waits_s"]
        le, t = p["lease"], p["timings"]
        lines += ["", f"Bursty phases, waits per burst: job 1 {bw[0]}, job 2 {bw[1]} (s).",
                  f"Lease: heartbeat {le['heartbeat_s']} s; the holder killed with SIGKILL lost its token "
                  f"{le['revoked_after_kill_s']} s later (lease {le['lease_s']} s); the waiter was granted "
                  f"{le['survivor_granted_after_kill_s']} s after the kill.",
                  f"Timings: uncontended grant {t['uncontended_grant_ms']} ms; release-to-grant hand-off between "
                  f"jobs {t['handoff_ms_median']} ms (median of {t['handoffs_measured']}).", ""]
    s = res.get("simulator")
    if s:
        lines += ["## Bandwidth and end-to-end time (simulator)", "",
                  "| comparison | seed 004 Instance1 / Instance2 | simulated Instance1 / Instance2 |", "|---|---|---|"]
        for r in s["compare"]:
            lines.append(f"| {r['what']} | {' / '.join(x for x in r['seed'] if x) } | "
                         f"{' / '.join(pct(x) for x in r['simulated'] if x is not None)} |")
        lines.append("")
    return "\n".join(lines)


def run_evaluation(out: Path, quick: bool = False, sim: bool = True, scenarios: Path = SCENARIOS) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    console = Console()
    res: dict = {}
    total = 8 + (2 if sim else 0)
    with Progress(TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(), console=console,
                  transient=True) as prog:
        task = prog.add_task("IO-Cop evaluation", total=total)

        def step(what: str) -> None:
            prog.update(task, description=what)
            prog.advance(task)

        work = out / "protocol"  # this run's emulated cluster, controller states, logs, timelines
        if work.exists():
            shutil.rmtree(work)
        work.mkdir()
        res["protocol"] = protocol_experiments(work, quick, step)
        if sim:
            res["simulator"] = simulator_experiments(out / "sim", scenarios, step)
    (out / "eval.json").write_text(json.dumps(res, indent=1))
    md = report(res)
    (out / "eval.md").write_text(md)
    table = Table(title="IO-Cop: seed 004 beside ours")
    for col in ("comparison", "seed 004", "ours"):
        table.add_column(col)
    for r in res.get("simulator", {}).get("compare", []):
        table.add_row(r["what"], " / ".join(x for x in r["seed"] if x),
                      " / ".join(pct(x) for x in r["simulated"] if x is not None))
    console.print(table)
    console.print(f"report: {out / 'eval.md'} (data: eval.json)")
    return res
