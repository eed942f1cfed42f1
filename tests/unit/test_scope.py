"""The scope rules of DESIGN §1 are contract: every rule and every refusal."""

import pytest

from memlane.domain.errors import InvalidScope
from memlane.domain.scope import DEFAULT, Scope, exact_scope, search_scope, write_scope


class TestWriteScope:
    def test_app_id_required(self):
        with pytest.raises(InvalidScope) as e:
            write_scope({"tenant_id": "t"})
        assert e.value.field == "scope.app_id"

    def test_empty_or_missing_scope_refused(self):
        with pytest.raises(InvalidScope):
            write_scope(None)
        with pytest.raises(InvalidScope):
            write_scope({"app_id": ""})

    def test_missing_fields_become_default(self):
        assert write_scope({"app_id": "a"}) == Scope(app_id="a", tenant_id=DEFAULT, agent_id=DEFAULT, run_id=DEFAULT)
        assert write_scope({"app_id": "a", "run_id": "r"}).run_id == "r"

    @pytest.mark.parametrize("field", ["app_id", "tenant_id", "agent_id", "run_id"])
    def test_wildcard_refused(self, field):
        raw = {"app_id": "a", field: "*"}
        with pytest.raises(InvalidScope) as e:
            write_scope(raw)
        assert e.value.field == f"scope.{field}"

    @pytest.mark.parametrize("bad", ["a#b", "a b", "x" * 129, "ü", "a/b", "a~b", 7, ["a"], ".", "..", "..."])
    @pytest.mark.parametrize("field", ["app_id", "tenant_id", "agent_id", "run_id"])
    def test_malformed_ids_refused(self, field, bad):
        raw = {"app_id": "a", field: bad}
        with pytest.raises(InvalidScope) as e:
            write_scope(raw)
        assert e.value.field == f"scope.{field}"

    def test_delimiter_cannot_be_injected(self):
        # "t#x" would otherwise address the partition of tenant "t" with a forged suffix
        with pytest.raises(InvalidScope):
            write_scope({"app_id": "a", "tenant_id": "t#x"})
        with pytest.raises(InvalidScope):
            write_scope({"app_id": "a#t", "tenant_id": "x"})

    def test_allowed_characters_and_length(self):
        s = write_scope({"app_id": "my-app_1.v2", "tenant_id": "user@example.com", "agent_id": "a:b+c",
                         "run_id": "r" * 128})
        assert s.run_id == "r" * 128

    def test_tenant_key(self):
        assert write_scope({"app_id": "a", "tenant_id": "t"}).tenant_key == "a#t"


class TestSearchScope:
    @pytest.mark.parametrize("missing", ["app_id", "tenant_id"])
    def test_app_and_tenant_required(self, missing):
        raw = {"app_id": "a", "tenant_id": "t"}
        del raw[missing]
        with pytest.raises(InvalidScope) as e:
            search_scope(raw)
        assert e.value.field == f"scope.{missing}"

    def test_tenant_wildcard_refused(self):
        with pytest.raises(InvalidScope):
            search_scope({"app_id": "a", "tenant_id": "*"})
        with pytest.raises(InvalidScope):
            search_scope({"app_id": "*", "tenant_id": "t"})

    def test_agent_and_run_forms(self):
        assert search_scope({"app_id": "a", "tenant_id": "t"}).agent_ids is None
        assert search_scope({"app_id": "a", "tenant_id": "t", "agent_id": "*"}).agent_ids is None
        assert search_scope({"app_id": "a", "tenant_id": "t", "agent_id": "x"}).agent_ids == ("x",)
        assert search_scope({"app_id": "a", "tenant_id": "t", "run_id": ["r1", "r2", "r1"]}).run_ids == ("r1", "r2")

    @pytest.mark.parametrize("bad", [[], ["ok", "b#d"], [1], {"x": 1}, ["*"]])
    def test_bad_lists_refused(self, bad):
        with pytest.raises(InvalidScope):
            search_scope({"app_id": "a", "tenant_id": "t", "run_id": bad})

    def test_too_many_values_refused(self):
        with pytest.raises(InvalidScope):
            search_scope({"app_id": "a", "tenant_id": "t", "agent_id": [f"a{i}" for i in range(51)]})

    def test_matches(self):
        f = search_scope({"app_id": "a", "tenant_id": "t", "run_id": ["r1"]})
        assert f.matches({"app_id": "a", "tenant_id": "t", "agent_id": "x", "run_id": "r1"})
        assert not f.matches({"app_id": "a", "tenant_id": "t", "agent_id": "x", "run_id": "r2"})
        assert not f.matches({"app_id": "a", "tenant_id": "t2", "agent_id": "x", "run_id": "r1"})


class TestMessageScope:
    @pytest.mark.parametrize("missing", ["app_id", "tenant_id", "agent_id", "run_id"])
    def test_all_four_required(self, missing):
        raw = {"app_id": "a", "tenant_id": "t", "agent_id": "g", "run_id": "r"}
        del raw[missing]
        with pytest.raises(InvalidScope) as e:
            exact_scope(raw)
        assert e.value.field == missing

    @pytest.mark.parametrize("field", ["app_id", "tenant_id", "agent_id", "run_id"])
    def test_no_wildcards(self, field):
        raw = {"app_id": "a", "tenant_id": "t", "agent_id": "g", "run_id": "r", field: "*"}
        with pytest.raises(InvalidScope):
            exact_scope(raw)

    def test_default_is_an_ordinary_value(self):
        assert exact_scope({"app_id": "a", "tenant_id": DEFAULT, "agent_id": DEFAULT, "run_id": DEFAULT}).run_id == DEFAULT
