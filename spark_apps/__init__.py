"""PySpark applications: one folder per mechanism (``trim``, ``expiry``, ``backlog``, ``gc``, ``compaction``,
``erasure``, ``offload``, ``scrub``), each with its planner (``plan.py``) and its gate checks (``gate.py``) and, for
compaction, its apply; ``shared`` holds what two mechanisms use (sessions, I/O, positions, holds, the plan and gate
skeletons, the per-topic pass, the cursor rules and cursor-move checks); ``validate_plan`` is the quality gate's app,
``sweep`` and ``what_if`` the policy what-if's, ``submit`` the entry point spark-submit runs. The apps stand on the
library (``housekeeping``: the contract, the registry, policies, the apply engine); the library reaches them through
``housekeeping.engine.launcher`` only."""
