"""Knowledge-update benchmark: does memlane tell the agent what is true *now*?

Each case of ``tests/data/knowledge_updates.jsonl`` is a short history of one tenant: a fact said
in one conversation, then changed, retracted, restated or joined by another fact that can also
hold, in a later conversation (sometimes with another agent, sometimes imported out of order).
Every case is ingested into its own tenant through the real service path (``ingest.add`` with
inline extraction, no dream), then its question is asked through the default search. Cases marked
``twin`` also give a second tenant the same old facts, which must not be touched.

The cases run three times, each in a fresh data directory, with the same deterministic extractor:

- **rules**: write-time consolidation by the rules (policies/consolidation.py), no LLM;
- **scripted LLM**: the LLM consolidation path (services/consolidate_llm.py) with a scripted model at
  the LLM port that answers from the case's labels (bench/scripted_llm.py). It measures that path's
  plumbing — prompt, strict parse, validation, apply, search — not a model's judgement;
- **faulty LLM**: the same path with a scripted model that answers wrongly (an id it was not shown,
  malformed JSON, an invalid repair): every candidate must be ADDed — nothing lost (no step left
  without an active memory), nothing superseded.

Per case (pure functions below, unit-tested in tests/unit/bench/test_updates.py):

- **current-first** (update, retract): the first result comes from the turn that holds the
  current state and names its value.
- **stale-hidden** (update, retract): no result of the default search is the memory of an outdated
  fact (a memory citing the first message of an outdated turn — the fact; other chatter of the
  same conversation, "anyway, that's where things stand", is not outdated).
- **false-supersede** (keep): a fact that still holds was superseded, deleted or dropped as a
  duplicate — every turn of the case that produced a memory must still have an active one.
- **unextracted**: turns the extractor made no memory of at all (a limit of extraction, not of
  consolidation; counted apart so the rates above stay about what they name).
- **single-copy** (same): a restatement of the same value left one active memory of it.
- **cross-tenant**: a twin's memory changed status, or a search returned another tenant's memory
  (must be 0).
- **non-add** and **inactive-steps** (counts, for the faulty LLM): decisions other than ADD, and steps
  that produced memories of which none is active.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Sequence

from .common import Progress, machine, table

STORE = "updates"
APP = "updates"
TOP_K = 5
DEFAULT_DATA = Path(__file__).resolve().parents[3] / "tests" / "data" / "knowledge_updates.jsonl"
METRICS = ("current_first", "stale_hidden", "false_supersede", "single_copy", "unextracted", "cross_tenant",
           "non_add", "inactive_steps")
_COUNTS = ("unextracted", "cross_tenant", "non_add", "inactive_steps")
_RATES = ("current_first", "stale_hidden", "false_supersede", "single_copy")
PATHS = ("rules", "scripted", "faulty")


# -- data ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Step:
    at: datetime
    run: str
    agent: str
    messages: tuple[dict[str, Any], ...]
    untimed: tuple[int, ...] = ()  # messages sent without their own created_at

    def payload(self) -> list[dict[str, Any]]:
        return [{**m, **({} if i in self.untimed else {"created_at": self.at})} for i, m in enumerate(self.messages)]


@dataclass(frozen=True)
class Case:
    id: str
    kind: str
    expect: str  # update | retract | keep | same
    steps: tuple[Step, ...]
    question: str
    current: str | None = None
    current_step: int | None = None
    stale_steps: tuple[int, ...] = ()
    keep_steps: tuple[int, ...] = ()
    twin: bool = False
    ingest_order: tuple[int, ...] = ()
    tags: tuple[str, ...] = ()

    @property
    def order(self) -> tuple[int, ...]:
        return self.ingest_order or tuple(range(len(self.steps)))


def load(path: Path) -> list[Case]:
    out = []
    for line in Path(path).read_text().splitlines():
        if not line.strip():
            continue
        raw = json.loads(line)
        steps = tuple(Step(at=datetime.fromisoformat(s["at"].replace("Z", "+00:00")), run=s.get("run", "conv-1"),
                           agent=s.get("agent", "assistant"), messages=tuple(s["messages"]),
                           untimed=tuple(s.get("untimed", ()))) for s in raw["steps"])
        out.append(Case(id=raw["id"], kind=raw["kind"], expect=raw["expect"], steps=steps, question=raw["question"],
                        current=raw.get("current"), current_step=raw.get("current_step"),
                        stale_steps=tuple(raw.get("stale_steps", ())), keep_steps=tuple(raw.get("keep_steps", ())),
                        twin=bool(raw.get("twin")), ingest_order=tuple(raw.get("ingest_order", ())),
                        tags=tuple(raw.get("tags", ()))))
    return out


# -- what one case left behind, and its scores (pure) --------------------------------------------
@dataclass(frozen=True)
class Hit:
    request_id: str | None
    tenant_id: str
    text: str
    evidence: tuple[str, ...] = ()


@dataclass
class Observation:
    """What a case left behind: the default search's hits, and per step the statuses of the
    memories its task produced (an empty list: the step added nothing of its own)."""

    tenant: str
    hits: list[Hit]
    step_requests: list[str]  # request id of each step, in the case's step order
    step_statuses: list[list[str]]  # statuses of the memories each step's task added
    step_actions: list[list[str]] = field(default_factory=list)  # each step's task outcomes (ADD, NOOP, ...)
    step_facts: list[str] = field(default_factory=list)  # id of each step's first message (its fact)
    active_with_current: int = 0  # active memories of the tenant naming the current value
    twin_tenant: str | None = None
    twin_changed: int = 0  # twin memories whose status or text changed
    twin_hits: list[Hit] = field(default_factory=list)


def score(case: Case, obs: Observation) -> dict[str, float]:
    """The case's metrics, each 0 or 1 (absent when the metric does not apply to the case)."""
    out: dict[str, float] = {}
    if case.expect in ("update", "retract"):
        assert case.current_step is not None
        current_rid = obs.step_requests[case.current_step]
        stale = {obs.step_facts[i] for i in case.stale_steps}
        first = obs.hits[0] if obs.hits else None
        out["current_first"] = float(first is not None and first.request_id == current_rid
                                     and (case.current or "").lower() in first.text.lower())
        out["stale_hidden"] = float(not any(stale & set(h.evidence) for h in obs.hits))
    elif case.expect == "keep":
        lost = any("active" not in statuses for i, statuses in enumerate(obs.step_statuses)
                   if i in case.keep_steps and obs.step_actions[i])
        out["false_supersede"] = float(lost)
    elif case.expect == "same":
        out["single_copy"] = float(obs.active_with_current == 1)
    out["unextracted"] = float(sum(1 for actions in obs.step_actions if not actions))
    out["non_add"] = float(sum(1 for actions in obs.step_actions for a in actions if a != "ADD"))
    out["inactive_steps"] = float(sum(1 for actions, statuses in zip(obs.step_actions, obs.step_statuses)
                                      if actions and "active" not in statuses))
    foreign = [h for h in obs.hits if h.tenant_id != obs.tenant]
    if obs.twin_tenant is not None:
        foreign += [h for h in obs.twin_hits if h.tenant_id != obs.twin_tenant]
    out["cross_tenant"] = float(len(foreign) + obs.twin_changed)
    return out


def aggregate(scored: Sequence[tuple[Case, dict[str, float]]]) -> dict[str, Any]:
    """Per kind and overall: the mean of each rate over the cases it applies to, cross-tenant summed."""
    groups: dict[str, list[dict[str, float]]] = defaultdict(list)
    for case, s in scored:
        groups[case.kind].append(s)
        groups["all"].append(s)

    def summary(rows: list[dict[str, float]]) -> dict[str, Any]:
        out: dict[str, Any] = {"cases": len(rows)}
        for m in METRICS:
            values = [r[m] for r in rows if m in r]
            if m in _COUNTS:
                out[m] = int(sum(values))
            else:
                out[m] = round(sum(values) / len(values), 3) if values else None
                out[f"{m}_n"] = len(values)
        return out

    return {k: summary(v) for k, v in sorted(groups.items(), key=lambda kv: (kv[0] == "all", kv[0]))}


# -- running a case through the service ----------------------------------------------------------
def _scope(tenant: str, step: Step) -> dict[str, str]:
    return {"app_id": APP, "tenant_id": tenant, "agent_id": step.agent, "run_id": step.run}


def _hits(deps: Any, tenant: str, question: str) -> list[Hit]:
    from ..services.search import search

    found = search(deps, STORE, query=question, scope={"app_id": APP, "tenant_id": tenant}, top_k=TOP_K)
    return [Hit(h.memory.request_id, h.memory.scope.tenant_id, h.memory.text, tuple(h.memory.evidence))
            for h in found]


OnStep = Callable[[Case, int], None]  # told before each step is added (the scripted model's labels)


def _ingest(deps: Any, case: Case, tenant: str, steps: Sequence[int],
            on_step: OnStep | None = None) -> dict[int, str]:
    from ..services import ingest

    rids = {}
    for i in steps:
        step = case.steps[i]
        if on_step is not None:
            on_step(case, i)
        task = ingest.add(deps, STORE, scope=_scope(tenant, step), messages=step.payload(), sync=True)
        rids[i] = task.request_id
    return rids


def _memories(deps: Any, tenant: str, request_id: str) -> list[Any]:
    task = deps.repo.get_task(STORE, APP, tenant, request_id)
    ids = [o.memory_id for o in task.outcomes if o.action.value != "NOOP"]
    return deps.repo.get_memories(STORE, APP, tenant, ids) if ids else []


def observe(deps: Any, case: Case, on_step: OnStep | None = None) -> Observation:
    tenant = case.id
    twin = f"{case.id}-twin" if case.twin else None
    twin_before: dict[str, tuple[str, str]] = {}
    if twin is not None:
        # The twin says the same old things first, so the main tenant's update comes after them.
        old = [i for i in case.order if i != case.current_step] if case.current_step is not None else []
        for rid in _ingest(deps, case, twin, old, on_step).values():
            twin_before.update({m.memory_id: (str(m.status), m.text) for m in _memories(deps, twin, rid)})
    rids = _ingest(deps, case, tenant, case.order, on_step)
    requests = [rids[i] for i in range(len(case.steps))]
    statuses = [[str(m.status) for m in _memories(deps, tenant, rid)] for rid in requests]
    actions = [[o.action.value for o in deps.repo.get_task(STORE, APP, tenant, rid).outcomes] for rid in requests]
    active_with_current = 0
    if case.current:
        mems = [m for rid in requests for m in _memories(deps, tenant, rid)]
        active_with_current = len({m.memory_id for m in mems
                                   if str(m.status) == "active" and case.current.lower() in m.text.lower()})
    facts = [deps.repo.get_task(STORE, APP, tenant, rid).message_ids[0] for rid in requests]
    obs = Observation(tenant=tenant, hits=_hits(deps, tenant, case.question), step_requests=requests, step_facts=facts,
                      step_statuses=statuses, step_actions=actions, active_with_current=active_with_current)
    if twin is not None:
        after = {m.memory_id: (str(m.status), m.text)
                 for m in deps.repo.get_memories(STORE, APP, twin, list(twin_before))}
        obs.twin_tenant = twin
        obs.twin_changed = sum(1 for mid, state in twin_before.items() if after.get(mid) != state)
        obs.twin_hits = _hits(deps, twin, case.question)
    return obs


def run_path(path: str, cases: Sequence[Case], embedder_name: str, embedder: Any = None) -> dict[str, Any]:
    """The cases through one path (rules, scripted, faulty), in a fresh data directory."""
    from ..bootstrap import build_local
    from ..config import Settings
    from ..services import stores
    from . import scripted_llm

    tmp = tempfile.TemporaryDirectory(prefix="memlane-updates-")
    settings = Settings.from_env(env={}, data_dir=Path(tmp.name) / "memlane", table="sqlite", index="embedded",
                                 **({"embedder": "hashing"} if embedder_name == "hashing" else {}))
    service = build_local(settings, embedder=embedder)
    deps, on_step, llm = service.deps, None, None
    if path != "rules":
        truth = scripted_llm.Truth()
        llm = (scripted_llm.ScriptedLLM if path == "scripted" else scripted_llm.FaultyLLM)(truth)
        deps = dataclasses.replace(deps, llm=llm, extractor=scripted_llm.LabellingExtractor(deps.extractor, truth))
        on_step = truth.begin
    scored, failures = [], []
    progress = Progress(len(cases), f"cases ({path})")
    try:
        stores.create(deps, name=STORE, description="knowledge-update benchmark")
        for case in cases:
            s = score(case, observe(deps, case, on_step))
            scored.append((case, s))
            if any(s.get(m) == 0.0 for m in ("current_first", "stale_hidden", "single_copy")) \
                    or s.get("false_supersede") or s.get("cross_tenant"):
                failures.append({"id": case.id, **s})
            progress.update(1, case.id)
    finally:
        progress.close()
        service.close()
        tmp.cleanup()
    out: dict[str, Any] = {"results": aggregate(scored), "failures": failures}
    if llm is not None:
        out["llm"] = dataclasses.asdict(llm.counts)
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    started = time.monotonic()
    cases = load(args.data)
    if args.kinds:
        cases = [c for c in cases if c.kind in set(args.kinds.split(","))]
    embedder = None
    if args.embedder == "minilm":
        from .common import minilm

        embedder = minilm()
    paths = [p for p in args.paths.split(",") if p] if getattr(args, "paths", None) else list(PATHS)
    unknown = set(paths) - set(PATHS)
    if unknown:
        raise ValueError(f"unknown paths {sorted(unknown)}; choose from {', '.join(PATHS)}")
    return {"dataset": Path(args.data).name, "cases": len(cases), "embedder": args.embedder, "top_k": TOP_K,
            "paths": {p: run_path(p, cases, args.embedder, embedder) for p in paths},
            "machine": machine(), "elapsed_s": round(time.monotonic() - started, 1)}


_SHORT = {"current_first": "current-first", "stale_hidden": "stale-hidden", "false_supersede": "false-supersede",
          "single_copy": "single-copy", "cross_tenant": "cross-tenant"}


def format_report(report: dict[str, Any]) -> str:
    """Per kind, each metric with its value on each path side by side (rules / scripted LLM), then the
    faulty LLM's fail-safe."""
    paths = report["paths"]
    side = [p for p in ("rules", "scripted") if p in paths]
    kinds = list(paths[side[0]]["results"]) if side else []
    rows = []
    for kind in kinds:
        row: list[Any] = [kind, paths[side[0]]["results"][kind]["cases"]]
        for m in (*_RATES, "unextracted", "cross_tenant"):
            values = [paths[p]["results"][kind][m] for p in side]
            row.append(" / ".join("-" if v is None else f"{v:.3f}" if isinstance(v, float) else str(v)
                                  for v in values))
        rows.append(row)
    head = (f"knowledge updates ({report['embedder']} embedder, top {report['top_k']}); each cell: "
            + " / ".join({"rules": "rules", "scripted": "scripted LLM"}[p] for p in side))
    out = [head, ""]
    if side:
        out.append(table(["kind", "cases", *(_SHORT.get(m, m) for m in (*_RATES, "unextracted", "cross_tenant"))],
                         rows))
    if "scripted" in paths:
        out.append("\nThe scripted LLM answers from each case's labels: it measures the LLM path's plumbing (prompt "
                   "-> strict parse -> validation -> apply -> search), not a model's judgement. "
                   + _calls(paths["scripted"]))
    if "faulty" in paths:
        a = paths["faulty"]["results"]["all"]
        out.append("\nFaulty scripted LLM (in turn: names a memory it was not shown, malformed JSON, an invalid "
                   f"repair) — the fail-safe: decisions other than ADD {a['non_add']}, steps left without an active "
                   f"memory {a['inactive_steps']}, false-supersede {a['false_supersede']}, cross-tenant "
                   f"{a['cross_tenant']}; the old fact stays visible (stale-hidden {a['stale_hidden']}, current-first "
                   f"{a['current_first']}). " + _calls(paths["faulty"]))
    return "\n".join(out)


def _calls(path: dict[str, Any]) -> str:
    c = path.get("llm", {})
    return f"({c.get('calls', 0)} calls, {c.get('repairs', 0)} repair turns, {c.get('unusable', 0)} answers failed the strict parse)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", type=Path, default=Path(os.environ.get("MEMLANE_UPDATES", DEFAULT_DATA)),
                   help="knowledge-update cases (JSON lines)")
    p.add_argument("--json", dest="json_out", type=Path, help="write the full report here")
    p.add_argument("--embedder", choices=["minilm", "hashing"], default="minilm")
    p.add_argument("--kinds", help="comma-separated subset of kinds")
    p.add_argument("--failures", action="store_true", help="list the cases that failed a metric")
    p.add_argument("--paths", default=",".join(PATHS),
                   help="comma-separated: rules (no LLM), scripted (LLM path, scripted model), faulty (its fail-safe)")


def main(args: argparse.Namespace) -> int:
    if not Path(args.data).is_file():
        print(f"error: no knowledge-update cases at {args.data} (pass --data PATH)", file=sys.stderr)
        return 2
    report = run(args)
    print(format_report(report))
    if args.failures:
        for path, r in report["paths"].items():
            for f in r["failures"]:
                print(json.dumps({"path": path, **f}))
    print(f"\n{report['cases']} cases; {report['elapsed_s']} s")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(report, indent=2) + "\n")
    return 0
