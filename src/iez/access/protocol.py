"""The IO-Cop wire protocol, version 1 (docs/iocop.md): one request, one reply, each a line of
UTF-8 text whose fields are separated by TABs. Over ZeroMQ a line is one frame without the
newline; over the raw-TCP line socket it ends with "\\n".

    request := VERB (TAB positional)* (TAB key=value)*
    reply   := ("OK" | "GRANT" | "QUEUED") (TAB field)* | "ERR" TAB ERRNO TAB message

A request travels signed (iez.access.auth: an envelope in front of it). STATUS, the one reply
whose size grows with the number of applications, is a header `OK status lines=N` followed by N
rows (more ZeroMQ frames, or more lines), each `KIND TAB JSON-object`.

Pure: parsing and formatting only, no sockets.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from iez.errors import IezError

VERSION = "iocop/1"
MAX_LINE = 4096  # bytes in one request or reply line, newline excluded
MAX_ROW = 65536  # bytes in one STATUS row (a holder's OST set may be long)
MAX_ROWS = 1_000_000  # rows a client accepts in one STATUS reply
_NUM, _OPT_STR = (int, float), (str, type(None))
# The fields of each kind of STATUS row that `iez access status` and `tbf` read, with their types.
STATUS_KINDS: dict[str, dict[str, type | tuple[type, ...]]] = {
    "settings": {"version": str, "policy": str, "heartbeat_ms": int, "lease_ms": int},
    "holder": {"app": str, "phase": str, "osts": _OPT_STR, "token": int, "held_s": _NUM},
    "waiting": {"app": str, "phase": str, "osts": _OPT_STR, "position": int, "waited_s": _NUM,
                "eta_s": (int, float, type(None))},
    "app": {"app": str, "jobid": str, "holding": bool},
}

# Positional fields per verb; any further fields are key=value options.
VERBS = {
    "HELLO": (),
    "REGISTER": ("appid",),
    "ACQUIRE": ("appid", "secret", "phase"),
    "HEARTBEAT": ("appid", "secret"),
    "RELEASE": ("appid", "secret", "token"),
    "CANCEL": ("appid", "secret"),
    "ESTIMATE": ("appid", "secret"),
    "UNREGISTER": ("appid", "secret"),
    "STATUS": (),
}
OPTIONS = {
    "REGISTER": {"user", "project", "jobid", "osts"},
    "ACQUIRE": {"osts", "expect", "wait_ms"},
    "HEARTBEAT": {"token"},
    "ESTIMATE": {"phase", "osts", "expect"},
}

# Errno names a reply may carry (the C client maps them to -errno).
ERRNOS = {
    "EPROTO": "the request is not a valid iocop/1 line",
    "EINVAL": "a field has a bad value",
    "ENOENT": "no application registered under that appID",
    "EACCES": "the secret does not match the appID",
    "EEXIST": "that appID is registered by a live application",
    "EPERM": "the application does not hold the token it names",
    "ESTALE": "the token was revoked (lease expired or max hold reached)",
    "EBUSY": "the application already waits or holds under another phase",
    "EAGAIN": "the controller is at one of its limits; try again later",
}

_NAME = re.compile(r"^[A-Za-z0-9._:@+/-]{1,128}$")
_PHASE = re.compile(r"^[A-Za-z0-9._:@+/-]{1,64}$")
_SECRET = re.compile(r"^[0-9a-f]{32}$")


class AccessError(IezError):
    """An IO-Cop request refused, or a reply that cannot be read. `errno` is an ERRNOS name."""

    def __init__(self, errno: str, message: str):
        super().__init__(message)
        self.errno = errno


@dataclass(frozen=True)
class Request:
    verb: str
    args: dict[str, str]
    opts: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Reply:
    status: str  # OK | GRANT | QUEUED | ERR
    fields: tuple[str, ...] = ()
    opts: dict[str, str] = field(default_factory=dict)

    def opt(self, key: str, default: str = "") -> str:
        return self.opts.get(key, default)


def _check_line(line: str) -> list[str]:
    if len(line.encode()) > MAX_LINE:
        raise AccessError("EPROTO", f"line longer than {MAX_LINE} bytes")
    if "\n" in line or "\r" in line or "\0" in line:
        raise AccessError("EPROTO", "line holds a newline, carriage return or NUL")
    return line.split("\t")


def parse_request(line: str) -> Request:
    parts = _check_line(line)
    verb = parts[0]
    if verb not in VERBS:
        raise AccessError("EPROTO", f"unknown verb {verb[:32]!r} (one of {', '.join(VERBS)})")
    names = VERBS[verb]
    if len(parts) - 1 < len(names):
        raise AccessError("EPROTO", f"{verb} takes {len(names)} fields: {' '.join(names) or '(none)'}")
    args = dict(zip(names, parts[1:1 + len(names)]))
    opts: dict[str, str] = {}
    for kv in parts[1 + len(names):]:
        key, eq, value = kv.partition("=")
        if not eq or key not in OPTIONS.get(verb, ()):
            raise AccessError("EPROTO", f"{verb}: unexpected field {kv[:40]!r}")
        if key in opts:
            raise AccessError("EPROTO", f"{verb}: {key}= given twice")
        opts[key] = value
    if "appid" in args:
        check_appid(args["appid"])
    if "phase" in args:
        check_phase(args["phase"])
    if "secret" in args and not _SECRET.match(args["secret"]):
        raise AccessError("EACCES", "malformed secret (32 hex digits expected)")
    return Request(verb, args, opts)


def format_request(verb: str, *positional: str, **opts: object) -> str:
    fields = [verb, *positional] + [f"{k}={v}" for k, v in opts.items() if v is not None]
    return "\t".join(fields)


def format_reply(status: str, *fields: object, **opts: object) -> str:
    out = [status, *(str(f) for f in fields)] + [f"{k}={v}" for k, v in opts.items() if v is not None]
    return "\t".join(out)


def error_reply(errno: str, message: str) -> str:
    if errno not in ERRNOS:
        raise ValueError(f"{errno} is not an iocop/1 errno")
    return format_reply("ERR", errno, " ".join(message.split()))


def parse_reply(line: str) -> Reply:
    """A reply as a client reads it; ERR replies raise AccessError."""
    parts = _check_line(line)
    status = parts[0]
    if status == "ERR":
        if len(parts) < 3:
            raise AccessError("EPROTO", f"malformed error reply {line[:80]!r}")
        raise AccessError(parts[1], parts[2])
    if status not in ("OK", "GRANT", "QUEUED"):
        raise AccessError("EPROTO", f"unknown reply {line[:80]!r}")
    fields, opts = [], {}
    for p in parts[1:]:
        key, eq, value = p.partition("=")
        if eq and re.match(r"^[a-z_]+$", key):
            opts[key] = value
        else:
            fields.append(p)
    return Reply(status, tuple(fields), opts)


def format_status(status: dict) -> tuple[str, list[str]]:
    """STATUS as its header line and its rows: the settings, then one row per holder, waiter
    and registered application, so no line grows with their number."""
    settings = {k: v for k, v in status.items() if k not in ("holders", "waiting", "apps")}
    rows = [("settings", settings)] + [("holder", h) for h in status["holders"]] + \
        [("waiting", w) for w in status["waiting"]] + [("app", a) for a in status["apps"]]
    lines = [f"{kind}\t{json.dumps(doc, separators=(',', ':'))}" for kind, doc in rows]
    return format_reply("OK", "status", lines=len(lines)), lines


def status_rows(header: str) -> int:
    """The number of rows a STATUS reply's header announces (ERR replies raise AccessError)."""
    r = parse_reply(header)
    n = r.opt("lines")
    if r.fields != ("status",) or not n.isdigit() or int(n) > MAX_ROWS:
        raise AccessError("EPROTO", f"malformed STATUS header {header[:80]!r}")
    return int(n)


def parse_status(rows: list[bytes]) -> dict:
    """The status dict (as AccessQueue.status returns it) from a STATUS reply's rows."""
    out: dict = {"holders": [], "waiting": [], "apps": []}
    lists = {"holder": out["holders"], "waiting": out["waiting"], "app": out["apps"]}
    seen_settings = False
    for raw in rows:
        if len(raw) > MAX_ROW:
            raise AccessError("EPROTO", f"STATUS row longer than {MAX_ROW} bytes")
        raw_kind, _, body = raw.partition(b"\t")
        doc: object
        try:
            doc = json.loads(body)
        except (UnicodeDecodeError, ValueError, RecursionError):
            doc = None
        kind = raw_kind.decode("latin-1")
        # the settings row comes first and once; every row has the fields readers use
        if kind not in STATUS_KINDS or not isinstance(doc, dict) or (kind == "settings") == seen_settings or \
                any(k not in doc or not isinstance(doc[k], t) for k, t in STATUS_KINDS[kind].items()):
            raise AccessError("EPROTO", f"malformed STATUS row {raw[:80]!r}")
        if kind == "settings":
            out.update({k: v for k, v in doc.items() if k not in out})
            seen_settings = True
        else:
            lists[kind].append(doc)
    if not seen_settings:
        raise AccessError("EPROTO", "STATUS reply without its settings row")
    return out


def check_appid(appid: str) -> str:
    if not _NAME.match(appid):
        raise AccessError("EINVAL", f"bad appID {appid[:40]!r}: 1-128 of A-Z a-z 0-9 . _ : @ + / -")
    return appid


def check_phase(phase: str) -> str:
    if not _PHASE.match(phase):
        raise AccessError("EINVAL", f"bad phase {phase[:40]!r}: 1-64 of A-Z a-z 0-9 . _ : @ + / -")
    return phase


def parse_osts(text: str) -> frozenset[int]:
    """An OST set as "0,3,8-11"; "" is the empty set."""
    out: set[int] = set()
    for part in filter(None, text.split(",")):
        lo, dash, hi = part.partition("-")
        try:
            a = int(lo)
            b = int(hi) if dash else a
        except ValueError:
            raise AccessError("EINVAL", f"bad OST set {text[:60]!r} (example: 0,3,8-11)") from None
        if a < 0 or b < a or b > 0xFFFF:
            raise AccessError("EINVAL", f"bad OST range {part!r} in {text[:60]!r}")
        out.update(range(a, b + 1))
    return frozenset(out)


def format_osts(osts: frozenset[int] | set[int] | list[int]) -> str:
    """The shortest form parse_osts reads back: runs of three or more become ranges."""
    xs = sorted(set(osts))
    parts, i = [], 0
    while i < len(xs):
        j = i
        while j + 1 < len(xs) and xs[j + 1] == xs[j] + 1:
            j += 1
        parts.append(f"{xs[i]}-{xs[j]}" if j - i >= 2 else ",".join(str(x) for x in xs[i:j + 1]))
        i = j + 1
    return ",".join(parts)


def parse_seconds(text: str, what: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise AccessError("EINVAL", f"{what}={text[:20]!r} is not a number") from None
    if not (v >= 0) or v == float("inf"):
        raise AccessError("EINVAL", f"{what}={text[:20]!r} must be a finite number >= 0")
    return v


def appid_name(appid: str) -> str:
    """The application's name in an appID `JOBID:NAME` (the whole appID if it has no colon)."""
    return appid.rpartition(":")[2] or appid


def appid_job(appid: str) -> str:
    return appid.rpartition(":")[0] or appid
