"""``/docs`` (Swagger UI) and ``/redoc`` served from files inside the installation, so the
API reference works on a machine without internet access.

FastAPI's own pages load Swagger UI and ReDoc from a CDN (a blank page offline). The
scripts, the stylesheet and the favicon here come from the ``fastapi-offline`` wheel (part
of the ``server`` extra), served from ``/docs/assets/``; the pages are FastAPI's, pointed at
them, with ReDoc's web fonts off. Without that package the CDN pages are served and a
warning says why ``/docs`` may stay blank.
"""

from __future__ import annotations

import importlib.resources
import logging
from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

from jiyi.errors import install_hint

ASSETS = "/docs/assets"
FILES = ("swagger-ui-bundle.js", "swagger-ui.css", "redoc.standalone.js", "favicon.png")

log = logging.getLogger("jiyi.server")


def asset_dir() -> Path | None:
    """Where the bundled Swagger UI and ReDoc files are, or None when not installed."""
    try:
        root = Path(str(importlib.resources.files("fastapi_offline") / "static"))
    except ModuleNotFoundError:
        return None
    return root if all((root / name).is_file() for name in FILES) else None


def install(app: FastAPI) -> None:
    """Add ``GET /docs``, ``/docs/oauth2-redirect`` and ``/redoc`` (create the app with
    ``docs_url=None, redoc_url=None``)."""
    root = asset_dir()
    if root is None:
        log.warning(
            "fastapi-offline is not installed: /docs and /redoc load from a CDN (%s)", install_hint("server")
        )
        cdn = "https://cdn.jsdelivr.net/npm"
        swagger_js, swagger_css = (
            f"{cdn}/swagger-ui-dist@5/swagger-ui-bundle.js",
            f"{cdn}/swagger-ui-dist@5/swagger-ui.css",
        )
        redoc_js, favicon = (
            f"{cdn}/redoc@2/bundles/redoc.standalone.js",
            "https://fastapi.tiangolo.com/img/favicon.png",
        )
    else:
        app.mount(ASSETS, StaticFiles(directory=root), name="docs-assets")
        swagger_js, swagger_css = f"{ASSETS}/swagger-ui-bundle.js", f"{ASSETS}/swagger-ui.css"
        redoc_js, favicon = f"{ASSETS}/redoc.standalone.js", f"{ASSETS}/favicon.png"
    title = f"{app.title} - API"
    openapi_url = app.openapi_url or "/openapi.json"
    redirect = "/docs/oauth2-redirect"

    @app.get("/docs", include_in_schema=False)
    async def swagger() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=openapi_url,
            title=title,
            swagger_js_url=swagger_js,
            swagger_css_url=swagger_css,
            swagger_favicon_url=favicon,
            oauth2_redirect_url=redirect,
        )

    @app.get(redirect, include_in_schema=False)
    async def swagger_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    @app.get("/redoc", include_in_schema=False)
    async def redoc() -> HTMLResponse:
        return get_redoc_html(
            openapi_url=openapi_url,
            title=title,
            redoc_js_url=redoc_js,
            redoc_favicon_url=favicon,
            with_google_fonts=False,
        )
