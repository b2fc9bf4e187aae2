"""Random data in tests is seeded per test (tests/conftest.py ``seeded``), so a failure reproduces."""
from __future__ import annotations

import random
import zlib

import numpy as np
import pytest
import torch


def test_every_test_starts_from_the_seed_of_its_id(request: pytest.FixtureRequest) -> None:
    drawn = (torch.randn(4), np.random.rand(3), random.random())  # this test does not ask for the fixture
    seed = zlib.crc32(request.node.nodeid.encode())
    torch.manual_seed(seed)
    np.random.seed(seed)
    random.seed(seed)
    assert torch.equal(torch.randn(4), drawn[0]) and np.array_equal(np.random.rand(3), drawn[1])
    assert random.random() == drawn[2]


def test_the_fixture_returns_the_seed(seeded: int, request: pytest.FixtureRequest) -> None:
    assert seeded == zlib.crc32(request.node.nodeid.encode())
