"""Empty-ledger unlisting (the ninth mechanism of tests/housekeeping/mechanisms/test_a_new_mechanism.py): planner
and gate checks."""
