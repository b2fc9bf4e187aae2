"""Every op test sees the op's checks run: the per-signature cache of checked calls (CustomOp._calls, which skips
the checks of a call shaped like an earlier one) starts empty, whatever ran before in the process."""
from __future__ import annotations

from collections.abc import Iterator

import pytest

from torchtrt_ext.ops.spec import registered_ops


@pytest.fixture(autouse=True)
def fresh_call_checks() -> Iterator[None]:
    for op in registered_ops().values():
        op._calls.clear()
    yield
