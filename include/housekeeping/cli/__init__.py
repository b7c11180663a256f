"""The `housekeeping` command, one module per command group."""
