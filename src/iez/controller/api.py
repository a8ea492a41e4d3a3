"""The controller's HTTP API (FastAPI). The OpenAPI spec is served at /openapi.json (and read
at /docs); docs/controller.md describes every route.

Every request but /health needs `Authorization: Bearer TOKEN`: the site token (collectors and
clients) or the admin token. Uploads need the role the controller was started with
(`--uploads site`, the default, lets jobs upload their own traces; `--uploads admin` reserves
them for the admin token); re-placing a run always needs the admin token. The token and the
route's body cap (`BodyCaps`) are checked by `Guard` before any body is read. Every input is
validated before anything is written: a bad one gets a 4xx with a one-line `detail`, and the
database is left as it was.
"""

from __future__ import annotations

import inspect
import math
import re
from dataclasses import dataclass, fields as dataclass_fields
from functools import partial
from itertools import repeat
from operator import attrgetter, itemgetter
from types import SimpleNamespace, UnionType
from typing import Annotated, Any, Callable, Literal, Sequence, TypeVar, Union, get_args, get_origin

from fastapi import Depends, FastAPI, HTTPException, Path as PathParam, Request as HttpRequest
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
import numpy as np
from prometheus_client import CONTENT_TYPE_LATEST
from pydantic_core import from_json
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from starlette.concurrency import run_in_threadpool
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from iez import __version__
from iez.alloc.policy import MAX_WRITE_BYTES
from iez.alloc.registry import names as policy_names
from iez.cluster import check_host_name
from iez.tokens import ADMIN, SITE, Tokens
from iez.controller import dashboard
from iez.controller.service import Conflict, Controller, HeldBack, Invalid, NotFound, PlanResult, check_app
from iez.db.errors import DatabaseError
from iez.errors import ConfigError, IezError
from iez.fields import MAX_RAND
from iez.layout.layout import LOV_MAX_STRIPE_COUNT, LOV_MAXPOOLNAME, FileLayout
from iez.plan import check_name, names_ok, parse_layout
from iez.db.database import REQUEST_FIELDS, request_columns
from iez.request import Request, RequestColumns
from iez.trace.ingest import API_LEVEL
from iez.units import parse_size

MAX_PATH = 4096  # PATH_MAX
UNAUTHORIZED = "missing or unknown token (send Authorization: Bearer TOKEN)"
FORBIDDEN = "this needs the admin token"
RETRY_AFTER = "2"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", str_max_length=1 << 16)


class FileRequest(_Strict):
    """One file a run creates (docs/references.md#s000-table1)."""

    path: str = Field(max_length=MAX_PATH, description="absolute path, as the application names it")
    write_bytes: StrictInt | str = Field(description="bytes written: an integer, or a size such as '10GiB'")
    stripe_count: StrictInt = Field(1, ge=-1, le=LOV_MAX_STRIPE_COUNT, description="0 = default, -1 = all OSTs")
    rank: StrictInt = Field(0, ge=0, lt=1 << 31)
    comm_size: StrictInt = Field(1, ge=1, lt=1 << 31)
    create_time: float = Field(0.0, ge=0, description="seconds after the run's first open")
    api: Literal[tuple(API_LEVEL)] = "posix"  # type: ignore[valid-type]
    pool: str = Field("", max_length=LOV_MAXPOOLNAME)
    observed: str | None = Field(None, description="layout the file got (plan grammar), traces only")
    # the writers' facts the automatic layout reads; 0 = not known
    writers: StrictInt = Field(0, ge=0, lt=1 << 31, description="processes that wrote the file")
    transfer_size: StrictInt = Field(0, ge=0, le=MAX_WRITE_BYTES, description="bytes of the writers' typical write")
    write_align: StrictInt = Field(0, ge=0, le=MAX_WRITE_BYTES,
                                   description="the largest power of two dividing every write's offset and size")
    placed: StrictBool = Field(False, description="created from the plan (traces only): its stripe count is iez's")
    writer_segments: StrictInt = Field(0, ge=0, lt=1 << 31,
                                       description="contiguous extents one writer wrote (1: one block each; 0: unknown)")
    read_bytes: StrictInt | str = Field(0, description="bytes read in the run: an integer, or a size such as '1GiB'")
    read_size: StrictInt = Field(0, ge=0, le=MAX_WRITE_BYTES, description="bytes of the readers' typical read")
    host: str = Field("", max_length=64, description="the host that created (else first read) it")
    final_path: str = Field("", max_length=MAX_PATH, description="the name a rename in the run gave it ('': none)")
    name_random: StrictInt = Field(0, ge=0, le=MAX_RAND,
                                   description="random characters ending the name, generated at create (0: none known)")
    read_collective: StrictBool = Field(False, description="some process read it with a collective MPI-IO call (traces "
                                        "only): with an `observed` layout over more than one OST, the next plan "
                                        "asks for the Lustre-aware collective read")

    @field_validator("path", "final_path")
    @classmethod
    def _name(cls, v: str, info: ValidationInfo) -> str:
        if v or info.field_name == "path":  # final_path "": the file kept its name
            _checked(check_name, v)
        return v

    @field_validator("host")
    @classmethod
    def _host(cls, v: str) -> str:
        if v:
            _checked(check_host_name, v, "host")
        return v

    @field_validator("write_bytes", "read_bytes")
    @classmethod
    def _bytes(cls, v: int | str, info: ValidationInfo) -> int:
        if type(v) is int and 0 <= v <= MAX_WRITE_BYTES:  # the usual case, once per file of an upload
            return v
        n = _checked(parse_size, v, info.field_name)
        if n > MAX_WRITE_BYTES:
            raise ValueError(f"{n} bytes is more than iez handles in one file (4 PiB)")
        return n

    @field_validator("create_time")
    @classmethod
    def _finite(cls, v: float) -> float:
        if not math.isfinite(v):
            raise ValueError("must be finite")
        return v

    @field_validator("pool")
    @classmethod
    def _pool(cls, v: str) -> str:
        if v and (len(v.encode()) > LOV_MAXPOOLNAME or not all(c.isalnum() or c in "_.-" for c in v)):
            raise ValueError(f"a pool name is at most {LOV_MAXPOOLNAME} bytes of letters, digits, '_', '.', '-'")
        return v

    @field_validator("write_align")
    @classmethod
    def _power_of_two(cls, v: int) -> int:
        if v & (v - 1):
            raise ValueError("must be 0 or a power of two")
        return v

    @field_validator("observed")
    @classmethod
    def _layout(cls, v: str | None) -> str | None:
        if v is not None:
            _checked(parse_layout, v)
        return v

    def request(self, app: str) -> Request:
        return Request(path=self.path, write_bytes=int(self.write_bytes), stripe_count=self.stripe_count,
                       rank=self.rank, app=app, create_time=self.create_time, comm_size=self.comm_size,
                       api=self.api, pool=self.pool,
                       observed=None if self.observed is None else parse_layout(self.observed),
                       writers=self.writers, transfer_size=self.transfer_size, write_align=self.write_align,
                       placed=self.placed, writer_segments=self.writer_segments, read_bytes=int(self.read_bytes),
                       read_size=self.read_size, host=self.host, final_path=self.final_path,
                       name_random=self.name_random, read_collective=self.read_collective)


def _checked(fn: Callable, *args: Any) -> Any:
    """Run an iez validator; its one-line error becomes pydantic's (a 422)."""
    try:
        return fn(*args)
    except IezError as e:
        raise ValueError(str(e)) from None


def _once(files: list[FileRequest]) -> None:
    seen: set[str] = set()
    for r in files:
        if r.path in seen:
            raise ValueError(f"{r.path} is listed twice")
        seen.add(r.path)


class _Requests(_Strict):
    requests: list[FileRequest] = Field(max_length=10_000_000)

    @model_validator(mode="after")
    def _unique(self) -> "_Requests":
        _once(self.requests)
        return self


class TraceUpload(_Requests):
    """What one run created, read from its trace (libiez shards or a Darshan log)."""

    run: StrictInt | None = Field(None, ge=1, lt=1 << 31, description="default: one after the newest traced run")
    label: str = Field("", max_length=255, description="job id or trace run name")
    source: Literal["libiez", "darshan"] = "libiez"
    nprocs: StrictInt = Field(0, ge=0, lt=1 << 31)
    plan_hits: StrictInt = Field(0, ge=0, description="created files placed from the plan")
    plan_misses: StrictInt = Field(0, ge=0, description="created files the loaded plan did not name")
    warnings: list[str] = Field(default_factory=list, max_length=1000)
    reads: list[FileRequest] = Field(default_factory=list, max_length=10_000_000,
                                     description="files the run read and did not create (no layout to choose)")

    @model_validator(mode="after")
    def _reads_apart(self) -> "TraceUpload":
        _once(self.reads)
        made = {r.path for r in self.requests}
        both = next((r.path for r in self.reads if r.path in made), None)
        if both is not None:
            raise ValueError(f"{both} is both created and only read")
        return self


class RequestsUpload(_Requests):
    """The files a coming run will create (predicted by the client)."""

    run: StrictInt | None = Field(None, ge=1, lt=1 << 31, description="default: one after the newest traced run")


class AllocateRequest(_Strict):
    policy: Literal[policy_names()] | None = None  # type: ignore[valid-type]
    capacity_weight: float | None = Field(default=None, ge=0.0, le=1.0)


U = TypeVar("U", bound=BaseModel)


# An upload is 3 levels deep (the body, its lists, a file); JSON the parser refuses and nested
# deeper than this is told so (400) instead of with the parser's error (422).
MAX_JSON_DEPTH = 32
_BRACKETS = np.zeros(256, np.int8)
_BRACKETS[[ord("["), ord("{")]], _BRACKETS[[ord("]"), ord("}")]] = 1, -1


def json_depth(raw: bytes) -> int:
    """How deeply the arrays and objects of a JSON text nest (brackets inside strings left out),
    counted in bulk: no parser, so no recursion however deep it is."""
    raw = raw.replace(b"\\\\", b"  ").replace(b'\\"', b"  ")  # escaped backslashes, then escaped quotes
    a = np.frombuffer(raw, np.uint8)
    quotes, step = np.flatnonzero(a == ord('"')), _BRACKETS[a]
    at = np.flatnonzero(step)
    outside = np.searchsorted(quotes, at) % 2 == 0  # an even number of quotes before it
    return int(np.cumsum(step[at][outside]).max(initial=0))


def _parsed(model: type[U], raw: bytes) -> U:
    """An upload's body parsed and validated in one pass (pydantic's JSON parser: no Python
    objects but the model's), its errors as FastAPI's. A body the parser refuses is measured
    then (not on the way in: 20 ms a 2.6 MB upload): nested past MAX_JSON_DEPTH, it is 400."""
    try:
        return model.model_validate_json(raw)
    except ValidationError as e:
        errs = e.errors(include_url=False, include_context=False, include_input=False)
        if errs and errs[0]["type"] == "json_invalid" and json_depth(raw) > MAX_JSON_DEPTH:
            raise HTTPException(400, f"body: JSON nested more than {MAX_JSON_DEPTH} deep") from None
        raise RequestValidationError([{**err, "loc": ("body", *err["loc"])} for err in errs]) from None


def _body_doc(model: type[BaseModel]) -> dict[str, Any]:
    """The OpenAPI requestBody of a route that parses its body itself (`_parsed`); the model's
    schema is in the spec's components (`create_app`)."""
    return {"requestBody": {"required": True, "content": {"application/json": {
        "schema": {"$ref": f"#/components/schemas/{model.__name__}"}}}}}


def file_columns(files: list[FileRequest], app: str) -> RequestColumns:
    """Validated files as columns (`iez.request.RequestColumns`): the fields a prediction stores,
    no `Request` per file."""
    if not files:
        return request_columns({k: [] for k in REQUEST_FIELDS}, app)
    return request_columns(dict(zip(REQUEST_FIELDS, map(list, zip(*map(attrgetter(*REQUEST_FIELDS), files))))), app)


def _allowed(annotation: Any) -> tuple[frozenset[type], frozenset | None]:
    """The exact types of JSON values a field of this annotation takes as they are (a lax int
    would also take "1": such a value is left to the model), and a Literal's values."""
    if get_origin(annotation) is Literal:
        return frozenset(map(type, get_args(annotation))), frozenset(get_args(annotation))
    if get_origin(annotation) in (Union, UnionType):
        kinds = [_allowed(a) for a in get_args(annotation)]
        return frozenset().union(*(k for k, _ in kinds)), None
    base = get_args(annotation)[0] if get_origin(annotation) is Annotated else annotation
    return ({float: frozenset((int, float))}.get(base) or frozenset((base,))), None


def _names_ok(field: str, column: Sequence[str]) -> bool:
    """`FileRequest._name` over a column of strings at once (`final_path` may be empty)."""
    return names_ok(column if field == "path" else [v for v in column if v])


# Field validators with a form that takes a whole column (its strings), by the validator's name.
_COLUMN_RULES: dict[str, Callable[[str, Sequence[Any]], bool]] = {"_name": _names_ok}


def _bulk_checks(model: type[BaseModel]) -> dict[str, Callable[[Sequence[Any]], bool]]:
    """Per field of `model`, a check of a column of its JSON values at once: their types, its
    bounds (Field's ge, gt, le, lt, max_length, the model's str_max_length) and its field
    validators, each run once per distinct value (they are pure) and required to keep it, or once
    over the column where it has a column form (`_COLUMN_RULES`)."""
    validators: dict[str, list[Callable[[Any], Any]]] = {}
    columns: dict[str, list[Callable[[Sequence[Any]], bool]]] = {}
    for key, dec in model.__pydantic_decorators__.field_validators.items():
        takes_info = len(inspect.signature(dec.func).parameters) > 1
        for name in dec.info.fields:
            if key in _COLUMN_RULES:
                columns.setdefault(name, []).append(partial(_COLUMN_RULES[key], name))
                continue
            info = SimpleNamespace(field_name=name)
            validators.setdefault(name, []).append(partial(dec.func, info=info) if takes_info else dec.func)
    longest = model.model_config.get("str_max_length") or math.inf

    def check(field: Any, rules: list[Callable[[Any], Any]], whole: list[Callable[[Sequence[Any]], bool]]
              ) -> Callable[[Sequence[Any]], bool]:
        types, values = _allowed(field.annotation)
        bound = {type(m).__name__: m for m in field.metadata}
        lo, hi = getattr(bound.get("Ge"), "ge", -math.inf), getattr(bound.get("Le"), "le", math.inf)
        above, below = getattr(bound.get("Gt"), "gt", None), getattr(bound.get("Lt"), "lt", None)
        size = min(getattr(bound.get("MaxLen"), "max_length", math.inf), longest)

        def ok(column: Sequence[Any]) -> bool:
            present = set(map(type, column))
            if not present <= types or (values is not None and not set(column) <= values):
                return False
            numbers = (column if present <= {int, float} else
                       [v for v in column if type(v) in (int, float)] if present & {int, float} else ())
            least, most = (min(numbers), max(numbers)) if numbers else (0, 0)
            if numbers and (least < lo or most > hi or (above is not None and least <= above)
                            or (below is not None and most >= below)):
                return False
            strings = column if present == {str} else [v for v in column if type(v) is str] if str in present else ()
            if strings and max(map(len, strings)) > size:
                return False
            if not all(rule(column) for rule in whole):  # its strings: the type check above passed
                return False
            distinct = set(column) if rules else ()
            return all(_keeps(rule, v) for rule in rules for v in distinct)
        return ok

    return {name: check(field, validators.get(name, []), columns.get(name, []))
            for name, field in model.model_fields.items()}


def _keeps(rule: Callable[[Any], Any], v: Any) -> bool:
    """The field validator takes `v` as it is."""
    try:
        got = rule(v)
    except (ValueError, AssertionError):
        return False
    return type(got) is type(v) and got == v


_MISSING = object()  # a field a file leaves out
# Every field's bulk check but `observed`'s: a trace's layouts are parsed once, into its requests
# (`_observed_layouts`), not once to check them and again to use them.
_FILE_CHECKS = {k: c for k, c in _bulk_checks(FileRequest).items() if k != "observed"}
_RUN_CHECK = _bulk_checks(RequestsUpload)["run"]
_REQUEST_FIELDS_ALL = tuple(f.name for f in dataclass_fields(Request))  # Request's positional order


def _files_in_bulk(files: Any) -> dict[str, list[Any]] | None:
    """The files of an upload as a column of JSON values per `FileRequest` field (defaults filled
    in), when every column passes its bulk check (`_FILE_CHECKS`, `observed` aside) and no path
    is there twice; None when anything does not (or it is not a list of objects of its shape)."""
    if type(files) is not list or len(files) > 10_000_000 or (files and set(map(type, files)) != {dict}):
        return None
    n, fields = len(files), FileRequest.model_fields
    keys = tuple(files[0]) if files else ()
    cols = None
    if set(map(len, files)) <= {len(keys)}:  # as a client sends them: every file the same fields
        try:
            cols = {k: list(map(itemgetter(k), files)) for k in keys}  # in C: no Python step per file
        except KeyError:
            pass
    if cols is not None:
        if not set(cols) <= set(fields):
            return None
    else:
        given = {k: [f.get(k, _MISSING) for f in files] for k in {k for f in files for k in f}}
        if not set(given) <= set(fields) or any(_MISSING in c for k, c in given.items() if fields[k].is_required()):
            return None
        cols = {k: [fields[k].default if v is _MISSING else v for v in c] for k, c in given.items()}
    for name, field in fields.items():
        if name not in cols and (not field.is_required() or not n):
            cols[name] = [field.default] * n
    if (len(cols) < len(fields) or len(set(cols["path"])) < n
            or not all(_FILE_CHECKS[k](c) for k, c in cols.items() if k != "observed")):
        return None
    return cols


def _observed_layouts(column: list[Any]) -> list[FileLayout | None] | None:
    """`FileRequest.observed` over a column: each layout text parsed once; None when one is not a
    string the model takes or not a layout (the model then says which)."""
    known: dict[str, FileLayout] = {}
    longest = _Strict.model_config.get("str_max_length") or math.inf
    for v in set(column) - {None}:
        if type(v) is not str or len(v) > longest:
            return None
        try:
            known[v] = parse_layout(v)
        except IezError:
            return None
    return [None if v is None else known[v] for v in column]


def requests_in_bulk(raw: bytes, app: str) -> tuple[RequestColumns, int | None] | None:
    """A requests upload straight into columns when it passes `RequestsUpload`'s checks, made a
    field at a time over all its files (no model per file: 35 against 70 ms for 8,192); None
    when anything in it does not (or is not plain JSON of its shape, or a file has an `observed`
    layout): the model then parses it, and says what is wrong as it always has."""
    try:
        doc = from_json(raw, allow_inf_nan=False)
    except ValueError:
        return None
    if type(doc) is not dict or not set(doc) <= {"requests", "run"} or not _RUN_CHECK([doc.get("run")]):
        return None
    cols = _files_in_bulk(doc.get("requests"))
    if cols is None or not cols["path"] or cols["observed"].count(None) < len(cols["path"]):
        return None
    return request_columns({k: cols[k] for k in REQUEST_FIELDS}, app), doc.get("run")


def trace_in_bulk(raw: bytes, app: str) -> tuple[TraceUpload, list[Request], list[Request]] | None:
    """A trace upload checked as `requests_in_bulk` checks requests, its files made `Request`s
    from the columns (each `observed` layout parsed once; no model per file: 8,192 files with
    their layouts 0.10 against 0.44-0.52 s of CPU, in turns); its other fields by the model
    itself, on the body without its files. None when anything does not pass: the model then
    parses it all and says what is wrong."""
    try:
        doc = from_json(raw, allow_inf_nan=False)
    except ValueError:
        return None
    if type(doc) is not dict or not set(doc) <= set(TraceUpload.model_fields):
        return None
    made, read = (_files_in_bulk(doc.get(k, [])) for k in ("requests", "reads"))
    if made is None or read is None or not set(made["path"]).isdisjoint(read["path"]):
        return None
    try:
        head = TraceUpload.model_validate({**doc, "requests": [], "reads": []})
    except ValidationError:
        return None
    got = []
    for cols in (made, read):
        observed = _observed_layouts(cols["observed"])
        if observed is None:
            return None
        given = {**cols, "observed": observed}
        fixed = {"app": app, "run": "", "grows": False}
        got.append(list(map(Request, *(given[k] if k in given else repeat(fixed[k]) for k in _REQUEST_FIELDS_ALL))))
    return head, got[0], got[1]


AppName = Annotated[str, PathParam(min_length=1, max_length=128, description="application name")]
RunNumber = Annotated[int, PathParam(ge=1, lt=1 << 31)]


def _detail(code: int, detail: str, **extra: Any) -> JSONResponse:
    headers = {"Retry-After": RETRY_AFTER} if code in (202, 503) else None
    if code == 401:
        headers = {"WWW-Authenticate": "Bearer"}
    return JSONResponse({"detail": detail, **extra}, status_code=code, headers=headers)


@dataclass(frozen=True)
class BodyCaps:
    """The largest request body each route accepts, in bytes (controller options --max-*-body)."""

    trace: int = 64 << 20  # POST /apps/APP/traces; a trace of a million files is about 200 MB
    requests: int = 64 << 20  # POST /apps/APP/requests
    other: int = 64 << 10  # everything else (the admin's allocate options are a few bytes)
    # uploads read at once: each costs about 10x its body while parsed, so four 60 MiB traces
    # at once took 2.8 GB; the rest wait (503 + Retry-After, which the client honours)
    uploads_at_once: int = 2

    def __post_init__(self) -> None:
        if min(self.trace, self.requests, self.other, self.uploads_at_once) < 1:
            raise ConfigError("--max-*-body and --max-uploads must be at least 1")

    def of(self, route_name: str | None) -> int:
        return {"upload_trace": self.trace, "upload_requests": self.requests}.get(route_name or "", self.other)


class _TooLarge(Exception):
    """Raised into the application's body read once the cap is passed (the 413 is already sent)."""


class Guard:
    """Authentication, then the route's body cap, before anything reads or parses the body.

    FastAPI reads and parses a JSON body before it runs a route's dependencies, so a token
    checked there comes too late: a 60 MiB body cost 700 MiB before its missing token was seen.
    This ASGI middleware runs first: an unknown token gets 401 and the body is never read (uvicorn
    discards it as it arrives); a declared Content-Length over the cap gets 413 at once; a chunked
    body is counted as it arrives and cut at the cap with 413. The role a route needs is the one
    its `need(role)` dependency declares; routes in `public` need no token."""

    def __init__(self, app: ASGIApp, router: Any, tokens: Tokens, caps: BodyCaps, public: frozenset[str]) -> None:
        self.app, self.router, self.tokens, self.caps, self.public = app, router, tokens, caps, public
        self.uploading = 0

    def _route(self, scope: Scope) -> Any:
        for route in self.router.routes:
            if route.matches(scope)[0] is Match.FULL:
                return route
        return None  # FastAPI answers 404 or 405, after the checks below

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        route = self._route(scope)
        headers = dict(scope.get("headers", []))
        if scope["path"] not in self.public:
            needed = next((d.dependency.role for d in getattr(route, "dependencies", ())
                           if hasattr(d.dependency, "role")), SITE)
            scheme, _, token = headers.get(b"authorization", b"").decode("latin-1").partition(" ")
            got = self.tokens.role(token.strip() if scheme.lower() == "bearer" else None)
            if got is None:
                return await _detail(401, UNAUTHORIZED)(scope, receive, send)
            if needed == ADMIN and got != ADMIN:
                return await _detail(403, FORBIDDEN)(scope, receive, send)
        cap = self.caps.of(getattr(route, "name", None))
        declared = headers.get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > cap):
            return await _detail(413, f"request body over {cap} bytes")(scope, receive, send)
        if cap <= self.caps.other:
            return await self._counted(scope, receive, send, cap)
        if self.uploading >= self.caps.uploads_at_once:
            return await _detail(503, f"{self.uploading} uploads are being read; try again")(scope, receive, send)
        self.uploading += 1  # one event loop: no lock needed
        try:
            await self._counted(scope, receive, send, cap)
        finally:
            self.uploading -= 1

    async def _counted(self, scope: Scope, receive: Receive, send: Send, cap: int) -> None:
        size, answered = 0, False

        async def counted() -> Message:
            nonlocal size, answered
            msg = await receive()
            size += len(msg.get("body", b""))
            if size > cap and not answered:
                answered = True
                await _detail(413, f"request body over {cap} bytes")(scope, receive, send)
                raise _TooLarge()
            return msg

        async def unless_answered(msg: Message) -> None:
            if not answered:  # the application's own reply to the cut body is dropped
                await send(msg)

        try:
            await self.app(scope, counted, unless_answered)
        except _TooLarge:
            pass


def plan_parts(plan: PlanResult, if_none_match: str | None) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """A ready plan's reply (status, headers, body): its stored bytes as they are, or 304 when
    the client holds them already."""
    headers = [(b"x-iez-run", str(plan.run).encode()), (b"etag", plan.etag.encode())]
    if if_none_match is not None and _matches(if_none_match, plan.etag):
        return 304, headers, b""
    return 200, [*headers, (b"content-type", b"text/plain; charset=utf-8"),
                 (b"content-length", str(len(plan.body)).encode())], plan.body


def plan_reply(plan: PlanResult, if_none_match: str | None) -> Response:
    """The reply to a fetch of a plan: the plan when ready, else why not (202 pending, 409 failed)."""
    if plan.status == "pending":
        return _detail(202, f"{plan.app} run {plan.run}: plan not ready ({plan.reason})", status="pending", run=plan.run)
    if plan.status == "failed":
        return _detail(409, f"{plan.app}: planning failed: {plan.reason}", status="failed", run=plan.run)
    status, headers, body = plan_parts(plan, if_none_match)
    return Response(body, status, {k.decode(): v.decode() for k, v in headers})


def _matches(if_none_match: str, etag: str) -> bool:
    """If-None-Match's weak comparison (RFC 9110 13.1.2): any listed tag, or `*`."""
    tags = [t.strip().removeprefix("W/") for t in if_none_match.split(",")]
    return "*" in tags or etag in tags


class ServedPlans:
    """The ASGI application the server runs: a GET of a plan the controller answers from memory
    (`Controller.held_plan`: a ready plan, or a pending one, which a client polls) with a known
    token is answered here, before FastAPI's middleware, routing, dependencies and worker thread,
    which cost about 1 ms a request and were most of a fetch; everything else (an unknown token
    included, which Guard then refuses) goes on to `app`."""

    PATH = re.compile(r"/apps/([^/]+)/(?:runs/([1-9][0-9]{0,9})/)?plan")

    def __init__(self, app: ASGIApp, controller: Controller, tokens: Tokens) -> None:
        self.app, self.controller, self.tokens = app, controller, tokens

    def answer(self, path: str, headers: dict[bytes, bytes]) -> tuple[int, list[tuple[bytes, bytes]], bytes] | None:
        """The reply to a GET of `path` (request headers by lower-case name) when it asks for a
        held plan with a known token; None for anything else. The server's protocol calls it too
        (iez.controller.server.plan_protocol)."""
        m = self.PATH.fullmatch(path)
        plan = m and self.controller.held_plan(m[1], int(m[2]) if m[2] else None)
        if not plan:
            return None
        scheme, _, token = headers.get(b"authorization", b"").decode("latin-1").partition(" ")
        if scheme.lower() != "bearer" or self.tokens.role(token.strip()) is None:
            return None
        inm = headers.get(b"if-none-match")
        if plan.status == "ready":
            return plan_parts(plan, None if inm is None else inm.decode("latin-1"))
        reply = plan_reply(plan, None)
        return reply.status_code, reply.raw_headers, bytes(reply.body)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "GET":
            reply = self.answer(scope["path"], dict(scope["headers"]))
            if reply is not None:
                status, headers, body = reply
                await send({"type": "http.response.start", "status": status, "headers": headers})
                return await send({"type": "http.response.body", "body": body})
        await self.app(scope, receive, send)


def create_app(controller: Controller, tokens: Tokens, uploads: str = SITE, caps: BodyCaps = BodyCaps()) -> FastAPI:
    if uploads not in (SITE, ADMIN):
        raise ValueError(uploads)
    app = FastAPI(title="iez controller", version=__version__,
                  description="Plans, uploads and the global view of an iez-managed Lustre file system "
                              "(docs/controller.md).")
    public = frozenset(u for u in ("/health", *dashboard.PAGES, app.openapi_url, app.docs_url, app.redoc_url,
                                   app.swagger_ui_oauth2_redirect_url) if u)
    app.add_middleware(Guard, router=app.router, tokens=tokens, caps=caps, public=public)
    bearer = HTTPBearer(auto_error=False)

    def need(role: str) -> Callable:
        """The role a route needs. Guard enforces it before the body is read; this dependency
        declares it (Guard reads `.role`) and puts the bearer scheme in the OpenAPI spec."""
        def check(_: HTTPAuthorizationCredentials | None = Depends(bearer)) -> None:
            return None
        check.role = role  # type: ignore[attr-defined]
        return check

    read, upload, admin = Depends(need(SITE)), Depends(need(uploads)), Depends(need(ADMIN))

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: HttpRequest, e: RequestValidationError) -> JSONResponse:
        errs = [{"loc": [str(x) for x in err.get("loc", ())], "msg": str(err.get("msg", "")).removeprefix("Value error, ")}
                for err in e.errors()[:10]]
        first = errs[0] if errs else {"loc": [], "msg": "invalid request"}
        return _detail(422, f"{'.'.join(first['loc'][1:]) or 'body'}: {first['msg']}", errors=errs)

    for exc, status in ((NotFound, 404), (Conflict, 409),
                        (Invalid, 422), (HeldBack, 503), (DatabaseError, 503), (IezError, 422)):
        app.add_exception_handler(exc, lambda _r, e, status=status: _detail(status, str(e)))

    @app.get("/health", tags=["service"], summary="liveness and the worker's state (no token needed)",
             responses={"503": {"description": "the worker is dead: nothing will be planned until a restart"}})
    def health() -> Any:
        h = controller.health()
        return JSONResponse(h, status_code=503) if h["status"] == "failed" else h

    @app.get("/cluster", tags=["service"], summary="the global view: every OST and OSS, with ages", dependencies=[read])
    def cluster() -> dict[str, Any]:
        return controller.cluster_view()

    @app.get("/metrics", tags=["service"], summary="Prometheus metrics", dependencies=[read],
             response_class=PlainTextResponse)
    def metrics() -> Response:
        return Response(controller.metrics(), media_type=CONTENT_TYPE_LATEST)

    @app.get("/dashboard", tags=["dashboard"], summary="the live dashboard page (no data in it: no token needed)",
             response_class=HTMLResponse)
    @app.get("/dashboard/dashboard.js", tags=["dashboard"], summary="the dashboard's script",
             response_class=PlainTextResponse)
    def dashboard_page(request: HttpRequest) -> Response:
        body, media = dashboard.page(request.url.path)
        return Response(body, media_type=media, headers={"Cache-Control": "no-cache"})

    @app.get("/dashboard/state", tags=["dashboard"], dependencies=[read],
             summary="what the dashboard shows (site token; the admin token is refused, 403)")
    def dashboard_state(request: HttpRequest) -> Any:
        _, _, token = request.headers.get("authorization", "").partition(" ")
        if tokens.role(token.strip()) == ADMIN:
            return _detail(403, "the dashboard takes the site token; keep the admin token out of browser pages")
        return dashboard.state(controller)

    @app.get("/apps", tags=["applications"], summary="applications known to the controller", dependencies=[read])
    def apps() -> list[str]:
        with controller.db.begin() as tx:
            return tx.apps()

    @app.get("/apps/{app}", tags=["applications"], summary="an application's runs and pending work",
             dependencies=[read])
    def app_status(app: AppName) -> dict[str, Any]:
        return controller.app_status(check_app(app))

    def plan_response(app: str, run: int | None, request: HttpRequest) -> Response:
        return plan_reply(controller.plan(check_app(app), run), request.headers.get("if-none-match"))

    plan_doc: dict[int | str, dict[str, Any]] = {
        "200": {"content": {"text/plain": {}}, "description": "the plan file (docs/plan-format.md), with its ETag"},
        "304": {"description": "If-None-Match named the plan's ETag: the plan the client holds is current"},
        "202": {"description": "the plan is being made: try again after Retry-After seconds"},
        "404": {"description": "no plan: the run should be traced"},
        "409": {"description": "planning failed (detail says why)"}}

    @app.get("/apps/{app}/plan", tags=["plans"], summary="the plan of the application's coming run",
             dependencies=[read], responses=plan_doc, response_class=PlainTextResponse)
    def next_plan(app: AppName, request: HttpRequest) -> Response:
        return plan_response(app, None, request)

    @app.get("/apps/{app}/runs/{run}/plan", tags=["plans"], summary="the plan of one run",
             dependencies=[read], responses=plan_doc, response_class=PlainTextResponse)
    def run_plan(app: AppName, run: RunNumber, request: HttpRequest) -> Response:
        return plan_response(app, run, request)

    def store_trace(name: str, raw: bytes) -> dict[str, Any]:
        got = trace_in_bulk(raw, name)
        if got is None:
            body = _parsed(TraceUpload, raw)
            got = body, [r.request(name) for r in body.requests], [r.request(name) for r in body.reads]
        body, made, read = got
        return controller.upload_trace(name, made, body.run, label=body.label, source=body.source,
                                       nprocs=body.nprocs, plan_hits=body.plan_hits, plan_misses=body.plan_misses,
                                       meta={"warnings": body.warnings}, reads=read)

    def store_requests(name: str, raw: bytes) -> dict[str, Any]:
        got = requests_in_bulk(raw, name)
        if got is None:
            body = _parsed(RequestsUpload, raw)
            got = file_columns(body.requests, name), body.run
        return controller.upload_requests(name, *got)

    @app.post("/apps/{app}/traces", tags=["uploads"], status_code=201, dependencies=[upload],
              summary="upload what a run created and read; the next run is then predicted and planned",
              openapi_extra=_body_doc(TraceUpload))
    async def upload_trace(app: AppName, request: HttpRequest) -> dict[str, Any]:
        return await run_in_threadpool(store_trace, check_app(app), await request.body())

    @app.post("/apps/{app}/requests", tags=["uploads"], status_code=202, dependencies=[upload],
              summary="upload the files a coming run will create; they are planned",
              openapi_extra=_body_doc(RequestsUpload))
    async def upload_requests(app: AppName, request: HttpRequest) -> dict[str, Any]:
        return await run_in_threadpool(store_requests, check_app(app), await request.body())

    @app.post("/apps/{app}/runs/{run}/allocate", tags=["admin"], dependencies=[admin],
              summary="place a predicted run again now (another policy or weight, new statistics)")
    def allocate(app: AppName, run: RunNumber, body: AllocateRequest | None = None) -> dict[str, Any]:
        body = body or AllocateRequest()
        return controller.allocate(check_app(app), run, body.policy, body.capacity_weight)

    @app.delete("/apps/{app}/plan", tags=["admin"], dependencies=[admin],
                summary="release the app's planned runs that have not run: they stop reserving space")
    def release(app: AppName) -> dict[str, Any]:
        return controller.release(check_app(app))

    spec = app.openapi

    def openapi() -> dict[str, Any]:
        """FastAPI's spec with the schemas of the bodies the upload routes parse themselves."""
        made = app.openapi_schema is None
        out = spec()  # made once, then kept by FastAPI
        if made:
            schemas = out.setdefault("components", {}).setdefault("schemas", {})
            for model in (TraceUpload, RequestsUpload):
                doc = model.model_json_schema(ref_template="#/components/schemas/{model}")
                schemas.update(doc.pop("$defs", {}))
                schemas[model.__name__] = doc
        return out

    app.openapi = openapi  # type: ignore[method-assign]
    return app
