#!/usr/bin/env python3
"""scale_report.py RUN_DIR — turn bench/scale.sh's results into Markdown.

Reads RUN_DIR/meta.tsv and RUN_DIR/results.tsv ("fs<TAB>workload<TAB>status
<TAB>secs<TAB>peak_rssanon_kib<TAB>daemon_cpu_secs<TAB>entries", status ok,
fail, timeout or skip) and prints the report on stdout: per workload the
time of each peer, its ratio to tierfs's (peer time / tierfs time: above 1
tierfs is faster), the daemon's CPU time and its peak RssAnon.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report import header, load_meta  # noqa: E402

PEERS = ["tierfs", "rclone", "s3fs"]
WORKLOADS = [
    ("ls", "`ls -l` of big/ (fresh mount, empty cache)"),
    ("walk", "walk + lstat of every entry (fresh mount, empty cache)"),
    ("epoch", "shuffled epoch, whole files (fresh mount, empty cache)"),
]
TARGET_MIB = 200


def main():
    run = sys.argv[1]
    meta = load_meta(run)
    res = {}
    with open(os.path.join(run, "results.tsv")) as f:
        for line in f:
            fs, wl, st, secs, peak, cpu, n = line.rstrip("\n").split("\t")
            res[(fs, wl)] = (st, float(secs), int(peak), float(cpu), int(n))
    out = header(meta, "Scale: %s objects" % meta.get("objects", "?").split(" ")[0])
    out += [
        "- objects: %s" % meta.get("objects"),
        "- epoch: %s" % meta.get("epoch"),
        "- RGW object store: %s; %s" % (meta.get("server_store"), meta.get("peer_limit")),
    ]
    for p in PEERS:
        if "peer_" + p in meta:
            out.append("- %s" % meta["peer_" + p])
    out += ["", "| workload | fs | entries | time | vs tierfs | daemon CPU | peak RssAnon |",
            "|---|---|---:|---:|---:|---:|---:|"]
    worst = 0
    for wl, label in WORKLOADS:
        base = res.get(("tierfs", wl))
        for p in PEERS:
            r = res.get((p, wl))
            if r is None:
                continue
            st, secs, peak, cpu, n = r
            if st == "skip":
                out.append("| %s | %s | | skipped | | | |" % (label, p))
                continue
            t = "%.1f s" % secs if st == "ok" else (
                "> %.0f s (limit)" % secs if st == "timeout" else "failed")
            ratio = ""
            if base and base[0] == "ok" and st in ("ok", "timeout") and base[1] > 0:
                ratio = ("%s%.2f×" % ("> " if st == "timeout" else "", secs / base[1]))
            if p == "tierfs":
                worst = max(worst, peak)
            out.append("| %s | %s | %s | %s | %s | %.1f s | %.0f MiB |" % (
                label, p, n if st == "ok" else "", t, ratio, cpu, peak / 1024))
    out += ["", "tierfs's peak RssAnon over the three workloads: %.0f MiB (target < %d MiB: %s)"
            % (worst / 1024, TARGET_MIB, "met" if worst / 1024 < TARGET_MIB else "missed")]
    print("\n".join(out))


if __name__ == "__main__":
    main()
