"""The exception family carries what failed, what was expected and the remedy as fields."""
from __future__ import annotations

import pytest

from torchtrt_ext import cli
from torchtrt_ext.errors import BuildError, InvalidInputError, KernelError, TorchTRTExtError, failure


def test_a_failure_message_keeps_its_parts_as_fields() -> None:
    error = InvalidInputError(failure("x is 3-D", "a 4-D tensor", "add a batch dimension"))
    assert str(error) == "x is 3-D. Expected: a 4-D tensor. Remedy: add a batch dimension"
    assert (error.what, error.expected, error.remedy) == ("x is 3-D", "a 4-D tensor", "add a batch dimension")


def test_keywords_give_the_same_fields_and_text() -> None:
    error = KernelError("launch failed", expected="status 0", remedy="check the sizes")
    assert str(error) == "launch failed. Expected: status 0. Remedy: check the sizes"
    assert str(BuildError("no plugin", remedy="load it")) == "no plugin. Remedy: load it"
    plain = TorchTRTExtError("just what")
    assert (str(plain), plain.what, plain.expected, plain.remedy) == ("just what", "just what", "", "")


def test_the_command_line_reads_the_fields_not_the_text() -> None:
    """A what that itself mentions 'Remedy:' stays whole: nothing splits the message."""
    error = BuildError("the plan says 'Remedy: none'. It failed", expected="a plan", remedy="rebuild")
    assert cli.error_line(error) == "the plan says 'Remedy: none'. It failed. Expected: a plan. Remedy: rebuild"
    assert cli.error_line(ValueError("odd")) == "ValueError: odd. Remedy: rerun with --verbose for the details"


def test_unknown_op_is_a_key_error_with_a_remedy() -> None:
    from torchtrt_ext.ops import get_op

    with pytest.raises(KeyError) as info:
        get_op("NoSuchOp")
    assert str(info.value).startswith("no torchtrt_ext op 'NoSuchOp'") and "define_op" in info.value.remedy
