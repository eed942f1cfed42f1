"""`memlane bench soak` end to end, briefly: its own server, real HTTP, the report and its verdict."""

import json

import pytest

from memlane.bench import main as bench_main
from memlane.bench.soak import percentile

pytestmark = pytest.mark.e2e


def test_a_short_soak_reports_every_figure_and_verifies_its_adds(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MEMLANE_EMBEDDER", "hashing")
    monkeypatch.setenv("MEMLANE_RERANKER", "none")
    out = tmp_path / "soak.json"
    code = bench_main(["soak", "--clients", "3", "--seconds", "3", "--tenants", "3", "--json", str(out)])
    report = json.loads(out.read_text())
    assert code == 0, capsys.readouterr().out
    assert report["adds_accepted"] > 0 and report["lost_adds"] == 0 and report["server_errors"] == 0
    assert report["cross_tenant_during_load"] == 0 and report["verify"]["cross_tenant_after_count"] == 0
    assert report["verify"]["tasks"] == {"SUCCEEDED": report["adds_accepted"]}
    assert report["verify"]["missing_messages"] == 0
    assert report["verify"]["found_by_own_tenant"] == report["verify"]["searched"] > 0
    assert set(report["operations"]) == {"add", "search", "list"}
    assert all(op["count"] > 0 and op["p50_ms"] <= op["p95_ms"] <= op["p99_ms"] for op in report["operations"].values())
    assert "## soak: 3 clients, 3 tenants" in capsys.readouterr().out


def test_the_global_lock_variant_serves_the_same_load(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMLANE_EMBEDDER", "hashing")
    monkeypatch.setenv("MEMLANE_RERANKER", "none")
    out = tmp_path / "soak.json"
    assert bench_main(["soak", "--clients", "2", "--seconds", "2", "--global-lock", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["global_lock"] is True and report["lost_adds"] == 0 and report["adds_accepted"] > 0


def test_percentile_is_nearest_rank():
    assert percentile([], 50) == 0.0
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert percentile(list(map(float, range(101))), 99) == 99.0
