"""What this version of memlane expects its stores to look like, and the differences from what exists.

Pure: adapters describe what exists (a DynamoDB table, an OpenSearch index, a local file's schema
version) and what this version defines; this module compares the two and names every difference
precisely ("field text: analyzer english expected, standard found"). The schema policy
(services/schema.py) decides what to do about them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from .errors import DependencyFailed

MISSING: Any = None  # a `found` of None: the thing does not exist


class _PerStore:
    """An expected value that each store sets for itself (an index's embedding dimension): not compared."""

    def __repr__(self) -> str:
        return "PER_STORE"


PER_STORE: Any = _PerStore()


@dataclass(frozen=True)
class Difference:
    where: str  # "table memlane", "index memlane-s1_v1"
    what: str  # "field text: analyzer", "key schema", "TTL attribute"
    expected: Any
    found: Any

    def __str__(self) -> str:
        head = f"{self.where}: " + (f"{self.what} " if self.what else "")
        if self.found is None:
            return f"{head}{_show(self.expected)} expected, missing"
        if self.expected is None:
            return f"{head}not expected, {_show(self.found)} found"
        return f"{head}{_show(self.expected)} expected, {_show(self.found)} found"


class SchemaMismatch(DependencyFailed):
    """What exists is not what this version expects (and the policy may not change it)."""

    code = "schema_mismatch"

    def __init__(self, differences: list[Difference], *, hint: str = ""):
        lines = "; ".join(str(d) for d in differences)
        super().__init__(f"schema differs from what this version expects: {lines}" + (f" ({hint})" if hint else ""),
                         differences=[str(d) for d in differences])
        self.differences = differences


# -- tables (DynamoDB) ---------------------------------------------------------------------------------

KeyPart = tuple[str, str, str]  # (attribute, HASH | RANGE, S | N | B)


@dataclass(frozen=True)
class TableSchema:
    keys: tuple[KeyPart, ...]
    indexes: Mapping[str, tuple[KeyPart, ...]] = field(default_factory=dict)  # global secondary indexes
    ttl_attribute: str | None = None  # None: TTL off


def diff_table(name: str, expected: TableSchema, found: TableSchema | None) -> list[Difference]:
    where = f"table {name}"
    if found is None:
        return [Difference(where, "", "a table", MISSING)]
    out: list[Difference] = []
    if tuple(found.keys) != tuple(expected.keys):
        out.append(Difference(where, "key schema", _keys(expected.keys), _keys(found.keys)))
    for index in sorted(set(expected.indexes) | set(found.indexes)):
        want, have = expected.indexes.get(index), found.indexes.get(index)
        if want != have:
            out.append(Difference(where, f"index {index}", want and _keys(want), have and _keys(have)))
    if found.ttl_attribute != expected.ttl_attribute:
        out.append(Difference(where, "TTL attribute", expected.ttl_attribute, found.ttl_attribute))
    return out


def _keys(parts: tuple[KeyPart, ...]) -> str:
    return ", ".join(f"{name} {kind} {typ}" for name, kind, typ in parts)


# -- search indices (OpenSearch) -----------------------------------------------------------------------


@dataclass(frozen=True)
class IndexDefinition:
    """One index's settings and mappings as OpenSearch states them (settings values are strings there)."""

    settings: Mapping[str, Any]
    mappings: Mapping[str, Any]


def diff_index(name: str, expected: IndexDefinition, found: IndexDefinition | None) -> list[Difference]:
    """Every expected setting and mapping entry compared; extra settings (uuid, creation date, replicas
    that auto-expand) are OpenSearch's own and ignored, but an extra *field* is reported: another version's."""
    where = f"index {name}"
    if found is None:
        return [Difference(where, "", "an index", MISSING)]
    out: list[Difference] = []
    _walk(where, ("settings",), expected.settings, found.settings, out)
    _walk(where, ("mappings",), expected.mappings, found.mappings, out)
    wanted = expected.mappings.get("properties", {})
    for extra in sorted(set(found.mappings.get("properties", {})) - set(wanted)):
        out.append(Difference(where, f"field {extra}", None, found.mappings["properties"][extra].get("type", "a field")))
    return out


def _walk(where: str, path: tuple[str, ...], expected: Any, found: Any, out: list[Difference]) -> None:
    if expected is PER_STORE:
        return
    if isinstance(expected, Mapping):
        if not isinstance(found, Mapping):
            out.append(Difference(where, _label(path), _show_map(expected), found))
            return
        for key, value in expected.items():
            _walk(where, (*path, key), value, found.get(key), out)
        return
    if found is None:
        out.append(Difference(where, _label(path), expected, MISSING))
    elif _normal(expected) != _normal(found):
        out.append(Difference(where, _label(path), expected, found))


def _normal(value: Any) -> Any:
    """OpenSearch answers settings as strings ("2", "true"): compare by that form."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [_normal(v) for v in value]
    return value


def _label(path: tuple[str, ...]) -> str:
    if path[:2] == ("mappings", "properties") and len(path) >= 3:
        rest = ".".join(path[3:])
        return f"field {path[2]}" + (f": {rest}" if rest else "")
    if path[0] == "settings":
        return "setting " + ".".join(path[1:])
    return "mapping " + ".".join(path[1:])


# -- local files (SQLite) ------------------------------------------------------------------------------


def diff_version(where: str, expected: int, found: int | None) -> list[Difference]:
    """A local file's schema version (SQLite user_version); None: no file yet."""
    if found == expected:
        return []
    return [Difference(where, "schema version", expected, found)]


def _show(value: Any) -> str:
    if isinstance(value, Mapping):
        return _show_map(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_show(v) for v in value) + "]"
    return str(value).lower() if isinstance(value, bool) else str(value)


def _show_map(value: Mapping[str, Any]) -> str:
    return "{" + ", ".join(f"{k}: {_show(v)}" for k, v in value.items()) + "}"


# -- one description, whatever the store ---------------------------------------------------------------


@dataclass(frozen=True)
class Described:
    """What an adapter expects and what it found: a table, the indices of one prefix (each compared with
    the one expected definition), or a local file's schema version."""

    name: str
    expected: TableSchema | IndexDefinition | int
    found: TableSchema | Mapping[str, IndexDefinition] | int | None


def differences(described: Described) -> list[Difference]:
    expected, found = described.expected, described.found
    if isinstance(expected, TableSchema):
        return diff_table(described.name, expected, found if isinstance(found, TableSchema) else None)
    if isinstance(expected, IndexDefinition):
        indices = found if isinstance(found, Mapping) else {}
        return [d for name in sorted(indices) for d in diff_index(name, expected, indices[name])]
    return diff_version(described.name, expected, found if isinstance(found, int) else None)
