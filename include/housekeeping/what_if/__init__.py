"""Policy what-if: overlays, the current-vs-candidate comparison, sweeps and their report."""
