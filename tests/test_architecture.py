"""The house as docs/architecture.md draws it: no import circle, layers that point one way, and a
module tree that lists every module of the package and nothing else.

The import graph is read from the source with ``ast`` (no module is imported): every ``import`` and
``from ... import`` anywhere in a module counts, at the top, inside a function or under
``TYPE_CHECKING``, since an import moved into a function to dodge a circle still closes it.
``from pkg import name`` is an edge to the submodule ``pkg.name`` when there is one, else to
``pkg``; relative imports are resolved against the importing module's package.
"""

from __future__ import annotations

import ast
import pathlib
import re
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = "dpgen_jax"
DOC = ROOT / "docs" / "architecture.md"

#: Modules below every layer: they import nothing of ours, and any layer may import them.
LEAVES = frozenset({"_versions", "_validate", "_typing", "_random", "_machine", "_migrate"})
#: Layer -> the layers it may import (docs/architecture.md, the table under the tree). A layer is a
#: subpackage or a top-level module; ``_audit_mechanisms`` is part of ``audit``.
MAY_IMPORT = {
    "data": set(),
    "privacy": set(),
    "dpsgd": {"privacy"},
    "models": set(),
    "synthesizers": {"data", "privacy", "dpsgd", "models"},
    "metrics": {"data"},
    "advice": {"synthesizers", "data", "privacy", "dpsgd", "models"},
    "audit": {"data", "privacy", "dpsgd", "models", "synthesizers"},
}
SAME_LAYER = {"_audit_mechanisms": "audit"}
#: Layers that may import anything of ours (and that nothing of ours imports but the package).
ANYTHING = {"cli", ""}


# ----------------------------------------------------------------------------- the import graph


def modules(root: pathlib.Path, package: str) -> dict[str, pathlib.Path]:
    """Module name -> file of every module of ``package`` (a package is its ``__init__.py``)."""
    out = {}
    for path in sorted((root / package).rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def imports(name: str, path: pathlib.Path, known: set[str] | dict, package: str) -> set[str]:
    """The modules of ``package`` that module ``name`` (at ``path``) imports, anywhere in it."""
    here = name if path.name == "__init__.py" else name.rpartition(".")[0]

    def owner(dotted: str) -> str | None:  # the longest known module a dotted name lies in
        while dotted and dotted not in known:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    out: set[str | None] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            out |= {owner(a.name) for a in node.names if a.name.split(".")[0] == package}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here.split(".")[: len(here.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            if source.split(".")[0] != package:
                continue
            for alias in node.names:
                sub = f"{source}.{alias.name}"
                out.add(sub if sub in known else owner(source))
    out.discard(None)
    out.discard(name)
    return out  # type: ignore[return-value]


def import_graph(root: pathlib.Path = ROOT, package: str = PACKAGE) -> dict[str, set[str]]:
    found = modules(root, package)
    return {name: imports(name, path, found, package) for name, path in found.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One circle per strongly connected component of more than one module: the modules in the
    order the imports go round (the first one again at the end)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []

    def visit(v: str) -> None:  # Tarjan; the graph is small, recursion is fine
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(component)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return [_walk_round(graph, c) for c in components]


def _walk_round(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    """A shortest circle through the first module of ``component`` (breadth first)."""
    start = min(component)
    paths = {start: [start]}
    queue = [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(graph[v] & component):
            if w == start:
                return paths[v] + [start]
            if w not in paths:
                paths[w] = paths[v] + [w]
                queue.append(w)
    raise AssertionError(f"{sorted(component)} is not strongly connected")  # pragma: no cover


def layer(module: str) -> str:
    """The layer of a module: its subpackage or top-level module under the package ('' for the
    package itself)."""
    parts = module.split(".")
    name = parts[1] if len(parts) > 1 else ""
    return SAME_LAYER.get(name, name)


# ----------------------------------------------------------------------------- the doc's tree

#: An entry of the tree: two spaces per level, then a file (``name.py``, ``name.json``) or a
#: package or folder (``name/``, which stands for its ``__init__.py`` too), then its description.
#: A line indented further than :data:`MAX_ENTRY_INDENT` continues the description above it.
ENTRY = re.compile(r"^(?P<indent> *)(?P<name>[A-Za-z0-9_]+(?:\.[a-z]+|/))(?: {2,}(?P<text>\S.*))?$")
MAX_ENTRY_INDENT = 8


def tree_block(text: str) -> list[str]:
    """The lines of the doc's module tree: the first fenced block whose first line is
    ``dpgen_jax/``."""
    blocks = re.findall(r"^```[a-z]*\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL)
    for block in blocks:
        lines = block.splitlines()
        if lines and lines[0].startswith(f"{PACKAGE}/"):
            return lines
    raise AssertionError(f"no fenced block starting with '{PACKAGE}/' in the doc")


def tree_paths(lines: list[str]) -> dict[str, str]:
    """Path (``dpgen_jax/data/_schema.py``, ``dpgen_jax/data/``) -> description of every entry."""
    out: dict[str, str] = {}
    folders: list[str] = []
    last = None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip(" "))
        if indent > MAX_ENTRY_INDENT:
            assert last is not None, f"tree line {number} continues nothing: {line!r}"
            out[last] += " " + line.strip()
            continue
        match = ENTRY.match(line)
        assert match and indent % 2 == 0 and indent // 2 <= len(folders), (
            f"tree line {number} is not an entry ('  ' per level, then name.py or name/, two "
            f"spaces and its description): {line!r}")
        depth = indent // 2
        folders = folders[:depth]
        path = "".join(folders) + match["name"]
        assert path not in out, f"tree line {number} lists {path} twice"
        out[path] = match["text"] or ""
        last = path
        if path.endswith("/"):
            folders.append(match["name"])
    return out


def listed_modules(paths: dict[str, str]) -> dict[str, str]:
    """Module name -> path of every Python module the tree lists (a folder under the package is
    its ``__init__``)."""
    out = {}
    for path in paths:
        if not path.startswith(f"{PACKAGE}/"):
            continue
        if path.endswith("/"):
            out[path.rstrip("/").replace("/", ".")] = path
        elif path.endswith(".py"):
            out[path[: -len(".py")].replace("/", ".")] = path
    return out


# ----------------------------------------------------------------------------- tests


def test_the_graph_reads_every_form_of_import(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    files = {
        "__init__.py": "from pkg import a\n",
        "a.py": "import pkg.b\nfrom .sub import c\n",
        "b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.sub.c import thing\n",
        "sub/__init__.py": "from .c import thing\nfrom .. import b\n",
        "sub/c.py": "import json\n\ndef late():\n    from pkg.sub import d\n    from pkg import name_in_init\n",
        "sub/d.py": "from pkg.a import x as y\nimport pkg.sub.c.attribute\n",
    }
    for name, text in files.items():
        (pkg / name).write_text(textwrap.dedent(text))
    graph = import_graph(tmp_path, "pkg")
    assert graph == {
        "pkg": {"pkg.a"},
        "pkg.a": {"pkg.b", "pkg.sub.c"},
        "pkg.b": {"pkg.sub.c"},                     # under TYPE_CHECKING
        "pkg.sub": {"pkg.sub.c", "pkg.b"},          # relative, one and two levels up
        "pkg.sub.c": {"pkg.sub.d", "pkg"},          # inside a function; a name of the package
        "pkg.sub.d": {"pkg.a", "pkg.sub.c"},        # a name of a module; an attribute path
    }
    # one circle of five modules, shown by its shortest round through the first of them
    assert circles(graph) == [["pkg", "pkg.a", "pkg.sub.c", "pkg"]]
    del graph["pkg.sub.c"]
    graph["pkg.sub.c"] = {"pkg.sub.d"}  # without the import in the function ...
    graph["pkg.sub.d"] = set()          # ... and the one of a name of pkg.a
    assert circles(graph) == []


def test_no_import_circle():
    graph = import_graph()
    assert len(graph) > 50 and "dpgen_jax.synthesizers._base" in graph
    assert "dpgen_jax.synthesizers._plan" in graph["dpgen_jax.synthesizers._base"]
    found = circles(graph)
    assert not found, "import circles (each module imports the next):\n" + "\n".join(
        " -> ".join(c) for c in found)


def test_layers_import_only_what_lies_below():
    wrong = []
    for module, targets in sorted(import_graph().items()):
        mine = layer(module)
        for target in sorted(targets):
            theirs = layer(target)
            if theirs == mine:
                continue
            if mine in LEAVES:
                wrong.append(f"{module} -> {target} (a leaf module imports nothing of ours)")
            elif theirs in ANYTHING or (mine not in ANYTHING and theirs not in LEAVES
                                        and theirs not in MAY_IMPORT.get(mine, set())):
                wrong.append(f"{module} -> {target} ({mine or PACKAGE} may not import {theirs or PACKAGE})")
    assert not wrong, "imports against the layers of docs/architecture.md:\n" + "\n".join(wrong)


def test_the_tree_parser_reads_entries_and_continuations():
    lines = ["dpgen_jax/        the package",
             "  _leaf.py        a leaf, described",
             "                  on two lines",
             "  sub/            a subpackage",
             "    _inner.py     inner",
             "  data.json       package data",
             "docs/             pages"]
    paths = tree_paths(lines)
    assert paths == {"dpgen_jax/": "the package", "dpgen_jax/_leaf.py": "a leaf, described on two lines",
                     "dpgen_jax/sub/": "a subpackage", "dpgen_jax/sub/_inner.py": "inner",
                     "dpgen_jax/data.json": "package data", "docs/": "pages"}
    assert listed_modules(paths) == {"dpgen_jax": "dpgen_jax/", "dpgen_jax._leaf": "dpgen_jax/_leaf.py",
                                     "dpgen_jax.sub": "dpgen_jax/sub/", "dpgen_jax.sub._inner":
                                     "dpgen_jax/sub/_inner.py"}
    with pytest.raises(AssertionError, match="not an entry"):
        tree_paths(["dpgen_jax/", "   odd.py  three spaces"])


def test_the_architecture_tree_lists_every_module_and_nothing_else():
    paths = tree_paths(tree_block(DOC.read_text(encoding="utf-8")))
    listed = listed_modules(paths)
    present = modules(ROOT, PACKAGE)
    missing = sorted(set(present) - set(listed))
    extra = sorted(set(listed) - set(present))
    assert not missing and not extra, (
        f"docs/architecture.md's tree: modules not listed {missing}; listed but absent {extra}")
    absent = sorted(p for p in paths if not (ROOT / p).exists())
    assert not absent, f"docs/architecture.md's tree lists paths that do not exist: {absent}"
    undescribed = sorted(p for p, text in paths.items() if not text and p != f"{PACKAGE}/")
    assert not undescribed, f"docs/architecture.md's tree: entries without a description {undescribed}"
