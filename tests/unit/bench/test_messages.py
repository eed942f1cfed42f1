"""`memlane bench messages`: the add-latency share of indexing messages, measured side by side."""

import argparse

from memlane.bench import messages


def test_the_report_has_one_row_per_batch_size_with_its_ratios():
    report = messages.run(argparse.Namespace(adds=3, per_add="1,4", embedder="hashing"))
    assert [row["per_add"] for row in report["rows"]] == [1, 4]
    for row in report["rows"]:
        assert row["adds"] == 3 and row["add_p50_ms"] > 0 and row["indexing_p50_ms"] > 0
        assert row["add_over_add_without_indexing"] >= 1.0
    assert "msgs/add" in messages.format_report(report)
