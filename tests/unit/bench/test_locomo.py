"""The LoCoMo benchmark's loading, mapping and scoring, on a tiny conversation in the original format."""

import json
from datetime import datetime, timezone

import pytest

from memlane.bench import locomo

SAMPLE = [{
    "sample_id": "conv-x",
    "conversation": {
        "speaker_a": "Ann", "speaker_b": "Bob",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a beagle named Max last Saturday."},
            {"speaker": "Bob", "dia_id": "D1:2", "text": "Cute! Which breed did you want before?"},
            {"speaker": "Ann", "dia_id": "D1:3", "text": "A corgi, honestly.", "blip_caption": "a dog on a sofa"},
        ],
        "session_2_date_time": "9:00 am on 20 May, 2023",
        "session_2": [
            {"speaker": "Bob", "dia_id": "D2:1", "text": "I started working as a nurse at the city hospital."},
            {"speaker": "Ann", "dia_id": "D2:2", "text": "That is wonderful news, Bob, congratulations!"},
        ],
    },
    "qa": [
        {"question": "What dog did Ann adopt?", "evidence": ["D1:1"], "category": 4},
        {"question": "Where does Bob work?", "evidence": ["D2:1", "D2:1; D1:1"], "category": 1},
        {"question": "What did Ann say about cats?", "evidence": ["D"], "category": 5},
    ],
}]


@pytest.fixture()
def data(tmp_path):
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps(SAMPLE))
    return path


def test_load_parses_sessions_captions_and_cleans_evidence(data):
    [conv] = locomo.load(data)
    assert [n for n, _, _ in conv.sessions] == [1, 2]
    assert conv.sessions[1][1] == datetime(2023, 5, 20, 9, 0, tzinfo=timezone.utc)
    assert conv.turns[2].content == "A corgi, honestly. [shares a photo of a dog on a sofa]"
    assert [q.evidence for q in conv.questions] == [("D1:1",), ("D2:1",)]
    assert conv.malformed_evidence == 2 and conv.no_evidence == 1


def test_bm25_baseline_finds_the_turn_and_scores_it(data):
    [conv] = locomo.load(data)
    bm25 = locomo.BM25Turns()
    bm25.prepare(conv)
    results = bm25.search(conv, "Where does Bob work as a nurse?", 5)
    assert results[0].turns == ("D2:1",) and results[0].text.startswith("Bob: ")
    values = locomo.question_metrics(results, ("D2:1",))
    assert values["recall@1"] == 1.0 and values["all_hit@10"] == 1.0 and values["recall@1000tok"] == 1.0


def test_memlane_path_maps_memory_evidence_back_to_dialog_turns(data, tmp_path):
    from memlane.adapters.embedders.hashing import HashingEmbedder

    [conv] = locomo.load(data)
    ours = locomo.Memlane(HashingEmbedder(), tmp_path / "memlane")
    try:
        ours.prepare(conv)
        assert ours.failed_tasks == 0 and ours.memories >= 3
        top = ours.search(conv, "beagle Max", 3)
        assert top and top[0].turns == ("D1:1",)
        # a reply quotes the question it answers, so it covers both turns
        corgi = ours.search(conv, "corgi", 1)[0]
        assert corgi.turns == ("D1:2", "D1:3") and "corgi" in corgi.text
        scores = locomo.evaluate([conv], [ours])
        report = scores["memlane"].report()
        assert report["questions"] == 2 and report["recall@10"] == 1.0
        assert report["latency_ms"]["p50"] > 0
    finally:
        ours.close()


def test_an_exchange_is_a_turn_and_its_reply():
    turns = [locomo.Turn(f"D1:{i}", s, "x", 1, datetime(2023, 5, 8, tzinfo=timezone.utc))
             for i, s in enumerate(["Ann", "Bob", "Ann", "Ann", "Bob", "Bob", "Ann"], start=1)]
    assert [[t.dia_id for t in ex] for ex in locomo.exchanges(turns)] == \
        [["D1:1", "D1:2"], ["D1:3", "D1:4", "D1:5", "D1:6"], ["D1:7"]]


def test_exchange_ingest_adds_one_exchange_at_a_time_and_keeps_the_reply_context(data, tmp_path):
    from memlane.adapters.embedders.hashing import HashingEmbedder

    [conv] = locomo.load(data)
    ours = locomo.Memlane(HashingEmbedder(), tmp_path / "memlane", ingest="exchange")
    try:
        assert ours.name == "memlane-exchange"
        ours.prepare(conv)
        assert ours.adds == 3 and ours.failed_tasks == 0  # [D1:1 D1:2] [D1:3] [D2:1 D2:2]
        # D1:3 was added alone; the question it answers came from the run's earlier messages
        corgi = ours.search(conv, "corgi", 1)[0]
        assert corgi.turns == ("D1:2", "D1:3") and "corgi" in corgi.text
    finally:
        ours.close()
