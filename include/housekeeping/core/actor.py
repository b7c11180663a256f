"""Who is acting, for the journal and for holds: ``HOUSEKEEPING_ACTOR`` if set, else ``<user>@<host>``.

DAG runs pass their own (``airflow <dag_id> (<run_id>)``, with the triggering user when Airflow knows it) to
the snapshot, and apply journals the snapshot's actor, so a run's every journal row names the same actor.
"""

from __future__ import annotations

import getpass
import os
import socket


def current_actor() -> str:
    explicit = os.environ.get("HOUSEKEEPING_ACTOR", "").strip()
    if explicit:
        return explicit[:250]
    try:
        user = getpass.getuser()
    except Exception:  # no passwd entry (some containers): the uid still says who
        user = f"uid {os.getuid()}"
    return f"{user}@{socket.gethostname()}"[:250]
