"""A DAG task's path as stage rooms: ``turn`` (what the stages share), ``readiness`` and ``inputs`` (verdicts),
``recording`` and ``run_end`` (writes), ``ends`` (ends from outside), and ``conductor`` (the order)."""
