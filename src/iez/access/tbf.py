"""Enforcing the controller's decisions on Lustre servers with NRS TBF rules by JobID.

An application that does not hold a token (it waits, or computes between phases) gets a TBF
rule on every OSS's ost_io service that caps its bulk RPCs at a low rate; a holder has no rule
and runs at the default rate. An application that ignores IO-Cop, or keeps writing after its
token was revoked, is slowed down by the servers themselves. Only registered applications are
touched: jobs that do not use IO-Cop keep the default rule.

The commands (Lustre 2.10+ with the jobid TBF type; lustre/ptlrpc/nrs_tbf.c):
    lctl set_param ost.OSS.ost_io.nrs_policies="tbf jobid"
    lctl set_param ost.OSS.ost_io.nrs_tbf_rule="start NAME jobid={JOBID} rate=RATE"
    lctl set_param ost.OSS.ost_io.nrs_tbf_rule="change NAME rate=RATE"
    lctl set_param ost.OSS.ost_io.nrs_tbf_rule="stop NAME"
Rule names are [A-Za-z0-9_] and shorter than MAX_TBF_NAME = 16 (check_rule_name()); rates are
1 .. 65534 RPC/s (LPROCFS_NRS_RATE_MAX is 65535 before 2.15, 10^6 after); a JobID has at most
31 bytes (LUSTRE_JOBID_SIZE = 32) and the jobid list is space-separated, so a JobID holds no
space or brace. Pure: rendering and parsing only; the CLI sets the parameters (lustre/params.py).
"""

from __future__ import annotations

import hashlib
import re
import shlex
from dataclasses import dataclass

PARAM = "ost.OSS.ost_io"
PREFIX = "iocop_"
MAX_TBF_NAME = 16  # includes the NUL
MAX_RATE = 65534  # below LPROCFS_NRS_RATE_MAX of 2.10-2.14
JOBID_MAX = 31  # LUSTRE_JOBID_SIZE - 1
DEFAULT_RATE = 10  # RPC/s for an application without a token: 10 MiB/s at 1 MiB RPCs


@dataclass(frozen=True)
class Rule:
    name: str
    jobid: str
    rate: int


@dataclass(frozen=True)
class Setting:
    """One `lctl set_param NAME=VALUE`."""

    name: str
    value: str


def rule_name(jobid: str) -> str:
    """A stable rule name per JobID: iocop_ + 9 hex digits of its SHA-1 (15 characters)."""
    return PREFIX + hashlib.sha1(jobid.encode()).hexdigest()[:MAX_TBF_NAME - 1 - len(PREFIX)]


def valid_jobid(jobid: str) -> bool:
    return 0 < len(jobid.encode()) <= JOBID_MAX and not re.search(r"[\s{}]", jobid)


def desired_rules(status: dict, rate: int = DEFAULT_RATE) -> tuple[dict[str, Rule], list[str]]:
    """The rules a controller status (STATUS reply) calls for, and the JobIDs that cannot be
    expressed as a TBF rule (skipped, with a reason)."""
    if not 1 <= rate <= MAX_RATE:
        raise ValueError(f"TBF rate {rate} is not in 1..{MAX_RATE} RPC/s")
    holding = {a["jobid"] for a in status["apps"] if a["holding"]}
    rules, skipped = {}, []
    for a in status["apps"]:
        jobid = a["jobid"]
        if jobid in holding:  # a JobID shared by several appIDs is free while any of them holds
            continue
        if not valid_jobid(jobid):
            skipped.append(f"{a['app']}: JobID {jobid!r} cannot be a TBF jobid (1-31 bytes, no spaces or braces)")
            continue
        r = Rule(rule_name(jobid), jobid, rate)
        rules[r.name] = r
    return rules, skipped


def _set(value: str, param: str) -> Setting:
    return Setting(f"{param}.nrs_tbf_rule", value)


def enable_settings(param: str = PARAM) -> list[Setting]:
    return [Setting(f"{param}.nrs_policies", "tbf jobid")]


def render(current: dict[str, Rule], want: dict[str, Rule], param: str = PARAM) -> list[Setting]:
    """The settings that turn the `current` iocop rules into `want` (others are left alone)."""
    cmds = []
    for name, r in sorted(want.items()):
        old = current.get(name)
        if old is None:
            cmds.append(_set(f"start {name} jobid={{{r.jobid}}} rate={r.rate}", param))
        elif old.rate != r.rate:
            cmds.append(_set(f"change {name} rate={r.rate}", param))
    for name in sorted(set(current) - set(want)):
        cmds.append(_set(f"stop {name}", param))
    return cmds


_DUMP = re.compile(r"^(?P<name>\w+)\s+(?:jobid=)?\{(?P<ids>[^}]*)\}.*?\s(?P<rate>\d+),\s+ref\s+-?\d+")


def parse_rules(text: str) -> dict[str, Rule]:
    """The iocop rules in `lctl get_param -n ost.OSS.ost_io.nrs_tbf_rule` output. Each CPT lists
    its rules as "NAME {IDS} RATE, ref N" (jobid type) or "NAME jobid={IDS} ... RATE, ref N"
    (generic type, 2.10+); the rules are the same on every CPT, so the first listing counts."""
    out: dict[str, Rule] = {}
    for line in text.splitlines():
        m = _DUMP.match(line.strip())
        if m and m["name"].startswith(PREFIX) and m["name"] not in out:
            out[m["name"]] = Rule(m["name"], m["ids"].strip(), int(m["rate"]))
    return out


def shell(s: Setting) -> str:
    """The lctl command line of a setting, as printed for an operator to run."""
    return shlex.join(["lctl", "set_param", f"{s.name}={s.value}"])
