"""Spark app: the policy_what_if DAG's run (``housekeeping.what_if.what_if.run_what_if``), the same code as
``housekeeping what-if``: a what-if of one mechanism or all (two plans and the gate each) or a sweep (every value
in this one application), on this application's session. Writes ``report.json`` to the request's report
directory; the DAG's next task draws the page. Nothing is written to the store's data or metadata."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from housekeeping.core.settings import Settings
from housekeeping.store.store import Store
from housekeeping.what_if.overlay import PolicyOverlay
from housekeeping.what_if.report import WHAT_IF_JSON
from housekeeping.what_if.what_if import run_what_if
from spark_apps.shared.session import get_spark


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Run a policy what-if or sweep and write its report.json.")
    parser.add_argument(
        "--request", required=True, help="request.json written by the DAG's prepare_what_if task"
    )
    return parser.parse_args(argv)


def run(spark, request_path: str | Path) -> dict:
    request = json.loads(Path(request_path).read_text(encoding="utf-8"))
    document = run_what_if(
        Store.of_settings(Settings.from_env()),
        request["mechanism"],
        PolicyOverlay.from_document(request["policies"], "the policies param")
        if request["policies"]
        else None,
        as_of=request["asOf"],
        scope=request.get("scope"),
        sweep=request.get("sweep"),
        spark=spark,
    )
    (Path(request["reportDir"]) / WHAT_IF_JSON).write_text(json.dumps(document, indent=2), encoding="utf-8")
    return document


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    document = run(get_spark("housekeeping-what-if"), args.request)
    print(json.dumps({key: document[key] for key in ("asOf", "mechanism", "sweep") if key in document}))
    return 0
