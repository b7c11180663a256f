"""Inactive-topic GC (Pulsar ``PersistentTopic#checkGC``): planner and gate checks."""
