"""The context card of a thread: what an agent puts in its prompt at the next turn, under a token budget.

It gathers the sections — the agent's and the user's profile, the thread's summary, long-term memories
relevant to the turn (from the tenant's other threads and agents too, or with `recall_scope` "agent" the
thread's agent's threads only; current heads only, above a relevance floor, not repeating what the summary or
the recent turns already say, near-identical ones at most `alike` times), the tenant's open plans, the thread's
last turns — and hands them to the pure packer
(policies/context_card.py), which keeps the card within the budget and renders it in a stable order. Tokens are counted with `deps.tokenizer`.

Reads only: a card writes nothing, so building one twice gives the same text for the same state.
"""

from __future__ import annotations

import hashlib
import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Callable, Sequence

from ..domain import limits
from ..domain.errors import DependencyFailed, InvalidInput
from ..domain.models import Memory, MemoryType, Message, RecordType, ScopeInfo, ThreadSummary
from ..domain.scope import DEFAULT, Scope, validate_id
from ..policies import summary as extractive
from ..policies.actor_profile import name_key
from ..policies.context_card import SECTIONS, Card, Entry, Section, compact, distinct, pack, quotes_a_reply
from ..ports import Tokenizer
from . import profiles, scopes, search, summaries, threads
from .deps import Deps

DEFAULT_BUDGET, MIN_BUDGET, MAX_BUDGET = 1500, 1, 32_000
DEFAULT_RECENT, MAX_RECENT = 6, 50
# Where the memories and plans sections recall from: the whole tenant (every thread and agent), or the thread's
# agent alone — for a caller bound to one agent, whose reads stay in it (an MCP server started with --agent).
RECALL_SCOPES = ("tenant", "agent")
# Search hits for the memories and plans sections: enough to fill the budget (a memory line is ~20 tokens
# with its date), at least MIN_CANDIDATES; the packer keeps what fits. 20 whatever the budget left a
# 2,000-token card at 1,500 tokens on LoCoMo (docs/benchmarks.md).
TOKENS_PER_CANDIDATE, MIN_CANDIDATES = 15, 20
QUERY_WINDOW = 2  # turns before the latest user turn that shape the default query
PACK_PASSES = 4  # packings of one card at most while the turns and sentences that hide memories are cut

# What an entry of each section is worth to the next turn, before its cost in tokens: the packer takes
# the best value per token first. Profiles are short and always apply; the newest turn is worth the most
# of the recent ones; a memory or a plan found by search is worth its rank in search's order; the summary's
# open items, the thread's own, PLAN_VALUE.
PROFILE_VALUE, SUMMARY_VALUE, PLAN_VALUE = 1.0, 0.7, 0.5
# A memory is worth its place in search's order (fusion and reranking), not its raw cosine: valued by
# similarity, the packer's value per token took short, loosely related memories before the reranked head
# (LoCoMo prompt recall at 1,500 tokens 0.742 vs 0.871 for the same search's results in rank order).
RANK_DECAY = 0.93
RECENT_NEWEST, RECENT_STEP, RECENT_FLOOR = 1.0, 0.05, 0.5
# Token counts of card lines kept between builds (per tokenizer and thread, least recently used out): a thread's
# next card re-packs mostly the same memories and turns, and counting them again was a third of a build (a card of
# 50 turns of 32,000 characters, ~0.5 s each time).
LINE_COUNTS = 50_000


@dataclass(frozen=True)
class CardRecipe:
    """How a card recalls long-term memory. Named (RECIPES), so the bench measures them side by side."""

    # Past search's first `head` hits, a hit less similar to the turn than `relative_floor` × the best hit's
    # similarity is not offered to the card: a turn about little the tenant said
    # gets a small card, not one filled with loosely related memories. The head is kept whatever its cosine:
    # search ranked it first (keywords, reranker), and a fact a turn implies is rarely close to it in
    # embedding space ("a table for dinner" → "vegetarian") (docs/benchmarks.md, context cards).
    relative_floor: float = 0.5
    head: int = 10
    # At most `alike` near-identical memories (most words shared) go in, the best ranked: the rest add
    # tokens, not facts (0: no limit).
    alike: int = 3
    record_types: tuple[str, ...] = ("memory",)  # what search may return: memories, raw messages too
    # Memories listed under their date (a line "2023-05-07:" once) instead of "(2023-05-07) " in front of
    # each: the date costs ~8 tokens a memory, and a conversation's memories share few dates.
    group_dates: bool = False
    # Shorter memory lines, the same facts: no "Speaker: " prefix when the statement names the speaker
    # again; `replies` False also drops the "(replying to ...)" quote of the turn a memory answered.
    compact: bool = False
    replies: bool = True
    compact_plans: bool = False  # the plans' lines shortened as the memories' are (`compact`, `replies`)
    # With `replies` False, the quote is still kept when the memory cites the turn it quotes: that turn has no
    # memory of its own (the rule extractor quotes a short turn whole and cites it), so the quote is the only
    # line that shows what the card's evidence claims.
    cited_replies: bool = False


RECIPES = {
    # Memories under their date, without a speaker prefix their statement repeats or the quote of the turn
    # they answered (on four LoCoMo conversations, recall at 1,500 tokens 0.865 -> 0.888, none lost), the
    # plans' lines as short (six conversations 0.878 -> 0.882), and the quote kept where it is the only line
    # showing a turn the memory cites (counted as held before without being shown: held-out three 0.844 ->
    # 0.861 against the card that claims only what it shows; docs/benchmarks.md §7). `compact_plans` is the
    # card before the cited quotes, `grouped_compact_noreply` the one before the plans' lines, `dated_lines`
    # the card before that, each line dated, as said.
    "default": CardRecipe(group_dates=True, compact=True, replies=False, compact_plans=True, cited_replies=True),
    "dated_lines": CardRecipe(),
    "no_floor": CardRecipe(relative_floor=0.0, alike=0),  # the card before the floor and alike (the comparison)
    "floor_only": CardRecipe(alike=0),
    "alike1": CardRecipe(alike=1),
    "alike2": CardRecipe(alike=2),
    "messages": CardRecipe(record_types=("memory", "message")),
    "dates_grouped": CardRecipe(group_dates=True),
    "compact": CardRecipe(compact=True),
    "grouped_compact": CardRecipe(group_dates=True, compact=True),
    "grouped_compact_noreply": CardRecipe(group_dates=True, compact=True, replies=False),
    "compact_plans": CardRecipe(group_dates=True, compact=True, replies=False, compact_plans=True),
}
DEFAULT_RECIPE = "default"


def build(deps: Deps, store: str, *, app_id: str, tenant_id: str, thread_id: str, agent_id: str | None = None,
          query: str | None = None, budget_tokens: int = DEFAULT_BUDGET, recent_messages: int = DEFAULT_RECENT,
          sections: Sequence[str] | None = None, recipe: str = DEFAULT_RECIPE,
          recall_scope: str = "tenant") -> Card:
    wanted = _check(budget_tokens, recent_messages, sections, query, recall_scope)
    plan = _recipe(recipe)
    if deps.tokenizer is None:
        raise DependencyFailed("no tokenizer is configured to count the card's tokens", code="tokenizer_unavailable")
    deps.repo.get_store(store)  # unknown store → 404
    thread = _thread(deps, store, validate_id("app_id", app_id), validate_id("tenant_id", tenant_id),
                     validate_id("thread_id", thread_id), None if agent_id is None else validate_id("agent_id", agent_id))
    scope = thread.scope
    turns = _last_messages(deps, store, scope, max(recent_messages, QUERY_WINDOW + 1))
    recent = turns[-recent_messages:] if recent_messages else []
    summary = get_summary(deps, store, scope) if wanted & {"summary", "plans"} else None
    query = query or _default_query(turns)

    parts: list[Section] = []
    # Long-term recall is the thread's to ask for: a thread whose access policy forbids recall gets no memories
    # or plans, nor what a dream distilled of them into the profiles — only the profiles' stated parts.
    recalls = thread.access_policy.recalls
    # Recalling from the agent alone, the user profile is the stated one: a dream distils the tenant's from the
    # memories of every agent (the agent's own profile is distilled from its memories only).
    whole_tenant = recall_scope == "tenant"
    user = _lines("user_profile", tenant_profile(deps, store, scope.app_id, scope.tenant_id,
                                                 distilled=recalls and whole_tenant)) \
        if "user_profile" in wanted else None
    if "agent_profile" in wanted and scope.agent_id != DEFAULT:
        # What the agent's memories say of the user (a dream distils an agent's profile from them) is the user
        # profile's to show: the agent's section keeps its role, its instructions and what the user's lacks.
        told = {e.text for e in user.entries} if user is not None else set()
        parts.append(_lines("agent_profile", agent_profile(deps, store, scope.app_id, scope.tenant_id,
                                                           scope.agent_id, distilled=recalls), leaving=told))
    if user is not None:
        parts.append(user)
    if "summary" in wanted and summary is not None:
        # Not a sentence whose turns are all among the recent ones shown word for word (more recent turns asked for
        # than the store keeps out of its summary: a trial's card spent a quarter of its tokens saying them twice).
        shown = {m.message_id for m in recent} if "recent" in wanted else set()
        parts.append(Section("summary", tuple(Entry(f"s{i}", s.text, SUMMARY_VALUE, i, tuple(s.evidence))
                                              for i, s in enumerate(summary.sentences)
                                              if not (s.evidence and set(s.evidence) <= shown))))
    if "recent" in wanted:
        parts.append(Section("recent", tuple(
            Entry(m.message_id, _said(m), max(RECENT_FLOOR, RECENT_NEWEST - RECENT_STEP * age), len(recent) - age,
                  (m.message_id,), f"{m.created_at:%Y-%m-%d}") for age, m in enumerate(reversed(recent))),
            contiguous=True))
    if wanted & {"memories", "plans"} and recalls:
        found = _relevant(_recall(deps, store, scope, query, budget_tokens, plan, whole_tenant=whole_tenant), plan)
        ranked = list(enumerate(_citing_shared_turns(deps, store, scope, found)))
        since = deps.clock.now() - timedelta(days=deps.settings.dream_plan_grace_days)
        ahead = [(rank, h) for rank, h in ranked if _planned(h.memory) and (h.memory.event_time is None
                                                                             or h.memory.event_time >= since)]
        shown_plans = {h.memory.memory_id for _, h in ahead} if "plans" in wanted else set()
        hits = [(r, h) for r, h in ranked if h.memory.memory_id not in shown_plans]
        return _packed(parts, _recalled(wanted, summary, ahead, hits, recent, plan), budget_tokens,
                       _counts(deps.tokenizer, store, thread))
    return pack(parts, budget_tokens, _counts(deps.tokenizer, store, thread))


def _planned(memory: Memory) -> bool:
    """A plan: said as one ("will", "plans to"), or an event said before its day ("a dentist appointment tomorrow":
    a trial found upcoming appointments only among the memories, the plans section empty)."""
    said = memory.observed_at or memory.created_at
    return memory.memory_type == MemoryType.PLAN or (
        memory.memory_type == MemoryType.EVENT and memory.event_time is not None
        and memory.event_time.date() > said.date())


Said = list[tuple[str, Entry]]  # (section, entry) of the turns and summary sentences a card is trusted to show


def _recalled(wanted: set[str], summary: ThreadSummary | None, ahead: list[tuple[int, search.SearchHit]],
              hits: list[tuple[int, search.SearchHit]], recent: list[Message],
              plan: CardRecipe) -> Callable[[Said], list[Section]]:
    """The plans and memories sections, less what the turns and summary sentences given say already."""
    turns = {m.message_id: m for m in recent}

    def sections(said: Said) -> list[Section]:
        out = []
        if "plans" in wanted:
            out.append(_plans(summary, ahead, said={e.text for n, e in said if n == "summary"},
                              shown={e.key for n, e in said if n == "recent"}, plan=plan))
        if "memories" in wanted:
            # As the card shows them: a memory restating a turn names its speaker too ("User: ...").
            shown = [_turn(turns[e.key]) if e.key in turns else e.text for _, e in said]
            out.append(_memories(hits, shown, {ev for _, e in said for ev in e.evidence}, plan))
        return out
    return sections


def _packed(parts: list[Section], recalled: Callable[[Said], list[Section]], budget: int, counts: Tokenizer) -> Card:
    """The card with its `recalled` sections (plans, memories), which leave out what its turns and summary
    sentences say already — but only those it shows whole. One the packer then cut or shortened hides nothing:
    the card is packed again without it (each pass trusts fewer; past PACK_PASSES, none)."""
    said = [(s.name, e) for s in parts if s.name in ("summary", "recent") for e in s.entries]
    for _ in range(PACK_PASSES):
        card = pack([*parts, *recalled(said)], budget, counts)
        whole = {(n, e.key, e.text) for n, es in card.kept.items() for e in es}
        held = [(n, e) for n, e in said if (n, e.key, e.text) in whole]  # of those trusted, the ones it shows whole
        if len(held) == len(said):
            return card
        said = held
    return pack([*parts, *recalled([])], budget, counts)


# -- the seams: one small function per source, so another module can take each over ----------------


def get_summary(deps: Deps, store: str, scope: Scope) -> ThreadSummary | None:
    """The thread's rolling summary, if it has one yet."""
    return summaries.get_summary(deps, store, scope)


def tenant_profile(deps: Deps, store: str, app_id: str, tenant_id: str, *, distilled: bool = True) -> str:
    """The user's profile as text, one attribute a line (stated, merged with the dream-distilled one)."""
    found = profiles.tenant_profile(deps, store, app_id, tenant_id, distilled=distilled)
    return found.text if found else ""


def agent_profile(deps: Deps, store: str, app_id: str, tenant_id: str, agent_id: str, *,
                  distilled: bool = True) -> str:
    """The agent's profile as text: its role and standing instructions."""
    found = profiles.agent_profile(deps, store, app_id, tenant_id, agent_id, distilled=distilled)
    return found.text if found else ""


def _thread(deps: Deps, store: str, app_id: str, tenant_id: str, thread_id: str, agent_id: str | None) -> ScopeInfo:
    """The thread: its registry entry, under the agent that claimed its id (or the one named)."""
    return threads.locate(deps, store, app_id=app_id, tenant_id=tenant_id, thread_id=thread_id, agent_id=agent_id)


# -- sections -----------------------------------------------------------------------------------


def _check(budget: int, recent: int, sections: Sequence[str] | None, query: str | None,
           recall_scope: str = "tenant") -> set[str]:
    if isinstance(budget, bool) or not isinstance(budget, int) or not MIN_BUDGET <= budget <= MAX_BUDGET:
        raise InvalidInput(f"budget_tokens must be between {MIN_BUDGET} and {MAX_BUDGET}", field="budget_tokens")
    if isinstance(recent, bool) or not isinstance(recent, int) or not 0 <= recent <= MAX_RECENT:
        raise InvalidInput(f"recent_messages must be between 0 and {MAX_RECENT}", field="recent_messages")
    if query is not None and (not isinstance(query, str) or len(query) > limits.MAX_QUERY_CHARS):
        raise InvalidInput(f"query must be a string of at most {limits.MAX_QUERY_CHARS} characters", field="query")
    if recall_scope not in RECALL_SCOPES:
        raise InvalidInput(f"recall_scope must be one of {', '.join(RECALL_SCOPES)}", field="recall_scope")
    if sections is not None and not sections:
        raise InvalidInput(f"sections names none; leave it out for all, or choose from {', '.join(SECTIONS)}",
                           field="sections")
    unknown = set(sections or ()) - set(SECTIONS)
    if unknown:
        raise InvalidInput(f"unknown sections {sorted(unknown)}; choose from {', '.join(SECTIONS)}", field="sections")
    return set(sections) if sections is not None else set(SECTIONS)


def _recipe(name: str) -> CardRecipe:
    if name not in RECIPES:
        raise InvalidInput(f"unknown card recipe '{name}'; one of {', '.join(RECIPES)}", field="recipe")
    return RECIPES[name]


def _last_messages(deps: Deps, store: str, scope: Scope, n: int) -> list[Message]:
    newest_first, _ = deps.repo.list_messages(store, scope, limit=n, cursor=None, forward=False)
    return list(reversed(newest_first))


def _default_query(turns: list[Message]) -> str:
    """The latest user turn and a short window before it: what the next answer is about."""
    users = [i for i, m in enumerate(turns) if m.role == "user"]
    if not users:
        return ""
    last = users[-1]
    text = " ".join(m.content for m in turns[max(0, last - QUERY_WINDOW):last + 1])
    return text[-limits.MAX_QUERY_CHARS:]  # the latest words matter most


def _turn(m: Message) -> str:
    return f"[{m.created_at:%Y-%m-%d}] {_said(m)}"


def _said(m: Message) -> str:
    """A turn as the card shows it, under its date (a conversation's last turns share one or two)."""
    return f"{m.name or m.role}: {m.content}"


def _lines(name: str, text: str, leaving: set[str] | frozenset[str] = frozenset()) -> Section:
    """A profile's lines as entries, but those in `leaving` or naming a fact one of them names ("lives in: Lisbon"
    leaves out "lives_in: Porto"); the card bullets each one, so a line's own bullet goes."""
    named = {n for n in map(_fact_name, leaving) if n}
    lines = [t for t in (line.strip().removeprefix("- ") for line in text.splitlines())
             if t and t not in leaving and _fact_name(t) not in named]
    return Section(name, tuple(Entry(f"{i}", line, PROFILE_VALUE, i) for i, line in enumerate(lines)))


def _fact_name(line: str) -> str | None:
    """The attribute a profile line states ("lives in: Lisbon" → "lives in"), as names are matched; None for a line of
    prose (a role, an instruction)."""
    name, colon, _ = line.partition(":")
    return name_key(name) if colon and name and len(name) <= 60 and "." not in name else None


def _recall(deps: Deps, store: str, scope: Scope, query: str, budget: int,
            plan: CardRecipe = RECIPES[DEFAULT_RECIPE], *, whole_tenant: bool = True) -> list[search.SearchHit]:
    """Current memories of the tenant (every thread and agent; else every thread of the thread's agent) relevant
    to the turn: one search."""
    if not query:
        return []
    top_k = max(MIN_CANDIDATES, min(limits.MAX_TOP_K, budget // TOKENS_PER_CANDIDATE))
    where = {"app_id": scope.app_id, "tenant_id": scope.tenant_id}
    if not whole_tenant:
        where["agent_id"] = scope.agent_id
    return search.search(deps, store, query=query, scope=where, top_k=top_k, record_types=list(plan.record_types))


def _citing_shared_turns(deps: Deps, store: str, scope: Scope, hits: list[search.SearchHit]) -> list[search.SearchHit]:
    """The hits, a memory of another thread that stores nothing in long-term memory (switched since it was made)
    citing none of that thread's turns: they are its own, as search's evidence keeps them (a trial found a card
    listing their ids)."""
    own = (scope.agent_id, scope.run_id)  # a thread is an agent's run: another agent's run of this id is another
    threads = {(h.memory.scope.agent_id, h.memory.scope.run_id) for h in hits
               if h.memory.evidence and h.memory.scope.run_id} - {own}
    private = scopes.storing_nothing(deps, store, scope.app_id, scope.tenant_id, threads) if threads else set()
    if not private:
        return hits
    return [replace(h, memory=h.memory.model_copy(update={"evidence": []}))
            if (h.memory.scope.agent_id, h.memory.scope.run_id) in private else h for h in hits]


def _relevant(hits: list[search.SearchHit], plan: CardRecipe) -> list[search.SearchHit]:
    """Search's head, and the hits after it above the recipe's relevance floor, in search's order."""
    best = max((h.similarity for h in hits), default=0.0)
    floor = plan.relative_floor * best
    return [h for i, h in enumerate(hits) if i < plan.head or h.similarity >= floor]


def _memories(ranked: list[tuple[int, search.SearchHit]], shown: list[str], covered: set[str],
              plan: CardRecipe = RECIPES[DEFAULT_RECIPE]) -> Section:
    """The hits (with their rank in search's order), less what the card already says: a memory whose
    evidence is all among the shown turns and summary, or whose words restate them — and past `alike`
    near-identical ones, the lower ranked (policies/context_card.distinct)."""
    fresh = [(rank, hit) for rank, hit in ranked
             if not (hit.memory.evidence and set(hit.memory.evidence) <= covered)]
    texts = [_text(hit.memory) for _, hit in fresh]
    new = distinct(texts, shown, alike=plan.alike)
    entries = []
    for (rank, hit), text, keep in zip(fresh, texts, new):
        if keep:
            when = hit.memory.event_time or hit.memory.observed_at
            text, cited = _short(text, hit.memory.evidence, plan)
            line, group = (text, f"{when:%Y-%m-%d}" if when else "") if plan.group_dates else (_dated(text, when), "")
            entries.append(Entry(hit.memory.memory_id, line, RANK_DECAY ** rank, rank, cited, group))
    return Section("memories", tuple(entries))


def _text(m: Memory) -> str:
    """A memory's line; a message found as a record says who said it, as a turn does."""
    return m.text if m.record_type != RecordType.MESSAGE else f"{m.keywords or m.metadata.get('role')}: {m.text}"


def _short(text: str, evidence: Sequence[str], plan: CardRecipe) -> tuple[str, tuple[str, ...]]:
    """A memory's line as the recipe shows it — without the speaker's prefix its statement repeats, or the quote
    of the turn it answered (policies/context_card.compact) — and the messages the line shows: a quote left out
    takes its turn out of the card's evidence (the rule extractor cites a turn it quotes whole, first)."""
    replies = plan.replies or plan.cited_replies and len(evidence) > 1
    line = compact(text, speaker=plan.compact, replies=replies) if plan.compact or not replies else text
    dropped = not replies and len(evidence) > 1 and quotes_a_reply(text)
    return line, tuple(evidence[-1:] if dropped else evidence)


def _plans(summary: ThreadSummary | None, ahead: list[tuple[int, search.SearchHit]], *, said: set[str],
           shown: set[str] = frozenset(), plan: CardRecipe = RECIPES[DEFAULT_RECIPE]) -> Section:
    """The thread summary's open items (each citing its messages, but not one its sentences say already), and
    the tenant's plans relevant to the turn that are still ahead (or undated), but not one an open item already
    says (drawn from the messages it cites, naming most of what it names) — and neither an item nor a plan drawn
    only from turns the card shows (a trial's card said "will visit my mother in Seville" twice). A plan from search
    is worth its rank like a memory: valued flat, a plan search ranked 80th went in before the memory it ranked 15th."""
    # `said`: the summary's sentences the card shows (an item one of them says is in its section already);
    # `shown`: the ids of the recent turns it shows.
    items = [(item, summary.cited.get(item, [])) for item in (summary.open_items if summary else [])]
    # Keyed "open#<n>": no memory id holds a "#", so no plan of the tenant's shares an item's key.
    entries = [Entry(f"open#{i}", item, PLAN_VALUE, i, tuple(cited)) for i, (item, cited) in enumerate(items)
               if item not in said and not (cited and set(cited) <= shown)]

    def told(memory: Memory) -> bool:  # an item the summary section shows counts too: the plan is in the card
        return any(memory.evidence and set(memory.evidence) <= set(cited) and extractive.says_item(memory.text, item)
                   for item, cited in items)

    def line(memory: Memory) -> tuple[str, tuple[str, ...]]:
        text, cited = _short(memory.text, memory.evidence, plan) if plan.compact_plans \
            else (memory.text, tuple(memory.evidence))
        return _dated(text, memory.event_time), cited

    ahead = [(rank, h) for rank, h in ahead if not (h.memory.evidence and set(h.memory.evidence) <= shown)
             and not told(h.memory)]
    # Valued by rank, shown by day (the soonest first, undated last): a trial's card listed 6, 4, then 5 March.
    by_day = sorted(ahead, key=lambda p: (p[1].memory.event_time is None,
                                          p[1].memory.event_time.timestamp() if p[1].memory.event_time else 0.0, p[0]))
    shown_at = {h.memory.memory_id: len(entries) + i for i, (_, h) in enumerate(by_day)}
    entries += [Entry(h.memory.memory_id, text, RANK_DECAY ** rank, shown_at[h.memory.memory_id], cited)
                for rank, h in ahead for text, cited in [line(h.memory)]]
    return Section("plans", tuple(entries))


def _dated(text: str, when: object) -> str:
    return f"({when:%Y-%m-%d}) {text}" if when is not None else text


# -- token counts -------------------------------------------------------------------------------


class _LineCounts:
    """A tokenizer that remembers the counts of the lines it has counted (a pure function of the text), each
    thread's apart: a line another tenant's card counted is counted again, so how fast a card is built tells no
    tenant what another's cards held."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self._tokenizer = tokenizer
        self._known: OrderedDict[tuple[tuple[str, ...], bytes], int] = OrderedDict()
        self._lock = threading.Lock()

    def of(self, owner: tuple[str, ...]) -> _OwnCounts:
        return _OwnCounts(self, owner)

    def count_many(self, owner: tuple[str, ...], texts: Sequence[str]) -> list[int]:
        # A line's key is its digest: a turn of 32,000 characters costs 16 bytes to remember, not its text.
        keys = [(owner, hashlib.blake2b(t.encode(), digest_size=16).digest()) for t in texts]
        with self._lock:
            known = {k: self._known[k] for k in keys if k in self._known}
            for k in known:
                self._known.move_to_end(k)
        missing = {k: t for k, t in zip(keys, texts) if k not in known}
        if missing:
            fresh = dict(zip(missing, self._tokenizer.count_many(list(missing.values()))))
            known.update(fresh)
            with self._lock:
                self._known.update(fresh)
                while len(self._known) > LINE_COUNTS:
                    self._known.popitem(last=False)
        return [known[k] for k in keys]


class _OwnCounts:
    """One tenant's counts (a `Tokenizer` for the packer)."""

    def __init__(self, lines: _LineCounts, owner: tuple[str, ...]) -> None:
        self.name, self._lines, self._owner = lines._tokenizer.name, lines, owner

    def count(self, text: str) -> int:
        return self.count_many([text])[0]

    def count_many(self, texts: Sequence[str]) -> list[int]:
        return self._lines.count_many(self._owner, texts)


_CACHES: weakref.WeakKeyDictionary[Tokenizer, _LineCounts] = weakref.WeakKeyDictionary()
_CACHES_LOCK = threading.Lock()


def _counts(tokenizer: Tokenizer, store: str, thread: ScopeInfo) -> _OwnCounts:
    """The thread's line counts of this tokenizer (one cache per tokenizer object: a count is only true for its
    vocabulary). The thread as first seen: one erased, or deleted, and made again under its ids (by whoever takes the
    tenant id next) starts with none of the counts its cards left (a regression trial)."""
    s = thread.scope
    with _CACHES_LOCK:
        found = _CACHES.get(tokenizer)
        if found is None:
            found = _CACHES[tokenizer] = _LineCounts(tokenizer)
        return found.of((store, s.app_id, s.tenant_id, s.agent_id, s.run_id, thread.first_seen.isoformat()))
