"""The JSON documents one step of a run hands the next, as types: the run's facts (``snapshot/run.json``), the plan
summary, the gate's verdict, the approval's request and decision, and what apply and purge did. Each is written
with its ``schemaVersion`` and read back here only, by :func:`read_document`, which migrates a document an earlier
version wrote (a run directory kept from before, an approval waiting across an upgrade) one version at a time:
readers see the current type and never branch on a run's age.

A document written by a newer version than this one is refused with its path (rather than read as something it
is not). Version 1 is every document written before versions were recorded (it has no ``schemaVersion``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from housekeeping.core.errors import InputError
from housekeeping.core.timeutil import format_ms
from housekeeping.engine.run_dir import RunDir, read_json, write_json

SCHEMA_KEY = "schemaVersion"

D = TypeVar("D", bound="Document")
Migration = Callable[[dict[str, Any]], dict[str, Any]]


class Document:
    """A run-directory document: its kind (the migrations' key), its current version, its JSON both ways."""

    KIND: ClassVar[str]
    VERSION: ClassVar[int]

    def as_json(self) -> dict[str, Any]:
        raise NotImplementedError

    @classmethod
    def from_json(cls: type[D], document: Mapping[str, Any]) -> D:
        raise NotImplementedError


# (kind, version) -> the function that turns that version's JSON into the next version's.
MIGRATIONS: dict[tuple[str, int], Migration] = {}


def migration(kind: str, from_version: int) -> Callable[[Migration], Migration]:
    def register(function: Migration) -> Migration:
        MIGRATIONS[(kind, from_version)] = function
        return function

    return register


def migrate(cls: type[Document], document: Mapping[str, Any], where: Path | str) -> dict[str, Any]:
    """``document`` brought to ``cls``'s current version, one registered step at a time."""
    migrated = dict(document)
    version = int(migrated.pop(SCHEMA_KEY, 1))
    if version > cls.VERSION:
        raise InputError(
            f"{where}: a {cls.KIND} document of schema version {version}, newer than this housekeeping reads "
            f"({cls.VERSION}); upgrade housekeeping to read it"
        )
    while version < cls.VERSION:
        step = MIGRATIONS.get((cls.KIND, version))
        if step is None:
            raise InputError(f"{where}: no migration of a {cls.KIND} document from schema version {version}")
        migrated = step(migrated)
        version += 1
    return migrated


def document_json(document: Document) -> dict[str, Any]:
    """``document`` as written: its JSON with its schema version."""
    return {**document.as_json(), SCHEMA_KEY: document.VERSION}


def write_document(path: Path, document: Document) -> None:
    write_json(path, document_json(document))


def read_document(cls: type[D], path: Path) -> D | None:
    """The document at ``path`` as ``cls`` (migrated from the version that wrote it); None: there is none."""
    raw = read_json(path)
    if raw is None:
        return None
    try:
        return cls.from_json(migrate(cls, raw, path))
    except KeyError as missing:
        raise InputError(f"{path}: a {cls.KIND} document without {missing}") from None
    except ValueError as bad:  # a value outside its type (an intent no version wrote)
        raise InputError(f"{path}: a {cls.KIND} document with a bad value: {bad}") from None


def require_document(cls: type[D], path: Path, missing: str) -> D:
    """As :func:`read_document`; a missing document is bad input saying ``missing``."""
    found = read_document(cls, path)
    if found is None:
        raise InputError(missing)
    return found


# --- snapshot/run.json ------------------------------------------------------------------------------------------


class Intent(StrEnum):
    """What a run was started to do, recorded at its snapshot: only an ``apply`` run may change the store (apply
    refuses the others), and the console tells a dry run, a preview and a plan apart by it."""

    APPLY = "apply"  # plan, gate, approval, apply and purge
    DRY_RUN = "dry_run"  # asked for: plan, gate and report only
    PREVIEW = (
        "preview"  # a scheduled run that started late: a dry run whatever its form said (``preview_reason``)
    )
    PLAN = "plan"  # the CLI's plan command
    WHAT_IF = "what_if"  # a what-if's or sweep's plans under a policy overlay


@dataclass(frozen=True)
class RunInfo(Document):
    """The run's facts, written by the snapshot and read by every later step: what was asked (mechanism, as-of,
    scope, blast radius, the run options), of which store, with which broker settings, and where the snapshot's
    files and ledgers are."""

    KIND: ClassVar[str] = "run"
    VERSION: ClassVar[int] = 3

    run_id: str
    mechanism: str
    as_of_ms: int
    scope: tuple[str, ...] = ()
    max_deleted_share: float = 0.9
    # Every registered run option by its run.json key (gc's maxDeletedTopicShare, compaction's compactTopics, ...).
    options: Mapping[str, Any] = field(default_factory=dict)
    schedule_interval_ms: int | None = None
    store: str = ""
    metadata: str = ""
    # The broker settings the mechanisms read (all of them, so a plan can be re-derived).
    broker: Mapping[str, Any] = field(default_factory=dict)
    taken_at_wall_clock_ms: int | None = None  # audit only; no rule reads it
    actor: str | None = None  # who started the run (journaled by apply)
    # The snapshot tables written; None: every table (runs before the snapshot chose).
    snapshot_tables: tuple[str, ...] | None = None
    # The row groups each table with a topic column is clustered into; 0: not clustered.
    snapshot_buckets: int = 0
    # Ledgers whose files key erasure rewrote: (topic, ledgerId, generation).
    file_generations: tuple[tuple[str, int, int], ...] = ()
    offload_tier: str | None = None
    offload_endpoint: str | None = None
    # Ledgers whose entries are only in the tier: (topic, ledgerId, attempt UUID).
    tier_ledgers: tuple[tuple[str, int, str], ...] = ()
    # Version 1 only: the topics' versions, before the snapshot's topics table carried them.
    legacy_topic_versions: Mapping[str, int] | None = None
    # What the run was started to do (None: not recorded, a run before version 3) and, for a preview, why.
    intent: Intent | None = None
    preview_reason: str | None = None

    _FIELDS: ClassVar[dict[str, str]] = {
        "runId": "run_id",
        "mechanism": "mechanism",
        "asOfMs": "as_of_ms",
        "scope": "scope",
        "maxDeletedShare": "max_deleted_share",
        "scheduleIntervalMs": "schedule_interval_ms",
        "store": "store",
        "metadata": "metadata",
        "broker": "broker",
        "takenAtWallClockMs": "taken_at_wall_clock_ms",
        "actor": "actor",
        "snapshotTables": "snapshot_tables",
        "snapshotBuckets": "snapshot_buckets",
        "fileGenerations": "file_generations",
        "offloadTier": "offload_tier",
        "offloadEndpoint": "offload_endpoint",
        "tierLedgers": "tier_ledgers",
        "intent": "intent",
        "previewReason": "preview_reason",
    }
    # Written for people reading the file; derived, never read back.
    _DERIVED: ClassVar[frozenset[str]] = frozenset({"asOf"})

    @property
    def as_of(self) -> str:
        return format_ms(self.as_of_ms)

    def option(self, key: str, default: Any = None) -> Any:
        """A run option's value by its run.json key; ``default`` when the run did not record it."""
        return self.options.get(key, default)

    @property
    def applies(self) -> bool:
        """Whether the run was started to change the store (a run from before intents were recorded: yes, as it
        was then read)."""
        return self.intent in (None, Intent.APPLY)

    def as_json(self) -> dict[str, Any]:
        values = {key: getattr(self, name) for key, name in self._FIELDS.items()}
        values["scope"] = list(self.scope)
        values["snapshotTables"] = list(self.snapshot_tables) if self.snapshot_tables is not None else None
        values["fileGenerations"] = [list(row) for row in self.file_generations]
        values["tierLedgers"] = [list(row) for row in self.tier_ledgers]
        values["broker"] = dict(self.broker)
        return {**self.options, **values, "asOf": self.as_of}

    @classmethod
    def from_json(cls, document: Mapping[str, Any]) -> RunInfo:
        known = {name: document[key] for key, name in cls._FIELDS.items() if key in document}
        options = {
            key: value
            for key, value in document.items()
            if key not in cls._FIELDS and key not in cls._DERIVED and key != "topicVersions"
        }
        tables = known.get("snapshot_tables")
        return cls(
            **{
                **known,
                "scope": tuple(known.get("scope") or ()),
                "snapshot_tables": tuple(tables) if tables is not None else None,
                "snapshot_buckets": int(known.get("snapshot_buckets") or 0),
                "file_generations": tuple(
                    (str(t), int(ledger), int(gen)) for t, ledger, gen in known.get("file_generations") or ()
                ),
                "tier_ledgers": tuple(
                    (str(t), int(ledger), str(u)) for t, ledger, u in known.get("tier_ledgers") or ()
                ),
                "broker": dict(known.get("broker") or {}),
                "intent": Intent(known["intent"]) if known.get("intent") is not None else None,
            },
            options=options,
            legacy_topic_versions=(
                {str(k): int(v) for k, v in document["topicVersions"].items()}
                if document.get("topicVersions") is not None
                else None
            ),
        )


@migration("run", 1)
def _run_v1(document: dict[str, Any]) -> dict[str, Any]:
    """Version 1 had no ``schemaVersion``; its optional keys (absent from the oldest runs) are read with their
    defaults, so the step only keeps what it had. ``topicVersions`` stays: it is read as ``legacy_topic_versions``
    (version 2 never writes it: the snapshot's topics table has the versions)."""
    return document


@migration("run", 2)
def _run_v2(document: dict[str, Any]) -> dict[str, Any]:
    """Version 2 did not record the run's intent: it reads as None (not known), which apply takes as version 2 did:
    the DAG's dry run never reached apply (its task is skipped), the CLI's plan has no apply step."""
    return document


def read_run_info(run_dir: str | Path | RunDir) -> RunInfo:
    """``snapshot/run.json`` of ``run_dir``; a run directory without one is bad input naming it."""
    path = RunDir(run_dir).run_info
    return require_document(RunInfo, path, f"run directory {run_dir} has no snapshot ({path} is missing)")


# --- plan/summary.json ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlanSummary(Document):
    """Which plan (mechanism, run, as-of) and the mechanism's figures, which the gate reconciles with the plan
    tables and the report shows (the figures are the mechanism's own: its plan app names them)."""

    KIND: ClassVar[str] = "plan-summary"
    VERSION: ClassVar[int] = 2

    mechanism: str
    run_id: str
    as_of_ms: int
    figures: Mapping[str, Any] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {**self.figures, "mechanism": self.mechanism, "runId": self.run_id, "asOfMs": self.as_of_ms}

    @classmethod
    def from_json(cls, document: Mapping[str, Any]) -> PlanSummary:
        envelope = ("mechanism", "runId", "asOfMs")
        return cls(
            document["mechanism"],
            document["runId"],
            int(document["asOfMs"]),
            {k: v for k, v in document.items() if k not in envelope},
        )

    def __getitem__(self, key: str) -> Any:
        """A figure by its name (the reports read them as the summary's JSON names them)."""
        return self.figures[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.figures.get(key, default)


@migration("plan-summary", 1)
def _plan_summary_v1(document: dict[str, Any]) -> dict[str, Any]:
    return document  # the same keys


# --- gate/result.json -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """One expectation's outcome on one checked frame."""

    frame: str
    expectation: str
    kwargs: Mapping[str, Any]
    success: bool
    rows: int
    unexpected_count: int
    unexpected_sample: tuple[Any, ...] = ()
    observed: Any = None

    def as_json(self) -> dict[str, Any]:
        return {
            "frame": self.frame,
            "expectation": self.expectation,
            "kwargs": dict(self.kwargs),
            "success": self.success,
            "rows": self.rows,
            "unexpectedCount": self.unexpected_count,
            "unexpectedSample": list(self.unexpected_sample),
            "observed": self.observed,
        }

    @classmethod
    def from_json(cls, document: Mapping[str, Any]) -> Outcome:
        return cls(
            document["frame"],
            document["expectation"],
            dict(document.get("kwargs") or {}),
            bool(document["success"]),
            int(document.get("rows") or 0),
            int(document.get("unexpectedCount") or 0),
            tuple(document.get("unexpectedSample") or ()),
            document.get("observed"),
        )

    def describe(self) -> str:
        column = self.kwargs.get("column") or self.kwargs.get("column_list")
        return (
            f"  {self.frame}: {self.expectation}({column}) failed on {self.unexpected_count} of {self.rows} rows; "
            f"sample {list(self.unexpected_sample[:3])}"
        )


@dataclass(frozen=True)
class GateResult(Document):
    """The gate's verdict on one plan: every expectation's outcome, and the digest of the plan it read (apply
    requires the plan unchanged since)."""

    KIND: ClassVar[str] = "gate-result"
    VERSION: ClassVar[int] = 2

    mechanism: str
    success: bool
    plan_digest: str | None
    expectations: tuple[Outcome, ...] = ()

    @property
    def failed(self) -> tuple[Outcome, ...]:
        return tuple(o for o in self.expectations if not o.success)

    def describe_failures(self) -> str:
        return "\n".join(o.describe() for o in self.failed)

    def as_json(self) -> dict[str, Any]:
        outcomes = [o.as_json() for o in self.expectations]
        return {
            "mechanism": self.mechanism,
            "success": self.success,
            "planDigest": self.plan_digest,
            "expectations": outcomes,
            "failed": [o for o in outcomes if not o["success"]],
        }

    @classmethod
    def from_json(cls, document: Mapping[str, Any]) -> GateResult:
        return cls(
            document["mechanism"],
            bool(document["success"]),
            document.get("planDigest"),
            tuple(Outcome.from_json(o) for o in document.get("expectations") or ()),
        )


@migration("gate-result", 1)
def _gate_result_v1(document: dict[str, Any]) -> dict[str, Any]:
    return document  # the same keys; ``failed`` is derived


def read_gate_result(run_dir: str | Path | RunDir) -> GateResult | None:
    return read_document(GateResult, RunDir(run_dir).gate_result)


# --- approval/request.json and approval/decision.json -----------------------------------------------------------


@dataclass(frozen=True)
class ApprovalRequest(Document):
    """What the approval step measured and asked (``required`` False: the run went on without a person)."""

    KIND: ClassVar[str] = "approval-request"
    VERSION: ClassVar[int] = 2

    run_id: str
    mechanism: str
    as_of: str
    required: bool
    reasons: tuple[str, ...]
    thresholds: Mapping[str, Any]
    measures: Mapping[str, Any]
    purge: Mapping[str, int]
    data_docs: str | None
    plan_summary: str
    request_page: str | None

    def as_json(self) -> dict[str, Any]:
        return {
            "runId": self.run_id,
            "mechanism": self.mechanism,
            "asOf": self.as_of,
            "required": self.required,
            "reasons": list(self.reasons),
            "thresholds": dict(self.thresholds),
            "measures": dict(self.measures),
            "purge": dict(self.purge),
            "dataDocs": self.data_docs,
            "planSummary": self.plan_summary,
            "requestPage": self.request_page,
        }

    @classmethod
    def from_json(cls, document: Mapping[str, Any]) -> ApprovalRequest:
        return cls(
            document["runId"],
            document["mechanism"],
            document["asOf"],
            bool(document["required"]),
            tuple(document.get("reasons") or ()),
            dict(document.get("thresholds") or {}),
            dict(document.get("measures") or {}),
            {k: int(v) for k, v in (document.get("purge") or {}).items()},
            document.get("dataDocs"),
            document.get("planSummary") or "",
            document.get("requestPage"),
        )


@migration("approval-request", 1)
def _approval_request_v1(document: dict[str, Any]) -> dict[str, Any]:
    """Version 1 requests before the purge preview had no ``purge``: nothing was measured, nothing is due."""
    return {"purge": {"files": 0, "bytes": 0, "topics": 0}, **document}


@dataclass(frozen=True)
class ApprovalDecision(Document):
    """Who decided (or that nobody did before the timeout), when, on which reasons."""

    KIND: ClassVar[str] = "approval-decision"
    VERSION: ClassVar[int] = 2

    run_id: str
    mechanism: str
    decision: str
    decided_by: str
    decided_at_ms: int
    reasons: tuple[str, ...] = ()

    def as_json(self) -> dict[str, Any]:
        return {
            "runId": self.run_id,
            "mechanism": self.mechanism,
            "decision": self.decision,
            "decidedBy": self.decided_by,
            "decidedAt": format_ms(self.decided_at_ms),
            "decidedAtMs": self.decided_at_ms,
            "reasons": list(self.reasons),
        }

    @classmethod
    def from_json(cls, document: Mapping[str, Any]) -> ApprovalDecision:
        return cls(
            document["runId"],
            document["mechanism"],
            document["decision"],
            document["decidedBy"],
            int(document["decidedAtMs"]),
            tuple(document.get("reasons") or ()),
        )


@migration("approval-decision", 1)
def _approval_decision_v1(document: dict[str, Any]) -> dict[str, Any]:
    return document  # the same keys; ``decidedAt`` is derived


# --- apply/result.json and apply/purge.json ---------------------------------------------------------------------


@dataclass(frozen=True)
class AppliedRun(Document):
    """What apply did: the topics applied, already applied (a retry), skipped and narrowed (each with why), and
    the mechanism's own counts (its action kinds' ``result_keys``, or its own apply's)."""

    KIND: ClassVar[str] = "apply-result"
    VERSION: ClassVar[int] = 2

    run_id: str
    figures: Mapping[str, Any] = field(default_factory=dict)

    @property
    def applied_topics(self) -> tuple[str, ...]:
        return tuple(self.figures.get("appliedTopics") or ())

    @property
    def already_applied_topics(self) -> tuple[str, ...]:
        return tuple(self.figures.get("alreadyAppliedTopics") or ())

    @property
    def skipped_topics(self) -> Mapping[str, str]:
        return dict(self.figures.get("skippedTopics") or {})

    @property
    def narrowed_topics(self) -> Mapping[str, str]:
        return dict(self.figures.get("narrowedTopics") or {})

    def as_json(self) -> dict[str, Any]:
        return {**self.figures, "runId": self.run_id}

    @classmethod
    def from_json(cls, document: Mapping[str, Any]) -> AppliedRun:
        return cls(document["runId"], {k: v for k, v in document.items() if k != "runId"})


@migration("apply-result", 1)
def _apply_result_v1(document: dict[str, Any]) -> dict[str, Any]:
    return document  # the same keys


def read_applied_run(run_dir: str | Path | RunDir) -> AppliedRun | None:
    return read_document(AppliedRun, RunDir(run_dir).apply_result)


@dataclass(frozen=True)
class PurgedRun(Document):
    """What the run's purge did: the pending deletions purged, and those kept (held, retained, failed, refused)."""

    KIND: ClassVar[str] = "purge-result"
    VERSION: ClassVar[int] = 2

    purged: tuple[str, ...] = ()
    topics_purged: tuple[str, ...] = ()
    bytes_purged: int = 0
    waiting: int = 0
    next_purge_after_ms: int | None = None
    refused: tuple[str, ...] = ()
    held: tuple[str, ...] = ()
    failed: Mapping[str, str] = field(default_factory=dict)
    retained: Mapping[str, str] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {
            "held": list(self.held),
            "purged": list(self.purged),
            "topicsPurged": list(self.topics_purged),
            "bytesPurged": self.bytes_purged,
            "waiting": self.waiting,
            "nextPurgeAfterMs": self.next_purge_after_ms,
            "refused": list(self.refused),
            "failed": dict(self.failed),
            "retained": dict(self.retained),
        }

    @classmethod
    def from_json(cls, document: Mapping[str, Any]) -> PurgedRun:
        return cls(
            purged=tuple(document.get("purged") or ()),
            topics_purged=tuple(document.get("topicsPurged") or ()),
            bytes_purged=int(document.get("bytesPurged") or 0),
            waiting=int(document.get("waiting") or 0),
            next_purge_after_ms=document.get("nextPurgeAfterMs"),
            refused=tuple(document.get("refused") or ()),
            held=tuple(document.get("held") or ()),
            failed=dict(document.get("failed") or {}),
            retained=dict(document.get("retained") or {}),
        )


@migration("purge-result", 1)
def _purge_result_v1(document: dict[str, Any]) -> dict[str, Any]:
    """Version 1 results before holds and retention re-checks had no ``held``, ``failed`` or ``retained``: the
    defaults (none) say what those purges did."""
    return document


def read_purged_run(run_dir: str | Path | RunDir) -> PurgedRun | None:
    return read_document(PurgedRun, RunDir(run_dir).purge_result)


# --- failures/<step>.json ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StepFailure(Document):
    """Why a step of the run ended without doing its work, written when it ended so (the DAG's failure callback, a
    Spark app's last error): ``refused`` when the step refused its input (a future as-of, a bad param, a run not
    started to apply), else it failed. The console's Runs page gives this as the run's reason."""

    KIND: ClassVar[str] = "step-failure"
    VERSION: ClassVar[int] = 1

    step: str
    refused: bool
    message: str
    at_wall_clock_ms: int  # audit only

    def as_json(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "refused": self.refused,
            "message": self.message,
            "atWallClockMs": self.at_wall_clock_ms,
        }

    @classmethod
    def from_json(cls, document: Mapping[str, Any]) -> StepFailure:
        return cls(
            step=str(document["step"]),
            refused=bool(document["refused"]),
            message=str(document["message"]),
            at_wall_clock_ms=int(document["atWallClockMs"]),
        )


# The longest reason kept: a traceback's last line, not the traceback.
MAX_FAILURE_MESSAGE = 2000


def record_step_failure(
    run_dir: str | Path | RunDir, step: str, message: str, *, refused: bool, at_ms: int
) -> Path:
    """``failures/<step>.json`` of the run (the run directory is made when the step failed before the snapshot)."""
    path = RunDir(run_dir).step_failure(step)
    text = " ".join(str(message).split())
    write_document(path, StepFailure(step, refused, text[:MAX_FAILURE_MESSAGE], at_ms))
    return path


def read_step_failures(run_dir: str | Path | RunDir) -> tuple[StepFailure, ...]:
    """Every failure the run's steps recorded, oldest first."""
    folder = RunDir(run_dir).failures_dir
    found = (
        [read_document(StepFailure, path) for path in sorted(folder.glob("*.json"))]
        if folder.is_dir()
        else []
    )
    return tuple(sorted((f for f in found if f is not None), key=lambda f: (f.at_wall_clock_ms, f.step)))
