#!/usr/bin/env python3
"""report.py RUN_DIR — turn bench/run.sh's results into a Markdown report.

Reads RUN_DIR/meta.tsv ("key<TAB>value") and RUN_DIR/results.tsv
("fs<TAB>workload<TAB>status<TAB>files<TAB>bytes<TAB>secs<TAB>rep", status
ok, fail or skip; one line per repetition) and prints the report on stdout.
Every number in the tables is the median over the repetitions.
"""
import os
import statistics
import sys

MIB = 1024 * 1024
PEERS = ["s3fs", "rclone", "tierfs"]

# workload id, label, baseline fs, baseline label, kind
WORKLOADS = [
    ("walk", "walk + stat every file, fresh mount", "local",
     "local copy, page cache dropped", "time"),
    ("big_cold", "{big} sequential read, cold (fresh mount, empty cache)", "curl",
     "one `curl` GET", "seq"),
    ("big_warm", "{big} sequential read, warm (page cache dropped, FS cache kept)",
     "local", "local copy, page cache dropped", "seq"),
    ("small_cold", "{n} small files, 8 threads, shuffled, cold", "curl",
     "8 parallel `curl` GETs", "epoch"),
    ("small_warm", "{n} small files, 8 threads, shuffled, warm (page cache dropped)",
     "local", "local copy, page cache dropped", "epoch"),
    ("small_hot", "{n} small files, 8 threads, shuffled, hot (nothing dropped)",
     "local", "local copy, hot", "epoch"),
]


def load_meta(run):
    """RUN_DIR/meta.tsv as a dict (also used by write_report.py)."""
    meta = {}
    with open(os.path.join(run, "meta.tsv")) as f:
        for line in f:
            k, _, v = line.rstrip("\n").partition("\t")
            meta[k] = v
    return meta


def header(meta, title):
    """The report's title and its command/commit/machine/disk/server lines
    (also used by write_report.py)."""
    return [
        "## %s, %s" % (title, meta.get("date", "?")),
        "",
        "- command: `%s`" % meta.get("command", "?"),
        "- commit: %s; total run time %s" % (meta.get("commit", "?"),
                                              meta.get("elapsed", "?")),
        "- machine: %s cores, %s RAM, kernel %s, CPU %s" % (
            meta.get("nproc"), meta.get("ram"), meta.get("kernel"), meta.get("cpu")),
        "- disk of the caches (%s): %s" % (meta.get("workdir"), meta.get("disk")),
        "- S3 server: %s on 127.0.0.1 (%s)" % (meta.get("server"),
                                                meta.get("server_version")),
        "- CPUs pinned (--pin): %s" % meta.get("pinned", "no"),
    ]


def table(w, head, rows):
    """Write a Markdown table and a blank line through w (also used by
    write_report.py)."""
    w("| " + " | ".join(head) + " |")
    w("|" + "---|" * len(head))
    for row in rows:
        w("| " + " | ".join(row) + " |")
    w("")


def load(run):
    meta, raw = load_meta(run), {}
    path = os.path.join(run, "results.tsv")
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                fs, wl, status, files, nbytes, secs, _rep = line.rstrip("\n").split("\t")
                raw.setdefault((fs, wl), []).append(
                    {"status": status, "files": int(files), "bytes": int(nbytes),
                     "secs": float(secs)})
    res = {}
    for key, runs in raw.items():
        good = [r for r in runs if r["status"] == "ok"]
        if not good:
            res[key] = dict(runs[0], nfail=len(runs), n=len(runs))
            continue
        # files and bytes are the same in every repetition: the median time
        # gives the median speed
        res[key] = {"status": "ok", "files": good[0]["files"],
                    "bytes": good[0]["bytes"],
                    "secs": statistics.median(r["secs"] for r in good),
                    "nfail": len(runs) - len(good), "n": len(runs)}
    return meta, raw, res


def speed(r, kind):
    """A 'bigger is better' number for ratios."""
    if kind == "time":
        return 1.0 / r["secs"] if r["secs"] > 0 else float("inf")
    if kind == "epoch":
        return r["files"] / r["secs"] if r["secs"] > 0 else float("inf")
    return r["bytes"] / r["secs"] if r["secs"] > 0 else float("inf")


def absolute(r, kind):
    if kind == "time":
        return ("%.2f s" if r["secs"] >= 1 else "%.3f s") % r["secs"]
    mibs = r["bytes"] / MIB / r["secs"] if r["secs"] > 0 else float("inf")
    if kind == "epoch":
        return "%.0f files/s · %.0f MiB/s" % (r["files"] / r["secs"], mibs)
    return "%.0f MiB/s (%.2f s)" % (mibs, r["secs"])


def ok(r):
    return r is not None and r["status"] == "ok"


def cell(r, kind, base=None):
    if r is None:
        return "—"
    if r["status"] == "skip":
        return "skipped"
    if r["status"] != "ok":
        return "**failed**"
    s = absolute(r, kind)
    if r.get("nfail"):
        s += " **%d of %d runs failed**" % (r["nfail"], r["n"])
    if ok(base):
        s += " (%.2f×)" % (speed(r, kind) / speed(base, kind))
    return s


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    meta, raw, res = load(sys.argv[1])
    n = meta.get("small", "?")
    big = "%s MiB" % meta.get("big_mib", "?")
    peers = [p for p in PEERS if p in meta.get("fs", "").split()]
    out = []
    w = out.append

    out.extend(header(meta, "tierfs benchmark"))
    w("- dataset: %s files of 90–130 KiB (%s MiB) in 30 directories + one %s object"
      % (n, meta.get("small_mib", "?"), big))
    if peers:
        w("- peers: %s" % "; ".join(meta.get("peer_" + p, p) for p in peers))
    else:
        w("- peers: none (baselines only)")
    if meta.get("warm_mode"):
        w("- warm runs: %s" % meta["warm_mode"])
    w("")
    w("Medians of %s repetitions. Ratios in parentheses are speed relative to "
      "the row's baseline (1.00× = as fast as the baseline; for the walk, "
      "baseline time / FS time)." % meta.get("reps", "?"))
    w("")
    w("| " + " | ".join(["workload", "baseline"] + peers) + " |")
    w("|---|---|" + "---|" * len(peers))
    for wl, label, bfs, blabel, kind in WORKLOADS:
        base = res.get((bfs, wl))
        rows = [res.get((p, wl)) for p in peers]
        if base is None and all(r is None for r in rows):
            continue
        bcell = ("%s: %s" % (blabel, cell(base, kind))) if base else "—"
        w("| " + " | ".join([label.format(n=n, big=big), bcell] +
                            [cell(r, kind, base) for r in rows]) + " |")
    w("")

    # the cold read against every way of taking the object in the same run
    gets = [("curl", "one `curl` GET to /dev/null"),
            ("curl-pipe", "one `curl` GET piped to `dd`"),
            ("curl-file", "one `curl` GET into a local file")]
    gets = [(g, label) for g, label in gets if ok(res.get((g, "big_cold")))]
    if len(gets) > 1 and peers:
        w("Cold sequential read against each baseline (the GET to /dev/null "
          "hands its bytes to nobody; the other two hand them to a reader "
          "or a disk, as every filesystem must):")
        w("")
        w("| baseline | time | " + " | ".join(peers) + " |")
        w("|---|---|" + "---|" * len(peers))
        for g, label in gets:
            base = res[(g, "big_cold")]
            cells = []
            for p in peers:
                r = res.get((p, "big_cold"))
                cells.append("%.2f×" % (speed(r, "seq") / speed(base, "seq")) if ok(r) else "—")
            w("| %s | %s | %s |" % (label, absolute(base, "seq"), " | ".join(cells)))
        w("")

    pairs = [(a, b) for a, b in (("tierfs", "rclone"), ("tierfs", "s3fs"),
                                 ("rclone", "s3fs")) if a in peers and b in peers]
    if pairs:
        w("Between peers (speed-up: > 1 means the first is faster; "
          "for the walk, the second's time / the first's):")
        w("")
        w("| workload | " + " | ".join("%s / %s" % p for p in pairs) + " |")
        w("|---|" + "---|" * len(pairs))
        for wl, label, _, _, kind in WORKLOADS:
            cells = []
            for a, b in pairs:
                ra, rb = res.get((a, wl)), res.get((b, wl))
                cells.append("%.2f×" % (speed(ra, kind) / speed(rb, kind))
                             if ok(ra) and ok(rb) else "—")
            if all(c == "—" for c in cells):
                continue
            w("| %s | %s |" % (wl, " | ".join(cells)))
        w("")

    # the targets, for every peer (they are tierfs's targets)
    targets = [
        ("cold sequential ≥ 0.9× one curl GET", "big_cold", ("curl", "big_cold"),
         "seq", 0.9, False),
        ("warm sequential ≥ 0.8× local copy (page cache dropped)", "big_warm",
         ("local", "big_warm"), "seq", 0.8, False),
        ("warm small-file epoch ≥ 3× rclone", "small_warm", ("rclone", "small_warm"),
         "epoch", 3.0, False),
        ("fresh-mount walk ≤ 1/5 of rclone's time", "walk", ("rclone", "walk"),
         "time", 5.0, False),
    ]
    rows = []
    for label, wl, ref, kind, need, _ in targets:
        refr = res.get(ref)
        cells = []
        for p in peers:
            r = res.get((p, wl))
            if not (ok(r) and ok(refr)):
                cells.append("—")
                continue
            x = speed(r, kind) / speed(refr, kind)
            if kind == "time":
                # report the time ratio, target ≤ 0.2
                t = 1.0 / x
                cells.append("%.2f× %s" % (t, "✓" if t <= 1.0 / need else "✗"))
            else:
                cells.append("%.2f× %s" % (x, "✓" if x >= need else "✗"))
        if any(c != "—" for c in cells):
            rows.append("| %s | %s |" % (label, " | ".join(cells)))
    if rows:
        w("Targets (tierfs must meet them; the peers are shown for reference):")
        w("")
        w("| target | " + " | ".join(peers) + " |")
        w("|---|" + "---|" * len(peers))
        out.extend(rows)
        w("")
    # every repetition's time, so the spread is visible
    order = ["local", "curl", "curl-pipe", "curl-file"] + peers
    keys = sorted((k for k in raw if raw[k][0]["status"] != "skip"),
                  key=lambda k: ([x[0] for x in WORKLOADS].index(k[1])
                                 if k[1] in [x[0] for x in WORKLOADS] else 99,
                                 order.index(k[0]) if k[0] in order else 99))
    if keys:
        w("Raw seconds per repetition:")
        w("")
        table(w, ["workload", "who", "seconds"], [
            [wl, fs, ", ".join("%.3f" % r["secs"] if r["status"] == "ok" else "failed"
                               for r in raw[(fs, wl)])]
            for fs, wl in keys])
    print("\n".join(out))


if __name__ == "__main__":
    main()
