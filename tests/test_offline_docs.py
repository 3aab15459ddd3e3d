"""``/docs`` and ``/redoc`` work without internet access (issue 14, item 6): the pages
name only files the server itself serves, and a real browser whose every request off
this machine is refused renders both API references (only ReDoc's footer logo image is
asked for outside, and missed).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest

pytest.importorskip("fastapi")

from jiyi.memory import AsyncMemory
from jiyi.server.app import create_app
from jiyi.server.docs import asset_dir
from tests.test_web import CHROMIUM, CHROMIUM_ARGS, _start, _stop, _unavailable, _wait

if TYPE_CHECKING:
    from playwright.sync_api import Route

LOCAL = re.compile(r"^https?://127\.0\.0\.1(:\d+)?/")


async def test_docs_pages_name_only_local_files(tmp_path: Path) -> None:
    assert asset_dir() is not None, "fastapi-offline (the server extra) is not installed"
    memory = AsyncMemory.open(tmp_path / "m.db", embedder="hash:64")
    app = create_app(memory, rate_limit_per_minute=None)
    transport = httpx.ASGITransport(app=app)
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8765") as client:
            for page in ("/docs", "/redoc"):
                html = (await client.get(page)).text
                urls = re.findall(r"""(?:src|href)\s*[=:]\s*['"]([^'"]+)['"]""", html)
                assert urls, html
                assert all(u.startswith("/") for u in urls), (page, urls)
                for url in urls:
                    r = await client.get(url)
                    assert r.status_code == 200 and len(r.content) > 1000, (url, r.status_code)
                assert "fonts.googleapis" not in html
            assert (await client.get("/docs/oauth2-redirect")).status_code == 200
    finally:
        await memory.aclose()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("docs")
    base, proc = _start(tmp / "docs.db", None)
    try:
        _wait(base, proc, tmp / "docs.log")
        yield base
    finally:
        _stop(proc)


def test_a_browser_offline_renders_docs_and_redoc(server: str, tmp_path: Path) -> None:
    shots = tmp_path
    if not CHROMIUM.exists():
        _unavailable(f"{CHROMIUM} is missing: run scripts/ensure-chromium.sh")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("playwright is not installed: pip install -e '.[test]'")
    refused: list[str] = []

    def only_local(route: Route) -> None:
        if LOCAL.match(route.request.url):
            route.continue_()
        else:
            refused.append(f"{route.request.resource_type} {route.request.url}")
            route.abort()

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.route("**/*", only_local)
            page.goto(f"{server}/docs")
            page.wait_for_selector(".opblock", timeout=15_000)  # one block per operation
            assert page.locator(".opblock").count() > 20
            page.screenshot(path=str(shots / "docs.png"))
            page.goto(f"{server}/redoc")
            # ReDoc renders each operation as a heading with its summary
            heading = page.locator("h2", has_text="Remember messages (queues extraction)").first
            heading.wait_for(timeout=15_000)
            page.screenshot(path=str(shots / "redoc.png"))
        finally:
            browser.close()
    # Nothing the pages need comes from outside; ReDoc's "API docs by Redocly" footer asks
    # for its logo image from its CDN, which fails here without effect on the page.
    assert all(r.startswith("image ") for r in refused), refused
