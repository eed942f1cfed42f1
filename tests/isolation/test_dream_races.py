"""A dream racing the writes of its tenant (a regression trial of session 19): a run deleted, a memory deleted
and written again under its id (in another agent too), and a second delivery of the same dream job. What the
dream read and is gone by the time it wrote leaves no copy and no memory made from it; an action another
delivery applied keeps its state and its undo."""
import json
from dataclasses import replace
from datetime import datetime, timedelta, timezone


from memlane.domain.models import DreamActionKind, DreamMode
from memlane.dream.rules import RulesEngine
from memlane.repository import tenant_pk
from memlane.services import dream, erase, explicit, ingest, memories, stores

APP, TENANT = "app", "u1"
SCOPE = {"app_id": APP, "tenant_id": TENANT, "agent_id": "bot", "run_id": "r1"}
TENANT_SCOPE = {"app_id": APP, "tenant_id": TENANT}
T0 = datetime(2024, 3, 1, 9, tzinfo=timezone.utc)
STEPS = "1. Unplug the router.\n2. Wait 30 seconds.\n3. Plug it back in and wait for the green light."


def _items(deps):
    return deps.table.query(tenant_pk("s", APP, TENANT), limit=1000).items


def test_a_skill_from_a_run_deleted_while_the_dream_ran_does_not_come_back(service, deps, monkeypatch):
    _two_runs_asking_for_the_router_steps(deps)
    service.drain()
    real, fired = RulesEngine.propose, []

    def run_deleted_meanwhile(self, data):
        fired.append(True)
        erase.delete_run(deps, "s", scope={**SCOPE, "run_id": "r2"})
        return real(self, data)

    monkeypatch.setattr(RulesEngine, "propose", run_deleted_meanwhile)
    dream.start(deps, "s", scope=TENANT_SCOPE, mode=DreamMode.SAFE_AUTO, threshold=0.0,
                kinds=[DreamActionKind.EMIT_SKILL], sync=True)
    assert fired
    left = [i for i in _items(deps) if i["sk"].startswith("MEM#") and i["scope"]["run_id"] == "r2"]
    # The run r2 was deleted (its messages and run-scoped memories); nothing in its scope may come back.
    assert left == [], f"memory in deleted run r2 came back: {[(i['memory_id'], i['text'][:60], i['evidence']) for i in left]}"
    docs = [d for d in deps.index.documents("s") if getattr(d, "scope", None) and d.scope.run_id == "r2"]
    assert docs == []


def test_a_memory_deleted_and_rewritten_under_its_id_while_the_dream_ran_leaves_no_copy(service, deps, monkeypatch):
    deps.settings = replace(deps.settings, consolidate_on_write=False)
    stores.create(deps, name="s")
    explicit.write(deps, "s", scope=SCOPE, memories=[
        {"text": "Ann has a peanut allergy.", "memory_id": "secret"}])
    explicit.write(deps, "s", scope={**SCOPE, "run_id": "r2"}, memories=[
        {"text": "Ann is allergic to peanuts.", "memory_id": "copy"}])
    real, fired = RulesEngine.propose, []

    def deleted_and_rewritten(self, data):
        fired.append(True)
        memories.delete(deps, "s", app_id=APP, tenant_id=TENANT, memory_id="secret")
        explicit.write(deps, "s", scope=SCOPE, memories=[{"text": "Ann likes tea.", "memory_id": "secret"}])
        return real(self, data)

    monkeypatch.setattr(RulesEngine, "propose", deleted_and_rewritten)
    dream.start(deps, "s", scope=TENANT_SCOPE, mode=DreamMode.PROPOSAL, kinds=[DreamActionKind.MERGE], sync=True)
    assert fired
    actions = [i for i in _items(deps) if i["sk"].startswith("DACT#")]
    assert actions, "expected the dream to record a merge of the two copies"
    # The deleted memory's words ("peanut allergy") must leave no copy in any record of the tenant.
    kept = [(a["action_id"], a["status"]) for a in actions if "peanut allergy" in json.dumps(a, default=str)]
    assert kept == [], f"dream actions keep the deleted memory's text: {kept}"


def test_a_merge_does_not_apply_to_a_memory_rewritten_under_its_id_in_another_agent(service, deps, monkeypatch):
    """The dream proposed a merge of two memories of agent 'bot'; meanwhile one was deleted and its id written
    again, same words, for agent 'travel'. Apply checks only status and text, so it folds the other agent's new
    memory into bot's (merges are per agent: a search narrowed to 'travel' then loses the fact)."""
    deps.settings = replace(deps.settings, consolidate_on_write=False)
    stores.create(deps, name="s")
    explicit.write(deps, "s", scope=SCOPE, memories=[{"text": "Ann has a peanut allergy.", "memory_id": "a1"}])
    explicit.write(deps, "s", scope={**SCOPE, "run_id": "r2"},
                   memories=[{"text": "Ann is allergic to peanuts.", "memory_id": "a2"}])
    real, fired = RulesEngine.propose, []

    def moved_meanwhile(self, data):
        fired.append(True)
        memories.delete(deps, "s", app_id=APP, tenant_id=TENANT, memory_id="a1")
        explicit.write(deps, "s", scope={**SCOPE, "agent_id": "travel"},
                       memories=[{"text": "Ann has a peanut allergy.", "memory_id": "a1"}])
        return real(self, data)

    monkeypatch.setattr(RulesEngine, "propose", moved_meanwhile)
    task = dream.start(deps, "s", scope=TENANT_SCOPE, mode=DreamMode.SAFE_AUTO, threshold=0.0,
                       kinds=[DreamActionKind.MERGE], sync=True)
    assert fired
    acts, _ = dream.list_actions(deps, "s", task.task_id)
    assert acts, "the seed needs a merge"
    a1 = deps.repo.get_memory("s", APP, TENANT, "a1")
    assert a1.scope.agent_id == "travel"
    assert a1.status == "active", f"travel's new memory was folded into bot's: {a1.status} by {a1.superseded_by}"


def test_a_redelivered_dream_job_does_not_overwrite_an_applied_action(service, deps, monkeypatch):
    """Two deliveries of one dream job run at once (its lease ran out: 'as before, both run'). The late one
    listed the task's actions before the first stored them; its put_action is unconditional, so it writes the
    action back PENDING over the first's APPLIED record (its undo images lost), then finds it stale."""
    from memlane.domain.models import DreamActionStatus, MemoryStatus
    from memlane.repository import Repository

    deps.settings = replace(deps.settings, consolidate_on_write=False)
    stores.create(deps, name="s")
    explicit.write(deps, "s", scope=SCOPE, memories=[{"text": "Ann has a peanut allergy.", "memory_id": "a1"}])
    explicit.write(deps, "s", scope={**SCOPE, "run_id": "r2"},
                   memories=[{"text": "Ann is allergic to peanuts.", "memory_id": "a2"}])
    task = dream.start(deps, "s", scope=TENANT_SCOPE, mode=DreamMode.SAFE_AUTO, threshold=0.0,
                       kinds=[DreamActionKind.MERGE])
    real, nested = Repository.claim_action, []

    def other_delivery_first(self, action, ordinal):
        if not nested:
            nested.append(True)
            dream.run(deps, "s", task.task_id)  # the other delivery records, applies and finishes first
        return real(self, action, ordinal)

    monkeypatch.setattr(Repository, "claim_action", other_delivery_first)
    dream.run(deps, "s", task.task_id)
    assert nested
    (merge,) = dream.list_actions(deps, "s", task.task_id)[0]
    superseded = [m.memory_id for m in deps.repo.iter_memories("s", APP, TENANT) if m.status == MemoryStatus.SUPERSEDED]
    assert superseded  # the merge did change the memories
    assert merge.status == DreamActionStatus.APPLIED and merge.undo, (merge.status, merge.error, merge.undo)
    dream.undo_action(deps, "s", merge.action_id)  # and it can be undone


def _two_runs_asking_for_the_router_steps(deps) -> None:
    stores.create(deps, name="s")
    for run, day, ask in (("r1", 0, "How do I reset my router?"), ("r2", 3, "How can I reset the router?")):
        ingest.add(deps, "s", scope={**SCOPE, "run_id": run}, sync=True, messages=[
            {"role": "user", "content": ask, "created_at": T0 + timedelta(days=day)},
            {"role": "assistant", "content": STEPS, "created_at": T0 + timedelta(days=day, seconds=5)},
            {"role": "user", "content": "That worked, thanks!", "created_at": T0 + timedelta(days=day, seconds=60)}])


def test_a_proposed_skill_from_a_run_deleted_while_the_dream_ran_keeps_no_copy(service, deps, monkeypatch):
    _two_runs_asking_for_the_router_steps(deps)
    service.drain()
    real = RulesEngine.propose

    def run_deleted_meanwhile(self, data):
        erase.delete_run(deps, "s", scope={**SCOPE, "run_id": "r2"})
        return real(self, data)

    monkeypatch.setattr(RulesEngine, "propose", run_deleted_meanwhile)
    dream.start(deps, "s", scope=TENANT_SCOPE, mode=DreamMode.PROPOSAL, kinds=[DreamActionKind.EMIT_SKILL], sync=True)
    actions = [i for i in _items(deps) if i["sk"].startswith("DACT#")]
    assert actions and not [a["action_id"] for a in actions if "Unplug the router" in json.dumps(a, default=str)]


def test_a_new_add_in_a_run_deleted_and_made_again_while_the_dream_ran_keeps_what_it_said(service, deps,
                                                                                          monkeypatch):
    """The first fix redacted every record of the deleted run's scope, the new add's too: its task's
    metadata, and so its memories', were wiped (session 19's second regression trial)."""
    _two_runs_asking_for_the_router_steps(deps)
    service.drain()
    real = RulesEngine.propose

    def made_again(self, data):
        erase.delete_run(deps, "s", scope={**SCOPE, "run_id": "r2"})
        ingest.add(deps, "s", scope={**SCOPE, "run_id": "r2"}, request_id="new-1", text="I moved to Denver last week.",
                   metadata={"source": "crm"})
        return real(self, data)

    monkeypatch.setattr(RulesEngine, "propose", made_again)
    dream.start(deps, "s", scope=TENANT_SCOPE, mode=DreamMode.SAFE_AUTO, threshold=0.0,
                kinds=[DreamActionKind.EMIT_SKILL], sync=True)
    assert deps.repo.find_task("s", APP, TENANT, "new-1").metadata == {"source": "crm"}
    service.drain()
    made = [m for m in deps.repo.iter_memories("s", APP, TENANT) if m.request_id == "new-1"]
    assert made and all(m.metadata.get("source") == "crm" for m in made)


def test_two_deliveries_proposing_other_actions_at_one_place_keep_each_its_own(service, deps):
    """A task's actions are stored in proposal order; two deliveries of one job whose answers differ (a model's,
    or a write-time job retried after the store's instructions changed) propose another action at the same
    place. The item was named by the place alone: the second action's pointer led to the first's item, so
    applying or undoing "it" acted on the other."""
    from memlane.domain.models import DreamAction, DreamActionStatus
    from memlane.domain.scope import Scope

    stores.create(deps, name="demo")
    scope = Scope(app_id="app", tenant_id="u1", agent_id="bot", run_id="r1")
    when = datetime(2024, 1, 1, tzinfo=timezone.utc)

    def action(action_id: str, target: str) -> DreamAction:
        return DreamAction(action_id=action_id, task_id="req-1", store="demo", kind=DreamActionKind.DELETE,
                           status=DreamActionStatus.PENDING, confidence=0.9, rationale="r", scope=scope,
                           target_ids=[target], created_at=when, updated_at=when)

    first, second = action("act-first", "m1"), action("act-second", "m2")
    for a in (first, second):
        deps.repo.put_action(a, deps.repo.claim_action(a, 0))
    assert deps.repo.get_action("demo", "act-first").target_ids == ["m1"]
    assert deps.repo.get_action("demo", "act-second").target_ids == ["m2"]
