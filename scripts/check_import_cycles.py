"""Fail on any circle of imports between rmspec's modules; run by `make lint`.

import-linter's `acyclic_siblings` contract (pyproject.toml) forbids circles between siblings at
every depth, e.g. rmspec.plan <-> rmspec.launch or train.run <-> train.finish. It does not see a
circle through a package and its own module (rmspec.spec, the __init__, importing rmspec.spec.x,
which imports back from rmspec.spec), and, like every contract there, it skips imports under
`if TYPE_CHECKING:`. This script reads the same graph (grimp, import-linter's own library) with
every import statement in it: at the top of a module, inside a function, and under
`if TYPE_CHECKING:` (a type-only import still ties the two modules together: each must be read to
understand the other, and one moved out of the guard is a circle at run time). It reports every
strongly connected set of modules, with one circle in each spelled out.

Usage: python scripts/check_import_cycles.py [PACKAGE]   (default rmspec; exit 1 on a circle)
"""

from __future__ import annotations

import sys
from collections import deque

import grimp


def import_graph(package: str) -> dict[str, set[str]]:
    """Module -> the package's modules it imports anywhere in its text (functions and TYPE_CHECKING too)."""
    graph = grimp.build_graph(package, exclude_type_checking_imports=False, cache_dir=None)
    modules = {m for m in graph.modules if m == package or m.startswith(package + ".")}
    return {m: graph.find_modules_directly_imported_by(m) & modules for m in modules}


def strongly_connected(edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative (no recursion limit); sets of more than one module, or one
    module that imports itself."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            for nxt in successors:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(edges[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1 or node in edges[node]:
                        found.append(sorted(component))
    return sorted(found)


def one_circle(edges: dict[str, set[str]], component: list[str]) -> list[str]:
    """The shortest circle through the component's first module (breadth-first, inside it)."""
    start, members = component[0], set(component)
    previous: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for nxt in sorted(edges[node] & members):
            if nxt == start:
                path = [node]
                while path[-1] != start:
                    path.append(previous[path[-1]])
                return [*reversed(path), start]
            if nxt not in previous:
                previous[nxt] = node
                queue.append(nxt)
    return [start, start]


def main(argv: list[str]) -> int:
    package = argv[1] if len(argv) > 1 else "rmspec"
    edges = import_graph(package)
    components = strongly_connected(edges)
    for component in components:
        print(f"import circle among {len(component)} modules: " + " -> ".join(one_circle(edges, component)))
    if components:
        print(f"{len(components)} import circle(s) in {package}; imports must point one way")
        return 1
    print(f"no import circle among {len(edges)} modules of {package}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
