"""Sessions: one run's events, from its workers to whoever consumes them.

- :mod:`.contract` — the :class:`~.contract.Session` protocol every consumer drives (the headless
  drivers, the recorder, the Textual viewer) and :class:`~.contract.RunOutcome`, how a run ended.
- :mod:`.intake` — every event of a session passes through it once: counted, watched for hangs,
  fingerprinted for mismatches, written to the trace, queued for the consumer.
- :mod:`.local` — :class:`~.local.LocalSession`: forks the workers on this machine, with
  :mod:`.rank_output` (each rank's stdout and stderr: its log file and the terminal).
- :mod:`.listening` — :class:`~.listening.RemoteSession`: listens for workers someone else started
  (torchrun), with :mod:`.access` (the shared secret and the listen address).
- :mod:`.live` — :class:`~.live.LiveSession`: a running job read live by any reader of
  :mod:`collviz.runtime.live` (``collviz attach``, ``collviz replay --follow``).
- :mod:`.recorder_live` and :mod:`.recorded` — a local run of a user's script read from its ranks'
  Flight Recorders (live, through the same loop, then from their dumps).
- :mod:`.headless` — drives a session without a screen: summary, bench table, silent collection.

Nothing is imported here, so that a local run never pays for the listening side (nor the reverse).
"""
