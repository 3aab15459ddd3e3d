"""Memory and AsyncMemory: the public API, generated from one table of flows.

Every operation is a flow over a :class:`~jiyi.runtime.Runtime` (see :mod:`jiyi.effects`),
written once in the module named for what it does: ``write/pipeline.py`` (add),
``read/search.py`` and ``read/context.py``, ``items.py`` (get, list, update, delete ...),
``session/flows.py``, ``profile.py``, ``procedural.py``, ``lifecycle/``, ``files/``.
:class:`_Operations` is the table: each entry is an :class:`Operation` descriptor, which
:class:`Memory` runs with :func:`jiyi.driver.run` and :class:`AsyncMemory` awaits with
:func:`jiyi.driver.arun`; signatures and docs exist once.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import inspect
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any, Concatenate, Generic, ParamSpec, Self, TypeVar, overload

from jiyi import items
from jiyi import procedural as procedural_flows
from jiyi import profile as profile_flows
from jiyi.config import GateConfig, RankConfig
from jiyi.driver import arun, run
from jiyi.effects import Flow
from jiyi.embed.base import Embedder
from jiyi.errors import InvalidInput
from jiyi.files import flows as file_flows
from jiyi.files import repair_files, with_files
from jiyi.files.mirror import file_handlers
from jiyi.items import ImportResult
from jiyi.lifecycle import compress as compress_flows
from jiyi.lifecycle import maintain as maintain_flows
from jiyi.lifecycle import reembed as reembed_flows
from jiyi.llm.base import ChatModel
from jiyi.read import context as context_flows
from jiyi.read import retrievals as retrieval_flows
from jiyi.read import search as search_flows
from jiyi.runtime import Runtime
from jiyi.session import flows as session
from jiyi.session.flows import RememberResult
from jiyi.session.working import AsyncWorkingMemory, WorkingMemory, working_state
from jiyi.store.base import Store, Viewer
from jiyi.who import Caller, Owner
from jiyi.write import pipeline
from jiyi.write.pipeline import AddResult

__all__ = ["AddResult", "AsyncMemory", "ImportResult", "Memory", "Operation"]

P = ParamSpec("P")
R = TypeVar("R")


class Operation(Generic[P, R]):
    """One entry of the API table: a flow ``fn(runtime, ...)``, run by the owner's driver.

    On a :class:`Memory` it is a plain method; on an :class:`AsyncMemory`, awaited.
    """

    def __init__(self, fn: Callable[Concatenate[Runtime, P], Flow[R]]) -> None:
        self.fn = fn
        self.name = fn.__name__

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type) -> Operation[P, R]: ...
    @overload
    def __get__(self, obj: Memory, owner: type) -> Callable[P, R]: ...
    @overload
    def __get__(self, obj: AsyncMemory, owner: type) -> Callable[P, Awaitable[R]]: ...
    def __get__(self, obj: object, owner: type) -> Any:
        if obj is None:
            return self
        bound = obj._bind(self.fn)  # type: ignore[attr-defined]
        obj.__dict__[self.name] = bound  # cached: the next lookup skips the descriptor
        return bound


@functools.cache
def _parameters(fn: Callable[..., Any]) -> frozenset[str]:
    return frozenset(inspect.signature(fn).parameters)


@functools.cache
def _public_signature(fn: Callable[..., Any]) -> inspect.Signature:
    """``fn``'s signature without its runtime, the first parameter the bound method fills:
    what ``help()`` and ``inspect.signature`` show of ``Memory.search`` (its return, the
    flow's result, is left unsaid: a ``Memory`` returns it, an ``AsyncMemory`` awaits it)."""
    sig = inspect.signature(fn)
    return sig.replace(
        parameters=list(sig.parameters.values())[1:], return_annotation=inspect.Signature.empty
    )


class _Operations:
    """The table: every operation of the API, once, by the module that holds it."""

    # memories (write/pipeline.py, read/search.py, items.py)
    add = Operation(pipeline.add)
    search = Operation(search_flows.search)
    get = Operation(items.get)
    list = Operation(items.list_page)
    history = Operation(items.history)
    stats = Operation(items.stats)
    update = Operation(items.update)
    delete = Operation(items.delete)
    holders = Operation(items.holders)
    reset = Operation(items.reset)
    export = Operation(items.export)
    import_items = Operation(items.import_items)

    # conversations (session/flows.py, read/context.py)
    add_messages = Operation(session.add_messages)
    messages = Operation(session.messages)
    working_window = Operation(session.working_window)
    compact = Operation(session.compact)
    end_session = Operation(session.end_session)
    process_jobs = Operation(session.process_jobs)
    jobs = Operation(session.jobs)
    store_extracted = Operation(pipeline.store_extracted)
    add_episode = Operation(session.add_episode)
    save_checkpoint = Operation(session.save_checkpoint)
    restore_checkpoint = Operation(session.restore_checkpoint)
    list_checkpoints = Operation(session.list_checkpoints)
    prune_checkpoints = Operation(session.prune_checkpoints)
    add_document = Operation(session.add_document)
    get_document = Operation(session.get_document)
    context = Operation(context_flows.context)

    # the retrieval log (read/retrievals.py)
    retrievals = Operation(retrieval_flows.retrievals)
    why_retrieved = Operation(retrieval_flows.why_retrieved)

    # lifecycle (lifecycle/)
    maintain = Operation(maintain_flows.maintain)
    compress = Operation(compress_flows.compress)
    uncompress = Operation(compress_flows.uncompress)
    reembed = Operation(reembed_flows.reembed)

    # profiles (profile.py)
    profile = Operation(profile_flows.profile)
    set_profile = Operation(profile_flows.set_profile)
    profile_prompt = Operation(profile_flows.profile_prompt)

    # procedural memory (procedural.py)
    record_skill = Operation(procedural_flows.record_skill)
    record_failure = Operation(procedural_flows.record_failure)
    record_decomposition = Operation(procedural_flows.record_decomposition)
    suggest = Operation(procedural_flows.suggest)

    # files (files/flows.py)
    sync_files = Operation(file_flows.sync_files)
    recover_files = Operation(file_flows.recover_files)

    _remember = Operation(session.remember)


class _Facade(_Operations):
    """What both drivers share: the runtime, and building one without I/O."""

    def __init__(
        self,
        store: Store,
        *,
        files: str | Path | None = None,
        **options: Any,
    ) -> None:
        given: object = store  # callers without a type checker pass paths here
        if not isinstance(given, Store):
            hint = (
                f"; for a SQLite file or a store URL use {type(self).__name__}.open({str(given)!r})"
                if isinstance(given, str | Path)
                else ""
            )
            raise InvalidInput(f"store must be a jiyi Store, not {type(given).__name__}{hint}", field="store")
        # files (jiyi/files/): memory.md / learnings.md per scope under this directory
        store = with_files(store, files)
        self.runtime = Runtime.build(store, extra_handlers=file_handlers(store), **options)

    _defaults: dict[str, Any] = {}  # noqa: RUF012  (replaced, never mutated)

    def bound(self, *, owner: Owner | None = None, caller: Caller | None = None) -> Self:
        """A view of this memory whose operations receive ``owner``'s ids and ``caller``'s
        tenant, viewer and actor wherever they take them (see :mod:`jiyi.who`); an argument
        given in a call wins. The view shares the store: close the original, not the view."""
        view = copy.copy(self)
        # Drop the operations cached on the original: they were bound without the defaults.
        view.__dict__ = {
            k: v for k, v in self.__dict__.items() if not isinstance(getattr(type(self), k, None), Operation)
        }
        view._defaults = {
            **self._defaults,
            **(owner.values() if owner else {}),
            **(caller.values() if caller else {}),
        }
        return view

    def _with_defaults(self, fn: Callable[..., Any], kwargs: dict[str, Any]) -> dict[str, Any]:
        if not self._defaults:
            return kwargs
        accepted = _parameters(fn)
        filled = dict(kwargs)
        for name, value in self._defaults.items():
            if name in accepted and filled.get(name) is None:
                filled[name] = value
        return filled

    @property
    def store(self) -> Store:
        return self.runtime.store

    @property
    def embedder(self) -> Embedder:
        return self.runtime.embedder

    @property
    def gate(self) -> GateConfig:
        return self.runtime.gate

    @property
    def rank(self) -> RankConfig:
        return self.runtime.rank

    @property
    def llm(self) -> ChatModel | None:
        return self.runtime.llm

    @property
    def tenant_id(self) -> str:
        return self.runtime.tenant_id


class BackgroundWorker:
    """A daemon thread that runs ``step`` whenever woken, or every ``interval`` seconds,
    until stopped. ``step`` returns what it did; an empty result means "idle"."""

    def __init__(self, step: Callable[[], Sequence[Any]], interval: float) -> None:
        import threading

        self._step = step
        self._interval = interval
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="jiyi-worker", daemon=True)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def start(self) -> None:
        self._thread.start()

    def wake(self) -> None:
        self._wake.set()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _run(self) -> None:
        import logging

        log = logging.getLogger("jiyi.worker")
        while not self._stop.is_set():
            try:
                did = self._step()
            except Exception:  # keep the worker alive; the job rows hold the errors
                log.exception("job batch failed")
                did = []
            if did:
                continue
            self._wake.wait(self._interval)
            self._wake.clear()


class Memory(_Facade):
    """The synchronous Memory API. Create it with :meth:`open` or pass a :class:`Store`.

    Keyword options: ``embedder`` (instance, callable or "provider:model"; default the
    offline USE-m3), ``llm``, ``reranker``, ``gate`` (:class:`GateConfig`), ``rank``
    (:class:`RankConfig`), ``session`` (:class:`SessionConfig`), ``clock`` (a function
    returning now), ``tenant_id`` (default tenant) and ``files`` (a directory: every
    scope also kept as editable memory.md / learnings.md, see :mod:`jiyi.files` and
    :meth:`sync_files`). Building one does no I/O; :meth:`open` also repairs what a
    crash left half written in the files.
    """

    @classmethod
    def open(cls, path: str | Path, **options: Any) -> Memory:
        """A Memory on the store at ``path``: a SQLite file (created if missing) or a store
        URL (``sqlite:///...``, ``postgresql://...``; see :func:`jiyi.store.open.open_store`).
        ``redis="redis://host:6379/0"`` adds the shared Redis cache (it must answer);
        ``read_url="postgresql://..."`` reads from that replica (:mod:`jiyi.store.replica`)."""
        from jiyi.store.open import open_store

        store = open_store(
            str(path), redis=options.pop("redis", None), read_url=options.pop("read_url", None)
        )
        mem = cls(store, **options)
        repair_files(mem.runtime)  # files (jiyi/files/): finish what a crash left half written
        return mem

    def __init__(self, store: Store, *, background: bool = True, **options: Any) -> None:
        super().__init__(store, **options)
        self.background = background
        """Whether remember() starts the in-process worker (settable: a server decides)."""
        self._worker: BackgroundWorker | None = None

    def _bind(self, fn: Callable[..., Flow[R]]) -> Callable[..., R]:
        runtime = self.runtime

        @functools.wraps(fn)
        def method(*args: Any, **kwargs: Any) -> R:
            return run(fn(runtime, *args, **self._with_defaults(fn, kwargs)), runtime)

        method.__signature__ = _public_signature(fn)  # type: ignore[attr-defined]
        return method

    def remember(
        self,
        messages: Sequence[Any],
        *,
        session_id: str,
        user_id: str | None = None,
        project_id: str | None = None,
        agent_id: str | None = None,
        tenant_id: str | None = None,
        viewer: Viewer | None = None,
    ) -> RememberResult:
        """Keep messages in the session and queue extraction; returns at once.

        With ``background=True`` (the default) a worker thread in this process runs the
        queued jobs; otherwise call :meth:`process_jobs` or run ``jiyi worker``.
        """
        result = self._remember(
            messages,
            session_id=session_id,
            user_id=user_id,
            project_id=project_id,
            agent_id=agent_id,
            tenant_id=tenant_id,
            viewer=viewer,
        )
        if self.background and (result.job_id or (result.compacted and result.compacted.episode_job_id)):
            self.start_worker().wake()
        return result

    def start_worker(self, *, interval: float = 5.0) -> BackgroundWorker:
        """Start (once) the in-process worker thread that drains the job queue."""
        if self._worker is None or not self._worker.alive:
            self._worker = BackgroundWorker(lambda: self.process_jobs(worker="in-process"), interval)
            self._worker.start()
        return self._worker

    def wait_for_jobs(self, timeout: float = 30.0) -> bool:
        """Block until the queue has no runnable job (for tests and scripts). True if idle."""
        import time

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.jobs(statuses=["queued", "running"], limit=1):
                return True
            if self._worker is None or not self._worker.alive:
                self.process_jobs(worker="waiter")
            else:
                self._worker.wake()
                time.sleep(0.02)
        return False

    @contextlib.contextmanager
    def working(
        self, session_id: str, *, resume: bool = False, tenant_id: str | None = None
    ) -> Iterator[WorkingMemory]:
        """Working memory for one invocation (todo list, tool calls, reasoning state), in
        this process and cleared when the block ends; ``wm.checkpoint()`` saves it with the
        session, and ``resume=True`` starts from the latest such checkpoint (see
        :mod:`jiyi.session.working`)."""
        save = functools.partial(self.save_checkpoint, tenant_id=tenant_id)
        wm = WorkingMemory(session_id, save)
        if resume:
            for cp in self.list_checkpoints(session_id, tenant_id=tenant_id):
                if (state := working_state(cp)) is not None:
                    wm.load(state)
                    break
        try:
            yield wm
        finally:
            wm._end()

    def close(self) -> None:
        if self._worker is not None:
            self._worker.stop()
        self.store.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def export_jsonl(self, out: IO[str], **scope: Any) -> int:
        """Write every memory (with ``retrievals=True``, then the retrieval log) as one JSON
        line each; returns the count of lines."""
        rows = self.export(**scope)
        for row in rows:
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
        return len(rows)


class AsyncMemory(_Facade):
    """The asynchronous Memory API: the same methods as :class:`Memory`, awaited."""

    def __init__(self, store: Store, *, background: bool = True, **options: Any) -> None:
        super().__init__(store, **options)
        self.background = background
        """Whether remember() starts the in-process worker (settable: a server decides)."""
        self._task: Any = None
        self._wake: Any = None
        self._closing = False

    @classmethod
    def open(cls, path: str | Path, **options: Any) -> AsyncMemory:
        """An AsyncMemory on the store at ``path`` (a SQLite file or a store URL), with
        the shared Redis cache when ``redis=`` names one, reading from the replica
        ``read_url=`` names (PostgreSQL only)."""
        from jiyi.store.open import open_store

        store = open_store(
            str(path), redis=options.pop("redis", None), read_url=options.pop("read_url", None)
        )
        mem = cls(store, **options)
        repair_files(mem.runtime)
        return mem

    def _bind(self, fn: Callable[..., Flow[R]]) -> Callable[..., Awaitable[R]]:
        runtime = self.runtime

        @functools.wraps(fn)
        async def method(*args: Any, **kwargs: Any) -> R:
            return await arun(fn(runtime, *args, **self._with_defaults(fn, kwargs)), runtime)

        method.__signature__ = _public_signature(fn)  # type: ignore[attr-defined]
        return method

    async def remember(
        self,
        messages: Sequence[Any],
        *,
        session_id: str,
        user_id: str | None = None,
        project_id: str | None = None,
        agent_id: str | None = None,
        tenant_id: str | None = None,
        viewer: Viewer | None = None,
    ) -> RememberResult:
        """Keep messages in the session and queue extraction; returns at once.

        With ``background=True`` (the default) a task of the running event loop runs the
        queued jobs (started on first need, as :class:`Memory` starts its thread);
        otherwise call :meth:`process_jobs` or run ``jiyi worker``.
        """
        result = await self._remember(
            messages,
            session_id=session_id,
            user_id=user_id,
            project_id=project_id,
            agent_id=agent_id,
            tenant_id=tenant_id,
            viewer=viewer,
        )
        if self.background and (result.job_id or (result.compacted and result.compacted.episode_job_id)):
            self.start_worker()
        if self._task is not None:
            self._wake.set()
        return result

    async def wait_for_jobs(self, timeout: float = 30.0) -> bool:
        """Wait until the queue has no runnable job (for tests and scripts). True if idle."""
        import asyncio
        import time

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not await self.jobs(statuses=["queued", "running"], limit=1):
                return True
            if self._task is None or self._task.done():
                await self.process_jobs(worker="waiter")
            else:
                self._wake.set()
                await asyncio.sleep(0.02)
        return False

    @contextlib.asynccontextmanager
    async def working(
        self, session_id: str, *, resume: bool = False, tenant_id: str | None = None
    ) -> AsyncIterator[AsyncWorkingMemory]:
        """Working memory for one invocation, as :meth:`Memory.working`; ``await
        wm.checkpoint()`` saves it with the session."""
        save = functools.partial(self.save_checkpoint, tenant_id=tenant_id)
        wm = AsyncWorkingMemory(session_id, save)
        if resume:
            for cp in await self.list_checkpoints(session_id, tenant_id=tenant_id):
                if (state := working_state(cp)) is not None:
                    wm.load(state)
                    break
        try:
            yield wm
        finally:
            wm._end()

    def start_worker(self, *, interval: float = 5.0) -> None:
        """Run queued jobs in a background task of the running event loop."""
        import asyncio

        if self._task is None or self._task.done():
            self._closing = False
            self._wake = asyncio.Event()
            self._task = asyncio.get_running_loop().create_task(self._work(interval))

    async def _work(self, interval: float) -> None:
        import asyncio
        import logging

        # aclose() both sets _closing and cancels: on Python 3.11 asyncio.wait_for can
        # swallow a cancellation that arrives as its inner wait completes (fixed in 3.12),
        # and the loop would then run on forever with aclose() awaiting it.
        while not self._closing:
            try:
                reports = await self.process_jobs(worker="in-process")
            except Exception:  # keep the worker alive; the job rows hold the errors
                logging.getLogger("jiyi.worker").exception("job batch failed")
                reports = []
            if reports:
                continue
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), interval)
            self._wake.clear()

    async def aclose(self) -> None:
        if self._task is not None:
            self._closing = True
            self._wake.set()
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task
        self.store.close()

    async def close(self) -> None:
        """:meth:`Memory.close`, awaited (the same as :meth:`aclose`)."""
        await self.aclose()

    async def export_jsonl(self, out: IO[str], **scope: Any) -> int:
        """:meth:`Memory.export_jsonl`, awaited."""
        rows = await self.export(**scope)
        for row in rows:
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
        return len(rows)

    async def __aenter__(self) -> AsyncMemory:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
