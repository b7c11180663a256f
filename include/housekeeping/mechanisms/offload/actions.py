"""``offload_ledger``: ledger offload's action (Pulsar ``ManagedLedgerImpl#offloadLoop``). A closed ledger's entries
are copied to the object tier under a fresh attempt UUID, read back and compared, then recorded complete with a
compare-and-set on that UUID. Nothing is deleted and no cursor moves (Pulsar: offload never changes a cursor); the
local copy goes later, by trim's ``delete_local_copy`` once the offload-deletion lag has passed. Applied by the
mechanism's own apply (``housekeeping.mechanisms.offload.apply``): the upload runs between two transactions."""

from __future__ import annotations

from housekeeping.engine.actions import ActionKind, Changes

# A hold forbids deleting, rewriting and cursor moves; a copy to the tier destroys nothing, so a held topic is
# still offloaded (its local copy then stays: delete_local_copy is forbidden under a hold).
OFFLOAD_LEDGER = ActionKind(
    "offload_ledger",
    "a closed ledger copied to the object tier under a new attempt UUID, read back, then recorded complete",
    Changes.FILES,
    held_forbidden=False,
)
