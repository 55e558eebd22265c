"""The Python blocks of the book's page (docs/src/python.md) compile, and
name only what the package exports."""

import ast
import re
from typing import List

import tenure
import tenure.aio
from conftest import ROOT


def blocks() -> List[str]:
    text = (ROOT / "docs" / "src" / "python.md").read_text()
    return re.findall(r"```python\n(.*?)```", text, re.S)


def test_docs_python_blocks_compile_and_use_existing_names() -> None:
    found = blocks()
    assert len(found) >= 2
    for code in found:
        tree = ast.parse(code)
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                module = {"tenure": tenure}.get(node.value.id)
                if module is not None:
                    assert hasattr(module, node.attr), f"tenure.{node.attr} in docs/src/python.md"
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Attribute)
                and isinstance(node.value.value, ast.Name)
                and node.value.value.id == "tenure"
            ):
                owner = getattr(tenure, node.value.attr)
                assert hasattr(owner, node.attr), f"tenure.{node.value.attr}.{node.attr} in docs/src/python.md"
