"""The gate's Great Expectations Data Docs (GX's own renderer and page view) are written per run and read
offline: no tag loads anything from the network, and the validation results are there as text."""

from __future__ import annotations

import os
import re

import pytest

from housekeeping.gate import write_data_docs

pytestmark = pytest.mark.unit

EXTERNAL = re.compile(r"(?:src|href)=\"(?:https?:)?//", re.IGNORECASE)


@pytest.fixture(scope="module")
def validations():
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "False")
    import great_expectations as gx
    import great_expectations.expectations as gxe
    import pandas as pd

    context = gx.get_context(mode="ephemeral")
    source = context.data_sources.add_pandas("checks")
    results = []
    for name, values in (("cursor_moves", [True, True]), ("deletions", [True, False, True])):
        batch = (
            source.add_dataframe_asset(name)
            .add_batch_definition_whole_dataframe("whole")
            .get_batch(batch_parameters={"dataframe": pd.DataFrame({"not_current_ledger": values})})
        )
        suite = gx.ExpectationSuite(name=f"trim_{name}")
        suite.add_expectation(gxe.ExpectColumnValuesToBeInSet(column="not_current_ledger", value_set=[True]))
        results.append((name, batch.validate(suite, result_format={"result_format": "SUMMARY"})))
    return results


def test_data_docs_pages_exist_per_frame_and_need_no_network(tmp_path, validations):
    index = write_data_docs(tmp_path / "data_docs", "trim", validations, success=False)
    pages = {p.name: p.read_text() for p in index.parent.glob("*.html")}
    assert set(pages) == {"index.html", "cursor_moves.html", "deletions.html"}
    for name, html in pages.items():
        assert not EXTERNAL.search(html), f"{name} loads something from the network"
    assert "REJECTED" in pages["index.html"] and 'href="deletions.html"' in pages["index.html"]
    deletions = pages["deletions.html"]
    assert "Expectation Validation Result" in deletions and "values must belong to this set" in deletions
    assert "1 unexpected values found" in deletions and "trim_deletions" in deletions
