"""A process-wide cache, least recently used first out past a total weight (bytes, records,
entries: what its owner counts), safe to share between threads."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Generic, Hashable, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

__all__ = ["WeightedLRU"]


class WeightedLRU(Generic[K, V]):
    """Values by key, each with a weight; the least recently used go once the weights add up
    past ``limit`` (a value heavier than ``limit`` is not kept)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.size = 0
        self._items: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            hit = self._items.get(key)
            if hit is None:
                return None
            self._items.move_to_end(key)
            return hit[0]

    def put(self, key: K, value: V, weight: int) -> None:
        if weight > self.limit:
            return
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self.size -= old[1]
            self._items[key] = (value, weight)
            self.size += weight
            while self.size > self.limit and self._items:
                _, (_, w) = self._items.popitem(last=False)
                self.size -= w

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._items

    def discard(self, key: K) -> None:
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self.size -= old[1]

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self.size = 0

    def __len__(self) -> int:
        return len(self._items)
