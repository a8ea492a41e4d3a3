"""The statistics message a collector publishes and the controller reads (version 2; 1 still read).

One message per collection round, sent over ZeroMQ as three frames:

    [b"iez.stats", JSON body (UTF-8), hex HMAC-SHA256 of b"iez.stats\\0" + body]

The MAC is keyed with the site token, so the token never travels and a message cannot be
forged or altered by anyone who can reach the controller's port. The body (docs/controller.md):

    {"schema": "iez.stats", "version": 2, "role": "oss", "id": "oss0", "hostname": "n12",
     "seq": 7, "time": 1767225600.25, "interval": 60.0,
     "osts": {"iez-OST0000": {"kbytestotal": 10485760, "kbytesavail": 9437184,
                              "kbytesfree": 9437184, "read_bps": 0.0, "write_bps": 1048576.0,
                              "read_bytes": 0, "write_bytes": 62914560}},
     "ost_states": {"iez-OST0003": "inactive"},
     "load": {"cpu": 0.12, "mem": 0.31},
     "errors": ["obdfilter.iez-OST0004.kbytesavail: not an integer"]}

Targets are keyed by name (`<fsname>-OST<hex index>`), so an OSS serving two file systems is
unambiguous. `read_bps`/`write_bps` are null until a collector has two samples; `read_bytes`/
`write_bytes` (version 2) are the OST's own cumulative sums (obdfilter stats), absent when its
stats are not readable, so that /metrics' byte counters are Lustre's; `load` is null
when /proc could not be read; `ost_states` comes from an MDS. Pure: encoding, signing,
decoding and validation, no I/O.
"""

from __future__ import annotations

import hmac
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

from iez.alloc.gate import HostLoad
from iez.cluster import HOST_NAME, HOST_NAME_RULE, OST_STATES
from iez.errors import IezError, shown

TOPIC = b"iez.stats"
SCHEMA = "iez.stats"
VERSION = 2
READS = (1, 2)  # version 1: before the cumulative byte sums
ROLES = ("oss", "mds")
MAX_BYTES = 4 << 20  # a message larger than this is refused (an OSS has at most a few hundred OSTs)
# Seconds between rounds. Bounded because the controller trusts a report for a few of its
# intervals: a huge one would keep a dead OSS fresh (the paper uses 60 s: docs/references.md#s000-collect).
MIN_INTERVAL, MAX_INTERVAL = 0.1, 3600.0
MAX_ERRORS = 100  # errors carried per message; the rest are counted
MAX_ERROR_LEN = 300
_OST_NAME = re.compile(r"[A-Za-z0-9_-]{1,8}-OST[0-9a-fA-F]{4}")  # as ost_name() prints it
_KB_MAX = 1 << 62  # KiB; far beyond any real target
_BYTES_MAX = (1 << 64) - 1  # Lustre's stats sums are unsigned 64-bit


class MessageError(IezError):
    """A statistics message that is malformed, unsigned, or signed with another token."""


@dataclass(frozen=True)
class OstReading:
    """One OST as an OSS reports it: space in KiB, I/O rates in bytes/s (None: not known yet)."""

    kbytestotal: int
    kbytesavail: int
    kbytesfree: int | None = None
    read_bps: float | None = None
    write_bps: float | None = None
    read_bytes: int | None = None  # the OST's cumulative sums (None: not known)
    write_bytes: int | None = None


@dataclass(frozen=True)
class StatsMessage:
    role: str  # "oss" or "mds"
    id: str  # the host's name in the cluster model (--oss-id / --mds-id)
    seq: int  # rounds since the collector started
    time: float  # when it was read, collector's clock (epoch seconds)
    interval: float  # seconds between rounds
    hostname: str = ""
    osts: dict[str, OstReading] = field(default_factory=dict)  # by target name
    ost_states: dict[str, str] = field(default_factory=dict)  # by target name (MDS: OSP view)
    load: HostLoad | None = None
    errors: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA, "version": VERSION, "role": self.role, "id": self.id,
            "hostname": self.hostname, "seq": self.seq, "time": self.time, "interval": self.interval,
            "osts": {name: {k: v for k, v in vars(r).items() if v is not None or k.endswith("_bps")}
                     for name, r in sorted(self.osts.items())},
            "ost_states": dict(sorted(self.ost_states.items())),
            "load": None if self.load is None else {"cpu": self.load.cpu, "mem": self.load.mem},
            "errors": list(self.errors),
        }


def _mac(token: bytes, body: bytes) -> bytes:
    return hmac.digest(token, TOPIC + b"\0" + body, "sha256").hex().encode()  # one C call (OpenSSL)


def encode(msg: StatsMessage, token: str) -> list[bytes]:
    """The three frames to send."""
    body = json.dumps(msg.to_json(), separators=(",", ":"), allow_nan=False).encode()
    return [TOPIC, body, _mac(token.encode(), body)]


def decode(frames: list[bytes], token: str) -> StatsMessage:
    """Verify and read one message; MessageError (one line) says what is wrong with it."""
    if len(frames) != 3 or frames[0] != TOPIC:
        raise MessageError(f"not an iez statistics message ({len(frames)} frames)")
    body, mac = frames[1], frames[2]
    if len(body) > MAX_BYTES:
        raise MessageError(f"message of {len(body)} bytes is larger than {MAX_BYTES}")
    if not hmac.compare_digest(mac, _mac(token.encode(), body)):
        raise MessageError("bad signature (not signed with this site's token)")
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError) as e:
        raise MessageError(f"body is not JSON: {e}") from None
    return from_json(doc)


def from_json(doc: Any) -> StatsMessage:
    if not isinstance(doc, dict):
        raise MessageError("body is not a JSON object")
    if doc.get("schema") != SCHEMA:
        raise MessageError(f"schema {doc.get('schema')!r} is not {SCHEMA!r}")
    if doc.get("version") not in READS:
        raise MessageError(f"version {doc.get('version')!r} is not supported (this iez reads "
                           f"{', '.join(map(str, READS))})")
    role = doc.get("role")
    if role not in ROLES:
        raise MessageError(f"role {role!r} is not one of {', '.join(ROLES)}")
    ident = check_host_id(doc.get("id"))
    hostname = doc.get("hostname", "")
    if not isinstance(hostname, str) or len(hostname) > 255:
        raise MessageError("bad hostname")
    osts = doc.get("osts", {})
    states = doc.get("ost_states", {})
    errors = doc.get("errors", [])
    if not isinstance(osts, dict) or not isinstance(states, dict) or not isinstance(errors, list):
        raise MessageError("osts and ost_states must be objects, errors a list")
    if not all(isinstance(e, str) for e in errors):
        raise MessageError("errors must be strings")
    return StatsMessage(
        role=role, id=ident, hostname=hostname,
        seq=_int(doc.get("seq"), "seq", 0, 1 << 62),
        time=_number(doc.get("time"), "time"),
        interval=check_interval(doc.get("interval")),
        osts={_target(name): _ost(name, r) for name, r in osts.items()},
        ost_states={_target(name): _state(name, s) for name, s in states.items()},
        load=_load(doc.get("load")),
        errors=tuple(e[:MAX_ERROR_LEN] for e in errors[:MAX_ERRORS]),
    )


def check_host_id(ident: Any) -> str:
    """A host name as the cluster description gives it (iez.cluster.HOST_NAME)."""
    if not isinstance(ident, str) or not HOST_NAME.fullmatch(ident):
        raise MessageError(f"bad host id {shown(ident)}: {HOST_NAME_RULE}")
    return ident


def check_interval(v: Any) -> float:
    """Seconds between a collector's rounds, within MIN_INTERVAL..MAX_INTERVAL."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not MIN_INTERVAL <= v <= MAX_INTERVAL:
        raise MessageError(f"interval: expected {MIN_INTERVAL:g}..{MAX_INTERVAL:g} seconds, got {v!r}")
    return float(v)


# The checks below run for every field of every OST of every message (144 OSSs a second in
# the centre benchmark), so they test the exact type, which is all JSON produces (bool is not
# int's type), and make their error text only when they fail.
def _int(v: Any, what: str, lo: int, hi: int, field: str = "") -> int:
    if type(v) is not int or not lo <= v <= hi:
        raise MessageError(f"{_what(what, field)}: expected an integer {lo}..{hi}, got {v!r}")
    return v


_NUMBER = (int, float)


def _number(v: Any, what: str, field: str = "") -> float:
    if type(v) not in _NUMBER or not 0 <= v < math.inf:  # NaN compares false
        raise MessageError(f"{_what(what, field)}: expected a finite number >= 0, got {v!r}")
    return float(v)


def _what(what: str, field: str) -> str:
    return f"{what} {field}" if field else what


def _target(name: Any) -> str:
    if not isinstance(name, str) or not _OST_NAME.fullmatch(name):
        raise MessageError(f"bad OST name {name!r} (expected FSNAME-OSTxxxx)")
    return name


_OST_FIELDS = frozenset({"kbytestotal", "kbytesavail", "kbytesfree", "read_bps", "write_bps", "read_bytes",
                         "write_bytes"})


def _ost(name: str, r: Any) -> OstReading:
    if type(r) is not dict:
        raise MessageError(f"{name}: expected an object")
    if not _OST_FIELDS.issuperset(r):
        raise MessageError(f"{name}: unknown fields {sorted(set(r) - _OST_FIELDS)}")
    get = r.get
    total, avail, free = get("kbytestotal"), get("kbytesavail"), get("kbytesfree")
    read_bps, write_bps = get("read_bps"), get("write_bps")
    read_bytes, write_bytes = get("read_bytes"), get("write_bytes")
    # The same checks as _checked_ost's, in one expression: it takes most of a message's CPU.
    if (type(total) is int and type(avail) is int and 1 <= total <= _KB_MAX and 0 <= avail <= total
            and (free is None or type(free) is int and 0 <= free <= total)
            and (read_bps is None or type(read_bps) in _NUMBER and 0 <= read_bps < math.inf)
            and (write_bps is None or type(write_bps) in _NUMBER and 0 <= write_bps < math.inf)
            and (read_bytes is None or type(read_bytes) is int and 0 <= read_bytes <= _BYTES_MAX)
            and (write_bytes is None or type(write_bytes) is int and 0 <= write_bytes <= _BYTES_MAX)):
        return OstReading(total, avail, free, None if read_bps is None else float(read_bps),
                          None if write_bps is None else float(write_bps), read_bytes, write_bytes)
    return _checked_ost(name, get)


def _checked_ost(name: str, get: Any) -> OstReading:
    """An OST's fields checked one by one, so that the error says which one is wrong."""
    total = _int(get("kbytestotal"), name, 1, _KB_MAX, "kbytestotal")
    avail = _int(get("kbytesavail"), name, 0, total, "kbytesavail")
    free, read_bps, write_bps = get("kbytesfree"), get("read_bps"), get("write_bps")
    read_bytes, write_bytes = get("read_bytes"), get("write_bytes")
    return OstReading(total, avail, None if free is None else _int(free, name, 0, total, "kbytesfree"),
                      None if read_bps is None else _number(read_bps, name, "read_bps"),
                      None if write_bps is None else _number(write_bps, name, "write_bps"),
                      None if read_bytes is None else _int(read_bytes, name, 0, _BYTES_MAX, "read_bytes"),
                      None if write_bytes is None else _int(write_bytes, name, 0, _BYTES_MAX, "write_bytes"))


def _state(name: str, s: Any) -> str:
    if s not in OST_STATES:
        raise MessageError(f"{name}: state {s!r} is not one of {', '.join(OST_STATES)}")
    return s


def _load(v: Any) -> HostLoad | None:
    if v is None:
        return None
    if not isinstance(v, dict) or set(v) != {"cpu", "mem"}:
        raise MessageError("load must be null or {\"cpu\": F, \"mem\": F}")
    return HostLoad(cpu=_number(v["cpu"], "load cpu"), mem=_number(v["mem"], "load mem"))
