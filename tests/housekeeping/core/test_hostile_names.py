"""Path containment with generated hostile names (Hypothesis, derandomized so CI is reproducible).

Whatever the name, either it is refused by name, or every path derived from it is a plain directory under the
store's ledger tree; and the single file-deleting function never removes anything outside that tree.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from housekeeping.core.errors import InputError, PathOutsideStore
from housekeeping.core.names import NamespaceName, TopicName
from housekeeping.store.store import Store, ledger_rel_path
from tests.conftest import REPO

pytestmark = pytest.mark.unit

HOSTILE = st.sampled_from(
    [
        "..",
        ".",
        "/",
        "\\",
        "\x00",
        "'",
        '"',
        ";",
        "--",
        "%2e",
        "%2f",
        "*",
        "?",
        "~",
        " ",
        "\n",
        "é",
        "\u202e",
        "$(",
    ]
)
PLAIN = st.text(alphabet="abcXYZ019-_=:.", min_size=0, max_size=12)
SEGMENT = st.one_of(
    PLAIN,
    st.lists(st.one_of(HOSTILE, PLAIN), min_size=1, max_size=6).map("".join),
    st.integers(min_value=190, max_value=400).map(lambda n: "t" * n),
)
SETTINGS = settings(
    max_examples=400, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@SETTINGS
@given(tenant=SEGMENT, namespace=SEGMENT, local=SEGMENT, ledger_id=st.integers(min_value=0, max_value=2**62))
def test_a_topic_name_is_refused_or_maps_inside_the_ledger_tree(tenant, namespace, local, ledger_id):
    text = f"persistent://{tenant}/{namespace}/{local}"
    try:
        topic = TopicName.parse(text)
    except InputError as exc:
        assert "topic" in str(exc) or "tenant" in str(exc) or "namespace" in str(exc)
        return
    root = Path("/store-root")
    rel = Path(ledger_rel_path(str(topic), ledger_id))
    assert rel.parts[:2] == ("ledgers", "persistent") and len(rel.parts) == 6, rel
    assert all(part not in ("", ".", "..") and "/" not in part and "\\" not in part for part in rel.parts)
    assert "\x00" not in str(rel)
    resolved = (root / rel).resolve()
    assert root / "ledgers" in resolved.parents


@SETTINGS
@given(tenant=SEGMENT, namespace=SEGMENT)
def test_a_namespace_name_is_refused_or_is_two_plain_segments(tenant, namespace):
    try:
        name = NamespaceName.parse(f"{tenant}/{namespace}")
    except InputError:
        return
    for segment in (name.tenant, name.namespace):
        assert (
            segment not in (".", "..")
            and "/" not in segment
            and "\\" not in segment
            and "\x00" not in segment
        )
        assert 0 < len(segment) <= 200


RELATIVE = st.lists(
    st.one_of(HOSTILE, PLAIN, st.just("ledgers"), st.just("persistent")), min_size=0, max_size=8
)


@settings(max_examples=300, derandomize=True, deadline=None)
@given(parts=RELATIVE, absolute=st.booleans())
def test_remove_ledger_dir_never_deletes_outside_the_ledger_tree(parts, absolute):
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        store = Store(base / "store", "sqlite://")
        inside = store.ledgers_root / "persistent" / "a" / "b" / "c" / "7"
        inside.mkdir(parents=True)
        (inside / "part-00000.parquet").write_bytes(b"x")
        precious = [base / "precious", base / "store" / "keep", base / "store"]
        for path in precious[:2]:
            path.mkdir(parents=True, exist_ok=True)
            (path / "file").write_text("keep")
        (base / "store" / "metadata.db").write_text("db")
        rel = "/".join(p.replace("\x00", "") for p in parts)
        if absolute:
            rel = str(base / rel)
        try:
            removed = store.remove_ledger_dir(rel)
        except (PathOutsideStore, InputError, ValueError, OSError):
            removed = None
        for path in precious[:2]:
            assert (path / "file").read_text() == "keep", (rel, removed)
        assert (base / "store" / "metadata.db").read_text() == "db"
        if removed:
            # Only a ledger directory (the tree's depth: persistent/<t>/<ns>/<topic>/<id>) can go.
            target = store.contained(Path(rel)) if not absolute else Path(rel).resolve()
            assert store.ledgers_root.resolve() in target.parents


DELETING_CALLS = (
    "rmtree(",
    ".unlink(",
    "os.remove(",
    ".rmdir(",
    "os.unlink(",
    "removedirs(",
    "delete_file(",
    "delete_dir(",
    "delete_dir_contents(",
)
# The modules allowed to delete: local files (store/fs.py) and objects of the object tier (store/tier.py,
# ObjectTier.delete, which refuses any key outside the tier's layout).
DELETING_MODULES = ("include/housekeeping/store/fs.py", "include/housekeeping/store/tier.py")


def test_no_module_but_fs_and_the_tier_deletes_files():
    """The containment above is only worth something if nothing else deletes: a static check of the sources."""
    offenders, scanned = [], []
    for folder in ("include", "spark_apps", "dags", "plugins"):
        for source in (REPO / folder).rglob("*.py"):
            scanned.append(source)
            if str(source.relative_to(REPO)) in DELETING_MODULES:
                continue
            text = source.read_text(encoding="utf-8")
            offenders += [f"{source.relative_to(REPO)}: {call}" for call in DELETING_CALLS if call in text]
    assert len(scanned) > 100 and all((REPO / m).is_file() for m in DELETING_MODULES), (
        "the sources were not found"
    )
    assert offenders == []
