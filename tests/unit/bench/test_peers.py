"""`--methods mem0`: the open-source Mem0 library as a peer, driven through its public API (a fake
Memory here: the real one is an optional extra, memlane[peers])."""

import json

from memlane.bench import locomo, peers
from tests.unit.bench.test_locomo import SAMPLE


class FakeMemory:
    """What Mem0's Memory offers: add(messages, user_id=, infer=, metadata=) and search(query, filters=, top_k=, threshold=)."""

    def __init__(self):
        self.rows, self.calls = [], []

    def add(self, messages, *, user_id, infer, metadata):
        self.calls.append({"user_id": user_id, "infer": infer, "messages": messages, "metadata": metadata})
        self.rows.append((user_id, messages[0]["content"], metadata))

    def search(self, query, *, filters, top_k, threshold):
        words = set(query.lower().replace("?", "").split())
        hits = [(len(words & set(c.lower().split())), c, m) for u, c, m in self.rows if u == filters["user_id"]]
        hits.sort(key=lambda h: -h[0])
        return {"results": [{"memory": c, "metadata": m, "score": s} for s, c, m in hits[:top_k] if s > threshold]}


def test_mem0_gets_each_turn_as_the_other_baselines_see_it_without_inference(tmp_path):
    path = tmp_path / "d.json"
    path.write_text(json.dumps(SAMPLE))
    [conv] = locomo.load(path)
    fake = FakeMemory()
    mem0 = peers.Mem0Turns(embedder=None, data_dir=tmp_path, memory=fake)
    mem0.prepare(conv)
    assert len(fake.calls) == len(conv.turns) and all(c["infer"] is False for c in fake.calls)
    assert {c["user_id"] for c in fake.calls} == {"conv-x"}  # one user per conversation: no conversation sees another
    assert fake.calls[0]["messages"] == [{"role": "user", "name": "Ann",
                                          "content": "Ann (8 May 2023): I adopted a beagle named Max last Saturday."}]
    [top, *_] = mem0.search(conv, "Who started working as a nurse?", 5)
    assert top.turns == ("D2:1",) and top.text == "Bob: I started working as a nurse at the city hospital."


def test_without_the_extra_installed_the_method_says_how_to_get_it(tmp_path, monkeypatch):
    import builtins

    real = builtins.__import__

    def no_mem0(name, *args, **kwargs):
        if name == "mem0" or name.startswith("mem0."):
            raise ImportError("No module named 'mem0'")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_mem0)
    try:
        peers.Mem0Turns(embedder=None, data_dir=tmp_path)
    except SystemExit as exc:
        assert "memlane[peers]" in str(exc)
    else:
        raise AssertionError("expected a clear exit")
