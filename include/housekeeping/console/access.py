"""Who may use the console, asked of Airflow's auth manager (whichever one is configured): reading needs read
access to every housekeeping DAG, restore and hold changes need edit access to them. The actor the journal and a
hold record is the authenticated Airflow user."""

from __future__ import annotations

from typing import Annotated, Any

from airflow.api_fastapi.core_api.security import get_user
from fastapi import Depends, HTTPException, status


def housekeeping_dag_ids() -> list[str]:
    """The DAGs whose data the console shows: every mechanism's, the storage and capacity reports' and the what-if's."""
    from housekeeping.mechanisms.registry import MECHANISMS

    return [*(m.dag_id for m in MECHANISMS.values()), "storage_report", "policy_what_if", "capacity_report"]


def _denied(user: Any, method: str) -> list[str]:
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import DagDetails

    manager = get_auth_manager()
    return [
        dag_id
        for dag_id in housekeeping_dag_ids()
        if not manager.is_authorized_dag(method=method, details=DagDetails(id=dag_id), user=user)
    ]


def may_edit(user: Any) -> bool:
    """Whether the user may change what the console changes (a page offers its forms only then; the API asks
    again)."""
    return not _denied(user, "PUT")


def _authorized(user: Any, method: str) -> Any:
    denied = _denied(user, method)
    if denied:
        what = "read" if method == "GET" else "edit"
        raise HTTPException(
            status.HTTP_403_FORBIDDEN,
            f"user {user.get_name()!r} may not {what} the housekeeping DAGs ({', '.join(denied)})",
        )
    return user


async def reader(user: Annotated[Any, Depends(get_user)]) -> Any:
    return _authorized(user, "GET")


async def editor(user: Annotated[Any, Depends(get_user)]) -> Any:
    return _authorized(user, "PUT")


Reader = Annotated[Any, Depends(reader)]
Editor = Annotated[Any, Depends(editor)]


def actor_of(user: Any) -> str:
    """The journal's actor for a change made through the console."""
    return str(user.get_name())


def may_trigger(user: Any, dag_id: str) -> None:
    """Refuse (403) a user who may not start runs of ``dag_id`` (what the console starts on their behalf)."""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity, DagDetails

    if not get_auth_manager().is_authorized_dag(
        method="POST", access_entity=DagAccessEntity.RUN, details=DagDetails(id=dag_id), user=user
    ):
        raise HTTPException(status.HTTP_403_FORBIDDEN, f"user {user.get_name()!r} may not run {dag_id}")
