"""One exception tree for jiyi.

::

    JiyiError                      root; never raised itself
    ├── InvalidInput (ValueError)  the caller passed something wrong: fix the call
    │   └── NotFound (KeyError)    no such item in this tenant (also across tenants: never "forbidden")
    ├── Forbidden                  the caller may see this but not change it (another's session)
    ├── ConfigError                a setting, provider string or missing extra
    ├── StoreError                 the database failed
    │   ├── StoreCorrupt           the file is not a jiyi database or is damaged
    │   ├── StoreReadOnly          the file or directory cannot be written
    │   ├── StoreUnavailable       a server could not be reached
    │   └── WriteConflict          a guarded write lost a race in its scope: decide again
    ├── EmbedderError              the embedding model failed (HTTP error, bad answer)
    └── LLMError                   the language model failed (HTTP error, unusable answer)

Every error carries a message a person can act on: what failed and why.
"""

from __future__ import annotations


class JiyiError(Exception):
    """Root of every error jiyi raises on purpose."""


class InvalidInput(JiyiError, ValueError):
    """The caller passed a value jiyi cannot accept. ``field`` names it when known."""

    def __init__(self, message: str, *, field: str | None = None, problems: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.field = field
        self.problems = problems or (message,)
        """Every problem found, one sentence each (the message joins them)."""


class NotFound(InvalidInput, KeyError):
    """No item with this id is visible to the caller."""

    def __init__(self, message: str, *, item_id: str | None = None) -> None:
        super().__init__(message, field="id")
        self.item_id = item_id

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class Forbidden(JiyiError):
    """The caller may see this but may not do what it asked (for example restore a
    checkpoint over messages another key wrote). Only raised for a caller given as a
    :class:`~jiyi.store.base.Viewer`; what it may not see is :class:`NotFound` instead."""


class ConfigError(JiyiError):
    """A configuration value, provider string or optional dependency is wrong or missing."""


def install_hint(extra: str) -> str:
    """How to add one of jiyi's optional extras. jiyi is installed from its clone (or a
    wheel built from it), not from a package index, so ``pip install 'jiyi[x]'`` would not
    find it (README, "Installing")."""
    return f"pip install '.[{extra}]' in jiyi's clone (or its wheel with [{extra}])"


class StoreError(JiyiError):
    """The storage backend failed."""


class StoreCorrupt(StoreError):
    """The database file is not a jiyi store, or it is damaged."""


class StoreReadOnly(StoreError):
    """The database cannot be written (permissions, read-only medium)."""


class StoreUnavailable(StoreError):
    """A database server could not be reached."""


class WriteConflict(StoreError):
    """A guarded write (:class:`~jiyi.store.base.Guard`) found that another writer changed
    its scope since the guard's clock was read; nothing of the write landed. The write
    pipeline reads the scope again and decides again; callers only see it when a scope is
    so busy that a write lost every one of its attempts."""


class EmbedderError(JiyiError):
    """The embedding model failed or returned something unusable."""


class LLMError(JiyiError):
    """The language model failed (HTTP error, timeout) or returned something unusable."""


# The stable machine-readable code of each kind of error, most specific first: the REST
# service, the CLI's JSON errors and the agent tools all answer with these.
_CODES: tuple[tuple[type[JiyiError] | tuple[type[JiyiError], ...], str], ...] = (
    (NotFound, "not_found"),
    (Forbidden, "forbidden"),
    (InvalidInput, "invalid_input"),
    (StoreReadOnly, "store_read_only"),
    (StoreError, "store_error"),
    ((EmbedderError, LLMError), "upstream_error"),
    (ConfigError, "config_error"),
)


def error_code(exc: BaseException) -> str:
    """The code every interface gives ``exc`` (``internal_error`` for anything else)."""
    for kind, code in _CODES:
        if isinstance(exc, kind):
            return code
    return "internal_error"
