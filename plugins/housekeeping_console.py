"""The Airflow plugin of the housekeeping console: its FastAPI app at ``/housekeeping`` (pages and the JSON API,
``housekeeping.console``), a "Storage housekeeping" entry in the navigation and a view on every DAG run. Plugin
objects only; the console is a front end over the library, as the CLI is.

Every Airflow process loads plugins; only the api-server serves their apps. The app is built there alone (as the
edge worker's and other providers' plugins do, from the command the process runs), so the scheduler, the
dag-processor and the task processes neither import the console nor need the api-server's ``[api] secret_key``."""

from __future__ import annotations

import sys

from airflow.plugins_manager import AirflowPlugin

RUNNING_ON_APISERVER = len(sys.argv) > 1 and sys.argv[1] == "api-server"


class HousekeepingConsolePlugin(AirflowPlugin):
    name = "housekeeping_console"
    if RUNNING_ON_APISERVER:
        from housekeeping.console.app import app_for_plugin

        fastapi_apps = [app_for_plugin()]
    external_views = [
        {
            "name": "Storage housekeeping",
            "href": "housekeeping/",
            "url_route": "housekeeping",
            "destination": "nav",
            "category": "browse",
        },
        {
            "name": "Housekeeping run",
            "href": "housekeeping/dag-runs/{DAG_ID}/{RUN_ID}",
            # Airflow's UI shows a plugin tab on a DAG run only when the view has a route of its own.
            "url_route": "housekeeping-run",
            "destination": "dag_run",
        },
    ]
