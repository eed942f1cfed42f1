"""The 10⁶ data set's shape (bench/scale_opensearch.py): Zipf tenant sizes that sum to the store, a
smaller store that is a prefix of a larger one, and memories derived from their ids alone."""

import numpy as np

from memlane.bench.scale_opensearch import Data, _shares, zipf_sizes


def test_zipf_sizes_sum_to_the_store_and_fall_with_rank():
    sizes = zipf_sizes(1_000_000)
    assert sizes.sum() == 1_000_000 and len(sizes) == 1000 and sizes.min() >= 1
    assert (np.diff(sizes) <= 0).all() and sizes[0] > 1000 * sizes[-1] / 2


def test_a_store_on_its_way_to_a_larger_one_keeps_every_tenant_within_its_final_size():
    final = zipf_sizes(1_000_000)
    part = _shares(final, 100_000, 1_000_000)
    assert part.sum() == 100_000 and (part <= final).all() and (part >= 1).all()


def test_a_memory_is_the_same_whenever_it_is_made_and_its_vector_has_unit_length():
    rng = np.random.default_rng(0)
    turns = [f"turn {i}" for i in range(20)]
    vectors = rng.standard_normal((20, 384)).astype(np.float32)
    a, b = Data(turns, vectors), Data(turns, vectors)
    text, vec = a.memory(7, 123)
    assert (text, vec.tolist()) == (b.memory(7, 123)[0], b.memory(7, 123)[1].tolist())
    assert abs(float(np.linalg.norm(vec)) - 1.0) < 1e-5 and text.startswith("turn ")
    assert a.memory(7, 124)[0] != text or not np.allclose(a.memory(7, 124)[1], vec)
