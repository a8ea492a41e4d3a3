"""The allocation policies by name: the one table the CLI, the controller, the demo, the
simulator and the reports read.

As node_exporter's collectors each register a factory in one table, each policy module of this
package declares the policies it defines in a module-level `POLICIES = {name: Registration}`;
`table()` gathers them from every module of `iez.alloc` (as `iez.cli` gathers its commands), so
adding a policy is adding its module and no list elsewhere changes. This module imports no
policy module by name (the policy modules import it for `Registration`), so there is no import
cycle, and reading `DEFAULT_POLICY` costs no numpy.

    policy = get_policy(DEFAULT_POLICY)
    baselines = names(kind="lustre")
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Callable

import iez.alloc
from iez.errors import ConfigError

if TYPE_CHECKING:
    from iez.alloc.policy import Policy

DEFAULT_POLICY = "balanced"

# What a policy is: Lustre's own allocator (the baselines), a paper's algorithm (seed 000's
# Algorithm 2 as printed, docs/references.md#s000-alg2; seed 002's BPIO, #s002-bpio-cost), or
# iez's own. Also the order reports show them in, as the paper's figures put RR before iez
# (docs/references.md#s000-figs7-9).
KINDS = ("lustre", "paper", "iez")


@dataclass(frozen=True)
class Registration:
    factory: Callable[[], Policy]
    kind: str

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"policy kind {self.kind!r} is not one of {KINDS}")


@cache
def table() -> dict[str, Registration]:
    """Every policy in display order: by kind, then as its module lists them."""
    found: dict[str, Registration] = {}
    for mod in sorted(m.name for m in pkgutil.iter_modules(iez.alloc.__path__)):
        for name, reg in getattr(importlib.import_module(f"iez.alloc.{mod}"), "POLICIES", {}).items():
            if name in found:
                raise AssertionError(f"allocation policy {name!r} is registered twice")
            found[name] = reg
    return dict(sorted(found.items(), key=lambda item: KINDS.index(item[1].kind)))


def names(kind: str | None = None) -> tuple[str, ...]:
    """The policies' names in display order; with `kind`, only those of that kind."""
    return tuple(n for n, r in table().items() if kind is None or r.kind == kind)


def get_policy(name: str) -> Policy:
    """A new instance of the policy called `name`."""
    reg = table().get(name)
    if reg is None:
        raise ConfigError(f"unknown allocation policy {name!r} (policies: {', '.join(names())})")
    return reg.factory()


def display_rank(name: str) -> tuple[int, str]:
    """Sort key putting policies in display order; names the table does not know go last."""
    order = names()
    return (order.index(name) if name in order else len(order), name)
