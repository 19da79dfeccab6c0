#!/usr/bin/env python3
"""check_calls.py - fail when the files of one layer call each other in a circle.

Usage: scripts/check_calls.py BUILD_DIR [--graph | --doc FILE | --write-doc FILE]

For each layer directory (lib, backends, cache, vfs, src, node, flexvolume, csi) under
BUILD_DIR, reads the object files' symbol tables with nm(1): a file calls
another when it uses (U) a function or object that the other defines
(T, D, B, R).  Inside a layer the calls must go one way: the graph of
"file calls file" may have no cycle (two files calling each other, or a
longer ring).  Prints each cycle as "layer: a.c -> b.c -> a.c"; with
--graph also prints every layer's graph, one "layer/a.c -> b.c c.c" line
per file.  Ends with "calls: N cycles"; exits 1 if there is any.

--doc FILE also checks that FILE (docs/architecture.md) shows that graph:
the fenced block after its heading "## Calls inside each layer" must be
exactly the --graph lines, so the documented picture cannot drift from
the code (exit 1 and a diff if it does).  --write-doc FILE rewrites that
block.
"""
import difflib
import os
import re
import subprocess
import sys

LAYERS = ["lib", "backends", "cache", "vfs", "src", "node", "flexvolume", "csi"]
TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def symbols(obj):
    out = subprocess.run(["nm", "--defined-only", "-g", obj], capture_output=True,
                         text=True, check=True).stdout
    defined = {l.split()[-1] for l in out.splitlines() if len(l.split()) == 3}
    out = subprocess.run(["nm", "-u", obj], capture_output=True, text=True,
                         check=True).stdout
    used = {l.split()[-1] for l in out.splitlines() if l.split()}
    return defined, used


def source_name(obj):
    # "libflexvolume_a-fv_mount.o" -> "fv_mount.c"
    base = os.path.basename(obj)[:-2]
    base = re.sub(r"^(lib\w+?_a|tierfs_\w+?)-", "", base)
    return base + ".c"


def cycles(graph):
    """The strongly connected components with more than one file (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def ring(graph, comp):
    """One cycle through the component's first file, for the message."""
    start = comp[0]
    members = set(comp)
    path, seen = [start], {start}

    def dfs(v):
        for w in sorted(graph[v] & members):
            if w == start and len(path) > 1:
                return True
            if w not in seen:
                seen.add(w)
                path.append(w)
                if dfs(w):
                    return True
                path.pop()
        return False

    dfs(start)
    return path + [start]


def main():
    if len(sys.argv) < 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    build, args = sys.argv[1], sys.argv[2:]
    show = "--graph" in args
    doc = args[args.index("--doc") + 1] if "--doc" in args else None
    write = args[args.index("--write-doc") + 1] if "--write-doc" in args else None
    lines = []
    n = 0
    for layer in LAYERS:
        d = os.path.join(build, layer)
        if not os.path.isdir(d):
            continue
        # Only objects whose source is still in the tree: a build directory
        # keeps the objects of removed or renamed files.
        objs = sorted(os.path.join(d, f) for f in os.listdir(d)
                      if f.endswith(".o") and os.path.exists(os.path.join(TOP, layer, source_name(f))))
        syms = {source_name(o): symbols(o) for o in objs}
        owner = {}
        for f, (defined, _) in syms.items():
            for s in defined:
                owner.setdefault(s, f)
        graph = {f: {owner[s] for s in used if s in owner and owner[s] != f}
                 for f, (_, used) in syms.items()}
        for f in sorted(graph):
            lines.append("%s/%s -> %s" % (layer, f, " ".join(sorted(graph[f])) or "(nothing)"))
            if show:
                print(lines[-1])
        for comp in cycles(graph):
            n += 1
            print("%s: a cycle among %s: %s" % (layer, ", ".join(comp),
                                                 " -> ".join(ring(graph, comp))))
    bad = 0
    if doc or write:
        bad = doc_block(doc or write, lines, write is not None)
    print("calls: %d cycles" % n)
    return 1 if n or bad else 0


HEADING = "## Calls inside each layer"


def doc_block(path, lines, rewrite):
    """Compare (or, rewrite, replace) the fenced block under HEADING."""
    text = open(path).read()
    at = text.find("\n" + HEADING + "\n")
    start = text.find("```\n", at) + 4 if at >= 0 else -1
    end = text.find("```", start) if start >= 4 else -1
    if at < 0 or start < 4 or end < 0:
        print("%s: no fenced block under '%s'" % (path, HEADING))
        return 1
    want = "\n".join(lines) + "\n"
    if rewrite:
        open(path, "w").write(text[:start] + want + text[end:])
        return 0
    have = text[start:end]
    if have == want:
        return 0
    print("%s: the call graph under '%s' is not the code's (scripts/check_calls.py "
          "BUILD_DIR --write-doc %s):" % (path, HEADING, path))
    for l in difflib.unified_diff(have.splitlines(), want.splitlines(), "documented", "built",
                                  lineterm=""):
        print("    " + l)
    return 1


if __name__ == "__main__":
    sys.exit(main())
