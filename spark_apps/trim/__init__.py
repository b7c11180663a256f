"""Consumed-ledger trim (Pulsar ``ManagedLedgerImpl#internalTrimLedgers``): planner and gate checks."""
