"""Imports run downward: the library is one package, its tracks are siblings, and command-line
modules are leaves.

* `chessjax` imports none of the script folders (`configs`, `data_prep`, `launch`,
  `benchmarks`): they run from a checkout and use the library, never the other way round.
* The world-model and language-model tracks import nothing of each other; the atomic track may use
  the language-model track's public modules (its LM move-picker), not its command-line modules.
* A command-line module (one with a `__main__` guard) of the package is imported by no module of the
  package: its private helpers cannot leak into the library. Scripts may use a command's public
  functions (the library's evaluators and reports, `data_prep`'s readers and writers): what hurts
  is narrower, and each rule says it:
  * no flag is defined at import time outside `chessjax/entry.py` (absl's flags are one registry per
    process: importing a module must not add to it);
  * no underscore name is used across modules (`from m import _x`, `m._x`): what two modules share
    is public in one of them;
  * no import runs upward between top-level folders, in layers: `chessjax`; `configs` and
    `data_prep`; `launch` and `benchmarks` (runs and measurements: nothing of each other; what
    both use lives in the library, `chessjax.machine`); `docgen`, the docs renderer, which reads
    the records, the library and the tables of the runs it renders. Folders of one layer import
    nothing of each other.
  A package's `__main__.py` (`python -m docgen`) runs its command and nothing else: exempt.

Imports are read from the source (every `import` statement, those inside functions included), so
a lazy import counts as much as one at the top of a file.
"""

import ast

from conftest import REPO

SCRIPT_FOLDERS = ("configs", "data_prep", "launch", "benchmarks", "docgen")
TRACKS = ("world_model", "lm", "atomic")
# Scripts outside the package that use the atomic track: they too import no command-line module.
ATOMIC_USERS = [REPO / "data_prep/atomic_positions.py", REPO / "benchmarks/bench_engines.py"]


def _module(path) -> str:
  parts = path.relative_to(REPO).with_suffix("").parts
  return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_cli(tree: ast.Module) -> bool:
  return any(
    isinstance(node, ast.If) and "__main__" in ast.unparse(node.test) for node in tree.body
  )


def _imports(name: str, path, tree: ast.Module) -> set[str]:
  """Modules imported anywhere in the file; `from pkg import name` counts `pkg.name` too, and a
  relative import is resolved against the file's package."""
  package = name if path.name == "__init__.py" else name.rpartition(".")[0]
  found = set()
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      found |= {alias.name for alias in node.names}
    elif isinstance(node, ast.ImportFrom):
      base = node.module or ""
      if node.level:
        parts = package.split(".")[: len(package.split(".")) - (node.level - 1)]
        base = ".".join(parts + ([node.module] if node.module else []))
      found.add(base)
      found |= {f"{base}.{alias.name}" for alias in node.names}
  return found


def _parse(paths) -> dict[str, tuple[set[str], bool]]:
  """module name -> (what it imports, whether it is a command-line module)."""
  out = {}
  for path in paths:
    tree = ast.parse(path.read_text(), str(path))
    name = _module(path)
    out[name] = (_imports(name, path, tree), _is_cli(tree))
  return out


PACKAGE = _parse(sorted((REPO / "chessjax").rglob("*.py")))
EDGES = {(a, b) for a, (imported, _) in PACKAGE.items() for b in imported}
CLIS = {name for name, (_, cli) in PACKAGE.items() if cli}
SCRIPTS = _parse(sorted(p for f in SCRIPT_FOLDERS for p in (REPO / f).rglob("*.py")))
SCRIPT_EDGES = {(a, b) for a, (imported, _) in SCRIPTS.items() for b in imported}


def _track(module: str) -> str:
  """`world_model`, `lm` or `atomic` for a track's module, `core` for the rest of chessjax."""
  parts = module.split(".")
  return parts[1] if len(parts) > 1 and parts[1] in TRACKS else "core"


def test_the_graph_is_read():
  # Not vacuous: the known modules, command-line modules and edges are there.
  assert len(PACKAGE) > 50
  assert {
    "chessjax.main",
    "chessjax.world_model.evaluate",
    "chessjax.world_model.report",
    "chessjax.lm.evaluate",
    "chessjax.atomic.report",
    "chessjax.atomic.pickers",
  } <= CLIS
  assert {c for c in CLIS if _track(c) == "atomic"} == {
    "chessjax.atomic.report",
    "chessjax.atomic.pickers",
  }
  assert ("chessjax.atomic.lm_picker", "chessjax.lm.tokens") in EDGES
  assert ("chessjax.world_model.report", "chessjax.world_model.grid") in EDGES
  assert ("chessjax.atomic.report", "chessjax.atomic.scoring") in EDGES


def test_the_package_imports_no_script_folder():
  bad = sorted((a, b) for a, b in EDGES if b.split(".")[0] in SCRIPT_FOLDERS)
  assert bad == [], f"chessjax modules importing a script folder: {bad}"


def test_launch_and_benchmarks_import_nothing_of_each_other():
  folders = {a.split(".")[0] for a in SCRIPTS}
  assert {"launch", "benchmarks", "docgen"} <= folders
  assert ("launch.cwm_mini", "chessjax.machine") in SCRIPT_EDGES
  assert ("benchmarks.bench_compile", "chessjax.machine") in SCRIPT_EDGES
  bad = sorted(
    (a, b)
    for a, b in SCRIPT_EDGES
    if {a.split(".")[0], b.split(".")[0]} == {"launch", "benchmarks"}
  )
  assert bad == [], f"imports between launch/ and benchmarks/: {bad}"


def test_nothing_imports_the_docs_renderer():
  """`docgen` is a leaf: the library, configs, data_prep, launch and benchmarks never import it
  (its command's older name, `launch/docs.py`, is gone)."""
  assert ("docgen.doc_spans", "docgen.findings") in SCRIPT_EDGES
  bad = sorted(
    (a, b)
    for a, b in EDGES | SCRIPT_EDGES
    if b.split(".")[0] == "docgen" and a.split(".")[0] != "docgen"
  )
  assert bad == [], f"modules importing the docs renderer: {bad}"
  assert not (REPO / "launch" / "docs.py").exists()


def test_world_model_and_lm_import_nothing_of_each_other():
  bad = sorted(
    (a, b)
    for a, b in EDGES
    if b.startswith("chessjax.") and {_track(a), _track(b)} == {"world_model", "lm"}
  )
  assert bad == [], f"imports between the world-model and language-model tracks: {bad}"


def test_atomic_uses_only_public_lm_modules():
  used = {b for a, b in EDGES if _track(a) == "atomic" and _track(b) == "lm"}
  assert used, "the atomic track's LM picker uses the language-model track"
  bad = sorted(b for b in used if b in CLIS)
  assert bad == [], f"the atomic track imports language-model command-line modules: {bad}"
  others = sorted((a, b) for a, b in EDGES if _track(a) == "atomic" and _track(b) == "world_model")
  assert others == [], f"the atomic track imports the world-model track: {others}"


def test_no_module_imports_another_tracks_command_line_module():
  bad = sorted((a, b) for a, b in EDGES if b in CLIS and _track(a) != _track(b))
  assert bad == [], f"modules importing another track's command-line module: {bad}"


def test_no_package_module_imports_a_command_line_module():
  """In the package (and the scripts that use the atomic track): no module imports a
  command-line module."""
  bad = sorted((a, b) for a, b in EDGES if b in CLIS and a != b)
  assert bad == [], f"modules importing a command-line module: {bad}"
  users = _parse(ATOMIC_USERS)
  assert all(cli for _, cli in users.values())
  assert ("data_prep.atomic_positions", "chessjax.atomic.engines") in {
    (a, b) for a, (imported, _) in users.items() for b in imported
  }
  bad = sorted((a, b) for a, (imported, _) in users.items() for b in imported if b in CLIS)
  assert bad == [], f"scripts importing a command-line module of the atomic track: {bad}"


# Top-level folders, lowest first: a module imports from its own folder or a lower layer only.
LAYERS = (("chessjax",), ("configs", "data_prep"), ("launch", "benchmarks"), ("docgen",))
LAYER = {folder: i for i, folders in enumerate(LAYERS) for folder in folders}
# The one module that defines flags (absl's registry is per process).
FLAG_MODULE = "chessjax.entry"
# Underscore names used across modules today in folders another change owns (docgen/, being
# split per claim and per bullet): each (importer, module.name). Frozen: none may be added, and
# one that is gone must leave the list (test below).
KNOWN_PRIVATE_USES = frozenset({
  # docgen's renderers share findings.py's helpers (`_join`: a list in words; `_runs`: records).
  ("docgen.claims", "docgen.findings._join"),
  ("docgen.claims", "docgen.findings._runs"),
  ("docgen.doc_spans", "docgen.findings._join"),
  ("docgen.findings_long", "docgen.findings._join"),
  ("docgen.findings_long", "docgen.findings._runs"),
  ("docgen.track_spans", "docgen.findings._join"),
  ("docgen.transfer_spans", "docgen.findings._join"),
  # The claims page renders claims.py's d128 rows (`_cwm`, split into one function per claim).
  ("docgen.doc_spans", "docgen.claims._cwm"),
  # A cell of cwm_mini's tables, formatted as its own tables do (launch.cwm_tables._cell).
  ("docgen.doc_spans", "launch.cwm_tables._cell"),
})  # fmt: skip
ALL = {**PACKAGE, **SCRIPTS}
TREES = {
  _module(path): (path, ast.parse(path.read_text(), str(path)))
  for folder in ("chessjax", *SCRIPT_FOLDERS)
  for path in sorted((REPO / folder).rglob("*.py"))
}


def _is_main_guard(node) -> bool:
  return isinstance(node, ast.If) and "__main__" in ast.unparse(node.test)


def _import_time(tree: ast.Module):
  """The nodes a module runs when imported: its top level and class bodies, not its functions'
  bodies nor its `if __name__ == "__main__":` block."""
  todo = [n for n in tree.body if not _is_main_guard(n)]
  while todo:
    node = todo.pop()
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
      continue
    yield node
    todo.extend(ast.iter_child_nodes(node))


def _flag_definitions(tree: ast.Module) -> list[str]:
  out = []
  for node in _import_time(tree):
    if isinstance(node, ast.Call):
      func = node.func
      called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
      if called.startswith("DEFINE"):
        out.append(ast.unparse(node)[:60])
  return out


def _dotted(node) -> str | None:
  parts = []
  while isinstance(node, ast.Attribute):
    parts.append(node.attr)
    node = node.value
  if not isinstance(node, ast.Name):
    return None
  return ".".join([node.id, *reversed(parts)])


def _private_uses(name: str, path, tree: ast.Module) -> set[str]:
  """`module._x` for every underscore name of another of the repository's modules that `name`
  imports (`from module import _x`) or reads through an imported module (`module._x`)."""
  package = name if path.name == "__init__.py" else name.rpartition(".")[0]
  bound, out = {}, set()
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      for alias in node.names:
        bound[alias.asname or alias.name.split(".")[0]] = (
          alias.name if alias.asname else (alias.name.split(".")[0])
        )
    elif isinstance(node, ast.ImportFrom):
      base = node.module or ""
      if node.level:
        parts = package.split(".")[: len(package.split(".")) - (node.level - 1)]
        base = ".".join(parts + ([node.module] if node.module else []))
      for alias in node.names:
        full = f"{base}.{alias.name}"
        if full in ALL:
          bound[alias.asname or alias.name] = full
        elif base in ALL and base != name and _private(alias.name):
          out.add(full)
  for node in ast.walk(tree):
    if isinstance(node, ast.Attribute) and _private(node.attr):
      dotted = _dotted(node.value)
      if dotted is None or dotted.split(".")[0] not in bound:
        continue
      head, _, rest = dotted.partition(".")
      module = ".".join(filter(None, [bound[head], rest]))
      if module in ALL and module != name:
        out.add(f"{module}.{node.attr}")
  return out


def _private(attr: str) -> bool:
  return attr.startswith("_") and not attr.startswith("__")


def test_no_flag_is_defined_at_import_time_outside_entry():
  found = {name: _flag_definitions(tree) for name, (_, tree) in TREES.items()}
  assert len(found[FLAG_MODULE]) >= 3  # --config, --workdir, --member: not vacuous.
  bad = {n: f for n, f in found.items() if f and n != FLAG_MODULE and not n.endswith("__main__")}
  assert bad == {}, f"flags defined at import time outside {FLAG_MODULE}: {bad}"


def test_no_underscore_name_is_used_across_modules():
  assert len(TREES) > 100
  found = {
    (name, use)
    for name, (path, tree) in TREES.items()
    if not name.endswith("__main__")
    for use in _private_uses(name, path, tree)
  }
  # Not vacuous: both forms are seen.
  assert {("docgen.claims", "docgen.findings._runs"), ("docgen.track_spans",
          "docgen.findings._join")} <= found  # fmt: skip
  bad = sorted(found - KNOWN_PRIVATE_USES)
  assert bad == [], f"underscore names used across modules (make them public): {bad}"
  gone = sorted(KNOWN_PRIVATE_USES - found)
  assert gone == [], f"KNOWN_PRIVATE_USES lists uses that are gone (remove them): {gone}"


def test_no_import_runs_upward_between_folders():
  edges = EDGES | SCRIPT_EDGES
  assert ("launch.cwm_mini", "chessjax.machine") in edges and ("docgen.doc_spans",
          "launch.cwm_tables") in edges  # fmt: skip
  bad = sorted(
    (a, b)
    for a, b in edges
    if (fa := a.split(".")[0]) != (fb := b.split(".")[0])
    and fb in LAYER
    and not a.endswith("__main__")
    and LAYER[fb] >= LAYER[fa]
  )
  assert bad == [], f"imports to a folder of the same or a higher layer: {bad}"


def test_old_flat_modules_are_gone():
  for name in ("engines", "atomic_eval", "atomic_prompts", "move_pickers"):
    assert not (REPO / "chessjax" / f"{name}.py").exists()
  for track in ("world_model", "lm"):  # The demos run from the checkout: launch/demo_*.py.
    assert not (REPO / "chessjax" / track / "demo.py").exists()
