"""A live Airflow, as users run it: `airflow standalone` (api-server, scheduler, dag-processor, triggerer,
LocalExecutor) with this project's DAGs, their Spark steps on a Spark Connect server (as `make airflow` runs
them) and a generated store; Airflow's database and the store's metadata are both on the real PostgreSQL server
the suite starts.

- A real browser (Debian's headless Chromium driven by Playwright) logs in, sees every DAG and the trim DAG's
  docs (every DAG's docs through the REST API the UI reads them from), opens the trim DAG's trigger form, sees
  its params, triggers a dry run and sees it succeed; nothing in the store changes. Screenshots: test-output/ui/
  (kept after the run, to look at).
- `airflow backfill create` over past dates of the trim DAG: the scheduler runs them (Spark Connect, Great
  Expectations, apply, purge) and the final state equals the same decisions applied one by one outside Airflow
  on a SQLite copy of the store (by the classic in-process session: the two kinds of session decide the same);
  backfilling the older date again changes nothing; every apply emitted an event of the store Asset.
- The storage_report DAG writes its HTML page, which a browser with the network refused shows whole.
- `airflow backfill create` over past days of the capacity_report DAG writes, for each date, what
  `housekeeping forecast` and `housekeeping usage` answer at that as-of; the latest report stays the newest date.

The scheduler's own time-based runs are off (`[scheduler] use_job_schedule = False`): only the runs the test
creates may touch the store.
"""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path

import pytest

from housekeeping.core.timeutil import parse_as_of
from housekeeping.engine.contract import TOPICS
from housekeeping.engine.snapshot_reads import read_snapshot_table
from housekeeping.mechanisms.steps import apply_step, plan_and_gate_in_process, purge_step, snapshot_step
from housekeeping.orchestration.dags import STORE_ASSET_NAME
from housekeeping.store.generate import GenerateOptions, generate_store
from tests.airflow_standalone import GRACE_SECONDS, running_standalone, ui_driver
from tests.conftest import cli_json
from tests.store_invariants import store_state

pytestmark = [pytest.mark.airflow, pytest.mark.processes]

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
SHOTS = REPO / "test-output" / "ui"
DAG_IDS = [
    "backlog_quota",
    "capacity_report",
    "compacted_ledger_retention",
    "consumed_ledger_trim",
    "inactive_topic_gc",
    "key_erasure",
    "ledger_offload",
    "message_expiry",
    "policy_what_if",
    "storage_report",
    "store_scrub",
]
TRIM = "consumed_ledger_trim"
CAPACITY = "capacity_report"
WHAT_IF = "policy_what_if"
STORE_OPTIONS = GenerateOptions(topics=14, seed=11, entries_per_ledger=40)
# Hourly: two runs, the second sees what the first did.
BACKFILL = ("2026-10-31T23:00:00+00:00", "2026-11-01T00:00:00+00:00")


@pytest.fixture(scope="module")
def live_airflow(tmp_path_factory, postgres_server, spark_connect_server):
    base = tmp_path_factory.mktemp("live-airflow")
    metadata_url = postgres_server.create_database("live")
    store = generate_store(base / "store", STORE_OPTIONS, metadata_url)
    with running_standalone(base, postgres_server, store, metadata_url, DAG_IDS) as live:
        yield live


def test_browser_sees_the_dags_their_docs_and_params_and_a_dry_run_succeeds(live_airflow):
    from playwright.sync_api import sync_playwright

    ui = ui_driver()
    SHOTS.mkdir(parents=True, exist_ok=True)
    before = store_state(live_airflow.store)
    api = live_airflow.api()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=ui.CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        ui.login(page, live_airflow.url, live_airflow.user, live_airflow.password)

        page.goto(f"{live_airflow.url}/dags")
        for dag_id in DAG_IDS:
            page.get_by_role("link", name=dag_id, exact=True).wait_for(timeout=30_000)
        page.screenshot(path=str(SHOTS / "01-dag-list.png"), full_page=True)

        # Every DAG's docs as the API serves them to the UI; the trim DAG's also as the browser renders them (every
        # DAG's page renders the same component, and a page in the browser costs a CPU-bound suite more).
        for dag_id in DAG_IDS:
            docs = api.get(f"/api/v2/dags/{dag_id}/details")["doc_md"] or ""
            assert f"{dag_id} (Airflow DAG)" in docs, docs[:300]
            assert dag_id == "storage_report" or "Params" in docs, docs[:300]
        docs = ui.dag_docs(page, live_airflow.url, TRIM, SHOTS / "02-trim-docs.png")
        assert f"{TRIM} (Airflow DAG)" in docs and "Params" in docs, docs[:300]
        assert "slowest durable subscription" in docs

        form = ui.open_trigger_form(page, live_airflow.url, TRIM)
        text = form.inner_text()
        for label in ("Dry run", "Scope", "As of (UTC)", "Blast-radius override"):
            assert label in text, f"trigger form lacks the {label!r} param: {text[:500]}"
        ui.fill_trigger_form(form, as_of="2026-11-01T00:00:00Z", scope="public,acme/*", dry_run=True)
        page.screenshot(path=str(SHOTS / "03-trigger-form.png"), full_page=True)
        existing = {r["dag_run_id"] for r in api.get(f"/api/v2/dags/{TRIM}/dagRuns")["dag_runs"]}
        run_id, state = ui.submit_and_wait(page, form, api, TRIM, existing, timeout_s=600)
        page.goto(f"{live_airflow.url}/dags/{TRIM}/runs/{run_id}")
        page.get_by_text("write_trim_report").first.wait_for(timeout=30_000)
        page.wait_for_load_state("networkidle")
        page.screenshot(path=str(SHOTS / "04-dry-run.png"), full_page=True)
        browser.close()

    tasks = {
        t["task_id"]: t["state"]
        for t in api.get(f"/api/v2/dags/{TRIM}/dagRuns/{run_id}/taskInstances")["task_instances"]
    }
    assert state == "success", tasks
    assert tasks["validate_trim_plan"] == "success" and tasks["apply_ledger_trim"] == "skipped", tasks
    run = api.get(f"/api/v2/dags/{TRIM}/dagRuns/{run_id}")
    assert (run["conf"]["dry_run"], run["conf"]["scope"]) == (True, "public,acme/*")
    assert store_state(live_airflow.store) == before, "a dry run changed the store"
    run_dir = live_airflow.store.run_dir("trim", f"{TRIM}__{run_id}")
    assert "DRY RUN" in (run_dir / "report" / "report.md").read_text()
    assert not (run_dir / "apply" / "result.json").exists()
    topics = [row["topic"] for row in read_snapshot_table(run_dir, TOPICS)]
    assert topics and all(t.startswith(("persistent://public/", "persistent://acme/")) for t in topics), (
        topics
    )
    as_of = json.loads((run_dir / "snapshot" / "run.json").read_text())["asOf"]
    assert parse_as_of(as_of) == parse_as_of("2026-11-01T00:00:00Z"), "the form's as_of is the decisions' now"


def test_a_sweep_triggered_from_the_what_if_form_writes_its_report_and_changes_nothing(live_airflow):
    """policy_what_if from its trigger form, as an operator asks "what would each retention time free?": the run
    succeeds, its page opens offline with the plot, and the store is as it was."""
    from playwright.sync_api import sync_playwright

    ui = ui_driver()
    before = store_state(live_airflow.store)
    live_airflow.cli("dags", "unpause", WHAT_IF)
    api = live_airflow.api()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=ui.CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        ui.login(page, live_airflow.url, live_airflow.user, live_airflow.password)
        form = ui.open_trigger_form(page, live_airflow.url, WHAT_IF, field="sweep")
        text = form.inner_text()
        for label in ("Mechanism", "Policy overlay", "As of (UTC)", "Sweep", "Scope"):
            assert label in text, f"trigger form lacks the {label!r} param: {text[:500]}"
        form.locator("#element_sweep").fill("retention-time=0,2h,-1")
        form.locator("#element_as_of").fill("2026-11-01T00:00:00Z")
        page.screenshot(path=str(SHOTS / "07-what-if-form.png"), full_page=True)
        existing = {r["dag_run_id"] for r in api.get(f"/api/v2/dags/{WHAT_IF}/dagRuns")["dag_runs"]}
        run_id, state = ui.submit_and_wait(page, form, api, WHAT_IF, existing, timeout_s=600)
        tasks = {
            t["task_id"]: t["state"]
            for t in api.get(f"/api/v2/dags/{WHAT_IF}/dagRuns/{run_id}/taskInstances")["task_instances"]
        }
        assert state == "success", tasks
        assert tasks == dict.fromkeys(["prepare_what_if", "run_what_if", "write_what_if_report"], "success")
        run = api.get(f"/api/v2/dags/{WHAT_IF}/dagRuns/{run_id}")
        assert (run["conf"]["mechanism"], run["conf"]["sweep"]) == ("trim", "retention-time=0,2h,-1")

        latest = json.loads((live_airflow.store.root / "reports" / "what-if" / "latest.json").read_text())
        report = json.loads((Path(latest["page"]).parent / "report.json").read_text())
        assert [p["value"] for p in report["points"]] == ["0", "2h", "-1"]
        freed = [p["total"]["bytesFreed"] for p in report["points"]]
        assert freed[0] > 0 and freed[-1] == 0, freed  # no retention frees the most; infinite frees nothing
        offline = browser.new_context(viewport={"width": 1300, "height": 1000}, offline=True).new_page()
        offline.goto(Path(latest["page"]).as_uri())
        offline.get_by_role("heading", name="Policy sweep: retention-time").wait_for(timeout=10_000)
        assert offline.locator("svg").count() >= 1 and offline.locator("#sweep tr").count() > 2
        offline.screenshot(path=str(SHOTS / "08-what-if-report.png"), full_page=True)
        browser.close()
    assert store_state(live_airflow.store) == before, "a what-if changed the store"


@pytest.mark.spark
@pytest.mark.runs
def test_backfill_create_equals_the_decisions_made_one_by_one_and_again_changes_nothing(
    live_airflow, tmp_path, spark
):
    live_airflow.cli("dags", "unpause", TRIM)
    # One run at a time, oldest first: a backfill replays history, so each date sees the previous one's result.
    # (A backfill's own max_active_runs defaults to 10, whatever the DAG's.)
    created = live_airflow.cli(
        "backfill", "create", "--dag-id", TRIM, "--from-date", BACKFILL[0], "--to-date", BACKFILL[1],
        "--max-active-runs", "1",
    )  # fmt: skip
    backfills = live_airflow.api().get(f"/api/v2/backfills?dag_id={TRIM}")["backfills"]
    assert len(backfills) == 1, created
    runs = live_airflow.wait_for_backfill(backfills[0]["id"], 2)
    run_dirs = {
        r["dag_run_id"]: live_airflow.store.run_dir("trim", f"{TRIM}__{r['dag_run_id']}") for r in runs
    }
    as_ofs = []
    oldest = min(runs, key=lambda r: r["logical_date"])
    for run in sorted(runs, key=lambda r: r["logical_date"]):
        info = json.loads((run_dirs[run["dag_run_id"]] / "snapshot" / "run.json").read_text())
        assert parse_as_of(info["asOf"]) == parse_as_of(run["data_interval_end"]), "as-of is the logical time"
        assert json.loads((run_dirs[run["dag_run_id"]] / "gate" / "result.json").read_text())["success"]
        as_ofs.append(parse_as_of(info["asOf"]))
    applied = [json.loads((d / "apply" / "result.json").read_text()) for d in run_dirs.values()]
    assert sum(a["ledgersDeleted"] for a in applied) > 0, "the scenario must delete something to be a test"
    changed = sorted(
        json.loads((d / "snapshot" / "run.json").read_text())["runId"]
        for d, a in zip(run_dirs.values(), applied, strict=True)
        if a["appliedTopics"]
    )
    final = store_state(live_airflow.store)

    # The same decisions one by one, outside Airflow, on the same generated store with SQLite metadata.
    manual = generate_store(tmp_path / "manual", STORE_OPTIONS)  # default: SQLite in the store
    for i, as_of_ms in enumerate(as_ofs):
        info = snapshot_step(manual, "trim", run_id=f"manual-{i}", as_of_ms=as_of_ms, max_deleted_share=1.0)
        assert plan_and_gate_in_process(info.run_dir, "trim", "local[2]").success
        apply_step(manual, info.run_dir, purge_grace_seconds=GRACE_SECONDS)
        purge_step(manual, info.run_dir)
    assert final == store_state(manual)

    # Backfilling the older date again (its completed run re-runs) after the newer one was applied changes
    # nothing: a replay of history on a store already past it. (One date, not both: the newer date's re-run would
    # replay onto the state it made itself, the easier case, for one more DAG run.)
    live_airflow.cli(
        "backfill", "create", "--dag-id", TRIM, "--from-date", BACKFILL[0], "--to-date", BACKFILL[0],
        "--max-active-runs", "1", "--reprocess-behavior", "completed",
    )  # fmt: skip
    again = max(b["id"] for b in live_airflow.api().get(f"/api/v2/backfills?dag_id={TRIM}")["backfills"])
    after = {r["logical_date"]: r for r in live_airflow.wait_for_backfill(again, 2)}
    first = {r["logical_date"]: r for r in runs}
    rerun = after[oldest["logical_date"]]
    assert parse_as_of(rerun["start_date"]) > parse_as_of(oldest["end_date"]), ("not re-run", rerun, oldest)
    assert all(after[d]["end_date"] == first[d]["end_date"] for d in first if d != oldest["logical_date"])
    replayed = json.loads((run_dirs[oldest["dag_run_id"]] / "apply" / "result.json").read_text())
    assert replayed["ledgersDeleted"] == 0, replayed
    assert store_state(live_airflow.store) == final

    # Every apply that changed the store emitted an event of the store Asset with its figures; the replay, which
    # changed nothing, emitted none (the storage report is not rebuilt for it).
    api = live_airflow.api()
    asset = next(a for a in api.get("/api/v2/assets?limit=100")["assets"] if a["name"] == STORE_ASSET_NAME)
    events = api.get(f"/api/v2/assets/events?asset_id={asset['id']}&limit=100")["asset_events"]
    assert {(e["source_dag_id"], e["source_task_id"]) for e in events} == {(TRIM, "apply_ledger_trim")}
    assert sorted(e["extra"]["runId"] for e in events) == changed, [e["extra"] for e in events]
    assert all(e["extra"]["ledgersDeleted"] + e["extra"]["cursorsMoved"] > 0 for e in events), events


def test_storage_report_runs_and_its_page_reads_offline(live_airflow):
    """The storage_report DAG (scheduled on the store Asset and daily; here triggered, as the scheduler's own
    time and asset triggers are off in this Airflow) writes its page; a browser with every network request
    refused shows it whole: plots inline, no script, no CDN."""
    from playwright.sync_api import sync_playwright

    ui = ui_driver()
    live_airflow.cli("dags", "unpause", "storage_report")
    api = live_airflow.api()
    before = {r["dag_run_id"] for r in api.get("/api/v2/dags/storage_report/dagRuns")["dag_runs"]}
    live_airflow.cli("dags", "trigger", "storage_report")
    deadline = time.monotonic() + 300
    while True:
        runs = [
            r
            for r in api.get("/api/v2/dags/storage_report/dagRuns")["dag_runs"]
            if r["dag_run_id"] not in before
        ]
        if runs and runs[0]["state"] in ("success", "failed"):
            break
        assert time.monotonic() < deadline, runs
        time.sleep(2)
    assert runs[0]["state"] == "success", runs
    page_path = live_airflow.store.root / "reports" / "storage" / "index.html"
    html = page_path.read_text()
    assert "<script" not in html and not re.search(r"(src|href)=\"(https?:)?//", html), (
        "nothing from the network"
    )
    data = json.loads((page_path.parent / "report.json").read_text())
    assert data["reclaimed"]["trim"]["purged"] + data["reclaimed"]["trim"]["pending"] > 0, data["reclaimed"]
    assert data["topBlockers"] and len(data["latestRuns"]) == 1

    requests: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=ui.CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1300, "height": 1000}, offline=True)
        page = context.new_page()
        page.on("request", lambda request: requests.append(request.url))
        page.goto(page_path.as_uri())
        for heading in ("Bytes per namespace over time", "Bytes reclaimed per mechanism", "Top blockers"):
            page.get_by_role("heading", name=heading).wait_for(timeout=10_000)
        assert page.locator("svg").count() >= 3, "the plots are inline SVG"
        page.screenshot(path=str(SHOTS / "05-storage-report.png"), full_page=True)
        # the latest what-if (the sweep the form ran), linked from the report
        page.locator("#latest-what-if").click()
        page.get_by_role("heading", name="Policy sweep: retention-time").wait_for(timeout=10_000)
        page.go_back()
        # the latest gate run's Great Expectations Data Docs, linked from the report, offline too
        page.get_by_role("link", name="Data Docs").first.click()
        page.get_by_role("heading", name=re.compile("Great Expectations gate: trim")).wait_for(timeout=10_000)
        page.locator("table a").first.click()  # a checked frame's page
        page.get_by_text("Expectation Validation Result").first.wait_for(timeout=10_000)
        assert page.get_by_text("values must belong to this set").count() > 0
        page.screenshot(path=str(SHOTS / "06-gate-data-docs.png"), full_page=True)
        browser.close()
    assert all(url.startswith("file://") for url in requests), requests


def test_a_backfill_of_capacity_report_writes_what_the_commands_answer_at_each_date(live_airflow, capsys):
    """Two past days backfilled through the scheduler (newest first, so the latest pointer must not move back to
    the older one): each run's forecast and chargeback equal the CLI's at the run's logical date, on the store
    as it is after them (the report reads the record as of its date, so later changes do not alter it)."""
    from housekeeping.core.timeutil import format_ms
    from housekeeping.observe.capacity.report import as_of_dir

    live_airflow.cli("dags", "unpause", CAPACITY)
    live_airflow.cli(
        "backfill", "create", "--dag-id", CAPACITY, "--from-date", "2026-10-30T00:00:00+00:00",
        "--to-date", "2026-10-31T23:00:00+00:00", "--max-active-runs", "1", "--run-backwards",
    )  # fmt: skip
    backfill = max(
        b["id"] for b in live_airflow.api().get(f"/api/v2/backfills?dag_id={CAPACITY}")["backfills"]
    )
    runs = live_airflow.wait_for_backfill(backfill, 2, dag_id=CAPACITY)
    dates = sorted(parse_as_of(r["logical_date"]) for r in runs)
    assert [format_ms(d) for d in dates] == ["2026-10-30T01:00:00.000Z", "2026-10-31T01:00:00.000Z"]
    reports = live_airflow.store.root / "reports" / "capacity"
    assert json.loads((reports / "latest.json").read_text())["asOf"] == format_ms(dates[-1])
    store = (
        "--store",
        str(live_airflow.store.root),
        "--metadata-url",
        live_airflow.env["HOUSEKEEPING_METADATA_URL"],
    )
    for as_of_ms in dates:
        as_of, written = format_ms(as_of_ms), as_of_dir(live_airflow.store, as_of_ms)
        forecast = cli_json(capsys, "forecast", *store, "--as-of", as_of)
        assert json.loads((written / "forecast.json").read_text()) == forecast
        assert forecast["limits"], "the generated store has quotas and retention to forecast"
        day_before = format_ms(as_of_ms - 86_400_000)
        usage = cli_json(capsys, "usage", *store, "--from", day_before, "--to", as_of, "--by", "tenant")
        assert json.loads((written / "usage.json").read_text())["tenant"] == usage
        assert usage["rows"], "the store held bytes that day"


APPROVE_TASK = "approve_ledger_trim"


@pytest.mark.parametrize(
    ("choice", "as_of", "user_decision"),
    [
        ("Reject", "2026-11-04T00:00:00Z", "rejected"),
        (None, "2026-11-05T00:00:00Z", "timed_out"),
        ("Approve", "2026-11-08T00:00:00Z", "approved"),
    ],
)
def test_a_person_rejects_or_approves_a_large_deletion_in_required_actions(
    live_airflow, capsys, choice, as_of, user_decision
):
    """The form's approval_namespace_share param set to 0 makes every deleting plan wait for a person. In the
    browser: the task's Required Action shows the request; Reject leaves the store as it was and the run succeeds
    with apply skipped; nobody answering is a Reject once the timeout passes; Approve applies exactly the plan. The
    journal names the person (or the timeout) and the decision."""
    from playwright.sync_api import sync_playwright

    from tests.conftest import run_cli

    ui = ui_driver()
    store = live_airflow.store
    live_airflow.cli("dags", "unpause", TRIM)
    before = store_state(store)
    api = live_airflow.api()
    request_shot = SHOTS / "09-approval-request.png" if choice == "Reject" else None
    answered_shot = SHOTS / f"10-approval-{user_decision}.png"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=ui.CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1100})
        ui.login(page, live_airflow.url, live_airflow.user, live_airflow.password)
        form = ui.open_trigger_form(page, live_airflow.url, TRIM, field="approval_namespace_share")
        assert "Approval above namespace share" in form.inner_text()
        ui.fill_trigger_form(form, as_of=as_of, scope=None, dry_run=False)
        # A number param is Chakra's NumberInput: its <input> sits inside the element of that id.
        share = form.locator(
            "input[name=element_approval_namespace_share], #element_approval_namespace_share input"
        ).first
        share.fill("0")
        share.press("Tab")
        existing = {r["dag_run_id"] for r in api.get(f"/api/v2/dags/{TRIM}/dagRuns")["dag_runs"]}
        run_id = ui.submit(form, api, TRIM, existing)
        ui.look_away(page)
        assert ui.wait_for_task(api, TRIM, run_id, APPROVE_TASK, {"awaiting_input"}, 600) == "awaiting_input"
        assert store_state(store) == before, "nothing is applied while the request waits"
        # As a person would: not within the seconds it takes the executor to report that the task parked. An
        # answer before that meets an Airflow 3.3 race (the resumed task is marked failed, "finished with state
        # success, but the task instance's state attribute is queued"; nothing is applied: docs/deployment.md).
        time.sleep(10)
        if request_shot is not None:
            # The request links to the run in the console, its Data Docs and its plan summary (not server paths).
            from urllib.parse import quote

            page.goto(
                f"{live_airflow.url}/dags/{TRIM}/runs/{quote(run_id, safe='')}/tasks/{APPROVE_TASK}/required_actions"
            )
            console = page.locator("a", has_text="The run in the housekeeping console").first
            console.wait_for(timeout=60_000)
            links = [console.get_attribute("href")] + [
                page.locator("a", has_text=text).first.get_attribute("href")
                for text in ("Gate report (Great Expectations Data Docs)", "plan summary")
            ]
            assert links[0] == f"/housekeeping/runs/trim/{TRIM}__{run_id}".replace(":", "_"), links
            for link in links:
                assert page.request.get(f"{live_airflow.url}{link}").status == 200, link
            assert str(store.root) not in page.inner_text("body"), "a server path in the request"
        if choice is not None:
            ui.answer_required_action(
                page, live_airflow.url, TRIM, run_id, APPROVE_TASK, choice, "Approve trim run", request_shot
            )
            page.get_by_text("Response received").first.wait_for(timeout=30_000)
            page.screenshot(path=str(answered_shot), full_page=True)
            ui.look_away(page)
        state = ui.wait_for_run(api, TRIM, run_id, 600)
        browser.close()

    tasks = {
        t["task_id"]: t["state"]
        for t in api.get(f"/api/v2/dags/{TRIM}/dagRuns/{run_id}/taskInstances")["task_instances"]
    }
    assert state == "success", tasks
    run_dir = store.run_dir("trim", f"{TRIM}__{run_id}")
    # The request: over the 0 share because the plan deletes ledgers (the scenario must, to be a test).
    request = json.loads((run_dir / "approval" / "request.json").read_text())
    assert request["required"] and request["measures"]["ledgers"] > 0, request
    assert any("stored bytes, over the threshold of 0.0%" in r for r in request["reasons"]), request
    decision = json.loads((run_dir / "approval" / "decision.json").read_text())
    who = live_airflow.user if choice is not None else "nobody (timed out)"
    actor = live_airflow.user if choice is not None else "approval timeout"
    assert (decision["decision"], decision["decidedBy"]) == (user_decision, who)
    code, out, _ = run_cli(
        capsys, "journal", "--store", str(store.root), "--run", run_id, "--format", "json",
        "--metadata-url", live_airflow.env["HOUSEKEEPING_METADATA_URL"],
    )  # fmt: skip
    approvals = [e for e in json.loads(out)["entries"] if e["action"] == "approval"]
    assert [(e["status"], e["actor"]) for e in approvals] == [(user_decision, actor)]
    if choice != "Approve":
        assert tasks["apply_ledger_trim"] == "skipped" and tasks["write_trim_report"] == "success", tasks
        assert tasks["purge_pending_deletions"] == "skipped", tasks
        assert store_state(store) == before, "a rejected plan changed the store"
        report = (run_dir / "report" / "report.md").read_text()
        expected = "**TIMED OUT**: nobody answered" if choice is None else f"**REJECTED** by {who}"
        assert expected in report and "Nothing was applied" in report, report[:1500]
    else:
        assert tasks["apply_ledger_trim"] == "success", tasks
        applied = json.loads((run_dir / "apply" / "result.json").read_text())
        assert applied["ledgersDeleted"] == request["measures"]["ledgers"]
        assert "**APPROVED** by admin" in (run_dir / "report" / "report.md").read_text()
