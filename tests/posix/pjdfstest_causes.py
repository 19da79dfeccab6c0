#!/usr/bin/env python3
"""pjdfstest_causes.py - group the failing assertions of a pjdfstest.sh run
by cause.

    python3 tests/posix/pjdfstest_causes.py OUT PJDFSTEST_DIR [--examples N]

OUT is the directory pjdfstest.sh wrote (its tap/*.tap.trace files: the
bash -x trace of each .t file, with the TAP lines).  Prints one line per
cause, most assertions first, with N examples (default 2, from different
.t files) as file:line, the command and what it returned.

A failure is a consequence of an earlier one when the .t file could not
create an object (symlink, mkfifo, mknod, bind, link refused) and the
failure names that object, expected a value the test had read from it (an
errno), or follows within three assertions; it is counted under
"<cause> (consequences)" of the last refused creation.  test_check
assertions (the time comparisons) carry no message: they are named by
their source line.  The grouping is a heuristic for reading the results;
the counts of pjdfstest.sh are the measure.
"""
import argparse
import collections
import glob
import os
import re

CREATE = {"create": "regular", "mkdir": "dir", "mkfifo": "fifo", "bind": "socket",
          "symlink": "symlink", "link": "hardlink"}
NAME = re.compile(r"pjdfstest_[0-9a-f]+")
TRACE = re.compile(r"^\++([^:]*):(\d+): (.*)$")
TAP = re.compile(r"^(not )?ok (\d+)(.*)$")
ERRNO = re.compile(r"E[A-Z]{3,}")


def parse_expect(cmd):
    """'expect E [-u U -g G] OP ARGS' -> (E, OP, [ARGS], 'OP ARGS') or None."""
    t = cmd.split()
    if len(t) < 3 or t[0] != "expect":
        return None
    i = 2
    while i < len(t) and t[i] in ("-u", "-g", "-U"):
        i += 2
    return t[1], (t[i] if i < len(t) else "?"), t[i + 1:], " ".join(t[2:])


def created(exp, op, args, types):
    """(name, type) an 'expect 0 OP ARGS' creates, or None."""
    if exp != "0" or not args:
        return None
    if op in ("symlink", "link"):
        return (args[1], CREATE[op]) if len(args) > 1 else None
    if op in CREATE:
        return args[0], CREATE[op]
    if op == "mknod" and len(args) > 1:
        return args[0], {"b": "block", "c": "char", "f": "fifo"}.get(args[1], "?")
    if op == "open" and len(args) > 1 and "O_CREAT" in args[1]:
        return args[0], "regular"
    if op == "rename" and len(args) > 1:
        return args[1], types.get(args[0], "?")
    return None


def short(s):
    """Random names as N, long runs of hex as their length."""
    s = NAME.sub("N", s)
    s = re.sub(r"[0-9a-f]{40,}", lambda m: "<%d chars>" % len(m.group(0)), s)
    return re.sub(r"(<\d+ chars>/){2,}", lambda m: "<%d components>/" % m.group(0).count("/"), s)


class FileState:
    """What one .t file's trace has shown so far."""

    def __init__(self):
        self.types, self.tainted = {}, set()
        self.line, self.lastcmd = 0, ""
        self.last = ("?", "?", [], "?")
        self.pending = None  # (name, type) of a creation awaiting its result
        self.prev_bad = self.chain_n = -10
        self.last_root = None


def classify(st, n, msg, srcline, where):
    """(cause, example) of the failing assertion number n."""
    exp, op, args, text = st.last
    got = msg.rsplit("got ", 1)[1] if "got " in msg else ""
    names = [a for a in args if "pjdfstest_" in a]
    types = ",".join(sorted({st.types.get(x, "?") for x in names}))
    varexp = re.match(r'expect "?\$\{', srcline) and ERRNO.search(exp)
    conseq = (any(x in st.tainted for x in names) or varexp or n - st.chain_n <= 3
              or (n - st.prev_bad <= 2 and got in ("ENOENT", "EISDIR", "EEXIST", "EADDRINUSE", "0")))
    if not msg.strip():  # test_check: no message, the source line says what
        example = "%s `%s` (ran: %s)" % (where, srcline, short(st.lastcmd))
        if ERRNO.search(st.lastcmd) and st.last_root:
            return "%s (consequences)" % st.last_root, example, None
        what = next((w for w in ("ctime", "mtime", "atime") if w in srcline), "other")
        return "test_check on %s" % what, example, None
    example = "%s `%s` -> %s" % (where, short(text), got)
    fields = args[1] if op in ("stat", "lstat", "fstat") and len(args) > 1 else ""
    deep = any(a.count("/") >= 10 for a in args)
    if deep and exp != "ENAMETOOLONG" and got in ("ENOENT", "ENAMETOOLONG"):
        return "path of PATH_MAX-1 bytes: %s of it (or mkdir -p of its parents) refused" % op, example, None
    if got == "EPERM" and op in ("symlink", "mkfifo", "mknod", "bind", "link"):
        cause = "%s -> EPERM" % (op if op != "mknod" else "mknod " + (args[1] if len(args) > 1 else "?"))
        return cause, example, cause
    if "ENAMETOOLONG" in exp + got:
        return "ENAMETOOLONG (expected %s, got %s)" % (exp, got), example, None
    if n - st.chain_n > 3 and "mode" in fields and re.match(r"\d", got) \
            and re.search(r"\b0?[246]\d{3}\b", exp) and got.split(",")[0] not in exp:
        return "setuid/setgid bit dropped (%s %s)" % (op, fields), example, None
    if conseq and st.last_root:
        return "%s (consequences)" % st.last_root, example, None
    if fields:
        return "%s %s wrong on %s" % (op, fields, types), example, None
    return "%s: expected %s, got %s (on %s)" % (op, exp, got, types), example, None


def scan(trace, tfile, name, groups):
    """Add the failing assertions of one traced .t file to groups."""
    with open(tfile, errors="replace") as fh:
        src = fh.read().split("\n")
    base = os.path.basename(tfile)
    st = FileState()
    with open(trace, errors="replace") as fh:
        for line in fh:
            line = line.rstrip("\n")
            m = TRACE.match(line)
            if m:
                if m.group(1) == base:
                    st.line, st.lastcmd = int(m.group(2)), m.group(3)
                pe = parse_expect(m.group(3))
                if pe:
                    st.last = (pe[0], pe[1], pe[2], pe[3])
                    st.pending = created(pe[0], pe[1], pe[2], st.types)
                continue
            m = TAP.match(line)
            if not m:
                continue
            if m.group(1) is None or "# TODO" in line:
                if st.pending:
                    st.types[st.pending[0]] = st.pending[1]
                    st.tainted.discard(st.pending[0])
                    st.pending = None
                continue
            n = int(m.group(2))
            if st.pending:
                st.tainted.add(st.pending[0])
                st.types[st.pending[0]] = st.pending[1]
            srcline = src[st.line - 1].strip() if 0 < st.line <= len(src) else "?"
            cause, example, root = classify(st, n, m.group(3), srcline, "%s:%d" % (name, st.line))
            st.prev_bad, st.pending = n, None
            if root:
                st.last_root = root
            if root or cause.endswith("(consequences)"):
                st.chain_n = n
            groups[cause].append(example)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", help="the directory pjdfstest.sh wrote")
    ap.add_argument("pjdfstest", help="the pjdfstest checkout")
    ap.add_argument("--examples", type=int, default=2)
    args = ap.parse_args()
    groups = collections.defaultdict(list)
    for trace in sorted(glob.glob(os.path.join(args.out, "tap", "*.tap.trace"))):
        d, f = os.path.basename(trace)[:-len(".tap.trace")].rsplit("-", 1)
        scan(trace, os.path.join(args.pjdfstest, "tests", d, f + ".t"), "%s/%s.t" % (d, f), groups)
    total = sum(len(v) for v in groups.values())
    nolink = sum(1 for v in groups.values() for e in v if not e.startswith("link/"))
    print("failing assertions: %d (%d outside link/)" % (total, nolink))
    for cause, examples in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        print("%5d  %s" % (len(examples), cause))
        shown = []
        for e in examples:
            if len(shown) < args.examples and e.split(":")[0] not in [s.split(":")[0] for s in shown]:
                shown.append(e)
        for e in shown:
            print("         e.g. %s" % e)


if __name__ == "__main__":
    main()
