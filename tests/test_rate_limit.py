"""The extraction rate limit counts runs, never drops what must not be lost, and says
what it refused (issue: nothing a user told us vanishes silently)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from jiyi.config import GateConfig
from jiyi.memory import Memory
from jiyi.write.gate import never_rate_limited

ORDINARY = ["I prefer dark mode in every editor", "My favourite language is Python", "I live in Berlin"]


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[Memory]:
    gate = GateConfig(max_extractions=2)
    with Memory.open(tmp_path / "rl.db", gate=gate, background=False, embedder="hash:256") as m:
        yield m


def _run(mem: Memory, text: str) -> dict[str, object]:
    mem.remember([("user", text)], session_id="s1", user_id="u")
    (report,) = mem.process_jobs()
    job = next(j for j in mem.jobs() if j.id == report.job_id)
    assert job.status == "done" and job.result is not None
    return job.result


def test_one_run_with_several_memories_counts_once(mem: Memory) -> None:
    first = _run(mem, ". ".join(ORDINARY))
    # each run also keeps its turn as a resource (never rate limited: it is what was said)
    assert first["actions"] == {"add": 3, "resource": 1}
    second = _run(mem, "I love jazz music")
    assert second["actions"] == {"add": 1, "resource": 1}  # the first run counted once, not three times


def test_past_the_limit_explicit_safety_and_corrections_are_kept_and_the_rest_is_shown(mem: Memory) -> None:
    _run(mem, ORDINARY[0])
    _run(mem, ORDINARY[1])
    result = _run(
        mem,
        "I enjoy long walks on the beach. 记住：我的生日是三月三日. I am allergic to seafood. "
        "Actually, I moved to Munich.",
    )
    kept = {h.item.content for h in mem.search("birthday allergy Munich", user_id="u", limit=20)}
    assert "我的生日是三月三日" in kept and "I am allergic to seafood" in kept
    assert any("Munich" in c for c in kept)
    refused = result["refused"]
    assert isinstance(refused, list) and [r["content"] for r in refused] == [
        "I enjoy long walks on the beach"
    ]
    assert "rate limit" in refused[0]["reason"] and "explicit requests" in refused[0]["reason"]


def test_protected_kinds_in_both_languages() -> None:
    assert never_rate_limited("我的生日是三月三日", "记住：我的生日是三月三日") == "explicit request"
    assert never_rate_limited("Remember that my manager is Ana") == "explicit request"
    assert never_rate_limited("我对花生过敏") == "safety fact"
    assert never_rate_limited("I am a vegetarian") == "safety fact"
    assert never_rate_limited("其实我上个月搬到上海了") == "correction"
    assert never_rate_limited("I no longer drink coffee") == "correction"
    assert never_rate_limited("I like jazz") is None
    assert never_rate_limited("我喜欢爵士乐") is None
