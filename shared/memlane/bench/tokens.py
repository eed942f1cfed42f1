"""Prompt tokens per turn: memlane context (retrieved memories + recent turns, bounded) versus
sending the flat full history, over the scripted 80-turn conversation in bench/conversation.py.

At each user turn the agent builds a prompt three ways:

- ``flat``    system prompt + every earlier turn + the new user message.
- ``window``  system prompt + the last ``--recent`` turns + the new message (plain truncation).
- ``memlane`` the window, plus the memories found by searching memlane with the new message
              (top ``--top-k``, cut to ``--memory-budget`` tokens).

After the assistant's reply, the exchange (user + assistant) is added to memlane through the
real service path and extracted by the local worker before the next turn. Evidence recall at a
turn that depends on earlier ones (``NEEDS``) is the share of those earlier turns the prompt
holds: inside the window, or cited as evidence by an included memory. Tokens: ceil(1.3 × words).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from . import metrics
from .common import machine, table
from .conversation import NEEDS, TURNS, USER

SYSTEM = ("You are a helpful personal assistant. Use the memories and the recent conversation below to answer "
          "the user; if something is not there, say you don't know.")
STORE = "tokens"
SCOPE = {"app_id": "bench", "tenant_id": "priya", "agent_id": "assistant", "run_id": "chat-1"}


def _embedder() -> Any:
    from ..adapters.embedders.minilm_onnx import MiniLMOnnxEmbedder

    if MiniLMOnnxEmbedder.available():
        return MiniLMOnnxEmbedder()
    from ..adapters.embedders.hashing import HashingEmbedder

    print("note: local model not installed, using the lexical hashing embedder", file=sys.stderr)
    return HashingEmbedder()


def line(i: int) -> str:
    role, text = TURNS[i]
    return f"{USER if role == 'user' else 'Assistant'}: {text}"


def run(args: argparse.Namespace) -> dict[str, Any]:
    from ..bootstrap import build_local
    from ..config import Settings
    from ..services import ingest, stores
    from ..services.search import search

    started = time.monotonic()
    embedder = _embedder()
    rows: list[dict[str, Any]] = []
    turn_of: dict[str, int] = {}
    base = datetime(2025, 3, 1, 9, 0, tzinfo=timezone.utc)
    with tempfile.TemporaryDirectory(prefix="memlane-tokens-") as tmp:
        service = build_local(Settings.from_env(env={}, data_dir=Path(tmp), table="sqlite", index="embedded"),
                              embedder=embedder)
        deps = service.deps
        stores.create(deps, name=STORE)
        try:
            for t in range(0, len(TURNS), 2):
                user_msg = line(t)
                system = metrics.tokens(SYSTEM)
                flat = system + sum(metrics.tokens(line(i)) for i in range(t)) + metrics.tokens(user_msg)
                recent = list(range(max(0, t - args.recent), t))
                window = system + sum(metrics.tokens(line(i)) for i in recent) + metrics.tokens(user_msg)
                t0 = time.perf_counter()
                hits = search(deps, STORE, query=TURNS[t][1], scope={"app_id": SCOPE["app_id"],
                                                                      "tenant_id": SCOPE["tenant_id"]},
                              top_k=args.top_k) if t else []
                search_ms = (time.perf_counter() - t0) * 1000
                # A memory whose evidence is all in the window adds nothing the prompt lacks.
                hits = [h for h in hits if not h.memory.evidence
                        or not {turn_of.get(m) for m in h.memory.evidence} <= set(recent)]
                texts = [f"- {h.memory.text}" for h in hits]
                kept = metrics.budget_cut(texts, args.memory_budget)
                memory_tokens = sum(metrics.tokens(x) for x in texts[:kept])
                ours = window + memory_tokens + (metrics.tokens("Relevant memories:") if kept else 0)
                row: dict[str, Any] = {"turn": t, "user_turn": t // 2 + 1, "flat": flat, "window": window,
                                       "memlane": ours, "memories": kept, "memory_tokens": memory_tokens,
                                       "search_ms": round(search_ms, 2)}
                if t in NEEDS:
                    need = set(NEEDS[t])
                    in_window = need & set(recent)
                    cited = {turn_of[m] for h in hits[:kept] for m in h.memory.evidence if m in turn_of}
                    row["needs"] = sorted(need)
                    row["recall"] = {"flat": 1.0, "window": round(len(in_window) / len(need), 3),
                                     "memlane": round(len(need & (set(recent) | cited)) / len(need), 3)}
                rows.append(row)
                # The assistant answers; the exchange goes to memlane (extracted before the next turn).
                when = base + timedelta(days=t // 2)
                task = ingest.add(deps, STORE, scope=SCOPE, messages=[
                    {"role": TURNS[i][0], "content": TURNS[i][1], "created_at": when + timedelta(seconds=i - t),
                     **({"name": USER} if TURNS[i][0] == "user" else {})} for i in (t, t + 1)])
                turn_of.update(zip(task.message_ids, (t, t + 1)))
                service.drain(timeout=120)
        finally:
            service.close()
    with_needs = [r for r in rows if "recall" in r]
    totals = {name: sum(r[name] for r in rows) for name in ("flat", "window", "memlane")}
    return {
        "conversation": {"turns": len(TURNS), "user_turns": len(rows), "turns_with_needs": len(with_needs)},
        "settings": {"recent_turns": args.recent, "top_k": args.top_k, "memory_budget_tokens": args.memory_budget,
                     "embedder": embedder.name, "token_counting": f"ceil({metrics.TOKENS_PER_WORD} x words)"},
        "totals": totals,
        "last_turn": {name: rows[-1][name] for name in ("flat", "window", "memlane")},
        "evidence_recall": {name: round(sum(r["recall"][name] for r in with_needs) / max(len(with_needs), 1), 3)
                            for name in ("flat", "window", "memlane")},
        "search_ms": {"p50": round(metrics.percentile([r["search_ms"] for r in rows[1:]], 50), 2),
                      "p95": round(metrics.percentile([r["search_ms"] for r in rows[1:]], 95), 2)},
        "rows": rows,
        "machine": machine(),
        "elapsed_s": round(time.monotonic() - started, 1),
    }


def format_report(r: dict[str, Any]) -> str:
    s = r["settings"]
    out = [f"{r['conversation']['turns']}-turn conversation, {r['conversation']['user_turns']} prompts; memlane = last "
           f"{s['recent_turns']} turns + up to {s['top_k']} memories within {s['memory_budget_tokens']} tokens "
           f"({s['embedder']})", ""]
    shown = [x for x in r["rows"] if x["user_turn"] % 5 == 0 or x["user_turn"] == 1]
    out.append(table(["user turn", "flat", "window", "memlane", "memlane/flat"],
                     [[x["user_turn"], x["flat"], x["window"], x["memlane"], round(x["memlane"] / x["flat"], 2)]
                      for x in shown]))
    t = r["totals"]
    out += ["", table(["", "flat", "window", "memlane"],
                      [["prompt tokens, all turns", t["flat"], t["window"], t["memlane"]],
                       ["prompt tokens, last turn", r["last_turn"]["flat"], r["last_turn"]["window"],
                        r["last_turn"]["memlane"]],
                       [f"evidence recall ({r['conversation']['turns_with_needs']} turns that need earlier ones)",
                        r["evidence_recall"]["flat"], r["evidence_recall"]["window"],
                        r["evidence_recall"]["memlane"]]])]
    detail = [[x["user_turn"], " ".join(str(n) for n in x["needs"]), x["recall"]["window"], x["recall"]["memlane"]]
              for x in r["rows"] if "recall" in x]
    out += ["", table(["user turn", "needs turns", "window recall", "memlane recall"], detail)]
    return "\n".join(out)


def plot(r: dict[str, Any], path: Path) -> Path:
    from .plot import save_line_chart

    xs = [x["user_turn"] for x in r["rows"]]
    return save_line_chart(path, [("flat full history", xs, [x["flat"] for x in r["rows"]]),
                                  ("memlane: memories + last turns", xs, [x["memlane"] for x in r["rows"]]),
                                  ("last turns only", xs, [x["window"] for x in r["rows"]])],
                           title="Prompt tokens per user turn", x_label="user turn", y_label="tokens")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--recent", type=int, default=6, help="recent turns kept verbatim in the prompt")
    p.add_argument("--top-k", type=int, default=8, help="memories asked per turn")
    p.add_argument("--memory-budget", type=int, default=300, help="tokens of memories at most")
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
