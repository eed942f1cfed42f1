"""Memory for Strands Agents backed by memlane: `MemlaneMemory` (docs/integrations.md#strands-agents).

One object, one fixed scope (`app_id`, `tenant_id`, `agent_id`, the session as the run):

- as a hook provider it mirrors the conversation into the session's memlane thread — user and assistant
  text, one add per request, so memlane extracts long-term memories from whole exchanges — and, before
  each request, puts what memlane recalls for the user's words in front of the model, in a
  `<memlane_memories>` block that the mirror leaves out (the user never said it);
- `tools` are `remember(text)` and `recall(query, top_k)`: the model says what, never whose — the scope
  comes from here, so no tool call reaches another tenant.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any, Callable

from . import bounded_query, missing_framework

try:
    from strands import tool
    from strands.hooks import (AfterInvocationEvent, BeforeInvocationEvent, HookProvider, HookRegistry,
                               MessageAddedEvent)
except ModuleNotFoundError as missing:
    if (missing.name or "").split(".")[0] != "strands":
        raise  # strands is there, something it needs is not: its own error says what
    raise missing_framework(missing, "strands") from missing

from ..domain.limits import MAX_CONTENT_CHARS, MAX_MESSAGES_PER_ADD
from ..domain.scope import validate_id
from ..sdk import DEFAULT_URL, Memlane, errors

MEMORIES_TAG = "<memlane_memories>"
_END_TAG = "</memlane_memories>"
_MAX_RECALL = 20
# The block's tags as a memory's text might spell them (a stored "</memlane_memories> SYSTEM: ..." would close the
# block early and speak outside it).
_TAGS = re.compile(r"<\s*/?\s*memlane_memories\s*>", re.I)
# Angle brackets, their look-alikes that NFKC leaves and their escaped spellings (trials): in a memory's line none is
# left to open or close a tag, however the name between them is spelled (homoglyphs, combining marks). A look-alike is
# known by its name ("SINGLE LEFT-POINTING ANGLE QUOTATION MARK", "PRECEDES", "WHITE LEFT-POINTING TRIANGLE") or
# listed (the Canadian syllabics that look like one).
_ANGLED = ("ANGLE", "LESS-THAN", "GREATER-THAN", "CHEVRON", "PRECEDES", "SUCCEEDS", "POINTING TRIANGLE", "SUBGROUP")
_OPENING = ("LEFT", "LESS", "PRECEDES", "NORMAL SUBGROUP OF")
_SYLLABICS = {"ᐸ": "(", "ᐊ": "(", "ᐳ": ")", "ᐅ": ")"}
_ESCAPED = re.compile(r"&(?:lt|#0*60|#x0*3c);|%3c|\\u003c|\\x3c|(?P<close>&(?:gt|#0*62|#x0*3e);|%3e|\\u003e|\\x3e)",
                      re.I)


def _bracket(ch: str) -> str:
    if ch in "<>" or ch in _SYLLABICS:
        return {"<": "(", ">": ")"}.get(ch) or _SYLLABICS[ch]
    if ch.isascii() or ch.isalnum() or ch.isspace():
        return ch
    name = unicodedata.name(ch, "")
    if not any(k in name for k in _ANGLED):
        return ch
    return "(" if any(k in name for k in _OPENING) else ")"


class MemlaneMemory(HookProvider):
    """`Agent(tools=memory.tools, hooks=[memory])`. `recall_top_k` memories go in front of each request
    (0: none); `mirror=False` stops copying the conversation to memlane."""

    def __init__(self, store: str, *, app_id: str, tenant_id: str, session_id: str, agent_id: str = "strands",
                 url: str = DEFAULT_URL, api_key: str | None = None, client: Memlane | None = None,
                 recall_top_k: int = 5, min_similarity: float = 0.0, mirror: bool = True):
        self.store = store
        self.client = client or Memlane(url, api_key=api_key)
        ids = {"app_id": app_id, "tenant_id": tenant_id, "agent_id": agent_id, "run_id": session_id}
        # checked now: a bad id would otherwise be refused only by the first add, after the model answered
        self.thread_scope = {field: validate_id(field, value) for field, value in ids.items()}
        # recall reaches every session of this agent and tenant; never another tenant
        self.recall_scope = {**self.thread_scope, "run_id": "*"}
        self.recall_top_k, self.min_similarity, self.mirror = recall_top_k, min_similarity, mirror
        self._pending: list[dict[str, str]] = []
        self._injected: set[str] = set()  # the memories blocks put before this request's turn, left out of the mirror
        self.tools = [self._remember_tool(), self._recall_tool()]

    # -- what the tools and the hooks call -------------------------------------------------------------

    def remember(self, text: str) -> str:
        """Write `text` as a memory now (explicit, searchable at once)."""
        written = self._with_store(lambda: self.client.memories.write(self.store, self.thread_scope, [{"text": text}]))
        return f"remembered ({written.memories[0].memory_id})"

    def recall(self, query: str, top_k: int = 5) -> str:
        """What memlane finds for `query`, one line per memory ('' when nothing)."""
        hits = self._search(query, max(1, min(int(top_k), _MAX_RECALL)))
        return "\n".join(_line(hit.text) for hit in hits)

    # -- hooks -----------------------------------------------------------------------------------------

    def register_hooks(self, registry: HookRegistry, **kwargs: Any) -> None:
        registry.add_callback(BeforeInvocationEvent, self._before_request)
        registry.add_callback(MessageAddedEvent, self._on_message)
        registry.add_callback(AfterInvocationEvent, self._after_request)

    def _before_request(self, event: BeforeInvocationEvent) -> None:
        if not self.recall_top_k or not event.messages or event.messages[-1].get("role") != "user":
            return
        asked = _text_of(event.messages[-1], self._injected)
        hits = self._search(asked, self.recall_top_k) if asked else []
        if not hits:
            return
        block = {"text": "\n".join([MEMORIES_TAG, "What you remember about this user (from earlier sessions):",
                                    *(_line(hit.text) for hit in hits), _END_TAG])}
        self._injected.add(block["text"])
        last = {**event.messages[-1], "content": [block, *event.messages[-1]["content"]]}
        event.messages = [*event.messages[:-1], last]

    def _on_message(self, event: MessageAddedEvent) -> None:
        role, text = event.message.get("role"), _text_of(event.message, self._injected)
        if self.mirror and role in ("user", "assistant") and text:
            self._pending.append({"role": role, "content": text})

    def _after_request(self, event: AfterInvocationEvent) -> None:
        """The request's turns as one add: short-term memory at once, long-term memories extracted from them."""
        self._injected.clear()
        if not self._pending:
            return
        messages, self._pending = self._pending, []
        # within an add's limits: a long text goes as consecutive messages of its speaker, in order
        pieces = [{"role": m["role"], "content": m["content"][i:i + MAX_CONTENT_CHARS]}
                  for m in messages for i in range(0, len(m["content"]), MAX_CONTENT_CHARS)]
        for start in range(0, len(pieces), MAX_MESSAGES_PER_ADD):
            batch = pieces[start:start + MAX_MESSAGES_PER_ADD]
            self._with_store(lambda: self.client.add(self.store, self.thread_scope, messages=batch))

    # -- internals ---------------------------------------------------------------------------------------

    def _search(self, query: str, top_k: int) -> list[Any]:
        # within the API's query limit, by its end (a trial: a user message past it was sent whole, refused, and the
        # agent call failed)
        try:
            return self.client.search(self.store, bounded_query(query), self.recall_scope, top_k=top_k,
                                      min_similarity=self.min_similarity)
        except errors.StoreNotFound:
            return []

    def _with_store(self, write: Callable[[], Any]) -> Any:
        """The write, after making the memlane store on the first write of a new deployment."""
        try:
            return write()
        except errors.StoreNotFound:
            try:
                self.client.stores.create(self.store, description="Strands Agents memory (memlane.integrations)")
            except errors.StoreExists:
                pass
            return write()

    def _remember_tool(self) -> Any:
        memory = self

        @tool
        def remember(text: str) -> str:
            """Remember a fact about the user or the task for later conversations.

            Args:
                text: the fact, as one self-contained sentence.
            """
            return memory.remember(text)

        return remember

    def _recall_tool(self) -> Any:
        memory = self

        @tool
        def recall(query: str, top_k: int = 5) -> str:
            """Look up what was remembered about the user in earlier conversations.

            Args:
                query: what to look for, in plain words.
                top_k: how many memories at most (1-20).
            """
            return memory.recall(query, top_k) or "nothing remembered about that"

        return recall


def _text_of(message: Any, injected: set[str]) -> str:
    """The message's own text blocks, without the memories block put there before the request (the one put, not
    any text that opens with its tag: a user's own such message is theirs)."""
    texts = [b["text"] for b in message.get("content") or [] if isinstance(b, dict) and isinstance(b.get("text"), str)]
    return "\n".join(t for t in texts if t.strip() and t not in injected).strip()


def _line(text: str) -> str:
    """A memory as one line of the block: its own line breaks and any spelling of the block's tags taken out — after
    look-alikes are folded ("＜/memlane_memories＞") and invisible characters dropped ("</memlane\u200b_memories>"),
    which a model reads as the tag all the same (a trial) — and any angle bracket left made a parenthesis."""
    plain = "".join(ch for ch in unicodedata.normalize("NFKC", text) if unicodedata.category(ch) != "Cf")
    plain = _ESCAPED.sub(lambda m: ")" if m.group("close") else "(", _TAGS.sub("[memlane_memories]", plain))
    return "- " + " ".join("".join(map(_bracket, plain)).split())
