"""Shared by the structure tests of the servers' package and of the lab: an import graph has no cycle."""

from __future__ import annotations


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
