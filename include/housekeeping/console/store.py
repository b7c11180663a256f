"""The store the console shows: the one the DAGs housekeep (``HOUSEKEEPING_STORE_ROOT`` and its metadata URL in the
api-server's environment), opened per request so a store replaced underneath is read as it is. Routes take it as a
FastAPI dependency (``store: ConsoleStore``, ``settings: ConsoleSettings``), after the user's access check."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, HTTPException, status

from housekeeping.core.settings import Settings
from housekeeping.store.store import Store


def console_settings() -> Settings:
    settings = Settings.from_env()
    if not settings.store_root:
        raise HTTPException(
            status.HTTP_503_SERVICE_UNAVAILABLE,
            "HOUSEKEEPING_STORE_ROOT is not set in the api-server's environment: the console has no store to show",
        )
    return settings


def console_store(settings: Annotated[Settings, Depends(console_settings)]) -> Store:
    return Store.of_settings(settings)


ConsoleSettings = Annotated[Settings, Depends(console_settings)]
ConsoleStore = Annotated[Store, Depends(console_store)]
