"""The scrub's gate blocks every repair it cannot re-derive as safe (a live ledger's directory, a pending deletion's, a
young item, a path outside the layout, an item changed since the listing, one item twice, a held topic); bad input
(an unknown store, an unreadable directory, a bucket it cannot list) exits 2 naming it and changes nothing; an S3
tier is listed by prefix and scrubbed like a directory tier."""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path

import pytest

from housekeeping.engine.run_dir import RunDir
from tests.conftest import iso, load_store, rewrite_part, run_cli
from tests.scrub.test_scenarios import AS_OF, MANIFEST, A, B, age, local, scrub
from tests.store_invariants import store_contents

pytestmark = [pytest.mark.spark, pytest.mark.runs]


@pytest.fixture
def store(capsys, tmp_path, directory_tier):
    return load_store(capsys, tmp_path, MANIFEST)


@pytest.fixture
def planned(store, directory_tier, spark):
    """A scrub run planned on the store with one old orphan (B's ledger 77): its run directory."""
    from housekeeping.engine import launcher
    from housekeeping.mechanisms.registry import get_mechanism
    from housekeeping.mechanisms.steps import snapshot_step
    from housekeeping.store.store import Store

    shutil.copytree(Path(store, local(B, "2")), Path(store, local(B, "77")))
    age(Path(store, local(B, "77")))
    info = snapshot_step(Store.open(store), "scrub", run_id="gate-test", as_of_ms=AS_OF)
    launcher.plan_in_process(spark, info.run_dir, get_mechanism("scrub"))
    return info.run_dir


def _gate_with(spark, run_dir: Path, mutate) -> dict:
    from housekeeping.engine import launcher
    from housekeeping.mechanisms.registry import get_mechanism

    part = next(RunDir(run_dir).plan_table("actions").glob("part-*"))
    rows = [json.loads(line) for line in part.read_text().splitlines() if line.strip()]
    assert len(rows) == 1 and rows[0]["path"] == local(B, "77")
    rewrite_part(part, "".join(json.dumps(r) + "\n" for r in mutate(rows)))
    return launcher.gate_in_process(spark, run_dir, get_mechanism("scrub"))


MUTANTS = {
    "a live ledger's directory": (lambda r: [{**r[0], "path": local(B, "2")}], "no_row_names_the_path"),
    "a live ledger of another topic": (
        lambda r: [{**r[0], "path": local(A, "3")}],
        "no_row_names_the_ledger",
    ),
    "a young item": (lambda r: [{**r[0], "mtimeMs": AS_OF * 10}], "as_listed"),
    "outside the layout": (lambda r: [{**r[0], "path": "ledgers/../metadata.db"}], "item_listed"),
    "one item twice": (lambda r: [r[0], r[0]], "once"),
    "no topic": (lambda r: [{k: v for k, v in r[0].items() if k != "topic"}], "names_a_topic"),
}


def test_the_unmutated_plan_passes(spark, planned):
    from housekeeping.engine import launcher
    from housekeeping.mechanisms.registry import get_mechanism

    assert launcher.gate_in_process(spark, planned, get_mechanism("scrub")).success


@pytest.mark.parametrize("mutant", list(MUTANTS), ids=list(MUTANTS))
def test_every_unsafe_repair_is_blocked(spark, planned, mutant):
    mutate, check = MUTANTS[mutant]
    gate = _gate_with(spark, planned, mutate)
    assert not gate.success
    assert check in {f.kwargs.get("column") for f in gate.failed}


def test_bad_input_exits_2_naming_it_and_changes_nothing(capsys, store, tmp_path, monkeypatch):
    code, _, err = run_cli(capsys, "scrub", "--store", str(tmp_path / "nowhere"))
    assert code == 2 and "nowhere" in err

    from housekeeping.mechanisms.scrub import listing

    before = store_contents(Path(store), leave_out=("runs",))
    unreadable = Path(store, "ledgers/persistent/t/ns/b")
    real_scandir = listing.os.scandir

    def refuse(path):
        if isinstance(path, str | Path) and Path(path) == unreadable:
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(listing.os, "scandir", refuse)
    code, _, err = run_cli(capsys, "scrub", "--store", store, "--repair", "--as-of", iso(AS_OF))
    assert code == 2 and str(unreadable) in err and "cannot be read" in err
    monkeypatch.setattr(listing.os, "scandir", real_scandir)
    assert store_contents(Path(store), leave_out=("runs",)) == before
    runs = Path(store, "runs", "scrub")
    assert not runs.exists() or not any(runs.iterdir())


@pytest.mark.processes
def test_an_s3_tier_is_listed_and_a_bucket_it_cannot_list_is_bad_input(
    capsys, tmp_path, s3_tier, monkeypatch
):
    from housekeeping.store.tier import OFFLOAD_URL_ENV

    store = load_store(capsys, tmp_path, MANIFEST)
    stray = f"persistent/t/ns/a/9-{uuid.uuid4()}.parquet"
    with s3_tier.fs.open_output_stream(f"{s3_tier.base}/{stray}") as out:
        out.write(b"PAR1 stray")
    # S3 keeps its own modification times: a minimum age of 0 makes the new object a candidate.
    code, document = scrub(capsys, store, "--min-age-seconds", "0")
    assert code == 1
    assert {(f["kind"], f["location"], f["path"]) for f in document["findings"]} == {
        ("orphan", "tier", stray)
    }
    assert document["summary"]["ledgersChecked"] == 11

    before = store_contents(Path(store), leave_out=("runs",))
    monkeypatch.setenv(OFFLOAD_URL_ENV, f"s3://no-such-bucket-{uuid.uuid4().hex[:8]}/offloaded")
    code, _, err = run_cli(capsys, "scrub", "--store", store, "--repair", "--as-of", iso(AS_OF))
    assert code == 2 and "no-such-bucket" in err and "does not exist" in err
    assert store_contents(Path(store), leave_out=("runs",)) == before
