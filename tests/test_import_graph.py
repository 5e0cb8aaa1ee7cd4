"""No import cycles among the apps' modules, and every app imports only the apps below it.

The graph comes from parsing the sources with `ast`, so an import inside a function counts
as much as one at the top of the file: a lazy import hides a cycle from Python's loader,
not from the layering. The one cycle allowed is a Celery `tasks` module and the service
package it adapts (the task imports the service; the service enqueues the task by name).

The layers are ARCHITECTURE.md's, bottom first. A lower app that must tell a higher one
something sends a signal or calls a hook the higher app registers in its AppConfig.ready().

A web process (gunicorn, runserver) loads no torch, torchaudio or torchvision (together
several hundred MB of memory in every web worker); only the workers' jobs that train or
suggest do. A fresh interpreter with Django set up imports what a web worker loads at boot
(the WSGI application, the URLconf with every view and, through earmark.api, every API router,
the pages' forms), another plans a run of every model as a page that starts a run does, and
neither may have them in sys.modules.

Run as a script (`python tests/test_import_graph.py`) it prints the cycles and the upward
imports it finds, and what loads torch in a web process.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
APPS = (
    "active",
    "annotation",
    "core",
    "corpus",
    "crowd",
    "curation",
    "demo",
    "earmark",
    "modeling",
    "postprocessing",
    "synthscenes",
)

Graph = dict[str, set[str]]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _sources() -> dict[str, Path]:
    return {
        _module_name(path): path
        for app in APPS
        for path in sorted((ROOT / app).rglob("*.py"))
        if "migrations" not in path.parts
    }


def _imported(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> Iterator[str]:
    """The dotted names an import statement may load: the module and, for `from X import
    Y`, X.Y too (Y may be a submodule)."""
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
        return
    if node.level:
        package = module.split(".") if is_package else module.split(".")[:-1]
        base_parts = package[: len(package) - (node.level - 1)]
        base = ".".join([*base_parts, *([node.module] if node.module else [])])
    else:
        base = node.module or ""
    yield base
    yield from (f"{base}.{alias.name}" for alias in node.names)


def import_graph() -> Graph:
    """Each first-party module and the first-party modules it imports, anywhere in it."""
    sources = _sources()
    graph: Graph = {}
    for module, path in sources.items():
        is_package = path.name == "__init__.py"
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import | ast.ImportFrom):
                edges.update(
                    name
                    for name in _imported(node, module, is_package)
                    if name in sources and name != module
                )
        graph[module] = edges
    return graph


def cycles(graph: Graph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def _is_task_adapter(component: list[str]) -> bool:
    """A `tasks` module and the service (module or package) of its own app."""
    tasks = [m for m in component if m.rsplit(".", 1)[-1] == "tasks"]
    if len(tasks) != 1:
        return False
    app = tasks[0].rsplit(".", 1)[0]
    service = f"{app}.services"
    return all(m in (tasks[0], service) or m.startswith(f"{service}.") for m in component)


LAYERS = (
    "synthscenes",
    "core",
    "curation",
    "annotation",
    "crowd",
    "postprocessing",
    "corpus",
    "modeling",
    "active",
    "demo",
    "earmark",
)

# Upward imports allowed, by module prefix, each with its reason.
UPWARD_ALLOWED: dict[tuple[str, str], str] = {
    # crowd's data layer: who may take work (requirements, blocks), and the rows a review
    # decision writes (reviews, ledger, flags) in annotation's own transaction; crowd's
    # services, views and API build on annotation's services, never the reverse.
    ("annotation", "crowd.models"): "crowd's rows",
    ("annotation", "crowd.queries"): "crowd's reads",
    ("annotation", "crowd.records"): "crowd's writes inside annotation's transactions",
}


def upward_imports(graph: Graph) -> list[str]:
    """Imports of a module in a higher layer than the importer's, less the allowed ones."""
    rank = {app: i for i, app in enumerate(LAYERS)}
    found = []
    for module, targets in sorted(graph.items()):
        app = module.split(".")[0]
        for target in sorted(targets):
            target_app = target.split(".")[0]
            if rank[target_app] <= rank[app]:
                continue
            if any(
                app == low and (target == high or target.startswith(f"{high}."))
                for low, high in UPWARD_ALLOWED
            ):
                continue
            found.append(f"{module} -> {target}")
    return found


def forbidden_cycles() -> list[list[str]]:
    return [c for c in cycles(import_graph()) if not _is_task_adapter(c)]


def test_the_apps_import_no_module_that_imports_them_back() -> None:
    assert forbidden_cycles() == []


def test_layers_list_every_app() -> None:
    assert sorted(LAYERS) == sorted(APPS)


def test_no_app_imports_an_app_above_it() -> None:
    assert upward_imports(import_graph()) == []


HEAVY = ("torch", "torchaudio", "torchvision")

# Run in a fresh interpreter (the checkout's root first on sys.path) with Django set up, then
# `code`; it prints the heavy modules loaded and, for the first, the first-party import lines
# that led to it.
PROBE = """
import json, sys, traceback
import django

HEAVY = %(heavy)r
ROOT = %(root)r
APPS = %(apps)r
chain = []

class FirstHeavyImport:
    def find_spec(self, name, path=None, target=None):
        if name in HEAVY and not chain:
            for frame in traceback.extract_stack():
                where = frame.filename.removeprefix(ROOT + "/")
                if where.split("/")[0] in APPS:
                    chain.append(f"{where}:{frame.lineno}")
        return None

sys.meta_path.insert(0, FirstHeavyImport())
django.setup()
%(code)s
loaded = sorted(m for m in sys.modules if m.split(".")[0] in HEAVY)
print(json.dumps({"heavy": loaded, "chain": chain}))
"""

# What a web worker imports at boot: the WSGI application, which loads the URLconf (every
# view and, through earmark.api, every API router), and the forms of the pages.
WEB_WORKER = "import earmark.wsgi, earmark.urls, earmark.api, active.forms, modeling.forms"

# What a page that starts a run calls in the web process: planning a run of every model, and
# of one with a pretrained audio encoder and one with a pretrained video encoder (their
# settings, not their networks).
RUN_PLANNING = """
from modeling.ml.catalog import MODEL_CONFIGS
from modeling.planning import run_plan

for name in MODEL_CONFIGS:
    run_plan(model_name=name, preset="tiny")
run_plan(
    model_name="topdown",
    preset="tiny",
    overrides=["model.encoder=vggish", "model.encoder_weights=weights.pth"],
)
run_plan(
    model_name="vact",
    preset="tiny",
    overrides=["video.encoder=resnet18", "video.weights=weights.pth"],
)
"""


def heavy_imports(code: str, weights_dir: Path) -> dict[str, list[str]]:
    """What running `code` in a fresh Django process loads: {"heavy": the heavy modules,
    "chain": the first-party import lines (file:line, outermost first) that loaded the first
    of them}. `weights_dir` is ENCODER_WEIGHTS_DIR, holding the `weights.pth` RUN_PLANNING
    names."""
    (weights_dir / "weights.pth").touch()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": os.environ.get("DJANGO_SETTINGS_MODULE", "earmark.settings_test"),
        "ENCODER_WEIGHTS_DIR": str(weights_dir),
    }
    probe = PROBE % {"heavy": HEAVY, "root": str(ROOT), "apps": APPS, "code": code}
    out = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    found: dict[str, list[str]] = json.loads(out.stdout.strip().splitlines()[-1])
    return found


def test_a_web_worker_loads_no_torch(tmp_path: Path) -> None:
    found = heavy_imports(WEB_WORKER, tmp_path)
    assert found["heavy"] == [], "loaded by " + " <- ".join(reversed(found["chain"]))


def test_planning_a_run_loads_no_torch(tmp_path: Path) -> None:
    found = heavy_imports(RUN_PLANNING, tmp_path)
    assert found["heavy"] == [], "loaded by " + " <- ".join(reversed(found["chain"]))


if __name__ == "__main__":
    for component in cycles(import_graph()):
        print(("allowed: " if _is_task_adapter(component) else "CYCLE:   ") + " ".join(component))
    for line in upward_imports(import_graph()):
        print(f"UPWARD:  {line}")
    with tempfile.TemporaryDirectory() as folder:
        for label, code in (("web worker", WEB_WORKER), ("run planning", RUN_PLANNING)):
            found = heavy_imports(code, Path(folder))
            if found["heavy"]:
                print(f"TORCH:   {label}: " + " <- ".join(reversed(found["chain"])))
