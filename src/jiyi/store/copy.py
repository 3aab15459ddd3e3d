"""Copy a whole store into another, across backends, losslessly.

Every kind of row (:data:`~jiyi.store.base.ROW_KINDS`) is read with
:class:`~jiyi.store.base.DumpRows` and written with :class:`~jiyi.store.base.LoadRows`,
``batch`` rows per transaction: ids, history ``seq`` numbers and order, message
positions, times, vectors (bit for bit) and keyword terms are kept, so the copy answers
every read and search as the original does. Items go in their original insertion order,
which both backends use to break ties.

The destination must be empty (``overwrite=True`` empties it first). At the end the row
counts of every kind are compared; a difference raises :class:`~jiyi.errors.StoreError`.
Nothing should write to the source while it is copied.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from jiyi.errors import InvalidInput, StoreError
from jiyi.store.base import ROW_KINDS, ClearRows, DumpRows, LoadRows, Store, Write

Progress = Callable[[str, int, int | None], None]
"""``progress(kind, done, total)``: called after every batch (and once at the start of a kind)."""


@dataclass
class CopyReport:
    """Rows copied per kind (in :data:`ROW_KINDS` order)."""

    counts: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def row_counts(store: Store) -> dict[str, int]:
    """How many rows of every kind ``store`` holds."""
    counts: dict[str, int] = {}
    for kind in ROW_KINDS:
        page = store.execute(DumpRows(kind, limit=1))
        counts[kind] = page.total if page.total is not None else len(page.rows)
    return counts


def is_empty(store: Store) -> bool:
    return not any(row_counts(store).values())


def copy_store(
    source: Store,
    dest: Store,
    *,
    batch: int = 500,
    progress: Progress | None = None,
    overwrite: bool = False,
) -> CopyReport:
    """Copy every row of ``source`` into ``dest``; see the module docstring."""
    if batch < 1:
        raise InvalidInput("batch must be at least 1", field="batch")
    if source is dest:
        raise InvalidInput("cannot copy a store into itself", field="dest")
    present = {k: n for k, n in row_counts(dest).items() if n}
    if present:
        if not overwrite:
            what = ", ".join(f"{n} {k}" for k, n in present.items())
            raise InvalidInput(
                f"the destination is not empty ({what}); copy into an empty store or empty it first (overwrite=True; on the command line: --overwrite)",
                field="dest",
            )
        dest.execute(Write((ClearRows(ROW_KINDS),)))
    report = CopyReport()
    for kind in ROW_KINDS:
        done = 0
        after: str | None = None
        total: int | None = None
        first = True
        while True:
            page = source.execute(DumpRows(kind, after=after, limit=batch))
            if first:
                total = page.total
                first = False
                if progress is not None:
                    progress(kind, 0, total)
            if page.rows:
                dest.execute(Write((LoadRows(kind, tuple(page.rows)),)))
                done += len(page.rows)
                if progress is not None:
                    progress(kind, done, total)
            if page.next_after is None:
                break
            after = page.next_after
        report.counts[kind] = done
    copied, original = row_counts(dest), row_counts(source)
    wrong = [
        f"{k}: {copied[k]} of {original[k]}"
        for k in ROW_KINDS
        if not copied[k] == original[k] == report.counts[k]
    ]
    if wrong:
        raise StoreError(f"the copy is incomplete ({'; '.join(wrong)}): was the source written meanwhile?")
    return report
