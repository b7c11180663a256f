"""The Spark settings both ends of a Spark step agree on: the orchestration that launches it
(``housekeeping.orchestration.spark_connect``, ``spark_operator``) and the app's own session
(``spark_apps.shared.session``). Here, below both, so that the apps never reach up into orchestration."""

from __future__ import annotations

# A Connect launch's SQL settings (a JSON object): the Spark step's operator ``conf`` (its ``spark.sql.*`` entries,
# ``spark_operator.connect_conf``), which spark-submit would pass as --conf but a server shared by every client
# cannot take; the app's session sets them (``spark_apps.shared.session``).
CONNECT_SQL_CONF_ENV = "HOUSEKEEPING_CONNECT_SQL_CONF"


def is_session_setting(key: str) -> bool:
    """A setting one Connect client may set on its own session (Spark SQL's); the others are the server's."""
    return str(key).startswith("spark.sql.")


# A driver that runs many runs (this server, and the in-process session of the CLI and the tests, which
# spark_apps.shared.session builds with the same settings): the status store keeps every job's and SQL execution's
# plan even without a UI, and the cursor planners run many small jobs with large plans, so it keeps only recent
# ones (else the driver heap fills); the console progress bar is off (its carriage returns garble a log).
LONG_LIVED_DRIVER_CONF = {
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.ui.retainedExecutions": "50",
    "spark.ui.retainedJobs": "200",
    "spark.ui.retainedStages": "200",
    # PySpark's DataFrame debugging records the Python call site of every Column and DataFrame function in the
    # driver (five py4j round trips per call on a classic session); Spark documents its "non-trivial performance
    # overhead". A plan builds thousands of expressions, so off it makes a third of the py4j calls (benchmarks/).
    # Errors keep Spark's own message and plan context, without the Python line that built the failing expression.
    "spark.python.sql.dataFrameDebugging.enabled": "false",
}
