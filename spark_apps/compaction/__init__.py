"""Topic compaction with compacted-ledger retention (apache/pulsar #19665): planner, entry reads, gate checks
and the apply that writes the new compacted ledgers."""
