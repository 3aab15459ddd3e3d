"""Test support shipped with jiyi, for backends and applications built on it.

* :mod:`jiyi.testing.conformance` — the store conformance suite: every behaviour a
  :class:`~jiyi.store.base.Store` must show, run against SQLite and PostgreSQL in jiyi's
  own tests and importable by any other backend. It needs pytest, and is imported only
  by who uses it (this package imports nothing).
"""
