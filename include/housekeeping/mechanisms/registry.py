"""The mechanism registry and the action catalogue: every mechanism by name, every action kind by name, every run
option, setting and fault point the mechanisms declare. Every dispatch reads it (the DAG factory, the CLI, the run
steps, the gate app, metrics); adding a mechanism adds its package and one line here (docs/architecture.md)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from housekeeping.core.errors import InputError
from housekeeping.core.scope import parse_scope
from housekeeping.core.settings import Setting, Settings
from housekeeping.engine.actions import ActionKind
from housekeeping.engine.documents import Intent
from housekeeping.engine.faults import FAULT_POINTS
from housekeeping.engine.mechanism import Mechanism, RunOption, mechanism_sequence
from housekeeping.engine.request import RunRequest
from housekeeping.mechanisms import backlog, compaction, erasure, expiry, gc, offload, scrub, trim

MECHANISMS: dict[str, Mechanism] = mechanism_sequence(
    [
        trim.MECHANISM,
        expiry.MECHANISM,
        backlog.MECHANISM,
        gc.MECHANISM,
        compaction.MECHANISM,
        erasure.MECHANISM,
        offload.MECHANISM,
        scrub.MECHANISM,
    ]
)


def mechanism_names() -> tuple[str, ...]:
    return tuple(MECHANISMS)


def what_if_mechanisms() -> tuple[str, ...]:
    """The mechanisms a policy what-if can run: those whose plans follow policies."""
    return tuple(name for name, mechanism in MECHANISMS.items() if mechanism.policy_driven)


def get_mechanism(name: str) -> Mechanism:
    """The mechanism ``name``; an unknown name is bad input naming the ones there are."""
    try:
        return MECHANISMS[name]
    except KeyError:
        raise InputError(f"unknown mechanism {name!r}: expected one of {', '.join(MECHANISMS)}") from None


@contextmanager
def registered(mechanism: Mechanism) -> Iterator[Mechanism]:
    """``mechanism`` registered for the block (a test's throw-away mechanism), as if listed above."""
    if mechanism.name in MECHANISMS:
        raise ValueError(f"a mechanism called {mechanism.name} is registered already")
    MECHANISMS[mechanism.name] = mechanism
    try:
        yield mechanism
    finally:
        del MECHANISMS[mechanism.name]


# --- the action catalogue ------------------------------------------------------------------------------------


def action_kinds() -> dict[str, ActionKind]:
    """Every action kind a registered mechanism plans, by name (one declaration each: a kind two mechanisms plan,
    ``move_cursor``, is the same object in both)."""
    kinds: dict[str, ActionKind] = {}
    for mechanism in MECHANISMS.values():
        for kind in mechanism.actions:
            if kinds.setdefault(kind.name, kind) is not kind:
                raise ValueError(f"action {kind.name} is declared twice ({mechanism.name} declares its own)")
    return kinds


def held_forbidden_actions() -> tuple[str, ...]:
    """The actions a hold forbids (the gate's hold check)."""
    return tuple(sorted(name for name, kind in action_kinds().items() if kind.held_forbidden))


# --- what the mechanisms declare ------------------------------------------------------------------------------


def run_options() -> tuple[RunOption, ...]:
    """Every mechanism's run options (their names, flags and run.json keys are unique)."""
    options: dict[str, RunOption] = {}
    for mechanism in MECHANISMS.values():
        for option in mechanism.options:
            for other in options.values():
                if {option.name, option.flag, option.run_info_key} & {
                    other.name,
                    other.flag,
                    other.run_info_key,
                }:
                    raise ValueError(
                        f"run option {option.name} of {mechanism.name} clashes with {other.name}"
                    )
            options[option.name] = option
    return tuple(options.values())


def mechanism_settings() -> tuple[Setting, ...]:
    """The settings the mechanisms read on their own (beyond ``housekeeping.core.settings.Settings``)."""
    return tuple(setting for mechanism in MECHANISMS.values() for setting in mechanism.settings)


def fault_points() -> tuple[str, ...]:
    """Every named fault point: the engine's and each mechanism's."""
    return (*FAULT_POINTS, *(point for mechanism in MECHANISMS.values() for point in mechanism.fault_points))


def build_request(
    mechanism: str | Mechanism,
    *,
    run_id: str,
    as_of_ms: int,
    settings: Settings | None = None,
    values: Mapping[str, Any] | None = None,
    scope: Any = None,
    schedule_interval_ms: int | None = None,
    actor: str | None = None,
    intent: Intent = Intent.APPLY,
    preview_reason: str | None = None,
) -> RunRequest:
    """The run request every front end builds the same way: ``values`` are what the person gave, by the names of
    the trigger form's params and the CLI's keywords (``max_deleted_share`` and every run option; None: not
    given); the settings give the rest. A value out of its bounds is bad input naming it."""
    spec = mechanism if isinstance(mechanism, Mechanism) else get_mechanism(mechanism)
    settings = settings or Settings.from_env()
    values = values or {}
    share = values.get("max_deleted_share")
    share = settings.max_deleted_share if share is None else float(share)
    if not 0.0 <= share <= 1.0:
        raise InputError(f"--max-deleted-share (max_deleted_share) must be between 0 and 1, got {share}")
    return RunRequest(
        mechanism=spec,
        run_id=run_id,
        as_of_ms=as_of_ms,
        scope=tuple(parse_scope(scope)),
        max_deleted_share=share,
        options=tuple((option, option.resolve(values.get(option.name))) for option in run_options()),
        schedule_interval_ms=schedule_interval_ms,
        actor=actor,
        intent=Intent(intent),
        preview_reason=preview_reason,
    )
