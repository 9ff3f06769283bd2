"""The agent's protocol is typed: every op has a request TypedDict in agent.py (its `op` literal), which mypy checks
at every `host.call_agent` (overloaded on the request type); the agent still ships as one source on stdin."""

from __future__ import annotations

import ast
from pathlib import Path

import tankbench.agent as agent

SOURCE = Path(agent.__file__).read_text(encoding="utf-8")


def request_ops(source: str = SOURCE) -> dict[str, str]:
    """Request class name -> the op literal its `op` field allows (Literal["x"] or Required[Literal["x"]])."""
    out: dict[str, str] = {}
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.ClassDef):
            continue
        for item in node.body:
            if isinstance(item, ast.AnnAssign) and getattr(item.target, "id", "") == "op":
                literals = [
                    n.value
                    for n in ast.walk(item.annotation)
                    if isinstance(n, ast.Constant) and isinstance(n.value, str)
                ]
                if len(literals) == 1:
                    out[node.name] = literals[0]
    return out


def test_every_op_has_one_typed_request_and_every_request_an_op() -> None:
    ops = request_ops()
    assert sorted(ops.values()) == sorted([*agent.OPS, "session"]), ops
    assert len(set(ops.values())) == len(ops), "one request type per op"
    assert all(name.endswith("Request") for name in ops)


def test_the_request_types_are_for_checking_only() -> None:
    """TypedDict is Python 3.8+; the agent runs on the host's python3 >= 3.7: its protocol types exist only for mypy."""
    assert not hasattr(agent, "ProbeRequest")
    assert "if TYPE_CHECKING:" in SOURCE


def test_the_reader_finds_a_literal_op() -> None:
    src = 'class ARequest(TypedDict, total=False):\n    op: Required[Literal["a"]]\nclass B:\n    op: str\n'
    assert request_ops(src) == {"ARequest": "a"}
