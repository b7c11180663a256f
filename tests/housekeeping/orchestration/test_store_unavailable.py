"""A metadata database that is away (stopped, failing over, locked past the timeout) is not bad input to a DAG:
the task fails so that Airflow retries it, and its failure is recorded as failed, not refused. The soak found it:
with the store's PostgreSQL stopped for 15 s, every run that took its snapshot then failed for good, unretried, as
"bad input"."""

from __future__ import annotations

import pytest

from housekeeping.core.errors import InputError, StoreUnavailable
from housekeeping.store.store import make_engine, read_transaction
from tests.pg_server import free_port

pytestmark = pytest.mark.unit


def test_an_unreachable_database_is_store_unavailable_and_still_exit_2_on_the_command_line():
    engine = make_engine(f"postgresql+psycopg2://nobody@127.0.0.1:{free_port()}/store")
    with pytest.raises(StoreUnavailable, match="cannot be used") as raised:
        with read_transaction(engine) as conn:
            conn.exec_driver_sql("SELECT 1")
    assert isinstance(raised.value, InputError) and raised.value.exit_code == 2


def _snapshot_callable(monkeypatch, error: Exception):
    import airflow.sdk

    from housekeeping.orchestration import dags

    monkeypatch.setattr(airflow.sdk, "get_current_context", lambda: {})
    monkeypatch.setattr(dags, "_take_snapshot", lambda spec, context: (_ for _ in ()).throw(error))
    dag = dags.build_housekeeping_dag("trim", doc_md="test")
    return dag.get_task("take_snapshot").python_callable


def test_the_snapshot_step_lets_airflow_retry_a_database_that_is_away(monkeypatch):
    from airflow.sdk.exceptions import AirflowFailException

    away = StoreUnavailable("metadata database postgresql://... cannot be used: connection refused")
    with pytest.raises(StoreUnavailable):
        _snapshot_callable(monkeypatch, away)()
    with pytest.raises(AirflowFailException, match="bad input: scope item"):
        _snapshot_callable(monkeypatch, InputError("scope item '../x' is not a tenant"))()
