"""``housekeeping simulate``: a load generator that lives on a store as a cluster's clients and operators do
(producers, consumers, admins), through the store's client and admin paths only, never housekeeping's.

``workload`` declares what it does (the options, checked; Pulsar's ledger rollover rule; the ack profiles; the kinds
of operator change), ``log`` is the record it keeps of every entry published and every acknowledgement (what an
independent checker reads), and ``run`` is the loop that does it on a real or a simulated clock."""
