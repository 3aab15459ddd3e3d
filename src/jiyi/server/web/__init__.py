"""The web page served by ``jiyi serve`` under ``/ui/`` (plain HTML, JS and CSS; no build step).

The page is a client of the REST API on the same origin and holds no data itself, so
serving it needs no key: every call it makes carries the key the person enters (or
none, on a loopback server without keys). Only the files named in :data:`ASSETS` are
served, with a Content-Security-Policy that allows nothing but this origin - a second
line of defence behind the page rendering all data as text.
"""

from __future__ import annotations

from importlib import resources

from fastapi import FastAPI
from fastapi.responses import RedirectResponse, Response

from jiyi.server.errors import ApiError

ASSETS: dict[str, str] = {
    "index.html": "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
    "icon.svg": "image/svg+xml",
}

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'none'; base-uri 'none'; frame-ancestors 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    # revalidate each time: an upgraded server must not run yesterday's script
    "Cache-Control": "no-cache",
}


def _load() -> dict[str, bytes]:
    folder = resources.files(__name__)
    return {name: folder.joinpath(name).read_bytes() for name in ASSETS}


def install(app: FastAPI) -> None:
    """Add ``GET /`` (redirect to ``/ui/``) and the page's files; none is in the OpenAPI schema."""
    files = _load()

    def asset(name: str) -> Response:
        if name not in files:
            raise ApiError(404, f"no file {name[:100]!r} in the web page; open /ui/")
        return Response(files[name], media_type=ASSETS[name], headers=HEADERS)

    @app.get("/", include_in_schema=False)
    async def root() -> RedirectResponse:
        return RedirectResponse("/ui/")

    @app.get("/ui", include_in_schema=False)
    async def ui_no_slash() -> RedirectResponse:
        # relative URLs in the page (./app.js, ../v1/...) need the trailing slash
        return RedirectResponse("/ui/")

    @app.get("/ui/", include_in_schema=False)
    async def ui_index() -> Response:
        return asset("index.html")

    @app.get("/ui/{name}", include_in_schema=False)
    async def ui_file(name: str) -> Response:
        return asset(name)
