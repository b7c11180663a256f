"""Message expiry (TTL, Pulsar ``PersistentMessageExpiryMonitor``): planner and gate checks."""
