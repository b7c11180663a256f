"""What the store and its runs look like from outside: metrics, run figures, the storage report, the journal view."""
