"""What a results JSON records so a reader can rerun its figure."""

import re
import sys

from memlane.bench import provenance


def test_it_records_commit_dirty_flag_versions_machine_blas_seed_and_command(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["/venv/bin/memlane", "bench", "locomo", "--data", "my data.json"])
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Haswell")
    got = provenance.collect(seed=13)
    assert re.fullmatch(r"[0-9a-f]{40}", got["git"]["commit"]) and isinstance(got["git"]["dirty"], bool)
    assert got["packages"]["numpy"] and got["packages"]["memlane"]
    assert got["machine"]["cores"] >= 1 and got["machine"]["blas"]["name"]
    assert got["machine"]["environment"]["OPENBLAS_CORETYPE"] == "Haswell"
    assert got["seed"] == 13
    assert got["command"] == "memlane bench locomo --data 'my data.json'"


def test_outside_a_git_checkout_the_commit_is_none_and_said(tmp_path):
    got = provenance.git(tmp_path)
    assert got["commit"] is None and got["dirty"] is None and "not a git checkout" in got["note"]
