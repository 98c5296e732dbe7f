"""The page path, one module per step:

1. ``events``: what producers report (a run failed, timed out, was late; a circuit opened; the dispatcher
   stalled; and the successes that resolve them);
2. ``rules``: which incident an event opens or resolves, whom it pages and when (pure);
3. ``incidents``: the escalation handler's work: the incident written with its pages as an outbox, the pages
   queued, the outbox cleared;
4. ``delivery``: the pages handler's work: each page sent to its topic or webhook (``signing`` signs webhook
   bodies), retried with backoff, and sent to the deployment's topic when its own channel keeps failing.
"""
