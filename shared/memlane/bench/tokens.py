"""Prompt tokens per turn in a live thread: memlane's context card versus the flat full history and a plain
window of the last turns, as the thread grows to 300 turns and its summary refreshes in the background.

The thread (bench/live_thread.py, generated from ``--seed``; or ``--conversation scripted80``, the earlier
80-turn script in bench/conversation.py) is played as a live agent plays it. When a user turn arrives the
agent builds its prompt three ways:

- ``flat``    system prompt + every earlier turn + the new message.
- ``window``  system prompt + the last ``--recent`` turns + the new message (plain truncation).
- ``card``    system prompt + the thread's context card (services/context.build, the route
              ``POST .../threads/{id}/context``'s own service, ``--budget`` tokens, the new message as its
              query) + the new message.

Then the exchange (the message and the assistant's reply) is added through the real service path. The
local worker extracts it and refreshes the thread's summary past the store's trigger
(``--summary-trigger``, default 2,000 tokens, leaving ``--summary-keep-recent`` turns out) on its own
threads; the agent does not wait for either — the next user turn arrives once the worker is idle or
``--think-seconds`` have passed (a person reading the reply and typing), and the card holds what is done
by then. Turns that arrived with work still queued are counted (``lagging``).

Per prompt: the three sizes, the card's tokens per section, the card's evidence recall at turns that need
earlier facts (the share of the needed turns the card cites, through a recent turn, a summary sentence or
a memory's evidence), whether it shows only an outdated statement of a changed fact, and the summary the
card saw (its version and the turn it covers up to). Tokens are counted with the service's tokenizer
(``deps.tokenizer``), the context card's own, over the same line format for every method.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence, TextIO

from . import conversation, live_thread, metrics
from .common import Progress, machine, table
from .context import turn_line

SYSTEM = ("You are a helpful personal assistant. Use the context and the recent conversation below to answer "
          "the user; if something is not there, say you don't know.")
STORE = "tokens"
APP, TENANT, AGENT, THREAD = "bench", "noor", "assistant", "chat-1"
CHECKPOINTS = (20, 40, 80, 150, 300)


# -- metrics (pure) -------------------------------------------------------------------------------


def flat_tokens(counts: Sequence[int], t: int, *, fixed: int) -> int:
    """The flat prompt at turn `t`: the fixed part (system prompt, new message) and every earlier turn."""
    return fixed + sum(counts[:t])


def window_tokens(counts: Sequence[int], t: int, *, recent: int, fixed: int) -> int:
    """The window prompt at turn `t`: the fixed part and the last `recent` turns before it."""
    return fixed + sum(counts[max(0, t - recent):t])


def held_turns(evidence: Iterable[str], turn_of: Mapping[str, int]) -> set[int]:
    """The turns a card's evidence (message ids) cites."""
    return {turn_of[m] for m in evidence if m in turn_of}


def recall(held: set[int], needs: Sequence[int]) -> float:
    """Share of the needed turns the prompt holds."""
    return sum(1 for n in set(needs) if n in held) / len(set(needs))


def stale_only(held: set[int], *, needs: Sequence[int], stale: Sequence[int]) -> bool:
    """The prompt shows an outdated statement of a changed fact and none of its current ones."""
    return bool(held & set(stale)) and not held & set(needs)


def covered_turn(covered_until: str | None, turn_of: Mapping[str, int]) -> int | None:
    """The turn of the newest message a summary covers (None: no summary yet)."""
    return turn_of.get(covered_until) if covered_until else None


def checkpoints(rows: Sequence[Mapping[str, Any]], marks: Iterable[int]) -> list[Mapping[str, Any]]:
    """For each mark, the prompt built at that turn or the last one before it (once: marks past the end of a
    shorter thread all land on its last prompt)."""
    out: list[Mapping[str, Any]] = []
    for mark in marks:
        before = [r for r in rows if r["turn"] <= mark]
        if before and (not out or out[-1] is not before[-1]):
            out.append(before[-1])
    return out


def refresh_turns(rows: Sequence[Mapping[str, Any]]) -> list[int]:
    """The turns whose card saw a newer summary than the previous card did: the refreshes as the agent met
    them (two refreshes between two turns count once)."""
    out, last = [], None
    for r in rows:
        version = r["summary_version"]
        if version is not None and version != last:
            out.append(r["turn"])
        last = version
    return out


def progress(total: int, stream: TextIO | None = None) -> Progress | None:
    """A progress line on stderr, only when stderr is a terminal (a redirected run stays clean)."""
    stream = stream or sys.stderr
    return Progress(total, "starting", stream=stream) if stream.isatty() else None


# -- the run --------------------------------------------------------------------------------------


def _embedder(choice: str) -> Any:
    from ..adapters.embedders.hashing import HashingEmbedder
    from ..adapters.embedders.minilm_onnx import MiniLMOnnxEmbedder

    if choice == "minilm" or (choice == "auto" and MiniLMOnnxEmbedder.available()):
        return MiniLMOnnxEmbedder()
    if choice == "auto":
        print("note: local model not installed, using the lexical hashing embedder", file=sys.stderr)
    return HashingEmbedder()


def _script(args: argparse.Namespace) -> live_thread.Script:
    if args.conversation == "scripted80":
        return conversation.script()
    return live_thread.generate(seed=args.seed, exchanges=args.turns // 2 + 1)


def _wait_idle(queue: Any, seconds: float) -> bool:
    """Wait until the worker has nothing left or `seconds` pass; whether it was idle."""
    deadline = time.monotonic() + seconds
    while queue.depth():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True


def run(args: argparse.Namespace) -> dict[str, Any]:
    from ..bootstrap import build_local
    from ..config import Settings
    from ..domain.scope import Scope
    from ..services import context, ingest, stores, threads

    started, load_start = time.monotonic(), os.getloadavg()[0]
    compare = [r for r in str(getattr(args, "compare", "") or "").split(",") if r]
    script = _script(args)
    last = min(args.turns, len(script.turns) - 1)
    prompts = list(range(0, last + 1, 2))  # user turns: the even indexes
    embedder = _embedder(args.embedder)
    scope = {"app_id": APP, "tenant_id": TENANT, "agent_id": AGENT, "run_id": THREAD}
    rows: list[dict[str, Any]] = []
    turn_of: dict[str, int] = {}
    bar = progress(len(prompts))
    with tempfile.TemporaryDirectory(prefix="memlane-tokens-") as tmp:
        service = build_local(Settings.from_env(env={}, data_dir=Path(tmp), table="sqlite", index="embedded"),
                              embedder=embedder)
        deps = service.deps
        tokenizer = deps.tokenizer
        assert tokenizer is not None  # build_local always ships one
        lines = [turn_line(script.user if role == "user" else "Assistant", text, when)
                 for (role, text), when in zip(script.turns, script.times)]
        counts = tokenizer.count_many(lines)
        system = tokenizer.count(SYSTEM)
        stores.create(deps, name=STORE, summary_trigger_tokens=args.summary_trigger,
                      summary_keep_recent=args.summary_keep_recent)
        threads.create(deps, STORE, scope={k: scope[k] for k in ("app_id", "tenant_id", "agent_id")},
                       thread_id=THREAD)
        service.start_worker()
        idle = True
        try:
            for t in prompts:
                fixed = system + counts[t]
                summary = context.get_summary(deps, STORE, Scope(**scope))
                t0, c0 = time.perf_counter(), time.process_time()
                card = context.build(deps, STORE, app_id=APP, tenant_id=TENANT, thread_id=THREAD,
                                     query=script.turns[t][1], budget_tokens=args.budget,
                                     recent_messages=args.recent)
                # CPU time of the process: the worker is idle when a turn arrives, so it is the card's.
                card_ms, card_cpu_ms = (time.perf_counter() - t0) * 1000, (time.process_time() - c0) * 1000
                rows.append(_row(script, t, counts, fixed, card, summary, turn_of, recent=args.recent, idle=idle,
                                 card_ms=card_ms))
                rows[-1]["card_cpu_ms"] = round(card_cpu_ms, 2)
                # The same turn's card by the other recipes, on the same state: side by side.
                rows[-1]["recipes"] = {name: _variant(script, t, fixed, turn_of, context.build(
                    deps, STORE, app_id=APP, tenant_id=TENANT, thread_id=THREAD, query=script.turns[t][1],
                    budget_tokens=args.budget, recent_messages=args.recent, recipe=name)) for name in compare}
                if bar:
                    bar.update(1, f"turn {t}")
                if t == prompts[-1]:
                    break  # the last prompt measured: its exchange changes nothing measured
                # Stamped as they arrive, as every figure of docs/benchmarks.md §3 was measured (the script's times
                # were sent as text, which the service then took for "now"; it refuses text since session 29).
                task = ingest.add(deps, STORE, scope=scope, messages=[
                    {"role": role, "content": text, **({"name": script.user} if role == "user" else {})}
                    for role, text in script.turns[t:t + 2]])
                turn_of.update(zip(task.message_ids, (t, t + 1)))
                idle = _wait_idle(service.queue, args.think_seconds)
        finally:
            if bar:
                bar.close()
            service.close()
    return _report(args, script, rows, embedder.name, tokenizer.name, started, load_start)


def _row(script: live_thread.Script, t: int, counts: Sequence[int], fixed: int, card: Any, summary: Any,
         turn_of: Mapping[str, int], *, recent: int, idle: bool, card_ms: float) -> dict[str, Any]:
    """What the prompt at turn `t` costs three ways, what the card holds, and the summary it saw."""
    row: dict[str, Any] = {
        "turn": t, "flat": flat_tokens(counts, t, fixed=fixed), "window": window_tokens(counts, t, recent=recent,
                                                                                      fixed=fixed),
        "card": fixed + card.total, "fixed": fixed, "card_tokens": card.total, "card_sections": dict(card.tokens),
        "cut": {c.section: c.dropped + c.truncated for c in card.cut},
        "summary_version": summary.version if summary else None,
        "summary_covered_turn": covered_turn(summary.covered_until if summary else None, turn_of),
        "summary_tokens": summary.tokens if summary else 0, "worker_idle": idle, "card_ms": round(card_ms, 2)}
    if t in script.needs:
        held = held_turns(card.evidence, turn_of)
        need, old = script.needs[t], script.stale.get(t, [])
        row["needs"] = need
        row["recall"] = {"flat": 1.0, "window": recall(set(range(max(0, t - recent), t)), need),
                         "card": round(recall(held, need), 3)}
        if old:
            row["stale"] = old
            row["stale_only"] = stale_only(held, needs=need, stale=old)
    return row


def _variant(script: live_thread.Script, t: int, fixed: int, turn_of: Mapping[str, int], card: Any) -> dict[str, Any]:
    """A compared recipe's card at turn `t`: its prompt size, sections and evidence recall."""
    row: dict[str, Any] = {"card": fixed + card.total, "card_sections": dict(card.tokens)}
    if t in script.needs:
        row["recall"] = round(recall(held_turns(card.evidence, turn_of), script.needs[t]), 3)
    return row


def _report(args: argparse.Namespace, script: live_thread.Script, rows: list[dict[str, Any]], embedder: str,
            tokenizer: str, started: float, load_start: float | None = None) -> dict[str, Any]:
    with_needs = [r for r in rows if "recall" in r]
    with_stale = [r for r in rows if "stale" in r]
    methods = ("flat", "window", "card")
    refreshed = refresh_turns(rows)
    return {
        "conversation": {"name": args.conversation, "seed": args.seed if args.conversation == "live" else None,
                         "turns": rows[-1]["turn"], "prompts": len(rows), "turns_with_needs": len(with_needs),
                         "turns_with_changed_facts": len(with_stale)},
        "settings": {"recent_turns": args.recent, "budget_tokens": args.budget,
                     "summary_trigger_tokens": args.summary_trigger, "summary_keep_recent": args.summary_keep_recent,
                     "think_seconds": args.think_seconds, "embedder": embedder, "tokenizer": tokenizer},
        "totals": {m: sum(r[m] for r in rows) for m in methods},
        "last_turn": {m: rows[-1][m] for m in methods},
        "evidence_recall": {m: round(sum(r["recall"][m] for r in with_needs) / max(len(with_needs), 1), 3)
                            for m in methods},
        "stale_only": sum(1 for r in with_stale if r["stale_only"]),
        "recipes": {name: {"total": sum(r["recipes"][name]["card"] for r in rows),
                           "last_turn": rows[-1]["recipes"][name]["card"],
                           "evidence_recall": round(sum(r["recipes"][name]["recall"] for r in with_needs)
                                                    / max(len(with_needs), 1), 3)}
                    for name in rows[-1].get("recipes", {})},
        "recipe": _default_recipe(),
        "summary": {"refreshes": len(refreshed), "refresh_turns": refreshed,
                    "covered_turn_at_end": rows[-1]["summary_covered_turn"]},
        "lagging_turns": sum(1 for r in rows if not r["worker_idle"]),
        "card_ms": {"p50": round(metrics.percentile([r["card_ms"] for r in rows], 50), 2),
                    "p95": round(metrics.percentile([r["card_ms"] for r in rows], 95), 2)},
        "card_cpu_ms": {"p50": round(metrics.percentile([r["card_cpu_ms"] for r in rows], 50), 2),
                        "p95": round(metrics.percentile([r["card_cpu_ms"] for r in rows], 95), 2)},
        "rows": rows,
        "machine": {**machine(), "loadavg_1m_start": None if load_start is None else round(load_start, 2),
                    "loadavg_1m_end": round(os.getloadavg()[0], 2)},
        "elapsed_s": round(time.monotonic() - started, 1),
    }


def _default_recipe() -> str:
    from ..services.context import DEFAULT_RECIPE

    return DEFAULT_RECIPE


# -- output ---------------------------------------------------------------------------------------


def format_report(r: dict[str, Any]) -> str:
    s, conv = r["settings"], r["conversation"]
    told = f"live thread, seed {conv['seed']}" if conv["name"] == "live" else conv["name"]
    out = [f"{conv['turns']}-turn {told}: {conv['prompts']} prompts; card = {s['budget_tokens']}-token context card "
           f"(last {s['recent_turns']} turns, summary past {s['summary_trigger_tokens']} tokens); tokens by "
           f"{s['tokenizer']}; {s['embedder']}", ""]
    marks = checkpoints(r["rows"], CHECKPOINTS)
    sections = ("user_profile", "summary", "memories", "plans", "recent")
    out.append(table(["turn", "flat", "window", "card", *sections, "summary covers to", "refreshes", "flat/card"],
                     [[x["turn"], x["flat"], x["window"], x["card"], *(x["card_sections"].get(n, 0) for n in sections),
                       "-" if x["summary_covered_turn"] is None else x["summary_covered_turn"],
                       sum(1 for t in r["summary"]["refresh_turns"] if t <= x["turn"]),
                       f"{x['flat'] / x['card']:.1f}x"] for x in marks]))
    t = r["totals"]
    out += ["", table(["", "flat", "window", "card"],
                      [["prompt tokens, all prompts", t["flat"], t["window"], t["card"]],
                       ["prompt tokens, last prompt", r["last_turn"]["flat"], r["last_turn"]["window"],
                        r["last_turn"]["card"]],
                       [f"evidence recall ({conv['turns_with_needs']} turns that need earlier facts)",
                        r["evidence_recall"]["flat"], r["evidence_recall"]["window"], r["evidence_recall"]["card"]]])]
    out += ["", f"summary refreshes seen by the agent: {r['summary']['refreshes']} (at turns "
                f"{', '.join(map(str, r['summary']['refresh_turns'])) or '-'}); card shows only an outdated statement "
                f"at {r['stale_only']} of {conv['turns_with_changed_facts']} turns needing a changed fact; "
                f"{r['lagging_turns']} turns arrived with the worker still busy; card p50 {r['card_ms']['p50']} ms, "
                f"p95 {r['card_ms']['p95']} ms (CPU time p50 {r['card_cpu_ms']['p50']} ms, "
                f"p95 {r['card_cpu_ms']['p95']} ms); load average (1 min) {r['machine'].get('loadavg_1m_start')} at start, "
                f"{r['machine']['loadavg_1m_end']} at end"]
    if r.get("recipes"):
        last = r["rows"][-1]
        out += ["", f"card recipes side by side (services/context.RECIPES; `card` above is `{r.get('recipe')}`):",
                table(["recipe", "prompt tokens, all prompts", "last prompt", "flat/card at last prompt",
                       "evidence recall"],
                      [[r.get("recipe"), t["card"], r["last_turn"]["card"], f"{last['flat'] / last['card']:.1f}x",
                        r["evidence_recall"]["card"]],
                       *([name, v["total"], v["last_turn"], f"{last['flat'] / v['last_turn']:.1f}x",
                          v["evidence_recall"]] for name, v in r["recipes"].items())])]
    detail = [[x["turn"], " ".join(map(str, x["needs"])), " ".join(map(str, x.get("stale", []))) or "-",
               x["recall"]["window"], x["recall"]["card"], "yes" if x.get("stale_only") else ""]
              for x in r["rows"] if "recall" in x]
    out += ["", table(["turn", "needs turns", "outdated turns", "window recall", "card recall", "outdated only"],
                      detail)]
    return "\n".join(out)


def plot(r: dict[str, Any], path: Path) -> Path:
    from .plot import save_line_chart

    xs = [x["turn"] for x in r["rows"]]
    return save_line_chart(path, [("flat full history", xs, [x["flat"] for x in r["rows"]]),
                                  (f"memlane card, {r['settings']['budget_tokens']:,}-token budget", xs,
                                   [x["card"] for x in r["rows"]]),
                                  ("last turns only", xs, [x["window"] for x in r["rows"]])],
                           title="Prompt tokens per turn, live thread", x_label="turns in the thread",
                           y_label="tokens", markers=r["summary"]["refresh_turns"], marker_label="summary refresh")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--conversation", choices=("live", "scripted80"), default="live",
                   help="the generated live thread (default) or the earlier 80-turn script")
    p.add_argument("--turns", type=int, default=300, help="turns the thread grows to (live thread)")
    p.add_argument("--seed", type=int, default=live_thread.SEED, help="seed of the live thread")
    p.add_argument("--recent", type=int, default=6, help="recent turns in the window and in the card")
    p.add_argument("--budget", type=int, default=1500, help="the context card's token budget")
    p.add_argument("--summary-trigger", type=int, default=2000, help="the store's summary_trigger_tokens")
    p.add_argument("--summary-keep-recent", type=int, default=6, help="the store's summary_keep_recent")
    p.add_argument("--think-seconds", type=float, default=5.0,
                   help="at most this long between an exchange and the next user turn (the worker's head start)")
    p.add_argument("--embedder", choices=("auto", "minilm", "hashing"), default="auto")
    p.add_argument("--compare", default="no_floor",
                   help="card recipes (services/context.RECIPES) also built at every prompt, side by side")
    p.add_argument("--json", dest="json_out", type=Path)
    p.add_argument("--png", type=Path, default=Path("tokens.png"), help="plot file (default tokens.png)")


def main(args: argparse.Namespace) -> int:
    report = run(args)
    print(format_report(report))
    if args.png:
        print(f"\nplot: {plot(report, args.png)}")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(report, indent=2) + "\n")
    return 0
