"""What the MCP tools do, over the SDK, inside one fixed scope: the answers are compact and bounded
because they go into a model's context window.

Nothing here takes a store, app, tenant or agent from its caller: the `Binding` is the server's
configuration, and every call builds its scope from it alone."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Mapping, Sequence

from ..sdk import Memlane
from ..sdk.errors import MemoryNotFound, ProfileNotFound

RecordType = Literal["memory", "message", "summary"]
MAX_TOP_K, MAX_THREADS, MAX_BUDGET = 20, 50, 8000
MAX_TEXT_CHARS = 600  # one hit or memory as shown to the model; the full text stays in the store


@dataclass(frozen=True)
class Binding:
    """The one scope an MCP server works in: a store, an app, a tenant and optionally an agent."""

    store: str
    app_id: str
    tenant_id: str
    agent_id: str | None = None

    @property
    def tenant(self) -> dict[str, str]:
        return {"app_id": self.app_id, "tenant_id": self.tenant_id}

    def scope(self, thread_id: str | None = None) -> dict[str, str]:
        scope = dict(self.tenant)
        if self.agent_id:
            scope["agent_id"] = self.agent_id
        if thread_id:
            scope["run_id"] = thread_id
        return scope


def _clip(text: str, limit: int = MAX_TEXT_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _day(moment: datetime | None) -> str | None:
    return moment.date().isoformat() if moment else None


class MemoryTools:
    """The six tools and two resources as plain methods: each one SDK call, its answer made compact.
    SDK errors (`ApiError`) pass through; the server turns them into tool errors."""

    def __init__(self, client: Memlane, binding: Binding):
        self.client, self.binding = client, binding

    def remember(self, text: str | None = None, messages: Sequence[Mapping[str, Any]] | None = None,
                 thread_id: str | None = None) -> dict[str, Any]:
        # sync: the model gets what was distilled, and a recall right after finds it (past the server's
        # deadline the answer is the task, still RUNNING, and the extraction finishes in the background)
        done = self.client.memories.add(self.binding.store, self.binding.scope(thread_id), messages, text, sync=True)
        memories = [{"id": m.memory_id, "type": m.memory_type, "text": _clip(m.text)}
                    for m in getattr(done, "memories", [])[:MAX_TOP_K]]
        # What the store held already (a NOOP): without it, an empty `memories` read as "nothing was kept".
        known = [{"id": o.target_id or o.memory_id, "text": _clip(o.text)}
                 for o in getattr(done, "outcomes", []) if o.action == "NOOP"][:MAX_TOP_K]
        return {"request_id": done.request_id, "status": done.status, "memories": memories, "already_known": known}

    def recall(self, query: str, top_k: int = 5, record_types: Sequence[RecordType] | None = None,
               thread_id: str | None = None) -> dict[str, Any]:
        options: dict[str, Any] = {"top_k": min(top_k, MAX_TOP_K)}
        if record_types:
            options["record_types"] = list(record_types)
        found = self.client.memories.search(self.binding.store, query, self.binding.scope(thread_id), **options)
        return {"results": [{"id": hit.memory_id, "type": hit.memory_type or hit.record_type, "text": _clip(hit.text),
                             "similarity": round(hit.similarity, 3), "thread_id": hit.scope.run_id,
                             "when": _day(hit.event_time or hit.created_at)} for hit in found.results]}

    def get_context(self, thread_id: str, query: str | None = None, budget_tokens: int = 1500) -> dict[str, Any]:
        options: dict[str, Any] = {"budget_tokens": min(budget_tokens, MAX_BUDGET)}
        if query:
            options["query"] = query
        if self.binding.agent_id:
            # the agent's thread, and its memories and plans only: a card recalls from the whole tenant by default
            # (a trial's card on the agent's own thread listed another agent's memories)
            options.update(agent_id=self.binding.agent_id, recall_scope="agent")
        card = self.client.threads.context(self.binding.store, thread_id, **self.binding.tenant, **options)
        return {"text": card.text, "tokens": card.tokens.total}

    def forget(self, memory_id: str) -> dict[str, Any]:
        if self.binding.agent_id:
            # Bound to an agent, its reads stay in it and so do its deletions: another agent's memory is not found
            # (a trial: `forget` deleted another agent's memory by its id).
            held = self.client.memories.get(self.binding.store, memory_id, **self.binding.tenant)
            if held.scope.agent_id != self.binding.agent_id:
                raise MemoryNotFound(404, MemoryNotFound.code, f"memory '{memory_id}' not found")
        try:
            deleted = self.client.memories.delete(self.binding.store, memory_id, **self.binding.tenant)
        except MemoryNotFound as missing:
            if not missing.maybe_done:
                raise
            return {"id": memory_id, "status": "deleted"}  # by the attempt whose answer was lost
        return {"id": deleted.memory_id, "status": deleted.status}

    def list_threads(self, limit: int = 20) -> dict[str, Any]:
        pages = self.client.threads.list(self.binding.store, **self.binding.tenant, agent_id=self.binding.agent_id,
                                         limit=min(limit, MAX_THREADS))
        threads = []
        for thread in pages:
            threads.append({"thread_id": thread.thread_id, "messages": thread.message_count,
                            "last_activity": thread.last_activity.isoformat(timespec="seconds")})
            if len(threads) >= min(limit, MAX_THREADS):
                break
        return {"threads": threads}

    def get_profile(self) -> dict[str, Any]:
        """The user's profile — not the bound agent's role and instructions, which the agent's profile route gives
        (a trial: with --agent it answered "You are the hotel concierge ..."). Bound to an agent, as its context card:
        what was stated of the user, and what the agent's own memories say of them (a dream distils the tenant's
        profile from every agent's)."""
        user = self._profile(None)
        if self.binding.agent_id is None:
            text, facts = (user.text, user.attributes + user.preferences) if user else ("", [])
        else:
            own = self._profile(self.binding.agent_id)
            stated = [f for f in (user.attributes + user.preferences if user else []) if f.origin == "explicit"]
            told = [f for f in (own.attributes + own.preferences if own else []) if f.origin == "distilled"]
            text, facts = (user.explicit_text if user else ""), stated + told
        return {"text": _clip(text, 4 * MAX_TEXT_CHARS),
                "facts": [{"name": f.name, "value": _clip(f.value, 200)} for f in facts][:MAX_TOP_K * 2]}

    def _profile(self, agent_id: str | None) -> Any:
        try:
            return self.client.profiles.get(self.binding.store, self.binding.tenant_id, app_id=self.binding.app_id,
                                            agent_id=agent_id)
        except ProfileNotFound:  # nothing stated or distilled yet: to a model, an empty profile
            return None

    def thread_summary(self, thread_id: str) -> str:
        return self.client.threads.summary(self.binding.store, thread_id, **self.binding.tenant,
                                           agent_id=self.binding.agent_id).text
