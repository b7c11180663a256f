"""What a housekeeping mechanism is: everything that differs between trim, expiry, backlog quota, GC and
compaction, as one :class:`MechanismSpec`. Each mechanism's module in ``housekeeping/mechanisms/`` defines its
spec and report builder; ``housekeeping.registry`` lists them. The DAG factory, the CLI, the runner, the launcher,
the gate app and the apply engine read the spec; nothing else switches on a mechanism's name.

The Spark side is named by module (``spark_apps.trim.plan``), never imported here: the library reaches the Spark
apps through ``housekeeping.launcher`` only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from housekeeping.contract import BASE_SNAPSHOT_TABLES, SNAPSHOT_TABLES


@dataclass(frozen=True)
class TaskIds:
    """The DAG's task ids (public: users script against them)."""

    plan: str
    validate: str
    apply: str
    report: str

    @property
    def approve(self) -> str:
        """The approval step's id: ``approve_<what apply_... applies>`` (approve_ledger_trim, ...)."""
        return "approve_" + self.apply.removeprefix("apply_")


@dataclass(frozen=True)
class MechanismSpec:
    name: str  # CLI argument, runs/<name>/, journal mechanism
    title: str  # what a person calls it
    pulsar: str  # the Pulsar code it follows
    dag_id: str
    schedule: str
    tags: tuple[str, ...]
    task_ids: TaskIds
    plan_app: str  # Spark app module (parse_args/main/run) that writes the plan
    gate_checks: str  # module whose checks(spark, run_dir, spec) builds the gate's check frames
    actions: tuple[str, ...]  # the actions its plans may hold (the gate and apply refuse any other)
    report: Callable[..., dict[str, Any]]  # build(run_dir, dry_run=...) -> the report's data
    report_template: str  # Jinja template in housekeeping/templates
    snapshot_tables: tuple[str, ...] = ()  # snapshot tables it reads beyond the base ones
    apply_app: str | None = None  # Spark app that applies the plan; None: the Python apply engine
    # Trigger-form params beyond the common ones: name -> {"default": ..., JSON-schema keywords}.
    extra_params: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # Notifiers run after the report task succeeds (alerts that must not fail the run); built lazily because
    # they are Airflow objects and the spec is read outside Airflow too.
    report_notifiers: Callable[[], tuple[Any, ...]] = tuple
    # Policies a what-if sweep varies for it (``housekeeping.policy_sweep.KNOBS``); its plan app then defines
    # ``sweep_point(spark, snapshot, info)``: per namespace bytesFreed, bytesKept and its counts.
    sweeps: tuple[str, ...] = ()
    # The library module whose ``apply_plan(store, run_dir, purge_grace_seconds=...)`` applies its plans when
    # the shared Python apply (``housekeeping.apply.apply_plan``) does not (it commits through ``ApplyRun``).
    library_apply: str | None = None
    # The Settings field of the grace period before the files its apply replaced are purged.
    purge_grace_setting: str = "purge_grace_seconds"
    # Records what the run's trigger form asks of the store before the snapshot reads it (key erasure: a request):
    # (store, params, as_of_ms, actor) -> None; idempotent (a retried snapshot task calls it again).
    before_snapshot: Callable[..., None] | None = None
    # Its plan follows namespace/topic policies, so a policy what-if applies to it (key erasure follows requests).
    policy_driven: bool = True

    def __post_init__(self) -> None:
        ids = [self.task_ids.plan, self.task_ids.validate, self.task_ids.apply, self.task_ids.report]
        if len(set(ids)) != len(ids) or "take_snapshot" in ids or "purge_pending_deletions" in ids:
            raise ValueError(
                f"mechanism {self.name}: task ids must be distinct from each other and the common ones"
            )
        unknown = [t for t in self.snapshot_tables if t not in SNAPSHOT_TABLES]
        if unknown:
            raise ValueError(f"mechanism {self.name}: no snapshot table {', '.join(unknown)}")
        if self.apply_app is not None and self.library_apply is not None:
            raise ValueError(f"mechanism {self.name}: one apply, a Spark app or a library one")
        for module in (self.plan_app, self.gate_checks, self.apply_app):
            if module is not None and not module.startswith("spark_apps."):
                raise ValueError(f"mechanism {self.name}: {module} is not a module of spark_apps")
        if not self.actions:
            raise ValueError(f"mechanism {self.name}: a mechanism plans at least one kind of action")

    @property
    def all_snapshot_tables(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys([*BASE_SNAPSHOT_TABLES, *self.snapshot_tables]))

    def build_report(self, run_dir: str | Path, *, dry_run: bool) -> dict[str, Any]:
        return self.report(Path(run_dir), dry_run=dry_run)
