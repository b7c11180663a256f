"""The Alembic migrations (which own the DDL) and the query-side Table objects describe the same schema."""

from __future__ import annotations

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine

from housekeeping.store import metadata_schema
from housekeeping.store.store import migrate

pytestmark = pytest.mark.unit


def test_migrations_match_the_table_definitions(tmp_path):
    engine = create_engine(f"sqlite:///{tmp_path / 'm.db'}")
    migrate(engine)
    with engine.connect() as connection:
        differences = compare_metadata(MigrationContext.configure(connection), metadata_schema.metadata)
    # Server defaults and type affinities are not compared by default; tables, columns, indexes and keys are.
    assert differences == []
