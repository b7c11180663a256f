"""PySpark applications: one folder per mechanism (``trim``, ``expiry``, ``backlog``, ``gc``, ``compaction``), each
with its planner (``plan.py``: parse_args/main/run plus pure DataFrame transforms), its gate checks (``gate.py``)
and, for compaction, its apply; ``shared`` holds what two mechanisms use (sessions, I/O, positions, holds, the
cursor rules and cursor-move checks); ``validate_plan`` is the quality gate's app, ``submit`` the entry point
spark-submit runs. The apps stand on the library (``housekeeping``: the contract, the registry, policies, the apply
engine); the library reaches them through ``housekeeping.engine.launcher`` only."""
