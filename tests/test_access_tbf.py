"""`iez access tbf --apply` against a fake lctl on PATH: the commands it issues, and its errors when
lctl is missing, the node is no OSS, TBF is not started or lctl refuses a rule."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from iez.access import tbf
from iez.access.token_client import AccessClient

PARAM = "ost.OSS.ost_io"

# lctl as far as `iez access tbf` uses it. Files beside it say what the node is: `policies` (the
# nrs_policies text; absent: not an OSS), `rules` (the nrs_tbf_rule text; absent: TBF not
# started), `refuse` (set_param fails). Every call is appended to `calls` as a JSON list.
FAKE_LCTL = textwrap.dedent(f"""\
    #!{sys.executable}
    import json, os, sys
    here = os.path.dirname(os.path.abspath(__file__))
    args = sys.argv[1:]
    with open(os.path.join(here, "calls"), "a") as f:
        f.write(json.dumps(args) + "\\n")

    def text(name):
        p = os.path.join(here, name)
        return open(p).read() if os.path.exists(p) else None

    if args[0] == "get_param":
        param = args[1]
        value = text("policies" if param.endswith(".nrs_policies") else "rules")
        if value is None:
            path = param.replace(".", "/")
            sys.exit(print(f"error: get_param: param_path '{{path}}': No such file or directory", file=sys.stderr)
                     or 2)
        print(f"{{param}}=\\n{{value}}", end="")
    elif args[0] == "set_param":
        if text("refuse") is not None:
            sys.exit(print("error: set_param: setting ...: Invalid argument", file=sys.stderr) or 22)
        if args[1] == "{PARAM}.nrs_policies=tbf jobid" and text("rules") is None:
            open(os.path.join(here, "rules"), "w").write("regular_requests:\\nCPT 0:\\ndefault {{*}} 10000, ref 0\\n")
    """)
POLICIES = "\nregular_requests:\n  - name: fifo\n    state: started\n  - name: tbf\n    state: stopped\n"


@pytest.fixture
def lctl(tmp_path):
    """A directory holding the fake lctl, and the calls it got."""
    d = tmp_path / "bin"
    d.mkdir()
    exe = d / "lctl"
    exe.write_text(FAKE_LCTL)
    exe.chmod(0o755)
    return d


def calls(d) -> list[list[str]]:
    p = d / "calls"
    return [json.loads(x) for x in p.read_text().splitlines()] if p.exists() else []


@pytest.fixture
def apps(controllers):
    """A controller where 4242 holds and 4343 waits."""
    c = controllers()
    a, b = AccessClient(c.zmq, "4242:hold"), AccessClient(c.zmq, "4343:wait")
    a.io_begin("io")
    b._registered()
    yield c
    a.close()
    b.close()


def tbf_apply(iez_cmd, server, path, *extra):
    return subprocess.run(iez_cmd + ["access", "tbf", "--server", server, "--rate", "7", "--apply", *extra],
                          capture_output=True, text=True, timeout=60, env=dict(os.environ, PATH=str(path)))


def test_apply_reads_and_sets_the_rules_through_lctl(apps, lctl, iez_cmd):
    held, waits = tbf.rule_name("4242"), tbf.rule_name("4343")
    (lctl / "policies").write_text(POLICIES)
    (lctl / "rules").write_text(f"regular_requests:\nCPT 0:\n{held} {{4242}} 7, ref 0\ndefault {{*}} 10000, ref 0\n")
    r = tbf_apply(iez_cmd, apps.zmq, lctl)
    assert r.returncode == 0, r.stderr
    start = f"{PARAM}.nrs_tbf_rule=start {waits} jobid={{4343}} rate=7"
    stop = f"{PARAM}.nrs_tbf_rule=stop {held}"
    assert calls(lctl) == [["get_param", f"{PARAM}.nrs_policies"], ["get_param", f"{PARAM}.nrs_tbf_rule"],
                           ["set_param", start], ["set_param", stop]]
    assert r.stdout.splitlines() == [f"lctl set_param '{start}'", f"lctl set_param '{stop}'"]


def test_enable_starts_tbf_by_jobid_before_reading_the_rules(apps, lctl, iez_cmd):
    (lctl / "policies").write_text(POLICIES)
    r = tbf_apply(iez_cmd, apps.zmq, lctl, "--enable")
    assert r.returncode == 0, r.stderr
    assert calls(lctl)[:3] == [["get_param", f"{PARAM}.nrs_policies"], ["set_param", f"{PARAM}.nrs_policies=tbf jobid"],
                               ["get_param", f"{PARAM}.nrs_tbf_rule"]]
    assert calls(lctl)[3:] == [["set_param", f"{PARAM}.nrs_tbf_rule=start {tbf.rule_name('4343')} jobid={{4343}} rate=7"]]


@pytest.mark.parametrize("node, message", [
    ("no lctl", "lctl is not installed here"),
    ("not an OSS", "--apply needs a Lustre OSS: parameter ost.OSS.ost_io.nrs_policies not found"),
    ("TBF not started", "cannot read the TBF rules of ost.OSS.ost_io: parameter ost.OSS.ost_io.nrs_tbf_rule not "
                        "found"),
    ("set_param refused", f"lctl set_param '{PARAM}.nrs_tbf_rule=start"),
])
def test_apply_errors_are_one_line(apps, lctl, iez_cmd, tmp_path, node, message):
    if node != "not an OSS":
        (lctl / "policies").write_text(POLICIES)
    if node == "set_param refused":
        (lctl / "rules").write_text("regular_requests:\nCPT 0:\n")
        (lctl / "refuse").write_text("")
    path = tmp_path / "empty" if node == "no lctl" else lctl
    path.mkdir(exist_ok=True)
    r = tbf_apply(iez_cmd, apps.zmq, path)
    code = 1 if node == "set_param refused" else 2  # lctl failing is a failure, not bad input
    assert r.returncode == code and r.stderr.startswith("iez: error: ") and len(r.stderr.splitlines()) == 1, r.stderr
    assert message in r.stderr, r.stderr
    if node == "TBF not started":
        assert "--enable starts TBF by JobID" in r.stderr
    if node == "set_param refused":
        assert "Invalid argument" in r.stderr
