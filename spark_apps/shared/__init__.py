"""What two or more mechanisms share: sessions, I/O through the contract, positions, holds, name facts, the
cursor rules of expiry and backlog and the gate checks of their cursor moves."""
