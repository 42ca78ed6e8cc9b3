"""Module import cycles in xlake's crates (issue 39): no module imports another that
imports it back.

    python3 .ci/module_cycles.py [crate_dir ...]     (default: crates/*/ and the binary)

A module is a file (`lib.rs`/`main.rs` the crate root, `a.rs` or `a/mod.rs` the module
`a`, `a/b.rs` the module `a::b`). It imports another when its code (test modules and
comments left out) names a path into it: `use crate::a::X;`, `use super::b::{Y, Z};`,
`crate::a::f()`. A path into a module's own ancestors or descendants is structure (a
parent declaring and re-exporting its children, a child using its parent's items), not
an import back, and is not counted. Exit 1 and print each cycle, with one line of code
per import in it, when there is any.

Why not `cargo modules dependencies --acyclic`: cargo-modules 0.27 (the newest for rustc
1.95) checks its graph of items, where every type and its own constructor form a cycle,
and it places a method where its type is declared, not in the file whose `impl` block
holds it.
"""

from __future__ import annotations

import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
PATH = re.compile(rf"\b(crate|super|self)((?:::{IDENT})+)")
USE = re.compile(r"\buse\s+((?:crate|super|self)\b[^;]*);", re.DOTALL)


def module_files(src: pathlib.Path) -> dict[tuple[str, ...], pathlib.Path]:
    """Module path (segments under the crate root) by file."""
    found = {}
    for f in src.rglob("*.rs"):
        parts = list(f.relative_to(src).with_suffix("").parts)
        if parts[-1] in ("lib", "main", "mod"):
            parts.pop()
        found[tuple(parts)] = f
    return found


def code_of(f: pathlib.Path) -> str:
    """The file's text without comment lines and without its test module."""
    text = f.read_text()
    cut = re.search(r"^#\[cfg\(test\)\]\s*\n\s*mod tests\b", text, re.MULTILINE)
    if cut:
        text = text[: cut.start()]
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("//"))


def expand(tree: str) -> list[str]:
    """`a::{b, c::{d, e}}` as `a::b`, `a::c::d`, `a::c::e`."""
    tree = re.sub(r"\s+", "", tree)
    if "{" not in tree:
        return [tree]
    head, rest = tree.split("{", 1)
    inner = rest[: rest.rfind("}")]
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(inner):
        depth += ch == "{"
        depth -= ch == "}"
        if ch == "," and depth == 0:
            parts.append(inner[start:i])
            start = i + 1
    parts.append(inner[start:])
    return [p for part in parts if part for p in expand(head + part)]


def target(here: tuple[str, ...], path: str, modules: set, reexports: dict) -> tuple | None:
    """The deepest module `path` (starting `crate`, `super` or `self`) leads into, through
    the names modules re-export (`pub use a::X;` in `lib.rs` makes `crate::X` lead into
    `a`)."""
    segs = path.split("::")
    at = list(here)
    if segs[0] == "crate":
        at = []
    segs = segs[1:] if segs[0] in ("crate", "self") else segs
    while segs and segs[0] == "super":
        if not at:
            return None
        at.pop()
        segs = segs[1:]
    for s in segs:
        if tuple(at + [s]) in modules:
            at.append(s)
            continue
        via = reexports.get(tuple(at), {}).get(s)
        return via if via is not None else tuple(at)
    return tuple(at)


def reexports_of(files: dict, modules: set) -> dict[tuple, dict[str, tuple]]:
    """For each module, the names its `pub use` (of any visibility) re-exports, with the
    module each leads into (re-exports of re-exports followed a few times)."""
    raw: dict[tuple, dict[str, str]] = {}
    for here, f in files.items():
        for u in re.findall(r"\bpub(?:\([^)]*\))?\s+use\s+([^;]+);", code_of(f)):
            for p in expand(u):
                last = p.split("::")[-1]
                alias = re.split(r"\bas\b", last)[-1].strip() if " as " in p else last
                path = p if p.split("::")[0] in ("crate", "super", "self") else "self::" + p
                raw.setdefault(here, {})[alias] = re.split(r"\s+as\s+", path)[0]
    resolved: dict[tuple, dict[str, tuple]] = {}
    for _ in range(4):
        for here, names in raw.items():
            for alias, path in names.items():
                to = target(here, path, modules, resolved)
                if to is not None:
                    resolved.setdefault(here, {})[alias] = to
    return resolved


def imports(src: pathlib.Path) -> dict[tuple, dict[tuple, str]]:
    """For each module, the modules it imports, each with one line that does."""
    files = module_files(src)
    modules = set(files)
    reexports = reexports_of(files, modules)
    graph: dict[tuple, dict[tuple, str]] = {m: {} for m in modules}
    for here, f in files.items():
        code = code_of(f)
        paths = [p for u in USE.findall(code) for p in expand(u)]
        paths += [m.group(0) for m in PATH.finditer(USE.sub("", code))]
        for p in paths:
            to = target(here, p, modules, reexports)
            if to is None or to == here:
                continue
            if to[: len(here)] == here or here[: len(to)] == to:
                continue
            graph[here].setdefault(to, f"{f.relative_to(ROOT)}: {p}")
    return graph


def cycles(graph: dict[tuple, dict[tuple, str]]) -> list[list[tuple]]:
    """Strongly connected groups of more than one module (Tarjan)."""
    index: dict = {}
    low: dict = {}
    stack: list = []
    on: set = set()
    found: list = []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def name(crate: str, module: tuple) -> str:
    return "::".join((crate, *module))


def main() -> int:
    dirs = [pathlib.Path(d).resolve() for d in sys.argv[1:]] or [*sorted(ROOT.glob("crates/*")), ROOT]
    bad = 0
    for d in dirs:
        src = d / "src"
        if not src.is_dir():
            continue
        crate = d.resolve().name.replace("-", "_") if d.resolve() != ROOT else "xlake"
        graph = imports(src)
        groups = cycles(graph)
        edges = sum(len(t) for t in graph.values())
        print(f"{crate}: {len(graph)} modules, {edges} imports, {len(groups)} cycles")
        for group in groups:
            bad += 1
            print("  cycle: " + ", ".join(name(crate, m) for m in group))
            for a in group:
                for b, line in sorted(graph[a].items()):
                    if b in group:
                        print(f"    {name(crate, a)} -> {name(crate, b)}  ({line})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
