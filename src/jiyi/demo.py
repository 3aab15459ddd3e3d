"""``jiyi demo``: remember a short Chinese/English conversation, then search it and say why;
then the user's path: two sessions a week apart through ``remember()``, and what is true now."""

from __future__ import annotations

import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

from jiyi.memory import Memory
from jiyi.store.sqlite import SQLiteStore
from jiyi.write.gate import DONE

USER = "demo-user"
SESSION = "demo-session-1"

# (what the user said, memory type) — a code-switched conversation.
CONVERSATION: list[tuple[str, str]] = [
    ("我是一名前端工程师，在杭州工作", "fact"),
    ("I prefer concise answers with code examples, no long explanations", "preference"),
    ("我们决定用 Next.js 而不是 Remix，因为团队更熟悉 React 生态", "decision"),
    ("项目必须支持 PostgreSQL 16", "constraint"),
    ("帮我记住：我的邮箱是 zhang.san@example.com，手机 13800138000", "fact"),
    ("I usually write the weekly report on Monday mornings", "habit"),
    ("我喜欢深色主题，写代码时眼睛不累", "preference"),
    ("谢谢！", "fact"),
    ("我是一个前端工程师，工作地点在杭州", "fact"),
]

QUERIES = [
    "用户是做什么工作的？",
    "which framework did we choose and why?",
    "数据库有什么要求",
    "what colour theme does the user like",
    "怎么联系用户",
]

# Two sessions of another user a week apart, said through remember() as an application
# does; the second changes what the first said, in the ways people say it.
WEEKS: list[list[tuple[str, str]]] = [
    [
        ("user", "我住在杭州，平时写代码用 VS Code。"),
        ("assistant", "好的，记住了。"),
        ("user", "Our team tracks tickets in Jira."),
    ],
    [
        ("user", "跟你说个消息：我上个月搬到上海了。"),
        ("user", "We moved our tickets from Jira to Linear last sprint."),
        ("user", "我现在用 Cursor 写代码。"),
    ],
]
NOW_QUERIES = [
    "用户现在住在哪个城市？",
    "Which tool does the team track tickets in?",
    "用户用什么编辑器写代码？",
]
WEEKLY_USER = "demo-user-2"

# What moved a hit when versions of one fact met (jiyi.read.versions), for a person.
_VERSION_WHY = {
    "contribution.replaced": "it replaced an older statement",
    "contribution.newer_version": "a later statement changes it",
    "contribution.later_statement": "a later statement says the same thing anew",
    "contribution.said_change": "a later turn that says it changed",
    "contribution.replaced_in_summary": "an earlier session's summary; a later statement changed it",
}


class _Clock:
    """The demo's clock: real time, moved a week on between the two sessions."""

    def __init__(self) -> None:
        self.now = datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.now


def _what_is_true_now(mem: Memory, clock: _Clock) -> None:
    print("\n6) The user's path: two sessions a week apart through remember(), each ended:")
    mem.reset(user_id=WEEKLY_USER)
    for week, messages in enumerate(WEEKS, start=1):
        session = f"demo-week-{week}"
        print(f"   week {week}: " + " | ".join(text for role, text in messages if role == "user"))
        mem.remember(messages, session_id=session, user_id=WEEKLY_USER)
        mem.end_session(session, user_id=WEEKLY_USER)
        for report in mem.process_jobs():
            for o in report.outcomes:
                if o.action == "supersede" and o.target_id is not None:
                    old = mem.get(o.target_id).content
                    print(f"      superseded  {old}  ->  {o.candidate.content}")
                elif o.action in ("add", "update", "reinforce"):
                    print(
                        f"      {DONE[o.action]:<11} [{o.candidate.memory_type.value}] {o.candidate.content}"
                    )
        clock.now += timedelta(days=7)
    print("   (every turn is also kept as said, and each session's summary is searchable)")
    for query in NOW_QUERIES:
        print(f"\n   Q: {query}")
        for hit in mem.search(query, user_id=WEEKLY_USER, limit=2, explain=True):
            tags = hit.item.tags
            kind = (
                "episode" if "episode" in tags else "turn" if "turn" in tags else hit.item.memory_type.value
            )
            text = " / ".join(hit.item.content.splitlines())
            print(f"      {hit.score:.3f}  [{kind}] {text}")
            moved = [why for key, why in _VERSION_WHY.items() if hit.breakdown.get(key)]
            if moved:
                print(f"             why moved: {'; '.join(moved)}")


def run_demo(db: Path | None = None, keep: bool = False, embedder: str | None = None) -> int:
    tmp = None
    if db is None:
        tmp = tempfile.TemporaryDirectory(prefix="jiyi-demo-")
        db = Path(tmp.name) / "demo.db"
    files = db.parent / f"{db.stem}-context"
    print(f"jiyi demo — database: {db}\n            files:    {files}\n")
    clock = _Clock()
    # Jobs (extraction, episodes) run here, in step 6, so that it can show what they did.
    with Memory(SQLiteStore(db), embedder=embedder, files=files, background=False, clock=clock) as mem:
        mem.reset(user_id=USER)
        print("1) Remembering what the user said (through the write gate):")
        for text, kind in CONVERSATION:
            result = mem.add(text, memory_type=kind, user_id=USER, session_id=SESSION)
            d = result.decision
            label = DONE[d.action].ljust(10)
            shown = result.item.content if result.item else text
            print(f"   {label} {shown}")
            if d.action == "reject":
                print(f"              why: {d.reasons[-1]}")
            if d.redacted:
                print(f"              why: redacted {', '.join(d.redacted)} before storing")
            if d.action == "reinforce" and result.item is not None:
                print(
                    f"              why: same as an existing memory (cosine {d.similarity:.2f}); "
                    f"mentions now {result.item.mention_count}, confidence {result.item.confidence:.2f}"
                )
        print("\n2) Searching (Chinese and English queries, top 2, with the score breakdown):")
        for query in QUERIES:
            print(f"\n   Q: {query}")
            for hit in mem.search(query, user_id=USER, limit=2, explain=True):
                b = hit.breakdown
                print(f"      {hit.score:.3f}  [{hit.item.memory_type.value}] {hit.item.content}")
                print(
                    f"             why: cosine {b['cosine']:.2f}, keyword bm25 {b['keyword_bm25']:.2f} "
                    f"-> similarity {hit.similarity:.2f}; score = {b['contribution.similarity']:.2f} similarity "
                    f"+ {b['contribution.confidence']:.2f} confidence + {b['contribution.scope']:.2f} scope"
                )
                if hit.relevance is not None:  # the calibrated chance that it answers the query
                    print(
                        f"             relevance {hit.relevance:.2f} (the chance that it answers the question)"
                    )
        stats = mem.stats(user_id=USER)
        counts = ", ".join(f"{kind} {n}" for kind, n in sorted(stats.by_type.items()))
        print(f"\n3) Stored {stats.total} memories: {counts}")
        print("\n4) The profile aggregated from them (what an agent's system prompt starts with):")
        for line in mem.profile(user_id=USER).to_prompt().splitlines():
            print(f"   {line}")
        memory_md = files / "default" / "user" / USER / "memory.md"
        print(f"\n5) The same memories as a file a person can read and edit ({memory_md.name}):")
        for line in memory_md.read_text(encoding="utf-8").splitlines():
            if line.startswith(("#", "- ")):
                print(f"   {line}")
        _what_is_true_now(mem, clock)
    if tmp is not None and not keep:
        tmp.cleanup()
    elif keep or tmp is None:
        print(
            f"\nDatabase kept at {db}; try:\n"
            f"  jiyi --db {db} search '用户喜欢什么' --user {USER} --explain\n"
            f"  jiyi --db {db} maintain --dry-run\n"
            f"  (edit {files}/default/user/{USER}/memory.md, then) jiyi --db {db} sync --files {files}"
        )
    return 0
