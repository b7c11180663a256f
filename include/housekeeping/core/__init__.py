"""Core: pure values and rules every other room stands on (names, policies, positions, logical time, errors, settings). Imports nothing else of the library."""
