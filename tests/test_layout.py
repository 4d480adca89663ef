"""The package's shape: no import circle, the core apart from the host side, modules of
a readable size, and README's "Layout" naming every module (read as text: nothing is
imported or compiled)."""

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "jaxbandit"
HOST = ("jaxbandit.config", "jaxbandit.sweep", "jaxbandit.group_run", "jaxbandit.io", "jaxbandit.cli", "jaxbandit.__main__",
        "jaxbandit.plotting", "jaxbandit.shards", "jaxbandit.distributed", "jaxbandit.compile_cache",
        "jaxbandit.files", "jaxbandit.summary", "jaxbandit.comparison")  # fmt: skip
ANALYSIS = ("pandas", "xarray", "networkx")  # the optional [analysis] packages
MAX_LINES = 500


def _modules() -> dict:
    """``{dotted name: path}`` of every module of the package."""
    modules = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(REPO).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def _imports(path: Path, modules: dict) -> set:
    """The package's modules that ``path`` imports at module level."""
    found = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("jaxbandit"):
            found |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
    return found & set(modules)


def _host(name: str) -> bool:
    return any(name == h or name.startswith(h + ".") for h in HOST)


def test_no_import_circle_and_the_core_never_imports_the_host_side():
    modules = _modules()
    graph = {name: _imports(path, modules) - {name, "jaxbandit"} for name, path in modules.items()}
    for name, imported in graph.items():
        if name != "jaxbandit" and not _host(name):
            assert not [m for m in imported if _host(m)], f"core module {name} imports the host side"
    done, active = set(), []

    def visit(name):
        active.append(name)
        for other in sorted(graph[name]):
            assert other not in active, f"import circle: {' -> '.join(active[active.index(other):] + [other])}"
            if other not in done:
                visit(other)
        active.pop()
        done.add(name)

    for name in sorted(graph):
        if name not in done:
            visit(name)


def test_no_module_imports_the_optional_analysis_packages():
    """pandas, xarray and networkx are imported only where a view is made."""
    for path in PACKAGE.rglob("*.py"):
        for node in ast.parse(path.read_text()).body:
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            assert not [n for n in names if n.split(".")[0] in ANALYSIS], f"{path.name} imports {names}"


def test_no_module_is_over_500_lines():
    long = {str(p.relative_to(REPO)): n for p in PACKAGE.rglob("*.py") if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long


def test_the_readme_layout_names_every_module():
    text = (REPO / "README.md").read_text()
    layout = text[text.index("## Layout"):]
    layout = layout[: layout.index("\n## ", 1)] if "\n## " in layout[1:] else layout
    listed = set(re.findall(r"jaxbandit/([\w/]+\.py)", layout))
    # a folder's files are listed as "dir/  a.py (...), b.py (...)"
    for folder, files in re.findall(r"jaxbandit/(\w+)/\s+(.*?)(?=\njaxbandit/|\nbenchmarks/)", layout, flags=re.S):
        listed |= {f"{folder}/{name}" for name in re.findall(r"(\w+\.py)", files)}
    on_disk = {str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")}
    folders = {f"{p.parent.relative_to(PACKAGE)}/" for p in PACKAGE.rglob("*/__init__.py")}
    named_folders = {f"{f}/" for f in re.findall(r"jaxbandit/(\w+)/", layout)}
    assert folders <= named_folders
    missing = {f for f in on_disk if f not in listed and f"{Path(f).parent}/" not in named_folders}
    assert not missing, f"README's Layout does not name {sorted(missing)}"
    assert not {f for f in listed if f not in on_disk}, "README's Layout names files that do not exist"
