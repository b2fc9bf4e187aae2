"""validate()'s contract, the parts a user relies on without reading the code: the shape is compared before any
value (same number of elements in another shape is a failure, never a broadcast or a flattened match), and rtol is
relative to the reference (``|got - ref| <= atol + rtol * |ref|``), not to the candidate."""
from __future__ import annotations

import pytest
import torch

from torchtrt_ext.validate import validate


@pytest.mark.parametrize("reference,candidate,ref_shape,got_shape", [
    (lambda x: x, lambda x: x.reshape(1, 6), [6], [1, 6]),  # an extra leading dim: broadcasts, same values
    (lambda x: x.reshape(2, 3), lambda x: x.reshape(2, 3).t(), [2, 3], [3, 2]),  # a transpose: another layout
])
def test_same_numel_in_another_shape_fails_on_the_shape(reference, candidate, ref_shape: list[int],
                                                         got_shape: list[int]) -> None:
    report = validate(reference, candidate, (torch.arange(6, dtype=torch.float32),), trials=1)
    only = report.outputs[0]
    assert not report.passed, report.to_table()
    assert only.got_shape == tuple(got_shape) and only.ref_shape == tuple(ref_shape)
    assert f"shape {got_shape} != reference {ref_shape}" in only.reason
    assert only.max_abs_diff is None  # no value was compared


def test_rtol_is_relative_to_the_reference() -> None:
    """ref 1 vs got 2 at rtol 0.5: |2 - 1| = 1 > 0.5 * |ref| = 0.5 fails (0.5 * |got| = 1 would pass); the same pair
    the other way round passes (1 <= 0.5 * 2)."""
    one, two = torch.ones(4), torch.full((4,), 2.0)
    low_ref = validate(lambda x: one, lambda x: two, (torch.zeros(1),), atol=0.0, rtol=0.5, trials=1)
    out = low_ref.outputs[0]
    assert not low_ref.passed and out.min_atol == pytest.approx(0.5) and out.max_rel_diff == pytest.approx(1.0)
    high_ref = validate(lambda x: two, lambda x: one, (torch.zeros(1),), atol=0.0, rtol=0.5, trials=1)
    out = high_ref.outputs[0]
    assert high_ref.passed and out.min_atol == 0.0 and out.max_rel_diff == pytest.approx(0.5)
