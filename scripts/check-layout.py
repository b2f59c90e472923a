#!/usr/bin/env python3
"""The layout rules ARCHITECTURE.md states, checked over the sources:

1. No non-test Rust source file is over 700 lines (a file whose name is
   `tests.rs`, or that lives under a `tests/` folder, is test code; so is
   the body of an inline `#[cfg(test)] mod name { ... }`; a declaration
   `#[cfg(test)] mod tests;` is one line like any other).
2. No two modules of a crate import each other, directly or in a loop.
   A module is one file. It imports another when it names it in a `use`
   or in a path (`crate::hub::Hub`, `super::Connection`,
   `self::session::prepare`); naming a child in `mod child;` is not an
   import. Each cycle found is printed with the files on it.

Every crate of the repository is checked: each folder with a
`Cargo.toml` and a `src/` (the plugins' workspace included), and the
integration tests' binary (`tests/tests/it`).

Exit status 1 on any violation. Run from the repository root:
`scripts/check-layout.py` (CI runs it from scripts/test.sh).
"""

import os
import re
import sys

MAX_LINES = 700
SKIP = {"target", "node_modules", ".git", ".tools", ".venv"}


def crate_roots():
    """The source trees to check: every crate's `src/`, and each folder
    of `tests/` that is a test binary made of modules."""
    roots = []
    for root, dirs, names in os.walk("."):
        dirs[:] = sorted(d for d in dirs if d not in SKIP and not d.startswith("."))
        if "Cargo.toml" in names:
            for sub in ("src",):
                if os.path.isdir(os.path.join(root, sub)):
                    roots.append(os.path.normpath(os.path.join(root, sub)))
            tests = os.path.join(root, "tests")
            if os.path.isdir(tests):
                for d in sorted(os.listdir(tests)):
                    if os.path.isfile(os.path.join(tests, d, "main.rs")):
                        roots.append(os.path.normpath(os.path.join(tests, d)))
    return roots

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
            start, depth, i = i, 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
            out.append("\n" * text.count("\n", start, i))
        elif c == "r" and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")) and re.match(r'r#*"', text[i:]):
            hashes = len(re.match(r"r(#*)", text[i:]).group(1))
            end = text.find('"' + "#" * hashes, i + 2 + hashes)
            stop = n if end < 0 else end + 1 + hashes
            out.append('""' + "\n" * text.count("\n", i, stop))
            i = stop
        elif c == '"':
            start, i = i, i + 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            i += 1
            out.append('""' + "\n" * text.count("\n", start, i))
        elif c == "'" and re.match(r"'(?:[^'\\]|\\.[^']*)'", text[i:]):
            m = re.match(r"'(?:[^'\\]|\\.[^']*)'", text[i:])
            out.append("' '")
            i += m.end()
        else:
            out.append(c)
            i += 1
    return "".join(out)


# `#[cfg(test)]` (or `all(test, ...)`/`any(test, ...)`), other attributes,
# then an inline module: `mod name {`. A declaration `mod name;` does not
# match: its file is read on its own.
TEST_MODULE = re.compile(
    r"#\[cfg\((?:test|(?:all|any)\(\s*test\b[^\]]*\))\)\]\s*(?:#\[[^\]]*\]\s*)*"
    r"(?:pub(?:\([^)]*\))?\s+)?mod\s+[A-Za-z_][A-Za-z0-9_]*\s*\{"
)


def test_module_spans(code):
    """(start, end) of every inline test module in `code` (comments and
    strings already emptied), attribute to closing brace."""
    spans, at = [], 0
    for m in TEST_MODULE.finditer(code):
        if m.start() < at:
            continue
        depth, i = 1, m.end()
        while i < len(code) and depth:
            depth += {"{": 1, "}": -1}.get(code[i], 0)
            i += 1
        spans.append((m.start(), i))
        at = i
    return spans


def without_test_modules(code):
    """`code` with every inline test module blanked to its newlines."""
    out, at = [], 0
    for start, end in test_module_spans(code):
        out.append(code[at:start])
        out.append("\n" * code.count("\n", start, end))
        at = end
    out.append(code[at:])
    return "".join(out)


def non_test_lines(text):
    """Lines of a file outside its inline test modules (the stripped
    text keeps every newline, so its line numbers are the file's)."""
    code = strip_comments_and_strings(text)
    total = len(text.rstrip("\n").split("\n"))
    inside = sum(code.count("\n", start, end) + 1 for start, end in test_module_spans(code))
    return total - inside


def code_of(text):
    """The text without comments, strings and test modules; inside an
    inline module (`mod inner { ... }`), `super::` names the file's own
    module, so it is written `self::` there."""
    text = without_test_modules(strip_comments_and_strings(text))
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


def check(roots):
    """The problems of the source trees `roots`."""
    problems = []
    for src in roots:
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
            is_test = os.path.basename(path) == "tests.rs" or "tests" in path.split(os.sep)[:-1]
            if not is_test:
                counted = non_test_lines(text)
                if counted > MAX_LINES:
                    problems.append(f"{path}: {counted} lines of non-test code (at most {MAX_LINES})")
            graph[module] = imports(files, list(module), text, aliases)
        for group in cycles(graph):
            names = [files[m] for m in group]
            problems.append(f"{src}: modules that import each other: {', '.join(names)}")
            if "--why" in sys.argv:
                for m in group:
                    into = sorted(files[t] for t in graph[m] if t in group)
                    problems.append(f"    {files[m]} -> {', '.join(into)}")
    return problems


def self_test():
    """The check on made-up trees: what it must find, and must not."""
    import tempfile

    def tree(files):
        root = tempfile.mkdtemp()
        for name, text in files.items():
            path = os.path.join(root, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        return root

    body = "fn f() {}\n" * MAX_LINES
    cases = [
        # A test declaration near the top hides nothing after it.
        ("declaration", {"lib.rs": "#[cfg(test)]\nmod tests;\n" + body}, ["lines of non-test code"]),
        # An inline test module's body is not counted, what follows it is.
        ("inline", {"lib.rs": body[: len(body) // 2] + "#[cfg(test)]\nmod tests {\n" + body + "}\n"}, []),
        ("after inline", {"lib.rs": "#[cfg(test)]\nmod tests {\n}\n" + body + "fn g() {}\n"}, ["lines of non-test code"]),
        # Braces in strings and comments do not end a test module.
        ("braces", {"lib.rs": '#[cfg(test)]\nmod tests {\n  const S: &str = "}";\n  // }\n' + body + "}\n"}, []),
        # A child that globs its parent, which names the child.
        ("glob", {"lib.rs": "mod a;\nfn f() { a::g() }\n", "a.rs": "use super::*;\npub fn g() {}\n"}, ["import each other"]),
        # Through a re-export: lib.rs re-exports `b::B`, `a` names `crate::B`.
        ("re-export", {"lib.rs": "mod a;\nmod b;\npub use b::B;\n", "a.rs": "use crate::B;\npub fn g() {}\n", "b.rs": "pub struct B;\nfn h() { crate::a::g() }\n"}, ["import each other"]),
        ("one way", {"lib.rs": "mod a;\nmod b;\n", "a.rs": "use crate::b::B;\n", "b.rs": "pub struct B;\n"}, []),
    ]
    failed = []
    for name, files, expected in cases:
        found = check([tree(files)])
        ok = all(any(e in p for p in found) for e in expected) and (expected or not found)
        if not ok:
            failed.append(f"self-test {name}: expected {expected}, found {found}")
    return failed


def main():
    problems = self_test()
    roots = crate_roots()
    problems += check(roots)
    for p in problems:
        print(p)
    if problems:
        sys.exit(1)
    print(f"layout: {len(roots)} source trees, no file over {MAX_LINES} lines of non-test code, no import cycles")


if __name__ == "__main__":
    main()
