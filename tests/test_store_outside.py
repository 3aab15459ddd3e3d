"""A backend from outside jiyi registers with the packaged conformance suite.

:class:`PrimitivesOnlyStore` stands for a third-party backend: a ``Store`` subclass
defined here, not in jiyi, that runs every operation on a wrapped SQLiteStore except
``Retrieve``, which it answers as the suite's docstring tells a backend to, with jiyi's
shared flow over the search primitives. It registers the way the docstring of
:mod:`jiyi.testing.conformance` shows: a ``store`` fixture and a subclass.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TypeVar, cast

import numpy as np
import pytest

from jiyi.store.base import Op, Retrieve, Store
from jiyi.store.retrieve import aretrieve, retrieve
from jiyi.store.sqlite import SQLiteStore
from jiyi.testing.conformance import MODEL, StoreConformance, flt, make_item, put, unit
from jiyi.text.tokenize import query_terms

R = TypeVar("R")


class PrimitivesOnlyStore(Store):
    """Delegates to ``inner``; never hands it a ``Retrieve``."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.asked: list[str] = []

    def execute(self, op: Op[R]) -> R:
        self.asked.append(type(op).__name__)
        if isinstance(op, Retrieve):
            return cast(R, retrieve(op, self.execute))
        return self.inner.execute(op)

    async def aexecute(self, op: Op[R]) -> R:
        self.asked.append(type(op).__name__)
        if isinstance(op, Retrieve):
            return cast(R, await aretrieve(op, self.aexecute))
        return await self.inner.aexecute(op)

    def close(self) -> None:
        self.inner.close()


class TestOutsideBackendConformance(StoreConformance):
    @pytest.fixture
    def store(self, tmp_path: Path) -> Iterator[Store]:
        s = PrimitivesOnlyStore(SQLiteStore(tmp_path / "outside.db"))
        yield s
        s.close()


def test_retrieve_reaches_the_backend_as_primitives(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    with PrimitivesOnlyStore(SQLiteStore(tmp_path / "asked.db")) as store:
        assert isinstance(store, PrimitivesOnlyStore)
        a = make_item("outside backend apple", thread_id="t")
        put(store, a, vectors=[unit(rng)])
        store.asked.clear()
        (cand,) = store.execute(Retrieve(flt(), MODEL, unit(rng), query_terms("apple"), 5, 5, neighbours=1))
        assert cand.item == a
        assert store.asked == ["Retrieve", "VectorHits", "KeywordHits", "ThreadLinks", "LoadHits"]
