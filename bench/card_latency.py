"""Context-card latency on a LoCoMo state kept by `memlane bench context --data-dir DIR` (issue 12): no
ingest, so the code before and after a change can build the same cards side by side, in two processes
started together (run this file under each tree's PYTHONPATH). Prints CPU time of the process per card
(what the load of a shared machine moves least) and wall time, p50 / p95, of the last of `passes` passes
over the conversation's questions (categories 1-4) at 1,500 tokens, and the load average.

    memlane bench context --data D --limit-conversations 1 --budgets 1500 --data-dir /tmp/conv26
    PYTHONPATH=<tree>/shared python bench/card_latency.py /tmp/conv26 0 [passes=2] [recipe] [profile.out]

MEMLANE_EMBED_CACHE_SIZE=0 turns the embedder's vector cache off: with it on, the second pass's queries
are ones embedded before (a repeated query); off, every query pays for its embedding.
"""

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from memlane.bench.locomo import load, APP, STORE
from memlane.bench.common import minilm
from memlane.bootstrap import build_local
from memlane.config import Settings
from memlane.services import context
from memlane.bench.context import thread_of
src, idx = Path(sys.argv[1]), int(sys.argv[2])
passes = int(sys.argv[3]) if len(sys.argv) > 3 else 2
recipe = sys.argv[4] if len(sys.argv) > 4 else "default"
prof = sys.argv[5] if len(sys.argv) > 5 else ""
tmp = Path(tempfile.mkdtemp(prefix="cards-")); shutil.copytree(src, tmp / "d")
conv = load(os.environ.get("LOCOMO", "/work/shared/data/locomo-dev.json"), idx + 1)[idx]
emb = minilm(); emb.embed(["warm up"])
svc = build_local(Settings.from_env(env={k: v for k, v in os.environ.items() if k == "MEMLANE_EMBED_CACHE_SIZE"}, data_dir=tmp / "d" / "memlane", index="embedded", table="sqlite"), embedder=emb)
deps = svc.deps
thread = thread_of(conv.sessions[-1][0], "session")
qs = [q for q in conv.questions if q.category in (1, 2, 3, 4)]
def one(q):
    return context.build(deps, STORE, app_id=APP, tenant_id=conv.sample_id, thread_id=thread, query=q.text,
                         budget_tokens=1500, recent_messages=6, recipe=recipe)
if prof:
    import cProfile
    for q in qs: one(q)
    cProfile.run("[one(q) for q in qs]", prof)
    sys.exit()
wall, cpu = [], []
for p in range(passes):
    for q in qs:
        t0, c0 = time.perf_counter(), time.process_time()
        one(q)
        w, c = (time.perf_counter() - t0) * 1000, (time.process_time() - c0) * 1000
        if p == passes - 1 or passes == 1:
            wall.append(w); cpu.append(c)
from memlane.bench.metrics import percentile
def pct(xs, p): return percentile(xs, p * 100)
print(f"{sys.argv[0]} code={os.environ.get('PYTHONPATH')} cards={len(cpu)} cpu p50 {pct(cpu,.5):.1f} p95 {pct(cpu,.95):.1f}"
      f" | wall p50 {pct(wall,.5):.1f} p95 {pct(wall,.95):.1f} | load {os.getloadavg()[0]:.2f}")
svc.close() if hasattr(svc, "close") else None
shutil.rmtree(tmp, ignore_errors=True)
