"""A uniform-grid spatial index: nearest neighbours within a radius without a scan of every pair.

Entities move every frame, so the index must update in O(1); a grid hash does, and a radius query
visits only the cells that overlap the circle. Positions are 2D or 3D; cells use x and y, distances
use every coordinate given.
"""

from __future__ import annotations

import heapq
import math


class Grid:
    """Points by id in square cells of ``cell`` units."""

    __slots__ = ("_cell", "_cells", "_where")

    def __init__(self, cell: float = 100.0) -> None:
        self._cell = cell
        self._cells: dict[tuple[int, int], dict[str, tuple[float, ...]]] = {}
        self._where: dict[str, tuple[tuple[int, int], tuple[float, ...]]] = {}

    def _key(self, pos: tuple[float, ...]) -> tuple[int, int]:
        return (math.floor(pos[0] / self._cell), math.floor(pos[1] / self._cell))

    def position(self, eid: str) -> tuple[float, ...] | None:
        """The last known position of an entity."""
        found = self._where.get(eid)
        return found[1] if found else None

    def put(self, eid: str, pos: tuple[float, ...]) -> None:
        """Insert or move an entity."""
        key = self._key(pos)
        old = self._where.get(eid)
        if old is not None and old[0] != key:
            cell = self._cells[old[0]]
            del cell[eid]
            if not cell:
                del self._cells[old[0]]
        self._cells.setdefault(key, {})[eid] = pos
        self._where[eid] = (key, pos)

    def remove(self, eid: str) -> None:
        """Forget an entity (it left the scene)."""
        old = self._where.pop(eid, None)
        if old is not None:
            cell = self._cells[old[0]]
            del cell[eid]
            if not cell:
                del self._cells[old[0]]

    def clear(self) -> None:
        """Forget everything (a new scene)."""
        self._cells.clear()
        self._where.clear()

    def _within2(self, pos: tuple[float, ...], radius: float, exclude: str | None) -> list[tuple[float, str]]:
        """(squared distance, id) of every entity within ``radius`` of ``pos`` but ``exclude``, unordered."""
        c = self._cell
        x, y = pos[0], pos[1]
        x0, x1 = math.floor((x - radius) / c), math.floor((x + radius) / c)
        y0, y1 = math.floor((y - radius) / c), math.floor((y + radius) / c)
        if (x1 - x0 + 1) * (y1 - y0 + 1) > len(self._cells):  # a huge radius: walk the occupied cells
            cells = [v for (cx, cy), v in self._cells.items() if x0 <= cx <= x1 and y0 <= cy <= y1]
        else:
            get = self._cells.get
            cells = [v for cx in range(x0, x1 + 1) for cy in range(y0, y1 + 1) if (v := get((cx, cy)))]
        r2 = radius * radius
        out: list[tuple[float, str]] = []
        z = pos[2] if len(pos) > 2 else None
        for cell in cells:
            for eid, p in cell.items():
                dx = p[0] - x
                dy = p[1] - y
                d2 = dx * dx + dy * dy
                if z is not None and len(p) > 2:
                    dz = p[2] - z
                    d2 += dz * dz
                if d2 <= r2 and eid != exclude:
                    out.append((d2, eid))
        return out

    def within(self, pos: tuple[float, ...], radius: float) -> list[tuple[float, str]]:
        """(distance, id) of every entity within ``radius`` of ``pos``, unordered."""
        return [(math.sqrt(d2), eid) for d2, eid in self._within2(pos, radius, None)]

    def nearest(
        self, pos: tuple[float, ...], radius: float, k: int, exclude: str | None = None
    ) -> list[tuple[float, str]]:
        """Up to ``k`` nearest (distance, id) within ``radius``, nearest first, ties by id."""
        hits = self._within2(pos, radius, exclude)
        if len(hits) > 64:  # a crowd: a heap of k beats sorting them all
            hits = heapq.nsmallest(k, hits)
        else:  # sorting a few dozen in C is several times faster than heapq's Python loop
            hits.sort()
            del hits[k:]
        return [(math.sqrt(d2), eid) for d2, eid in hits]
