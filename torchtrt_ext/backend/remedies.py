"""What a TensorRT message means: the remedy for each known TensorRT / ONNX parser message (the common failures of
docs/design.md#failures-and-remedies). The builder consults it where it raises, so an API user and
the command line get the same specific remedy from the error's ``remedy`` field; nothing else reads TensorRT's text.

Each remedy names the ``build_engine`` keyword and the ``torchtrt-ext`` flag that apply it.
"""
from __future__ import annotations

import re
from collections.abc import Iterable

#: Message patterns -> remedy, checked in order, first match wins, so the more specific patterns come first (a missing
#: plugin also says "No importer registered for op").
MESSAGE_REMEDIES: tuple[tuple[re.Pattern[str], str], ...] = tuple((re.compile(p, re.IGNORECASE), r) for p, r in (
    (r"plugin (creator )?not found|could not find (the )?plugin|getPluginCreator|creator .{0,60}not (be )?found"
     r"|fail(ed)? to load (the )?(plugin )?library|plugin library .{0,40}(not found|fail)",
     "load the plugin library (plugins='cpp' / --plugins cpp, after building libtorchtrt_ext_plugins.so) and check "
     "the node's op_type, plugin_version and plugin_namespace; or plugins='decompose' (--plugins decompose)"),
    (r"no importer registered for op|unsupported_node|unsupported onnx (node|op)|unsupported operator",
     "map the op to supported ONNX ops at export, decompose it (plugins='decompose' / --plugins decompose), or "
     "provide a plugin"),
    (r"could not find any implementation|no implementation (obeys|found|for)",
     "try precision fp32 (precision='fp32' / --precision fp32), or narrow the dynamic shape range (profiles= / "
     "--min-shapes/--max-shapes)"),
    (r"compute capability .{0,40}not supported|deserializ|serialization (assertion|error)|version tag|magic tag"
     r"|built for (another|a different)|incompatible (engine|plan)",
     "check the plugin's serialized fields; rebuild the engine on the target GPU with this TensorRT version "
     "(build_engine / torchtrt-ext build)"),
    (r"\bnan\b",
     "a plugin was fed FP16 it does not handle: restrict its formats in supportsFormatCombination, or keep that "
     "part in FP32 (precision='fp32' / --precision fp32)"),
    (r"slow|fall(ing|s)? back to",
     "narrow the profiles (profiles= / --min-shapes/--max-shapes) and read the builder warnings"),
))

#: A parse failure no message explains: the node is unsupported, or it is a plugin node whose plugin is not loaded.
PARSE_REMEDY = ("map the op to supported ops at export, decompose it (plugins='decompose'), or provide a plugin; for "
                "plugin nodes: load the plugin library and check the node's op_type, plugin_version and "
                "plugin_namespace")
#: A build failure no message explains.
BUILD_REMEDY = ("for 'could not find any implementation': try precision='fp32' or narrow the dynamic shape range "
                "(profiles=); read the TensorRT messages above (logger 'torchtrt_ext.backend')")
#: A node of another custom domain: neither our plugin library nor plugins='decompose' (which replaces torchtrt_ext
#: nodes only) can serve it, whatever TensorRT said.
FOREIGN_REMEDY = ("pass the plugin library that provides it (plugin_libraries=[path] / --plugin-library PATH) and "
                  "check the node's op_type, plugin_version and plugin_namespace; or register it as a torchtrt_ext op "
                  "with a decomposition (ops.OpSpec); or map it to supported ops at export")


def remedy_for(message: str) -> str | None:
    """The remedy for a TensorRT message (or several, one a line), or None when no known pattern matches; where
    several match, the earlier pattern wins."""
    for pattern, remedy in MESSAGE_REMEDIES:
        if pattern.search(message):
            return remedy
    return None


def build_remedy(records: Iterable[tuple[str, str]]) -> str:
    """The remedy for a failed ``build_serialized_network``, from the logger's (level, message) records: its errors
    first, so that a warning (a slow fallback, say) does not stand for the error that stopped the build."""
    records = list(records)
    errors = "\n".join(message for level, message in records if level in ("ERROR", "CRITICAL"))
    warnings = "\n".join(message for level, message in records if level not in ("ERROR", "CRITICAL"))
    return remedy_for(errors) or remedy_for(warnings) or BUILD_REMEDY


def parse_remedy(messages: Iterable[str], *, foreign: bool) -> str:
    """The remedy for a rejected ONNX graph, from the parser's error texts and the logger's messages. ``foreign``:
    every failing node is of a custom domain other than torchtrt_ext's."""
    return FOREIGN_REMEDY if foreign else remedy_for("\n".join(messages)) or PARSE_REMEDY
