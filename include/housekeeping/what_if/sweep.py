"""A policy sweep: the question people ask of retention and TTL ("what would 1 h, 1 d, 7 d keep and free?"),
every value answered from one read of the store in one Spark application.

``--sweep retention-time=1h,6h,1d,3d,7d`` (or ``retention-size=...``, ``ttl=...``, ``offload-threshold=...``,
``offload-deletion-lag=...``) sets the policy at the namespace level of every namespace with a topic in scope, as
``pulsar-admin namespaces set-retention``, ``set-message-ttl``, ``set-offload-threshold`` or
``set-offload-deletion-lag`` would, on top of the ``--policies`` overlay if one is given; a topic-level policy still wins
(resolution is the snapshot's, topic > namespace > broker). A retention sweep keeps the other half of the
namespace's retention in force (its own, else the broker default), since Pulsar sets both together. Pulsar
accepts 0 only for both halves: a value 0 is no retention (both 0), and beside a non-zero value a half that was 0
becomes -1 (no limit).

Each value is a point: a snapshot of the same read of the store with that overlay, so a point is exactly the
what-if candidate of the same overlay (tested). The mechanism's planner (the same decisions its ``plan`` writes)
measures every point in one Spark application, per namespace: the bytes it frees and keeps (for TTL, the backlog
bytes its cursors acknowledge and the backlog left; for the offload threshold, the bytes offloaded and the local
bytes left once the deletion lag in force has passed; for the deletion lag, the local copies' bytes it frees now and
the local bytes left) and its counts. A sweep runs no gate: ask a what-if at the
value you choose for the gate's verdict.

Values follow pulsar-admin: times take s, m, h, d, w or y (no unit: seconds), sizes k, m, g or t (no unit:
bytes; binary multiples), -1 is infinite. Unlike pulsar-admin, which truncates, a retention time that is not a
whole number of minutes or a size that is not a whole number of MB is refused: Pulsar stores minutes and MB.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from housekeeping.core import units
from housekeeping.core.errors import InputError
from housekeeping.what_if.overlay import PolicyOverlay

if TYPE_CHECKING:
    from housekeeping.store.store import Store

MIB = 1024**2


def parse_seconds(text: str) -> int:
    """A sweep's relative time in seconds (:func:`housekeeping.core.units.parse_seconds`)."""
    return units.parse_seconds(text, "sweep value")


def parse_bytes(text: str) -> int:
    """A sweep's size in bytes (:func:`housekeeping.core.units.parse_bytes`)."""
    return units.parse_bytes(text, "sweep value")


def _retention_minutes(text: str) -> int:
    seconds = parse_seconds(text)
    if seconds > 0 and seconds % 60:
        raise InputError(
            f"sweep value {text!r}: retention time is kept in whole minutes ({seconds} s is not)"
        )
    return seconds if seconds < 0 else seconds // 60


def _retention_mb(text: str) -> int:
    size = parse_bytes(text)
    if size > 0 and size % MIB:
        raise InputError(f"sweep value {text!r}: retention size is kept in whole MB ({size} bytes is not)")
    return size if size < 0 else size // MIB


def _offload_lag_ms(text: str) -> int:
    seconds = parse_seconds(text)
    return seconds if seconds < 0 else seconds * 1000


def _retention_at(name: str, value: int, stored: Mapping[str, Any], broker: Any) -> Any:
    """Retention at ``value``: its other half stays as in force (the namespace's own, else the broker default),
    except that Pulsar accepts 0 only for both halves: 0 is no retention (both 0), and beside a non-zero value a
    half that was 0 (no retention before) becomes -1 (no limit): "retention 1 d" alone is a time limit."""
    if value == 0:
        return {"retentionTimeInMinutes": 0, "retentionSizeInMB": 0}
    own = stored.get("retention_policies")
    in_force = (
        dict(own)
        if own
        else {
            "retentionTimeInMinutes": broker.retention.time_minutes,
            "retentionSizeInMB": broker.retention.size_mb,
        }
    )
    if name == "retention-time":
        size = in_force["retentionSizeInMB"]
        return {"retentionTimeInMinutes": value, "retentionSizeInMB": -1 if size == 0 else size}
    time = in_force["retentionTimeInMinutes"]
    return {"retentionTimeInMinutes": -1 if time == 0 else time, "retentionSizeInMB": value}


@dataclass(frozen=True)
class Knob:
    """One policy a sweep varies: how a value is read, the namespace policy it becomes, and the two measures a
    person reads at each value (the measures of the mechanism's ``sweep_points``)."""

    name: str
    policy: str  # the namespace policy it sets
    field: str  # the stored field the value is
    unit: str  # what the stored value counts
    parse: Any  # str -> the stored value
    measures: tuple[str, str] = ("bytesFreed", "bytesKept")
    measures_label: str = "bytes freed / kept"
    plotted: tuple[str, str] = ("bytesFreed", "bytes freed")  # the measure the report plots, and its axis

    def namespace_policy(self, value: int, stored: Mapping[str, Any], broker: Any) -> Any:
        """The namespace policy at ``value``, given the namespace's stored policies and the broker's."""
        if self.policy == "retention_policies":
            return _retention_at(self.name, value, stored, broker)
        if self.policy == "offload_policies":
            # One field of the namespace's offload policies; the others (and the driver fields) stay. Set here,
            # it wins over the legacy namespace field it stands for (OffloadPoliciesImpl#oldPoliciesCompatible).
            return {**(stored.get("offload_policies") or {}), self.field: value}
        return value


KNOBS = {
    knob.name: knob
    for knob in (
        Knob("retention-time", "retention_policies", "retentionTimeInMinutes", "minutes", _retention_minutes),
        Knob("retention-size", "retention_policies", "retentionSizeInMB", "MB", _retention_mb),
        Knob(
            "ttl",
            "message_ttl_in_seconds",
            "message_ttl_in_seconds",
            "seconds",
            parse_seconds,
            plotted=("bytesFreed", "backlog bytes expired"),
        ),
        # pulsar-admin namespaces set-offload-threshold: a size, -1 disables automatic offload, 0 offloads every
        # closed ledger. Measured: the bytes it offloads and the local bytes left once the lag in force has passed.
        Knob(
            "offload-threshold",
            "offload_policies",
            "managedLedgerOffloadThresholdInBytes",
            "bytes",
            parse_bytes,
            ("bytesOffloaded", "localBytesLeft"),
            "bytes offloaded / local bytes left",
            ("localBytesLeft", "local bytes left"),
        ),
        # pulsar-admin namespaces set-offload-deletion-lag: a time, -1 never deletes the local copy (PIP-350).
        Knob(
            "offload-deletion-lag",
            "offload_policies",
            "managedLedgerOffloadDeletionLagInMillis",
            "milliseconds",
            _offload_lag_ms,
            ("localBytesFreed", "localBytesLeft"),
            "local bytes freed / left",
            ("localBytesLeft", "local bytes left"),
        ),
    )
}


def knob_mechanism(knob: str) -> str:
    """The mechanism whose spec lists the knob among its ``sweeps``."""
    from housekeeping.mechanisms.registry import MECHANISMS

    owners = [spec.name for spec in MECHANISMS.values() if knob in spec.sweeps]
    if len(owners) != 1:
        raise InputError(f"no mechanism sweeps {knob!r}")
    return owners[0]


@dataclass(frozen=True)
class Sweep:
    knob: Knob
    labels: tuple[str, ...]  # as the user wrote them
    values: tuple[int, ...]  # stored units (minutes, MB, seconds)

    @classmethod
    def parse(cls, text: str) -> Sweep:
        name, sep, values = text.partition("=")
        if not sep or name.strip() not in KNOBS:
            raise InputError(
                f"--sweep {text!r}: expected POLICY=V1,V2,... with POLICY one of {', '.join(KNOBS)}"
            )
        knob = KNOBS[name.strip()]
        labels = tuple(v.strip() for v in values.split(",") if v.strip())
        if not labels:
            raise InputError(f"--sweep {text!r}: no values")
        parsed = tuple(knob.parse(label) for label in labels)
        if len(set(parsed)) != len(parsed):
            raise InputError(f"--sweep {text!r}: a value is given twice")
        return cls(knob, labels, parsed)

    @property
    def mechanism(self) -> str:
        return knob_mechanism(self.knob.name)


def point_overlays(
    sweep: Sweep, base: PolicyOverlay, namespaces: Mapping[str, Mapping[str, Any]], broker: Any
) -> list[PolicyOverlay]:
    """Per value, the base overlay with the knob's policy set in each namespace of ``namespaces`` (their stored
    policies by name); ``broker``: the broker settings with the base overlay."""
    overlays = []
    for value in sweep.values:
        changed = {name: dict(policies) for name, policies in base.namespaces.items()}
        for name in sorted(namespaces):
            stored = base.namespace_policies(name, namespaces[name])
            changed.setdefault(name, {})[sweep.knob.policy] = sweep.knob.namespace_policy(
                value, stored, broker
            )
        overlays.append(replace(base, namespaces=changed))
    return overlays


def check_points(
    store: Store, sweep: Sweep, base: PolicyOverlay, scope: str | None, state: Any = None
) -> list[PolicyOverlay]:
    """Each point's overlay, every one checked against the store by ``load``'s rules before anything runs (a
    value that breaks a policy in force, as a retention below a backlog quota's limit, is bad input naming the value
    and the namespace)."""
    from housekeeping.core.scope import in_scope, parse_scope
    from housekeeping.engine.snapshot import read_store_state
    from housekeeping.store.manifest.export import export_manifest

    state = state if state is not None else read_store_state(store)
    broker = base.broker_config(state.broker)
    patterns = parse_scope(scope)
    swept = {row.namespace for row in state.topic_rows if in_scope(row.name, patterns)}
    overlays = point_overlays(sweep, base, {name: state.namespaces[name] for name in swept}, broker)
    manifest = export_manifest(store)
    for label, overlay in zip(sweep.labels, overlays, strict=True):
        try:
            overlay.validate_against(store, manifest)
        except InputError as exc:
            raise InputError(f"sweep {sweep.knob.name}={label}: {exc}") from None
    return overlays


def run_sweep(
    store: Store,
    sweep: Sweep,
    base: PolicyOverlay,
    *,
    as_of: str,
    scope: str | None = None,
    spark: Any = None,
) -> dict[str, Any]:
    """Every point of the sweep: ``{"mechanism", "asOf", "sweep": {"policy", "unit", "values"}, "points": [{"value",
    "setting", "perNamespace": {ns: measures}, "total": measures}]}``. Nothing is written to the store."""
    from housekeeping.core.settings import Settings
    from housekeeping.core.timeutil import format_ms, parse_as_of
    from housekeeping.engine import launcher
    from housekeeping.engine.documents import Intent
    from housekeeping.engine.snapshot import read_store_state, take_snapshot
    from housekeeping.mechanisms.registry import build_request, get_mechanism

    spec = get_mechanism(sweep.mechanism)
    settings = Settings.from_env()
    as_of_ms = parse_as_of(as_of)
    state = read_store_state(store)
    overlays = check_points(store, sweep, base, scope, state)
    with tempfile.TemporaryDirectory(prefix="housekeeping-sweep-") as tmp:
        run_dirs = []
        for index, overlay in enumerate(overlays):
            run_dir = Path(tmp) / f"point-{index}"
            request = build_request(
                spec,
                run_id=f"sweep-{index}",
                as_of_ms=as_of_ms,
                settings=settings,
                scope=scope,
                intent=Intent.WHAT_IF,
            )
            take_snapshot(
                store,
                request,
                run_dir=run_dir,
                policy_overlay=overlay,
                state=state,
                # The sweep app reads the other tables from the first point: all of one read, the same rows.
                tables=None if index == 0 else ("topics",),
            )
            run_dirs.append(run_dir)
        measured = launcher.sweep_in_process(
            spark or launcher.local_spark(settings.spark_master), run_dirs, spec
        )
    points = []
    for label, value, per_namespace in zip(sweep.labels, sweep.values, measured, strict=True):
        total: dict[str, int] = {}
        for measures in per_namespace.values():
            for name, amount in measures.items():
                total[name] = total.get(name, 0) + amount
        points.append(
            {
                "value": label,
                "setting": {sweep.knob.field: value},
                "perNamespace": per_namespace,
                "total": total,
            }
        )
    return {
        "mechanism": spec.name,
        "asOf": format_ms(as_of_ms),
        "sweep": {
            "policy": sweep.knob.name,
            "unit": sweep.knob.unit,
            "values": list(sweep.labels),
            "measures": list(sweep.knob.measures),
            "measuresLabel": sweep.knob.measures_label,
            "plotted": list(sweep.knob.plotted),
        },
        "points": points,
    }


def format_text(document: Mapping[str, Any]) -> str:
    """A sweep for a person: one line per namespace, bytes freed at each value."""
    from housekeeping.engine.report import human_bytes

    sweep = document["sweep"]
    first, second = sweep_measures(sweep)
    header = (
        f"{document['mechanism']} sweep of {sweep['policy']} as of {document['asOf']} "
        f"({sweep.get('measuresLabel', 'bytes freed / kept')})"
    )
    namespaces = sorted({ns for point in document["points"] for ns in point["perNamespace"]})
    width = max([len(ns) for ns in namespaces] + [len("total")])
    lines = [header, " " * (width + 2) + "".join(f"{v:>22}" for v in sweep["values"])]

    def cell(measures: Mapping[str, int] | None) -> str:
        measures = measures or {}
        return f"{human_bytes(measures.get(first, 0))} / {human_bytes(measures.get(second, 0))}"

    for namespace in [*namespaces, "total"]:
        cells = [
            cell(point["total"] if namespace == "total" else point["perNamespace"].get(namespace))
            for point in document["points"]
        ]
        lines.append(f"  {namespace:<{width}}" + "".join(f"{c:>22}" for c in cells))
    return "\n".join(lines)


def sweep_measures(sweep: Mapping[str, Any]) -> tuple[str, str]:
    """The two measures a sweep document shows per value (a document written before they were named: freed and
    kept)."""
    first, second = sweep.get("measures") or ("bytesFreed", "bytesKept")
    return first, second
