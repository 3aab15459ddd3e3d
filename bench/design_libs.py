"""Hand-written parts against the maintained libraries that could replace them (docs/design.md).

Each section runs jiyi's own code and the candidate on the same inputs and prints what
they agree on, how fast each call is and what importing the candidate costs. A
candidate that is not installed is reported as such; install the candidates somewhere
outside the project to measure them, e.g.::

    pip install --target /tmp/dlibs json-repair dateparser phonenumbers
    python bench/design_libs.py --libs /tmp/dlibs

Nothing here needs the network. Timings are per call on a shared 2-core machine: noisy,
compare within one run only.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import os
import random
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT)]  # the test cases are the inputs

NOW = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)  # a Tuesday


def per_call_us(fn: Callable[[], object], repeat: int) -> float:
    """Median of 5 runs of ``repeat`` calls, in microseconds per call."""
    runs = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(repeat):
            fn()
        runs.append((time.perf_counter() - start) / repeat * 1e6)
    return sorted(runs)[2]


def import_ms(module: str, libs: str | None) -> float:
    """Median of 3 cold imports of ``module`` in a fresh interpreter, in milliseconds."""
    setup = f"import os, sys; sys.path += {libs!r}.split(os.pathsep); " if libs else ""
    code = f"{setup}import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"
    runs = [float(subprocess.check_output([sys.executable, "-c", code], text=True)) * 1000 for _ in range(3)]
    return sorted(runs)[1]


def installed_kb(dist: str) -> int | None:
    """Size on disk of an installed distribution's files (without its dependencies)."""
    try:
        files = importlib.metadata.distribution(dist).files or []
    except importlib.metadata.PackageNotFoundError:
        return None
    return sum(f.locate().stat().st_size for f in files if Path(str(f.locate())).is_file()) // 1024


def have(module: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError:
        print(f"  ({module} not installed: skipped)")
        return None


# ---------------------------------------------------------------- tool arguments


def _mutations(schema: dict[str, Any], rng: random.Random) -> list[Any]:
    """Values of every JSON type, plus ones at and past the schema's bounds."""
    values: list[Any] = [None, True, 0, -1, 2.5, 3.0, "", "x", "  ", [], ["a"], [""], [3], {}, {"tool": ""}]
    for bound in ("minimum", "maximum"):
        if bound in schema:
            values += [schema[bound], schema[bound] + 1, schema[bound] - 1, schema[bound] - 0.5]
    values += list(schema.get("enum", []))
    values += [[{"tool": "t", "args": "x"}], [{"args": 1}], ["a", 2], "a" * rng.choice([1, 300, 5000])]
    return values


def tool_arguments(libs: str | None) -> None:
    print("\n## Tool arguments: validate_arguments vs jsonschema (Draft 2020-12)")
    jsonschema = have("jsonschema")
    if jsonschema is None:
        return
    from jiyi.integrations.tools import ToolCallError, validate_arguments
    from test_tools import ALL_TOOLS, BAD, GOOD, parameters

    def hand_ok(params: dict[str, Any], args: dict[str, Any]) -> bool:
        try:
            validate_arguments(params, args)
        except ToolCallError:
            return False
        return True

    rng = random.Random(16)
    cases = [(parameters(n), a) for n, a in GOOD + BAD]
    for tool in ALL_TOOLS:  # random arguments: each property set to a mutated value
        params = tool["function"]["parameters"]
        props = params.get("properties", {})
        for _ in range(400):
            args = {k: rng.choice(_mutations(s, rng)) for k, s in props.items() if rng.random() < 0.6}
            if rng.random() < 0.1:
                args["extra"] = 1
            cases.append((params, args))
    validators = {id(p): jsonschema.Draft202012Validator(p) for p, _ in cases}
    disagree = [(p, a) for p, a in cases if hand_ok(p, a) != validators[id(p)].is_valid(a)]
    print(f"  cases: {len(cases)} ({len(GOOD)} good + {len(BAD)} bad from tests/test_tools.py, rest random)")
    accepted = sum(validators[id(p)].is_valid(a) for p, a in cases)
    print(f"  accepted by jsonschema: {accepted}; accept/refuse disagreements: {len(disagree)}")
    for _, a in disagree[:5]:
        print("   ", a)
    good_p, good_a = parameters("memory_learn"), next(a for n, a in GOOD if n == "memory_learn")
    bad_p, bad_a = parameters("memory_search"), {"limit": 0, "memory_type": "opinion", "colour": "red"}
    v_good, v_bad = jsonschema.Draft202012Validator(good_p), jsonschema.Draft202012Validator(bad_p)
    print(
        f"  per call, valid memory_learn:  hand {per_call_us(lambda: validate_arguments(good_p, good_a), 2000):.1f} µs, "
        f"jsonschema {per_call_us(lambda: list(v_good.iter_errors(good_a)), 2000):.1f} µs (validator built once)"
    )
    print(
        f"  per call, 3-problem search:    hand {per_call_us(lambda: hand_ok(bad_p, bad_a), 2000):.1f} µs, "
        f"jsonschema {per_call_us(lambda: list(v_bad.iter_errors(bad_a)), 2000):.1f} µs"
    )
    print(f"  import jsonschema: {import_ms('jsonschema', libs):.0f} ms")
    for dist in ("jsonschema", "referencing", "rpds-py", "attrs", "jsonschema-specifications"):
        print(f"  installed {dist}: {installed_kb(dist)} KB")
    print("  messages for", bad_a)
    try:
        validate_arguments(bad_p, bad_a)
    except ToolCallError as exc:
        print("    hand:      ", exc)
    print("    jsonschema:", "; ".join(e.message for e in v_bad.iter_errors(bad_a)))
    learn = {"kind": "skill", "workflow": [{"args": "x"}, 3]}
    v_learn = jsonschema.Draft202012Validator(parameters("memory_learn"))
    try:
        validate_arguments(parameters("memory_learn"), learn)
    except ToolCallError as exc:
        print("    hand:      ", exc)
    print("    jsonschema:", "; ".join(e.message for e in v_learn.iter_errors(learn)))


# ---------------------------------------------------------------- JSON repair


def json_repair(libs: str | None) -> None:
    print("\n## JSON repair: jiyi.llm.jsonfix vs json_repair")
    lib = have("json_repair")
    if lib is None:
        return
    import test_llm
    from jiyi.llm.jsonfix import parse_json_answer

    mark = next(m for m in test_llm.test_parse_json_answer_repairs.pytestmark if m.name == "parametrize")
    repairs: list[tuple[str, Any]] = mark.args[1]
    mark = next(m for m in test_llm.test_parse_json_answer_unrepairable.pytestmark if m.name == "parametrize")
    hopeless: list[tuple[str, str]] = mark.args[1]

    def theirs(text: str) -> Any:
        return lib.loads(text)

    own_ok = sum(parse_json_answer(t) == e for t, e in repairs)
    lib_ok, lib_wrong = 0, []
    for text, expected in repairs:
        try:
            got = theirs(text)
        except Exception as exc:
            got = f"raised {type(exc).__name__}"
        if got == expected:
            lib_ok += 1
        else:
            lib_wrong.append((text, expected, got))
    print(
        f"  repair cases from tests/test_llm.py: jsonfix {own_ok}/{len(repairs)}, json_repair {lib_ok}/{len(repairs)}"
    )
    for text, expected, got in lib_wrong:
        print(f"    {text[:60]!r}: want {str(expected)[:50]}, json_repair {str(got)[:60]}")
    raised = 0
    for text, _ in hopeless:
        try:
            got = theirs(text)
            print(f"    unrepairable {text[:30]!r}: json_repair returns {str(got)[:40]!r}")
        except Exception:
            raised += 1
    print(
        f"  unrepairable cases refused: jsonfix {len(hopeless)}/{len(hopeless)}, json_repair {raised}/{len(hopeless)}"
    )
    big = '{"memories": [' + ", ".join(['{"content": "用户喜欢茶", "memory_type": "preference",}'] * 20)
    print(
        f"  per call, a cut-off 20-item answer with trailing commas: jsonfix "
        f"{per_call_us(lambda: parse_json_answer(big), 200):.0f} µs, json_repair {per_call_us(lambda: theirs(big), 200):.0f} µs"
    )
    print(
        f"  import json_repair: {import_ms('json_repair', libs):.0f} ms; installed {installed_kb('json-repair')} KB"
    )


# ---------------------------------------------------------------- time phrases

PHRASES = [  # (query, the window its time expression means, relative to NOW: first and last day)
    ("what did we decide yesterday?", "2026-11-23", "2026-11-23"),
    ("what happened last week?", "2026-11-16", "2026-11-22"),
    ("where did I go last month?", "2026-10-01", "2026-10-31"),
    ("what did I do 3 days ago?", "2026-11-21", "2026-11-21"),
    ("what did we decide on 8 May 2023?", "2023-05-08", "2023-05-08"),
    ("what did I buy on May 8, 2023?", "2023-05-08", "2023-05-08"),
    ("my plans for 2025-03-14", "2025-03-14", "2025-03-14"),
    ("what did I do last year?", "2025-01-01", "2025-12-31"),
    ("我昨天做了什么？", "2026-11-23", "2026-11-23"),
    ("上周我们决定了什么？", "2026-11-16", "2026-11-22"),
    ("我上个月去了哪里？", "2026-10-01", "2026-10-31"),
    ("三天前我买了什么", "2026-11-21", "2026-11-21"),
    ("2023年5月8日开会说了什么", "2023-05-08", "2023-05-08"),
    ("5月8日的会议", "2026-05-08", "2026-05-08"),
    ("去年六月我在哪里", "2025-06-01", "2025-06-30"),
    ("前天的会议记录", "2026-11-22", "2026-11-22"),
]


def _day(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def time_phrases(libs: str | None) -> None:
    print("\n## Time phrases: jiyi.text.timeparse vs dateparser.search.search_dates")
    dateparser_search = have("dateparser.search")
    if dateparser_search is None:
        return
    from jiyi.text.timeparse import time_windows

    settings = {"RELATIVE_BASE": NOW.replace(tzinfo=None), "PREFER_DATES_FROM": "past"}

    def theirs(query: str) -> list[tuple[str, datetime]]:
        found = dateparser_search.search_dates(query, languages=["en", "zh"], settings=settings)
        return [(text, when.replace(tzinfo=UTC)) for text, when in found or []]

    own_hits = own_whole = their_hits = their_none = 0
    for query, first, last in PHRASES:
        start, end = _day(first), _day(last)
        windows = time_windows(query, NOW)
        own_hits += windows.contains(start)
        own_whole += windows.contains(start) and windows.contains(end.replace(hour=23))
        found = theirs(query)
        inside = any(start <= when.replace(hour=0) <= end for _, when in found)
        their_hits += inside
        their_none += not found
        if not inside:
            got = ", ".join(f"{text!r} -> {when.date()}" for text, when in found) or "nothing"
            print(f"    {query!r} ({first}..{last}): dateparser {got}")
    print(
        f"  phrases: {len(PHRASES)}; a date inside the meant window: timeparse {own_hits}, dateparser "
        f"{their_hits} (found nothing in {their_none}); the whole window: timeparse {own_whole}, "
        "dateparser 0 (it returns one datetime per expression, never a range)"
    )
    query = "上周我们决定了什么？"
    print(
        f"  per call: timeparse {per_call_us(lambda: time_windows(query, NOW), 500):.0f} µs, dateparser "
        f"{per_call_us(lambda: theirs(query), 20):.0f} µs"
    )
    print(
        f"  import dateparser: {import_ms('dateparser.search', libs):.0f} ms; installed dateparser "
        f"{installed_kb('dateparser')} KB + regex {installed_kb('regex')} KB + pytz {installed_kb('pytz')} KB "
        f"+ tzlocal {installed_kb('tzlocal')} KB + python-dateutil {installed_kb('python-dateutil')} KB"
    )


def expiry_phrases(libs: str | None) -> None:
    """Until when a statement holds ("until Friday", "月底前"): the end of the named day or
    period, and nothing for a date that only says when ("on Friday", "since 2019")."""
    print("\n## Until when: jiyi.text.expiry vs dateparser.search.search_dates")
    dateparser_search = have("dateparser.search")
    if dateparser_search is None:
        return
    from jiyi.text.expiry import expiry_of
    from test_nothing_lost import EXPIRY_CASES, T0

    settings = {"RELATIVE_BASE": T0.replace(tzinfo=None), "PREFER_DATES_FROM": "future"}

    def theirs(text: str) -> list[tuple[str, datetime]]:
        return list(dateparser_search.search_dates(text, languages=["en", "zh"], settings=settings) or [])

    own_right = their_day = their_negative = 0
    bounded = [(t, e) for t, e in EXPIRY_CASES if e is not None]
    for text, expected in EXPIRY_CASES:
        own_right += expiry_of(text, T0) == expected
        found = theirs(text)
        if expected is None:
            their_negative += bool(found)  # a date, though the statement has no end
        else:
            last_day = (expected - timedelta(days=1)).date()
            their_day += any(when.date() == last_day for _, when in found)
        got = ", ".join(f"{t!r} -> {w.date()}" for t, w in found) or "nothing"
        print(f"    {text!r}: expiry {expiry_of(text, T0)}, dateparser {got}")
    negatives = len(EXPIRY_CASES) - len(bounded)
    print(
        f"  cases: {len(EXPIRY_CASES)} from tests/test_nothing_lost.py ({len(bounded)} bounded, {negatives} not); "
        f"expiry_of right: {own_right}/{len(EXPIRY_CASES)}; dateparser found the last day of "
        f"{their_day}/{len(bounded)} bounded ones and a date in {their_negative}/{negatives} that have no end "
        "(it cannot tell 'until Friday' from 'on Friday': the bound word would still be jiyi's code)"
    )
    text = "这周末之前不要给我打电话"
    print(
        f"  per call: expiry_of {per_call_us(lambda: expiry_of(text, T0), 500):.0f} µs, dateparser "
        f"{per_call_us(lambda: theirs(text), 20):.0f} µs"
    )


# ---------------------------------------------------------------- phone numbers
# ---------------------------------------------------------------- phone numbers


def phones(libs: str | None) -> None:
    print("\n## Phone numbers: jiyi.text.pii vs phonenumbers.PhoneNumberMatcher")
    lib = have("phonenumbers")
    if lib is None:
        return
    from jiyi.text.pii import redact
    from test_pii import NEGATIVE, POSITIVE

    positives = [t for t, expected in POSITIVE if "[REDACTED_PHONE]" in expected]
    negatives = list(NEGATIVE)

    def found(text: str) -> bool:
        return any(True for region in ("CN", "US") for _ in lib.PhoneNumberMatcher(text, region))

    own_pos = sum("[REDACTED_PHONE]" in redact(t).text for t in positives)
    lib_pos = sum(found(t) for t in positives)
    own_neg = sum("[REDACTED_PHONE]" in redact(t).text for t in negatives)
    lib_neg = sum(found(t) for t in negatives)
    print(
        f"  phone texts from tests/test_pii.py found: pii {own_pos}/{len(positives)}, phonenumbers {lib_pos}/{len(positives)}"
    )
    print(
        f"  texts that must stay as they are (NEGATIVE) flagged as phones: pii {own_neg}, phonenumbers {lib_neg} of {len(negatives)}"
    )
    text = positives[0]
    print(
        f"  per call: pii.redact (every kind) {per_call_us(lambda: redact(text), 500):.0f} µs, "
        f"phonenumbers CN+US {per_call_us(lambda: found(text), 200):.0f} µs"
    )
    print(
        f"  import phonenumbers: {import_ms('phonenumbers', libs):.0f} ms; installed {installed_kb('phonenumbers')} KB"
    )


# ---------------------------------------------------------------- HTTP clients


def http_clients(libs: str | None) -> None:
    print("\n## OpenAI-compatible HTTP: jiyi._http (httpx) vs the openai SDK, tenacity")
    import inspect

    from jiyi import _http

    loop = inspect.getsource(_http.OpenAICompatibleClient._decide) + inspect.getsource(
        _http.OpenAICompatibleClient._post
    )
    aloop = inspect.getsource(_http.OpenAICompatibleClient._apost)
    print(
        f"  jiyi's one retry decision + sync loop + async loop: {len(loop.splitlines()) + len(aloop.splitlines())} "
        "lines, shared by the chat and the embeddings client"
    )
    setup = f"import os, sys; sys.path += {libs!r}.split(os.pathsep); " if libs else ""
    code = f"{setup}import pydantic, httpx, time; t = time.perf_counter(); import openai; print(time.perf_counter() - t)"
    try:
        runs = sorted(
            float(subprocess.check_output([sys.executable, "-c", code], text=True, stderr=subprocess.DEVNULL))
            for _ in range(3)
        )
        print(
            f"  import openai after pydantic and httpx (already jiyi's): {runs[1] * 1000:.0f} ms; "
            f"installed openai {installed_kb('openai')} KB"
        )
    except subprocess.CalledProcessError:
        print("  (openai not installed: skipped)")
    print(f"  import tenacity: {import_ms('tenacity', libs):.0f} ms; installed {installed_kb('tenacity')} KB")


# ---------------------------------------------------------------- file watching


def file_watch(libs: str | None) -> None:
    print("\n## Watching memory.md files: jiyi.files.watch (polling) vs watchfiles (inotify)")
    import tempfile
    import threading

    from jiyi.files import FileMirrorStore
    from jiyi.files.watch import FileWatcher
    from jiyi.memory import Memory
    from jiyi.store.sqlite import SQLiteStore

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "memories"
        with Memory(SQLiteStore(Path(tmp) / "m.db"), files=root, background=False) as mem:
            for i in range(100):
                mem.add(
                    f"User {i} prefers green tea in the afternoon", user_id=f"u{i}", memory_type="preference"
                )
            store = mem.runtime.store
            assert isinstance(store, FileMirrorStore)
            watcher = FileWatcher(store, lambda refs: None)
            watcher.poll()
            cost = per_call_us(watcher.poll, 5) / 1000
        print(
            f"  one poll of 100 scopes (nothing edited): {cost:.1f} ms, every interval (default 2 s): "
            f"{cost / 2000 * 100:.2f}% of one core; an edit is seen after 1 s on average, 2 s at most"
        )
    watchfiles = have("watchfiles")
    if watchfiles is None:
        return
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp) / "memory.md"
        target.write_text("- a\n")
        seen: list[float] = []
        stop = threading.Event()

        def watch() -> None:
            for _ in watchfiles.watch(tmp, stop_event=stop, yield_on_timeout=False):
                seen.append(time.perf_counter())
                return

        thread = threading.Thread(target=watch, daemon=True)
        thread.start()
        time.sleep(0.5)
        start = time.perf_counter()
        target.write_text("- b\n")
        thread.join(10)
        stop.set()
    latency = (seen[0] - start) * 1000 if seen else float("nan")
    print(
        f"  watchfiles (default debounce): edit seen after {latency:.0f} ms; "
        f"import {import_ms('watchfiles', libs):.0f} ms; installed {installed_kb('watchfiles')} KB"
    )


# ---------------------------------------------------------------- three-way merge, scheduler


def text_merge(libs: str | None) -> None:
    print("\n## Three-way merge of memory.md: jiyi.files.merge (per memory id) vs merge3 (per line)")
    lib = have("merge3")
    if lib is None:
        return
    head = ["# Memory: user alice\n", "\n", "## preference\n"]
    a, b = "- Likes green tea <!-- id:a -->\n", "- Prefers dark mode <!-- id:b -->\n"
    base = [*head, a, b]
    person = [*head, a.replace("green", "jasmine"), b]  # the person edits memory a
    database = [*head, a, b.replace("mode", "mode everywhere")]  # the API edits memory b
    groups = [g[0] for g in lib.Merge3(base, person, database).merge_groups()]
    print(f"  a person edits one memory, the API the next one: merge3 groups {groups}")
    print(f"  the same with jiyi (file edited, then mem.update, then sync): {_jiyi_merge()}")
    print(f"  import merge3: {import_ms('merge3', libs):.0f} ms; installed {installed_kb('merge3')} KB")
    if have("apscheduler") is not None:
        print(
            f"\n## Scheduler: import apscheduler.schedulers.asyncio "
            f"{import_ms('apscheduler.schedulers.asyncio', libs):.0f} ms; installed "
            f"{installed_kb('apscheduler')} KB + tzlocal {installed_kb('tzlocal')} KB"
        )


def _jiyi_merge() -> str:
    import tempfile

    from jiyi.memory import Memory
    from jiyi.store.sqlite import SQLiteStore

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "memories"
        with Memory(SQLiteStore(Path(tmp) / "m.db"), files=root, background=False) as mem:
            a = mem.add("I like green tea in the afternoon", user_id="alice", memory_type="preference").item
            b = mem.add("I prefer dark mode in every editor", user_id="alice", memory_type="preference").item
            assert a is not None
            assert b is not None
            md = root / "default" / "user" / "alice" / "memory.md"
            md.write_text(
                md.read_text(encoding="utf-8").replace("green tea", "jasmine tea"), encoding="utf-8"
            )
            mem.update(b.id, content="I prefer dark mode in every editor and terminal")
            report = mem.sync_files(user_id="alice")
            both = "jasmine" in mem.get(a.id).content and "terminal" in mem.get(b.id).content
            return f"both edits kept: {both}, conflicts: {len(report.conflicts)}"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--libs",
        help="directories (separated by os.pathsep) the candidates were installed into (pip --target)",
    )
    parser.add_argument(
        "--only",
        choices=["tools", "json", "time", "expiry", "phones", "http", "watch", "merge"],
        help="run one section",
    )
    args = parser.parse_args()
    if args.libs:
        sys.path += args.libs.split(os.pathsep)  # after the venv: the project's own versions win
    sections = {
        "tools": tool_arguments,
        "json": json_repair,
        "time": time_phrases,
        "expiry": expiry_phrases,
        "phones": phones,
        "http": http_clients,
        "watch": file_watch,
        "merge": text_merge,
    }
    for name, section in sections.items():
        if args.only in (None, name):
            section(args.libs)


if __name__ == "__main__":
    main()
