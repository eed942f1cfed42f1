"""The single-table key design, in one place. Maps domain models to table items and back.

Partitions (pk) and sort keys (sk):

    ~stores                       <store>                         the store catalog
    <store>#<app>#<tenant>        MSG#<agent>#<run>#<message_id>  messages (short-term memory)
    <store>#<app>#<tenant>        MEM#<memory_id>                 memory units
    <store>#<app>#<tenant>        TASK#<request_id>               extraction tasks
    <store>#<app>#<tenant>        SCOPE#<agent>#<run>             scope registry (activity, access policy): a run = a thread
    <store>#<app>#<tenant>        RECENT#<time>#<agent>#<run>     the runs in order of last activity (threads list)
    <store>#<app>#<tenant>        THREAD#<run>                    thread id → its agent (thread ids are per tenant)
    <store>#<app>#<tenant>        ACTOR#~tenant / ACTOR#AGENT#<agent>  explicit profiles of the tenant / of an agent
    <store>#~requests             <request_id>                    request id → tenant (uniqueness guard)
    ~grants                       <principal>                     what a caller may touch
    ~apikeys                      <sha256 of key>                 local-mode API key → principal
    <store>#~audit                <time>#<request_id>             the audit log (expires_at = TTL)
    ~erasures                     <erasure_id>                    tenant erasure tasks
    ~stores-purging               <store>                         deleted stores whose items are being purged
    ~audit-retired                <store>                         deleted stores whose audit logs are kept (expiry)
    ~dead-letter-scan             lease                           the one erasure reading the ingestion dead letters
    <store>#~activity             <app>#<tenant>#<agent>#<run>    activity registry: which scopes a dream is due for
    <store>#<app>#<tenant>        DREAM#<task_id>                 dream tasks
    <store>#<app>#<tenant>        DACT#<task_id>#<nnnn>#<id>      dream actions, in proposal order (with undo records)
    <store>#<app>#<tenant>        PROFILE#~tenant                 the tenant's profile
    <store>#<app>#<tenant>        PROFILE#AGENT#<agent>           the profile of one agent of the tenant
    <store>#<app>#<tenant>        SUM#<agent>#<run>               a thread's rolling summary (versioned)
    <store>#~dream                TASK#<task_id> / ACT#<action_id>  dream task / action id → tenant (pointers)
    <store>#~dream                SCHED                           the scheduler's round-robin cursor
    <store>#~open                 <request_id>                    open extraction tasks (app, tenant, since): the sweeper's list

Every tenant item lives under a partition key that *is* ``store#app#tenant``, so one IAM
condition on ``dynamodb:LeadingKeys`` confines a caller to its tenant. Scope ids cannot
contain ``#`` or ``~`` (domain.scope), so no id can forge another partition.
"""

from ..ports import Table
from .access import AccessRecords
from .core import CoreRecords
from .deletion import DeletionRecords
from .dream import DreamRecords
from .open_tasks import OpenTaskRecords
from .profiles import ProfileRecords
from .threads import ThreadRecords
from .summaries import SummaryRecords
from .keys import (API_KEYS_PK, ERASURES_PK, GRANTS_PK, PURGING_PK, RETIRED_LOGS_PK, STORES_PK, TTL_ATTRIBUTE,
                   activity_pk, dream_pk, message_sk, requests_pk, tenant_pk)

__all__ = ["Repository", "API_KEYS_PK", "ERASURES_PK", "GRANTS_PK", "PURGING_PK", "RETIRED_LOGS_PK", "STORES_PK",
           "TTL_ATTRIBUTE", "activity_pk", "dream_pk", "message_sk", "requests_pk", "tenant_pk"]


class Repository(CoreRecords, AccessRecords, DreamRecords, DeletionRecords, OpenTaskRecords, ThreadRecords,
                 ProfileRecords, SummaryRecords):
    """Typed access to the table. The only code that knows the key layout."""

    def __init__(self, table: Table):
        self.table = table
