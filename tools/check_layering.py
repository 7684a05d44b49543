#!/usr/bin/env python3
"""Checks the module layering of src/ against the declarations in CMakeLists.txt.

Each `pagellm_module(NAME DEPS a b ...)` there says which modules NAME may include. This script
fails (exit 1) when
  * the declared graph has a cycle, or
  * a non-test file of src/NAME/ includes "OTHER/..." where OTHER is a module that NAME does
    not depend on, directly or transitively.
Test sources (*_test.cc, *test_util*.h, test_file_writers.h) may include anything: they link
every module. Usage: check_layering.py [SOURCE_DIR]
"""
import os
import re
import sys


def declared_graph(cmake_text):
    graph = {}
    for m in re.finditer(r"^pagellm_module\(([^)]*)\)", cmake_text, re.M):
        words = m.group(1).split()
        name, deps, mode = words[0], [], None
        for w in words[1:]:
            if w in ("DEPS", "EXTERNAL"):
                mode = w
            elif mode == "DEPS":
                deps.append(w)
        graph[name] = deps
    return graph


def find_cycle(graph):
    state = {}  # 1 = on the stack, 2 = done

    def visit(node, path):
        state[node] = 1
        for dep in graph.get(node, []):
            if state.get(dep) == 1:
                return path + [node, dep]
            if state.get(dep) is None:
                cycle = visit(dep, path + [node])
                if cycle:
                    return cycle
        state[node] = 2
        return None

    for node in graph:
        if state.get(node) is None:
            cycle = visit(node, [])
            if cycle:
                return cycle
    return None


def closure(graph, node):
    seen, stack = set(), list(graph.get(node, []))
    while stack:
        dep = stack.pop()
        if dep not in seen:
            seen.add(dep)
            stack.extend(graph.get(dep, []))
    return seen


def is_test_source(name):
    return name.endswith("_test.cc") or "test_util" in name or name == "test_file_writers.h"


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(__file__))
    with open(os.path.join(root, "CMakeLists.txt")) as f:
        graph = declared_graph(f.read())
    errors = []
    cycle = find_cycle(graph)
    if cycle:
        errors.append("declared module dependencies form a cycle: " + " -> ".join(cycle))
    src = os.path.join(root, "src")
    for module in sorted(os.listdir(src)):
        directory = os.path.join(src, module)
        if not os.path.isdir(directory):
            continue
        if module not in graph:
            errors.append(f"src/{module}/ has no pagellm_module() declaration in CMakeLists.txt")
            continue
        allowed = closure(graph, module) | {module}
        for name in sorted(os.listdir(directory)):
            if not name.endswith((".h", ".cc")) or is_test_source(name):
                continue
            path = os.path.join(directory, name)
            with open(path, encoding="utf-8") as f:
                for lineno, line in enumerate(f, 1):
                    m = re.match(r'\s*#\s*include\s+"([a-z_0-9]+)/', line)
                    if m and m.group(1) in graph and m.group(1) not in allowed:
                        errors.append(f"src/{module}/{name}:{lineno}: includes {m.group(1)}/, "
                                      f"but {module} does not depend on {m.group(1)}")
    for e in errors:
        print("layering:", e, file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
