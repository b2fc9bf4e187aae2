"""The doctor: which nodes of an ONNX graph TensorRT will reject, which custom nodes have a plugin, and what to do.

``report(model, backend=...)`` asks the backend's own ONNX parser where it is installed (``tensorrt`` or
``tensorrt_rtx``). On ``tensorrt`` it parses a copy of the graph with every custom-domain node cut out (its outputs
become graph inputs); on ``tensorrt_rtx`` with the C++ plugin library built, it loads that library and parses the real
graph with our own ops' nodes in it (only other custom nodes are cut), so it reports what RTX really accepts: a node
our plugin refuses is "plugin rejected". Without that parser it uses the op-support table in
``passes.trt_op_support`` (and says so). NMS written as a loop or with data-dependent outputs is named, with
``ops.efficient_nms`` as its remedy (``passes.nms_patterns``). Custom nodes are listed with the plugin that would serve
them, as a build with ``plugins="auto"`` resolves it (``backend.plugins.auto_route``: the C++ library, the Python
plugins, or TensorRT's own plugin library for ops bound to it), and whether ``passes.decompose_custom_ops`` can replace
them. The parse is the build's own step (``backend.builder.network_from_onnx``).

The doctor sits outside the rewrite package (``passes``) and the backend, and uses both.

Each problem comes with its remedies in this order: a newer TensorRT or another opset, a different mapping at
export, decomposition, a plugin.
"""
from __future__ import annotations

import collections
import dataclasses
import json
import logging
from typing import Any

import onnx
from onnx import helper

from torchtrt_ext.backend import adapter
from torchtrt_ext.backend.builder import network_from_onnx
from torchtrt_ext import _native
from torchtrt_ext.backend.plugin_plan import OpPlan, PluginPlan
from torchtrt_ext.backend.plugins import auto_route, plugin_refs
from torchtrt_ext.errors import InvalidInputError, LibraryNotFoundError, OnnxParseError, failure
from torchtrt_ext.ops.spec import DOMAIN, PROVIDER_OURS, PluginRef, registered_ops
from torchtrt_ext.passes import trt_op_support as table
from torchtrt_ext.passes.functions import function_status, strip_functions
from torchtrt_ext.passes.nms_patterns import REMEDY as NMS_REMEDY
from torchtrt_ext.passes.nms_patterns import find_nms_patterns
from torchtrt_ext.passes.onnx_util import (
    STANDARD_DOMAINS,
    OnnxSource,
    all_nodes,
    default_opset,
    node_attr,
    non_standard_nodes,
    read_onnx,
)
from torchtrt_ext.passes.shapes import infer_shapes

LOGGER = logging.getLogger("torchtrt_ext")
CHECKERS = ("auto", "parser", "table")


@dataclasses.dataclass(frozen=True)
class Finding:
    """One node worth a line: ``problem`` is True when TensorRT will reject it as things stand."""

    node: str
    op_type: str
    domain: str
    status: str  # "unsupported", "plugin available", "plugin missing", "unknown custom op", "opset", "nms pattern"
    problem: bool
    detail: str
    remedies: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self) | {"remedies": list(self.remedies)}


@dataclasses.dataclass
class DoctorReport:
    """What ``report`` found. ``ok`` is True when nothing blocks the build."""

    backend: str
    checked_with: str
    nodes: int
    opset: int | None
    findings: list[Finding] = dataclasses.field(default_factory=list)
    native_ops: dict[str, int] = dataclasses.field(default_factory=dict)  # op type -> count, run by TensorRT itself

    @property
    def problems(self) -> list[Finding]:
        return [f for f in self.findings if f.problem]

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {"backend": self.backend, "checked_with": self.checked_with, "nodes": self.nodes, "opset": self.opset,
                "ok": self.ok, "findings": [f.to_dict() for f in self.findings], "native_ops": dict(self.native_ops)}

    def to_json(self, indent: int | None = 2) -> str:
        """The report as a JSON document (see ``to_dict`` for the fields)."""
        return json.dumps(self.to_dict(), indent=indent, sort_keys=False)

    def to_table(self) -> str:
        """The report as readable text: a summary line, one row per finding, then the remedies of each problem."""
        head = (f"torchtrt_ext doctor: backend {self.backend}, {self.nodes} nodes, opset {self.opset}, "
                f"checked with {self.checked_with}")
        if not self.findings:
            return f"{head}\nnothing to report: every node is supported natively by {self.backend}"
        rows = [("node", "op", "status", "detail")]
        rows += [(f.node, f"{f.domain}::{f.op_type}" if f.domain else f.op_type, f.status, f.detail)
                 for f in self.findings]
        widths = [min(max(len(r[i]) for r in rows), 40) for i in range(3)]
        lines = [head, ""]
        for row in rows:
            lines.append("  ".join(cell.ljust(w) for cell, w in zip(row[:3], widths)) + "  " + row[3])
        problems = self.problems
        lines.append("")
        lines.append(f"{len(problems)} problem(s)" + (": remedies, in the order to try them" if problems else ""))
        for f in problems:
            lines.append(f"  {f.node} ({f.op_type}):")
            lines += [f"    {i}. {r}" for i, r in enumerate(f.remedies, 1)]
        return "\n".join(lines)

    __str__ = to_table


# ------------------------------------------------------------------------------------------------------- remedies
def _standard_op_remedies(op_type: str, why: str) -> tuple[str, ...]:
    if table.status(op_type) == "unknown":
        newer = (f"{op_type} is newer than the opsets TensorRT {table.TABLE_SOURCE.split('(')[-1].rstrip(')')} "
                 f"parses: re-export with opset <= {table.MAX_OPSET} (the exporter then writes it with older ops), "
                 "or use a TensorRT whose operators.md lists it (TensorRT 11 parses opsets up to 25)")
    else:
        newer = f"a newer TensorRT may support {op_type}: check the operators.md of your TensorRT version ({why})"
    export = table.UNSUPPORTED.get(op_type, f"map the PyTorch code that produces {op_type} to supported ops")
    return (newer,
            f"a different mapping at export: {export} (a torch.onnx custom_translation_table entry or symbolic "
            "also works without touching model code)",
            "decomposition: define the op with torchtrt_ext.ops.define_op and a decomposition into supported ONNX "
            "ops; passes.decompose_custom_ops then replaces it",
            f"a plugin: an IPluginV3 registered as {op_type!r} and loaded before the build")


def _custom_op_remedies(node: onnx.NodeProto, backend: str, known: bool, why_missing: str) -> tuple[str, ...]:
    remedies = []
    if backend == "tensorrt":  # on TensorRT-RTX the last remedy already says to build the C++ library
        remedies.append("a newer TensorRT: the Python plugins need tensorrt >= 10.6 "
                        "(pip install 'torchtrt_ext[trt]')")
    remedies.append("a different mapping at export: export without the custom op (compile(..., fuse=False), or the "
                    "plain PyTorch code path) so only standard ops reach TensorRT")
    if known:
        remedies.append("decomposition: passes.decompose_custom_ops(model), or compile(..., plugins='decompose'): "
                        "standard ONNX ops, portable, slower than the plugin")
    else:
        remedies.append(f"decomposition: define {node.op_type} with torchtrt_ext.ops.define_op (with a "
                        "decomposition), then passes.decompose_custom_ops")
    remedies.append(f"a plugin: {why_missing}")
    return tuple(remedies)


# -------------------------------------------------------------------------------------------------- custom nodes
def _custom_findings(nodes: list[onnx.NodeProto], backend: str) -> list[Finding]:
    if not nodes:
        return []

    specs = {op.spec.name: op.spec for op in registered_ops().values()}
    api = adapter.load_backend(backend) if adapter.backend_available(backend) else None
    findings = []
    for node in nodes:
        name = node.name or f"<unnamed {node.op_type}>"
        if node.domain == DOMAIN:
            spec = specs.get(node.op_type)
            version, namespace = node_attr(node, "plugin_version", "?"), node_attr(node, "plugin_namespace", "?")
            plugin = f"plugin {node.op_type} v{version} ({namespace})"
            ref = PluginRef(node.op_type, version, namespace,
                            spec.plugin_ref.provider if spec is not None else PROVIDER_OURS)
            route, how = auto_route(ref, api, backend)
            if route is not None and spec is not None:
                findings.append(Finding(name, node.op_type, node.domain, "plugin available", False, f"{plugin}: {how}"))
                continue
            why = how if spec is not None else f"{node.op_type} is not a torchtrt_ext op defined in this process"
            findings.append(Finding(name, node.op_type, node.domain, "plugin missing", True, f"{plugin}: {why}",
                                    _custom_op_remedies(node, backend, spec is not None, why)))
        else:
            why = (f"TensorRT looks for a plugin creator named {node.op_type!r} (plugin_version, plugin_namespace "
                   "attributes); torchtrt_ext cannot tell whether one will be loaded")
            findings.append(Finding(name, node.op_type, node.domain or "ai.onnx", "unknown custom op", True, why,
                                    _custom_op_remedies(node, backend, False, f"load a library registering "
                                                        f"{node.op_type!r}, or write one (IPluginV3)")))
    return findings


# ------------------------------------------------------------------------------------------------ standard nodes
def _without_custom_nodes(model: onnx.ModelProto, custom: list[onnx.NodeProto]) -> onnx.ModelProto:
    """A copy where each custom node is cut out: its outputs become graph inputs (typed by shape inference)."""
    try:
        inferred = infer_shapes(model)
    except Exception:  # noqa: BLE001 - an unknown custom op can trip inference; cut with what we know
        inferred = model
    types = {v.name: v for v in list(inferred.graph.value_info) + list(inferred.graph.output) + list(inferred.graph.input)}
    cut = {id(n) for n in custom}
    out = onnx.ModelProto()
    out.CopyFrom(model)
    keep = [n for n in model.graph.node if id(n) not in cut]
    new_inputs = []
    for node in (n for n in model.graph.node if id(n) in cut):
        for index, name in enumerate(node.output):
            if not name:
                continue
            if name in types and types[name].type.tensor_type.HasField("shape"):
                info = onnx.ValueInfoProto()
                info.CopyFrom(types[name])
            else:  # unknown shape: assume the first input's type (exact for elementwise ops such as L2Norm)
                source = types.get(node.input[0]) if node.input else None
                info = helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None)
                if source is not None:
                    info.type.CopyFrom(source.type)
                info.name = name
            new_inputs.append(info)
    del out.graph.node[:]
    out.graph.node.extend(keep)
    out.graph.input.extend(new_inputs)
    kept_outputs = [o for o in out.graph.output if o.name not in {i.name for i in new_inputs}]
    del out.graph.output[:]
    out.graph.output.extend(kept_outputs)
    del out.opset_import[:]
    out.opset_import.extend(e for e in model.opset_import if e.domain in STANDARD_DOMAINS)
    return out


def _quiet_logger(trt: Any) -> Any:
    """An ILogger sending TensorRT's messages to DEBUG on the torchtrt_ext logger."""
    class _Quiet(trt.ILogger):  # type: ignore[misc, name-defined]
        def __init__(self) -> None:
            trt.ILogger.__init__(self)

        def log(self, severity: Any, msg: str) -> None:
            LOGGER.debug("doctor: TensorRT: %s", msg)

    return _Quiet()


def _rtx_plugin_plan(model: onnx.ModelProto, backend: str) -> PluginPlan | None:
    """On tensorrt_rtx with the C++ plugin library built: the plan that loads it for our own ops of ``model``, so the
    parser sees their nodes. None elsewhere, and where the library is missing (logged)."""
    if backend != "tensorrt_rtx":
        return None
    try:
        library = _native.plugin_library_path()
    except LibraryNotFoundError as exc:
        LOGGER.info("doctor: our custom nodes cut out before parsing: %s", exc)
        return None
    ours = tuple(OpPlan(ref, "cpp") for ref in plugin_refs(model) if ref.provider == PROVIDER_OURS)
    return PluginPlan("cpp", library, None, ours)


def _parser_findings(model: onnx.ModelProto, backend: str, plan: PluginPlan) -> tuple[list[Finding], str]:
    api = adapter.load_backend(backend)
    logger = _quiet_logger(api.trt)  # parse errors are the expected answer here, not log noise
    findings = []
    try:
        network_from_onnx(api, model, plan, logger)
    except OnnxParseError as exc:
        ours = {n.name: n for n in model.graph.node if n.domain == DOMAIN}
        for error in exc.nodes:
            desc = f": {error.desc}" if error.desc and error.desc != "false" else ""  # op checkers say just "false"
            if error.node in ours:  # our plugin was loaded and refused the node: its message is in the log
                why = f"{api.name} {api.version} ONNX parser with the C++ plugin library loaded: {error.code}{desc}"
                findings.append(Finding(error.node, error.op_type, DOMAIN, "plugin rejected", True, why,
                                        _custom_op_remedies(ours[error.node], backend, True, why)))
                continue
            findings.append(Finding(error.node, error.op_type, "", "unsupported", True,
                                    f"{api.name} {api.version} ONNX parser: {error.code}{desc}",
                                    _standard_op_remedies(error.op_type, f"{api.name} {api.version} rejects it")))
    return findings, f"the {api.name} {api.version} ONNX parser"


def _nms_findings(model: onnx.ModelProto, backend: str) -> list[Finding]:
    """NMS written as a loop or with data-dependent outputs: a problem on TensorRT-RTX (it cannot build them), a
    warning on TensorRT; ``ops.efficient_nms`` is the remedy either way."""
    return [Finding(p.node, p.op_type, "", "nms pattern", backend == "tensorrt_rtx",
                    f"{p.detail}; use torchtrt_ext.ops.efficient_nms", (NMS_REMEDY,))
            for p in find_nms_patterns(model)]


def _function_findings(model: onnx.ModelProto, backend: str) -> list[Finding]:
    """Each torchtrt_ext op's ONNX function against the op's own body: missing where the file carries the functions of
    other ops (a file with none is the ``--no-functions`` form, named nowhere), or altered (a runtime running the body
    computes something else: a problem); on TensorRT-RTX, a body with NonMaxSuppression, which RTX parses but cannot
    build (only the plugin runs the op there)."""
    remedy = "re-export (torchtrt_ext.export_onnx / torchtrt-ext export write the functions), or add them: " \
             "torchtrt_ext.passes.functions.add_functions(model)"
    bodies = {f.name: f for f in model.functions if f.domain == DOMAIN}
    findings = []
    for op_type, status in function_status(model).items():
        node = f"<{op_type} function>"
        if status == "missing" and bodies:
            findings.append(Finding(node, op_type, DOMAIN, "function missing", False, "the file holds no ONNX function "
                                    f"for {op_type}: a runtime without the plugin cannot run its nodes", (remedy,)))
        elif status == "altered":
            findings.append(Finding(node, op_type, DOMAIN, "function altered", True, f"the file's ONNX function for "
                                    f"{op_type} differs from the op's own decomposition: a runtime without the plugin "
                                    "would compute something else", (remedy,)))
        elif status.startswith("none possible"):
            findings.append(Finding(node, op_type, DOMAIN, "no function", False, f"{op_type} has no ONNX function "
                                    f"({status[len('none possible: '):]}): only its plugin or "
                                    "passes.decompose_custom_ops runs it"))
        if (backend == "tensorrt_rtx" and op_type in bodies
                and any(n.op_type == "NonMaxSuppression" for n in bodies[op_type].node)):
            findings.append(Finding(node, op_type, DOMAIN, "function not buildable", False, "TensorRT-RTX parses the "
                                    "function's NonMaxSuppression but cannot build it: there the op needs its plugin "
                                    "(our C++ plugin library)"))
    return findings


def _table_findings(model: onnx.ModelProto, nodes: list[onnx.NodeProto]) -> list[Finding]:
    findings = []
    for node in nodes:
        status = table.status(node.op_type)
        if status not in ("unsupported", "unknown"):
            continue
        detail = ("not supported" if status == "unsupported" else
                  f"not in the support table (an operator newer than opset {table.MAX_OPSET}?)")
        findings.append(Finding(node.name or f"<unnamed {node.op_type}>", node.op_type, "", "unsupported", True,
                                f"{detail} ({table.TABLE_SOURCE})",
                                _standard_op_remedies(node.op_type, "the table says it is unsupported")))
    return findings


def report(model: OnnxSource, backend: str = "tensorrt", *, checker: str = "auto") -> DoctorReport:
    """Diagnose ``model`` for ``backend`` ("tensorrt" or "tensorrt_rtx").

    Args:
        model: the ONNX model: a ModelProto, path or bytes (not modified).
        backend: the TensorRT flavour to check against. Default: "tensorrt".
        checker: "parser" (the backend's ONNX parser; raises MissingDependencyError when it is not installed),
            "table" (``passes.trt_op_support``), or "auto" (the parser when installed, else the table). Default: "auto".

    Returns:
        a DoctorReport; print it (``to_table``) or serialize it (``to_json``). ``report.ok`` is True when nothing
        blocks the build.
    """

    model = read_onnx(model)
    adapter.check_backend_name(backend)
    if checker not in CHECKERS:
        raise InvalidInputError(failure(f"checker={checker!r} is not a checker", f"one of {CHECKERS}",
                                        "pass checker='auto'"))
    functions = _function_findings(model, backend)
    # our ops' function bodies are checked against the ops' own above; as graph nodes they are not the model's
    model = strip_functions(model, {f.name for f in model.functions if f.domain == DOMAIN})
    custom = non_standard_nodes(model)
    custom_ids = {id(n) for n in custom}
    standard = [n for n in all_nodes(model) if id(n) not in custom_ids]
    opset = default_opset(model)
    use_parser = checker == "parser" or (checker == "auto" and adapter.backend_available(backend))
    top_level = {id(n) for n in model.graph.node}
    plan = (_rtx_plugin_plan(model, backend) if use_parser else None) or PluginPlan("none")
    served = {op.op_type for op in plan.ops}
    cut = [n for n in custom if not (n.domain == DOMAIN and n.op_type in served)]
    if use_parser and all(id(n) in top_level for n in cut):
        findings, checked_with = _parser_findings(_without_custom_nodes(model, cut), backend, plan)
        checked_with += " with the C++ plugin library loaded" if plan.ops else ""
    else:
        if use_parser and checker == "parser":
            LOGGER.info("doctor: custom nodes inside subgraphs cannot be cut out; using the op-support table")
        findings, checked_with = _table_findings(model, standard), f"the op-support table ({table.TABLE_SOURCE})"
        if opset is not None and opset > table.MAX_OPSET:
            findings.insert(0, Finding("<model>", "opset", "", "opset", False,
                                       f"opset {opset} is newer than the table's TensorRT 10.x (<= {table.MAX_OPSET}); "
                                       "TensorRT 11 parses up to 25",
                                       ("a newer TensorRT, or re-export with opset_version <= 20",)))
    rejected = {f.node for f in findings if f.problem}
    native = collections.Counter(n.op_type for n in standard if (n.name or f"<unnamed {n.op_type}>") not in rejected)
    result = DoctorReport(backend, checked_with, len(list(all_nodes(model))), opset,
                          findings + _nms_findings(model, backend) + _custom_findings(custom, backend) + functions,
                          dict(sorted(native.items())))
    LOGGER.info("doctor: %d problem(s) for %s (checked with %s)", len(result.problems), backend, checked_with)
    return result
