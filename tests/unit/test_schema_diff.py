"""The schema comparison (domain/schema.py): expected vs what exists → precise differences."""

from __future__ import annotations

from memlane.domain.schema import (
    PER_STORE,
    Difference,
    IndexDefinition,
    SchemaMismatch,
    TableSchema,
    diff_index,
    diff_table,
    diff_version,
)

KEYS = (("pk", "HASH", "S"), ("sk", "RANGE", "S"))
EXPECTED_TABLE = TableSchema(keys=KEYS, ttl_attribute="expires_at")


def test_the_same_table_has_no_difference() -> None:
    assert diff_table("memlane", EXPECTED_TABLE, TableSchema(keys=KEYS, ttl_attribute="expires_at")) == []


def test_a_missing_table() -> None:
    [d] = diff_table("memlane", EXPECTED_TABLE, None)
    assert str(d) == "table memlane: a table expected, missing"


def test_key_schema_ttl_and_indexes_are_each_named() -> None:
    found = TableSchema(keys=(("id", "HASH", "S"),), indexes={"by-time": (("t", "HASH", "N"),)}, ttl_attribute=None)
    assert [str(d) for d in diff_table("memlane", EXPECTED_TABLE, found)] == [
        "table memlane: key schema pk HASH S, sk RANGE S expected, id HASH S found",
        "table memlane: index by-time not expected, t HASH N found",
        "table memlane: TTL attribute expires_at expected, missing",
    ]


def test_a_key_of_another_type_is_a_difference() -> None:
    found = TableSchema(keys=(("pk", "HASH", "S"), ("sk", "RANGE", "N")), ttl_attribute="expires_at")
    [d] = diff_table("memlane", EXPECTED_TABLE, found)
    assert "sk RANGE N found" in str(d)


def test_an_expected_index_that_is_missing() -> None:
    expected = TableSchema(keys=KEYS, indexes={"gsi1": (("g", "HASH", "S"),)}, ttl_attribute="expires_at")
    [d] = diff_table("memlane", expected, EXPECTED_TABLE)
    assert str(d) == "table memlane: index gsi1 g HASH S expected, missing"


def _index(**overrides: object) -> IndexDefinition:
    props = {"text": {"type": "text", "analyzer": "english"},
             "embedding": {"type": "knn_vector", "dimension": PER_STORE,
                           "method": {"name": "hnsw", "space_type": "cosinesimil", "engine": "lucene",
                                      "parameters": {"m": 16}}}}
    mappings = {"dynamic": "strict", "_routing": {"required": True}, "properties": props}
    settings = {"index": {"number_of_shards": 2, "knn": True}}
    for path, value in overrides.items():
        *parents, leaf = path.split("__")
        node = {"settings": settings, "mappings": mappings}
        for p in parents:
            node = node[p]
        if value is None:
            node.pop(leaf)
        else:
            node[leaf] = value
    return IndexDefinition(settings=settings, mappings=mappings)


def _found(**overrides: object) -> IndexDefinition:
    """As OpenSearch states it: settings as strings, plus its own settings, a real dimension."""
    found = _index(**overrides)
    settings = {"index": {**{k: str(v).lower() for k, v in found.settings["index"].items()},
                          "uuid": "x1", "creation_date": "1700000000000", "number_of_replicas": "0"}}
    props = dict(found.mappings["properties"])
    if "embedding" in props:
        props["embedding"] = {**props["embedding"], "dimension": 384}
    return IndexDefinition(settings=settings, mappings={**found.mappings, "properties": props})


def test_the_same_index_has_no_difference_whatever_the_dimension() -> None:
    assert diff_index("memlane-s1_v1", _index(), _found()) == []


def test_an_analyzer_that_differs_is_named_with_its_field() -> None:
    found = _found(mappings__properties__text={"type": "text", "analyzer": "standard"})
    assert [str(d) for d in diff_index("memlane-s1_v1", _index(), found)] == [
        "index memlane-s1_v1: field text: analyzer english expected, standard found"]


def test_knn_settings_and_method() -> None:
    found = _found(settings__index={"number_of_shards": 2, "knn": False})
    found.mappings["properties"]["embedding"]["method"] = {"name": "hnsw", "space_type": "l2", "engine": "lucene",
                                                            "parameters": {"m": 16}}
    assert [str(d) for d in diff_index("i", _index(), found)] == [
        "index i: setting index.knn true expected, false found",
        "index i: field embedding: method.space_type cosinesimil expected, l2 found",
    ]


def test_missing_and_extra_fields_and_mapping_options() -> None:
    found = _found(mappings__dynamic="true", mappings___routing=None)
    found.mappings["properties"].pop("text")
    found.mappings["properties"]["legacy"] = {"type": "keyword"}
    assert [str(d) for d in diff_index("i", _index(), found)] == [
        "index i: mapping dynamic strict expected, true found",
        "index i: mapping _routing {required: true} expected, missing",
        "index i: field text {type: text, analyzer: english} expected, missing",
        "index i: field legacy not expected, keyword found",
    ]


def test_a_missing_index() -> None:
    assert [str(d) for d in diff_index("i", _index(), None)] == ["index i: an index expected, missing"]


def test_local_file_versions() -> None:
    assert diff_version("table.db", 1, 1) == []
    assert [str(d) for d in diff_version("index.db", 2, 1)] == ["index.db: schema version 2 expected, 1 found"]
    assert [str(d) for d in diff_version("index.db", 2, None)] == ["index.db: schema version 2 expected, missing"]


def test_the_error_carries_every_difference() -> None:
    error = SchemaMismatch([Difference("index i", "field text: analyzer", "english", "standard")])
    assert error.code == "schema_mismatch"
    assert "field text: analyzer english expected, standard found" in error.message
    assert error.details["differences"] == ["index i: field text: analyzer english expected, standard found"]
