"""Messages in the search index: written on add, so a message is findable at once.

The table is written first (the truth), then the index. When the index write fails after the add
committed (or the process dies in between), the add is still accepted: its extraction job indexes
the messages unless the task says the add did (`messages_indexed`, set right after the index write),
and an add that extracts nothing keeps its open-task entry until they are indexed, which the
sweeper then does (services/sweep.py). Re-indexing is an upsert by message id: doing it twice is
harmless. `memlane fsck` and `memlane reindex` cover message documents too.
"""

from __future__ import annotations

import logging
from typing import Sequence

from ..domain.errors import MemlaneError
from ..domain.models import Message
from ..domain.records import message_document
from .deps import Deps

log = logging.getLogger(__name__)


def index(deps: Deps, store: str, messages: Sequence[Message]) -> None:
    if not messages:
        return
    vectors = deps.embedder.embed([m.content for m in messages])
    deps.index.upsert(store, [(message_document(m), v) for m, v in zip(messages, vectors)])


def index_after_add(deps: Deps, store: str, messages: Sequence[Message]) -> bool:
    """Index an accepted add's messages; False (logged) when the embedder or the index failed: the
    messages are safe in the table, and the add's job or the sweeper indexes them later."""
    try:
        index(deps, store, messages)
    except MemlaneError as error:
        log.warning("messages of an add not indexed yet (%s: %s); its job or the sweeper will index them",
                    error.code, error.message)
        return False
    return True
