"""Shared by the structure tests of the servers, the lab and the clients: what a module imports, and that an import
graph has no cycle."""

from __future__ import annotations

import ast
from pathlib import Path


def assert_acyclic(imports: dict[str, set[str]]) -> None:
    """Fails naming the first cycle found (depth-first, in sorted order) among `imports` (module -> modules it
    imports at load)."""
    done: set[str] = set()

    def visit(module: str, path: tuple[str, ...]) -> None:
        if module in path:
            raise AssertionError(f"import cycle: {' → '.join(path[path.index(module) :] + (module,))}")
        if module in done:
            return
        for target in sorted(imports[module]):
            visit(target, (*path, module))
        done.add(module)

    for module in sorted(imports):
        visit(module, ())


def imported_names(path: Path, package: str, *, at_load_only: bool = False) -> set[str]:
    """What the module at `path`, in `package`, imports: each module's absolute name and each `module.name` it
    takes from one, relative imports resolved. With `at_load_only`, only the imports run when it loads (none inside
    a function or under `TYPE_CHECKING`)."""
    tree = ast.parse(path.read_text())
    statements = ast.walk(tree) if not at_load_only else (
        statement
        for node in tree.body
        if not (isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test))
        for statement in (node.body if isinstance(node, ast.Try) else [node])
    )  # fmt: skip
    names: set[str] = set()
    for node in statements:
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            parts = package.split(".")
            base = parts[: len(parts) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            names |= {module, *(f"{module}.{alias.name}" for alias in node.names)}
    return names


def module_names(root: Path) -> dict[str, Path]:
    """Every module under the package directory `root` by its dotted name (a package by its own name)."""
    named = {}
    for path in root.rglob("*.py"):
        parts = path.relative_to(root.parent).with_suffix("").parts
        named[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return named


def package_of(name: str, path: Path) -> str:
    """The package a module's relative imports start from: itself for an `__init__.py`, else its parent."""
    return name if path.name == "__init__.py" else name.rpartition(".")[0]
