"""What every plan app's command line is: ``--run-dir`` in, the plan written there, its summary printed as JSON. Each
plan app keeps its own ``parse_args`` and ``main`` (the launcher and spark-submit call them) as one line over these."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from spark_apps.shared.session import get_spark


def parse_plan_args(description: str, argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--run-dir", required=True, help="run directory holding snapshot/; plan/ is written there"
    )
    return parser.parse_args(argv)


def plan_main(mechanism: str, run: Callable[[Any, str | Path], dict], args: argparse.Namespace) -> int:
    """Plan one run in a Spark application named after ``mechanism``; print the plan's summary."""
    summary = run(get_spark(f"housekeeping-plan-{mechanism}"), args.run_dir)
    print(json.dumps(summary, sort_keys=True))
    return 0
