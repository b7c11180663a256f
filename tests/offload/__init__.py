"""Tests of ledger offload (tiered storage)."""
