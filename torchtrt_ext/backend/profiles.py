"""Optimization profiles: for each engine input, the min / opt / max shape the engine accepts.

A ``Profile`` maps input names to a ``ShapeRange``. An engine may have several profiles (for example 640x640 video and
1280x1280 stills); the runtime picks the first one whose ranges hold all input shapes. Wider ranges cost speed at
every point inside them, so the defaults stay narrow: batch dynamic (1 .. max(example batch, ``DEFAULT_MAX_BATCH``)),
every other dimension static unless the user asks.

Accepted user spellings (``normalize_profiles``)::

    {"x": ((1, 3, 224, 224), (8, 3, 224, 224), (32, 3, 224, 224))}          # one profile
    [{"x": ShapeRange(min=..., opt=..., max=...)}, {"x": (...)}]            # several profiles
"""
from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Union

from torchtrt_ext.errors import InvalidInputError, failure

log = logging.getLogger("torchtrt_ext.backend")

DEFAULT_MAX_BATCH = 32
Shape = tuple[int, ...]
GraphShape = Sequence[Union[int, None]]  # None (or a negative int) marks a dynamic dimension


def _shape(value: Any, what: str) -> Shape:
    try:
        shape = tuple(int(d) for d in value)
    except (TypeError, ValueError):  # not a sequence (7), or not of numbers (("a", 3))
        raise InvalidInputError(failure(f"{what} is {value!r}", "a sequence of ints", "write it like (1, 3, 224, 224)"))
    if any(d < 0 for d in shape):
        raise InvalidInputError(failure(f"{what} {shape} has a negative dimension", "dimensions >= 0",
                                        "give concrete sizes in min/opt/max"))
    return shape


@dataclasses.dataclass(frozen=True)
class ShapeRange:
    """min <= opt <= max, elementwise, all of one rank."""

    min: Shape
    opt: Shape
    max: Shape

    def __post_init__(self) -> None:
        lo, opt, hi = (_shape(v, k) for k, v in (("min", self.min), ("opt", self.opt), ("max", self.max)))
        object.__setattr__(self, "min", lo)
        object.__setattr__(self, "opt", opt)
        object.__setattr__(self, "max", hi)
        if not len(lo) == len(opt) == len(hi):
            raise InvalidInputError(failure(f"shape range {self.describe()} mixes ranks", "min, opt, max of one rank",
                                            "give three shapes with the same number of dimensions"))
        if not all(a <= b <= c for a, b, c in zip(lo, opt, hi)):
            raise InvalidInputError(failure(f"shape range {self.describe()} is not ordered", "min <= opt <= max in "
                                            "every dimension", "fix the shapes"))

    @classmethod
    def static(cls, shape: Sequence[int]) -> ShapeRange:
        s = tuple(shape)
        return cls(s, s, s)

    @property
    def rank(self) -> int:
        return len(self.min)

    def contains(self, shape: Sequence[int]) -> bool:
        return len(shape) == self.rank and all(a <= d <= b for a, d, b in zip(self.min, shape, self.max))

    def describe(self) -> str:
        return f"min {tuple(self.min)}, opt {tuple(self.opt)}, max {tuple(self.max)}"

    def to_json(self) -> dict[str, list[int]]:
        return {"min": list(self.min), "opt": list(self.opt), "max": list(self.max)}

    @classmethod
    def from_json(cls, data: Mapping[str, Sequence[int]]) -> ShapeRange:
        return cls(tuple(data["min"]), tuple(data["opt"]), tuple(data["max"]))


class Profile(Mapping[str, ShapeRange]):
    """One optimization profile: input name -> ShapeRange (insertion ordered, immutable)."""

    def __init__(self, ranges: Mapping[str, ShapeRange | Sequence[Sequence[int]]]) -> None:
        self._ranges: dict[str, ShapeRange] = {}
        for name, value in ranges.items():
            if isinstance(value, ShapeRange):
                self._ranges[str(name)] = value
            elif isinstance(value, Sequence) and len(value) == 3:
                self._ranges[str(name)] = ShapeRange(*(tuple(v) for v in value))
            else:
                raise InvalidInputError(failure(
                    f"profile entry for input {name!r} is {value!r}", "a ShapeRange or a (min, opt, max) triple",
                    "write {'x': ((1, 3, 8, 8), (4, 3, 8, 8), (16, 3, 8, 8))}"))

    def __getitem__(self, name: str) -> ShapeRange:
        return self._ranges[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._ranges)

    def __len__(self) -> int:
        return len(self._ranges)

    def __repr__(self) -> str:
        return f"Profile({ {k: v.describe() for k, v in self._ranges.items()} })"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Profile) and self._ranges == other._ranges

    def __hash__(self) -> int:
        return hash(tuple(self._ranges.items()))

    def contains(self, shapes: Mapping[str, Sequence[int]]) -> bool:
        """True when every named input shape lies inside this profile's range for it."""
        return all(name not in self._ranges or self._ranges[name].contains(shape) for name, shape in shapes.items())

    def to_json(self) -> dict[str, dict[str, list[int]]]:
        return {name: r.to_json() for name, r in self._ranges.items()}

    @classmethod
    def from_json(cls, data: Mapping[str, Mapping[str, Sequence[int]]]) -> Profile:
        return cls({name: ShapeRange.from_json(r) for name, r in data.items()})


ProfileSpec = Union[Profile, Mapping[str, Union[ShapeRange, Sequence[Sequence[int]]]]]


def normalize_profiles(profiles: ProfileSpec | Sequence[ProfileSpec] | None) -> list[Profile] | None:
    """Turn any accepted spelling into a list of Profiles (None stays None: "use the defaults")."""
    if profiles is None:
        return None
    items = [profiles] if isinstance(profiles, Mapping) else list(profiles)
    if not items:
        raise InvalidInputError(failure("profiles=[] is empty", "at least one profile, or None for the defaults",
                                        "pass profiles=None"))
    return [p if isinstance(p, Profile) else Profile(p) for p in items]


def profiles_from_example_shapes(shapes: Mapping[str, Sequence[int]],
                                 dynamic_shapes: Mapping[str, Mapping[int, Any]] | None = None, *,
                                 max_batch: int = DEFAULT_MAX_BATCH) -> list[Profile]:
    """One profile around the example shapes.

    ``dynamic_shapes`` as in ``export_onnx`` (``{name: {dim: symbol}}``; default None: dim 0 of every input). A dynamic
    dim 0 ranges 1 .. max(example, ``max_batch``) with opt = the example; another dynamic dim ranges
    1 .. 2 x example (pass explicit profiles for anything else); an example of size 0 ranges from 0 (to
    ``max_batch`` for dim 0, to 1 for another dim); static dims are the example's.
    """
    ranges = {}
    for name, shape in shapes.items():
        shape = tuple(int(d) for d in shape)
        dyn = ({0} if shape else set()) if dynamic_shapes is None else set(dynamic_shapes.get(name, {}))
        lo, hi = list(shape), list(shape)
        for d in dyn:
            lo[d] = min(shape[d], 1)  # an empty example (size 0) stays inside its own range
            hi[d] = max(shape[d], max_batch) if d == 0 else max(2 * shape[d], 1)
        if dyn - {0}:
            log.info("input %r: dims %s dynamic, using range 1..2x example; pass profiles= to choose", name,
                     sorted(dyn - {0}))
        ranges[name] = ShapeRange(tuple(lo), shape, tuple(hi))
    return [Profile(ranges)]


def profiles_for_graph(graph_inputs: Mapping[str, GraphShape], profiles: list[Profile] | None, *,
                       max_batch: int = DEFAULT_MAX_BATCH) -> list[Profile]:
    """Check ``profiles`` against the graph's inputs (None: derive the default), returning complete profiles.

    Every dynamic input must appear in every profile with its rank, and static dims must match the graph.
    Static inputs missing from a profile are filled in.
    """
    def dynamic_dims(shape: GraphShape) -> list[int]:
        return [i for i, d in enumerate(shape) if d is None or d < 0]

    if profiles is None:
        ranges: dict[str, ShapeRange] = {}
        for name, shape in graph_inputs.items():
            dyn = dynamic_dims(shape)
            if dyn and dyn != [0]:
                raise InvalidInputError(failure(
                    f"input {name!r} has dynamic dims {dyn} (graph shape {list(shape)}) and no profile was given",
                    "profiles for every dynamic dimension other than the batch (dim 0)",
                    f"pass profiles={{{name!r}: (min_shape, opt_shape, max_shape)}}"))
            concrete = [1 if d is None or d < 0 else int(d) for d in shape]
            hi = list(concrete)
            if dyn:
                hi[0] = max_batch
            ranges[name] = ShapeRange(tuple(concrete), tuple(concrete), tuple(hi))
        if any(dynamic_dims(s) for s in graph_inputs.values()):
            log.info("no profiles given: batch 1..%d (opt 1) for dynamic inputs", max_batch)
        return [Profile(ranges)]

    out = []
    for index, profile in enumerate(profiles):
        unknown = set(profile) - set(graph_inputs)
        if unknown:
            raise InvalidInputError(failure(f"profile {index} names inputs {sorted(unknown)} the graph does not have",
                                            f"names among {list(graph_inputs)}", "rename the profile's entries"))
        filled: dict[str, ShapeRange] = {}
        for name, shape in graph_inputs.items():
            if name not in profile:
                if dynamic_dims(shape):
                    raise InvalidInputError(failure(
                        f"profile {index} has no range for dynamic input {name!r} (graph shape {list(shape)})",
                        "a min/opt/max for every dynamic input in every profile", f"add {name!r} to profile {index}"))
                filled[name] = ShapeRange.static([int(d) for d in shape if d is not None])  # all static here
                continue
            r = profile[name]
            if r.rank != len(shape):
                raise InvalidInputError(failure(f"profile {index} gives input {name!r} rank {r.rank}",
                                                f"rank {len(shape)} (graph shape {list(shape)})", "fix the shapes"))
            for d, size in enumerate(shape):
                if size is not None and size >= 0 and not r.min[d] == r.max[d] == size:
                    raise InvalidInputError(failure(
                        f"profile {index}, input {name!r}: dim {d} ranges {r.min[d]}..{r.max[d]}",
                        f"the graph's static size {size} (graph shape {list(shape)})",
                        "export with that dim dynamic (dynamic_shapes=...) or keep it fixed in the profile"))
            filled[name] = r
        out.append(Profile(filled))
    return out


def choose_profile(profiles: Sequence[Profile], shapes: Mapping[str, Sequence[int]]) -> int | None:
    """Index of the first profile holding every shape, or None."""
    for index, profile in enumerate(profiles):
        if profile.contains(shapes):
            return index
    return None
