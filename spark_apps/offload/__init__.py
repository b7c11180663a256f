"""Ledger offload (Pulsar ``ManagedLedgerImpl#maybeOffload``): planner and gate checks."""
