"""Events read for a few of their fields: a stored trace's decoded into a thin struct of those
fields alone (:meth:`~collviz.runtime.wire.stored.StoredEvents.thin`), a live log's as they are.

A first visit of a 64-rank step reads hundreds of events of which it needs a handful of fields
(the cost pane: each rank's bytes and time of the step's latest calls); decoded whole from the file
each costs three times as much, and none is shown as an event.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from collviz.runtime.wire.protocol import AnyEvent
from collviz.runtime.wire.stored import StoredEvents

__all__ = ["read_thin", "read_events"]


def read_thin(store: Sequence[AnyEvent], positions: Sequence[int], thin_type: Any) -> Sequence[Any]:
    """The events of ``store`` at ``positions``, each with at least the fields of ``thin_type``
    (a :func:`~collviz.runtime.wire.protocol.thin_event_type` of their kind, a ``Union`` of such
    for events of several kinds, or the kind itself: whole events, decoded together and not kept
    in the store's cache): decoded from a stored trace, the events themselves from a list. A
    position must hold an event filed as itself: a live log's ``CallRanks`` is read per rank
    through its series (:attr:`~.log.Series.holds_grouped`), never here."""
    if isinstance(store, StoredEvents):
        return store.thin(positions, thin_type)
    return [store[position] for position in positions]


def read_events(store: Sequence[AnyEvent], positions: Sequence[int]) -> Sequence[AnyEvent]:
    """The events of ``store`` at ``positions``, whole, as indexing gives them: a stored trace's
    not yet cached read and decoded together (:meth:`~collviz.runtime.wire.stored.StoredEvents.many`:
    a first visit of a 64-rank step reads every rank's latest Buffer), a list's as they are. As
    :func:`read_thin`, never a live log's ``CallRanks``."""
    if isinstance(store, StoredEvents):
        return store.many(positions)
    return [store[position] for position in positions]
