"""The doctor: which nodes of an ONNX graph TensorRT will reject, which custom nodes have a plugin, and what to do.

``report(model, backend=...)`` asks the backend's own ONNX parser where it is installed (``tensorrt`` or
``tensorrt_rtx``), as the build does: each custom node routed as ``plugins="auto"`` routes it, the plugins that serve
them loaded, the graph prepared (``prepare_graph``) and parsed by the build's own step; only the nodes no plugin serves
are cut out (their outputs become graph inputs). A node our plugin's creator refuses is "plugin rejected", with the
plugin's own message. The parser stops at its first error, so the doctor cuts the failing node and parses again. A node
reading a tensor nothing provides is an "invalid graph" (``passes.graph_check``), not an unsupported op; a backend not
installed here is a problem the build would hit. Without that parser it uses the op-support table in
``doctor.trt_op_support`` (and says so). NMS written as a loop or with data-dependent outputs is named, with
``ops.efficient_nms`` as its remedy (``doctor.nms_patterns``). Custom nodes are listed with the plugin that would serve
them, as a build with ``plugins="auto"`` routes it (``backend.plugins.route``, the build's own policy: the C++ library,
the Python plugins, or TensorRT's own plugin library for ops bound to it), and whether ``passes.decompose_custom_ops``
can replace them. The parse is the build's own step (``backend.builder.network_from_onnx``).

The doctor sits outside the rewrite package (``passes``) and the backend, and uses both.

Each problem comes with its remedies in this order: a newer TensorRT or another opset, a different mapping at
export, decomposition, a plugin.
"""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import json
import logging
import os
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import onnx
from onnx import helper

from torchtrt_ext import _native
from torchtrt_ext.backend import adapter
from torchtrt_ext.backend.adapter import TRTApi
from torchtrt_ext.backend.builder import ParserError, network_from_onnx
from torchtrt_ext.backend.plugin_plan import OpPlan, PluginPlan, Unserved
from torchtrt_ext.backend.plugins import plugin_ref, prepare_graph, route
from torchtrt_ext.backend.user_libraries import Creator, load_user_library, node_creator, user_libraries
from torchtrt_ext.errors import InvalidInputError, MissingDependencyError, OnnxParseError, TorchTRTExtError, failure
from torchtrt_ext.ops.spec import DOMAIN, PluginRef, registered_ops
from torchtrt_ext.doctor import trt_op_support as table
from torchtrt_ext.doctor.nms_patterns import REMEDY as NMS_REMEDY
from torchtrt_ext.doctor.nms_patterns import find_nms_patterns
from torchtrt_ext.passes import graph_check
from torchtrt_ext.passes.functions import function_status, strip_functions
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
MODEL = "<model>"  # the node column of a finding about the whole graph
PLUGIN_LOG_PREFIX = "[torchtrt_ext] "  # how our C++ plugins' messages start (csrc/plugins/common/logging.cpp)
MAX_PARSES = 20  # TensorRT's parser stops at its first error: the doctor cuts the node out and parses again


@dataclasses.dataclass(frozen=True)
class Finding:
    """One node worth a line: ``problem`` is True when TensorRT will reject it as things stand."""

    node: str
    op_type: str
    domain: str
    # "unsupported", "invalid graph", "parse error", "backend missing", "plugin available", "plugin rejected",
    # "plugin missing", "decomposed" (no plugin serves it: the build decomposes it), "unknown custom op", "opset",
    # "nms pattern"
    status: str
    problem: bool  # True when TensorRT will reject the node, or no plugin serves it, as things stand
    detail: str
    remedies: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self) | {"remedies": list(self.remedies)}


@dataclasses.dataclass
class DoctorReport:
    """What ``report`` found. ``ok``: no problem at all; ``builds``: a build with ``plugins="auto"`` would succeed."""

    backend: str
    checked_with: str
    nodes: int
    opset: int | None
    findings: list[Finding] = dataclasses.field(default_factory=list)
    native_ops: dict[str, int] = dataclasses.field(default_factory=dict)  # op type -> count, run by TensorRT itself
    # torchtrt_ext node -> how plugins="auto" routes it (backend.plugins.route), the plan a build would take
    routes: dict[str, OpPlan | Unserved] = dataclasses.field(default_factory=dict)
    # the user's plugin libraries (plugin_libraries=): file name -> the creators it registers -> the nodes each serves
    libraries: dict[str, dict[Creator, list[str]]] = dataclasses.field(default_factory=dict)

    @property
    def problems(self) -> list[Finding]:
        return [f for f in self.findings if f.problem]

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def builds(self) -> bool:
        """Whether a build with ``plugins="auto"`` would succeed: no problem but decomposed ops (slower, not failing).
        ``torchtrt-ext inspect`` exits with ``ExitCode.FAILED`` when it would not."""
        return all(f.status == "decomposed" for f in self.problems)

    def to_dict(self) -> dict[str, Any]:
        return {"backend": self.backend, "checked_with": self.checked_with, "nodes": self.nodes, "opset": self.opset,
                "ok": self.ok, "builds": self.builds, "findings": [f.to_dict() for f in self.findings],
                "native_ops": dict(self.native_ops),
                "plugin_libraries": [
                    {"library": name, "creators": [{"name": c[0], "version": c[1], "namespace": c[2], "serves": nodes}
                                                   for c, nodes in creators.items()]}
                    for name, creators in self.libraries.items()]}

    def to_json(self, indent: int | None = 2) -> str:
        """The report as a JSON document (see ``to_dict`` for the fields)."""
        return json.dumps(self.to_dict(), indent=indent, sort_keys=False)

    def to_table(self) -> str:
        """The report as readable text: a summary line, one row per finding, then the remedies of each problem."""
        head = (f"torchtrt_ext doctor: backend {self.backend}, {self.nodes} nodes, opset {self.opset}, "
                f"checked with {self.checked_with}")
        head += "".join(f"\nplugin library {name}: " + (", ".join(
            f"{ns}::{op} v{v} (serves {', '.join(nodes) or 'no node'})" for (op, v, ns), nodes in creators.items())
            or "registers no new creator") for name, creators in self.libraries.items())
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
        verdict = "" if self.builds else ", the build would fail"
        lines.append(f"{len(problems)} problem(s){verdict}" + (": remedies, in the order to try them" if problems
                                                                else ""))
        causes: dict[tuple[str, ...], list[Finding]] = {}  # one block per distinct set of remedies
        for f in problems:
            causes.setdefault(f.remedies, []).append(f)
        for remedies, found in causes.items():
            nodes = ", ".join(dict.fromkeys(f.node for f in found))
            lines.append(f"  {nodes} ({', '.join(dict.fromkeys(f.op_type for f in found))}):")
            lines += [f"    {i}. {r}" for i, r in enumerate(remedies, 1)]
        return "\n".join(lines)

    __str__ = to_table


# ------------------------------------------------------------------------------------------------------- remedies
def _standard_op_remedies(op_type: str, why: str) -> tuple[str, ...]:
    if table.status(op_type) == "unknown":
        newer = (f"{op_type} is newer than the opsets the table's TensorRT 10.x parses: re-export with opset <= "
                 f"{table.MAX_OPSET} (the exporter then writes it with older ops), "
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
def _node_name(node: onnx.NodeProto) -> str:
    return node.name or f"<unnamed {node.op_type}>"


def _routes(nodes: list[onnx.NodeProto], api: TRTApi | None, backend: str) -> dict[str, OpPlan | Unserved]:
    """Each torchtrt_ext node -> the route a build with ``plugins="auto"`` takes for it (one ``route`` call per op)."""
    planned: dict[PluginRef, OpPlan | Unserved] = {}
    routes = {}
    for node in nodes:
        if node.domain == DOMAIN:
            ref = plugin_ref(node)
            if ref not in planned:
                planned[ref] = route(ref, "auto", api, backend)
            routes[_node_name(node)] = planned[ref]
    return routes


def _custom_findings(nodes: list[onnx.NodeProto], backend: str, routes: dict[str, OpPlan | Unserved],
                     served: dict[Creator, str]) -> list[Finding]:
    specs = {op.spec.name: op.spec for op in registered_ops().values()}
    findings = []
    for node in nodes:
        name = _node_name(node)
        if node.domain == DOMAIN:
            spec = specs.get(node.op_type)
            version, namespace = node_attr(node, "plugin_version", "?"), node_attr(node, "plugin_namespace", "?")
            plugin = f"plugin {node.op_type} v{version} ({namespace})"
            planned = routes[name]
            if isinstance(planned, OpPlan) and planned.route != "decompose" and spec is not None:
                findings.append(Finding(name, node.op_type, node.domain, "plugin available", False,
                                        f"{plugin}: {planned.how}"))
                continue
            why = planned.how if isinstance(planned, OpPlan) else planned.reason
            why = why if spec is not None else f"{node.op_type} is not a torchtrt_ext op defined in this process"
            decomposed = isinstance(planned, OpPlan) and spec is not None  # the build goes ahead without a plugin
            findings.append(Finding(name, node.op_type, node.domain, "decomposed" if decomposed else "plugin missing",
                                    True, f"{plugin}: {why}",
                                    _custom_op_remedies(node, backend, spec is not None, why)))
        elif node_creator(node) in served:
            op, version, namespace = node_creator(node)
            findings.append(Finding(name, node.op_type, node.domain, "plugin available", False,
                                    f"plugin {op} v{version} ({namespace}): {served[node_creator(node)]}"))
        else:
            op, version, namespace = node_creator(node)
            why = (f"TensorRT looks for a plugin creator {op!r} version {version!r} in namespace {namespace!r} "
                   "(op_type, plugin_version, plugin_namespace or the domain), which no library passed registers")
            findings.append(Finding(name, node.op_type, node.domain or "ai.onnx", "unknown custom op", True, why,
                                    _custom_op_remedies(node, backend, False, f"pass the library registering "
                                                        f"{op!r} as plugin_libraries=[path] (--plugin-library PATH), "
                                                        "or write one (IPluginV3)")))
    return findings


# ------------------------------------------------------------------------------------------------ standard nodes
def _cut(model: onnx.ModelProto, custom: list[onnx.NodeProto]) -> onnx.ModelProto:
    """A copy where each of the ``custom`` nodes is cut out: its outputs become graph inputs (typed by shape
    inference), so the parser still checks the nodes after it."""
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
    used = {n.domain for n in keep}
    del out.opset_import[:]
    out.opset_import.extend(e for e in model.opset_import if e.domain in STANDARD_DOMAINS or e.domain in used)
    return out


@contextlib.contextmanager
def _parse_errors_unlogged() -> Iterator[None]:
    """Keep this thread's TensorRT messages off the log meanwhile: parse errors are the doctor's expected answer, read
    from the collected messages (``TRTApi.messages``), not noise on the user's terminal."""
    thread = threading.get_ident()

    def drop(record: logging.LogRecord) -> bool:
        return not (record.thread == thread and str(record.msg).startswith("TensorRT: "))

    backend_log = logging.getLogger("torchtrt_ext.backend")
    backend_log.addFilter(drop)
    try:
        yield
    finally:
        backend_log.removeFilter(drop)


def _served_plan(routes: dict[str, OpPlan | Unserved]) -> PluginPlan:
    """The plugin plan a build takes for the nodes some plugin serves (route cpp, python or tensorrt): the same
    ``route`` answers, gathered as ``resolve_plugin_plan`` gathers them."""
    served = {r for r in routes.values() if isinstance(r, OpPlan) and r.route != "decompose"}
    ops = tuple(sorted(served, key=lambda op: op.op_type))
    if not ops:
        return PluginPlan("none")
    library = _native.plugin_library_path() if any(op.route == "cpp" for op in ops) else None
    return PluginPlan(ops[0].route, library, None, ops)


def _graph_error(where: str, error: ParserError) -> Finding:
    desc = f": {error.desc}" if error.desc else ""
    return Finding(MODEL, "graph", "", "parse error", True, f"{where}: {error.code}{desc} (the parser names no node)",
                   (graph_check.REMEDY,))


def _rejected_plugin(where: str, error: ParserError, node: onnx.NodeProto, records: list[tuple[str, str]],
                     backend: str) -> Finding:
    """Our plugin's creator refused the node (its attribute checks): its own message says why."""
    desc = f": {error.desc}" if error.desc and error.desc != "false" else ""  # op checkers say just "false"
    said = [m[len(PLUGIN_LOG_PREFIX):] for _, m in records if m.startswith(f"{PLUGIN_LOG_PREFIX}{node.op_type}::")]
    why = f"{where} with our C++ plugin library: {error.code}{desc}" + (f"; our plugin said: {'; '.join(said)}"
                                                                         if said else "")
    others = _custom_op_remedies(node, backend, True, why)
    if not said:
        return Finding(error.node, error.op_type, DOMAIN, "plugin rejected", True, why, others)
    fix = (f"give the node attributes our plugin accepts ({'; '.join(said)}): export it from the model code, where "
           f"torchtrt_ext.ops checks the same ranges, or correct the ONNX file")
    return Finding(error.node, error.op_type, DOMAIN, "plugin rejected", True, why,
                   (fix,) + tuple(r for r in others if r.startswith(("a different mapping", "decomposition"))))


def _parser_findings(model: onnx.ModelProto, backend: str, plan: PluginPlan) -> tuple[list[Finding], str]:
    """Parse ``model`` as the build does (``prepare_graph`` for ``plan``, then ``network_from_onnx`` with the plan's
    plugins loaded, so our creators check every attribute); after each failing node, cut it out and parse again."""
    api = adapter.load_backend(backend)
    where = f"{api.name} {api.version} ONNX parser"
    findings: list[Finding] = []
    try:
        graph = prepare_graph(model, plan)
    except TorchTRTExtError as exc:
        return [Finding(MODEL, "plugins", "", "plugin missing", True, exc.what, (exc.remedy,))], where
    for _ in range(MAX_PARSES):
        with api.messages() as records, _parse_errors_unlogged():
            try:
                network_from_onnx(api, graph, plan, api.logger(), records)
                return findings, where
            except OnnxParseError as exc:
                errors = [e for e in exc.nodes if isinstance(e, ParserError)]
            except TorchTRTExtError as exc:  # the plan's plugins do not load: the build fails the same way
                return findings + [Finding(MODEL, "plugins", "", "plugin missing", True, exc.what,
                                           (exc.remedy,))], where
        failing = []
        for error in errors:
            if not 0 <= error.index < len(graph.graph.node):
                findings.append(_graph_error(where, error))
                continue
            node = graph.graph.node[error.index]
            failing.append(node)
            if node.domain == DOMAIN:
                findings.append(_rejected_plugin(where, error, node, records, backend))
            else:
                desc = f": {error.desc}" if error.desc and error.desc != "false" else ""
                findings.append(Finding(error.node, error.op_type, "", "unsupported", True,
                                        f"{where}: {error.code}{desc}",
                                        _standard_op_remedies(error.op_type, f"{api.name} {api.version} rejects it")))
        if not failing:
            break
        graph = _cut(graph, failing)
    else:
        LOGGER.info("doctor: stopped after %d parses; nodes after the last failing one are not checked", MAX_PARSES)
    return findings, where


def _backend_missing(backend: str) -> Finding | None:
    """The backend not installed here: the build fails with this error; the remedy is the build's own."""
    try:
        adapter.load_backend(backend)
    except MissingDependencyError as exc:
        return Finding(MODEL, backend, "", "backend missing", True,
                       f"{exc.what}: a build with backend={backend!r} fails here (checked with the op-support table "
                       "instead)", (exc.remedy,))
    return None


def _invalid_graph(model: onnx.ModelProto) -> list[Finding]:
    """Nodes reading a tensor nothing provides: no backend runs the graph, whatever its ops."""
    return [Finding(node.name or f"<unnamed {node.op_type}>", node.op_type, node.domain, "invalid graph", True,
                    graph_check.describe(node, name), (graph_check.REMEDY,))
            for node, name in graph_check.dangling_inputs(model)]


def _one_row_per_node(findings: list[Finding]) -> list[Finding]:
    """The first problem found for each node (else its first finding), in order; graph-wide findings all kept."""
    rows: dict[Any, Finding] = {}
    for index, f in enumerate(findings):
        key: Any = index if f.node == MODEL else f.node
        if key not in rows or (f.problem and not rows[key].problem):
            rows[key] = f
    return list(rows.values())


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


def _user_libraries(paths: Sequence[str | os.PathLike[str]] | None, custom: list[onnx.NodeProto],
                    backend: str) -> tuple[dict[str, dict[Creator, list[str]]], dict[Creator, str]]:
    """Load the user's plugin libraries into ``backend``'s real registry: per library, the creators it registers and
    the custom nodes each serves; and which library serves each creator."""
    libraries: dict[str, dict[Creator, list[str]]] = {}
    served: dict[Creator, str] = {}
    requested = user_libraries(paths)
    if not requested:
        return libraries, served
    api = adapter.load_backend(backend)  # MissingDependencyError: listing a library's creators needs its registry
    for library in requested:
        creators = load_user_library(api, library)
        libraries[library.name] = {creator: [] for creator in creators}
        for creator in creators:
            served.setdefault(creator, library.name)
    for node in custom:
        if node.domain != DOMAIN and node_creator(node) in served:
            libraries[served[node_creator(node)]][node_creator(node)].append(_node_name(node))
    return libraries, served


def report(model: OnnxSource, backend: str = "tensorrt", *, checker: str = "auto",
           plugin_libraries: Sequence[str | os.PathLike[str]] | None = None) -> DoctorReport:
    """Diagnose ``model`` for ``backend`` ("tensorrt" or "tensorrt_rtx").

    Args:
        model: the ONNX model: a ModelProto, path or bytes (not modified).
        backend: the TensorRT flavour to check against. Default: "tensorrt".
        checker: "parser" (the backend's ONNX parser; raises MissingDependencyError when it is not installed),
            "table" (``doctor.trt_op_support``), or "auto" (the parser when installed, else the table). Default: "auto".
        plugin_libraries: paths of your own plugin libraries: each is loaded into ``backend``'s registry and listed
            with the creators it registers and the nodes each serves (their nodes then stay in the parse). Default
            None.

    Returns:
        a DoctorReport; print it (``to_table``) or serialize it (``to_json``). ``report.ok`` is True when nothing
        is a problem, ``report.builds`` when a build with ``plugins="auto"`` would succeed (with "auto", a backend
        not installed here is a problem the build would hit).
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
    libraries, user_served = _user_libraries(plugin_libraries, custom, backend)
    custom_ids = {id(n) for n in custom}
    standard = [n for n in all_nodes(model) if id(n) not in custom_ids]
    opset = default_opset(model)
    installed = adapter.backend_available(backend)
    use_parser = checker == "parser" or (checker == "auto" and installed)
    top_level = {id(n) for n in model.graph.node}
    api = adapter.load_backend(backend) if custom and installed else None
    routes = _routes(custom, api, backend)
    plan = _served_plan(routes) if use_parser else PluginPlan("none")
    served = {op.op_type for op in plan.ops}
    invalid = _invalid_graph(model)  # cut before parsing: the parser would call them unsupported ops
    dangling = {f.node for f in invalid}
    cut = [n for n in custom if not (n.domain == DOMAIN and n.op_type in served)
           and not (n.domain != DOMAIN and node_creator(n) in user_served)]
    cut += [n for n in model.graph.node if _node_name(n) in dangling]
    if use_parser and all(id(n) in top_level for n in cut):
        findings, checked_with = _parser_findings(_cut(model, cut), backend, plan)
        checked_with = f"the {checked_with}" + (" with the C++ plugin library loaded" if plan.library else "")
    else:
        if use_parser and checker == "parser":
            LOGGER.info("doctor: custom nodes inside subgraphs cannot be cut out; using the op-support table")
        findings, checked_with = _table_findings(model, standard), f"the op-support table ({table.TABLE_SOURCE})"
        if opset is not None and opset > table.MAX_OPSET:
            findings.insert(0, Finding(MODEL, "opset", "", "opset", False,
                                       f"opset {opset} is newer than the table's TensorRT 10.x (<= {table.MAX_OPSET}); "
                                       "TensorRT 11 parses up to 25",
                                       ("a newer TensorRT, or re-export with opset_version <= 20",)))
    missing = _backend_missing(backend) if checker == "auto" and not installed else None
    findings = ([missing] if missing else []) + invalid + findings
    rejected = {f.node for f in findings if f.problem}
    native = collections.Counter(n.op_type for n in standard if (n.name or f"<unnamed {n.op_type}>") not in rejected)
    result = DoctorReport(backend, checked_with, len(list(all_nodes(model))), opset,
                          _one_row_per_node(findings + _nms_findings(model, backend)
                                            + _custom_findings(custom, backend, routes, user_served)
                                            + functions),
                          dict(sorted(native.items())), routes, libraries)
    LOGGER.info("doctor: %d problem(s) for %s (checked with %s)", len(result.problems), backend, checked_with)
    return result
