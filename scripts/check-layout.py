#!/usr/bin/env python3
"""The layout rules ARCHITECTURE.md states, checked over the sources:

1. No non-test Rust source file is over 700 lines (a file whose name is
   `tests.rs`, or that lives under a `tests/` folder, is test code; so is
   everything from a file's `#[cfg(test)]` module on).
2. No two modules of a crate import each other, directly or in a loop.
   A module is one file. It imports another when it names it in a `use`
   or in a path (`crate::hub::Hub`, `super::Connection`,
   `self::session::prepare`); naming a child in `mod child;` is not an
   import. Each cycle found is printed with the files on it.

Exit status 1 on any violation. Run from the repository root:
`scripts/check-layout.py` (CI runs it from scripts/test.sh).
"""

import os
import re
import sys

MAX_LINES = 700
CRATES = [
    "protocol", "store", "store-scylla", "store-remote", "blob", "nats",
    "plugin-host", "push", "worker", "gateway", "client", "switchboard", "fuzz",
]

PATH = re.compile(r"\b(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)+)")
BARE = re.compile(r"(?<![:\w])([a-z_][a-z0-9_]*)::")
USE_GROUP = re.compile(r"\buse\s+(crate|super|self)::\{([^;]*)\}\s*;", re.S)


def module_of(src, path):
    """The module path of a file under `src` (`[]` for the crate root)."""
    rel = os.path.relpath(path, src)[:-3].split(os.sep)
    if rel[-1] in ("lib", "main") and len(rel) == 1:
        return []
    if rel[-1] == "mod":
        rel = rel[:-1]
    return rel


def strip_comments_and_strings(text):
    """`text` with comments removed and every string and character
    literal emptied, by one pass that knows which is which."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        elif c == "r" and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")) and re.match(r'r#*"', text[i:]):
            hashes = len(re.match(r"r(#*)", text[i:]).group(1))
            end = text.find('"' + "#" * hashes, i + 2 + hashes)
            out.append('""')
            i = n if end < 0 else end + 1 + hashes
        elif c == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            out.append('""')
            i += 1
        elif c == "'" and re.match(r"'(?:[^'\\]|\\.[^']*)'", text[i:]):
            m = re.match(r"'(?:[^'\\]|\\.[^']*)'", text[i:])
            out.append("' '")
            i += m.end()
        else:
            out.append(c)
            i += 1
    return "".join(out)


def code_of(text):
    """The text without comments, strings and the test module; inside an
    inline module (`mod inner { ... }`), `super::` names the file's own
    module, so it is written `self::` there."""
    cut = re.search(r"#\[cfg\(test\)\]\s*mod\s+tests\b", text)
    if cut:
        text = text[: cut.start()]
    text = strip_comments_and_strings(text)
    out, at = [], 0
    for m in re.finditer(r"\bmod\s+[A-Za-z_][A-Za-z0-9_]*\s*\{", text):
        if m.start() < at:
            continue
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        out.append(text[at:m.end()])
        out.append(text[m.end():i].replace("super::", "self::"))
        at = i
    out.append(text[at:])
    return "".join(out)


def resolve(modules, here, base, rest, aliases=None):
    """The module a path names: the longest known module prefix of it,
    through the names a module re-exports (`pub use hub::Hub` in lib.rs
    makes `crate::Hub` name `hub`)."""
    if base == "crate":
        parts = []
    elif base == "super":
        parts = here[:-1]
    else:
        parts = list(here)
    names = [n for n in rest.split("::") if n]
    while names and names[0] == "super":
        parts = parts[:-1]
        names = names[1:]
    full = parts + names
    for n in range(len(full), -1, -1):
        prefix = tuple(full[:n])
        if prefix in modules:
            if aliases and n < len(full) and (prefix, full[n]) in aliases:
                return aliases[(prefix, full[n])]
            return prefix
    return None


REEXPORT = re.compile(r"\bpub(?:\([a-z]+\))?\s+use\s+([^;]+);")


def reexports(modules, here, text):
    """(module, name) -> the module that defines `name`, for the names
    `here` re-exports."""
    out = {}
    for body in REEXPORT.findall(code_of(text)):
        body = " ".join(body.split())
        m = re.match(r"(?:(crate|super|self)::)?((?:[A-Za-z_][A-Za-z0-9_]*::)*)(\{.*\}|[A-Za-z_][A-Za-z0-9_]*)", body)
        if not m:
            continue
        base, prefix, names = m.group(1) or "self", m.group(2), m.group(3)
        target = resolve(modules, here, base, "::" + prefix.rstrip(":"))
        if target is None:
            continue
        for name in re.findall(r"[A-Za-z_][A-Za-z0-9_]*(?=\s*(?:,|\}|$))", names):
            out[(tuple(here), name)] = target
    return out


def imports(modules, here, text, aliases):
    code = code_of(text)
    found = set()
    for base, group in USE_GROUP.findall(code):
        for item in re.split(r",", group):
            item = item.strip().split(" as ")[0].strip()
            if item and item != "self":
                found.add(resolve(modules, here, base, "::" + item.split("::{")[0], aliases))
    for base, rest in PATH.findall(code):
        found.add(resolve(modules, here, base, rest, aliases))
    if re.search(r"\buse\s+super::\*", code):
        found.add(tuple(here[:-1]))
    # A child module is in scope by its name alone (`hub::Hub` in lib.rs).
    for name in set(BARE.findall(code)):
        child = tuple(here) + (name,)
        if child in modules:
            found.add(child)
    found.discard(None)
    found.discard(tuple(here))
    return found


def cycles(graph):
    """Every strongly connected group of more than one module."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
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
                out.append(sorted(group))

    sys.setrecursionlimit(10000)
    for v in graph:
        if v not in index:
            visit(v)
    return out


def main():
    problems = []
    for crate in CRATES:
        src = os.path.join(crate, "src")
        files = {}
        for root, _, names in os.walk(src):
            for name in names:
                if name.endswith(".rs"):
                    path = os.path.join(root, name)
                    files[tuple(module_of(src, path))] = path
        texts = {m: open(p, encoding="utf-8").read() for m, p in files.items()}
        aliases = {}
        for module, text in texts.items():
            aliases.update(reexports(files, list(module), text))
        graph = {}
        for module, path in sorted(files.items()):
            text = texts[module]
            is_test = os.path.basename(path) == "tests.rs" or os.sep + "tests" + os.sep in path
            if not is_test:
                lines = code_of_lines = text.split("\n")
                cut = re.search(r"#\[cfg\(test\)\]\s*mod\s+tests\b", text)
                counted = text[: cut.start()].count("\n") if cut else len(code_of_lines)
                if counted > MAX_LINES:
                    problems.append(f"{path}: {counted} lines of non-test code (at most {MAX_LINES})")
            graph[module] = imports(files, list(module), text, aliases)
        for group in cycles(graph):
            names = [files[m] for m in group]
            problems.append(f"{crate}: modules that import each other: {', '.join(names)}")
            if "--why" in sys.argv:
                for m in group:
                    into = sorted(files[t] for t in graph[m] if t in group)
                    problems.append(f"    {files[m]} -> {', '.join(into)}")
    for p in problems:
        print(p)
    if problems:
        sys.exit(1)
    print(f"layout: no file over {MAX_LINES} lines of non-test code, no import cycles")


if __name__ == "__main__":
    main()
