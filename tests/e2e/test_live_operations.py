"""Operating from the Airflow UI on a live Airflow whose scheduler creates scheduled runs (`airflow standalone`, the
housekeeping DAGs paused at creation as in `make airflow`). No preview deletes:

- the README's preview as an operator does it in the browser: Trigger, dry run on, "Unpause on trigger" left ticked.
  Airflow then also creates the DAG's latest scheduled run at once; it starts after its slot, so it previews too.
  The store is unchanged by both runs;
- a manual run that would apply with an as-of later than the clock fails at its first task, the store unchanged;
- the DAG's first apply on the store waits for a person (approved here); a run whose purge would remove more bytes
  than the approval threshold waits too, lists what purge would remove, and a Reject leaves every pending deletion
  restorable;
- a run not finished within its deadline (here 15 s) is alerted by the DAG's Deadline Alert.

And the console's policy what-if in the browser (from its page, and from a namespace's policy form before saving): a
sweep the store's policies refuse is named on the form and runs
nothing; a valid one runs the policy_what_if DAG and its page shows the report.
"""

from __future__ import annotations

import json
import time
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from sqlalchemy import func, select

from housekeeping.store import metadata_schema as t
from housekeeping.store.generate import GenerateOptions
from tests.airflow_standalone import running_standalone, ui_driver
from tests.store_invariants import store_state

pytestmark = [pytest.mark.airflow, pytest.mark.processes]

TRIM = "consumed_ledger_trim"


@pytest.fixture(scope="module")
def airflow_with_schedules(tmp_path_factory, postgres_server, spark_connect_server):
    from housekeeping.store.generate import generate_store

    base = tmp_path_factory.mktemp("preview-safety")
    metadata_url = postgres_server.create_database("preview")
    store = generate_store(
        base / "store", GenerateOptions(topics=10, seed=5, entries_per_ledger=30), metadata_url
    )
    with running_standalone(
        base,
        postgres_server,
        store,
        metadata_url,
        [TRIM, "policy_what_if"],
        AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE="True",
        # Every scheduled run previews here (none starts before its slot): the run Airflow creates at unpause
        # would at any tolerance (its slot is past), and a slot passing during the module changes nothing.
        HOUSEKEEPING_SCHEDULED_START_TOLERANCE_SECONDS="0",
        # Every run takes longer than this: each one's Deadline Alert fires.
        HOUSEKEEPING_RUN_DEADLINE_SECONDS="15",
        # The purge approval is answered by the test: on a loaded machine the harness's short timeout (its own
        # tests of an unanswered request) could expire first and race the answer.
        HOUSEKEEPING_APPROVAL_TIMEOUT_SECONDS="900",
        # As make airflow and compose ship it: the first apply of the DAG on the store asks a person.
        HOUSEKEEPING_APPROVAL_FIRST_APPLY="true",
    ) as live:
        yield live


def _wait(live, run_id: str, timeout_s: float = 600) -> dict:
    api, deadline = live.api(), time.monotonic() + timeout_s
    while True:
        run = api.get(f"/api/v2/dags/{TRIM}/dagRuns/{run_id}")
        if run["state"] in ("success", "failed"):
            return run
        assert time.monotonic() < deadline, run
        time.sleep(3)


def _tasks(live, run_id: str) -> dict[str, str]:
    found = live.api().get(f"/api/v2/dags/{TRIM}/dagRuns/{run_id}/taskInstances")["task_instances"]
    return {t["task_id"]: t["state"] for t in found}


def _call(live, method: str, path: str, **kwargs) -> httpx.Response:
    token = live.api().token
    return httpx.request(
        method, f"{live.url}{path}", headers={"Authorization": f"Bearer {token}"}, timeout=60, **kwargs
    )


@contextmanager
def _signed_in(live, width: int = 1400):
    """A headless Chromium page signed in to the live Airflow as its admin."""
    from playwright.sync_api import sync_playwright

    ui = ui_driver()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=ui.CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": width, "height": 1000})
        ui.login(page, live.url, live.user, live.password)
        try:
            yield page
        finally:
            browser.close()


def _trigger(live, conf: dict) -> str:
    """A manual run of the trim DAG (unpaused first: a paused DAG runs nothing; its scheduled runs preview here)."""
    assert _call(live, "PATCH", f"/api/v2/dags/{TRIM}", json={"is_paused": False}).status_code == 200
    response = _call(live, "POST", f"/api/v2/dags/{TRIM}/dagRuns", json={"logical_date": None, "conf": conf})
    assert response.status_code == 200, response.text
    return response.json()["dag_run_id"]


def test_a_dry_run_from_the_form_with_unpause_on_trigger_deletes_nothing(airflow_with_schedules):

    live, ui = airflow_with_schedules, ui_driver()
    before = store_state(live.store)
    api = live.api()
    assert api.get(f"/api/v2/dags/{TRIM}")["is_paused"], "the DAG starts paused, as in make airflow"
    with _signed_in(live) as page:
        form = ui.open_trigger_form(page, live.url, TRIM)
        assert "Unpause" in form.inner_text(), "the form offers to unpause the DAG"
        ui.fill_trigger_form(form, as_of=None, scope=None, dry_run=True)
        form.get_by_role("button", name="Trigger").last.click()
        ui.look_away(page)

    deadline = time.monotonic() + 120
    while not (manual_runs := live.runs("manual")):
        assert time.monotonic() < deadline, "the form created no run"
        time.sleep(2)
    manual = manual_runs[0]["dag_run_id"]
    assert manual_runs[0]["conf"]["dry_run"] is True
    assert _wait(live, manual)["state"] == "success"
    deadline = time.monotonic() + 300
    while not (scheduled := live.runs("scheduled")):
        assert time.monotonic() < deadline, "unpausing created no scheduled run"
        time.sleep(3)
    run = _wait(live, scheduled[0]["dag_run_id"])
    assert run["state"] == "success", _tasks(live, run["dag_run_id"])
    for run_id in (manual, run["dag_run_id"]):
        tasks = _tasks(live, run_id)
        assert tasks["validate_trim_plan"] == "success" and tasks["apply_ledger_trim"] == "skipped", tasks
        assert tasks["purge_pending_deletions"] == "skipped", tasks
        run_dir = live.store.run_dir("trim", f"{TRIM}__{run_id}")
        assert "DRY RUN" in (run_dir / "report" / "report.md").read_text()
    assert store_state(live.store) == before, "a preview changed the store"
    assert not api.get(f"/api/v2/dags/{TRIM}")["is_paused"], "the form unpaused the DAG, as it says"


def test_a_run_that_would_apply_in_the_future_fails_at_its_first_task(airflow_with_schedules):
    live = airflow_with_schedules
    before = store_state(live.store)
    tomorrow = (datetime.now(UTC) + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    run_id = _trigger(live, {"as_of": tomorrow, "dry_run": False})
    assert _wait(live, run_id)["state"] == "failed"
    tasks = _tasks(live, run_id)
    assert tasks["take_snapshot"] == "failed" and tasks["plan_ledger_trim"] in ("upstream_failed", None), (
        tasks
    )
    assert store_state(live.store) == before


def _answer_in_the_console(live, run_id: str, option: str) -> None:
    """As a person answers from the console: the header says a run waits, the Runs page's button, a yes."""
    from tests.housekeeping.console.test_api import SHOTS

    with _signed_in(live, 1440) as page:
        page.goto(f"{live.url}/housekeeping/")
        page.locator("#waiting", has_text="1 run waits for approval").wait_for(timeout=30_000)
        page.locator("#waiting").click()
        row = page.locator(f"#runs tr[data-run='{TRIM}__{run_id}']")
        assert "waiting for approval" in row.inner_text() and "the first trim apply" in row.inner_text()
        page.screenshot(path=str(SHOTS / "console-12-waiting-for-approval.png"), full_page=True)
        asked: list[str] = []
        page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.accept()))
        row.locator("button", has_text=option).click()
        page.wait_for_load_state("load")
        page.locator("#message.ok", has_text="approved: apply runs").wait_for(timeout=30_000)
        assert asked and run_id in asked[0], asked


def _answered(live, conf: dict, option: str, *, in_console: bool = False) -> tuple[str, str]:
    """A manual run with ``conf`` that waits for a person at its approval step, answered ``option`` through
    Airflow's REST API as the Required Actions page answers, or in the console: (run id, its final state)."""
    for attempt in (1, 2):
        run_id = _trigger(live, conf)
        waits = ui_driver().wait_for_task(
            live.api(), TRIM, run_id, "approve_ledger_trim", {"awaiting_input"}, 600
        )
        assert waits == "awaiting_input", (run_id, waits, live.failed_tasks(run_id))
        if in_console:
            # As a person would: not within the seconds it takes the executor to report that the task parked.
            time.sleep(10)
            _answer_in_the_console(live, run_id, option)
        else:
            answered = _call(
                live,
                "PATCH",
                f"/api/v2/dags/{TRIM}/dagRuns/{run_id}/taskInstances/approve_ledger_trim/-1/hitlDetails",
                json={"chosen_options": [option]},
            )
            assert answered.status_code == 200, answered.text
        state = _wait(live, run_id)["state"]
        if state == "success" or attempt == 2:
            return run_id, state
        # Airflow's scheduler can fail a task that deferred seconds after it started (the executor's event read
        # while it still saw the task queued): only that is run again, once; anything else fails here.
        assert live.lost_to_the_scheduler_race(run_id, "approve_ledger_trim"), live.failed_tasks(run_id)
    raise AssertionError("unreachable")


def test_the_first_apply_waits_for_a_person_and_a_purge_over_the_threshold_too_and_reject_keeps_everything(
    airflow_with_schedules,
):
    """HOUSEKEEPING_APPROVAL_FIRST_APPLY (make airflow and compose ship it on): the DAG's first apply on this store
    waits for a person, who approves it; later, a run whose purge would remove more than the bytes threshold waits
    too, and a Reject leaves every pending deletion restorable."""
    live = airflow_with_schedules
    before = store_state(live.store)
    first, state = _answered(live, {"as_of": "2026-11-02T00:00:00Z"}, "Approve", in_console=True)
    assert state == "success", live.failed_tasks(first)
    # Approved in the console, seen by Airflow: the task's answer is the console user's, and journaled as theirs.
    detail = _call(
        live, "GET", f"/api/v2/dags/{TRIM}/dagRuns/{first}/taskInstances/approve_ledger_trim/-1/hitlDetails"
    )
    assert detail.status_code == 200 and detail.json()["chosen_options"] == ["Approve"], detail.text
    assert detail.json()["responded_by_user"]["name"] == live.user, detail.text
    decision = json.loads(
        (live.store.run_dir("trim", f"{TRIM}__{first}") / "approval" / "decision.json").read_text()
    )
    assert (decision["decision"], decision["decidedBy"]) == ("approved", live.user)
    request = json.loads(
        (live.store.run_dir("trim", f"{TRIM}__{first}") / "approval" / "request.json").read_text()
    )
    assert request["required"] and request["reasons"][0].startswith("the first trim apply on this store"), (
        request
    )
    assert _tasks(live, first)["apply_ledger_trim"] == "success" and store_state(live.store) != before

    def waiting() -> int:
        with live.store.engine.connect() as conn:
            return conn.execute(
                select(func.count()).where(t.pending_deletions.c.status == "pending")
            ).scalar_one()

    assert waiting() > 0, "the first run deleted ledgers, waiting for their grace period"
    count = waiting()
    # Two hours later their grace (an hour) has passed: this run's purge would remove them. Not the first apply
    # any more: only the purge's bytes ask.
    second, state = _answered(live, {"as_of": "2026-11-02T02:00:00Z", "approval_bytes": 1}, "Reject")
    assert state == "success", live.failed_tasks(second)
    run_dir = live.store.run_dir("trim", f"{TRIM}__{second}")
    request = json.loads((run_dir / "approval" / "request.json").read_text())
    assert all("first" not in reason for reason in request["reasons"]), request["reasons"]
    assert any("its purge removes" in reason for reason in request["reasons"]), request["reasons"]
    assert (run_dir / "approval" / "purge-due.json").is_file()
    tasks = _tasks(live, second)
    assert tasks["apply_ledger_trim"] == "skipped" and tasks["purge_pending_deletions"] == "skipped", tasks
    assert waiting() == count, "a rejected purge removed nothing"


def test_a_run_past_its_deadline_is_alerted(airflow_with_schedules):
    live = airflow_with_schedules
    alerts = live.store.root / "alerts" / "run_deadline.jsonl"
    run_ids = {r["dag_run_id"] for r in live.runs()}
    assert run_ids, "the module's runs"
    deadline = time.monotonic() + 300
    while True:
        fired = [json.loads(line) for line in alerts.read_text().splitlines()] if alerts.is_file() else []
        if {a["runId"] for a in fired} & run_ids:
            break
        assert time.monotonic() < deadline, f"no Deadline Alert of {sorted(run_ids)}: {fired}"
        time.sleep(3)
    alert = next(a for a in fired if a["runId"] in run_ids)
    assert (alert["dagId"], alert["mechanism"], alert["deadlineSeconds"]) == (TRIM, "trim", 15), alert


def test_a_what_if_asked_in_the_console_runs_the_dag_and_shows_its_report(airflow_with_schedules):

    from tests.housekeeping.console.test_api import SHOTS

    live = airflow_with_schedules
    before = store_state(live.store)
    SHOTS.mkdir(parents=True, exist_ok=True)
    with _signed_in(live) as page:
        page.goto(f"{live.url}/housekeeping/what-if")
        # 30 minutes is not above acme/metrics' 1800 s backlog quota: refused on the form, nothing runs.
        page.fill("input[name=sweep]", "retention-time=30m")
        page.click("#what-if button")
        page.locator("#message.err").wait_for(timeout=30_000)
        assert "retention-time=30m" in page.inner_text("#message") and "acme/metrics" in page.inner_text(
            "#message"
        )
        assert live.runs(dag_id="policy_what_if") == []
        page.fill("input[name=sweep]", "retention-time=1d,7d")
        page.click("#what-if button")
        page.wait_for_url("**/housekeeping/what-if/*", timeout=30_000)
        page.locator("iframe#report").wait_for(timeout=600_000)
        page.frame_locator("iframe#report").locator("svg").first.wait_for(timeout=60_000)
        page.screenshot(path=str(SHOTS / "console-07-what-if.png"), full_page=True)

        # The housekeeping run of a DAG run, in the Airflow UI's tab on that run (the plugin's dag_run view).
        trim_run = live.runs("manual")[0]["dag_run_id"]
        page.goto(f"{live.url}/dags/{TRIM}/runs/{trim_run}")
        page.get_by_text("Housekeeping run", exact=True).first.click()
        frame = page.frame_locator("iframe")
        frame.locator("#actions").wait_for(timeout=60_000)
        assert trim_run in frame.locator("h1").inner_text()
        page.screenshot(path=str(SHOTS / "console-08-dag-run-tab.png"), full_page=True)
        # Its links leave the sandboxed frame and land on Airflow's pages, and Back returns.
        frame.locator("a", has_text="take_snapshot").click()
        page.wait_for_url(f"**/dags/{TRIM}/runs/**/tasks/take_snapshot", timeout=30_000)
        page.get_by_text("Logs", exact=True).first.wait_for(timeout=60_000)
        page.screenshot(path=str(SHOTS / "console-08b-task-log-from-the-console.png"))
        page.go_back()
        page.frame_locator("iframe").locator("#actions").wait_for(timeout=60_000)
        # From Browse -> Storage housekeeping: a run's page, its "the DAG run" link and its Data Docs.
        page.goto(f"{live.url}/plugin/housekeeping")
        console = page.frame_locator("iframe")
        console.locator("header a", has_text="Runs").click()
        console.locator(f"#runs tr[data-run='{TRIM}__{trim_run}'] a").click()
        console.locator("a", has_text="the DAG run").click()
        page.wait_for_url(f"**/dags/{TRIM}/runs/*", timeout=30_000)
        assert "/tasks/" not in page.url and "/plugin/" not in page.url, page.url
        page.go_back()
        page.frame_locator("iframe").locator("#data-docs").click()
        page.wait_for_url("**/gate/data_docs/index.html", timeout=30_000)
    (run,) = live.runs(dag_id="policy_what_if")
    assert run["state"] == "success" and run["conf"]["sweep"] == "retention-time=1d,7d"
    assert store_state(live.store) == before


def test_a_policy_change_is_what_iffed_from_the_namespace_page_before_it_is_saved(airflow_with_schedules):
    """The namespace page's policy form: "What if…" runs policy_what_if with the change as its overlay (every
    mechanism planned) and shows its report; nothing is saved or changed."""
    from tests.housekeeping.console.test_api import SHOTS

    live = airflow_with_schedules
    before = store_state(live.store)
    with _signed_in(live) as page:
        page.goto(f"{live.url}/housekeeping/namespaces/public/default")
        form = page.locator("#policy-form")
        form.locator("input[name=retentionTime]").fill("120")
        form.locator("input[name=retentionSize]").fill("-1")
        form.locator("#policy-what-if").click()
        page.wait_for_url("**/housekeeping/what-if/*", timeout=30_000)
        page.locator("iframe#report").wait_for(timeout=600_000)
        page.screenshot(path=str(SHOTS / "console-07b-policy-what-if.png"), full_page=True)
    deadline = time.monotonic() + 120  # the report is written by the run's last task, a moment before it ends
    while True:
        runs = [r for r in live.runs(dag_id="policy_what_if") if r["conf"].get("mechanism") == "all"]
        if runs and runs[0]["state"] != "running" or time.monotonic() > deadline:
            break
        time.sleep(2)
    assert len(runs) == 1 and runs[0]["state"] == "success", runs
    assert runs[0]["conf"]["policies"] == {
        "namespaces": {
            "public/default": {"retention_policies": {"retentionTimeInMinutes": 120, "retentionSizeInMB": -1}}
        }
    }
    assert store_state(live.store) == before


def test_the_runs_page_tells_each_run_apart_and_says_why_and_the_form_refuses_a_bad_scope(
    airflow_with_schedules,
):
    """The console's Runs (page and API) after the module's runs: the form's dry run, the preview Airflow made at
    unpause (with why), the future as-of refused at its first task (with the guard's words), the purge a person
    rejected, the run that applied; a run's page says DRY RUN or PREVIEW in its header. Then the trigger form with a
    scope that is a path: Airflow refuses it on the form, and no run is created."""

    from tests.housekeeping.console.test_api import SHOTS

    live, ui = airflow_with_schedules, ui_driver()
    rows = _call(live, "GET", "/housekeeping/api/v1/runs", params={"mechanism": "trim"}).json()["runs"]
    by_run = {row["dagRunId"]: row for row in rows if row["dagId"] == TRIM}
    assert set(by_run) == {r["dag_run_id"] for r in live.runs()}, "every DAG run Airflow knows, and only once"
    states = {}
    for row in by_run.values():
        states.setdefault(row["state"], []).append(row)
    assert {"dry_run", "previewed", "refused", "rejected", "applied"} <= set(states), states
    (refused,) = states["refused"]
    assert (
        refused["reason"].startswith("take_snapshot: bad input:")
        and "later than the clock" in refused["reason"]
    )
    assert refused["directory"] is None and refused["asOf"] is None
    assert all("started" in r["reason"] and "after its slot" in r["reason"] for r in states["previewed"])
    assert all(r["dryRun"] for r in states["dry_run"] + states["previewed"])
    assert any(r["reason"].startswith("approval rejected by") for r in states["rejected"]), states["rejected"]
    (applied,) = states["applied"]
    assert applied["bytesReclaimed"] > 0 and not applied["dryRun"] and applied["durationSeconds"] > 0
    refused_only = _call(live, "GET", "/housekeeping/api/v1/runs", params={"state": "refused"}).json()["runs"]
    assert [r["dagRunId"] for r in refused_only] == [refused["dagRunId"]]
    bad = _call(live, "GET", "/housekeeping/api/v1/runs", params={"state": "sleeping"})
    assert bad.status_code == 422 and "state" in bad.text

    before = {r["dag_run_id"] for r in live.runs()}
    SHOTS.mkdir(parents=True, exist_ok=True)
    with _signed_in(live, 1440) as page:
        page.goto(f"{live.url}/housekeeping/runs")
        row = page.locator("#runs tr[data-state=refused]")
        assert (
            row.count() == 1 and "REFUSED" in row.inner_text() and "later than the clock" in row.inner_text()
        )
        assert page.locator("#runs tr[data-state=previewed]").count() == len(states["previewed"])
        page.screenshot(path=str(SHOTS / "console-09-runs-states.png"), full_page=True)
        dry = states["dry_run"][0]
        page.goto(f"{live.url}/housekeeping/runs/trim/{dry['directory']}")
        assert page.locator("h1 #intent").inner_text() == "DRY RUN"
        assert "Nothing was applied or purged" in page.inner_text("main")
        preview = states["previewed"][0]
        page.goto(f"{live.url}/housekeeping/runs/trim/{preview['directory']}")
        assert page.locator("h1 #intent").inner_text() == "PREVIEW" and "after its slot" in page.inner_text(
            "main"
        )
        page.screenshot(path=str(SHOTS / "console-10-preview-run.png"))
        # The Airflow UI's tab on the refused run says why, not "has not taken its snapshot (yet)".
        page.goto(f"{live.url}/housekeeping/dag-runs/{TRIM}/{refused['dagRunId']}")
        assert "Refused before its snapshot" in page.inner_text(
            "body"
        ) and "later than the clock" in page.inner_text("body")

        form = ui.open_trigger_form(page, live.url, TRIM)
        ui.fill_trigger_form(form, as_of=None, scope="../../etc", dry_run=True)
        form.get_by_role("button", name="Trigger").last.click()
        page.get_by_text("Failed to Trigger Dag").first.wait_for(timeout=30_000)
        page.screenshot(path=str(SHOTS / "console-11-form-refuses-scope.png"), full_page=True)
    # What the form was told (the REST trigger it calls): the param and the rule it broke.
    refused_by_api = _call(
        live,
        "POST",
        f"/api/v2/dags/{TRIM}/dagRuns",
        json={"logical_date": None, "conf": {"scope": "../../etc"}},
    )
    assert refused_by_api.status_code == 400 and "scope" in refused_by_api.text, refused_by_api.text
    assert {r["dag_run_id"] for r in live.runs()} == before, "the form created a run with a bad scope"


def test_what_the_next_scheduled_run_will_do_is_a_dry_run_as_of_its_slot(airflow_with_schedules):
    """A mechanism's Runs page says when its DAG runs next and, asked, starts a dry run as of that slot's logical
    time (Delta's VACUUM DRY RUN): it plans, gates and reports, and changes nothing."""
    from tests.housekeeping.console.test_api import SHOTS

    live = airflow_with_schedules
    before = store_state(live.store)
    assert _call(live, "PATCH", f"/api/v2/dags/{TRIM}", json={"is_paused": False}).status_code == 200

    def slot() -> datetime:
        return datetime.fromisoformat(live.api().get(f"/api/v2/dags/{TRIM}")["next_dagrun_data_interval_end"])

    existing = {r["dag_run_id"] for r in live.runs()}
    with _signed_in(live) as page:
        slot_before = slot()
        page.goto(f"{live.url}/housekeeping/runs?mechanism=trim")
        panel = page.locator("#next-run")
        shown = datetime.fromisoformat(panel.locator("code").inner_text())
        panel.locator("#preview-next").click()
        said = page.locator("#message.ok", has_text="a dry run as of")
        said.wait_for(timeout=30_000)
        as_of = said.inner_text().split("a dry run as of ", 1)[1].split(" ", 1)[0]
        # The slot Airflow has next (it moves on only when the hour turns while the test runs).
        slots = (slot_before, slot())
        assert shown in slots and datetime.fromisoformat(as_of) in slots, (shown, as_of, slots)
        (run_id,) = {r["dag_run_id"] for r in live.runs()} - existing
        run = _wait(live, run_id)
        page.goto(f"{live.url}/housekeeping/runs?mechanism=trim")
        row = page.locator(f"#runs tr[data-run='{TRIM}__{run_id}']")
        assert row.get_attribute("data-state") == "dry_run", row.inner_text()
        page.screenshot(path=str(SHOTS / "console-03d-next-run.png"), full_page=True)
    assert run["state"] == "success" and run["conf"] == {"dry_run": True, "as_of": as_of}, run
    assert _tasks(live, run_id)["apply_ledger_trim"] == "skipped"
    assert store_state(live.store) == before
