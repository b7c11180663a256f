"""The console's JSON API on a running `airflow api-server` with the plugin loaded and two users, a viewer and an
admin (Airflow's simple auth manager): nobody gets in without a token, a viewer reads and cannot change, a browser
request that changes something needs the console's CSRF token, hostile names and paths are a 4xx naming them and
change nothing, and a hold and a restore through the API equal the CLI's, journaled with the Airflow user."""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from tests.conftest import REPO, VENV_BIN, run_cli
from tests.pg_server import free_port

pytestmark = [pytest.mark.processes, pytest.mark.spark, pytest.mark.runs]

AS_OF = "2026-11-02T00:00:00Z"
API = "/housekeeping/api/v1"
TOPIC = "persistent://public/default/t-00000"  # has the durable subscription sub-main


class ApiServer:
    """`airflow api-server` in a home of its own, stopped at the end."""

    def __init__(self, home: Path, env: dict[str, str], process: subprocess.Popen, port: int) -> None:
        self.home, self.env, self.process = home, env, process
        self.url = f"http://127.0.0.1:{port}"

    @classmethod
    def start(cls, base: Path, store_root: Path, users: str) -> ApiServer:
        home, port = base / "airflow-home", free_port()
        home.mkdir()
        env = {
            **os.environ,
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),
            "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": users,
            "AIRFLOW__API__PORT": str(port),
            "AIRFLOW__API__WORKERS": "1",
            "HOUSEKEEPING_STORE_ROOT": str(store_root),
        }
        subprocess.run([str(VENV_BIN / "airflow"), "db", "migrate"], env=env, check=True, capture_output=True)
        log = (base / "api-server.log").open("wb")
        process = subprocess.Popen(
            [str(VENV_BIN / "airflow"), "api-server", "--port", str(port)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        server = cls(home, env, process, port)
        deadline = time.monotonic() + 180
        while True:
            assert process.poll() is None, (base / "api-server.log").read_text()[-4000:]
            try:
                if httpx.get(f"{server.url}/api/v2/monitor/health", timeout=5).status_code == 200:
                    return server
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, (base / "api-server.log").read_text()[-4000:]
            time.sleep(1)

    def password(self, user: str) -> str:
        return json.loads((self.home / "simple_auth_manager_passwords.json.generated").read_text())[user]

    def token(self, user: str) -> str:
        response = httpx.post(
            f"{self.url}/auth/token", json={"username": user, "password": self.password(user)}, timeout=30
        )
        assert response.status_code in (200, 201), response.text
        return response.json()["access_token"]

    def call(self, method: str, path: str, token: str | None = None, **kwargs) -> httpx.Response:
        headers = dict(kwargs.pop("headers", {}))
        if token:
            headers["Authorization"] = f"Bearer {token}"
        return httpx.request(method, f"{self.url}{path}", headers=headers, timeout=60, **kwargs)

    def stop(self) -> None:
        import psutil

        tree = [psutil.Process(self.process.pid), *psutil.Process(self.process.pid).children(recursive=True)]
        for member in tree:
            member.terminate()
        _, alive = psutil.wait_procs(tree, timeout=30)
        for member in alive:
            member.kill()


@pytest.fixture(scope="module")
def stores(tmp_path_factory, spark):
    """A generated store after a trim run that found the store changed since its snapshot (a subscription created
    at earliest on a topic it planned: left alone) and a real trim after it (pending deletions to restore), and a
    copy of it for the CLI."""
    from housekeeping.cli.main import main
    from housekeeping.core.timeutil import parse_as_of
    from housekeeping.engine.plan import read_table
    from housekeeping.mechanisms.steps import apply_step, plan_and_gate_in_process, report_step, snapshot_step
    from housekeeping.store import clients
    from housekeeping.store.generate import GenerateOptions, generate_store
    from housekeeping.store.store import Store

    base = tmp_path_factory.mktemp("console")
    generate_store(base / "store", GenerateOptions(topics=12, seed=7, entries_per_ledger=20), None)
    store, earlier = Store.open(base / "store"), parse_as_of(AS_OF) - 12 * 3_600_000
    info = snapshot_step(
        store, "trim", run_id="live-trim", as_of_ms=earlier, actor="test", values={"max_deleted_share": 1.0}
    )
    assert plan_and_gate_in_process(info.run_dir, "trim", "local[2]").success
    planned = sorted(
        {a["topic"] for a in read_table(info.run_dir, "actions") if a["action"] == "delete_ledger"}
    )
    assert planned, "the first run must plan a trim"
    clients.subscribe(store, planned[0], "late", now_ms=earlier, initial="earliest")
    apply_step(store, info.run_dir, purge_grace_seconds=3600)
    report_step(info.run_dir, dry_run=False)
    code = main(
        ["apply", "trim", "--store", str(base / "store"), "--as-of", AS_OF, "--max-deleted-share", "1"]
    )
    assert code == 0
    shutil.copytree(base / "store", base / "cli-store")
    return base / "store", base / "cli-store"


@pytest.fixture(scope="module")
def server(tmp_path_factory, stores):
    running = ApiServer.start(tmp_path_factory.mktemp("api"), stores[0], "admin:admin,viewer:viewer")
    yield running
    running.stop()


@pytest.fixture(scope="module")
def tokens(server):
    return {"admin": server.token("admin"), "viewer": server.token("viewer")}


def _pending(server, token) -> list[dict]:
    response = server.call("GET", f"{API}/pending-deletions", token)
    assert response.status_code == 200, response.text
    return response.json()["pendingDeletions"]


def test_nobody_gets_in_without_a_token_and_a_viewer_reads_but_cannot_change(server, tokens):
    for method, path in [
        ("GET", f"{API}/namespaces"),
        ("GET", f"{API}/pending-deletions"),
        ("GET", f"{API}/holds"),
        ("GET", f"{API}/journal"),
        ("GET", f"{API}/runs"),
        ("GET", f"{API}/topics/public/default/t-00000"),
        ("POST", f"{API}/restore"),
        ("POST", f"{API}/approvals"),
        ("POST", f"{API}/holds"),
        ("DELETE", f"{API}/holds?target=acme/orders"),
        ("GET", f"{API}/policies/public/default"),
        ("PUT", f"{API}/policies/public/default"),
        ("POST", f"{API}/cursors/reset"),
        ("POST", f"{API}/next-run"),
        ("GET", f"{API}/forecast"),
        ("GET", f"{API}/usage?from=2026-11-01T00:00:00Z&to=2026-11-02T00:00:00Z"),
        ("GET", f"{API}/capacity-report"),
        ("GET", "/housekeeping/"),
        ("GET", "/housekeeping/pending"),
        ("GET", "/housekeeping/capacity/index.html"),
    ]:
        assert server.call(method, path).status_code == 401, (method, path)
    viewer = tokens["viewer"]
    namespaces = server.call("GET", f"{API}/namespaces", viewer)
    assert namespaces.status_code == 200 and namespaces.json()["namespaces"], namespaces.text
    row = namespaces.json()["namespaces"][0]
    assert {"namespace", "tenant", "storedBytes", "tierBytes", "backlogBytes", "topics"} <= set(row)
    assert server.call("GET", "/housekeeping/", viewer).status_code == 200
    pending = _pending(server, viewer)
    assert pending and all(p["restorable"] for p in pending if p["kind"] == "ledger")
    for method, path, body in [
        ("POST", f"{API}/restore", {"topic": pending[0]["topic"]}),
        ("POST", f"{API}/holds", {"target": "acme/orders", "reason": "audit"}),
        ("DELETE", f"{API}/holds?target=acme/orders", None),
        ("POST", f"{API}/restore", {"runId": "live-trim"}),
        ("PUT", f"{API}/policies/public/default", {"message_ttl_in_seconds": 60}),
        (
            "POST",
            f"{API}/cursors/reset",
            {"topic": TOPIC, "subscription": "sub-main", "messageId": "0:0"},
        ),
        ("POST", f"{API}/next-run", {"mechanism": "trim"}),
        (
            "POST",
            f"{API}/approvals",
            {"dagId": "consumed_ledger_trim", "dagRunId": "r", "decision": "approve"},
        ),
    ]:
        response = server.call(method, path, viewer, json=body)
        assert response.status_code == 403 and "viewer" in response.json()["detail"], (path, response.text)
    assert _pending(server, viewer) == pending


def _reset(named: str, **body) -> tuple:
    """A cursor reset of sub-main on TOPIC refused with 400 naming ``named``; ``body`` changes the request."""
    return ("POST", "/cursors/reset", {"topic": TOPIC, "subscription": "sub-main", **body}, 400, named)


@pytest.mark.parametrize(
    "method,path,body,status,named",
    [
        ("POST", "/restore", {"topic": "persistent://acme/../etc"}, 400, "persistent://acme/../etc"),
        ("POST", "/restore", {"topic": "persistent://acme/orders/no-such-topic"}, 400, "no-such-topic"),
        ("POST", "/restore", {"topic": "persistent://acme/orders/t", "ledgerId": -1}, 422, "ledgerId"),
        ("POST", "/restore", {}, 400, "a topic (and optionally its ledgerId) or a runId"),
        (
            "POST",
            "/approvals",
            {"dagId": "storage_report", "dagRunId": "r", "decision": "approve"},
            400,
            "storage_report",
        ),
        (
            "POST",
            "/approvals",
            {"dagId": "consumed_ledger_trim", "dagRunId": "r", "decision": "maybe"},
            422,
            "decision",
        ),
        (
            "POST",
            "/approvals",
            {"dagId": "consumed_ledger_trim", "dagRunId": "no-such-run", "decision": "reject"},
            404,
            None,
        ),
        (
            "POST",
            "/restore",
            {"topic": "persistent://acme/orders/t", "runId": "live-trim"},
            400,
            "one of the two",
        ),
        ("POST", "/restore", {"runId": "live-trim", "ledgerId": 3}, 400, "give the topic, not a runId"),
        ("POST", "/restore", {"runId": "../../etc"}, 400, "../../etc"),
        ("POST", "/restore", {"runId": "no-such-run"}, 400, "nothing to restore for run 'no-such-run'"),
        ("GET", "/pending-deletions?run=../x", None, 400, "../x"),
        ("POST", "/holds", {"target": "../../etc", "reason": "x"}, 400, "../../etc"),
        ("POST", "/holds", {"target": "nobody/here", "reason": "x"}, 400, "nobody/here"),
        ("POST", "/holds", {"target": "acme/orders", "reason": ""}, 422, "reason"),
        ("DELETE", "/holds?target=acme/orders", None, 400, "acme/orders is not held"),
        ("GET", "/pending-deletions?namespace=../../etc", None, 400, "../../etc"),
        ("GET", "/namespaces/nobody/here", None, 404, "nobody/here"),
        ("GET", "/namespaces/acme/or%20ders", None, 400, "acme/or ders"),
        ("GET", "/namespaces/acme/orders?limit=5000", None, 422, "limit"),
        ("GET", "/topics/acme/orders/no-such-topic", None, 404, "persistent://acme/orders/no-such-topic"),
        ("GET", "/topics/acme/orders/or%20ders", None, 400, "or ders"),
        ("GET", "/journal?topic=persistent://a/b/c/d", None, 400, "persistent://a/b/c/d"),
        ("GET", "/runs?mechanism=compaktion", None, 400, "compaktion"),
        ("GET", "/runs/trim/..%2F..%2Fmetadata.db", None, 404, None),
        ("GET", "/runs/trim/no-such-run", None, 404, "no-such-run"),
        ("GET", "/runs/trim/no-such-run/actions?kind=delete_topic", None, 404, None),
        ("GET", "/forecast?horizon=10y", None, 400, "horizon"),
        ("GET", "/forecast?as_of=yesterday", None, 400, "yesterday"),
        ("GET", "/usage?from=2026-11-02T00:00:00Z&to=2026-11-01T00:00:00Z", None, 400, "from"),
        (
            "GET",
            "/usage?from=2026-11-01T00:00:00Z&to=2026-11-02T00:00:00Z&namespace=nobody/ns",
            None,
            400,
            "nobody/ns",
        ),
        ("GET", "/usage?from=2026-11-01T00:00:00Z&to=2026-11-02T00:00:00Z&tier=ssd", None, 400, "ssd"),
        ("GET", "/usage?to=2026-11-02T00:00:00Z", None, 422, "from"),
        ("GET", "/policies/nobody/here", None, 400, "nobody/here"),
        ("POST", "/next-run", {"mechanism": "compaktion"}, 400, "compaktion"),
        ("PUT", "/policies/nobody/here", {"message_ttl_in_seconds": 60}, 400, "nobody/here"),
        ("PUT", "/policies/acme/or%20ders", {"message_ttl_in_seconds": 60}, 400, "acme/or ders"),
        ("PUT", "/policies/public/default", {"retention_polices": {}}, 400, "retention_polices"),
        ("PUT", "/policies/public/default", {"message_ttl_in_seconds": -5}, 400, "message_ttl_in_seconds"),
        (
            "PUT",
            "/policies/public/default/t-00000",
            {"retention_policies": {"retentionTimeInMinutes": 0, "retentionSizeInMB": 10}},
            400,
            TOPIC,
        ),
        ("PUT", "/policies/public/default/no-such", {}, 400, "no-such"),
        ("PUT", "/policies/public/default", [1, 2], 422, None),
        _reset("nobody", subscription="nobody", messageId="0:0"),
        _reset("no-such", topic="persistent://public/default/no-such", messageId="0:0"),
        _reset("x:y", messageId="x:y"),
        _reset("'-1'", time="-1"),
        _reset("yesterday", time="yesterday"),
        _reset("one of them", time="10m", messageId="0:0"),
        _reset("one of them"),
        _reset("__compaction", subscription="__compaction", messageId="0:0"),
        _reset("../../etc", topic="../../etc", messageId="0:0"),
    ],
)
def test_bad_input_is_a_4xx_naming_it_and_changes_nothing(server, tokens, method, path, body, status, named):
    admin = tokens["admin"]

    def state():
        return (
            _pending(server, admin),
            server.call("GET", f"{API}/holds", admin).json(),
            server.call("GET", f"{API}/journal?limit=1000", admin).json(),
            server.call("GET", f"{API}/topics/{TOPIC.removeprefix('persistent://')}", admin).json(),
            server.call("GET", f"{API}/namespaces/public/default", admin).json()["policies"],
        )

    before = state()
    response = server.call(method, f"{API}{path}", admin, json=body)
    assert response.status_code == status, response.text
    if named:
        assert named in response.text, response.text
    assert state() == before


def test_the_dag_run_view_shows_the_housekeeping_run_that_dag_run_made(server, tokens, stores):
    """The Airflow UI's "Housekeeping run" tab (``/housekeeping/dag-runs/{dag_id}/{run_id}``): the run page of the run
    directory a housekeeping DAG's run made, a message for a run not taken yet or a DAG that is not housekeeping's."""
    runs = stores[0] / "runs" / "trim"
    shutil.copytree(runs / "live-trim", runs / "consumed_ledger_trim__manual__copy")
    viewer = tokens["viewer"]
    made = server.call("GET", "/housekeeping/dag-runs/consumed_ledger_trim/manual__copy", viewer)
    assert made.status_code == 200 and 'id="actions"' in made.text and "left alone" in made.text, made.text[
        -2000:
    ]
    early = server.call("GET", "/housekeeping/dag-runs/consumed_ledger_trim/manual__later", viewer)
    assert early.status_code == 200 and "has not taken its snapshot" in early.text
    other = server.call("GET", "/housekeeping/dag-runs/some_other_dag/manual__1", viewer)
    assert other.status_code == 200 and "not a housekeeping DAG" in other.text


def test_files_are_served_only_from_inside_a_run_directory(server, tokens, stores):
    admin = tokens["admin"]
    runs = server.call("GET", f"{API}/runs?mechanism=trim", admin).json()["runs"]
    (run,) = [r for r in runs if "cli-trim-" in r["directory"]]
    files = f"/housekeeping/runs/trim/{run['directory']}/files"
    report = server.call("GET", f"{files}/report/report.md", admin)
    assert report.status_code == 200 and "trim" in report.text.lower()
    assert server.call("GET", f"{files}/gate/data_docs/index.html", admin).status_code == 200
    # The files the approval request links to: the plan's summary.
    summary = server.call("GET", f"{files}/plan/summary.json", admin)
    assert summary.status_code == 200 and summary.json()["mechanism"] == "trim"
    for hostile in (
        "../../../metadata.db",
        "report/../../../metadata.db",
        "snapshot/run.json",
        "plan/actions",
        "plan/summary.json/../../snapshot/run.json",
        "%2e%2e/apply",
    ):
        response = server.call("GET", f"{files}/{hostile}", admin)
        assert response.status_code in (400, 404), (hostile, response.status_code)
        assert "SQLite" not in response.text


def test_the_capacity_figures_through_the_api_equal_the_clis_and_the_newest_report_is_served(
    server, tokens, stores, capsys
):
    from housekeeping.core.timeutil import parse_as_of
    from housekeeping.observe.capacity.report import write_capacity_report
    from housekeeping.store.store import Store
    from tests.conftest import cli_json

    viewer, store = tokens["viewer"], stores[0]
    assert server.call("GET", f"{API}/capacity-report", viewer).status_code == 404
    assert server.call("GET", "/housekeeping/capacity/index.html", viewer).status_code == 404
    # Before the first report, the Capacity tab says what writes one (a page, not a JSON error).
    empty = server.call("GET", "/housekeeping/capacity", viewer)
    assert (
        empty.status_code == 200
        and "No capacity report yet" in empty.text
        and "capacity_report" in empty.text
    )
    forecast = server.call("GET", f"{API}/forecast?as_of={AS_OF}&horizon=14d", viewer)
    assert forecast.status_code == 200, forecast.text
    assert forecast.json() == cli_json(
        capsys, "forecast", "--store", str(store), "--as-of", AS_OF, "--horizon", "14d"
    )
    window = "from=2026-11-01T00:00:00Z&to=2026-11-02T00:00:00Z"
    usage = server.call("GET", f"{API}/usage?{window}&by=tenant&tier=local", viewer)
    assert usage.status_code == 200 and usage.json()["rows"], usage.text
    assert usage.json() == cli_json(
        capsys, "usage", "--store", str(store), "--from", "2026-11-01T00:00:00Z", "--to",
        "2026-11-02T00:00:00Z", "--by", "tenant", "--tier", "local",
    )  # fmt: skip
    # A backfilled day and the newest: both can be read.
    write_capacity_report(Store.open(store), parse_as_of(AS_OF) - 86_400_000, horizon_s=30 * 86_400)
    write_capacity_report(Store.open(store), parse_as_of(AS_OF), horizon_s=30 * 86_400)
    tab = server.call("GET", "/housekeeping/capacity", viewer)
    assert tab.status_code == 200 and "2 reports" in tab.text and "2026-11-02T00-00-00.000Z" in tab.text
    older = server.call("GET", "/housekeeping/capacity?report=2026-11-01T00-00-00.000Z", viewer)
    assert older.status_code == 200 and "As of <strong>2026-11-01T00:00:00.000Z</strong>" in older.text
    day = server.call("GET", "/housekeeping/capacity/2026-11-01T00-00-00.000Z/index.html", viewer)
    assert day.status_code == 200 and "·h" in day.text, "byte-hours in human units"
    for hostile in ("?report=..", "/..%2F..%2Fruns/index.html", "/2026-11-01T00-00-00.000Z/latest.json"):
        assert server.call("GET", f"/housekeeping/capacity{hostile}", viewer).status_code in (400, 404), (
            hostile
        )
    report = server.call("GET", f"{API}/capacity-report", viewer)
    assert report.status_code == 200 and report.json()["asOf"] == "2026-11-02T00:00:00.000Z"
    for name in ("index.html", "usage-tenant.csv", "forecast.json"):
        assert server.call("GET", f"/housekeeping/capacity/{name}", viewer).status_code == 200, name
    for hostile in ("..%2Fmetadata.db", "latest.json", "..%2F..%2Fmetadata.db"):
        response = server.call("GET", f"/housekeeping/capacity/{hostile}", viewer)
        assert response.status_code in (400, 404) and "SQLite" not in response.text, hostile
    page = server.call("GET", "/housekeeping/", viewer)
    assert page.status_code == 200 and 'id="capacity-limits"' in page.text


def test_a_browser_change_needs_the_consoles_csrf_token(server, tokens):
    """The UI's session cookie authenticates a browser; a change it sends without the token of the console's
    cookie (what a page of another site would send) is refused, with the token it is done."""
    cookie = {"_token": tokens["admin"]}
    body = {"target": "globex/events", "reason": "csrf check"}
    forged = server.call(
        "POST", f"{API}/holds", cookies=cookie, json=body, headers={"Origin": "https://evil.example"}
    )
    assert forged.status_code == 403 and "CSRF" in forged.text
    # Every other change the console makes, forged the same way: refused, nothing changed.
    before = server.call("GET", f"{API}/journal?limit=1000", tokens["admin"]).json()
    for method, path, forged_body in [
        ("PUT", f"{API}/policies/public/default", {"message_ttl_in_seconds": 1}),
        ("PUT", f"{API}/policies/public/default/t-00000", {"message_ttl_in_seconds": 1}),
        ("POST", f"{API}/cursors/reset", {"topic": TOPIC, "subscription": "sub-main", "time": "1d"}),
        ("POST", f"{API}/next-run", {"mechanism": "trim"}),
        ("POST", f"{API}/restore", {"runId": "live-trim"}),
        ("POST", f"{API}/what-if", {"mechanism": "trim", "sweep": "retention-time=1h"}),
    ]:
        refused = server.call(
            method, path, cookies=cookie, json=forged_body, headers={"Origin": "https://evil.example"}
        )
        assert refused.status_code == 403 and "CSRF" in refused.text, (path, refused.text)
    assert server.call("GET", f"{API}/journal?limit=1000", tokens["admin"]).json() == before
    page = server.call("GET", "/housekeeping/holds", cookies=cookie)
    assert page.status_code == 200
    csrf = page.cookies["hk_csrftoken"]
    done = server.call(
        "POST",
        f"{API}/holds",
        cookies={**cookie, "hk_csrftoken": csrf},
        json=body,
        headers={"x-csrftoken": csrf},
    )
    assert done.status_code == 201, done.text
    assert done.json()["createdBy"] == "admin"
    removed = server.call(
        "DELETE", f"{API}/holds?target=globex/events", cookies={**cookie, "hk_csrftoken": csrf},
        headers={"x-csrftoken": csrf},
    )  # fmt: skip
    assert removed.status_code == 200, removed.text


def _state(capsys, store: Path) -> dict:
    code, out, err = run_cli(capsys, "inspect", "--store", str(store), "--format", "json")
    assert code == 0, err
    document = json.loads(out)
    document.pop("store", None)
    return document


def _journal(capsys, store: Path, touched: set[str]) -> list[tuple]:
    """The hold and restore entries about ``touched`` (who and when aside: the CLI's user is not the console's)."""
    code, out, err = run_cli(capsys, "journal", "--store", str(store), "--format", "json")
    assert code == 0, err
    entries = []
    for e in json.loads(out)["entries"]:
        detail = {k: v for k, v in e["detail"].items() if k not in ("createdBy", "createdAtMs")}
        if e["mechanism"] in ("hold", "restore") and {e["topic"], detail.get("target")} & touched:
            entries.append(
                (e["mechanism"], e["topic"], e["action"], e["status"], json.dumps(detail, sort_keys=True))
            )
    return entries


def test_a_hold_and_a_restore_through_the_api_equal_the_clis_journaled_with_the_airflow_user(
    server, tokens, stores, capsys, monkeypatch
):
    api_store, cli_store = stores
    admin = tokens["admin"]
    topic = next(p["topic"] for p in _pending(server, admin) if p["kind"] == "ledger")
    namespace = topic.removeprefix("persistent://").rsplit("/", 1)[0]

    held = server.call("POST", f"{API}/holds", admin, json={"target": namespace, "reason": "legal hold 42"})
    assert held.status_code == 201, held.text
    restored = server.call("POST", f"{API}/restore", admin, json={"topic": topic})
    assert restored.status_code == 200 and restored.json()["restoredLedgers"], restored.text

    monkeypatch.setenv("HOUSEKEEPING_ACTOR", "ops@shell")
    code, _, err = run_cli(
        capsys, "hold", "add", namespace, "--store", str(cli_store), "--reason", "legal hold 42"
    )
    assert code == 0, err
    code, out, err = run_cli(capsys, "restore", topic, "--store", str(cli_store))
    assert code == 0 and json.loads(out)["restoredLedgers"] == restored.json()["restoredLedgers"], err

    assert _state(capsys, api_store) == _state(capsys, cli_store)
    journaled = _journal(capsys, api_store, {topic, namespace})
    assert len(journaled) == 2 and journaled == _journal(capsys, cli_store, {topic, namespace})
    entries = server.call("GET", f"{API}/journal?mechanism=restore&topic={topic}", admin).json()["journal"]
    assert [e["actor"] for e in entries] == ["admin"]
    holds = server.call("GET", f"{API}/holds", admin).json()["holds"]
    assert [(h["target"], h["createdBy"]) for h in holds] == [(namespace, "admin")]
    assert server.call("DELETE", f"{API}/holds?target={namespace}", admin).status_code == 200


SHOTS = REPO / "test-output" / "ui"


def test_every_page_in_a_browser_and_restore_and_a_hold_done_there(server, stores, capsys):
    """Every console page in headless Chromium, logged in through Airflow's own login page, with a screenshot each;
    Restore and a hold done through the pages, checked against `housekeeping inspect` and `hold list`."""
    import importlib.util

    from playwright.sync_api import sync_playwright

    from housekeeping.engine.report import human_bytes

    spec = importlib.util.spec_from_file_location("trigger_from_ui", REPO / "scripts" / "trigger_from_ui.py")
    ui = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ui)
    store = stores[0]
    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=ui.CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1500, "height": 1000})
        ui.login(page, server.url, "admin", server.password("admin"))
        base = f"{server.url}/housekeeping/"

        # The entry in Airflow's navigation: the console inside the Airflow UI.
        page.goto(f"{server.url}/plugin/housekeeping")
        page.frame_locator("iframe").locator("#namespaces").wait_for(timeout=60_000)
        page.screenshot(path=str(SHOTS / "console-01-in-airflow.png"), full_page=True)

        page.goto(base)
        assert page.locator("#namespaces tr").count() > 2
        # A figure and its unit stay on one line ("13.9 KiB" was broken after the number in the frame).
        wrapped = page.evaluate(
            """[...document.querySelectorAll('#namespaces td.num')].filter(td => {
                const range = document.createRange(); range.selectNodeContents(td);
                return new Set([...range.getClientRects()].map(r => Math.round(r.top))).size > 1;
            }).map(td => td.textContent.trim())"""
        )
        assert wrapped == [], wrapped
        page.screenshot(path=str(SHOTS / "console-02-store.png"), full_page=True)

        # A namespace from the store page: its policies and where they come from, its topics with their
        # subscriptions, found by name and paged.
        page.locator("#namespaces a", has_text="public/default").click()
        page.locator("#policies").wait_for()
        policies = page.inner_text("#policies")
        assert "retention" in policies and "broker" in policies, policies
        topics = page.locator("#topics tr").count() - 1
        view = server.call("GET", f"{API}/namespaces/public/default", server.token("admin")).json()
        assert topics == len(view["topics"]["rows"]) == view["topics"]["total"] > 1
        with_subscription = next(r for r in view["topics"]["rows"] if r["subscriptions"])
        sub = with_subscription["subscriptions"][0]
        row = page.locator("#topics tr", has_text=with_subscription["topic"])
        assert sub["name"] in row.inner_text() and sub["markDelete"] in row.inner_text()
        page.screenshot(path=str(SHOTS / "console-02c-namespace.png"), full_page=True)
        # A topic from its namespace: its ledgers (times, where they are), subscriptions, policies in force.
        row.locator("a").first.click()
        page.locator("#ledgers").wait_for()
        local = with_subscription["topic"].removeprefix("persistent://")
        topic = server.call("GET", f"{API}/topics/{local}", server.token("admin")).json()
        assert page.locator("#ledgers tr").count() - 1 == len(topic["ledgers"]) > 0
        assert sub["name"] in page.inner_text("#subscriptions")
        assert "open (being written)" in page.inner_text("#ledgers")
        assert "retention" in page.inner_text("#policies")
        page.screenshot(path=str(SHOTS / "console-02d-topic.png"), full_page=True)
        page.go_back()
        page.locator("#topics").wait_for()
        page.fill("input[name=search]", "sensor-feed")
        page.click("#topic-search button")
        page.wait_for_url("**search=sensor-feed**")
        assert page.locator("#topics tr").count() - 1 == sum(
            "sensor-feed" in r["topic"] for r in view["topics"]["rows"]
        )
        paged = server.call(
            "GET", f"{API}/namespaces/public/default?limit=2&offset=2", server.token("admin")
        ).json()
        assert [r["topic"] for r in paged["topics"]["rows"]] == [
            r["topic"] for r in view["topics"]["rows"][2:4]
        ]
        page.goto(base)

        page.locator("#capacity-usage").scroll_into_view_if_needed()
        page.screenshot(path=str(SHOTS / "console-02a-store-capacity.png"))
        page.locator("header a", has_text="Capacity").click()
        assert page.locator("select[name=report] option").count() == 2, "the newest and the backfilled day"
        page.frame_locator("#capacity-report").locator("#limits, #no-limit-met").first.wait_for()
        page.screenshot(path=str(SHOTS / "console-09-capacity-report.png"), full_page=True)
        page.select_option("select[name=report]", "2026-11-01T00-00-00.000Z")
        page.wait_for_url("**/capacity?report=2026-11-01T00-00-00.000Z")
        assert "2026-11-01T00:00:00.000Z" in page.inner_text("main")

        page.goto(f"{base}runs")
        page.screenshot(path=str(SHOTS / "console-02b-runs.png"), full_page=True)
        page.locator("a", has_text="cli-trim-").first.click()
        page.locator("#actions").wait_for()
        assert "passed" in page.inner_text("body") and page.locator("#actions tr").count() > 1
        page.screenshot(path=str(SHOTS / "console-03-run.png"), full_page=True)
        # The report is read as a page, not as Markdown; the reasons' seconds come with their days and hours.
        assert (
            page.locator("#report h3, #report h4").count() > 0 and page.locator("#report table").count() > 0
        )
        assert "|---" not in page.inner_text("#report") and "## " not in page.inner_text("#report")
        assert re.search(r"\d+ s \((\d+d|\d+h)", page.inner_text("#actions")), page.inner_text("#actions")[
            :600
        ]
        page.locator("#report").scroll_into_view_if_needed()
        page.screenshot(path=str(SHOTS / "console-03d-run-report.png"))

        # Its Data Docs read offline: no request leaves the server, no script error, the logo is there.
        errors: list[str] = []
        outside: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.on(
            "request",
            lambda r: outside.append(r.url) if not r.url.startswith((server.url, "data:")) else None,
        )
        page.locator("#data-docs").click()
        page.wait_for_url("**/gate/data_docs/index.html")
        page.locator("a", has_text="deletions").first.click()
        page.wait_for_load_state("load")
        logo = page.locator(".navbar-brand a img")
        assert logo.get_attribute("src").startswith("data:image/png;base64,")
        assert page.evaluate("document.querySelector('.navbar-brand a img').naturalWidth") > 0, (
            "the logo is drawn"
        )
        page.screenshot(path=str(SHOTS / "console-03c-data-docs.png"))
        page.locator(".navbar-brand a").click()
        page.wait_for_url("**/gate/data_docs/index.html")
        page.locator("#back-to-run").click()
        page.locator("#actions").wait_for()
        assert errors == [] and outside == [], (errors, outside)

        # A run that found the store changed since its snapshot says which topics it left alone, and why.
        page.goto(f"{base}runs")
        page.locator("a", has_text="live-trim").first.click()
        page.locator("#store-changed").wait_for()
        changed = page.inner_text("#store-changed")
        assert "left alone" in changed and "'late'" in changed and "created after the snapshot" in changed
        page.locator("#store-changed").scroll_into_view_if_needed()
        page.screenshot(path=str(SHOTS / "console-03b-run-store-changed.png"))

        def ledgers_of(topic: str) -> list[int]:
            code, out, err = run_cli(capsys, "inspect", "--store", str(store), "--format", "json")
            assert code == 0, err
            return [entry["ledgerId"] for entry in json.loads(out)["topics"][topic]["ledgers"]]

        # Every table sorts, filters and exports what it shows: the pending deletions by size, of one topic, as CSV.
        page.goto(f"{base}pending")
        shown = _pending(server, server.token("admin"))
        heading = page.locator("#pending th", has_text="bytes")
        heading.click()
        heading.click()  # largest first
        sizes = [p["bytes"] for p in shown if p["bytes"] is not None]
        cells = page.locator("#pending tr td:nth-child(5)").all_inner_texts()
        assert cells[0] == human_bytes(max(sizes)) and cells[-1] == human_bytes(min(sizes)), cells
        topic_one = shown[0]["topic"]
        page.fill(".table-filter", topic_one)
        wanted = sum(p["topic"] == topic_one for p in shown)
        assert page.locator(".table-count").inner_text() == f"{wanted} of {len(shown)} rows"
        with page.expect_download() as download:
            page.click(".table-csv")
        exported = list(csv.reader(download.value.path().read_text().splitlines()))
        assert exported[0][:3] == ["due", "topic", "ledger"] and len(exported) == wanted + 1, exported[:3]
        assert {row[1] for row in exported[1:]} == {topic_one}
        page.screenshot(path=str(SHOTS / "console-04a-pending-sorted-filtered.png"), full_page=True)

        # Restore one ledger from the pending deletions page: it asks first; "Cancel" changes nothing.
        page.goto(f"{base}pending")
        button = page.locator("button", has_text="Restore ledger").first
        topic, ledger = button.get_attribute("data-topic"), int(button.get_attribute("data-ledger"))
        page.screenshot(path=str(SHOTS / "console-04-pending.png"), full_page=True)
        asked: list[str] = []
        page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.dismiss()))
        button.click()
        page.wait_for_timeout(1000)
        assert asked and f"ledger {ledger} of {topic}" in asked[0], asked
        assert ledger not in ledgers_of(topic), "a cancelled restore changed the store"
        page.once("dialog", lambda dialog: dialog.accept())
        with page.expect_navigation():  # the page is read again after the change
            button.click()
        # What was done is said on the page read again after it.
        page.locator("#message.ok", has_text=f"restored 1 ledgers of {topic}").wait_for(timeout=30_000)
        assert ledger in ledgers_of(topic)

        # A whole run's deletions restored in one confirmed action, from its run page.
        page.goto(f"{base}runs")
        page.locator("a", has_text="live-trim").first.click()
        page.locator("#run-pending a").click()
        bulk = page.locator("#restore-run")
        run_id, count = bulk.get_attribute("data-run"), int(bulk.get_attribute("data-count"))
        waiting = [
            p for p in _pending(server, server.token("admin")) if p["deletedBy"].startswith(f"{run_id}@")
        ]
        assert count == len(waiting) > 1, (count, len(waiting))
        page.screenshot(path=str(SHOTS / "console-04b-pending-of-a-run.png"), full_page=True)
        asked.clear()
        page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.accept()))
        with page.expect_navigation():
            bulk.click()
        page.locator("#message.ok", has_text=f"deleted by {run_id}").wait_for(timeout=60_000)
        assert f"{count} deletions" in asked[0], asked
        assert f"restored {count} ledgers" in page.inner_text("#message")
        page.screenshot(path=str(SHOTS / "console-04c-run-restored.png"), full_page=True)
        for item in waiting:
            assert item["ledgerId"] in ledgers_of(item["topic"]), item
        assert not [
            p for p in _pending(server, server.token("admin")) if p["deletedBy"].startswith(f"{run_id}@")
        ]

        # A hold added with the page's form.
        page.goto(f"{base}holds")
        page.fill("input[name=target]", "globex/tables")
        page.fill("input[name=reason]", "incident 7")
        page.click("#add-hold button")
        page.locator("#message.ok").wait_for(timeout=30_000)
        page.wait_for_load_state("load")
        page.locator("#holds", has_text="globex/tables").wait_for(timeout=30_000)
        page.screenshot(path=str(SHOTS / "console-05-holds.png"), full_page=True)
        code, out, err = run_cli(capsys, "hold", "list", "--store", str(store))
        assert code == 0, err
        assert [(h["target"], h["createdBy"], h["reason"]) for h in json.loads(out)["holds"]] == [
            ("globex/tables", "admin", "incident 7")
        ]

        page.goto(f"{base}journal?topic={topic}")
        journal = page.inner_text("#journal")
        assert "restore_ledgers" in journal and "admin" in journal
        # The restore names the ledger it brought back, at the time it was done (not the epoch).
        assert f"{topic}:{ledger}" in journal and "1970-01-01" not in journal, journal
        page.screenshot(path=str(SHOTS / "console-06-journal.png"), full_page=True)
        page.set_viewport_size({"width": 1440, "height": 900})
        page.goto(f"{base}journal?mechanism=hold")
        journal = page.inner_text("#journal")
        assert "globex/tables" in journal and "incident 7" in journal and "1970-01-01" not in journal, journal
        # The table fits the page: nothing runs off its right edge.
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"), (
            "the journal runs off"
        )
        page.screenshot(path=str(SHOTS / "console-06b-journal-holds.png"), full_page=True)

        # The hold removed again with the page's button, after saying yes.
        page.goto(f"{base}holds")
        page.once("dialog", lambda dialog: dialog.accept())
        page.locator("button", has_text="Remove").first.click()
        page.locator("#message.ok", has_text="removed the hold on globex/tables").wait_for(timeout=30_000)
        browser.close()
    code, out, err = run_cli(capsys, "hold", "list", "--store", str(store))
    assert json.loads(out)["holds"] == []


def test_airflow_lists_the_plugin_with_its_views_and_builds_its_app_on_the_api_server_only(server):
    """Another Airflow process (here ``airflow plugins``, with no ``[api] secret_key`` at all) loads the plugin with
    its views and without building the console; the api-server serves it (the other tests of this module)."""
    env = {**server.env, "AIRFLOW__API__SECRET_KEY": "", "AIRFLOW__API_AUTH__JWT_SECRET": ""}
    listed = subprocess.run(
        [str(VENV_BIN / "airflow"), "plugins", "--output", "json"], env=env, capture_output=True, text=True
    )
    assert listed.returncode == 0, listed.stderr[-2000:]
    (plugin,) = [p for p in json.loads(listed.stdout) if p["name"] == "housekeeping_console"]
    assert plugin["fastapi_apps"] == []
    assert {"Storage housekeeping", "Housekeeping run"} <= {v["name"] for v in plugin["external_views"]}
    assert httpx.get(f"{server.url}/housekeeping/api/v1/holds", timeout=30).status_code == 401


def test_a_policy_change_and_a_cursor_reset_through_the_api_equal_the_clis_journaled_with_the_airflow_user(
    server, tokens, stores, capsys
):
    """The console's policy change and cursor reset are the admin paths the CLI's `namespaces`, `topic-policies`
    and `topics reset-cursor` take: the same result on the store and its copy, journaled with the Airflow user."""
    admin = tokens["admin"]
    store, cli_store = stores
    wanted = {
        "retention_policies": {"retentionTimeInMinutes": 600, "retentionSizeInMB": -1},
        "message_ttl_in_seconds": 7200,
    }
    done = server.call("PUT", f"{API}/policies/public/default", admin, json=wanted)
    assert done.status_code == 200, done.text
    assert (
        done.json()["summary"]
        == "namespace public/default: changed message_ttl_in_seconds, retention_policies"
    )
    # The same document again changes nothing and journals nothing.
    again = server.call("PUT", f"{API}/policies/public/default", admin, json=wanted)
    assert again.status_code == 200 and again.json()["changes"] == {}, again.text
    for args in (
        ["namespaces", "set-retention", "public/default", "--time", "10h", "--size", "-1"],
        ["namespaces", "set-message-ttl", "public/default", "--ttl", "2h"],
    ):
        code, out, err = run_cli(capsys, *args, "--store", str(cli_store))
        assert code == 0, err
    code, out, err = run_cli(capsys, "namespaces", "policies", "public/default", "--store", str(cli_store))
    assert code == 0, err
    read = server.call("GET", f"{API}/policies/public/default", admin).json()
    assert read["policies"] == json.loads(out)["policies"] == wanted
    # A policy left out of the topic's document is removed from its level: the namespace's applies again.
    local = TOPIC.removeprefix("persistent://")
    put = server.call("PUT", f"{API}/policies/{local}", admin, json={"message_ttl_in_seconds": 60})
    assert put.status_code == 200, put.text
    assert server.call("PUT", f"{API}/policies/{local}", admin, json={}).status_code == 200
    effective = server.call("GET", f"{API}/policies/{local}", admin).json()["effective"]
    assert (effective["message_ttl_seconds"], effective["message_ttl_source"]) == (
        7200,
        "namespace public/default",
    ), effective

    from housekeeping.observe.browse import topic_view
    from housekeeping.store.store import Store

    # The first ledger both stores still list (the browser test restored a run's deletions on the served store only).
    topic = server.call("GET", f"{API}/topics/{TOPIC.removeprefix('persistent://')}", admin).json()
    copy = topic_view(Store.open(cli_store), TOPIC)
    first = min({r["ledgerId"] for r in topic["ledgers"]} & {r["ledgerId"] for r in copy["ledgers"]})
    body = {"topic": TOPIC, "subscription": "sub-main", "messageId": f"{first}:0"}
    moved = server.call("POST", f"{API}/cursors/reset", admin, json=body)
    assert moved.status_code == 200, moved.text
    code, out, err = run_cli(
        capsys,
        "topics",
        "reset-cursor",
        TOPIC,
        "-s",
        "sub-main",
        "-m",
        f"{first}:0",
        "--store",
        str(cli_store),
    )
    assert code == 0, err
    assert {k: moved.json()[k] for k in ("from", "to", "direction")} == {
        k: json.loads(out)[k] for k in ("from", "to", "direction")
    }
    assert moved.json()["direction"] != "unchanged"
    after = server.call("GET", f"{API}/topics/{TOPIC.removeprefix('persistent://')}", admin).json()
    assert {s["name"]: s["markDelete"] for s in after["subscriptions"]}["sub-main"] == moved.json()["to"]

    journal = server.call("GET", f"{API}/journal?mechanism=admin&limit=1000", admin).json()["journal"]
    made = [(row["action"], row["actor"]) for row in journal]
    assert made.count(("set-policies", "admin")) == 3 and ("reset-cursor", "admin") in made, made


def test_policies_and_a_cursor_changed_in_the_browser_and_a_viewer_is_offered_neither(server, stores):
    """The namespace page's policy form (a field at fault named before anything is sent; Save after a
    confirmation listing each change) and the topic page's cursor reset, as an admin; a viewer's pages have
    neither form."""
    import importlib.util

    from playwright.sync_api import sync_playwright

    spec = importlib.util.spec_from_file_location("trigger_from_ui", REPO / "scripts" / "trigger_from_ui.py")
    ui = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ui)
    admin = server.token("admin")
    SHOTS.mkdir(parents=True, exist_ok=True)
    base = f"{server.url}/housekeeping/"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=ui.CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1500, "height": 1000})
        ui.login(page, server.url, "admin", server.password("admin"))
        journal_before = server.call("GET", f"{API}/journal?mechanism=admin&limit=1000", admin).json()
        page.goto(f"{base}namespaces/acme/orders")
        form = page.locator("#policy-form")
        # Half a retention: named on the page, nothing sent.
        form.locator("input[name=retentionTime]").fill("120")
        form.locator("input[name=retentionSize]").fill("")
        form.locator("#policy-save").click()
        page.locator("#message.err", has_text="retention: give both").wait_for(timeout=10_000)
        assert server.call("GET", f"{API}/journal?mechanism=admin&limit=1000", admin).json() == journal_before
        form.locator("input[name=retentionSize]").fill("-1")
        form.locator("input[name=ttl]").fill("5400")
        asked: list[str] = []
        page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.accept()))
        page.screenshot(path=str(SHOTS / "console-02e-policy-form.png"), full_page=True)
        form.locator("#policy-save").click()
        page.locator("#message.ok", has_text="namespace acme/orders: changed").wait_for(timeout=30_000)
        assert "message_ttl_in_seconds" in asked[0] and "retention_policies" in asked[0], asked
        page.wait_for_load_state("load")
        page.locator("#policies", has_text="1h 30m").wait_for(timeout=30_000)
        stored = server.call("GET", f"{API}/policies/acme/orders", admin).json()["policies"]
        assert stored["message_ttl_in_seconds"] == 5400
        assert stored["retention_policies"] == {"retentionTimeInMinutes": 120, "retentionSizeInMB": -1}
        page.screenshot(path=str(SHOTS / "console-02f-policy-saved.png"), full_page=True)

        # The topic page's cursor reset, to the first entry the topic keeps.
        local = TOPIC.removeprefix("persistent://")
        topic = server.call("GET", f"{API}/topics/{local}", admin).json()
        first = f"{topic['ledgers'][0]['ledgerId']}:0"
        page.goto(f"{base}topics/{local}")
        reset = page.locator("#reset-cursor")
        reset.locator("select[name=subscription]").select_option("sub-main")
        reset.locator("input[name=to]").fill(first)
        page.once("dialog", lambda dialog: dialog.accept())
        reset.locator("button").click()
        page.locator("#message.ok", has_text="cursor moved").wait_for(timeout=30_000)
        page.wait_for_load_state("load")
        after = server.call("GET", f"{API}/topics/{local}", admin).json()
        mark = {s["name"]: s["markDelete"] for s in after["subscriptions"]}["sub-main"]
        page.locator("#subscriptions", has_text=mark).wait_for(timeout=30_000)
        page.screenshot(path=str(SHOTS / "console-02g-cursor-reset.png"), full_page=True)
        journal = server.call("GET", f"{API}/journal?mechanism=admin&limit=5", admin).json()["journal"]
        assert [(j["action"], j["actor"], j["target"]) for j in journal[:2]] == [
            ("reset-cursor", "admin", TOPIC),
            ("set-policies", "admin", "acme/orders"),
        ]

        viewer = browser.new_page(viewport={"width": 1500, "height": 1000})
        ui.login(viewer, server.url, "viewer", server.password("viewer"))
        for path in ("namespaces/acme/orders", f"topics/{local}"):
            viewer.goto(f"{base}{path}")
            viewer.locator("#policies").wait_for(timeout=30_000)
            assert (
                viewer.locator("#policy-form").count() == 0 and viewer.locator("#reset-cursor").count() == 0
            )
        browser.close()


def test_a_backtest_asked_from_the_policy_form_equals_the_clis_and_bad_input_is_named(server, stores, capsys):
    """What a change would have done since a day: through the API the CLI's document (a viewer may ask: it changes
    nothing), bad input a 400 naming it; in the browser from the namespace page's policy form, the rows, the plot
    and the moved deletions on the backtest page."""
    import importlib.util
    from urllib.parse import urlencode

    from playwright.sync_api import sync_playwright

    from tests.conftest import cli_json

    viewer, store = server.token("viewer"), stores[0]
    change = {
        "namespaces": {
            "acme/orders": {"retention_policies": {"retentionTimeInMinutes": 60, "retentionSizeInMB": -1}}
        }
    }
    period = {"from": "2026-11-01T00:00:00Z", "to": AS_OF}
    asked = server.call(
        "GET", f"{API}/backtest?{urlencode({'policies': json.dumps(change), **period})}", viewer
    )
    assert asked.status_code == 200, asked.text
    path = Path(stores[0]).parent / "backtest-change.json"
    path.write_text(json.dumps(change), encoding="utf-8")
    assert asked.json() == cli_json(
        capsys,
        "backtest",
        "--store",
        str(store),
        "--policies",
        str(path),
        "--from",
        period["from"],
        "--to",
        AS_OF,
    )
    assert {row["namespace"] for row in asked.json()["rows"]} >= {"acme/orders"}
    journal = server.call("GET", f"{API}/journal?limit=1000", viewer).json()
    for query, named in [
        ({"policies": "{not json", **period}, "policies: not JSON"),
        (
            {"policies": json.dumps({"namespaces": {"acme/nope": {"message_ttl_in_seconds": 1}}}), **period},
            "acme/nope",
        ),
        ({"policies": json.dumps(change), "from": "yesterday", "to": AS_OF}, "from:"),
        ({"policies": json.dumps(change), "from": AS_OF, "to": period["from"]}, "is not before --to"),
        ({"policies": json.dumps(change), "to": AS_OF}, "from: required"),
    ]:
        response = server.call("GET", f"{API}/backtest?{urlencode(query)}", viewer)
        assert response.status_code == 400 and named in response.json()["detail"], (query, response.text)
        page = server.call("GET", f"/housekeeping/backtest?{urlencode(query)}", viewer)
        if "from" in query:
            assert page.status_code == 400 and named.split(":")[0] in page.text, (query, page.status_code)
    assert server.call("GET", f"{API}/journal?limit=1000", viewer).json() == journal

    spec = importlib.util.spec_from_file_location("trigger_from_ui", REPO / "scripts" / "trigger_from_ui.py")
    ui = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ui)
    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=ui.CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1500, "height": 1000})
        ui.login(page, server.url, "admin", server.password("admin"))
        page.goto(f"{server.url}/housekeeping/namespaces/acme/orders")
        form = page.locator("#policy-form")
        form.locator("input[name=retentionTime]").fill("60")
        form.locator("input[name=retentionSize]").fill("-1")
        form.locator("input[name=since]").fill("2026-11-01")
        form.locator("#policy-backtest").click()
        page.wait_for_url("**/housekeeping/backtest?**", timeout=30_000)
        page.locator("#backtest-rows").wait_for(timeout=60_000)
        assert page.locator("#backtest-rows", has_text="acme/orders").count() == 1
        assert page.locator("#backtest-chart-listed svg").count() == 1
        assert "·h" in page.locator("#backtest-rows").inner_text(), "byte-hours in human units"
        page.screenshot(path=str(SHOTS / "console-07c-policy-backtest.png"), full_page=True)
        browser.close()
