"""One module per mechanism: its :class:`~housekeeping.mechanism.MechanismSpec` (``SPEC``) and report builder.
``housekeeping.registry`` lists them; docs/architecture.md says how to add one."""
