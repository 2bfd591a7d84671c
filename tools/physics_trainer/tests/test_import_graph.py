"""The package's modules import each other without a cycle.

fit_coefficients and validate once imported each other (validate late, inside
evaluate_file), which worked only as long as every such import stayed inside a
function. The graph below counts every import of a package module, at module
level or inside a function, so a late import cannot hide a cycle; and each
module must import on its own in a fresh interpreter, whatever was imported
before it.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

PKG = "physics_trainer"
PKG_DIR = Path(__file__).resolve().parent.parent / PKG


def _modules(pkg_dir: Path) -> list[str]:
    return sorted(p.stem for p in pkg_dir.glob("*.py"))


def import_graph(pkg_dir: Path = PKG_DIR) -> dict[str, set[str]]:
    """Module name → the package modules it imports anywhere in its source
    ("__init__" stands for the package itself)."""
    mods = set(_modules(pkg_dir))
    graph: dict[str, set[str]] = {}
    for mod in mods:
        deps: set[str] = set()
        tree = ast.parse((pkg_dir / f"{mod}.py").read_text(), filename=f"{mod}.py")
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                if node.level == 1:
                    base = node.module
                elif node.level == 0 and node.module and (node.module == PKG or node.module.startswith(PKG + ".")):
                    base = node.module[len(PKG) + 1:] or None
                else:
                    continue
                if base:  # from .x import y / from physics_trainer.x import y
                    deps.add(base.split(".")[0])
                else:  # from . import x: x is a module, or a name of the package's __init__
                    for alias in node.names:
                        deps.add(alias.name if alias.name in mods else "__init__")
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith(PKG + "."):
                        deps.add(alias.name.split(".")[1])
        deps.discard(mod)
        graph[mod] = deps & mods
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle of graph as a list of modules (first == last), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        path.append(m)
        for d in sorted(graph.get(m, ())):
            if state.get(d) == 1:
                return path[path.index(d):] + [d]
            if d not in state:
                found = visit(d)
                if found:
                    return found
        path.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state:
            found = visit(m)
            if found:
                return found
    return None


def test_find_cycle_finds_the_old_cycle():
    """The checker itself: the graph the package had before the cycle was broken."""
    old = {"fit_coefficients": {"validate", "export_coeffs"}, "validate": {"fit_coefficients", "export_coeffs"},
           "export_coeffs": {"compute_features"}, "compute_features": set()}
    assert find_cycle(old) == ["fit_coefficients", "validate", "fit_coefficients"]
    del old["validate"]
    assert find_cycle(old) is None


def test_import_graph_is_acyclic():
    graph = import_graph()
    assert {"fit_coefficients", "validate", "scores", "export_coeffs", "cli"} <= graph.keys()
    assert "validate" not in graph["fit_coefficients"]
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_each_module_imports_in_a_fresh_interpreter():
    env = dict(os.environ)
    root = str(PKG_DIR.parent)
    env["PYTHONPATH"] = root + os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else root
    failed = {}
    for mod in _modules(PKG_DIR):
        name = PKG if mod == "__init__" else f"{PKG}.{mod}"
        r = subprocess.run([sys.executable, "-c", f"import {name}"], env=env, capture_output=True, text=True)
        if r.returncode != 0:
            failed[name] = r.stderr.strip().splitlines()[-1:]
    assert not failed, failed
