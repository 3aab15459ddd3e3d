"""Query-embedding latency of an embedder (one ``embed_query`` call per query).

400 queries (LoCoMo conversations 1-3, then the zh/en set) after 20 warm-up calls; prints
the load time, p50/p95/mean per query and the process's peak RSS. The embedders' own
thread settings apply (USE-m3 and e5 default to one thread).

    python bench/embed_speed.py            # the default embedder
    python bench/embed_speed.py e5
    python bench/embed_speed.py pair
"""

from __future__ import annotations

import json
import resource
import statistics
import sys
import time

from common import REPO_ROOT
from jiyi.embed.base import embed_texts, resolve_embedder
from locomo import DEFAULT_DATA, load_conversation

WARMUP = 20
QUERIES = 400


def queries() -> list[str]:
    samples = json.loads(DEFAULT_DATA.read_text(encoding="utf-8"))
    out = [q.text for i, s in enumerate(samples[:3]) for q in load_conversation(i + 1, s).questions][:300]
    zh = json.loads((REPO_ROOT / "tests" / "data" / "zh_en_retrieval.json").read_text(encoding="utf-8"))
    return out + [q["query"] for q in zh["queries"]][: QUERIES - len(out)]


def main(argv: list[str]) -> int:
    spec = argv[0] if argv else None
    texts = queries()
    t0 = time.perf_counter()
    emb = resolve_embedder(spec)
    embed_texts(emb, ["warm up"], query=True)
    load_s = time.perf_counter() - t0
    for q in texts[:WARMUP]:
        embed_texts(emb, [q], query=True)
    ms = []
    for q in texts:
        t = time.perf_counter()
        embed_texts(emb, [q], query=True)
        ms.append((time.perf_counter() - t) * 1000.0)
    ms.sort()
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"{emb.model_id}: {len(ms)} queries, load {load_s:.2f} s, p50 {ms[len(ms) // 2]:.1f} ms, "
        f"p95 {ms[int(0.95 * len(ms))]:.1f} ms, mean {statistics.fmean(ms):.1f} ms, peak RSS {rss_mb:.0f} MB"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
