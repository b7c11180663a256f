"""A run request: what one run of a mechanism is asked to do, built the same way by every front end (the CLI,
the DAG's snapshot task, a what-if) from the values it was given (``housekeeping.mechanisms.registry.build_request``),
and written into ``snapshot/run.json`` by the snapshot."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from housekeeping.engine.documents import Intent
from housekeeping.engine.mechanism import Mechanism, RunOption


@dataclass(frozen=True)
class RunRequest:
    mechanism: Mechanism
    run_id: str
    as_of_ms: int
    scope: tuple[str, ...] = ()
    # Blast radius: the largest share of a namespace's stored bytes one run may delete.
    max_deleted_share: float = 0.9
    # Every registered run option with the value this run uses (the mechanism's own, and the others' defaults:
    # run.json keeps one key per option whatever the mechanism).
    options: tuple[tuple[RunOption, Any], ...] = ()
    # The DAG's data interval (time between scheduled runs), for compaction's apache/pulsar#11211 warning.
    schedule_interval_ms: int | None = None
    actor: str | None = None  # who started the run (journaled by apply); None: this process's user
    # What the run was started to do: only an apply run may change the store. A preview says why.
    intent: Intent = Intent.APPLY
    preview_reason: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def option(self, name: str) -> Any:
        for option, value in self.options:
            if option.name == name:
                return value
        raise KeyError(f"run option {name} is not registered")

    def run_info_options(self) -> dict[str, Any]:
        """The options' keys and values in ``snapshot/run.json``."""
        return {option.run_info_key: value for option, value in self.options}
