"""The web page (``/ui/``) in headless Chromium, against real ``jiyi serve`` processes.

Two servers run from the CLI on 127.0.0.1 over temporary SQLite files: one without keys
(the local default) and one with an API key file. Memories are added through REST; the
page is then driven through Playwright like a person would. Every test records each
request the page makes (all must stay on 127.0.0.1) and every console message (errors
are allowed only for the HTTP failures that test provokes on purpose).

Needs /usr/bin/chromium (Debian's ``chromium``; ``scripts/ensure-chromium.sh`` installs
it). Without it the tests are skipped, except under CI (``CI`` set), where they fail.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import httpx
import pytest

from jiyi.server.auth import create_key

if TYPE_CHECKING:
    from playwright.sync_api import Browser, ConsoleMessage, Page, Request

CHROMIUM = Path("/usr/bin/chromium")
# Without the background-networking flags Chromium keeps calling home on a closed network.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
EMBEDDER = "hash:256"
TIMEOUT_MS = 10_000
# Screenshots of what the tests saw, kept for a person to look at (build/ is not committed);
# JIYI_WEB_SCREENSHOTS puts them elsewhere, e.g. where CI collects artefacts.
SHOTS = Path(os.environ.get("JIYI_WEB_SCREENSHOTS") or Path(__file__).parent.parent / "build/web-screenshots")


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI is set, so this is a failure, not a skip)")
    pytest.skip(reason)


# ---------------------------------------------------------------- servers


@dataclass
class Server:
    base: str
    proc: subprocess.Popen[bytes]
    key: str | None = None

    def client(self) -> httpx.Client:
        headers = {"X-API-Key": self.key} if self.key else {}
        return httpx.Client(base_url=self.base, headers=headers, timeout=20)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _start(db: Path, keys_file: Path | None) -> tuple[str, subprocess.Popen[bytes]]:
    port = _free_port()
    cmd = [sys.executable, "-m", "jiyi.cli", "--db", str(db), "--embedder", EMBEDDER, "serve"]
    cmd += ["--port", str(port)]
    if keys_file is not None:
        cmd += ["--keys", str(keys_file)]
    # a file, not a pipe: an unread pipe fills up with request logs and stalls the server
    with db.with_suffix(".log").open("wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    return f"http://127.0.0.1:{port}", proc


def _wait(base: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if proc.poll() is not None:
            out = log.read_text(errors="replace")
            raise AssertionError(f"jiyi serve exited with {proc.returncode}:\n{out}")
        assert time.monotonic() < deadline, "jiyi serve did not start within 30 s"
        time.sleep(0.1)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Server]]:
    """(open, keyed): started together, so their start-up overlaps."""
    tmp = tmp_path_factory.mktemp("web")
    keys_file = tmp / "keys.json"
    key = create_key(keys_file, "acme", "owner")
    open_base, open_proc = _start(tmp / "open.db", None)
    keyed_base, keyed_proc = _start(tmp / "keyed.db", keys_file)
    try:
        _wait(open_base, open_proc, tmp / "open.log")
        _wait(keyed_base, keyed_proc, tmp / "keyed.log")
        yield Server(open_base, open_proc), Server(keyed_base, keyed_proc, key)
    finally:
        _stop(open_proc)
        _stop(keyed_proc)


def _add(c: httpx.Client, content: str, **extra: Any) -> dict[str, Any]:
    r = c.post("/v1/memories", json={"content": content, **extra})
    assert r.status_code == 201, r.text
    assert r.json()["decision"]["action"] == "add", r.json()
    item: dict[str, Any] = r.json()["item"]
    return item


def _import(c: httpx.Client, records: list[dict[str, Any]]) -> None:
    body = "\n".join(json.dumps(r, ensure_ascii=False) for r in records)
    r = c.post("/v1/import", content=body.encode(), headers={"content-type": "application/x-ndjson"})
    assert r.status_code == 200 and r.json()["imported"] == len(records), r.text


XSS = '<img src=x onerror="window.__pwned=1"> <script>window.__pwned=2</script> Alice keeps notes in HTML'


@dataclass
class Seeded:
    ids: dict[str, str] = field(default_factory=dict)


@pytest.fixture(scope="module")
def seeded(servers: tuple[Server, Server]) -> Seeded:
    open_srv, keyed = servers
    out = Seeded()
    with open_srv.client() as c:
        out.ids["tea"] = _add(
            c, "Alice prefers green tea in the morning", user_id="alice", memory_type="preference"
        )["id"]
        out.ids["lake"] = _add(
            c, "爱丽丝周末喜欢去西湖边骑自行车", user_id="alice", memory_type="habit", tags=["运动"]
        )["id"]
        out.ids["db"] = _add(
            c,
            "Alice decided to keep the main database on PostgreSQL",
            user_id="alice",
            memory_type="decision",
        )["id"]
        out.ids["old"] = _add(c, "Alice used to live in Shanghai before 2020", user_id="alice")["id"]
        assert c.delete(f"/v1/memories/{out.ids['old']}").json()["status"] == "archived"
        out.ids["xss"] = _add(c, XSS, user_id="mallory")["id"]
        # twelve facts for paging, and three items that point at each other
        _import(
            c,
            [
                {"content": f"Bob's build note {i:02d}: step {i} of the release checklist", "user_id": "bob"}
                for i in range(12)
            ],
        )
        _import(
            c,
            [
                {"id": "deploy-a", "content": "The team deploys on Fridays", "project_id": "web"},
                {
                    "id": "deploy-b",
                    "content": "部署从三月起改到周四",
                    "project_id": "web",
                    "memory_type": "decision",
                    "relations": [
                        {"type": "refines", "target_id": "deploy-a", "strength": 0.9},
                        {"type": "supports", "target_id": "deploy-c"},
                    ],
                },
                {"id": "deploy-c", "content": "Thursday deploys leave Friday for fixes", "project_id": "web"},
            ],
        )
        # a user and a project whose profiles are aggregated from their memories
        out.ids["pat-job"] = _add(c, "我是一名数据工程师，平时用 Python 和 Go 写代码", user_id="pat")["id"]
        _add(c, "Pat prefers concise answers", user_id="pat", memory_type="preference")
        _add(
            c,
            "We decided to use SQLite because it needs no server",
            project_id="plat",
            memory_type="decision",
        )
        # a fact that changed: the newer statement supersedes the older one
        out.ids["coffee-old"] = _add(c, "我喜欢喝咖啡", user_id="dan", memory_type="preference")["id"]
        r = c.post(
            "/v1/memories",
            json={"content": "我不喜欢喝咖啡了", "user_id": "dan", "memory_type": "preference"},
        )
        assert r.status_code == 201 and r.json()["decision"]["action"] == "supersede", r.text
        out.ids["coffee-new"] = r.json()["item"]["id"]
    with keyed.client() as c:
        out.ids["keyed"] = _add(c, "Carol's team reviews code every afternoon", user_id="carol")["id"]
    return out


# ---------------------------------------------------------------- the browser


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        _unavailable(f"{CHROMIUM} is missing: run scripts/ensure-chromium.sh (apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("playwright is not installed: pip install -e '.[test]'")
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


FAILED_LOAD = re.compile(r"Failed to load resource: the server responded with a status of (\d+)")


@dataclass
class UI:
    """A page on one server, with what it requested and logged."""

    page: Page
    server: Server
    requests: list[str] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    allowed_statuses: set[int] = field(default_factory=set)

    def goto(self, path: str = "/") -> None:
        self.page.goto(self.server.base + path)

    def expect_http_errors(self, *statuses: int) -> None:
        """This test provokes these HTTP failures; Chromium logs each as a console error."""
        self.allowed_statuses.update(statuses)

    def rows(self) -> list[str]:
        return self.page.locator("#result-list .item-link").all_text_contents()

    def notice(self) -> str:
        self.page.locator("#notice").wait_for(state="visible")
        return self.page.locator("#notice-text").inner_text()

    def wait_idle(self) -> None:
        self.page.wait_for_function("() => !document.body.hasAttribute('aria-busy')")

    def shot(self, name: str) -> None:
        """Keep a screenshot of the whole page as a test artefact: the window is made tall
        enough for the detail pane (which scrolls on its own) to show in full."""
        SHOTS.mkdir(parents=True, exist_ok=True)
        size = self.page.viewport_size or {"width": 1280, "height": 720}
        tall = self.page.evaluate(
            "Math.max(document.documentElement.scrollHeight, document.querySelector('#detail').scrollHeight + 260)"
        )
        self.page.set_viewport_size({"width": size["width"], "height": min(int(tall), 6000)})
        try:
            self.page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)
        finally:
            self.page.set_viewport_size(size)

    def check(self) -> None:
        bad = [u for u in self.requests if urlsplit(u).hostname != "127.0.0.1"]
        assert not bad, f"the page made requests that left 127.0.0.1: {bad}"
        assert self.requests, "no requests were recorded"
        assert not self.page_errors, self.page_errors
        for text in self.console_errors:
            m = FAILED_LOAD.search(text)
            assert m and int(m.group(1)) in self.allowed_statuses, f"unexpected console error: {text}"


def _ui(browser: Browser, server: Server) -> Iterator[UI]:
    context = browser.new_context(locale="zh-CN", timezone_id="Asia/Shanghai")
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    ui = UI(page, server)

    def on_request(req: Request) -> None:
        ui.requests.append(req.url)
        ui.headers.append(req.headers)

    def on_console(msg: ConsoleMessage) -> None:
        if msg.type == "error":
            ui.console_errors.append(msg.text)

    context.on("request", on_request)
    page.on("console", on_console)
    page.on("pageerror", lambda exc: ui.page_errors.append(str(exc)))
    try:
        yield ui
        ui.check()
    finally:
        context.close()


@pytest.fixture
def ui(browser: Browser, servers: tuple[Server, Server], seeded: Seeded) -> Iterator[UI]:
    yield from _ui(browser, servers[0])


@pytest.fixture
def keyed_ui(browser: Browser, servers: tuple[Server, Server], seeded: Seeded) -> Iterator[UI]:
    yield from _ui(browser, servers[1])


# ---------------------------------------------------------------- tests


def test_page_is_served_and_not_in_the_api_schema(servers: tuple[Server, Server]) -> None:
    open_srv = servers[0]
    with open_srv.client() as c:
        r = c.get("/", follow_redirects=False)
        assert r.status_code == 307 and r.headers["location"] == "/ui/"
        page = c.get("/ui/")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert "default-src 'none'" in page.headers["content-security-policy"]
        for name, kind in [
            ("app.js", "text/javascript"),
            ("style.css", "text/css"),
            ("icon.svg", "image/svg"),
        ]:
            r = c.get(f"/ui/{name}")
            assert r.status_code == 200 and r.headers["content-type"].startswith(kind), name
        missing = c.get("/ui/__init__.py")  # only the page's own files are served
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
        paths = c.get("/openapi.json").json()["paths"]
        assert not [p for p in paths if p == "/" or p.startswith("/ui")]
    # no script or style may come from anywhere else, and nothing inline
    html = (Path(__file__).parent.parent / "src/jiyi/server/web/index.html").read_text(encoding="utf-8")
    assert not re.search(r"(src|href)=\"(https?:)?//", html) and "<style" not in html
    js = (Path(__file__).parent.parent / "src/jiyi/server/web/app.js").read_text(encoding="utf-8")
    assert "innerHTML" not in js.replace("no innerHTML", "") and "insertAdjacentHTML" not in js


def test_list_filter_page_and_search(ui: UI, seeded: Seeded) -> None:
    p = ui.page
    ui.goto("/")
    assert p.url.endswith("/ui/")
    p.locator("#result-list li").first.wait_for()  # the whole tenant, newest first

    # paging: 12 facts of bob, 10 a page
    p.fill("#f-user", "bob")
    p.select_option("#f-limit", "10")
    p.click("#list-btn")
    ui.wait_idle()
    assert len(ui.rows()) == 10
    assert p.locator("#more-btn").is_visible()
    p.fill("#f-user", "alice")  # "More" continues the listing it belongs to
    p.click("#more-btn")
    ui.wait_idle()
    rows = ui.rows()
    assert len(rows) == 12 and len(set(rows)) == 12
    assert p.locator("#more-btn").is_hidden()
    assert sorted(rows) == [f"Bob's build note {i:02d}: step {i} of the release checklist" for i in range(12)]

    # filters: type, then status
    p.fill("#f-user", "alice")
    p.select_option("#f-type", "preference")
    p.click("#list-btn")
    ui.wait_idle()
    assert ui.rows() == ["Alice prefers green tea in the morning"]
    p.select_option("#f-type", "")
    p.select_option("#f-status", "archived")
    p.click("#list-btn")
    ui.wait_idle()
    assert ui.rows() == ["Alice used to live in Shanghai before 2020"]
    p.select_option("#f-status", "")

    # search in English and in Chinese (Enter submits, as from the keyboard)
    p.fill("#q", "green tea")
    p.press("#q", "Enter")
    ui.wait_idle()
    assert ui.rows()[0] == "Alice prefers green tea in the morning"
    assert "Search results" in p.inner_text("#results-title")
    p.fill("#q", "西湖 骑自行车")
    p.press("#q", "Enter")
    ui.wait_idle()
    assert ui.rows()[0] == "爱丽丝周末喜欢去西湖边骑自行车"
    assert "运动" in p.locator("#result-list li").first.inner_text()
    # the type filter applies to search too
    p.select_option("#f-type", "decision")
    p.press("#q", "Enter")
    ui.wait_idle()
    assert ui.rows() in ([], ["Alice decided to keep the main database on PostgreSQL"])
    p.select_option("#f-type", "")

    # a search needs a scope: the page says so instead of failing
    p.fill("#f-user", "")
    p.press("#q", "Enter")
    assert "Search needs a scope" in ui.notice()

    # keyboard: tab to the first result and open it with Enter
    p.fill("#f-user", "alice")
    p.fill("#q", "green tea")
    p.press("#q", "Enter")
    ui.wait_idle()
    p.locator("#result-list .item-link").first.focus()
    p.keyboard.press("Enter")
    p.locator("#detail-content").wait_for()
    ui.wait_idle()
    assert p.inner_text("#detail-content") == "Alice prefers green tea in the morning"
    assert p.evaluate("document.activeElement.id") == "detail-title"


def test_detail_relations_history_edit_delete_and_stats(ui: UI, seeded: Seeded) -> None:
    p = ui.page
    # stats of project "web" before any change
    ui.goto("/ui/#/stats")
    p.fill("#f-project", "web")
    p.press("#f-project", "Enter")
    ui.wait_idle()
    assert p.inner_text("#stat-total") == "3"
    assert p.locator("#stats-tables tr[data-name='active'] td.num").inner_text() == "3"

    # one memory: all fields, relations (with the related items' text), history
    p.click("#nav-memories")
    p.goto(ui.server.base + "/ui/#/memories/deploy-b")
    p.wait_for_function(
        "() => document.querySelector('#detail-content').textContent === '部署从三月起改到周四'"
    )
    ui.wait_idle()
    fields = p.locator("#fields dt").all_text_contents()
    assert {"id", "content", "memory_type", "status", "version", "relations", "tenant_id"} <= set(fields)
    relations = p.locator("#relations li")
    assert relations.count() == 2
    assert (
        "refines" in relations.nth(0).inner_text()
        and "The team deploys on Fridays" in relations.nth(0).inner_text()
    )
    assert "Thursday deploys leave Friday for fixes" in relations.nth(1).inner_text()
    assert [x.split(" · ")[0] for x in p.locator("#history .event-head").all_inner_texts()] == ["import"]

    # click through to a related item
    relations.nth(0).locator("a").click()
    p.wait_for_function(
        "() => document.querySelector('#detail-content').textContent === 'The team deploys on Fridays'"
    )
    ui.wait_idle()
    assert p.url.endswith("#/memories/deploy-a")
    p.go_back()
    p.wait_for_function(
        "() => document.querySelector('#detail-content').textContent === '部署从三月起改到周四'"
    )
    ui.wait_idle()

    # edit content, importance, tags and type; the new version and its diff appear
    p.fill("#e-content", "部署从三月起改到每周四上午")
    p.fill("#e-importance", "0.8")
    p.fill("#e-tags", "发布，ops")
    p.select_option("#e-type", "constraint")
    p.fill("#e-reason", "更准确的时间")
    p.click("#save-btn")
    ui.wait_idle()
    assert "version 2" in p.inner_text("#detail-title")
    assert p.inner_text("#detail-content") == "部署从三月起改到每周四上午"
    top = p.locator("#history li.event").first
    assert top.get_attribute("data-action") == "update" and top.get_attribute("data-version") == "2"
    text = top.inner_text()
    assert "更准确的时间" in text and "部署从三月起改到周四" in text and "部署从三月起改到每周四上午" in text
    assert "importance" in text and "constraint" in text
    with ui.server.client() as c:
        stored = c.get("/v1/memories/deploy-b").json()
    assert stored["content"] == "部署从三月起改到每周四上午" and stored["importance"] == 0.8
    assert stored["tags"] == ["发布", "ops"] and stored["memory_type"] == "constraint"

    # saving without a change says so and sends nothing
    before = len(ui.requests)
    p.click("#save-btn")
    assert "Nothing changed" in ui.notice()
    assert len(ui.requests) == before

    # archive (soft delete)
    p.click("#archive-btn")
    ui.wait_idle()
    assert "archived" in p.inner_text("#detail-title")
    assert p.locator("#history li.event").first.get_attribute("data-action") == "archive"
    assert p.locator("#archive-btn").is_disabled()
    # and back: the status field of the edit form restores it
    p.select_option("#e-status", "active")
    p.click("#save-btn")
    ui.wait_idle()
    assert "version 4 · active" in p.inner_text("#detail-title")
    assert p.locator("#history li.event").first.get_attribute("data-action") == "restore"
    assert p.locator("#archive-btn").is_enabled()

    # hard delete sits behind a confirm: dismissing it keeps the memory
    p.once("dialog", lambda d: d.dismiss())
    p.click("#purge-btn")
    ui.wait_idle()
    with ui.server.client() as c:
        assert c.get("/v1/memories/deploy-b").status_code == 200
    dialogs: list[str] = []

    def accept(d: Any) -> None:
        dialogs.append(d.message)
        d.accept()

    p.once("dialog", accept)
    p.click("#purge-btn")
    p.wait_for_function(
        "() => document.querySelector('#detail-empty').textContent.includes('deleted permanently')"
    )
    assert "部署从三月起改到每周四上午" in dialogs[0]
    with ui.server.client() as c:
        assert c.get("/v1/memories/deploy-b").status_code == 404

    # the stats follow
    p.click("#nav-stats")
    p.wait_for_function("() => document.querySelector('#stat-total').textContent === '2'")
    assert p.locator("#stats-tables tr[data-name='active'] td.num").inner_text() == "2"


def test_stored_markup_is_shown_as_text_and_never_runs(ui: UI, seeded: Seeded) -> None:
    p = ui.page
    ui.goto("/ui/")
    p.fill("#f-user", "mallory")
    p.click("#list-btn")
    ui.wait_idle()
    assert ui.rows() == [XSS]
    p.locator("#result-list .item-link").first.click()
    p.wait_for_function(f"() => document.querySelector('#detail-content').textContent === {json.dumps(XSS)}")
    ui.wait_idle()
    assert p.locator("main img, main script").count() == 0
    assert p.evaluate("window.__pwned") is None
    assert not [u for u in ui.requests if urlsplit(u).path.endswith("/x")]
    # the history shows it as text too
    assert XSS in p.inner_text("#history")


def test_errors_from_the_api_are_readable(ui: UI, seeded: Seeded) -> None:
    p = ui.page
    ui.expect_http_errors(404, 422)
    ui.goto("/ui/#/memories/no-such-memory")
    text = ui.notice()
    assert text.startswith("Not found: no memory with id 'no-such-memory'") and "[404 not_found]" in text
    assert "Could not open memory no-such-memory" in p.inner_text("#detail-empty")

    # the write gate refuses a too-short content: the reason reaches the person
    p.goto(ui.server.base + f"/ui/#/memories/{seeded.ids['db']}")
    p.wait_for_function("() => !document.querySelector('#detail-body').hidden")
    ui.wait_idle()
    p.fill("#e-content", "ok")
    p.click("#save-btn")
    text = ui.notice()
    assert text.startswith("Invalid input: content refused") and "(field: content)" in text
    p.click("#notice-close")
    assert p.locator("#notice").is_hidden()
    with ui.server.client() as c:
        assert c.get(f"/v1/memories/{seeded.ids['db']}").json()["version"] == 1


def test_api_key_is_asked_for_kept_per_tab_and_sent(keyed_ui: UI, seeded: Seeded) -> None:
    ui = keyed_ui
    p = ui.page
    ui.expect_http_errors(401)
    ui.goto("/ui/#/memories?user_id=carol")  # a deep link, opened before the key is known
    text = ui.notice()
    assert text.startswith("API key needed: missing API key") and "enter an API key" in text
    assert p.evaluate("document.activeElement.id") == "api-key"
    # the page learnt from a 401 that this server needs a key, and says so
    assert "needs a key" in p.inner_text("#key-state")
    placeholder = p.get_attribute("#api-key", "placeholder") or ""
    assert "required" in placeholder and "not needed" not in placeholder
    ui.wait_idle()
    ui.shot("key-needed")

    # a wrong key is refused, and said to be
    p.fill("#api-key", "jiyi_wrong.key")
    p.press("#api-key", "Enter")
    assert ui.notice().startswith("API key needed")
    ui.wait_idle()
    assert "refused" in p.inner_text("#key-state")

    # the right key: the view loads at once, with no click and no reload
    assert ui.server.key
    p.fill("#api-key", ui.server.key)
    p.press("#api-key", "Enter")
    p.locator("#result-list li").first.wait_for()
    ui.wait_idle()
    assert ui.rows() == ["Carol's team reviews code every afternoon"]
    assert p.input_value("#f-user") == "carol" and "user carol" in p.inner_text("#results-note")
    assert p.evaluate("sessionStorage.getItem('jiyi.apiKey')") == ui.server.key
    assert p.input_value("#api-key") == ""  # not left on screen
    assert "accepted" in p.inner_text("#key-state")
    assert p.locator("#notice").is_hidden()
    sent = [h for u, h in zip(ui.requests, ui.headers, strict=True) if "/v1/" in u]
    assert sent[-1].get("x-api-key") == ui.server.key
    ui.shot("key-accepted")

    # a reload keeps the key for this tab
    p.reload()
    p.locator("#result-list li").first.wait_for()
    ui.wait_idle()
    assert "a key is set" in p.inner_text("#key-state")

    # forgetting it: the next call is refused again
    p.click("#key-forget")
    assert p.evaluate("sessionStorage.getItem('jiyi.apiKey')") is None
    p.click("#list-btn")
    assert ui.notice().startswith("API key needed")
    ui.wait_idle()
    assert "needs a key" in p.inner_text("#key-state")


def test_key_box_on_a_server_without_keys(ui: UI, seeded: Seeded) -> None:
    p = ui.page
    ui.goto("/")
    ui.wait_idle()
    assert p.inner_text("#key-state") == "this server needs no key"
    assert p.get_attribute("#api-key", "placeholder") == "not needed on this server"
    assert p.locator("#notice").is_hidden()


def _why(p: Page, nth: int = 0) -> dict[str, str]:
    li = p.locator("#result-list > li").nth(nth)
    return {x.get_attribute("data-signal") or "": x.inner_text() for x in li.locator("ul.why > li").all()}


def test_search_explains_every_hit_and_cuts_what_is_irrelevant(ui: UI, seeded: Seeded) -> None:
    p = ui.page
    ui.goto("/ui/#/memories?user_id=alice")
    ui.wait_idle()
    p.fill("#q", "green tea")
    p.press("#q", "Enter")
    ui.wait_idle()
    # the relevance cut is on by default: the other memories of alice are not listed
    assert ui.rows() == ["Alice prefers green tea in the morning"]
    assert "relevance of 50% or more" in p.inner_text("#results-note")
    # ... and the page says how many weaker matches it hid
    assert "3 weaker matches hidden" in p.inner_text("#results-note")
    why = _why(p)
    assert why["relevance"].startswith("Relevance ") and "answers the query" in why["relevance"]
    # the page cut at 50% itself: the hit's line must not say that no cut was applied
    assert "no relevance cut" not in why["relevance"] and "Show everything" not in why["relevance"]
    assert why["vector"].startswith("Meaning: vector similarity 0.")
    assert why["keywords"].startswith("Words: shares words with the query")
    assert "100% of the query's words" in why["keywords"]
    assert (
        why["score"].startswith("Rank score ")
        and "match +" in why["score"]
        and "confidence +" in why["score"]
    )
    # readable, not the breakdown's raw keys
    assert not re.search(
        r"contribution\.|keyword_bm25|similarity\.|relevance\.", p.inner_text("#result-list")
    )
    ui.shot("search-explained")

    # "show everything" turns the cut off: weaker hits come back, each still explained
    p.check("#f-all")
    p.press("#q", "Enter")
    ui.wait_idle()
    rows = ui.rows()
    assert rows[0] == "Alice prefers green tea in the morning" and len(rows) == 4
    assert "Everything is shown" in p.inner_text("#results-note")
    assert all(_why(p, i)["relevance"] for i in range(len(rows)))
    weakest = _why(p, len(rows) - 1)["relevance"]
    assert "does not answer the query" in weakest and "listed because “Show everything” is ticked" in weakest
    # "any status" is every status, as in the list: the archived memory is among them
    assert "Alice used to live in Shanghai before 2020" in rows
    p.select_option("#f-status", "active")
    p.press("#q", "Enter")
    ui.wait_idle()
    assert "Alice used to live in Shanghai before 2020" not in ui.rows() and len(ui.rows()) == 3
    p.select_option("#f-status", "")
    p.uncheck("#f-all")

    # a query that names a time: the time signal is explained
    p.fill("#q", "what did Alice drink last week")
    p.press("#q", "Enter")
    ui.wait_idle()
    assert ui.rows(), "the cut keeps something for this query"
    assert _why(p)["time"].startswith("Time: ")

    # a question asking for a place: the hit that names one says so
    p.check("#f-all")
    p.fill("#q", "Where did Alice live?")
    p.press("#q", "Enter")
    ui.wait_idle()
    rows = ui.rows()
    where = _why(p, rows.index("Alice used to live in Shanghai before 2020"))
    assert where["answer"].startswith("Answer: holds the kind of answer the query asks for")
    p.uncheck("#f-all")

    # a question nothing answers: no rows, and the page says why
    p.fill("#q", "量子计算机的冷却系统")
    p.press("#q", "Enter")
    ui.wait_idle()
    assert ui.rows() == []
    assert "Nothing relevant is remembered" in p.inner_text("#results-note")


def test_any_status_means_every_status_in_list_and_search(ui: UI, seeded: Seeded) -> None:
    p = ui.page
    ui.goto("/ui/#/memories?user_id=alice")
    p.locator("#result-list li").first.wait_for()
    ui.wait_idle()
    assert p.input_value("#f-status") == ""
    assert "any status (active, archived, superseded)" in p.inner_text("#f-status")
    assert "Alice used to live in Shanghai before 2020" in ui.rows()
    p.fill("#q", "Shanghai")
    p.press("#q", "Enter")
    ui.wait_idle()
    assert ui.rows() == ["Alice used to live in Shanghai before 2020"]


def test_deep_links_load_their_data_on_first_paint(ui: UI, seeded: Seeded) -> None:
    p = ui.page
    ui.goto("/ui/#/memories?user_id=bob")
    p.locator("#result-list li").first.wait_for()
    ui.wait_idle()
    assert p.input_value("#f-user") == "bob"
    assert len(ui.rows()) == 12 and all(r.startswith("Bob's build note") for r in ui.rows())

    # view, user, query and item in one address: the list is the search, the item is open
    tea = seeded.ids["tea"]
    ui.goto(f"/ui/?fresh=1#/memories/{tea}?user_id=alice&q=green%20tea")
    p.wait_for_function("() => !document.querySelector('#detail-body').hidden")
    ui.wait_idle()
    assert p.inner_text("#detail-content") == "Alice prefers green tea in the morning"
    assert ui.rows() == ["Alice prefers green tea in the morning"]
    assert _why(p)["relevance"].startswith("Relevance")
    assert p.locator("#result-list .item-link[aria-current='true']").count() == 1
    ui.shot("deep-link-item")

    # a search made on the page becomes the address, so it can be shared
    p.fill("#q", "西湖")
    p.press("#q", "Enter")
    ui.wait_idle()
    assert "user_id=alice" in p.url and "q=%E8%A5%BF%E6%B9%96" in p.url

    ui.goto("/ui/?fresh=2#/profile?user_id=pat")
    p.locator("#profile-body").wait_for()
    ui.wait_idle()
    assert p.inner_text("#profile-caption") == "Profile of user pat"

    ui.goto("/ui/?fresh=3#/stats?user_id=dan")
    ui.wait_idle()
    assert p.inner_text("#stat-total") == "2" and p.input_value("#f-user") == "dan"

    ui.goto("/ui/?fresh=4#/context?user_id=alice&query=green%20tea")
    p.locator("#context-body").wait_for()
    ui.wait_idle()
    assert "green tea" in p.inner_text("#context-text")


def test_context_view_shows_what_the_agent_receives(ui: UI, seeded: Seeded) -> None:
    p = ui.page
    ui.goto("/ui/#/context")
    ui.wait_idle()
    p.click("#context-btn")
    assert "Enter the query" in ui.notice()
    assert p.evaluate("document.activeElement.id") == "c-query"

    p.fill("#f-user", "alice")
    p.fill("#c-query", "What does Alice like to drink?")
    p.press("#c-query", "Enter")
    p.locator("#context-body").wait_for()
    ui.wait_idle()
    m = re.fullmatch(r"(\d+) of (\d+)", p.inner_text("#ctx-tokens"))
    assert m and m.group(2) == "1500" and 0 < int(m.group(1)) <= 1500
    assert "Alice prefers green tea in the morning" in p.inner_text("#context-text")
    entries = p.locator("#context-entries > li")
    assert entries.count() == int(p.inner_text("#ctx-entries")) > 0
    tea = p.locator(f"#context-entries a[href='#/memories/{seeded.ids['tea']}']")
    assert tea.count() == 1 and tea.inner_text() == seeded.ids["tea"]
    sources = {r.get_attribute("data-source") for r in p.locator("#context-source-rows tr").all()}
    assert "semantic" in sources
    assert "query=What+does+Alice" in p.url and "user_id=alice" in p.url
    ui.shot("context")

    # a tight budget leaves entries out, and the page says how many
    p.fill("#c-budget", "12")
    p.press("#c-query", "Enter")
    ui.wait_idle()
    assert int(p.inner_text("#ctx-dropped")) > 0
    kept = [int(x) for x in re.findall(r" (\d+) tokens", p.inner_text("#context-entries"))]
    assert sum(kept) <= 12
    # the entries fit; the assembled text may not (its headings), and the page says so
    used = int(p.inner_text("#ctx-tokens").split(" of ")[0])
    assert used <= 12 or f"(over by {used - 12})" in p.inner_text("#ctx-tokens")

    # an entry's link opens the memory
    p.fill("#c-budget", "1500")
    p.press("#c-query", "Enter")
    ui.wait_idle()
    p.locator(f"#context-entries a[href='#/memories/{seeded.ids['tea']}']").click()
    p.wait_for_function("() => !document.querySelector('#detail-body').hidden")
    assert p.inner_text("#detail-content") == "Alice prefers green tea in the morning"


def test_timeline_of_a_fact_across_versions(ui: UI, seeded: Seeded) -> None:
    p = ui.page
    old, new = seeded.ids["coffee-old"], seeded.ids["coffee-new"]
    # in a search, the replaced statement ranks below its replacement and says why
    ui.goto("/ui/#/memories?user_id=dan&q=%E5%92%96%E5%95%A1&all=1")
    p.locator("#result-list li").first.wait_for()
    ui.wait_idle()
    assert p.is_checked("#f-all")
    assert ui.rows() == ["我不喜欢喝咖啡了", "我喜欢喝咖啡"]
    assert _why(p, 1)["superseded"].startswith("Superseded: a newer statement replaced it")

    ui.goto(f"/ui/?fresh=1#/memories/{old}")
    p.wait_for_function("() => !document.querySelector('#detail-body').hidden")
    ui.wait_idle()
    assert "superseded" in p.inner_text("#detail-title")
    # the superseded statement links to its replacement
    lineage = p.locator("#lineage")
    assert lineage.is_visible() and lineage.inner_text().startswith("Replaced by “我不喜欢喝咖啡了”")
    assert lineage.locator("a").get_attribute("href") == f"#/memories/{new}"
    events = p.locator("#history > li.event")
    actions = [(e.get_attribute("data-item"), e.get_attribute("data-action")) for e in events.all()]
    # newest first, both statements' events together, ending with the first statement's creation
    assert actions[-1] == (old, "add")
    assert (old, "supersede") in actions and (new, "add") in actions
    sup = p.locator(f"#history li.event[data-action='supersede'][data-item='{old}']")
    assert "Superseded: a newer statement replaced it" in sup.inner_text()
    assert f"superseded by {new}" in sup.locator("ul.diff").inner_text()
    assert "Why: rule d (opposite polarity)" in sup.inner_text()
    assert " · by " in sup.locator(".event-head").inner_text()
    assert sup.locator(".replaced-by a").get_attribute("href") == f"#/memories/{new}"
    other = p.locator(f"#history li.event.other[data-item='{new}']")
    assert other.count() == 1 and "The statement “我不喜欢喝咖啡了” was added" in other.inner_text()
    ui.shot("timeline-superseded")

    # the replacement: edit it; its timeline holds the edit with its reason, and the old fact
    sup.locator(".replaced-by a").click()
    p.wait_for_function("() => document.querySelector('#detail-content').textContent === '我不喜欢喝咖啡了'")
    ui.wait_idle()
    assert p.inner_text("#lineage").startswith("Replaces “我喜欢喝咖啡”")
    p.fill("#e-content", "我不喜欢喝咖啡了，现在只喝茶")
    p.fill("#e-reason", "补充现在喝什么")
    p.click("#save-btn")
    ui.wait_idle()
    events = p.locator("#history > li.event")
    first = events.first
    assert first.get_attribute("data-action") == "update" and first.get_attribute("data-item") == new
    assert "Why: 补充现在喝什么" in first.inner_text() and "Edited" in first.inner_text()
    assert {e.get_attribute("data-item") for e in events.all()} == {old, new}
    ui.shot("timeline-replacement")


def _profile_row(p: Page, name: str) -> tuple[str, str]:
    row = p.locator(f"#profile-rows tr[data-field='{name}']")
    return row.locator("td.value").inner_text().strip(), row.get_attribute("data-source") or ""


def test_profile_panel_shows_sources_and_sets_fields(ui: UI, seeded: Seeded) -> None:
    p = ui.page
    ui.expect_http_errors(422)
    ui.goto("/ui/#/profile")
    p.click("#profile-load")  # no user id yet: the page says what is missing
    assert "Enter a user id" in ui.notice()
    assert p.evaluate("document.activeElement.id") == "f-user"

    p.fill("#f-user", "pat")
    p.press("#f-user", "Enter")  # Enter in a scope field loads the view's data
    ui.wait_idle()
    assert p.inner_text("#profile-caption") == "Profile of user pat"
    assert _profile_row(p, "profession") == ("数据工程师", "aggregated")
    assert _profile_row(p, "programming_languages") == ("Python\nGo", "aggregated")
    assert _profile_row(p, "username")[0] == "—"
    assert "Profession: 数据工程师" in p.inner_text("#profile-text")

    # explicit values win over aggregated ones
    p.select_option("#pf-name", "profession")
    assert p.input_value("#pf-value") == "数据工程师"
    p.fill("#pf-value", "数据科学家")
    p.click("#pf-save")
    ui.wait_idle()
    assert _profile_row(p, "profession") == ("数据科学家", "explicit")
    p.select_option("#pf-name", "programming_languages")
    assert p.input_value("#pf-value") == "Python\nGo"  # a list: one entry per line
    p.fill("#pf-value", "Rust\nTypeScript\n")
    p.click("#pf-save")
    ui.wait_idle()
    assert _profile_row(p, "programming_languages") == ("Rust\nTypeScript", "explicit")
    with ui.server.client() as c:
        stored = c.get("/v1/profile", params={"user_id": "pat"}).json()["fields"]
    assert stored["profession"]["value"] == "数据科学家" and stored["profession"]["source"] == "explicit"
    assert stored["programming_languages"]["value"] == ["Rust", "TypeScript"]

    # a value the API refuses: the reason is shown, nothing changes
    p.select_option("#pf-name", "communication_style")
    p.fill("#pf-value", "loud")
    p.click("#pf-save")
    text = ui.notice()
    assert text.startswith("Invalid input:") and "communication_style" in text
    p.click("#notice-close")

    # clearing the explicit value falls back to what the memories say
    p.select_option("#pf-name", "profession")
    p.fill("#pf-value", "")
    p.click("#pf-save")
    ui.wait_idle()
    assert _profile_row(p, "profession") == ("数据工程师", "aggregated")

    # evidence links open the memory behind a value: full ids, not cut short
    evidence = p.locator("#profile-rows tr[data-field='profession'] td.evidence a").first
    assert evidence.inner_text() == seeded.ids["pat-job"]
    ui.shot("profile")
    evidence.click()
    p.wait_for_function("() => !document.querySelector('#detail-body').hidden")
    ui.wait_idle()
    assert p.url.endswith(f"#/memories/{seeded.ids['pat-job']}")
    assert p.inner_text("#detail-content") == "我是一名数据工程师，平时用 Python 和 Go 写代码"

    # a project's profile: decisions with their reasons
    p.click("#nav-profile")
    p.fill("#f-user", "")
    p.fill("#f-project", "plat")
    p.select_option("#p-scope", "project_id")
    p.click("#profile-load")
    ui.wait_idle()
    assert p.inner_text("#profile-caption") == "Profile of project plat"
    decision, source = _profile_row(p, "key_decisions")
    assert "We decided to use SQLite because it needs no server" in decision and source == "aggregated"


def test_detail_shows_the_queries_it_was_served_for(ui: UI, seeded: Seeded) -> None:
    p = ui.page
    ui.goto("/ui/#/memories?user_id=alice")
    ui.wait_idle()
    p.fill("#q", "green tea")
    p.press("#q", "Enter")
    ui.wait_idle()
    p.locator("#result-list .item-link").first.click()
    ui.wait_idle()
    served = p.locator("#served li")
    served.first.wait_for()
    # the search just made is the newest entry: this memory was first, with its scores
    first = served.first.inner_text()
    assert "green tea" in first and "#1 · score 0." in first and "relevance " in first
    assert "user alice, by local" in first  # whose memory, and who asked (the key; here the local owner)
    assert served.first.get_attribute("data-kind") == "search"
    assert "Served " in p.inner_text("#served-summary")
    ui.shot("served-for")
