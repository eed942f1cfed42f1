from memlane.policies.ranking import min_max, reciprocal_rank_fusion, similarity_from_cosine
from memlane.ports import Hit


def test_rrf_rewards_agreement():
    kw = [Hit("a", 9.0), Hit("b", 5.0), Hit("c", 1.0)]
    vec = [Hit("c", 0.9), Hit("b", 0.8)]
    fused = reciprocal_rank_fusion([(1.0, kw), (1.0, vec)], rrf_k=60)
    assert fused["b"] > fused["a"]  # ranked 2nd twice beats 1st once
    assert fused["c"] > fused["a"]
    assert abs(fused["a"] - 1 / 61) < 1e-12


def test_rrf_zero_weight_ignores_signal():
    fused = reciprocal_rank_fusion([(1.0, [Hit("a", 1)]), (0.0, [Hit("b", 1)])], rrf_k=60)
    assert set(fused) == {"a"}


def test_min_max_and_similarity():
    assert min_max([1.0, 3.0, 2.0]) == [0.0, 1.0, 0.5]
    assert min_max([2.0, 2.0]) == [1.0, 1.0]
    assert similarity_from_cosine(-0.3) == 0.0 and similarity_from_cosine(0.42) == 0.42
