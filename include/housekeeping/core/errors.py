"""Error types. Every error that reaches a user names the offending topic, namespace or file."""

from __future__ import annotations


class HousekeepingError(Exception):
    """Base class; the CLI maps subclasses to exit codes."""

    exit_code = 1


class InputError(HousekeepingError):
    """Bad input (manifest, policy, parameter, store contents). Raised before anything changes."""

    exit_code = 2


class StoreUnavailable(InputError):
    """The store's metadata database cannot be reached, or stayed locked past the lock timeout: the transaction
    rolled back, nothing changed. The command line answers it as bad input naming the database (exit 2, as it always
    has); a DAG task retries it, since the same request may succeed once the database is back (a restart, a
    fail-over), where bad input never would."""


class NotFound(InputError):
    """A named thing is not in the store (a run, a pending deletion): bad input that names what is missing."""


class GateRejected(HousekeepingError):
    """The quality gate refused a plan: nothing was applied."""

    exit_code = 3


class PlanNotValidated(HousekeepingError):
    """Apply was asked to run a plan the gate did not pass (or that changed after the gate)."""

    exit_code = 3


class PathOutsideStore(HousekeepingError):
    """A file operation addressed a path outside the store root."""

    exit_code = 4
