"""What a housekeeping mechanism is: a :class:`Mechanism`, everything that differs between trim, expiry, backlog
quota, GC, compaction, key erasure, offload and the store scrub. Each mechanism's package (``housekeeping/mechanisms/<m>/``) subclasses it
(``MECHANISM = Trim(...)``) and holds all that is only its own; ``housekeeping.mechanisms.registry`` lists them.

A mechanism declares its identity (name, DAG id, schedule, task ids), its Spark apps by module name (the library
never imports them: ``housekeeping.engine.launcher`` does), the action kinds it plans (``housekeeping.engine.actions``),
the snapshot tables it reads beyond the base ones, its run options (typed: a trigger-form param, a CLI option and a
key of ``run.json`` each), its settings and its fault points. What it does differently is a method with a default:
its report, its apply (the shared Python apply unless it overrides it), its apply's re-check of a topic against the
store as it is, its grace period, what its trigger form records before the snapshot, its report's notifiers, its
command group.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from housekeeping.core.errors import InputError
from housekeeping.core.settings import Setting, Settings
from housekeeping.engine.actions import ActionKind
from housekeeping.engine.contract import BASE_SNAPSHOT_TABLES, SNAPSHOT_TABLES
from housekeeping.engine.live import Narrowed, TopicNow, TopicThen, policy_changes

if TYPE_CHECKING:
    from housekeeping.store.store import Store

ENGINE_TEMPLATES = Path(__file__).with_name("templates")


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
class RunOption:
    """One option a mechanism's runs take beyond the common ones (gc's topic share, compaction's topics): the DAG's
    trigger-form param ``name``, the CLI option ``flag`` of plan, apply and what-if, and the key ``run_info_key``
    of ``snapshot/run.json`` its planner and gate read. Given as None (or an empty list), ``setting`` (or
    ``default``) applies."""

    name: str
    flag: str
    run_info_key: str
    help: str
    param: Mapping[str, Any]  # JSON-schema keywords of the form's param (its default is None)
    value_type: type = str  # of the value, or of each element when ``repeatable``
    repeatable: bool = False
    setting: Setting | None = None
    default: Any = None
    # Checks a given value against the store's topics (known, selected by the scope); raises InputError.
    check_topics: Callable[[Any, set[str], set[str], str], None] | None = None

    def resolve(self, given: Any) -> Any:
        """The value a run uses: ``given`` when set, else the setting, else the default; checked against the
        param's bounds (bad input names the option)."""
        if given is None or (self.repeatable and not given):
            if self.setting is not None:
                return self.setting.read()
            return list(self.default or []) if self.repeatable else self.default
        if self.repeatable:
            return sorted({self.value_type(v) for v in given})
        value = self.value_type(given)
        low, high = self.param.get("minimum"), self.param.get("maximum")
        if (low is not None and value < low) or (high is not None and value > high):
            raise InputError(f"{self.flag} ({self.name}) must be between {low} and {high}, got {value}")
        return value


@dataclass(frozen=True)
class Mechanism:
    """One housekeeping mechanism (see the module docstring). Subclasses override the methods below."""

    name: str  # CLI argument, runs/<name>/, journal mechanism
    title: str  # what a person calls it
    pulsar: str  # the Pulsar code it follows
    dag_id: str
    schedule: str
    tags: tuple[str, ...]
    task_ids: TaskIds
    actions: tuple[ActionKind, ...]  # the kinds its plans may hold (the gate and apply refuse any other)
    # Its Spark apps, by convention ``spark_apps.<name>.plan`` (parse_args/main/run: writes the plan) and
    # ``spark_apps.<name>.gate`` (``checks(spark, run_dir, spec)``: the gate's check frames). By module name: the
    # library never imports the apps (the launcher loads them when a run asks).
    plan_app: str = ""
    gate_checks: str = ""
    # Its report page: ``report.md.j2`` in its package, else the engine's default page.
    report_template: Path | None = None
    snapshot_tables: tuple[str, ...] = ()  # snapshot tables it reads beyond the base ones
    # A Spark app that applies its plans (the DAG runs it as a Spark step); None: ``apply`` below, in the task.
    apply_app: str | None = None
    options: tuple[RunOption, ...] = ()
    # Trigger-form params that are not run options (what ``before_snapshot`` records): name -> {"default", ...}.
    form_params: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    settings: tuple[Setting, ...] = ()  # deployment settings only it reads
    fault_points: tuple[str, ...] = ()  # where its apply can be killed in tests (housekeeping.engine.faults)
    # Policies a what-if sweep varies for it (``housekeeping.what_if.sweep.KNOBS``); its plan app then defines
    # ``sweep_points(spark, run_dirs)``: per point, per namespace bytesFreed, bytesKept and its counts.
    sweeps: tuple[str, ...] = ()
    # Its plan follows namespace/topic policies, so a policy what-if applies to it (key erasure follows requests).
    policy_driven: bool = True
    # Its apply's re-check (``recheck``) reads every planned topic's cursors: read for a batch of topics in one
    # statement instead of one per topic.
    recheck_reads_cursors: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "plan_app", self.plan_app or f"spark_apps.{self.name}.plan")
        object.__setattr__(self, "gate_checks", self.gate_checks or f"spark_apps.{self.name}.gate")
        if self.report_template is None:
            folder = self.package_dir
            own = folder / "report.md.j2" if folder is not None else None
            object.__setattr__(
                self,
                "report_template",
                own if own is not None and own.is_file() else ENGINE_TEMPLATES / "report.md.j2",
            )
        ids = [self.task_ids.plan, self.task_ids.validate, self.task_ids.apply, self.task_ids.report]
        if len(set(ids)) != len(ids) or "take_snapshot" in ids or "purge_pending_deletions" in ids:
            raise ValueError(
                f"mechanism {self.name}: task ids must be distinct from each other and the common ones"
            )
        unknown = [t for t in self.snapshot_tables if t not in SNAPSHOT_TABLES]
        if unknown:
            raise ValueError(f"mechanism {self.name}: no snapshot table {', '.join(unknown)}")
        if not self.actions:
            raise ValueError(f"mechanism {self.name}: a mechanism plans at least one kind of action")
        names = [kind.name for kind in self.actions]
        if len(set(names)) != len(names):
            raise ValueError(f"mechanism {self.name}: an action kind is listed twice ({names})")

    # --- what it is -----------------------------------------------------------------------------------------
    @property
    def action_names(self) -> tuple[str, ...]:
        return tuple(kind.name for kind in self.actions)

    def action(self, name: str, where: str = "the plan") -> ActionKind:
        """Its action kind ``name``; any other is bad input (a plan it never makes)."""
        for kind in self.actions:
            if kind.name == name:
                return kind
        raise InputError(
            f"{where} has a {name} action, which {self.name} never plans (its actions: "
            f"{', '.join(self.action_names)})"
        )

    @property
    def all_snapshot_tables(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys([*BASE_SNAPSHOT_TABLES, *self.snapshot_tables]))

    @property
    def template_dirs(self) -> tuple[Path, ...]:
        """Where its report template and what it includes are found (its own folder first)."""
        return (self.report_template.parent, ENGINE_TEMPLATES)

    # --- what it does differently (override) -----------------------------------------------------------------
    @property
    def package(self) -> str:
        """Its package in the library, by convention."""
        return f"housekeeping.mechanisms.{self.name}"

    @property
    def package_dir(self) -> Path | None:
        """Its package's folder (None: a mechanism declared outside a package of its own)."""
        try:
            spec = importlib.util.find_spec(self.package)
        except ModuleNotFoundError:
            return None
        return Path(spec.origin).parent if spec is not None and spec.origin else None

    @property
    def report_module(self) -> str:
        """Where its report is built, by convention: ``build_report(run_dir, *, dry_run)`` of the ``report`` module
        of its package (imported when a report is written, not when the DAGs are parsed)."""
        return f"{self.package}.report"

    @property
    def has_own_report(self) -> bool:
        """Its package has a report module; else the engine's default report is written
        (``housekeeping.engine.report.plan_report``)."""
        return self.package_dir is not None and (self.package_dir / "report.py").is_file()

    def build_report(self, run_dir: Path, *, dry_run: bool) -> dict[str, Any]:
        """The report's data (``report/report.json``), from the run directory: its report module's."""
        return importlib.import_module(self.report_module).build_report(run_dir, dry_run=dry_run)

    def report_notifiers(self) -> tuple[Any, ...]:
        """Airflow notifiers run after its report task succeeds (alerts that must not fail the run); built
        lazily, they are Airflow objects and the mechanism is read outside Airflow too."""
        return ()

    def before_snapshot(self, store: Store, params: Mapping[str, Any], as_of_ms: int, actor: str) -> None:
        """What the run's trigger form asks of the store before the snapshot reads it; idempotent (a retried
        snapshot task calls it again)."""

    def after_snapshot(self, store: Store, run_dir: Path, request: Any) -> None:
        """What it reads beyond the metadata tables, once they are written (the store scrub lists the storage
        here, after the metadata read, so nothing written since looks missing). ``request``: the run's
        ``housekeeping.engine.request.RunRequest`` (not named here: that module stands on this one)."""

    def metric_samples(self, store: Store, as_of_ms: int) -> list[tuple[str, str, float]]:
        """Gauges of its own for ``housekeeping metrics``: (name, help, value), read from the store at ``as_of_ms``
        (the store scrub's latest figures)."""
        return []

    def purge_grace_seconds(self, settings: Settings) -> int:
        """How long the files its apply replaced wait before purge."""
        return settings.purge_grace_seconds

    def apply(
        self, store: Store, run_dir: Path, *, purge_grace_seconds: int, spark_master: str | None = None
    ) -> dict[str, Any]:
        """Apply a checked plan (the CLI's and the DAG's apply step; an ``apply_app`` mechanism's DAG runs the
        Spark app instead). Default: the shared Python apply, each action by its kind."""
        from housekeeping.engine.apply import apply_plan

        return apply_plan(store, run_dir, self, purge_grace_seconds=purge_grace_seconds).to_json()

    def command_group(self) -> tuple[str, Any] | None:
        """Its own ``housekeeping`` command group (name, Typer app), if it has one."""
        return None

    def recheck(self, now: TopicNow, then: TopicThen, rows: list[dict[str, Any]], as_of_ms: int) -> Narrowed:
        """Its planned rows of one topic as the store now allows them: apply asks, in the topic's transaction, once
        the topic is known to be the snapshot's (not gone, not created again; ``housekeeping.engine.live``). The
        same rows, fewer or narrower ones, or none, never more; ``why`` names what changed. Default: a topic whose
        policies in force changed since the snapshot is left alone, its decision having read them."""
        if now.document != then.document:
            return Narrowed.nothing(
                f"the policies in force changed since the snapshot ({policy_changes(then, now)})"
            )
        return Narrowed.as_planned(rows)


def mechanism_sequence(value: Sequence[Mechanism]) -> dict[str, Mechanism]:
    """Mechanisms by name, refusing two of one name."""
    by_name: dict[str, Mechanism] = {}
    for mechanism in value:
        if mechanism.name in by_name:
            raise ValueError(f"two mechanisms are called {mechanism.name}")
        by_name[mechanism.name] = mechanism
    return by_name
