"""Collective algorithms hop by hop: plans (pure data), their execution on real ranks, the program.

:mod:`.plans` says who sends what to whom in every hop; :mod:`.execute` runs one hop with
``batch_isend_irecv``, provenance travelling with the data; :mod:`.program` is the scenario
program behind ``--algo``.
"""
