"""Trigger a DAG through the Airflow UI's trigger form in headless Chromium, wait for the run, save screenshots.

Usage (Airflow running, e.g. `make airflow`):
    python scripts/trigger_from_ui.py DAG_ID [--as-of ISO] [--dry-run] [--scope GLOBS] \
        [--url http://localhost:8080] [--user admin --password PW] [--shots DIR]

It does what a person does: logs in, opens the DAG, clicks Trigger, fills the form's params, clicks Trigger,
then follows the run through the REST API until it ends, and prints the run's task states. Needs Debian's
chromium (/usr/bin/chromium) and the `playwright` Python package (requirements.txt); exit 1 unless the run
succeeds.
"""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path
from typing import Annotated

import typer
from playwright.sync_api import sync_playwright

# Chromium on these machines: no sandbox as root, and no background networking (the network is closed).
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


class Api:
    def __init__(self, base: str, user: str, password: str) -> None:
        self.base = base
        body = json.dumps({"username": user, "password": password}).encode()
        request = urllib.request.Request(
            f"{base}/auth/token", data=body, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request) as response:
            self.token = json.load(response)["access_token"]

    def get(self, path: str) -> dict:
        request = urllib.request.Request(
            f"{self.base}{path}", headers={"Authorization": f"Bearer {self.token}"}
        )
        with urllib.request.urlopen(request) as response:
            return json.load(response)


def login(page, url: str, user: str, password: str) -> None:
    """The login page, as a person fills it."""
    page.goto(f"{url}/")
    page.wait_for_selector("input[name=username]", timeout=60_000)
    page.locator("input[name=username]").fill(user)
    page.locator("input[name=password]").fill(password)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(lambda u: "/auth/login" not in u, timeout=60_000)


def dag_docs(page, url: str, dag_id: str, shot: Path | None = None) -> str:
    """The text of the DAG's "Dag Docs" dialog (its doc_md, rendered; screenshot to ``shot``), closed again."""
    page.goto(f"{url}/dags/{dag_id}")
    page.get_by_role("button", name="Dag Docs").click()
    dialog = page.get_by_role("dialog")
    dialog.get_by_text(dag_id).first.wait_for(timeout=30_000)
    text = dialog.inner_text()
    if shot is not None:
        page.wait_for_timeout(800)  # the dialog fades in
        page.screenshot(path=str(shot), full_page=True)
    page.keyboard.press("Escape")
    dialog.wait_for(state="hidden", timeout=30_000)
    return text


def open_trigger_form(page, url: str, dag_id: str, field: str = "dry_run"):
    """The DAG's Trigger dialog (its params form), opened from the DAG page's Trigger button; ready once the
    param ``field`` is there."""
    page.goto(f"{url}/dags/{dag_id}")
    page.get_by_role("button", name="Trigger").first.click()
    form = page.get_by_role("dialog")
    form.locator(f"[name=element_{field}]").first.wait_for(state="attached", timeout=30_000)
    return form


def fill_trigger_form(form, *, as_of: str | None, scope: str | None, dry_run: bool) -> None:
    if as_of:
        form.locator("#element_as_of").fill(as_of)
    if scope:
        form.locator("#element_scope").fill(scope)
    if dry_run:
        # Chakra's switch hides the input: click its label, then check the state really changed.
        form.locator("label:has(input[name=element_dry_run])").click()
        if not form.locator("input[name=element_dry_run]").is_checked():
            raise SystemExit("could not switch 'Dry run' on")


def submit_and_wait(page, form, api: Api, dag_id: str, before: set[str], timeout_s: float) -> tuple[str, str]:
    """Click the form's Trigger, find the run it created, follow it until it ends: (run id, final state)."""
    run_id = submit(form, api, dag_id, before)
    look_away(page)
    return run_id, wait_for_run(api, dag_id, run_id, timeout_s)


def look_away(page) -> None:
    """Leave Airflow's pages while a run is followed through the API: the UI polls a running DAG and re-renders
    it every few seconds, which kept a browser core busy for the whole run (~6-9 % of the test suite's CPU while
    the live Airflow tests ran)."""
    page.goto("about:blank")


def submit(form, api: Api, dag_id: str, before: set[str]) -> str:
    """Click the form's Trigger and find the run it created: its run id."""
    form.get_by_role("button", name="Trigger").last.click()
    run = None
    for _ in range(60):
        new = [
            r for r in api.get(f"/api/v2/dags/{dag_id}/dagRuns")["dag_runs"] if r["dag_run_id"] not in before
        ]
        if new:
            run = new[0]
            break
        time.sleep(1)
    if run is None:
        raise SystemExit(f"{dag_id}: the form created no run")
    run_id = run["dag_run_id"]
    print(f"{dag_id}: run {run_id} conf {json.dumps(run['conf'], sort_keys=True)}")
    return run_id


def wait_for_run(api: Api, dag_id: str, run_id: str, timeout_s: float) -> str:
    """Follow a run until it ends (or the timeout): its state."""
    started = time.monotonic()
    while True:
        state = api.get(f"/api/v2/dags/{dag_id}/dagRuns/{run_id}")["state"]
        if state in ("success", "failed") or time.monotonic() - started > timeout_s:
            break
        time.sleep(3)
    print(f"{dag_id}: {state} after {time.monotonic() - started:.0f} s")
    return state


def wait_for_task(
    api: Api, dag_id: str, run_id: str, task_id: str, states: set[str], timeout_s: float
) -> str:
    """Until the task instance is in one of ``states`` (the run failing first ends the wait): its state."""
    started = time.monotonic()
    while True:
        task = api.get(f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}")
        if task["state"] in states:
            return task["state"]
        run_state = api.get(f"/api/v2/dags/{dag_id}/dagRuns/{run_id}")["state"]
        if run_state in ("success", "failed") or time.monotonic() - started > timeout_s:
            raise SystemExit(f"{dag_id} {run_id}: {task_id} is {task['state']} and the run {run_state}")
        time.sleep(2)


def answer_required_action(
    page,
    url: str,
    dag_id: str,
    run_id: str,
    task_id: str,
    choice: str,
    subject: str,
    shot: Path | None = None,
):
    """The task's Required Action page, as a person answers it: the request (``subject`` shown; screenshot to
    ``shot``), then the ``choice`` button (Approve / Reject)."""
    from urllib.parse import quote

    page.goto(f"{url}/dags/{dag_id}/runs/{quote(run_id, safe='')}/tasks/{task_id}/required_actions")
    page.get_by_text(subject).first.wait_for(timeout=60_000)
    if shot is not None:
        page.screenshot(path=str(shot), full_page=True)
    page.get_by_role("button", name=choice, exact=True).first.click()


def main(
    dag_id: str,
    as_of: Annotated[str | None, typer.Option(help="the form's 'As of (UTC)'")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="switch the form's 'Dry run' on")] = False,
    scope: Annotated[str | None, typer.Option(help="the form's 'Scope'")] = None,
    url: str = "http://localhost:8080",
    user: str = "admin",
    password: Annotated[str, typer.Option(envvar="AIRFLOW_UI_PASSWORD")] = "admin",
    shots: Path = Path("ui-shots"),
    timeout_s: int = 1800,
    chromium: str = "/usr/bin/chromium",
) -> None:
    api = Api(url, user, password)
    shots.mkdir(parents=True, exist_ok=True)
    before = {r["dag_run_id"] for r in api.get(f"/api/v2/dags/{dag_id}/dagRuns")["dag_runs"]}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        login(page, url, user, password)
        form = open_trigger_form(page, url, dag_id)
        fill_trigger_form(form, as_of=as_of, scope=scope, dry_run=dry_run)
        page.screenshot(path=str(shots / f"{dag_id}-form.png"), full_page=True)
        run_id, state = submit_and_wait(page, form, api, dag_id, before, timeout_s)
        tasks = api.get(f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances")["task_instances"]
        print(json.dumps({t["task_id"]: t["state"] for t in tasks}, indent=2))
        page.goto(f"{url}/dags/{dag_id}/runs/{run_id}")
        page.wait_for_load_state("networkidle")
        page.screenshot(path=str(shots / f"{dag_id}-run.png"))
        browser.close()
    if state != "success":
        raise SystemExit(1)


if __name__ == "__main__":
    typer.run(main)
