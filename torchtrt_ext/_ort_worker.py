"""The onnxruntime side of ``validate`` in a process of its own, so that a crash inside onnxruntime (seen: a segfault
while optimizing the FP16 graph of a transformer block) ends this process, not the user's interpreter.

Run as a script (``python _ort_worker.py``) by ``validate.OnnxRuntimeModule``; it needs only onnxruntime and NumPy, so
it starts without importing torch. Requests and replies are pickled objects, one after the other, on stdin and on the
original stdout (fd 1 itself is pointed at stderr, so that nothing a native library prints corrupts the replies):

    ("open", model_bytes, providers, graph_optimization) -> ("ok", [(name, shape, type)], [output names])
    ("run", {name: array})                                -> ("ok", [arrays])
    a Python exception in either                          -> ("error", "<type>: <message>")
"""
from __future__ import annotations

import os
import pickle
import sys
from typing import Any, BinaryIO

#: graph_optimization name -> onnxruntime.GraphOptimizationLevel member
LEVELS = {"all": "ORT_ENABLE_ALL", "basic": "ORT_ENABLE_BASIC", "disable": "ORT_DISABLE_ALL"}


def open_session(ort: Any, model: bytes | str, providers: list[str], graph_optimization: str) -> Any:
    """An ``InferenceSession`` of ``model`` at the given graph optimization level, logging errors only."""
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, LEVELS[graph_optimization])
    return ort.InferenceSession(model, options, providers=providers)


def serve(requests: BinaryIO, replies: BinaryIO) -> None:
    """Answer requests until stdin closes."""
    import onnxruntime as ort  # type: ignore[import-untyped]

    ort.set_default_logger_severity(3)  # onnxruntime's own (coloured) warnings stay out of the user's terminal
    session = None
    while True:
        try:
            request = pickle.load(requests)
        except EOFError:
            return
        try:
            if request[0] == "open":
                session = open_session(ort, *request[1:])
                reply: tuple[Any, ...] = ("ok", [(i.name, list(i.shape), i.type) for i in session.get_inputs()],
                                          [o.name for o in session.get_outputs()])
            else:
                assert session is not None, "run before open"
                reply = ("ok", session.run(None, request[1]))
        except Exception as exc:  # noqa: BLE001 - sent back: the caller raises the project's error with it
            reply = ("error", f"{type(exc).__name__}: {exc}")
        pickle.dump(reply, replies, protocol=pickle.HIGHEST_PROTOCOL)
        replies.flush()


if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]  # the package's files are not modules
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    serve(sys.stdin.buffer, replies)
