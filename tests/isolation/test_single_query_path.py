"""Every index query is built through one function that adds the scope filter; no other code path
reads the index for search. These tests read the adapters' source, so a new query path written
anywhere else fails here until it goes through the scoped builder."""

from __future__ import annotations

import ast
from datetime import datetime, timezone
from pathlib import Path

from memlane.adapters.opensearch.queries import search_lines, similarities_body, tenant_ids_query
from memlane.domain.scope import search_scope
from memlane.ports import IndexQuery

ROOT = Path(__file__).resolve().parents[2] / "shared" / "memlane"
ENGINE_READS = ("search", "msearch", "count", "scroll", "search_template", "msearch_template", "knn_search")


def functions_with(path: Path, predicate) -> dict[str, int]:
    """function name → how many nodes inside it satisfy `predicate`."""
    found: dict[str, int] = {}
    for fn in ast.walk(ast.parse(path.read_text())):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            n = sum(1 for node in ast.walk(fn) if predicate(node))
            if n:
                found[fn.name] = n
    return found


def sql_text(node: ast.AST) -> str:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value for v in node.values if isinstance(v, ast.Constant))
    return ""


def test_embedded_index_reads_documents_only_in_the_scoped_select():
    path = ROOT / "adapters/local/embedded_index.py"
    reads = functions_with(path, lambda n: "SELECT" in sql_text(n).upper()
                           and ("FROM DOCS" in sql_text(n).upper() or "DOCS_FTS" in sql_text(n).upper()))
    # `count` is a size probe for tests and benchmarks (store-wide, returns a number, not documents);
    # `documents` is `memlane fsck`'s store-wide inventory, reached from the admin CLI only, never a route;
    # `build_graphs` lists the store's tenants past the ANN threshold (their keys, no document)
    assert set(reads) <= {"_select", "count", "documents", "build_graphs"}, reads
    source = path.read_text()
    # the keyword half's term indexes hold only what `_select` read for their own tenant
    assert source.count("TermIndex(") == 1 and source.count(".add(self._select(") == 1
    assert "return TermIndex(self._select(key[0], whole_tenant, _TEXT_COLUMNS, db=db))" in source
    assert "terms.add(self._select(key[0], scope, _TEXT_COLUMNS, named=added[key]))" in source
    # and the one builder always takes its conditions from `where`, which starts with store, app and tenant
    select = source[source.index("    def _select("):source.index("    # -- vector cache")]
    assert "clauses, params = where(store, f)" in select
    filters = (ROOT / "adapters/local/index_filter.py").read_text()
    where = filters[filters.index("def where("):filters.index("def candidates(")]
    assert 'clauses = ["d.store = ?", "d.app_id = ?", "d.tenant_id = ?"]' in where
    assert "params: list[Any] = [store, f.scope.app_id, f.scope.tenant_id]" in where
    # no other module of the embedded index reads documents
    for module in ("index_filter.py", "index_schema.py", "index_vectors.py", "index_terms.py", "index_cache.py"):
        assert not functions_with(ROOT / "adapters/local" / module,
                                  lambda n: "SELECT" in sql_text(n).upper() and "DOCS" in sql_text(n).upper()), module


def test_opensearch_adapter_sends_searches_only_from_the_scoped_builder():
    calls = functions_with(ROOT / "adapters/opensearch/index.py",
                           lambda n: isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                           and n.func.attr in ENGINE_READS)
    # `search` sends search_lines' body and `similarities` its follow-up's (cosines by id, under the scope);
    # `_versions` is the lookup before a by-id write (no content), and it too carries the tenant: its
    # body is tenant_ids_query's; `_score_added` measures what the engine adds to a tenant's scores, with a search of
    # the tenant's documents (offset_probe: its terms, no content). Each is sent with the tenant's routing.
    assert calls == {"search": 1, "similarities": 1, "_versions": 1, "_score_added": 1}, calls
    source = (ROOT / "adapters/opensearch/index.py").read_text()
    probe = source[source.index("    def _score_added("):source.index("    def _dim(")]
    assert "body=offset_probe(store, app_id, tenant_id)" in probe and "routing=routing_key(app_id, tenant_id)" in probe
    queries = (ROOT / "adapters/opensearch/queries.py").read_text()
    assert "tenant_terms(store, app_id, tenant_id)" in queries[queries.index("def offset_probe("):]
    versions = source[source.index("    def _versions("):source.index("    def _bulk(")]
    assert "tenant_ids_query(store, app_id, tenant_id, chunk)" in versions
    assert "routing=routing_key(app_id, tenant_id)" in versions
    similarities = source[source.index("    def similarities("):source.index("    # -- internals")]
    assert "similarities_body(store, scope, wanted, unit)" in similarities
    assert "routing=routing_key(scope.app_id, scope.tenant_id)" in similarities
    for module in (ROOT / "adapters/opensearch").glob("*.py"):
        if module.name not in ("index.py",):
            assert not functions_with(module, lambda n: isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                                      and n.func.attr in ENGINE_READS), module.name


def test_every_opensearch_query_line_carries_the_scope_filter():
    scope = search_scope({"app_id": "app", "tenant_id": "ann", "run_id": ["r1", "r2"]})
    q = IndexQuery(scope=scope, text="where does Ann work", vector=[0.1] * 8, k=5,
                   time_from=datetime(2024, 1, 1, tzinfo=timezone.utc))
    lines, signals = search_lines("memlane-demo", "demo", q, k=5, vector=[0.1] * 8)
    assert signals == ["keyword", "vector"]
    exact, _ = search_lines("memlane-demo", "demo", q, k=5, vector=[0.1] * 8, exact=True, count_up_to=101)
    for header, body in zip(lines[::2] + exact[::2], lines[1::2] + exact[1::2]):
        assert header["routing"] == "app#ann"
        text = repr(body)
        for term in ("{'store': 'demo'}", "{'app_id': 'app'}", "{'tenant_id': 'ann'}"):
            assert term in text, (term, body)
    for body in lines[1::2] + exact[1:4:2]:  # the count line counts the whole tenant (its plan, no hit)
        assert "'run_id': ['r1', 'r2']" in repr(body), body
    knn = lines[3]["query"]["knn"]["embedding"]
    assert "filter" in knn  # inside the k-NN clause (efficient filtering), not a post-filter


def test_the_lookup_before_a_by_id_write_carries_the_tenant():
    query = repr(tenant_ids_query("demo", "app", "ann", ["m1", "m2"]))
    for term in ("{'terms': {'memory_id': ['m1', 'm2']}}", "{'store': 'demo'}", "{'app_id': 'app'}", "{'tenant_id': 'ann'}"):
        assert term in query, term


def test_the_cosines_read_by_id_carry_the_scope():
    scope = search_scope({"app_id": "app", "tenant_id": "ann", "agent_id": "a1", "run_id": ["r1", "r2"]})
    query = repr(similarities_body("demo", scope, ["m1", "m2"], [0.1] * 8))
    for term in ("{'terms': {'memory_id': ['m1', 'm2']}}", "{'store': 'demo'}", "{'app_id': 'app'}", "{'tenant_id': 'ann'}",
                 "'agent_id': ['a1']", "'run_id': ['r1', 'r2']"):
        assert term in query, term
