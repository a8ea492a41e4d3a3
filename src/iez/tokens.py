"""Tokens: a site token for collectors and clients, an admin token for administrative writes.

HTTP clients send `Authorization: Bearer TOKEN`; collectors sign each message with the site
token (HMAC, iez.collect.message), so it never crosses the network. A token is read from a file
(first line, so `openssl rand -hex 32 > site.token` makes one) or from an environment variable.
"""

from __future__ import annotations

import hmac
import os
import secrets
from dataclasses import dataclass

from iez.errors import ConfigError
from iez.files import read_regular

MIN_LENGTH = 16
MAX_FILE = 4096  # a token file is one line
SITE, ADMIN = "site", "admin"


def new_token() -> str:
    """A fresh random token (256 bits, hex)."""
    return secrets.token_hex(32)


def read_token(path: str | None, env: str, what: str, option: str) -> str:
    """The token in file `path`, else in $`env`; a one-line ConfigError when neither holds one."""
    if path:
        token = token_in_file(path, what)
        where = path
    else:
        token = os.environ.get(env, "").strip()
        where = f"${env}"
        if not token:
            raise ConfigError(f"no {what} token: give {option} FILE or set {env} "
                              f"(make one with: openssl rand -hex 32)")
    if len(token) < MIN_LENGTH or any(c.isspace() for c in token):
        raise ConfigError(f"the {what} token in {where} must be at least {MIN_LENGTH} characters without spaces")
    return token


def client_token(path: str | None = None) -> str:
    """The site token a client sends or signs with: from `path`, else $IEZ_TOKEN_FILE, else
    $IEZ_TOKEN (the order libiez's C client reads them in); "" when none is set."""
    path = path or os.environ.get("IEZ_TOKEN_FILE", "")
    if not path and not os.environ.get("IEZ_TOKEN", "").strip():
        return ""
    return read_token(path or None, "IEZ_TOKEN", "site", "IEZ_TOKEN_FILE")


def token_in_file(path: str, what: str) -> str:
    """The first line of a token file: a regular file (a FIFO planted there cannot hang us)."""
    try:
        text = read_regular(path, MAX_FILE, f"the {what} token file").decode()
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: the {what} token is not text") from None
    return (text.splitlines() or [""])[0].strip()


@dataclass(frozen=True)
class Tokens:
    site: str
    admin: str

    def __post_init__(self) -> None:
        if hmac.compare_digest(self.site, self.admin):
            raise ConfigError("the site and admin tokens must differ")

    def role(self, presented: str | None) -> str | None:
        """"admin", "site", or None for a missing or unknown token (constant-time compares)."""
        if not presented:
            return None
        is_admin = hmac.compare_digest(presented.encode(), self.admin.encode())
        is_site = hmac.compare_digest(presented.encode(), self.site.encode())
        return ADMIN if is_admin else SITE if is_site else None
