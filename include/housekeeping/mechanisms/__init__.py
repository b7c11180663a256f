"""One module per mechanism: its :class:`~housekeeping.engine.mechanism.Mechanism` (``SPEC``) and report builder.
``housekeeping.mechanisms.registry`` lists them; docs/architecture.md says how to add one."""
