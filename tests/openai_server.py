"""A local, scripted stand-in for an OpenAI-compatible HTTP API, for tests.

It listens on 127.0.0.1 on a free port, in a background thread, and answers from queues of
scripted replies, one queue per path. With nothing queued, ``/v1/embeddings`` answers with
deterministic vectors (``HashEmbedder``) and every other path fails loudly with HTTP 400,
so a test that forgot to script a chat reply cannot pass by accident (and a retrying client
does not retry it). Every request is recorded for assertions.

::

    with ScriptedOpenAIServer() as server:
        server.script("embeddings", status=429, headers={"Retry-After": "1"})
        server.script_chat("hello")
        client = OpenAIEmbedder("m", base_url=server.base_url, api_key="k")
        ...
        assert server.requests_to("embeddings")[0].headers["authorization"] == "Bearer k"
"""

from __future__ import annotations

import json
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self

from jiyi.embed.hashing import HashEmbedder

EMBEDDINGS = "/v1/embeddings"
CHAT = "/v1/chat/completions"

# A body may be JSON-able data, raw text/bytes (sent as is: malformed JSON, empty bodies),
# or a function of the request's JSON that returns either.
Body = Any


@dataclass
class ScriptedReply:
    """One queued answer. ``body=None`` means the default answer for the path and status."""

    status: int = 200
    body: Body = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    # Close the connection without answering (the client sees a protocol/connection error).
    disconnect: bool = False


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]  # keys lower-cased
    raw: bytes
    json: Any  # None when the body was not JSON

    @property
    def inputs(self) -> list[str]:
        """The ``input`` texts of an embeddings request."""
        value = self.json.get("input") if isinstance(self.json, dict) else None
        if isinstance(value, str):
            return [value]
        return list(value) if isinstance(value, list) else []


def normalise_path(path: str) -> str:
    """``"embeddings"``, ``"/embeddings"`` and ``"/v1/embeddings"`` all mean ``/v1/embeddings``."""
    path = "/" + path.strip("/")
    return path if path.startswith("/v1/") else "/v1" + path


def embeddings_body(request: Any, *, dim: int = 64, reverse: bool = False) -> dict[str, Any]:
    """An OpenAI embeddings answer for ``request`` (its parsed JSON), vectors from HashEmbedder.

    ``reverse=True`` lists the items last-first, as servers may: clients must sort by index.
    """
    texts = request.get("input", []) if isinstance(request, dict) else []
    if isinstance(texts, str):
        texts = [texts]
    width = request.get("dimensions") if isinstance(request, dict) else None
    vectors = HashEmbedder(width if isinstance(width, int) and width > 0 else dim).embed(list(texts))
    data = [{"object": "embedding", "index": i, "embedding": vec.tolist()} for i, vec in enumerate(vectors)]
    if reverse:
        data.reverse()
    return {
        "object": "list",
        "data": data,
        "model": request.get("model", "") if isinstance(request, dict) else "",
        "usage": {"prompt_tokens": 0, "total_tokens": 0},
    }


def chat_body(
    content: str | None,
    *,
    model: str = "scripted",
    finish_reason: str = "stop",
    tool_calls: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """An OpenAI chat.completion answer whose single choice says ``content``."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls is not None:
        message["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    }


def error_body(status: int, message: str | None = None) -> dict[str, Any]:
    return {
        "error": {"message": message or f"scripted HTTP {status}", "type": "scripted_error", "code": status}
    }


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # Handler threads may be sleeping in a scripted delay; stop() wakes them instead.
    block_on_close = False
    owner: ScriptedOpenAIServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that timed out and hung up is part of the script, not a server error.
        pass


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    # HTTP/1.0: one request per connection, so no handler thread lingers on keep-alive.
    protocol_version = "HTTP/1.0"

    def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
        pass

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            parsed: Any = json.loads(raw) if raw else None
        except ValueError:
            parsed = None
        path = self.path.split("?", 1)[0]
        request = RecordedRequest(
            method=self.command,
            path=path,
            headers={k.lower(): v for k, v in self.headers.items()},
            raw=raw,
            json=parsed,
        )
        owner = self.server.owner
        reply = owner._record_and_pop(request)
        if reply.delay > 0 and owner._stopping.wait(reply.delay):
            return  # stopping: drop the connection
        if reply.disconnect:
            self.close_connection = True
            return
        status, payload, headers = owner._render(path, reply, parsed)
        self.send_response(status)
        headers.setdefault("Content-Type", "application/json")
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


class ScriptedOpenAIServer:
    """An OpenAI-protocol HTTP server with scripted answers. Use as a context manager."""

    def __init__(self, *, embedding_dim: int = 64) -> None:
        self.embedding_dim = embedding_dim
        self.requests: list[RecordedRequest] = []
        self._queues: defaultdict[str, deque[ScriptedReply]] = defaultdict(deque)
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> Self:
        if self._server is not None:
            return self
        self._stopping.clear()
        server = _Server(("127.0.0.1", 0), _Handler)
        server.owner = self
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, args=(0.02,), name="scripted-openai", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        server, thread = self._server, self._thread
        if server is None:
            return
        self._stopping.set()
        server.shutdown()
        server.server_close()
        if thread is not None:
            thread.join(timeout=5)
        self._server = self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("ScriptedOpenAIServer is not running")
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    # -- scripting ------------------------------------------------------------------------

    def script(
        self,
        path: str = EMBEDDINGS,
        *,
        status: int = 200,
        body: Body | Callable[[Any], Body] = None,
        headers: dict[str, str] | None = None,
        delay: float = 0.0,
        disconnect: bool = False,
        times: int = 1,
    ) -> None:
        """Queue ``times`` identical replies for ``path``; queued replies are used first-in first-out."""
        reply = ScriptedReply(
            status=status, body=body, headers=dict(headers or {}), delay=delay, disconnect=disconnect
        )
        with self._lock:
            self._queues[normalise_path(path)].extend(reply for _ in range(times))

    def script_chat(
        self,
        content: str | None,
        *,
        status: int = 200,
        finish_reason: str = "stop",
        tool_calls: list[dict[str, Any]] | None = None,
        headers: dict[str, str] | None = None,
        delay: float = 0.0,
    ) -> None:
        """Queue one chat completion whose assistant message says ``content``."""
        body = chat_body(content, finish_reason=finish_reason, tool_calls=tool_calls)
        self.script(CHAT, status=status, body=body, headers=headers, delay=delay)

    def pending(self, path: str = EMBEDDINGS) -> int:
        """How many scripted replies for ``path`` have not been used yet."""
        with self._lock:
            return len(self._queues[normalise_path(path)])

    def requests_to(self, path: str) -> list[RecordedRequest]:
        wanted = normalise_path(path)
        with self._lock:
            return [r for r in self.requests if r.path == wanted]

    def reset(self) -> None:
        """Forget recorded requests and unused scripted replies."""
        with self._lock:
            self.requests.clear()
            self._queues.clear()

    # -- used by the handler thread -------------------------------------------------------

    def _record_and_pop(self, request: RecordedRequest) -> ScriptedReply:
        with self._lock:
            self.requests.append(request)
            queue = self._queues.get(request.path)
            return queue.popleft() if queue else ScriptedReply()

    def _render(self, path: str, reply: ScriptedReply, request: Any) -> tuple[int, bytes, dict[str, str]]:
        status, body = reply.status, reply.body
        if callable(body):
            body = body(request)
        if body is None:
            if status >= 400:
                body = error_body(status)
            elif path == EMBEDDINGS:
                body = embeddings_body(request, dim=self.embedding_dim)
            else:
                status, body = 400, error_body(400, f"ScriptedOpenAIServer: no reply scripted for {path}")
        if isinstance(body, bytes):
            payload = body
        elif isinstance(body, str):
            payload = body.encode("utf-8")
        else:
            payload = json.dumps(body, ensure_ascii=False).encode("utf-8")
        return status, payload, dict(reply.headers)
