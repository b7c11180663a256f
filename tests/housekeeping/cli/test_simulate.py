"""``housekeeping simulate`` (docs/cli.md, "Simulate"): a short run on the real clock with its progress line and
summary, one on the simulated clock, and bad options refused with exit 2, the option named, the store unchanged."""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_cli, write_manifest
from tests.store_invariants import store_contents

pytestmark = pytest.mark.unit


@pytest.fixture
def root(tmp_path) -> str:
    from housekeeping.store.manifest.load import load_manifest

    document = {"namespaces": {"sim/ns": {}}, "topics": {}}
    return str(load_manifest(tmp_path / "store", write_manifest(tmp_path, document)).root)


def test_a_short_run_on_the_wall_clock_reports_its_throughput_and_latency(capsys, root, tmp_path):
    code, out, err = run_cli(
        capsys,
        "simulate",
        "--store",
        root,
        "--duration",
        "3s",
        "--rate",
        "40",
        "--batch",
        "4",
        "--topics",
        "3",
        "--progress",
        "1s",
        "--log",
        str(tmp_path / "log.jsonl"),
        "--format",
        "json",
    )
    assert code == 0, err
    summary = json.loads(out)
    assert summary["clock"] == "real"
    assert 2.5 <= summary["seconds"] <= 10
    assert summary["published"]["entries"] > 20
    assert summary["publishLatencyMs"]["count"] * 4 == summary["published"]["entries"]
    assert 0 < summary["publishLatencyMs"]["p50"] <= summary["publishLatencyMs"]["p99"]
    assert err.count(" published (") >= 3, err  # a progress line a second, and the last
    assert "(done)" in err.splitlines()[-1]
    logged = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert logged[0]["event"] == "start" and logged[-1]["event"] == "end"


def test_the_simulated_clock_writes_hours_of_a_stores_life_without_waiting(capsys, root):
    code, out, err = run_cli(
        capsys,
        "simulate",
        "--store",
        root,
        "--clock",
        "simulated",
        "--start",
        "2026-11-01T00:00:00Z",
        "--duration",
        "2h",
        "--rate",
        "0.5",
        "--ledger-max-rollover",
        "20m",
        "--ledger-min-rollover",
        "1m",
        "--ops",
        "none",
        "--progress",
        "0",
    )
    assert code == 0, err
    assert "simulated 7200.0 s (simulated clock, seed 1) on 20 topics" in out
    assert "ledgers rolled" in out and err == ""


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--stuck-share", "2"], "--stuck-share must be 0..1"),
        (["--ops", "subscribe,compact"], "--ops: unknown operation 'compact'"),
        (["--clock", "simulated"], "--clock simulated needs --start"),
        (["--clock", "later"], "--clock must be real or simulated"),
        (["--duration", "soon"], "--duration 'soon' is not a time"),
        (["--duration", "-1"], "--duration '-1' must not be negative"),
        (["--ledger-max-size", "big"], "--ledger-max-size 'big' is not a size"),
        (["--scope", "../etc"], "scope item '../etc'"),
        (["--scope", "other/ns"], "no namespace in that scope to create the other 20 in"),
    ],
)
def test_bad_options_are_refused_by_name_and_change_nothing(capsys, root, argv, named):
    from pathlib import Path

    before = store_contents(Path(root))
    code, _, err = run_cli(capsys, "simulate", "--store", root, "--duration", "5s", *argv)
    assert code == 2
    assert named in err
    assert store_contents(Path(root)) == before
