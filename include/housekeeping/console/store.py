"""The store the console shows: the one the DAGs housekeep (``HOUSEKEEPING_STORE_ROOT`` and its metadata URL in the
api-server's environment), opened per request so a store replaced underneath is read as it is."""

from __future__ import annotations

from typing import Any

from fastapi import HTTPException, status


def console_store() -> tuple[Any, Any]:
    from housekeeping.core.settings import Settings
    from housekeeping.store.store import Store

    settings = Settings.from_env()
    if not settings.store_root:
        raise HTTPException(
            status.HTTP_503_SERVICE_UNAVAILABLE,
            "HOUSEKEEPING_STORE_ROOT is not set in the api-server's environment: the console has no store to show",
        )
    return Store.of_settings(settings), settings
