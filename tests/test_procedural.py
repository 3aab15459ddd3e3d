"""Procedural memory on real SQLite files: skills, failure patterns, decompositions and
``suggest``, through the sync and async drivers, the CLI and the REST service.

The default offline embedder (USE-m3) is used wherever meaning matters; the similarity
threshold is checked against the zh/en calibration pairs below (docs/procedural.md).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from jiyi.errors import InvalidInput
from jiyi.memory import AsyncMemory, Memory
from jiyi.procedural import MIN_SIMILARITY
from jiyi.store.sqlite import SQLiteStore

ROOT = Path(__file__).resolve().parent.parent


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def mem(tmp_path: Path, clock: Clock) -> Iterator[Memory]:
    with Memory(SQLiteStore(tmp_path / "p.db"), clock=clock) as m:
        yield m


def _all(mem: Memory, **scope: Any) -> list[Any]:
    return list(mem.list(limit=1000, **scope).items)


# ---------------------------------------------------------------- calibration pairs
# (first task, second task, same task?) - hard negatives share the object, not the job.

EN_PAIRS = [
    ("Optimize API performance", "Make the API respond faster", True),
    ("Write unit tests for the payment module", "Add unit test coverage to the payments code", True),
    (
        "Research competitors in the electric bike market",
        "Do a competitive analysis of e-bike companies",
        True,
    ),
    ("Migrate the database from MySQL to PostgreSQL", "Move our MySQL database over to Postgres", True),
    (
        "Summarize last week's customer feedback",
        "Give me a summary of the customer feedback from last week",
        True,
    ),
    ("Set up continuous integration for the repository", "Configure a CI pipeline for this repo", True),
    ("Translate the user manual into Japanese", "Produce a Japanese version of the user guide", True),
    ("Fix the memory leak in the image service", "Track down and fix the image service's memory leak", True),
    ("Plan a three-day trip to Kyoto", "Make an itinerary for 3 days in Kyoto", True),
    ("Prepare the quarterly sales report", "Put together the sales report for this quarter", True),
    ("Deploy the web app to Kubernetes", "Roll out the web application on a Kubernetes cluster", True),
    ("Refactor the authentication code", "Clean up and restructure the auth module", True),
    ("Find the cheapest flights from London to New York", "Search for low-cost flights London to NYC", True),
    ("Write a blog post about our new release", "Draft a blog article announcing the new version", True),
    ("Reduce the Docker image size", "Make our Docker images smaller", True),
    (
        "Analyze churn in the subscription data",
        "Look into why subscribers are cancelling, using the subscription data",
        True,
    ),
    ("Upgrade the project to Python 3.12", "Move the codebase to Python 3.12", True),
    ("Back up the production database every night", "Schedule nightly backups of the prod database", True),
    ("Build a dashboard of website traffic", "Create a dashboard showing site visits", True),
    ("Review the pull request for the search feature", "Do a code review of the search feature PR", True),
    ("Optimize API performance", "Write API documentation", False),
    ("Write unit tests for the payment module", "Fix a bug in the payment module", False),
    ("Research competitors in the electric bike market", "Sell our electric bikes in a new market", False),
    ("Migrate the database from MySQL to PostgreSQL", "Tune slow queries in PostgreSQL", False),
    ("Summarize last week's customer feedback", "Reply to customer complaints from last week", False),
    ("Set up continuous integration for the repository", "Archive the old repository", False),
    ("Translate the user manual into Japanese", "Update the screenshots in the user manual", False),
    ("Fix the memory leak in the image service", "Add image resizing to the image service", False),
    ("Plan a three-day trip to Kyoto", "Book a hotel in Tokyo", False),
    ("Prepare the quarterly sales report", "Hire two new sales representatives", False),
    ("Deploy the web app to Kubernetes", "Design a logo for the web app", False),
    ("Refactor the authentication code", "Add two-factor login for users", False),
    ("Find the cheapest flights from London to New York", "Find a good restaurant in New York", False),
    ("Write a blog post about our new release", "Write release notes for the mobile app", False),
    ("Reduce the Docker image size", "Reduce cloud hosting costs", False),
    ("Analyze churn in the subscription data", "Raise the subscription price", False),
    ("Upgrade the project to Python 3.12", "Teach a Python course for beginners", False),
    ("Back up the production database every night", "Restore the database from yesterday's backup", False),
    ("Build a dashboard of website traffic", "Improve the website's search ranking", False),
    ("Review the pull request for the search feature", "Implement autocomplete for the search box", False),
]

ZH_PAIRS = [
    ("优化 API 性能", "让接口响应更快", True),
    ("给支付模块写单元测试", "为支付相关代码补充单元测试", True),
    ("调研电动自行车市场的竞争对手", "做一份电动车品牌的竞品分析", True),
    ("把数据库从 MySQL 迁移到 PostgreSQL", "将 MySQL 数据库迁到 Postgres", True),
    ("总结上周的用户反馈", "把上周客户的意见汇总一下", True),
    ("给仓库配置持续集成", "为这个代码库搭建 CI 流水线", True),
    ("把用户手册翻译成日文", "出一个日语版的使用说明书", True),
    ("修复图片服务的内存泄漏", "排查并解决图片服务内存泄露的问题", True),
    ("规划一次三天的京都旅行", "安排京都三日游的行程", True),
    ("准备季度销售报告", "整理本季度的销售报表", True),
    ("把网站部署到 Kubernetes 上", "将 Web 应用发布到 k8s 集群", True),
    ("重构登录认证的代码", "整理并重写身份验证模块", True),
    ("查找伦敦飞纽约最便宜的机票", "搜一下伦敦到纽约的特价航班", True),
    ("写一篇介绍新版本的博客", "起草一篇发布新版本的博客文章", True),
    ("减小 Docker 镜像的体积", "让 Docker 镜像变小一点", True),
    ("分析订阅数据中的用户流失", "根据订阅数据看看用户为什么退订", True),
    ("把项目升级到 Python 3.12", "将代码库迁移到 Python 3.12", True),
    ("每晚备份生产数据库", "设置生产库的夜间自动备份", True),
    ("做一个网站流量的仪表盘", "搭建展示网站访问量的看板", True),
    ("审查搜索功能的合并请求", "给搜索功能的 PR 做代码评审", True),
    ("优化 API 性能", "编写 API 文档", False),
    ("给支付模块写单元测试", "修复支付模块的一个 bug", False),
    ("调研电动自行车市场的竞争对手", "把我们的电动自行车卖到新市场", False),
    ("把数据库从 MySQL 迁移到 PostgreSQL", "优化 PostgreSQL 的慢查询", False),
    ("总结上周的用户反馈", "回复上周的客户投诉", False),
    ("给仓库配置持续集成", "归档旧的代码仓库", False),
    ("把用户手册翻译成日文", "更新用户手册里的截图", False),
    ("修复图片服务的内存泄漏", "给图片服务增加缩放功能", False),
    ("规划一次三天的京都旅行", "预订东京的酒店", False),
    ("准备季度销售报告", "招聘两名销售代表", False),
    ("把网站部署到 Kubernetes 上", "为网站设计一个标志", False),
    ("重构登录认证的代码", "为用户增加双因素登录", False),
    ("查找伦敦飞纽约最便宜的机票", "在纽约找一家好餐厅", False),
    ("写一篇介绍新版本的博客", "为移动应用写发布说明", False),
    ("减小 Docker 镜像的体积", "降低云服务器的费用", False),
    ("分析订阅数据中的用户流失", "提高订阅价格", False),
    ("把项目升级到 Python 3.12", "给初学者讲一门 Python 课", False),
    ("每晚备份生产数据库", "从昨天的备份恢复数据库", False),
    ("做一个网站流量的仪表盘", "提升网站的搜索排名", False),
    ("审查搜索功能的合并请求", "给搜索框实现自动补全", False),
]


def _metrics(rows: list[tuple[float, bool]], threshold: float) -> tuple[float, float, float]:
    tp = sum(1 for s, same in rows if same and s >= threshold)
    fp = sum(1 for s, same in rows if not same and s >= threshold)
    positives = sum(1 for _, same in rows if same)
    correct = sum(1 for s, same in rows if (s >= threshold) == same)
    precision = tp / (tp + fp) if tp + fp else 1.0
    return precision, tp / positives, correct / len(rows)


def test_similarity_threshold_is_calibrated_on_one_half_and_holds_on_the_other(mem: Memory) -> None:
    """Even-numbered pairs choose the threshold (the lowest with no false match there,
    halfway to the next true match); odd-numbered pairs are only measured."""
    halves: dict[int, dict[str, list[tuple[float, bool]]]] = {0: {}, 1: {}}
    for lang, pairs in (("en", EN_PAIRS), ("zh", ZH_PAIRS)):
        vectors = mem.embedder.embed([t for a, b, _ in pairs for t in (a, b)])
        for i, (_, _, same) in enumerate(pairs):
            cosine = float(np.dot(vectors[2 * i], vectors[2 * i + 1]))
            # index within its label group, so each half gets 10 of each label per language
            half = (i % 20) % 2
            halves[half].setdefault(lang, []).append((cosine, same))
    calib = [r for rows in halves[0].values() for r in rows]
    worst_negative = max(s for s, same in calib if not same)
    next_positive = min(s for s, same in calib if same and s > worst_negative)
    assert round((worst_negative + next_positive) / 2, 2) == MIN_SIMILARITY
    report = {}
    for half, by_lang in halves.items():
        merged = [r for lang_rows in by_lang.values() for r in lang_rows]
        for lang, rows in [*by_lang.items(), ("all", merged)]:
            report[f"half{half}-{lang}"] = _metrics(rows, MIN_SIMILARITY)
    print({k: tuple(round(x, 2) for x in v) for k, v in report.items()})
    assert report["half0-all"][0] == 1.0  # by construction
    precision, recall, accuracy = report["half1-all"]
    assert precision >= 0.9 and recall >= 0.4 and accuracy >= 0.7, report["half1-all"]
    for lang in ("en", "zh"):
        assert report[f"half1-{lang}"][0] >= 0.9 and report[f"half1-{lang}"][1] >= 0.3, lang


# ---------------------------------------------------------------- skills


def test_record_skill_then_repeat_updates_the_same_item(mem: Memory, clock: Clock) -> None:
    first = mem.record_skill(
        "deep_research",
        ["web_search", "read_url", {"tool": "summarize", "max_words": 200}],
        description="research a topic in depth",
        task="Research competitors in the electric bike market",
        user_id="alice",
    )
    assert first.memory_type.value == "skill" and first.scope_key == "user:alice"
    assert (
        first.content == "Skill deep_research (research a topic in depth): web_search → read_url → summarize"
    )
    s = first.structured
    assert s is not None and s["kind"] == "skill" and s["skill_name"] == "deep_research"
    assert s["workflow"] == [
        {"step": 1, "tool": "web_search"},
        {"step": 2, "tool": "read_url"},
        {"step": 3, "tool": "summarize", "max_words": 200},
    ]
    assert (s["successes"], s["failures"]) == (1, 0)

    clock.now += timedelta(hours=1)
    # Another spelling of the same name; a failed run keeps the workflow that worked.
    second = mem.record_skill("Deep Research", ["web_search"], succeeded=False, user_id="alice")
    assert second.id == first.id and second.version == 2
    assert second.structured is not None
    assert (second.structured["successes"], second.structured["failures"]) == (1, 1)
    assert len(second.structured["workflow"]) == 3 and second.structured["skill_name"] == "deep_research"

    clock.now += timedelta(hours=1)
    third = mem.record_skill("deep-research", ["web_search", "summarize"], user_id="alice")
    assert third.id == first.id and third.version == 3 and third.structured is not None
    assert [w["tool"] for w in third.structured["workflow"]] == ["web_search", "summarize"]
    assert (third.structured["successes"], third.structured["failures"]) == (2, 1)
    assert third.content.endswith("web_search → summarize")
    assert [i.id for i in _all(mem, user_id="alice")] == [first.id]
    actions = [e.action.value for e in mem.history(first.id)]
    assert actions == ["add", "update", "update"]
    # another owner has its own skill of that name
    other = mem.record_skill("deep_research", ["web_search"], user_id="bob")
    assert other.id != first.id and other.version == 1


def test_skill_content_is_in_the_language_of_the_input(mem: Memory) -> None:
    item = mem.record_skill(
        "周报", ["fetch_calendar", "draft_report"], description="每周一写周报", user_id="li"
    )
    assert item.content == "技能 周报（每周一写周报）：fetch_calendar → draft_report"


# ---------------------------------------------------------------- failure patterns


def test_record_failure_then_repeat_merges_indicators(mem: Memory, clock: Clock) -> None:
    first = mem.record_failure(
        "rate_limit",
        indicators=["quickly", "urgent", "asap"],
        mitigation="Run the subtasks one after another to stay under the rate limit",
        severity=4,
        user_id="alice",
    )
    assert first.memory_type.value == "pattern"
    assert first.content == (
        "Failure pattern rate_limit (severity 4): signs: quickly, urgent, asap; "
        "mitigation: Run the subtasks one after another to stay under the rate limit"
    )
    s = first.structured
    assert s is not None and s["kind"] == "failure" and s["occurrences"] == 1 and s["severity"] == 4
    clock.now += timedelta(minutes=5)
    again = mem.record_failure(
        "Rate Limit",
        indicators=["URGENT", "紧急", "尽快"],
        mitigation="考虑串行执行避免限流",
        severity=5,
        user_id="alice",
    )
    assert again.id == first.id and again.version == 2 and again.structured is not None
    assert again.structured["indicators"] == ["quickly", "urgent", "asap", "紧急", "尽快"]
    assert again.structured["occurrences"] == 2 and again.structured["severity"] == 5
    assert again.structured["mitigation"] == "考虑串行执行避免限流"
    assert again.content.startswith(
        "失败模式 rate_limit（严重度 5）：征兆：quickly、urgent、asap、紧急、尽快"
    )
    assert len(_all(mem, user_id="alice")) == 1


# ---------------------------------------------------------------- decompositions


def test_record_decomposition_updates_on_same_near_identical_and_similar_wording(mem: Memory) -> None:
    subtasks = ["分析慢接口", "增加缓存", "优化数据库查询"]
    first = mem.record_decomposition(
        "优化 API 性能", subtasks, strategy="parallel", succeeded=True, user_id="u"
    )
    assert first.content == "把「优化 API 性能」拆成 3 个并行子任务：分析慢接口；增加缓存；优化数据库查询"
    assert first.structured == {
        "kind": "decomposition",
        "query_pattern": "优化 API 性能",
        "subtasks": subtasks,
        "strategy": "parallel",
        "success_rate": 1.0,
        "usage_count": 1,
    }
    same = mem.record_decomposition(
        "优化 API 性能", subtasks, strategy="parallel", succeeded=False, user_id="u"
    )
    near = mem.record_decomposition(
        "优化API的性能", subtasks, strategy="parallel", succeeded=True, user_id="u"
    )
    assert first.id == same.id == near.id and near.version == 3 and near.structured is not None
    assert near.structured["usage_count"] == 3
    assert near.structured["success_rate"] == pytest.approx(2 / 3)
    assert "variants" not in near.structured  # same words: nothing new to keep

    trip = ["订机票", "订酒店", "列出景点"]
    a = mem.record_decomposition(
        "规划一次三天的京都旅行", trip, strategy="sequential", succeeded=True, user_id="u"
    )
    b = mem.record_decomposition(
        "安排京都三日游的行程", trip, strategy="sequential", succeeded=True, user_id="u"
    )
    assert b.id == a.id and b.structured is not None and b.structured["usage_count"] == 2
    assert b.structured["variants"] == ["安排京都三日游的行程"]
    assert b.structured["query_pattern"] == "规划一次三天的京都旅行"

    # A different plan, or the same plan run another way, is another decomposition.
    other = mem.record_decomposition(
        "优化 API 性能", ["加机器"], strategy="parallel", succeeded=True, user_id="u"
    )
    serial = mem.record_decomposition(
        "优化 API 性能", subtasks, strategy="sequential", succeeded=True, user_id="u"
    )
    assert len({first.id, other.id, serial.id}) == 3
    # A different task with the same plan is another decomposition too.
    docs = mem.record_decomposition(
        "编写 API 文档", subtasks, strategy="parallel", succeeded=True, user_id="u"
    )
    assert docs.id != first.id
    assert len(_all(mem, user_id="u")) == 5


def test_decomposition_content_in_english(mem: Memory) -> None:
    item = mem.record_decomposition(
        "Optimize API performance",
        ["Profile slow endpoints", "Add caching"],
        strategy="sequential",
        succeeded=True,
        project_id="shop",
    )
    assert item.scope_key == "project:shop"
    assert item.content == (
        "Split “Optimize API performance” into 2 sequential subtasks: Profile slow endpoints; Add caching"
    )
    hits = mem.search("how to speed up the API", project_id="shop", memory_types="pattern")
    assert hits and hits[0].item.id == item.id


# ---------------------------------------------------------------- suggest


def test_suggest_finds_a_paraphrased_task_in_chinese(mem: Memory) -> None:
    item = mem.record_decomposition(
        "规划一次三天的京都旅行",
        ["订机票", "订酒店", "列出每天的景点"],
        strategy="sequential",
        succeeded=True,
        user_id="li",
    )
    got = mem.suggest("安排京都三日游的行程", user_id="li")
    assert got.found and got.kind == "decomposition" and got.item_id == item.id
    assert got.subtasks == ("订机票", "订酒店", "列出每天的景点") and got.strategy == "sequential"
    assert got.confidence == 1.0 and got.usage_count == 1 and got.similarity >= MIN_SIMILARITY
    assert got.matched == "规划一次三天的京都旅行"
    assert got.reason.startswith("参考相似的成功任务「规划一次三天的京都旅行」")
    assert got.risks == ()
    # Using the suggestion counts as a use of the item (keeps it from the lifecycle's archive).
    touched = mem.get(item.id)
    assert touched.access_count == 1 and touched.last_used_at is not None


def test_suggest_finds_a_paraphrased_task_in_english_and_prefers_the_proven_plan(mem: Memory) -> None:
    task = "Find the cheapest flights from London to New York"
    lucky = mem.record_decomposition(
        task, ["Ask one airline"], strategy="sequential", succeeded=True, user_id="ann"
    )
    proven_steps = ["Search three fare sites", "Compare prices", "Check baggage fees"]
    for ok in [True] * 9 + [False] + [True] * 10:
        proven = mem.record_decomposition(
            task, proven_steps, strategy="parallel", succeeded=ok, user_id="ann"
        )
    assert proven.structured is not None and proven.structured["success_rate"] == pytest.approx(0.95)
    got = mem.suggest("Search for low-cost flights London to NYC", user_id="ann")
    assert got.found and got.item_id == proven.id != lucky.id
    assert list(got.subtasks) == proven_steps and got.strategy == "parallel"
    assert got.confidence == pytest.approx(0.95) and got.usage_count == 20
    assert "similar successful task" in got.reason and "19 of 20 runs succeeded" in got.reason


def test_suggest_a_skill_from_a_task_it_was_used_for(mem: Memory) -> None:
    mem.record_skill(
        "translate_doc",
        ["split_sections", "translate", "review_terms"],
        task="Translate the user manual into Japanese",
        user_id="ann",
    )
    got = mem.suggest("Produce a Japanese version of the user guide", user_id="ann")
    assert got.kind == "skill" and got.skill_name == "translate_doc"
    assert [s["tool"] for s in got.workflow] == ["split_sections", "translate", "review_terms"]
    assert got.strategy == "sequential" and got.confidence == 1.0
    assert got.reason.startswith("Skill translate_doc fits a similar task")


def test_suggest_refuses_unsuccessful_or_dissimilar_plans(mem: Memory) -> None:
    for ok in (True, False, False):
        mem.record_decomposition(
            "Reduce the Docker image size",
            ["Use a slim base image", "Multi-stage build"],
            strategy="sequential",
            succeeded=ok,
            user_id="ann",
        )
    poor = mem.suggest("Make our Docker images smaller", user_id="ann")
    assert not poor.found and poor.confidence == 0 and poor.subtasks == () and poor.item_id is None
    assert "did not succeed often enough (1 of 3 runs succeeded; below 90%)" in poor.reason
    # ... unless the caller accepts a lower success rate
    assert mem.suggest("Make our Docker images smaller", user_id="ann", min_success_rate=0.3).found
    far = mem.suggest("Reduce cloud hosting costs", user_id="ann", min_success_rate=0.0)
    assert not far.found and far.reason.startswith("Nothing similar enough: the closest is")


def test_suggest_with_nothing_in_memory_is_empty_and_never_made_up(mem: Memory) -> None:
    got = mem.suggest("写一份季度总结", user_id="nobody")
    assert got.kind is None and not got.found and got.confidence == 0.0
    assert got.subtasks == () and got.workflow == () and got.strategy is None and got.risks == ()
    assert got.reason == "记忆中没有可参考的任务分解或技能"
    assert got.to_json_dict()["found"] is False
    assert mem.suggest("Write the quarterly summary", user_id="nobody").reason.startswith("No decomposition")


def test_suggest_only_looks_in_the_given_scopes_and_tenant(mem: Memory) -> None:
    mem.record_decomposition(
        "Plan a three-day trip to Kyoto", ["Book flights"], strategy="sequential", succeeded=True, user_id="a"
    )
    assert mem.suggest("Plan a three-day trip to Kyoto", user_id="a").found
    assert not mem.suggest("Plan a three-day trip to Kyoto", user_id="b").found
    assert not mem.suggest("Plan a three-day trip to Kyoto", user_id="a", tenant_id="other").found
    # a project's learnings reach a user who asks with that project too
    mem.record_decomposition(
        "Deploy the web app to Kubernetes",
        ["Build image"],
        strategy="sequential",
        succeeded=True,
        project_id="p",
    )
    assert mem.suggest(
        "Roll out the web application on a Kubernetes cluster", user_id="b", project_id="p"
    ).found


# ---------------------------------------------------------------- risks


def test_risks_from_english_and_chinese_indicators_most_severe_first(mem: Memory) -> None:
    mem.record_failure(
        "rate_limit",
        indicators=["quickly", "urgent", "asap", "紧急", "尽快"],
        mitigation="考虑串行执行避免限流",
        severity=3,
        user_id="li",
    )
    mem.record_failure(
        "data_loss",
        indicators=["drop table", "删除数据"],
        mitigation="Back up first and run it in a transaction",
        severity=5,
        user_id="li",
    )
    mem.record_failure("typo", indicators=["typo"], mitigation="spell-check", severity=1, user_id="li")

    en = mem.suggest("Quick, urgent: drop the old table before the demo", user_id="li")
    assert not en.found
    assert [r.pattern for r in en.risks] == ["data_loss", "rate_limit"]
    assert en.risks[0].severity == 5 and en.risks[0].matched_indicators == ("drop table",)
    assert en.risks[1].matched_indicators == ("quickly", "urgent")  # "quick" matches "quickly"
    assert en.risks[1].mitigation == "考虑串行执行避免限流"
    assert en.risks[1].reason == "the task mentions “quickly”, “urgent”"

    zh = mem.suggest("这个需求很紧急，请尽快删除数据后重新导入", user_id="li")
    assert [r.pattern for r in zh.risks] == ["data_loss", "rate_limit"]
    assert zh.risks[0].matched_indicators == ("删除数据",)
    assert zh.risks[1].matched_indicators == ("紧急", "尽快")
    assert zh.risks[1].reason == "任务中出现「紧急」、「尽快」"

    assert mem.suggest("整理一下会议纪要", user_id="li").risks == ()


def test_risk_from_a_very_similar_failure_description(mem: Memory) -> None:
    mem.record_failure(
        "leak_hunt",
        indicators=["heap dump"],
        description="Fix the memory leak in the image service",
        mitigation="Reproduce under load with a profiler before changing code",
        severity=2,
        user_id="ann",
    )
    got = mem.suggest("Track down and fix the image service's memory leak", user_id="ann")
    assert [r.pattern for r in got.risks] == ["leak_hunt"]
    assert got.risks[0].matched_indicators == () and got.risks[0].similarity >= MIN_SIMILARITY
    assert got.risks[0].reason.startswith("the task resembles this failure")


# ---------------------------------------------------------------- input checks


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (
            lambda m: m.record_failure("x", indicators=["y"], mitigation="z", severity=7, user_id="u"),
            "severity",
        ),
        (
            lambda m: m.record_failure("x", indicators=["y"], mitigation="z", severity=0, user_id="u"),
            "severity",
        ),
        (
            lambda m: m.record_failure("x", indicators=["y"], mitigation="z", severity=True, user_id="u"),
            "severity",
        ),
        (
            lambda m: m.record_failure("x", indicators=[], mitigation="z", severity=2, user_id="u"),
            "indicators",
        ),
        (
            lambda m: m.record_failure("x", indicators="urgent", mitigation="z", severity=2, user_id="u"),
            "indicators",
        ),
        (
            lambda m: m.record_failure("x", indicators=["!!!"], mitigation="z", severity=2, user_id="u"),
            "indicators[0]",
        ),
        (
            lambda m: m.record_failure("x", indicators=["y"], mitigation=" ", severity=2, user_id="u"),
            "mitigation",
        ),
        (lambda m: m.record_skill("s", [], user_id="u"), "workflow"),
        (lambda m: m.record_skill("s", "web_search", user_id="u"), "workflow"),
        (lambda m: m.record_skill("s", [{"args": 1}], user_id="u"), "workflow[0]"),
        (lambda m: m.record_skill("s", [{"tool": "t", "f": object()}], user_id="u"), "workflow[0]"),
        (lambda m: m.record_skill("", ["t"], user_id="u"), "name"),
        (lambda m: m.record_skill("s", ["t"], succeeded="yes", user_id="u"), "succeeded"),
        (lambda m: m.record_skill("s", ["t"]), "user_id"),
        (lambda m: m.record_skill("s", ["t"], user_id="u", scope="session"), "scope"),
        (lambda m: m.record_skill("s", ["t"], scope="project", user_id="u"), "scope"),
        (
            lambda m: m.record_decomposition("t", ["a"], strategy="random", succeeded=True, user_id="u"),
            "strategy",
        ),
        (
            lambda m: m.record_decomposition("t", [], strategy="parallel", succeeded=True, user_id="u"),
            "subtasks",
        ),
        (
            lambda m: m.record_decomposition(
                "t", ["a", ""], strategy="parallel", succeeded=True, user_id="u"
            ),
            "subtasks[1]",
        ),
        (
            lambda m: m.record_decomposition(" ", ["a"], strategy="parallel", succeeded=True, user_id="u"),
            "task",
        ),
        (
            lambda m: m.record_decomposition(
                "t" * 1001, ["a"], strategy="parallel", succeeded=True, user_id="u"
            ),
            "task",
        ),
        (
            lambda m: m.record_decomposition("t", ["a"], strategy="parallel", succeeded=None, user_id="u"),
            "succeeded",
        ),
        (lambda m: m.suggest("", user_id="u"), "task"),
        (lambda m: m.suggest("t"), "user_id"),
        (lambda m: m.suggest("t", user_id="u", min_similarity=2), "min_similarity"),
        (lambda m: m.suggest("t", user_id="u", min_success_rate=-0.1), "min_success_rate"),
    ],
)
def test_invalid_input_is_refused_and_writes_nothing(mem: Memory, call: Any, field: str) -> None:
    with pytest.raises(InvalidInput) as err:
        call(mem)
    assert err.value.field == field, str(err.value)
    assert str(err.value)
    assert mem.stats().total == 0


def test_sensitive_data_is_redacted_everywhere(mem: Memory) -> None:
    item = mem.record_decomposition(
        "Email the report to jane.doe@example.com",
        ["Write the report", "Send it to jane.doe@example.com"],
        strategy="sequential",
        succeeded=True,
        user_id="u",
    )
    dumped = json.dumps(item.to_json_dict())
    assert "jane.doe@example.com" not in dumped and "[REDACTED_EMAIL]" in item.content


def test_text_is_kept_to_one_line(mem: Memory) -> None:
    item = mem.record_failure(
        "flaky\ntests", indicators=["ci\n"], mitigation="rerun\n\nonce", severity=2, user_id="u"
    )
    assert "\n" not in item.content and item.structured is not None
    assert item.structured["pattern"] == "flaky tests" and item.structured["mitigation"] == "rerun once"


# ---------------------------------------------------------------- async driver


async def test_async_driver_records_and_suggests(tmp_path: Path) -> None:
    async with AsyncMemory(SQLiteStore(tmp_path / "a.db")) as amem:
        first = await amem.record_decomposition(
            "每晚备份生产数据库",
            ["导出数据", "上传到对象存储"],
            strategy="sequential",
            succeeded=True,
            user_id="u",
        )
        again = await amem.record_decomposition(
            "每晚备份生产数据库",
            ["导出数据", "上传到对象存储"],
            strategy="sequential",
            succeeded=True,
            user_id="u",
        )
        assert again.id == first.id and again.version == 2
        skill = await amem.record_skill("backup", ["pg_dump", "s3_upload"], user_id="u")
        failure = await amem.record_failure(
            "disk_full", indicators=["大文件"], mitigation="先检查磁盘空间", severity=4, user_id="u"
        )
        got = await amem.suggest("每晚备份生产数据库，注意大文件", user_id="u")
        assert got.found and got.item_id == first.id and got.usage_count == 2
        assert [r.item_id for r in got.risks] == [failure.id]
        assert skill.structured is not None and skill.structured["successes"] == 1


# ---------------------------------------------------------------- CLI


def _jiyi(db: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
    env.pop("JIYI_EMBEDDER", None)
    proc = subprocess.run(
        [sys.executable, "-m", "jiyi.cli", "--db", str(db), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"jiyi {' '.join(args)} failed ({proc.returncode}): {proc.stderr}")
    return proc


def _cli(capsys: pytest.CaptureFixture[str], db: Path, *args: str) -> tuple[int, str, str]:
    """The same ``main`` in this process (the embedder is loaded once)."""
    from jiyi.cli import main

    code = main(["--db", str(db), *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_learn_and_suggest(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "cli.db"
    # one real subprocess: the installed entry point works end to end
    out = _jiyi(
        db, "learn", "decomposition", "规划一次三天的京都旅行", "--subtask", "订机票", "--subtask", "订酒店",
        "--strategy", "sequential", "--user", "li",
    ).stdout  # fmt: skip
    assert out.startswith("recorded decomposition (version 1; used 1 time(s), success rate 100%)")
    code, out, _ = _cli(
        capsys, db, "learn", "decomposition", "规划一次三天的京都旅行", "--subtask", "订机票", "--subtask",
        "订酒店", "--strategy", "sequential", "--failed", "--user", "li", "--json",
    )  # fmt: skip
    item = json.loads(out)
    assert code == 0 and item["version"] == 2 and item["structured"]["success_rate"] == 0.5
    code, out, _ = _cli(
        capsys, db, "learn", "skill", "trip_planner", "--step", "search_flights", "--step", "book_hotel",
        "--task", "安排京都三日游的行程", "--user", "li", "--json",
    )  # fmt: skip
    assert json.loads(out)["structured"]["workflow"][1] == {"step": 2, "tool": "book_hotel"}
    code, out, _ = _cli(
        capsys, db, "learn", "failure", "rate_limit", "--indicator", "尽快", "--mitigation", "串行执行",
        "--severity", "4", "--user", "li",
    )  # fmt: skip
    assert code == 0 and out.startswith("recorded failure (version 1; seen 1 time(s))")

    got = json.loads(_jiyi(db, "suggest", "安排京都三日游的行程，尽快", "--user", "li", "--json").stdout)
    # the decomposition succeeded only half the time; the skill always did
    assert got["found"] and got["kind"] == "skill" and got["skill_name"] == "trip_planner"
    assert [r["pattern"] for r in got["risks"]] == ["rate_limit"]
    _, text, _ = _cli(capsys, db, "suggest", "安排京都三日游的行程，尽快", "--user", "li")
    assert (
        "suggested skill" in text and "1. search_flights" in text and "risk [severity 4] rate_limit" in text
    )
    _, none, _ = _cli(capsys, db, "suggest", "写周报", "--user", "li")
    assert none.startswith("no suggestion: ")

    code, _, err = _cli(
        capsys, db, "learn", "failure", "x", "--indicator", "y", "--mitigation", "z", "--severity", "7",
        "--user", "li",
    )  # fmt: skip
    assert code == 1 and "severity must be an integer from 1 (minor) to 5 (critical)" in err
    with pytest.raises(SystemExit) as usage:
        _cli(capsys, db, "learn", "decomposition", "t", "--subtask", "a", "--strategy", "random")
    assert usage.value.code == 2 and "invalid choice" in capsys.readouterr().err
    code, _, err = _cli(capsys, db, "suggest", "t", "--session", "s1")
    assert code == 1 and "not a session" in err
    for kind in ("skill", "failure", "decomposition"):
        with pytest.raises(SystemExit):
            _cli(capsys, db, "learn", kind, "--help")
        assert "Example: jiyi learn " + kind in capsys.readouterr().out


# ---------------------------------------------------------------- REST


@pytest.fixture
async def rest(tmp_path: Path) -> AsyncIterator[tuple[httpx.AsyncClient, dict[str, str]]]:
    pytest.importorskip("fastapi")
    from jiyi.server.app import create_app
    from jiyi.server.auth import ApiKeys

    amem = AsyncMemory(SQLiteStore(tmp_path / "rest.db"))
    keys = ApiKeys()
    made = {
        "owner": keys.add("acme", "owner")[1],
        "viewer": keys.add("acme", "viewer")[1],
        "other": keys.add("globex", "owner")[1],
        "editor": keys.add("acme", "editor")[1],
        "editor2": keys.add("acme", "editor")[1],
    }
    app = create_app(amem, keys=keys, rate_limit_per_minute=None)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
        yield client, made
    await amem.aclose()


async def test_rest_learnings_and_suggest(rest: tuple[httpx.AsyncClient, dict[str, str]]) -> None:
    client, keys = rest
    owner = {"X-API-Key": keys["owner"]}
    body = {
        "kind": "decomposition",
        "task": "Plan a three-day trip to Kyoto",
        "subtasks": ["Book flights", "Book a hotel"],
        "strategy": "sequential",
        "succeeded": True,
        "user_id": "ann",
    }
    r = await client.post("/v1/learnings", json=body, headers=owner)
    assert r.status_code == 201, r.text
    first = r.json()
    assert first["structured"]["kind"] == "decomposition" and first["tenant_id"] == "acme"
    r = await client.post("/v1/learnings", json=body, headers=owner)
    assert r.status_code == 201 and r.json()["id"] == first["id"] and r.json()["version"] == 2
    r = await client.post(
        "/v1/learnings",
        json={
            "kind": "skill",
            "name": "trip_planner",
            "workflow": ["search_flights", {"tool": "book_hotel", "nights": 3}],
            "user_id": "ann",
        },
        headers=owner,
    )
    assert r.status_code == 201, r.text
    assert r.json()["structured"]["workflow"][1] == {"step": 2, "tool": "book_hotel", "nights": 3}
    r = await client.post(
        "/v1/learnings",
        json={
            "kind": "failure",
            "pattern": "rate_limit",
            "indicators": ["asap"],
            "mitigation": "Go sequential",
            "severity": 3,
            "user_id": "ann",
        },
        headers=owner,
    )
    assert r.status_code == 201, r.text

    r = await client.post(
        "/v1/suggest",
        json={"task": "Make an itinerary for 3 days in Kyoto asap", "user_id": "ann"},
        headers=owner,
    )
    assert r.status_code == 200, r.text
    got = r.json()
    assert got["found"] and got["kind"] == "decomposition" and got["item_id"] == first["id"]
    assert got["subtasks"] == ["Book flights", "Book a hotel"] and got["confidence"] == 1.0
    assert [x["pattern"] for x in got["risks"]] == ["rate_limit"]
    # read-only keys may ask, not record; other tenants see nothing
    viewer = {"X-API-Key": keys["viewer"]}
    assert (
        await client.post("/v1/suggest", json={"task": "x", "user_id": "ann"}, headers=viewer)
    ).status_code == 200
    assert (await client.post("/v1/learnings", json=body, headers=viewer)).status_code == 403
    other = {"X-API-Key": keys["other"]}
    r = await client.post("/v1/suggest", json={"task": body["task"], "user_id": "ann"}, headers=other)
    assert r.status_code == 200 and not r.json()["found"] and r.json()["confidence"] == 0
    r = await client.post(
        "/v1/suggest", json={"task": "x", "user_id": "ann", "tenant_id": "acme"}, headers=other
    )
    assert r.status_code == 404


@pytest.mark.parametrize(
    "body",
    [
        {
            "kind": "failure",
            "pattern": "p",
            "indicators": ["i"],
            "mitigation": "m",
            "severity": 7,
            "user_id": "a",
        },
        {"kind": "skill", "name": "s", "workflow": [], "user_id": "a"},
        {
            "kind": "decomposition",
            "task": "t",
            "subtasks": ["a"],
            "strategy": "random",
            "succeeded": True,
            "user_id": "a",
        },
        {"kind": "recipe", "name": "s", "user_id": "a"},
        {"kind": "skill", "name": "s", "workflow": ["t"]},
        {
            "kind": "failure",
            "pattern": "p",
            "indicators": ["!!!"],
            "mitigation": "m",
            "severity": 2,
            "user_id": "a",
        },
    ],
)
async def test_rest_invalid_learnings_are_422(
    rest: tuple[httpx.AsyncClient, dict[str, str]], body: dict[str, Any]
) -> None:
    client, keys = rest
    r = await client.post("/v1/learnings", json=body, headers={"X-API-Key": keys["owner"]})
    assert r.status_code == 422, r.text
    assert r.json()["error"]["code"] == "invalid_input" and r.json()["error"]["message"]


def test_rest_schema_and_schemathesis(tmp_path: Path) -> None:
    """The two procedural operations, a few generated requests each, against the OpenAPI document."""
    schemathesis = pytest.importorskip("schemathesis")
    from hypothesis import HealthCheck, Phase, given, settings
    from schemathesis.specs.openapi.checks import positive_data_acceptance

    from jiyi.server.app import create_app
    from jiyi.server.auth import ApiKeys

    memory = AsyncMemory(SQLiteStore(tmp_path / "st.db"), embedder="hash:256")
    keys = ApiKeys()
    key = keys.add("acme", "owner")[1]
    app = create_app(memory, keys=keys, rate_limit_per_minute=None)
    schema = schemathesis.openapi.from_asgi("/openapi.json", app).include(
        path_regex=r"^/v1/(suggest|learnings)$"
    )
    operations = [result.ok() for result in schema.get_all_operations()]
    assert {op.path for op in operations} == {"/v1/suggest", "/v1/learnings"}
    try:
        for operation in operations:

            @given(case=operation.as_strategy())
            @settings(
                max_examples=15,
                deadline=None,
                phases=[Phase.explicit, Phase.generate],
                suppress_health_check=list(HealthCheck),
                database=None,
            )
            def check(case: Any) -> None:
                case.call_and_validate(headers={"X-API-Key": key}, excluded_checks=[positive_data_acceptance])

            check()
    finally:
        memory.store.close()


# ---------------------------------------------------------------- docs


def test_docs_examples_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    page = (ROOT / "docs" / "procedural.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", page, re.S)
    assert blocks
    monkeypatch.chdir(tmp_path)
    scope: dict[str, Any] = {}
    for block in blocks:
        exec(compile(block, "docs/procedural.md", "exec"), scope)


def test_owner_only_learnings_recorded_again_update_the_creators_own_item(mem: Memory) -> None:
    from jiyi.store.base import Viewer

    k1 = Viewer(actor="k1", projects=("p",))
    k2 = Viewer(actor="k2", projects=("p",))
    first = mem.record_skill("deploy", ["build", "push"], project_id="p", visibility="owner_only", viewer=k1)
    again = mem.record_skill("deploy", ["build", "push"], project_id="p", visibility="owner_only", viewer=k1)
    other = mem.record_skill("deploy", ["build", "push"], project_id="p", visibility="owner_only", viewer=k2)
    assert again.id == first.id and again.structured is not None and again.structured["successes"] == 2
    assert other.id != first.id and other.metadata["created_by"] == "k2"
    plan = ["collect logs", "find the error", "fix it"]
    d1 = mem.record_decomposition(
        "Debug the failing build",
        plan,
        strategy="sequential",
        succeeded=True,
        project_id="p",
        visibility="owner_only",
        viewer=k1,
    )
    d2 = mem.record_decomposition(
        "Debug the failing build",
        plan,
        strategy="sequential",
        succeeded=True,
        project_id="p",
        visibility="owner_only",
        viewer=k1,
    )
    assert d2.id == d1.id and d2.structured is not None and d2.structured["usage_count"] == 2
    # Library use without a viewer: owner_only learnings without a creator still merge.
    a = mem.record_failure(
        "oom",
        indicators=["memory"],
        mitigation="stream it",
        severity=3,
        project_id="q",
        visibility="owner_only",
    )
    b = mem.record_failure(
        "oom",
        indicators=["heap"],
        mitigation="stream it",
        severity=3,
        project_id="q",
        visibility="owner_only",
    )
    assert b.id == a.id and b.structured is not None and b.structured["occurrences"] == 2


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda m: m.suggest("deploy the app", user_id="u", tenant_id=5), "tenant_id"),
        (lambda m: m.suggest("deploy the app", user_id="u", touch="no"), "touch"),
        (lambda m: m.suggest("deploy the app", user_id="u", viewer="key-1"), "viewer"),
        (lambda m: m.record_skill("deploy", ["build"], user_id="u", actor=5), "actor"),
        (lambda m: m.record_skill("deploy", ["build"], user_id="u", tenant_id=""), "tenant_id"),
        (
            lambda m: m.record_failure(
                "oom", indicators=["memory"], mitigation="stream", severity=3, user_id="u", viewer="k"
            ),
            "viewer",
        ),
    ],
)
def test_bad_caller_arguments_are_invalid_input(mem: Memory, call: Any, field: str) -> None:
    with pytest.raises(InvalidInput) as err:
        call(mem)
    assert err.value.field == field
    assert _all(mem) == []


async def test_rest_editors_never_change_another_keys_learning(
    rest: tuple[httpx.AsyncClient, dict[str, str]],
) -> None:
    client, keys = rest
    skill = {"kind": "skill", "name": "deep_research", "user_id": "ann", "succeeded": True}
    mine = await client.post(
        "/v1/learnings",
        json={**skill, "workflow": ["web_search", "read_url", "summarize"]},
        headers={"X-API-Key": keys["editor"]},
    )
    assert mine.status_code == 201, mine.text
    theirs = await client.post(
        "/v1/learnings", json={**skill, "workflow": ["guess"]}, headers={"X-API-Key": keys["editor2"]}
    )
    assert theirs.status_code == 201, theirs.text
    assert theirs.json()["id"] != mine.json()["id"]  # a second item, not a new version of the first
    again = await client.post(
        "/v1/learnings", json={**skill, "workflow": ["web_search"]}, headers={"X-API-Key": keys["editor"]}
    )
    assert again.json()["id"] == mine.json()["id"] and again.json()["version"] == 2
    first = await client.get(f"/v1/memories/{mine.json()['id']}", headers={"X-API-Key": keys["owner"]})
    assert [s["tool"] for s in first.json()["structured"]["workflow"]] == ["web_search"]
    # An owner key may update any learning of its tenant.
    by_owner = await client.post(
        "/v1/learnings",
        json={**skill, "workflow": ["web_search", "summarize"]},
        headers={"X-API-Key": keys["owner"]},
    )
    assert by_owner.json()["id"] in {mine.json()["id"], theirs.json()["id"]}
