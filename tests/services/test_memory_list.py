"""Listing a tenant's memories narrowed to agents or runs: pages are filled, every memory is listed once."""

from memlane.services import explicit, memories, stores

APP, TENANT = "app", "ann"


def test_a_list_narrowed_to_a_run_fills_its_page_and_pages_through_everything_once(deps):
    """A trial (session 30): `GET .../memories?run_id=...&limit=10` answered empty pages with a cursor until the
    sixth, where the run's memory was: a client stopping at an empty page thought the run had none."""
    store = stores.create(deps, name="demo").name
    for run, n in (("busy", 57), ("quiet", 13)):  # in the partition's order, the busy run's come first
        for start in range(0, n, 20):
            explicit.write(deps, store, scope={"app_id": APP, "tenant_id": TENANT, "agent_id": "bot", "run_id": run},
                           memories=[{"text": f"{run} note number {i}.", "memory_id": f"{run}-{i:03d}"}
                                     for i in range(start, min(n, start + 20))])
    quiet = {"app_id": APP, "tenant_id": TENANT, "run_id": "quiet"}
    page, cursor = memories.list_(deps, store, scope=quiet, limit=10, cursor=None)
    assert len(page) == 10 and cursor is not None
    seen = [m.memory_id for m in page]
    while cursor is not None:
        page, cursor = memories.list_(deps, store, scope=quiet, limit=10, cursor=cursor)
        assert page or cursor is None
        seen += [m.memory_id for m in page]
    assert sorted(seen) == [f"quiet-{i:03d}" for i in range(13)]

    everything, cursor, pages = [], None, 0
    while True:
        page, cursor = memories.list_(deps, store, scope={"app_id": APP, "tenant_id": TENANT}, limit=25, cursor=cursor)
        everything += [m.memory_id for m in page]
        pages += 1
        if cursor is None:
            break
    assert len(everything) == len(set(everything)) == 70 and pages == 3


def test_a_list_reads_at_most_so_many_memories_a_page(deps):
    """A filter that skips more than the scan bound answers a short page with `next_cursor` set (bounded work)."""
    store = stores.create(deps, name="demo").name
    for start in (0, 15):
        explicit.write(deps, store, scope={"app_id": APP, "tenant_id": TENANT, "agent_id": "bot", "run_id": "a"},
                       memories=[{"text": f"a note {i}.", "memory_id": f"a-{i:03d}"} for i in range(start, start + 15)])
    explicit.write(deps, store, scope={"app_id": APP, "tenant_id": TENANT, "agent_id": "bot", "run_id": "z"},
                   memories=[{"text": "the last note.", "memory_id": "z-000"}])
    page, cursor = deps.repo.list_memories(store, memories.search_scope({"app_id": APP, "tenant_id": TENANT,
                                                                         "run_id": "z"}),
                                           limit=10, cursor=None, max_scan=20)
    assert page == [] and cursor is not None
    page, cursor = deps.repo.list_memories(store, memories.search_scope({"app_id": APP, "tenant_id": TENANT,
                                                                         "run_id": "z"}),
                                           limit=10, cursor=cursor, max_scan=20)
    assert [m.memory_id for m in page] == ["z-000"] and cursor is None
