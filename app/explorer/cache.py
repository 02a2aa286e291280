"""A small thread-safe LRU cache for per-trace analyses (the same click twice is free)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

__all__ = ["LRUCache"]


class LRUCache:
    """At most ``maxsize`` values by key, least recently used dropped first.

    A value is computed outside the lock: two threads asking for the same new key may
    both compute it (the results are equal; the last one is kept).

    >>> c = LRUCache(2)
    >>> c.get(("a",), lambda: 1), c.get(("a",), lambda: 2), len(c)
    (1, 1, 1)
    """

    def __init__(self, maxsize: int = 256) -> None:
        self.maxsize = maxsize
        self._items: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
        value = compute()
        with self._lock:
            self._items[key] = value
            while len(self._items) > self.maxsize:
                self._items.popitem(last=False)
        return value

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        return len(self._items)
