"""The decoders' ``ok`` flag over random masks with NaN/Inf workers (a small run of
``benchmarks.fuzz_ok`` on two paths; ``python -m benchmarks.fuzz_ok`` runs 100,000 masks
for each of five paths).
"""

from __future__ import annotations

import pytest

from benchmarks.fuzz_ok import check_path


@pytest.mark.parametrize("path", ["chebyls_batched", "berrut"])
def test_no_wrong_ok(path):
    res = check_path(path, 1000, seed=3)
    assert res["wrong_ok"] == 0, res
    # the draw covers both outcomes
    assert 0 < res["ok"] < res["masks"], res
