"""The atomic track's module layout: command-line modules import helpers, never each other.

A CLI module is one with a `__main__` guard; every other module of the track (and every script
that uses it) may import library modules only, so a CLI's private helpers cannot leak into the
library and no CLI depends on another's argument handling.
"""

import ast

from conftest import REPO

TRACK = sorted((REPO / "chessjax" / "atomic").glob("*.py"))
USERS = [REPO / "data_prep" / "atomic_positions.py", REPO / "benchmarks" / "bench_engines.py"]


def _module(path) -> str:
  parts = path.relative_to(REPO).with_suffix("").parts
  return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_cli(tree: ast.Module) -> bool:
  return any(
    isinstance(node, ast.If) and "__main__" in ast.unparse(node.test) for node in tree.body
  )


def _imports(tree: ast.Module) -> set[str]:
  """Modules imported anywhere in the file; `from pkg import name` counts `pkg.name` too."""
  found = set()
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      found |= {alias.name for alias in node.names}
    elif isinstance(node, ast.ImportFrom) and node.module:
      found.add(node.module)
      found |= {f"{node.module}.{alias.name}" for alias in node.names}
  return found


def test_no_module_imports_a_cli_module():
  trees = {_module(p): ast.parse(p.read_text()) for p in TRACK + USERS}
  clis = {name for name, tree in trees.items() if _is_cli(tree)}
  assert clis == {
    "chessjax.atomic.report",
    "chessjax.atomic.pickers",
    "data_prep.atomic_positions",
    "benchmarks.bench_engines",
  }
  edges = {(name, imported) for name, tree in trees.items() for imported in _imports(tree)}
  # The graph is not empty: the CLIs do import the library modules.
  assert ("chessjax.atomic.report", "chessjax.atomic.scoring") in edges
  assert ("data_prep.atomic_positions", "chessjax.atomic.engines") in edges
  bad = sorted((a, b) for a, b in edges if b in clis and a != b)
  assert bad == [], f"modules importing a command-line module: {bad}"


def test_old_flat_modules_are_gone():
  for name in ("engines", "atomic_eval", "atomic_prompts", "move_pickers"):
    assert not (REPO / "chessjax" / f"{name}.py").exists()
