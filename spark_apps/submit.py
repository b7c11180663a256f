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
    except Exception as error:
        record_failure(argv, error)
        raise
    finally:
        stop_connect_session()


def record_failure(argv: list[str], error: Exception) -> None:
    """The app's error as its run's step failure (``failures/<step>.json``), so the console gives the cause and not
    the exit code the task saw. The step is the task's (``HOUSEKEEPING_STEP``, set by the DAG), else the app's."""
    import os

    from housekeeping.core.errors import InputError, StoreUnavailable
    from housekeeping.core.timeutil import wall_clock_ms
    from housekeeping.engine.documents import record_step_failure

    if "--run-dir" not in argv[:-1]:
        return
    run_dir = argv[argv.index("--run-dir") + 1]
    step = os.environ.get("HOUSEKEEPING_STEP") or argv[0].rsplit(".", 1)[-1]
    message = f"{type(error).__name__}: {error}" if not isinstance(error, InputError) else str(error)
    try:
        record_step_failure(
            run_dir,
            step,
            message,
            refused=isinstance(error, InputError) and not isinstance(error, StoreUnavailable),
            at_ms=wall_clock_ms(),
        )
    except OSError as unwritable:  # the error itself is what the task reports; this is only its explanation
        print(f"could not record the failure in {run_dir}: {unwritable}", file=sys.stderr)


if __name__ == "__main__":
    # Run as a script, Python puts this file's folder first on the path, where spark_apps' own modules would
    # shadow top-level ones; the project root takes its place (an installed project imports either way).
    sys.path[0] = str(Path(__file__).resolve().parent.parent)
    from housekeeping.core.process_exit import skip_garbage_collection_at_exit

    skip_garbage_collection_at_exit()
    sys.exit(main(sys.argv[1:]))
