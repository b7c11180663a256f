"""The housekeeping console: a front end over the library in the Airflow UI, as the CLI is one at the shell.

``app.create_app()`` is the FastAPI app the Airflow plugin (``plugins/housekeeping_console.py``) mounts at
``/housekeeping``: server-rendered pages (the store, a run, pending deletions with Restore, holds, the journal) and
the JSON API under ``/housekeeping/api/v1`` (docs/console.md) that the pages use and scripts may too. Every route
asks Airflow's auth manager (``access``); the data comes from ``housekeeping.observe.console`` and the changes go
through the same library calls as the CLI's.
"""
