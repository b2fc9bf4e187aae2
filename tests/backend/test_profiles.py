"""Optimization profiles as a user meets them: which profile an input set runs in, what a profile may hold, and the
default profiles derived from example shapes or from the graph. Pure Python: no TensorRT needed."""
from __future__ import annotations

import logging
import re

import pytest

from torchtrt_ext.backend.profiles import (
    Profile,
    ShapeRange,
    choose_profile,
    normalize_profiles,
    profiles_for_graph,
    profiles_from_example_shapes,
)
from torchtrt_ext.errors import InvalidInputError

RANGE = ShapeRange((1, 3, 8, 8), (4, 3, 16, 16), (8, 3, 32, 32))


# ------------------------------------------------------------------------------------------------ one range
def test_both_bounds_are_inside_the_range_in_every_dimension() -> None:
    assert RANGE.contains((1, 3, 8, 8)) and RANGE.contains((8, 3, 32, 32)) and RANGE.contains((5, 3, 9, 31))


@pytest.mark.parametrize("dim", range(4))
def test_one_below_min_or_above_max_in_any_dimension_is_outside(dim: int) -> None:
    for bound, step in ((RANGE.min, -1), (RANGE.max, 1)):
        shape = list(bound)
        shape[dim] += step
        assert not RANGE.contains(tuple(shape)), (dim, shape)


@pytest.mark.parametrize("shape", [(4, 3, 16), (4, 3, 16, 16, 1), ()])
def test_another_rank_is_outside_even_when_the_common_dims_fit(shape: tuple[int, ...]) -> None:
    assert not RANGE.contains(shape)


@pytest.mark.parametrize("lo, opt, hi, message", [
    ((1, 3), (2, 3), (4, 3, 1), "mixes ranks"),
    ((1, 3), (2, 3, 1), (4, 3), "mixes ranks"),
    ((2, 3), (1, 3), (4, 3), r"is not ordered.*min <= opt <= max in every dimension"),
    ((1, 3), (5, 3), (4, 3), "is not ordered"),
    ((1, 3), (2, 4), (4, 3), "is not ordered"),
    ((1, -3), (2, 3), (4, 3), "has a negative dimension"),
    ((1, 3), (2, 3), 7, "max is 7"),
])
def test_bad_ranges_are_refused_with_the_reason(lo: object, opt: object, hi: object, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        ShapeRange(lo, opt, hi)  # type: ignore[arg-type]


@pytest.mark.parametrize("bound", ["min", "opt", "max"])
@pytest.mark.parametrize("bad", [7, ("a", 3)])
def test_a_malformed_bound_is_named_in_the_error(bound: str, bad: object) -> None:
    shapes = {"min": (1, 3), "opt": (2, 3), "max": (4, 3), bound: bad}
    with pytest.raises(InvalidInputError, match=rf"^{bound} is {re.escape(repr(bad))}\. Expected: a sequence of ints"):
        ShapeRange(**shapes)  # type: ignore[arg-type]


def test_any_sequence_of_ints_gives_the_same_range() -> None:
    """Lists, numpy ints and torch.Size are read as tuples of ints: equal ranges, usable as dict keys."""
    import numpy as np
    import torch

    spellings = [ShapeRange([1, 3], [2, 3], [4, 3]), ShapeRange(np.array([1, 3]), (np.int64(2), 3), torch.Size([4, 3]))]
    for r in spellings:
        assert r == ShapeRange((1, 3), (2, 3), (4, 3)) and {r: 1}[ShapeRange((1, 3), (2, 3), (4, 3))] == 1
        assert all(type(d) is int for d in (*r.min, *r.opt, *r.max))


def test_static_range_holds_exactly_one_shape() -> None:
    static = ShapeRange.static([2, 3])
    assert static.contains((2, 3)) and not static.contains((1, 3)) and not static.contains((3, 3))
    assert static.describe() == "min (2, 3), opt (2, 3), max (2, 3)"


# ------------------------------------------------------------------------------------------------ profiles
def test_every_input_must_fit_for_the_profile_to_match() -> None:
    profile = Profile({"x": ((1, 4), (2, 4), (8, 4)), "y": ((1, 2), (2, 2), (8, 2))})
    assert profile.contains({"x": (3, 4), "y": (8, 2)})
    assert not profile.contains({"x": (3, 4), "y": (9, 2)})
    assert not profile.contains({"x": (9, 4), "y": (3, 2)})
    assert profile.contains({"x": (3, 4)})  # an input the profile does not name is not its concern


def test_the_first_profile_holding_all_inputs_is_chosen() -> None:
    small = Profile({"x": ((1, 4), (2, 4), (4, 4)), "y": ((1, 2), (1, 2), (4, 2))})
    large = Profile({"x": ((1, 4), (8, 4), (16, 4)), "y": ((1, 2), (8, 2), (16, 2))})
    assert choose_profile([small, large], {"x": (4, 4), "y": (4, 2)}) == 0  # both fit: the first
    assert choose_profile([small, large], {"x": (3, 4), "y": (5, 2)}) == 1  # y leaves the first
    assert choose_profile([small, large], {"x": (16, 4), "y": (16, 2)}) == 1
    assert choose_profile([small, large], {"x": (17, 4), "y": (1, 2)}) is None
    assert choose_profile([small, large], {"x": (4, 4, 1), "y": (1, 2)}) is None  # wrong rank
    assert choose_profile([], {"x": (1, 4)}) is None


def test_profile_spellings_and_round_trip() -> None:
    spec = {"x": ((1, 3), (2, 3), (4, 3))}
    (profile,) = normalize_profiles(spec)
    assert normalize_profiles([spec, profile]) == [profile, profile] and normalize_profiles(None) is None
    assert Profile.from_json(profile.to_json()) == profile and hash(Profile.from_json(profile.to_json())) == hash(profile)
    assert profile != Profile({"x": ((1, 3), (2, 3), (5, 3))}) and profile != spec
    assert list(profile) == ["x"] and len(profile) == 1 and "min (1, 3), opt (2, 3), max (4, 3)" in repr(profile)
    with pytest.raises(InvalidInputError, match=r"profiles=\[\] is empty"):
        normalize_profiles([])
    with pytest.raises(InvalidInputError, match="profile entry for input 'x' is"):
        Profile({"x": ((1, 3), (4, 3))})


# ------------------------------------------------------------------------------------------------ defaults
def test_default_profile_from_examples_makes_only_the_batch_dynamic() -> None:
    (profile,) = profiles_from_example_shapes({"x": (2, 3, 8, 8), "s": ()}, max_batch=16)
    assert profile["x"] == ShapeRange((1, 3, 8, 8), (2, 3, 8, 8), (16, 3, 8, 8))
    assert profile["s"] == ShapeRange((), (), ())
    (big,) = profiles_from_example_shapes({"x": (40, 3)}, max_batch=16)  # an example above max_batch stays inside
    assert big["x"] == ShapeRange((1, 3), (40, 3), (40, 3))


def test_default_profile_from_examples_with_named_dynamic_dims() -> None:
    (profile,) = profiles_from_example_shapes({"x": (2, 3, 8, 10), "y": (5, 7)},
                                              {"x": {0: "n", 2: "h", 3: "w"}}, max_batch=4)
    assert profile["x"] == ShapeRange((1, 3, 1, 1), (2, 3, 8, 10), (4, 3, 16, 20))
    assert profile["y"] == ShapeRange((5, 7), (5, 7), (5, 7))  # not named: static, batch included


def test_an_empty_example_dimension_stays_inside_its_default_range() -> None:
    """An example with a size-0 dim (an empty batch, no boxes yet) gets a range that holds it, not an error."""
    (profile,) = profiles_from_example_shapes({"x": (0, 3, 0)}, {"x": {0: "n", 2: "k"}}, max_batch=4)
    assert profile["x"] == ShapeRange((0, 3, 0), (0, 3, 0), (4, 3, 1))


def test_the_dims_ranged_by_guess_are_reported(caplog: pytest.LogCaptureFixture) -> None:
    """Dims other than the batch get a guessed range (1..2x example): the log names them so the user can pass
    profiles=; a batch-only dynamic input is not reported."""
    with caplog.at_level(logging.INFO, logger="torchtrt_ext"):
        profiles_from_example_shapes({"x": (2, 3, 8)}, {"x": {0: "n"}})
    assert caplog.text == ""
    with caplog.at_level(logging.INFO, logger="torchtrt_ext"):
        profiles_from_example_shapes({"x": (2, 3, 8, 8)}, {"x": {0: "n", 3: "w", 2: "h"}})
    assert "input 'x': dims [2, 3] dynamic" in caplog.text


def test_graph_defaults_range_the_batch_only() -> None:
    (profile,) = profiles_for_graph({"x": (None, 3, 8), "k": (2, 2)}, None, max_batch=8)
    assert profile["x"] == ShapeRange((1, 3, 8), (1, 3, 8), (8, 3, 8))
    assert profile["k"] == ShapeRange.static((2, 2))
    (negative,) = profiles_for_graph({"x": (-1, 3)}, None, max_batch=8)
    assert negative["x"] == ShapeRange((1, 3), (1, 3), (8, 3))
    with pytest.raises(InvalidInputError, match=r"input 'x' has dynamic dims \[0, 2\]"):
        profiles_for_graph({"x": (None, 3, None)}, None)
    with pytest.raises(InvalidInputError, match=r"input 'x' has dynamic dims \[1\]"):
        profiles_for_graph({"x": (1, None)}, None)


def test_given_profiles_are_checked_against_the_graph() -> None:
    graph = {"x": (None, 3, 8), "k": (2, 2)}
    good = Profile({"x": ((1, 3, 8), (2, 3, 8), (4, 3, 8))})
    (filled,) = profiles_for_graph(graph, [good])
    assert filled["x"] == good["x"] and filled["k"] == ShapeRange.static((2, 2))  # static input filled in
    second = Profile({"x": ((5, 3, 8), (6, 3, 8), (9, 3, 8))})
    assert [p["x"] for p in profiles_for_graph(graph, [good, second])] == [good["x"], second["x"]]
    bad = [
        ({"z": ((1,), (1,), (1,))}, r"profile 1 names inputs \['z'\] the graph does not have"),
        ({"k": ((2, 2), (2, 2), (2, 2))}, r"profile 1 has no range for dynamic input 'x'"),
        ({"x": ((1, 3), (2, 3), (4, 3))}, r"profile 1 gives input 'x' rank 2"),
        ({"x": ((1, 3, 7), (2, 3, 8), (4, 3, 8))}, r"profile 1, input 'x': dim 2 ranges 7..8"),
        ({"x": ((1, 3, 8), (2, 3, 8), (4, 3, 9))}, r"profile 1, input 'x': dim 2 ranges 8..9"),
        ({"x": ((1, 4, 8), (2, 4, 8), (4, 4, 8))}, r"dim 1 ranges 4..4.*static size 3"),
    ]
    for entry, message in bad:
        with pytest.raises(InvalidInputError, match=message):
            profiles_for_graph(graph, [good, Profile(entry)])


def test_zero_sized_dimensions_are_sizes_not_dynamic_markers() -> None:
    empty_ok = ShapeRange((0, 3), (1, 3), (2, 3))  # an empty batch is a valid shape for TensorRT
    assert empty_ok.contains((0, 3))
    (profile,) = profiles_for_graph({"x": (None, 0)}, None, max_batch=4)  # a static 0 stays 0, not dynamic
    assert profile["x"] == ShapeRange((1, 0), (1, 0), (4, 0))
    with pytest.raises(InvalidInputError, match=r"dim 1 ranges 1..1.*static size 0"):
        profiles_for_graph({"x": (None, 0)}, [Profile({"x": ((1, 1), (1, 1), (2, 1))})])


def test_static_inputs_before_a_dynamic_one_are_filled_and_the_dynamic_one_checked() -> None:
    graph = {"k": (2, 2), "j": (5,), "x": (None, 3)}
    (filled,) = profiles_for_graph(graph, [Profile({"x": ((1, 3), (2, 3), (4, 3))})])
    assert list(filled) == ["k", "j", "x"] and filled["j"] == ShapeRange.static((5,))
    with pytest.raises(InvalidInputError, match=r"dim 1 ranges 4..4.*static size 3"):
        profiles_for_graph(graph, [Profile({"x": ((1, 4), (2, 4), (4, 4))})])
