"""The Airflow plugin of the housekeeping console: its FastAPI app at ``/housekeeping`` (pages and the JSON API,
``housekeeping.console``), a "Storage housekeeping" entry in the navigation and a view on every DAG run. Plugin
objects only; the console is a front end over the library, as the CLI is."""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from housekeeping.console.app import app_for_plugin


class HousekeepingConsolePlugin(AirflowPlugin):
    name = "housekeeping_console"
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
