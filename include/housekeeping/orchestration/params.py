"""The DAGs' trigger forms (Airflow Params, a JSON schema each): every housekeeping DAG's common params plus its
mechanism's own, and the policy_what_if DAG's. Built when the DAG is built; nothing here reads settings."""

from __future__ import annotations

from typing import Any

from housekeeping.engine.mechanism import Mechanism

# What the form accepts as an as-of: ISO 8601 with a timezone (``Z`` or an offset), as ``parse_as_of`` requires; the
# form refuses the rest before a run exists.
AS_OF_PATTERN = r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?(Z|[+-]\d{2}:\d{2})$"


def scope_param() -> Any:
    """The scope param of every DAG that reads topics."""
    from airflow.sdk import Param

    # Nullable: the UI trigger form treats a plain "string" param as required and refuses an empty one.
    from housekeeping.core.scope import SCOPE_PATTERN

    return Param(
        None,
        type=["null", "string"],
        pattern=SCOPE_PATTERN,
        title="Scope",
        description="Comma-separated globs: a tenant (acme), a namespace (acme/orders) or topics "
        "(persistent://acme/orders/*). Empty = all topics.",
    )


def housekeeping_params(spec: Mechanism) -> dict[str, Any]:
    """The trigger form (JSON schema per param): the common params, then the mechanism's run options
    (``Mechanism.options``: default None, the setting applies) and its other form params
    (``Mechanism.form_params``: name -> {"default": ..., JSON-schema keywords}). Scheduled runs get these safe
    defaults."""
    from airflow.sdk import Param

    return {
        "dry_run": Param(
            False,
            type="boolean",
            title="Dry run",
            description="On: plan, gate and report only; nothing is applied or purged. OFF (the default): this run "
            "APPLIES its checked plan (deletes ledgers and topics, restorable until purge, and moves cursors) and "
            "purges what is past its grace period, after a person's approval where the deployment asks for one. "
            '"Unpause on trigger" also starts this DAG\'s schedule: the scheduled run Airflow then creates at once '
            "for a past slot is a dry run too (it starts late), and the next scheduled run applies.",
        ),
        "scope": scope_param(),
        "as_of": Param(
            None,
            type=["null", "string"],
            pattern=AS_OF_PATTERN,
            title="As of (UTC)",
            description="Logical 'now' for the decisions, ISO 8601 with timezone (2026-11-01T00:00:00Z). Empty = "
            "the run's data interval end (scheduled/backfill) or its run time (manual). A run that applies refuses "
            "an as-of later than the clock; a dry run may look ahead.",
        ),
        "max_deleted_share": Param(
            None,
            type=["null", "number"],
            minimum=0,
            maximum=1,
            title="Blast-radius override",
            description="Max share of a namespace's stored bytes this run may delete "
            "(empty = HOUSEKEEPING_MAX_DELETED_SHARE, default 0.9).",
        ),
        # Approval thresholds (housekeeping.engine.approval): a run may only tighten the deployment's settings.
        "approval_bytes": Param(
            None,
            type=["null", "integer"],
            minimum=0,
            title="Approval above bytes",
            description="Ask a person before applying a plan that deletes more bytes than this "
            "(empty = HOUSEKEEPING_APPROVAL_BYTES; can only lower it).",
        ),
        "approval_namespace_share": Param(
            None,
            type=["null", "number"],
            minimum=0,
            maximum=1,
            title="Approval above namespace share",
            description="... that deletes more than this share of one namespace's stored bytes "
            "(empty = HOUSEKEEPING_APPROVAL_NAMESPACE_SHARE; can only lower it).",
        ),
        "approval_topics": Param(
            None,
            type=["null", "integer"],
            minimum=0,
            title="Approval above topics deleted",
            description="... that deletes more topics (empty = HOUSEKEEPING_APPROVAL_TOPICS; can only lower it).",
        ),
        "approval_cursors": Param(
            None,
            type=["null", "integer"],
            minimum=0,
            title="Approval above cursors moved",
            description="... that moves more cursors (empty = HOUSEKEEPING_APPROVAL_CURSORS; can only lower it).",
        ),
        **{option.name: Param(None, **option.param) for option in spec.options},
        **{
            name: Param(definition.get("default"), **{k: v for k, v in definition.items() if k != "default"})
            for name, definition in spec.form_params.items()
        },
    }


def what_if_params() -> dict[str, Any]:
    """The policy_what_if trigger form."""
    from airflow.sdk import Param

    from housekeeping.mechanisms.registry import what_if_mechanisms
    from housekeeping.what_if.sweep import KNOBS

    return {
        "mechanism": Param(
            "trim",
            type="string",
            enum=[*what_if_mechanisms(), "all"],
            title="Mechanism",
            description="The mechanism whose plan the change would alter, or all of them (a sweep: the "
            "mechanism of its policy).",
        ),
        "policies": Param(
            {},
            type="object",
            title="Policy overlay",
            description='Policies in the manifest\'s shape: {"broker": {...}, "namespaces": {"acme/orders": '
            '{"retention_policies": {"retentionTimeInMinutes": 4320, "retentionSizeInMB": 5120}}}, "topics": '
            '{"persistent://...": {"policies": {...}}}}; null removes a policy. May be empty with a sweep.',
        ),
        "as_of": Param(
            None,
            type=["null", "string"],
            pattern=AS_OF_PATTERN,
            title="As of (UTC)",
            description="Logical 'now' for the decisions, ISO 8601 with timezone. Empty = the run's time.",
        ),
        "sweep": Param(
            None,
            type=["null", "string"],
            pattern=f"^({'|'.join(KNOBS)})=[^=]+$",
            title="Sweep",
            description="One policy at several values, e.g. retention-time=1h,6h,1d,3d,7d (or retention-size="
            "1G,5G,-1, ttl=1h,1d, offload-threshold=0,1G,-1, offload-deletion-lag=0,4h,-1): per namespace at each "
            "value the bytes freed and kept (for the offload policies the local bytes left), set in every "
            "namespace in scope.",
        ),
        "scope": scope_param(),
    }


def capacity_params() -> dict[str, Any]:
    """The capacity_report DAG's trigger form."""
    from airflow.sdk import Param

    return {
        "as_of": Param(
            None,
            type=["null", "string"],
            pattern=AS_OF_PATTERN,
            title="As of (UTC)",
            description="The report's 'now' (the chargeback covers the day before it), ISO 8601 with timezone. "
            "Empty = the run's logical date (scheduled runs, backfills) or its run time (manual).",
        ),
        "horizon": Param(
            "30d",
            type="string",
            pattern=r"^\d+[smhdwy]?$",
            title="Forecast horizon",
            description="How far the forecast looks (1h to 5y): a number with s, m, h, d, w or y.",
        ),
    }
