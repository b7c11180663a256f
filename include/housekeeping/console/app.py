"""The console's FastAPI app (what the Airflow plugin mounts at ``/housekeeping``): its pages, its JSON API, the
CSRF protection of browser requests that change something, and bad input as a 4xx that names it."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

# Airflow's session cookie: a request carrying it came from a browser, so a change must carry the CSRF token too.
AIRFLOW_SESSION_COOKIE = "_token"
CSRF_COOKIE = "hk_csrftoken"
CSRF_HEADER = "x-csrftoken"


def _csrf_secret() -> str:
    """The api-server's own secret (shared by its workers), so a token one worker set is valid at the others."""
    from airflow.configuration import conf

    secret = conf.get("api", "secret_key", fallback=None) or conf.get("api_auth", "jwt_secret", fallback=None)
    if not secret:
        raise RuntimeError("[api] secret_key is not set: the console cannot sign its CSRF tokens")
    return secret


def create_app(mount_path: str = "/housekeeping") -> FastAPI:
    from starlette_csrf import CSRFMiddleware

    from housekeeping.console import api, backtest, next_run, pages, what_if
    from housekeeping.core.errors import HousekeepingError, NotFound

    app = FastAPI(
        title="Storage housekeeping console",
        description="The housekeeping console's JSON API (docs/console.md).",
        version="1",
        docs_url="/api/v1/docs",
        openapi_url="/api/v1/openapi.json",
        redoc_url=None,
    )
    app.include_router(api.router)
    app.include_router(pages.router)
    app.include_router(what_if.router)
    app.include_router(next_run.router)
    app.include_router(backtest.router)
    # Double submit: a browser request that changes something (it carries Airflow's session cookie) must carry the
    # console cookie's token in a header, which a page of another site can neither read nor set. A script that
    # sends a bearer token and no session cookie is not a browser's ambient authority and needs no token.
    app.add_middleware(
        CSRFMiddleware,
        secret=_csrf_secret(),
        sensitive_cookies={AIRFLOW_SESSION_COOKIE},
        cookie_name=CSRF_COOKIE,
        cookie_path=mount_path,
        cookie_samesite="strict",
        header_name=CSRF_HEADER,
    )

    @app.exception_handler(NotFound)
    async def not_found(request: Request, exc: NotFound) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=404)

    @app.exception_handler(HousekeepingError)
    async def bad_input(request: Request, exc: HousekeepingError) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=400)

    return app


def app_for_plugin() -> dict[str, Any]:
    """The ``fastapi_apps`` entry of the Airflow plugin."""
    return {"app": create_app(), "url_prefix": "/housekeeping", "name": "Storage housekeeping console"}
