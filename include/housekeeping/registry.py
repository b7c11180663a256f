"""The mechanism registry: every housekeeping mechanism's spec, by name. Every dispatch reads it (the DAG factory,
the CLI, the runner, the launcher, the gate app, the apply engine); adding a mechanism adds its modules and one
line here (docs/architecture.md)."""

from __future__ import annotations

from housekeeping.errors import InputError
from housekeeping.mechanism import MechanismSpec
from housekeeping.mechanisms import backlog, compaction, erasure, expiry, gc, trim

MECHANISMS: dict[str, MechanismSpec] = {
    spec.name: spec for spec in (trim.SPEC, expiry.SPEC, backlog.SPEC, gc.SPEC, compaction.SPEC, erasure.SPEC)
}


def mechanism_names() -> tuple[str, ...]:
    return tuple(MECHANISMS)


def what_if_mechanisms() -> tuple[str, ...]:
    """The mechanisms a policy what-if can run: those whose plans follow policies."""
    return tuple(name for name, spec in MECHANISMS.items() if spec.policy_driven)


def mechanism_spec(name: str) -> MechanismSpec:
    """The spec of ``name``; an unknown name is bad input naming the ones there are."""
    try:
        return MECHANISMS[name]
    except KeyError:
        raise InputError(f"unknown mechanism {name!r}: expected one of {', '.join(MECHANISMS)}") from None
