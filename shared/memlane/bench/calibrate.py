"""Calibrate the dream's `safe_auto` confidences on the knowledge-update test set.

Each case of ``tests/data/knowledge_updates.jsonl`` (bench/updates.py loads it) is ingested with
write-time consolidation OFF — as memories written with MEMLANE_CONSOLIDATE_ON_WRITE=false, or
before consolidation existed — then one dream runs over the tenant in `safe_auto` mode at the
threshold. Every UPDATE / DELETE / MERGE it proposes is judged against the case's truth (`judge`):

- a change case (update, retract): right when it closes only outdated statements, kept by the
  current one (or by a later outdated one: Boston → Denver in Boston → Denver → Austin);
- a non-conflict (keep): wrong whenever it closes a fact that still holds;
- a restatement (same): right when it folds one statement of the fact into another.

It prints the reliability table (confidence bucket → proposals, precision), the same per kind of
evidence (policies/consolidation.py `Evidence`: each kind has one confidence, set from this table),
what passed the threshold (precision, recall over the cases that call for an action, false-supersede
over the non-conflicts), and the update benchmark's rates (bench/updates.py `score`) after write time
only, after the dream only, and after both — side by side, one run.

The test set holds few statements that merely look alike, so it cannot show what fires by mistake.
`--conversations PATH` (LoCoMo data, as `bench locomo --data`) adds that: long real conversations
where a fact rarely changes, ingested the same way and dreamed over; every UPDATE / DELETE they get
is listed per kind of evidence (`--wrong` prints them) for review — the false alarms a kind raises
in ordinary talk, per 1,000 memories.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Sequence

from . import updates
from .common import Progress, machine, table

BUCKETS = (0.0, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 1.0001)
MODES = ("write-time", "dream-only", "write-time + dream")
RATES = ("current_first", "stale_hidden", "false_supersede", "single_copy", "cross_tenant")
CHANGES = ("UPDATE", "DELETE", "MERGE")
_EVIDENCE = re.compile(r"^\w+ \((?P<evidence>[\w-]+)\)")


# -- judging a proposal (pure) -------------------------------------------------------------------
@dataclass(frozen=True)
class Judged:
    case: str
    expect: str
    kind: str  # UPDATE, DELETE, MERGE
    evidence: str  # the decision's kind of evidence (from its rationale)
    confidence: float
    correct: bool
    applied: bool
    rationale: str = ""


def evidence_of(rationale: str) -> str:
    """The kind of evidence a rules proposal names first in its rationale ("UPDATE (value): ...")."""
    m = _EVIDENCE.match(rationale)
    return m.group("evidence") if m else "other"


def judge(case: updates.Case, target_steps: Sequence[int], keep_step: int | None) -> bool:
    """Whether an action closing memories of `target_steps`, kept by a memory of `keep_step`, is right
    for `case` (steps are indices into `case.steps`)."""
    if not target_steps:
        return False
    if case.expect in ("update", "retract"):
        outdated = set(case.stale_steps)
        if not set(target_steps) <= outdated or keep_step is None:
            return False
        if keep_step != case.current_step and keep_step not in outdated:
            return False
        return all(case.steps[keep_step].at > case.steps[t].at for t in target_steps)
    if case.expect == "keep":
        return not set(target_steps) & set(case.keep_steps)
    if case.expect == "same":
        return keep_step is not None and keep_step not in target_steps
    return False


# -- tables (pure) ---------------------------------------------------------------------------------
def reliability(judged: Sequence[Judged], buckets: Sequence[float] = BUCKETS) -> list[dict[str, Any]]:
    """Per confidence bucket [lo, hi): proposals and the share of them that were right."""
    out = []
    for lo, hi in zip(buckets, buckets[1:]):
        rows = [j for j in judged if lo <= j.confidence < hi]
        right = sum(j.correct for j in rows)
        out.append({"bucket": f"[{lo:.2f}, {min(hi, 1.0):.2f}{']' if hi > 1 else ')'}", "proposals": len(rows),
                    "right": right, "precision": round(right / len(rows), 3) if rows else None})
    return out


def by_evidence(judged: Sequence[Judged]) -> list[dict[str, Any]]:
    """Per kind of evidence: its confidence, proposals, precision and its Wilson lower bound (95%)."""
    out = []
    for evidence in sorted({j.evidence for j in judged}):
        rows = [j for j in judged if j.evidence == evidence]
        right = sum(j.correct for j in rows)
        out.append({"evidence": evidence, "confidence": sorted({j.confidence for j in rows}),
                    "proposals": len(rows), "right": right, "precision": round(right / len(rows), 3),
                    "lower_bound": round(wilson_lower(right, len(rows)), 3)})
    return out


def suggest(judged: Sequence[Judged], alarms: dict[str, int] | None = None) -> dict[str, float]:
    """The confidence each kind of evidence should carry: per idea (`consolidation.FAMILY`), the precision
    it would have with one more mistake than was seen — counting each change proposed in real
    conversations (`alarms`, per kind) as a mistake — rounded down to 0.05, at most 0.95; the weaker
    form of an idea 0.05 less."""
    from ..policies.consolidation import FAMILY

    alarms = alarms or {}
    seen = {j.evidence for j in judged if j.evidence in FAMILY} | {e for e in alarms if e in FAMILY}
    right: dict[str, int] = {}
    total: dict[str, int] = {}
    for j in judged:
        if j.evidence in FAMILY:
            family = FAMILY[j.evidence][0]
            right[family] = right.get(family, 0) + int(j.correct)
            total[family] = total.get(family, 0) + 1
    for evidence, n in alarms.items():
        if evidence in FAMILY:
            total[FAMILY[evidence][0]] = total.get(FAMILY[evidence][0], 0) + n
    out = {}
    for evidence in sorted(seen):
        family, weaker = FAMILY[evidence]
        precision = right.get(family, 0) / (total.get(family, 0) + 1)
        conf = min(0.95, math.floor(round(precision * 20, 6)) / 20) - (0.05 if weaker else 0.0)
        out[evidence] = round(max(conf, 0.0), 2)
    return out


def wilson_lower(right: int, n: int, z: float = 1.96) -> float:
    """The lower end of the Wilson score interval: how low the precision may be, given few samples."""
    if n == 0:
        return 0.0
    p = right / n
    centre = p + z * z / (2 * n)
    margin = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (centre - margin) / (1 + z * z / n)


def at_threshold(judged: Sequence[Judged], cases: Sequence[updates.Case]) -> dict[str, Any]:
    """What `safe_auto` applied: precision, recall over the cases that call for an action (update,
    retract, same), false-supersede over the non-conflicts (keep)."""
    applied = [j for j in judged if j.applied]
    wanted = [c for c in cases if c.expect in ("update", "retract", "same")]
    keep = [c for c in cases if c.expect == "keep"]
    found = {j.case for j in applied if j.correct}
    wrong_keep = {j.case for j in applied if j.expect == "keep" and not j.correct}
    return {"applied": len(applied), "right": sum(j.correct for j in applied),
            "precision": round(sum(j.correct for j in applied) / len(applied), 3) if applied else None,
            "recall": round(sum(c.id in found for c in wanted) / len(wanted), 3) if wanted else None,
            "false_supersede": round(len(wrong_keep) / len(keep), 3) if keep else None}


# -- running the cases -----------------------------------------------------------------------------
def _task(deps: Any, tenant: str, request_id: str) -> Any:
    return deps.repo.get_task(updates.STORE, updates.APP, tenant, request_id)  # request ids are per tenant


def _memories(deps: Any, tenant: str, request_id: str) -> list[Any]:
    """The memories a step's task wrote (its NOOPs wrote nothing)."""
    ids = [o.memory_id for o in _task(deps, tenant, request_id).outcomes if o.action.value != "NOOP"]
    return deps.repo.get_memories(updates.STORE, updates.APP, tenant, ids) if ids else []


def _run_case(deps: Any, case: updates.Case, *, dream: bool, threshold: float) -> tuple[dict[str, float],
                                                                                      list[Judged]]:
    """Ingest the case (and its twin), dream over the tenant if asked, and observe what search and
    the table show afterwards — the same observation bench/updates.py makes."""
    from ..domain.models import DreamActionKind, DreamActionStatus, DreamMode
    from ..services import dream as dreams

    tenant, twin = case.id, (f"{case.id}-twin" if case.twin else None)
    twin_before: dict[str, tuple[str, str]] = {}
    if twin is not None:
        old = [i for i in case.order if i != case.current_step] if case.current_step is not None else []
        for rid in updates._ingest(deps, case, twin, old).values():
            twin_before.update({m.memory_id: (str(m.status), m.text) for m in _memories(deps, twin, rid)})
    rids = updates._ingest(deps, case, tenant, case.order)
    requests = [rids[i] for i in range(len(case.steps))]
    judged: list[Judged] = []
    if dream:
        task = dreams.start(deps, updates.STORE, scope={"app_id": updates.APP, "tenant_id": tenant}, sync=True,
                            mode=DreamMode.SAFE_AUTO, threshold=threshold,
                            kinds=[DreamActionKind.UPDATE, DreamActionKind.DELETE, DreamActionKind.MERGE])
        step_of = {rid: i for i, rid in enumerate(requests)}
        for a in dreams.list_actions(deps, updates.STORE, task.task_id, limit=1000)[0]:
            who = {m.memory_id: step_of.get(m.request_id or "") for m in a.before}
            targets = [who.get(t) for t in a.target_ids]
            keep = who.get(a.keep_id) if a.keep_id else None
            ok = None not in targets and judge(case, [t for t in targets if t is not None], keep)
            judged.append(Judged(case.id, case.expect, str(a.kind), evidence_of(a.rationale), a.confidence, ok,
                                 a.status == DreamActionStatus.APPLIED, a.rationale))
    statuses = [[str(m.status) for m in _memories(deps, tenant, rid)] for rid in requests]
    tasks = [_task(deps, tenant, rid) for rid in requests]
    actions = [[o.action.value for o in t.outcomes] for t in tasks]
    current = 0
    if case.current:
        mems = [m for rid in requests for m in _memories(deps, tenant, rid)]
        current = len({m.memory_id for m in mems
                       if str(m.status) == "active" and case.current.lower() in m.text.lower()})
    obs = updates.Observation(tenant=tenant, hits=updates._hits(deps, tenant, case.question),
                              step_requests=requests, step_statuses=statuses, step_actions=actions,
                              step_facts=[t.message_ids[0] for t in tasks], active_with_current=current)
    if twin is not None:
        after = {m.memory_id: (str(m.status), m.text)
                 for m in deps.repo.get_memories(updates.STORE, updates.APP, twin, list(twin_before))}
        obs.twin_tenant = twin
        obs.twin_changed = sum(1 for mid, state in twin_before.items() if after.get(mid) != state)
        obs.twin_hits = updates._hits(deps, twin, case.question)
    return updates.score(case, obs), judged


def run(args: argparse.Namespace) -> dict[str, Any]:
    from ..bootstrap import build_local
    from ..config import Settings
    from ..services import stores

    started = time.monotonic()
    cases = updates.load(args.data)
    if args.kinds:
        cases = [c for c in cases if c.kind in set(args.kinds.split(","))]
    embedder = None
    if args.embedder == "minilm":
        from .common import minilm

        embedder = minilm()
    modes = MODES if args.compare else ("dream-only",)
    results: dict[str, Any] = {}
    failures: dict[str, list[str]] = {}
    judged: list[Judged] = []
    progress = Progress(len(cases) * len(modes), "cases")
    try:
        for mode in modes:
            scored = []
            with tempfile.TemporaryDirectory(prefix="memlane-calibrate-") as tmp:
                settings = Settings.from_env(env={}, data_dir=Path(tmp) / "memlane", table="sqlite", index="embedded",
                                             **({"embedder": "hashing"} if args.embedder == "hashing" else {}))
                service = build_local(settings, embedder=embedder)
                try:
                    deps = service.deps
                    deps.settings = replace(deps.settings, consolidate_on_write=mode != "dream-only")
                    stores.create(deps, name=updates.STORE, description="dream calibration")
                    for case in cases:
                        s, j = _run_case(deps, case, dream=mode != "write-time", threshold=args.threshold)
                        scored.append((case, s))
                        if any(s.get(m) == 0.0 for m in ("current_first", "stale_hidden", "single_copy")) \
                                or s.get("false_supersede") or s.get("cross_tenant"):
                            failures.setdefault(mode, []).append(case.id)
                        if mode == "dream-only":
                            judged += j
                        progress.update(1, f"{mode} {case.id}")
                finally:
                    service.close()
            results[mode] = updates.aggregate(scored)["all"]
    finally:
        progress.close()
    exposure = _exposure(args, embedder) if args.conversations else None
    write_time = _write_time(args, embedder) if args.conversations else None
    alarms = exposure["per_evidence"] if exposure else {}
    return {"dataset": Path(args.data).name, "cases": len(cases), "embedder": args.embedder,
            "suggested": suggest(judged, alarms), "exposure": exposure, "write_time": write_time,
            "threshold": args.threshold, "reliability": reliability(judged), "evidence": by_evidence(judged),
            "auto": at_threshold(judged, cases), "modes": results, "failures": failures,
            "wrong": [j.__dict__ for j in judged if not j.correct],
            "machine": machine(), "elapsed_s": round(time.monotonic() - started, 1)}


def _exposure(args: argparse.Namespace, embedder: Any) -> dict[str, Any]:
    """Dream over real conversations (write-time consolidation off): every change the decision module
    proposes, per kind of evidence."""
    from ..domain.models import DreamActionKind, DreamMode
    from ..services import dream as dreams
    from . import locomo

    convs = locomo.load(args.conversations, limit=args.limit_conversations)
    found: list[dict[str, Any]] = []
    memories = 0
    with tempfile.TemporaryDirectory(prefix="memlane-calibrate-") as tmp:
        method = locomo.Memlane(embedder, Path(tmp) / "memlane")
        method.deps.settings = replace(method.deps.settings, consolidate_on_write=False)
        try:
            for conv in convs:
                before = method.memories
                method.prepare(conv)
                memories += method.memories - before
                task = dreams.start(method.deps, locomo.STORE, scope=method.scope(conv), sync=True,
                                    mode=DreamMode.PROPOSAL, kinds=[DreamActionKind.UPDATE, DreamActionKind.DELETE])
                for a in dreams.list_actions(method.deps, locomo.STORE, task.task_id, limit=1000)[0]:
                    if a.keep_id is None:
                        continue  # an expired plan: not a decision about a changed fact
                    text = {m.memory_id: m.text for m in a.before}
                    found.append({"conversation": conv.sample_id, "evidence": evidence_of(a.rationale),
                                  "confidence": a.confidence, "old": [text.get(t, "") for t in a.target_ids],
                                  "new": text.get(a.keep_id, "")})
        finally:
            method.close()
    counts: dict[str, int] = {}
    for f in found:
        counts[f["evidence"]] = counts.get(f["evidence"], 0) + 1
    return {"conversations": len(convs), "memories": memories, "per_evidence": counts, "proposals": found}


def _write_time(args: argparse.Namespace, embedder: Any) -> dict[str, Any]:
    """The same real conversations ingested as a live service does (write-time consolidation on): every change
    write time applied — each hides a memory, so on talk where a fact rarely changes each one is to review — and
    how many it wrote beside their memory, under the store's threshold."""
    from . import locomo

    convs = locomo.load(args.conversations, limit=args.limit_conversations)
    applied: list[dict[str, Any]] = []
    held = memories = 0
    with tempfile.TemporaryDirectory(prefix="memlane-calibrate-") as tmp:
        method = locomo.Memlane(embedder, Path(tmp) / "memlane")
        try:
            for conv in convs:
                before = method.memories
                method.prepare(conv)
                memories += method.memories - before
                scope, repo = method.scope(conv), method.deps.repo
                for item in repo.tenant_keys(locomo.STORE, scope["app_id"], scope["tenant_id"], prefix="TASK#"):
                    for o in item.get("outcomes") or ():
                        held += "under the store's threshold" in (o.get("reason") or "")
                        if o.get("action_id"):
                            old = repo.get_memories(locomo.STORE, scope["app_id"], scope["tenant_id"], o["target_ids"])
                            applied.append({"conversation": conv.sample_id, "action": o["action"],
                                            "confidence": o.get("confidence"), "reason": o.get("reason", ""),
                                            "old": [m.text for m in old], "new": o["text"]})
        finally:
            method.close()
    return {"conversations": len(convs), "memories": memories, "applied": applied, "held_for_review": held}


def format_report(report: dict[str, Any]) -> str:
    def show(v: Any) -> Any:
        return "-" if v is None else v

    out = [f"dream calibration ({report['cases']} cases, {report['embedder']} embedder; write-time consolidation "
           f"off, one safe_auto dream at {report['threshold']})", "",
           table(["confidence", "proposals", "right", "precision"],
                 [[r["bucket"], r["proposals"], r["right"], show(r["precision"])] for r in report["reliability"]]),
           "", table(["evidence", "confidence", "proposals", "right", "precision", "95% lower bound",
                      "suggested"],
                     [[r["evidence"], "/".join(f"{c:g}" for c in r["confidence"]), r["proposals"], r["right"],
                       r["precision"], r["lower_bound"], show(report["suggested"].get(r["evidence"]))]
                      for r in report["evidence"]]),
           "", "applied at the threshold: " + ", ".join(f"{k} {show(v)}" for k, v in report["auto"].items())]
    exposure = report.get("exposure")
    if exposure:
        per = exposure["per_evidence"]
        out += ["", f"changes proposed in {exposure['conversations']} real conversations ({exposure['memories']} "
                    "memories, write-time off), for review:",
                table(["evidence", "proposals", "per 1,000 memories"],
                      [[k, v, round(1000 * v / max(exposure["memories"], 1), 2)] for k, v in sorted(per.items())])
                if per else "none"]
    written = report.get("write_time")
    if written:
        out += ["", f"changes write time applied in the same conversations ({written['memories']} memories, write-time "
                    f"on): {len(written['applied'])}; written beside their memory under the threshold: "
                    f"{written['held_for_review']}"]
    modes = report["modes"]
    if modes:
        out += ["", table(["rate", *modes], [[m, *(show(modes[k].get(m)) for k in modes)] for m in RATES])]
    return "\n".join(out)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", type=Path, default=updates.DEFAULT_DATA, help="knowledge-update cases (JSON lines)")
    p.add_argument("--threshold", type=float, default=0.8, help="the safe_auto threshold (a store's dream_threshold)")
    p.add_argument("--embedder", choices=["minilm", "hashing"], default="minilm")
    p.add_argument("--kinds", help="comma-separated subset of kinds")
    p.add_argument("--no-compare", dest="compare", action="store_false",
                   help="only the dream-only run (no write-time columns)")
    p.add_argument("--wrong", action="store_true",
                   help="list the proposals judged wrong (and those made in --conversations)")
    p.add_argument("--conversations", type=Path, help="LoCoMo data: also dream over these real conversations")
    p.add_argument("--limit-conversations", type=int, help="only the first N of --conversations")
    p.add_argument("--json", dest="json_out", type=Path, help="write the full report here")


def main(args: argparse.Namespace) -> int:
    if not Path(args.data).is_file():
        print(f"error: no knowledge-update cases at {args.data} (pass --data PATH)", file=sys.stderr)
        return 2
    if not 0.0 <= args.threshold <= 1.0:
        print("error: --threshold must be between 0 and 1", file=sys.stderr)
        return 2
    report = run(args)
    print(format_report(report))
    if args.wrong:
        for w in report["wrong"]:
            print(json.dumps(w))
        for mode, ids in report["failures"].items():
            print(f"{mode} failed: {' '.join(ids)}")
        for f in (report.get("exposure") or {}).get("proposals", []):
            print(json.dumps(f))
        for f in (report.get("write_time") or {}).get("applied", []):
            print(json.dumps({"write_time": True, **f}))
    print(f"\n{report['cases']} cases; {report['elapsed_s']} s")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(report, indent=2) + "\n")
    return 0
