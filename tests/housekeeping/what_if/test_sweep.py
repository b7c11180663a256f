"""Policy sweep (include/housekeeping/what_if/sweep.py, `housekeeping what-if MECHANISM --sweep POLICY=VALUES`):
values as pulsar-admin reads them and the overlay each point is (unit); on a generated store, that every point
of a retention-time, retention-size and TTL sweep equals a separate what-if at that value, that the sweep writes
its report and leaves the store as it was (runs)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from housekeeping.core.errors import InputError
from housekeeping.core.policies import BrokerConfig
from housekeeping.what_if.overlay import PolicyOverlay
from housekeeping.what_if.sweep import (
    KNOBS,
    Sweep,
    knob_mechanism,
    parse_bytes,
    parse_seconds,
    point_overlays,
)
from tests.conftest import run_cli
from tests.store_invariants import store_contents

AS_OF = "2026-11-01T00:00:00Z"

# --- values and overlays (unit) ----------------------------------------------------------------------------


@pytest.mark.unit
def test_times_and_sizes_read_as_pulsar_admin_reads_them():
    assert [parse_seconds(v) for v in ("90", "30m", "6h", "1d", "2w", "1y", "-1")] == [
        90, 1800, 21_600, 86_400, 1_209_600, 31_536_000, -1
    ]  # fmt: skip
    assert [parse_bytes(v) for v in ("4096", "1k", "500M", "5G", "1T", "-1")] == [
        4096, 1024, 500 * 2**20, 5 * 2**30, 2**40, -1
    ]  # fmt: skip
    sweep = Sweep.parse("retention-time=2h, 1d,-1")
    assert (sweep.labels, sweep.values, sweep.mechanism) == (("2h", "1d", "-1"), (120, 1440, -1), "trim")
    assert Sweep.parse("retention-size=1M,1G").values == (1, 1024)
    assert Sweep.parse("ttl=0,1h").mechanism == "expiry"


@pytest.mark.unit
@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("retention=1h", "retention-time, retention-size, ttl, offload-threshold, offload-deletion-lag"),
        ("retention-time", "POLICY=V1,V2"),
        ("retention-time=", "no values"),
        ("retention-time=1h,60m", "given twice"),
        ("retention-time=soon", "'soon' is not a time"),
        ("retention-time=90s", "whole minutes"),
        ("retention-size=1500k", "whole MB"),
        ("ttl=-2", "'-2' is not a time"),
    ],
)
def test_a_bad_sweep_is_refused_naming_the_value(text, named):
    with pytest.raises(InputError) as refused:
        Sweep.parse(text)
    assert named in str(refused.value)


@pytest.mark.unit
def test_every_knob_belongs_to_exactly_one_mechanism_through_the_registry():
    assert {name: knob_mechanism(name) for name in KNOBS} == {
        "retention-time": "trim",
        "retention-size": "trim",
        "ttl": "expiry",
        "offload-threshold": "offload",
        "offload-deletion-lag": "trim",
    }


@pytest.mark.unit
def test_a_point_sets_the_policy_in_each_namespace_keeping_the_other_half_of_retention():
    stored = {
        "a/own": {"retention_policies": {"retentionTimeInMinutes": 60, "retentionSizeInMB": 5}},
        "a/default": {},
        "a/none": {"retention_policies": {"retentionTimeInMinutes": 0, "retentionSizeInMB": 0}},
    }
    broker = BrokerConfig.from_layers(
        ("broker", {"defaultRetentionSizeInMB": 7, "defaultRetentionTimeInMinutes": 9})
    )
    base = PolicyOverlay(namespaces={"a/own": {"message_ttl_in_seconds": 5}})
    (one_day,) = point_overlays(Sweep.parse("retention-time=1d"), base, stored, broker)
    assert one_day.namespaces == {
        "a/own": {"message_ttl_in_seconds": 5, "retention_policies": {"retentionTimeInMinutes": 1440, "retentionSizeInMB": 5}},
        "a/default": {"retention_policies": {"retentionTimeInMinutes": 1440, "retentionSizeInMB": 7}},
        # (1440 min, 0 MB) is refused by Pulsar: no retention before means no size limit now.
        "a/none": {"retention_policies": {"retentionTimeInMinutes": 1440, "retentionSizeInMB": -1}},
    }  # fmt: skip
    (none,) = point_overlays(Sweep.parse("retention-size=0"), PolicyOverlay(), stored, broker)
    assert none.namespaces == {
        name: {"retention_policies": {"retentionTimeInMinutes": 0, "retentionSizeInMB": 0}} for name in stored
    }
    (ttl,) = point_overlays(Sweep.parse("ttl=1h"), PolicyOverlay(), stored, broker)
    assert ttl.namespaces == {name: {"message_ttl_in_seconds": 3600} for name in stored}


# --- on a generated store (runs) ---------------------------------------------------------------------------

SWEEPS = {
    # Values the store's backlog quotas allow (a quota must stay below retention, as Pulsar's admin API checks).
    "retention-time": ("0", "2h", "-1"),
    "retention-size": ("0", "-1"),
    "ttl": ("0", "1d"),
}


def _oracle_overlay(manifest: dict, knob: str, label: str) -> PolicyOverlay:
    """The overlay an operator would write by hand for one value (the test's own reading of the rule)."""
    namespaces = {}
    for name, stored in manifest["namespaces"].items():
        if knob == "ttl":
            namespaces[name] = {"message_ttl_in_seconds": parse_seconds(label)}
            continue
        own = stored.get("retention_policies") or {"retentionTimeInMinutes": 0, "retentionSizeInMB": 0}
        time, size = own["retentionTimeInMinutes"], own["retentionSizeInMB"]
        if parse_seconds(label) == 0:
            time, size = 0, 0
        elif knob == "retention-time":
            seconds = parse_seconds(label)
            time, size = (seconds if seconds < 0 else seconds // 60), (-1 if size == 0 else size)
        else:
            size_bytes = parse_bytes(label)
            size, time = (size_bytes if size_bytes < 0 else size_bytes // 2**20), (-1 if time == 0 else time)
        namespaces[name] = {"retention_policies": {"retentionTimeInMinutes": time, "retentionSizeInMB": size}}
    return PolicyOverlay(namespaces=namespaces)


def _planned_alone(store, mechanism: str, overlay: PolicyOverlay, run_dir: Path) -> dict[str, dict[str, int]]:
    """The candidate half of a what-if at one value, on its own: snapshot with the overlay, the mechanism's plan
    app, and the measures read back from what the plan wrote (its summary and tables)."""
    from housekeeping.core.timeutil import parse_as_of
    from housekeeping.engine import launcher
    from housekeeping.engine.contract import LEDGERS
    from housekeeping.engine.plan import read_summary, read_table
    from housekeeping.engine.snapshot_reads import read_snapshot_table
    from housekeeping.mechanisms.registry import get_mechanism
    from housekeeping.mechanisms.steps import snapshot_step

    spec = get_mechanism(mechanism)
    snapshot_step(store, mechanism, run_id="alone", as_of_ms=parse_as_of(AS_OF), run_dir=run_dir,
        policy_overlay=overlay,
    )  # fmt: skip
    launcher.plan_in_process(launcher.local_spark("local[2]"), run_dir, spec)
    per_namespace = read_summary(run_dir)["perNamespace"]
    measured: dict[str, dict[str, int]] = {}
    if mechanism == "trim":
        for row in read_snapshot_table(run_dir, LEDGERS):
            namespace = "/".join(row["topic"].split("://")[1].split("/")[:2])
            measured.setdefault(namespace, {"bytesFreed": 0, "bytesKept": 0, "ledgersDeleted": 0})
            measured[namespace]["bytesKept"] += row["size"]
        for namespace, freed in per_namespace.items():
            measured[namespace]["bytesFreed"] = freed["bytes"]
            measured[namespace]["bytesKept"] -= freed["bytes"]
            measured[namespace]["ledgersDeleted"] = freed["ledgers"]
        for (
            one
        ) in measured.values():  # no object tier here: every ledger is local, the local bytes are all bytes
            one.update(localBytesFreed=one["bytesFreed"], localBytesLeft=one["bytesKept"])
    else:
        for row in read_table(run_dir, "subscriptions"):
            one = measured.setdefault(
                row["namespace"], {"bytesFreed": 0, "bytesKept": 0, "cursorsMoved": 0, "entriesExpired": 0}
            )
            one["bytesKept"] += row["backlogBytesAfter"] or 0
        for namespace, moved in per_namespace.items():
            measured[namespace].update(
                bytesFreed=moved["bytes"], cursorsMoved=moved["cursors"], entriesExpired=moved["entries"]
            )
    return dict(sorted(measured.items()))


@pytest.mark.spark
@pytest.mark.runs
@pytest.mark.parametrize("knob", list(SWEEPS))
def test_every_point_equals_a_separate_what_if_and_the_store_is_untouched(knob, spark, tmp_path, capsys):
    from housekeeping.store.generate import GenerateOptions, generate_store
    from housekeeping.store.manifest.export import export_manifest

    store = generate_store(tmp_path / "store", GenerateOptions(topics=28, seed=7, entries_per_ledger=60))
    before = store_contents(store.root)
    mechanism = knob_mechanism(knob)
    labels = SWEEPS[knob]
    code, out, err = run_cli(
        capsys, "what-if", mechanism, "--store", str(store.root), "--as-of", AS_OF,
        "--sweep", f"{knob}={','.join(labels)}", "--format", "json", "--report-dir", str(tmp_path / "report"),
    )  # fmt: skip
    assert code == 0, err
    document = json.loads(out)
    assert store_contents(store.root) == before, "a sweep changed the store"
    assert [p["value"] for p in document["points"]] == list(labels)
    freed = [p["total"]["bytesFreed"] for p in document["points"]]
    assert len(set(freed)) > 1, f"the values should free different amounts on this store: {freed}"

    manifest = export_manifest(store)
    for index, (label, point) in enumerate(zip(labels, document["points"], strict=True)):
        alone = _planned_alone(
            store, mechanism, _oracle_overlay(manifest, knob, label), tmp_path / f"alone-{index}"
        )
        assert point["perNamespace"] == alone, f"{knob}={label}"

    assert json.loads((tmp_path / "report" / "report.json").read_text()) == document
    page = (tmp_path / "report" / "index.html").read_text()
    assert "<svg" in page and all(ns in page for ns in manifest["namespaces"]), "plot and table per namespace"
    assert "<script" not in page and not re.search(r"(src|href)=\"(https?:)?//", page), "offline page"


@pytest.mark.spark
@pytest.mark.runs
def test_a_point_is_the_candidate_of_the_cli_what_if_at_that_value(spark, tmp_path, capsys):
    """The literal check, once: `what-if --policies` with the value's overlay plans what the sweep measured."""
    from housekeeping.store.generate import GenerateOptions, generate_store
    from housekeeping.store.manifest.export import export_manifest
    from tests.conftest import write_manifest

    store = generate_store(tmp_path / "store", GenerateOptions(topics=28, seed=7, entries_per_ledger=60))
    code, out, err = run_cli(
        capsys, "what-if", "trim", "--store", str(store.root), "--as-of", AS_OF, "--sweep", "retention-size=1M",
        "--format", "json",
    )  # fmt: skip
    assert code == 0, err
    (point,) = json.loads(out)["points"]
    overlay = _oracle_overlay(export_manifest(store), "retention-size", "1M")
    overlay_file = write_manifest(tmp_path, {"namespaces": dict(overlay.namespaces)}, "overlay.json")
    code, out, err = run_cli(
        capsys, "what-if", "trim", "--store", str(store.root), "--as-of", AS_OF, "--policies", str(overlay_file),
        "--format", "json",
    )  # fmt: skip
    assert code == 0, err
    candidate = json.loads(out)["candidate"]
    assert candidate["summary"]["bytesToDelete"] == point["total"]["bytesFreed"] > 0
    assert {ns: v["bytes"] for ns, v in candidate["summary"]["perNamespace"].items()} == {
        ns: m["bytesFreed"] for ns, m in point["perNamespace"].items() if m["bytesFreed"]
    }


@pytest.mark.unit
def test_a_sweep_of_another_mechanisms_policy_or_a_value_the_store_refuses_exits_2(tmp_path, capsys):
    from housekeeping.store.generate import GenerateOptions, generate_store

    store = generate_store(tmp_path / "store", GenerateOptions(topics=8, seed=7, entries_per_ledger=10))
    before = store_contents(store.root)
    args = ["--store", str(store.root), "--as-of", AS_OF]
    code, _, err = run_cli(capsys, "what-if", "expiry", *args, "--sweep", "retention-time=1d")
    assert code == 2 and "retention-time is a trim policy" in err, err
    # acme/metrics' message_age quota (1800 s) must stay below its retention time, as Pulsar's admin API says.
    code, _, err = run_cli(capsys, "what-if", "trim", *args, "--sweep", "retention-time=2h,30m")
    assert code == 2 and "retention-time=30m" in err and "acme/metrics" in err, err
    code, _, err = run_cli(capsys, "what-if", "trim", *args)
    assert code == 2 and "--sweep" in err, err
    assert store_contents(store.root) == before


@pytest.mark.spark
@pytest.mark.runs
def test_a_scoped_sweep_sets_and_measures_only_the_namespaces_in_scope(spark, tmp_path, capsys):
    from housekeeping.store.generate import GenerateOptions, generate_store

    store = generate_store(tmp_path / "store", GenerateOptions(topics=8, seed=7, entries_per_ledger=10))
    # 30m would be refused in acme/metrics and public/retained (message_age quotas of 1800 s and 3600 s must stay
    # below the retention): out of scope, they are not set.
    code, out, err = run_cli(
        capsys, "what-if", "trim", "--store", str(store.root), "--as-of", AS_OF, "--sweep", "retention-time=30m",
        "--scope", "acme/orders,globex/*", "--format", "json",
    )  # fmt: skip
    assert code == 0, err
    (point,) = json.loads(out)["points"]
    assert set(point["perNamespace"]) == {"acme/orders", "globex/events", "globex/tables"}
