"""Trial B (session 38): a deletion whose process died after its table writes and before its compaction left the
deleted words in the files' logs for good — after the restart, a retried DELETE (404), more writes, a sweep and a
clean close. A run deletion's job found the run cleared and did not compact; a memory delete has no job at all. The
job compacts now, and a start after an unclean end (the data dir's lock file still names the dead owner) rewrites
the files."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

from memlane.adapters.embedders.hashing import HashingEmbedder
from memlane.bootstrap import build_local
from memlane.config import Settings
from memlane.services import erase, explicit, stores
from memlane.services.deps import Deps

SECRET = "Qqcode5150"
SCOPE = {"app_id": "app", "tenant_id": "gina", "agent_id": "bot", "run_id": "r1"}


def holding(data_dir: Path) -> list[str]:
    return [p.name for p in sorted(data_dir.rglob("*")) if p.is_file() and SECRET.encode() in p.read_bytes()]


class Killed(Exception):
    pass


def test_the_job_of_a_run_deletion_cut_short_before_its_compaction_compacts(service, monkeypatch):
    deps = service.deps
    stores.create(deps, name="demo")
    explicit.write(deps, "demo", scope=SCOPE, memories=[{"text": f"Gina's alarm code is {SECRET}.", "memory_id": "a"}])

    def killed(self, *, rewrite=False):
        raise Killed("killed before the compaction")

    monkeypatch.setattr(Deps, "compact", killed)
    try:  # its job due soon
        erase.delete_run(replace(deps, settings=replace(deps.settings, sync_retry_delay=0.2)), "demo", scope=SCOPE)
    except Killed:
        pass
    monkeypatch.undo()
    asked = []
    for compactor in deps.compactors:
        real = compactor.compact
        monkeypatch.setattr(compactor, "compact", lambda *, rewrite=False, real=real: asked.append(rewrite) or
                            real(rewrite=rewrite))
    service.drain()  # the clear_run job: the run is cleared already
    assert asked and all(asked)
    assert holding(Path(deps.table.path).parent) == []


def test_a_start_after_a_process_died_before_a_deletions_compaction_rewrites_the_files(tmp_path):
    data_dir = tmp_path / "data"
    died = subprocess.run([sys.executable, "-c", textwrap.dedent(f"""
        import os
        from pathlib import Path
        from memlane.adapters.embedders.hashing import HashingEmbedder
        from memlane.bootstrap import build_local
        from memlane.config import Settings
        from memlane.services import explicit, memories, stores
        from memlane.services.deps import Deps
        svc = build_local(Settings.from_env(env={{}}, data_dir=Path({str(data_dir)!r}), reranker="none"),
                          embedder=HashingEmbedder())
        stores.create(svc.deps, name="demo")
        explicit.write(svc.deps, "demo", scope={SCOPE!r},
                       memories=[{{"text": "Gina's alarm code is {SECRET}.", "memory_id": "alarm"}}]
                                + [{{"text": f"filler {{i}}"}} for i in range(3)])
        Deps.compact = lambda self, *, rewrite=False: os._exit(86)  # kill -9 before the compaction
        memories.delete(svc.deps, "demo", app_id="app", tenant_id="gina", memory_id="alarm")
    """)], env={"PYTHONPATH": str(Path(__file__).parents[2] / "shared"), "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, timeout=300)
    assert died.returncode == 86, died.stderr
    assert holding(data_dir)  # the deleted words, in the logs the dead process left
    svc = build_local(Settings.from_env(env={}, data_dir=data_dir, reranker="none"), embedder=HashingEmbedder())
    try:
        assert holding(data_dir) == []
        assert stores.get(svc.deps, "demo").name == "demo"
    finally:
        svc.close()
    again = build_local(Settings.from_env(env={}, data_dir=data_dir, reranker="none"), embedder=HashingEmbedder())
    try:
        assert not again.owner.unclean  # a clean close before
    finally:
        again.close()
