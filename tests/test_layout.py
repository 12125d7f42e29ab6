"""Imports run downward: the library is one package, its tracks are siblings, and command-line
modules are leaves.

* `chessjax` imports none of the script folders (`configs`, `data_prep`, `launch`,
  `benchmarks`): they run from a checkout and use the library, never the other way round.
* The world-model and language-model tracks import nothing of each other; the atomic track may use
  the language-model track's public modules (its LM move-picker), not its command-line modules.
* A command-line module (one with a `__main__` guard) is imported by no module, in the package
  and in every script folder (tests/ may import commands): its private helpers cannot leak into
  the library and no CLI depends on another's argument handling. What two CLIs share lives in a
  module without a guard (the core's, when two tracks share it; `launch.cpu_runs` for two launch
  commands). The imports older than this rule in the script folders are listed, frozen, in
  `KNOWN_CLI_IMPORTS`.
* The script folders `launch` (runs) and `benchmarks` (measurements) import nothing of each other:
  what both use lives in the library (`chessjax.machine`). `docgen`, the docs renderer, reads the
  records, the library and the tables of the runs it renders (their modules in `launch` and
  `benchmarks`); no module imports it but `launch/docs.py`, its command's older name.

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


def test_only_the_docs_commands_import_the_docs_renderer():
  """`docgen` is a leaf: the library, configs, data_prep, launch and benchmarks never import it,
  but for `launch/docs.py`, which runs its command and nothing else."""
  assert ("docgen.doc_spans", "docgen.findings") in SCRIPT_EDGES
  bad = sorted(
    (a, b)
    for a, b in EDGES | SCRIPT_EDGES
    if b.split(".")[0] == "docgen" and a.split(".")[0] != "docgen" and a != "launch.docs"
  )
  assert bad == [], f"modules importing the docs renderer: {bad}"
  assert SCRIPTS["launch.docs"] == ({"sys", "docgen.docs", "docgen.docs.main"}, True)


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


# Imports of a command-line module that predate the rule's widening to the script folders, each
# of a helper that still lives beside its command's argument handling. Frozen: no edge may be
# added, and one that is gone must leave the list (test below). Moving each helper into a module
# without a `__main__` guard (as launch.cpu_runs, launch.cwm_tables.plan and
# benchmarks.population_table did) removes its line.
KNOWN_CLI_IMPORTS = frozenset({
  # A command's other name, which runs its `main` and nothing else.
  ("docgen.__main__", "docgen.docs"),
  ("launch.docs", "docgen.docs"),
  # The library's commands, whose functions scripts reuse (scoring, reports, populations, probes).
  ("benchmarks.bench_lm_probe_speed", "chessjax.lm.evaluate"),
  ("benchmarks.bench_lm_train_s", "chessjax.lm.evaluate"),
  ("benchmarks.bench_lm_train_s", "chessjax.lm.linear_probe"),
  ("benchmarks.bench_lm_train_s", "chessjax.lm.report"),
  ("benchmarks.bench_lm_train_s", "chessjax.lm.token_roles"),
  ("benchmarks.bench_parity_quality", "chessjax.world_model.evaluate"),
  ("benchmarks.harness", "chessjax.population"),
  ("benchmarks.bench_population_dropout", "chessjax.population"),
  ("docgen.doc_spans", "chessjax.world_model.report"),
  ("launch.cwm_tables", "chessjax.world_model.report"),
  ("launch.demo_lm", "chessjax.lm.evaluate"),
  ("launch.demo_world_model", "chessjax.world_model.evaluate"),
  # data_prep's commands, whose readers and writers other scripts reuse.
  ("benchmarks.bench_lm_data", "data_prep.lm_data"),
  ("benchmarks.bench_lm_data", "data_prep.probing_sets"),
  ("benchmarks.bench_lm_train_s", "data_prep.lm_data"),
  ("benchmarks.bench_lm_train_s", "data_prep.probing_sets"),
  ("benchmarks.bench_loader", "data_prep.process_pgn"),
  ("benchmarks.bench_population_dropout", "data_prep.process_pgn"),
  ("benchmarks.bench_random_uniform", "data_prep.random_uniform"),
  ("benchmarks.bench_train", "data_prep.process_pgn"),
  ("benchmarks.device.loop", "data_prep.process_pgn"),
  ("data_prep.lm_data", "data_prep.process_pgn"),
  ("launch.demo_lm", "data_prep.lm_data"),
  ("launch.demo_lm", "data_prep.probing_sets"),
  ("launch.demo_world_model", "data_prep.coverage"),
  ("launch.demo_world_model", "data_prep.process_pgn"),
  ("launch.demo_world_model", "data_prep.random_uniform"),
  # The protocol check reads the sweep command's plan.
  ("launch.protocol", "launch.sweep"),
})  # fmt: skip


def test_no_module_imports_a_command_line_module():
  """In the package and every script folder (tests/ may import commands): no module imports a
  command-line module, but for the frozen `KNOWN_CLI_IMPORTS`."""
  bad = sorted((a, b) for a, b in EDGES if b in CLIS and a != b)
  assert bad == [], f"modules importing a command-line module: {bad}"
  users = _parse(ATOMIC_USERS)
  assert all(cli for _, cli in users.values())
  assert ("data_prep.atomic_positions", "chessjax.atomic.engines") in {
    (a, b) for a, (imported, _) in users.items() for b in imported
  }
  bad = sorted((a, b) for a, (imported, _) in users.items() for b in imported if b in CLIS)
  assert bad == [], f"scripts importing a command-line module of the atomic track: {bad}"
  clis = CLIS | {name for name, (_, cli) in SCRIPTS.items() if cli}
  assert {"launch.cwm_mini", "launch.transfer", "benchmarks.bench_population"} <= clis
  assert {"launch.cpu_runs", "launch.cwm_tables", "benchmarks.population_table"}.isdisjoint(clis)
  assert ("docgen.doc_spans", "launch.cwm_tables") in SCRIPT_EDGES
  assert ("launch.transfer", "launch.cpu_runs") in SCRIPT_EDGES
  found = {(a, b) for a, b in EDGES | SCRIPT_EDGES if b in clis and a != b}
  bad = sorted(found - KNOWN_CLI_IMPORTS)
  assert bad == [], f"modules importing a command-line module: {bad}"
  gone = sorted(KNOWN_CLI_IMPORTS - found)
  assert gone == [], f"KNOWN_CLI_IMPORTS lists imports that are gone (remove them): {gone}"


def test_old_flat_modules_are_gone():
  for name in ("engines", "atomic_eval", "atomic_prompts", "move_pickers"):
    assert not (REPO / "chessjax" / f"{name}.py").exists()
  for track in ("world_model", "lm"):  # The demos run from the checkout: launch/demo_*.py.
    assert not (REPO / "chessjax" / track / "demo.py").exists()
