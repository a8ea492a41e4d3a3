"""Waiting claims in the policy's order with exact sums of their expected holds. Pure.

Under a policy whose claims start one after another (one slot, or one OST under ost-aware), a
claim starts when the holds ahead of it have run: a base time plus the sum of the durations
ahead. A `Lane` keeps those claims sorted in blocks, each with the sum of its durations, so a
claim joins or leaves, and the sum ahead of any place is read, in O(sqrt n) steps, most of them
C-level list operations, instead of rescheduling the queue.

Durations are summed in integer nanoseconds: a sum is then the same whichever way it is grouped,
so a lane updated claim by claim gives exactly the times a lane built from scratch gives.
A duration is either fixed (`int`, declared by the claim) or learnt (`str`, the key of a moving
average the caller resolves when asked): a change of a learnt duration moves every claim that
uses it without touching the claims.
"""

from __future__ import annotations

from bisect import bisect_left
from itertools import accumulate, chain
from operator import itemgetter
from typing import Callable, Hashable, Iterator, Union, cast

NS = 1_000_000_000
BLOCK = 256  # claims per block (split at twice this): a few C-level passes of this length per read

Source = Union[int, str]  # a duration in nanoseconds, or the key of a learnt one
Item = tuple[Hashable, str]  # (the policy's key, appid): unique, sorted
Value = Callable[[str], int]  # a learnt duration's key -> nanoseconds


def ns(seconds: float) -> int:
    return round(seconds * NS)


def fixed(key: str) -> int:
    """The `Value` of lanes whose durations are all fixed: there is nothing to learn."""
    raise KeyError(key)


class Lane:
    def __init__(self) -> None:
        self._items: list[list[Item]] = []  # blocks, each sorted; every item of one < the next's
        self._srcs: list[list[Source]] = []
        self._lasts: list[Item] = []  # each block's last item (which block an item goes to)
        self._fixed: list[int] = []  # per block: the sum of its fixed durations
        self._learnt: list[dict[str, int]] = []  # per block: key -> how many of its claims use it
        self._sums: list[int | None] = []  # per block: its total (None: to count), valid for `_version`
        self._version: object = None
        self._n = 0

    def __len__(self) -> int:
        return self._n

    def __iter__(self) -> Iterator[Item]:
        return chain.from_iterable(self._items)

    def insert(self, item: Item, src: Source) -> None:
        if not self._items:
            self._items.append([])
            self._srcs.append([])
            self._lasts.append(item)
            self._fixed.append(0)
            self._learnt.append({})
            self._sums.append(None)
        b = min(bisect_left(self._lasts, item), len(self._items) - 1)
        i = bisect_left(self._items[b], item)
        self._items[b].insert(i, item)
        self._srcs[b].insert(i, src)
        self._count(b, src, 1)
        self._lasts[b] = self._items[b][-1]
        self._n += 1
        if len(self._items[b]) > 2 * BLOCK:
            self._split(b)

    def remove(self, item: Item) -> None:
        b = bisect_left(self._lasts, item)
        i = bisect_left(self._items[b], item) if b < len(self._items) else 0
        if b == len(self._items) or self._items[b][i] != item:
            raise KeyError(item)
        del self._items[b][i]
        self._count(b, self._srcs[b].pop(i), -1)
        self._n -= 1
        if self._items[b]:
            self._lasts[b] = self._items[b][-1]
        else:
            for blocks in (self._items, self._srcs, self._lasts, self._fixed, self._learnt, self._sums):
                del blocks[b]

    def first(self) -> Item:
        return self._items[0][0]

    def rank(self, item: Item) -> int:
        """How many items sort before `item` (present or not)."""
        b = bisect_left(self._lasts, item)
        if b == len(self._items):
            return self._n
        return sum(map(len, self._items[:b])) + bisect_left(self._items[b], item)

    def ahead(self, item: Item, value: Value, version: object) -> int:
        """The sum (ns) of the durations of the items before `item` (present or not);
        `version` changes whenever a learnt duration does."""
        b = bisect_left(self._lasts, item)
        total = sum(self._block_sums(value, version)[:b])
        if b < len(self._items):
            i = bisect_left(self._items[b], item)
            total += sum(map(_resolver(value), self._srcs[b][:i]))
        return total

    def starts(self, value: Value) -> Iterator[tuple[str, int]]:
        """(appid, the sum ahead of it) for every item, in order."""
        return zip(self.appids(), accumulate(self.durations(value), initial=0))

    def appids(self) -> Iterator[str]:
        return map(itemgetter(1), self)

    def durations(self, value: Value) -> Iterator[int]:
        """Every item's duration (ns), in order: C-level iterators, no Python call per item."""
        learnt: dict[Source, Source] = {key: value(key) for block in self._learnt for key in block}
        srcs: Iterator[Source] = chain.from_iterable(self._srcs)
        if learnt:  # a fixed source (an int) is its own default
            srcs = map(learnt.get, srcs, chain.from_iterable(self._srcs))
        return cast(Iterator[int], srcs)

    # -- blocks ---------------------------------------------------------------------------------
    def _count(self, b: int, src: Source, sign: int) -> None:
        if isinstance(src, int):
            self._fixed[b] += sign * src
        else:
            left = self._learnt[b].get(src, 0) + sign
            if left:
                self._learnt[b][src] = left
            else:
                del self._learnt[b][src]
        self._sums[b] = None

    def _split(self, b: int) -> None:
        items, srcs = self._items[b], self._srcs[b]
        half = len(items) // 2
        self._items[b:b + 1] = [items[:half], items[half:]]
        self._srcs[b:b + 1] = [srcs[:half], srcs[half:]]
        self._lasts[b:b + 1] = [items[half - 1], items[-1]]
        self._fixed[b:b + 1] = [0, 0]
        self._learnt[b:b + 1] = [{}, {}]
        self._sums[b:b + 1] = [None, None]
        for k in (b, b + 1):
            for s in self._srcs[k]:
                self._count(k, s, 1)

    def _block_sums(self, value: Value, version: object) -> list[int]:
        if self._version != version:
            self._sums = [None] * len(self._sums)
            self._version = version
        get = _resolver(value)
        for b, total in enumerate(self._sums):
            if total is None:
                self._sums[b] = self._fixed[b] + sum(n * get(key) for key, n in self._learnt[b].items())
        return self._sums  # type: ignore[return-value]


def _resolver(value: Value) -> Callable[[Source], int]:
    """A source's duration (ns), each learnt key resolved once."""
    memo: dict[str, int] = {}

    def get(s: Source) -> int:
        if isinstance(s, int):
            return s
        if s not in memo:
            memo[s] = value(s)
        return memo[s]
    return get
