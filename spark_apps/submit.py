"""The file spark-submit runs: ``spark-submit spark_apps/submit.py <app module> [app args]`` runs that app's
``main(args)``, e.g. ``spark-submit spark_apps/submit.py spark_apps.trim.plan --run-dir RUN``. The DAGs' tasks
build this command (``housekeeping.engine.launcher``); an app is a module with parse_args/main/run, named by the
mechanism registry. A task on a Spark Connect connection runs the same file with ``python`` and ``SPARK_REMOTE``
set: the same ``main`` on a Connect session, closed when the app ends."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    if not argv or not argv[0].startswith("spark_apps."):
        print("usage: spark-submit spark_apps/submit.py spark_apps.<app module> [args]", file=sys.stderr)
        return 2
    from spark_apps.shared.session import interrupt_connect_work_on_sigterm, stop_connect_session

    interrupt_connect_work_on_sigterm()
    try:
        return importlib.import_module(argv[0]).main(argv[1:])
    finally:
        stop_connect_session()


if __name__ == "__main__":
    # Run as a script, Python puts this file's folder first on the path, where spark_apps' own modules would
    # shadow top-level ones; the project root takes its place (an installed project imports either way).
    sys.path[0] = str(Path(__file__).resolve().parent.parent)
    from housekeeping.core.process_exit import skip_garbage_collection_at_exit

    skip_garbage_collection_at_exit()
    sys.exit(main(sys.argv[1:]))
