"""One error shape for every failure: ``{"error": {"code", "message", "field", "problems"}}``
(the CLI's ``--json`` errors and the agent tools' errors have the same keys).

Codes are stable; clients branch on them, people read the message. Library exceptions
(:mod:`jiyi.errors`) are mapped here, so handlers never catch them themselves.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import fastapi.routing
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from jiyi.errors import (
    InvalidInput,
    JiyiError,
    error_code,
)
from jiyi.problems import pydantic_problem

log = logging.getLogger("jiyi.server")

CODES = {
    400: "invalid_input",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    413: "too_large",
    415: "unsupported_media_type",
    422: "invalid_input",
    429: "rate_limited",
    500: "internal_error",
    502: "upstream_error",
    503: "store_error",
}


class ErrorDetail(BaseModel):
    code: str = Field(
        description="Stable machine-readable code: not_found, invalid_input, unauthorized, forbidden, "
        "rate_limited, too_large, store_error, store_read_only, upstream_error, config_error, internal_error."
    )
    message: str = Field(description="What went wrong, for a person.")
    field: str | None = Field(default=None, description="The offending input field, when known.")
    problems: list[str] = Field(
        default_factory=list,
        description="Every problem found, one sentence each (the message joins them); one fix "
        "round trip fixes them all.",
    )


class ErrorResponse(BaseModel):
    error: ErrorDetail


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses=`` entries documenting the error body for these statuses."""
    descriptions = {
        401: "Missing or invalid API key",
        403: "The key's role does not allow this",
        404: "No such resource in this tenant",
        413: "Request body too large",
        422: "Invalid input (the message names the field)",
        429: "Rate limit exceeded (see Retry-After)",
        503: "The store is unavailable",
    }
    return {s: {"model": ErrorResponse, "description": descriptions.get(s, "Error")} for s in statuses}


class ApiError(StarletteHTTPException):
    """An HTTP error with a stable code (raised by handlers and dependencies)."""

    def __init__(
        self,
        status_code: int,
        message: str,
        *,
        code: str | None = None,
        field: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(status_code, message, headers)
        self.code = code or CODES.get(status_code, "error")
        self.field = field


def error_json(
    status: int,
    code: str,
    message: str,
    field: str | None = None,
    headers: Mapping[str, str] | None = None,
    problems: Sequence[str] = (),
) -> JSONResponse:
    detail = ErrorDetail(code=code, message=message, field=field, problems=list(problems) or [message])
    body = ErrorResponse(error=detail)
    return JSONResponse(body.model_dump(), status_code=status, headers=headers)


_STATUS_OF_CODE = {
    "not_found": 404,
    "forbidden": 403,
    "invalid_input": 422,
    "store_read_only": 503,
    "store_error": 503,
    "upstream_error": 502,
}


def _status_of(exc: JiyiError) -> tuple[int, str]:
    code = error_code(exc)
    return _STATUS_OF_CODE.get(code, 500), code


def _validation_problems(exc: RequestValidationError) -> tuple[list[str], str | None]:
    errors = list(exc.errors())
    if not errors:
        return ["invalid request"], None
    texts: list[str] = []
    fields: list[str | None] = []
    for err in errors:  # every problem, so one round trip fixes them all
        loc = [str(p) for p in err.get("loc", ())]
        where = loc[0] if loc else ""
        field = ".".join(loc[1:]) or None
        msg = str(err.get("msg", "invalid value"))
        if msg.startswith("Value error, "):
            msg = msg[len("Value error, ") :]
        said = pydantic_problem(err, loc[1:]) if field else None
        if err.get("type") == "json_invalid":
            texts.append(f"request body is not valid JSON: {err.get('ctx', {}).get('error', msg)}")
            field = None
        elif said:
            texts.append(said)
        elif field:
            texts.append(f"{where} field {field!r}: {msg}")
        else:
            texts.append(f"{where}: {msg}" if where else msg)
        fields.append(field)
    return texts, fields[0]


def _routes(request: Request) -> Iterable[Any]:
    """Every route of the app. Newer FastAPI keeps an included router as one node of
    ``app.routes``; ``iter_route_contexts`` walks into it (older versions copy the routes)."""
    walk = getattr(fastapi.routing, "iter_route_contexts", None)
    return list(request.app.routes) if walk is None else list(walk(request.app.routes))


def _allowed_methods(request: Request) -> set[str]:
    """The methods the path answers: every matching route's, and OPTIONS (see
    :class:`AnswerOptions`); empty when no route matches."""
    allowed: set[str] = set()
    for route in _routes(request):
        regex = getattr(route, "path_regex", None)
        methods = getattr(route, "methods", None)
        if regex is not None and methods and regex.match(request.url.path):
            allowed |= set(methods)
    return allowed | {"OPTIONS"} if allowed else allowed


class AnswerOptions:
    """``OPTIONS`` answers 204 with the path's methods in ``Allow`` (RFC 9110 9.3.7),
    without a key: it tells only what the OpenAPI document tells. An unknown path is 404.
    (Starlette alone answers 405 with the first matching route's methods.)"""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "OPTIONS":
            await self.app(scope, receive, send)
            return
        allowed = _allowed_methods(Request(scope))
        if allowed:
            response: Response = Response(status_code=204, headers={"Allow": ", ".join(sorted(allowed))})
        else:
            response = error_json(404, "not_found", "Not Found")
        await response(scope, receive, send)


def install(app: FastAPI) -> None:
    """Register the exception handlers that produce :class:`ErrorResponse` bodies."""

    async def on_jiyi(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, JiyiError)
        status, code = _status_of(exc)
        if status >= 500:
            log.warning("%s %s failed: %s", request.method, request.url.path, exc)
        field = exc.field if isinstance(exc, InvalidInput) else None
        problems = exc.problems if isinstance(exc, InvalidInput) else ()
        return error_json(status, code, str(exc), field, problems=problems)

    async def on_http(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        code = exc.code if isinstance(exc, ApiError) else CODES.get(exc.status_code, "error")
        field = exc.field if isinstance(exc, ApiError) else None
        headers = dict(exc.headers or {})
        if exc.status_code == 400:  # FastAPI's "error parsing the body": one status for bad input
            return error_json(422, "invalid_input", "request body could not be parsed; send JSON", "body")
        if exc.status_code == 405:  # Starlette names only the first matching route's methods
            headers["Allow"] = ", ".join(sorted(_allowed_methods(request)))
        return error_json(exc.status_code, code, str(exc.detail), field, headers or None)

    async def on_validation(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        problems, field = _validation_problems(exc)
        return error_json(422, "invalid_input", "; ".join(problems), field, problems=problems)

    async def on_other(request: Request, exc: Exception) -> JSONResponse:
        log.exception("%s %s crashed", request.method, request.url.path)
        return error_json(500, "internal_error", "internal error; see the server log")

    app.add_middleware(AnswerOptions)
    app.add_exception_handler(JiyiError, on_jiyi)
    app.add_exception_handler(StarletteHTTPException, on_http)
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(Exception, on_other)
