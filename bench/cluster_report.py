#!/usr/bin/env python3
"""bench/cluster_report.py RUN_DIR — the Markdown report of bench/cluster.sh:
RUN_DIR/results.tsv (phase, node, repetition, status, files, bytes, secs,
note of key=value words) and RUN_DIR/meta.tsv.  Medians over the
repetitions, with every repetition's figure beside them (the spread)."""
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report import header, load_meta, table  # noqa: E402


def load(run):
    rows = []
    with open(os.path.join(run, "results.tsv")) as f:
        for line in f:
            phase, node, rep, st, files, nbytes, secs, note = line.rstrip("\n").split("\t")
            r = {"phase": phase, "node": node, "rep": int(rep), "ok": st == "ok",
                 "files": int(files), "bytes": int(nbytes), "secs": float(secs)}
            for w in note.split():
                k, _, v = w.partition("=")
                try:
                    r[k] = float(v)
                except ValueError:
                    pass
            rows.append(r)
    return rows


def pick(rows, phase, node=None):
    return [r for r in rows if r["phase"] == phase and (node is None or r["node"] == node)]


def fps(r):
    return r["files"] / r["secs"] if r["ok"] and r["secs"] > 0 else None


def spread(vals, fmt):
    vals = [v for v in vals if v is not None]
    if not vals:
        return "failed"
    return "%s (%s)" % (fmt % statistics.median(vals), ", ".join(fmt % v for v in vals))


def main():
    run = sys.argv[1]
    meta = load_meta(run)
    rows = load(run)
    total = float(meta["dataset_bytes"])
    reps = sorted({r["rep"] for r in rows})
    out = header(meta, "tierfs with a copy in the cluster: bench/cluster.sh")
    out += ["- far: %s" % meta.get("proxy"), "- near: %s" % meta.get("near"),
            "- dataset: %s files, %.1f MiB; %s reader threads per node; %s repetitions" % (
                meta.get("files"), float(meta["dataset_bytes"]) / 1048576, meta.get("threads"),
                meta.get("reps")),
            "- load average at the end: %s" % meta.get("load"),
            "- mount: %s" % meta.get("peer_tierfs"), ""]
    w = out.append

    if pick(rows, "cost"):
        out.append("### Cost: the second node reads from near, the first from far\n")
        lines = []
        for node, what in (("no-near", "a node without [near] (far only)"),
                           ("node1", "node 1: from far, copying to near"),
                           ("node2", "node 2: from near")):
            rs = pick(rows, "cost", node)
            lines.append([what, spread([fps(r) for r in rs], "%.0f"),
                          spread([r.get("far_bytes", 0) / total for r in rs if r["ok"]], "%.2f"),
                          spread([r.get("hits") for r in rs if "hits" in r], "%.0f")])
        table(w, ["node", "files/s: median (each rep)", "far bytes / dataset", "near hits"],
              lines)
        ratios, base = [], []
        for rep in reps:
            n1 = [fps(r) for r in pick(rows, "cost", "node1") if r["rep"] == rep]
            n2 = [fps(r) for r in pick(rows, "cost", "node2") if r["rep"] == rep]
            b = [fps(r) for r in pick(rows, "cost", "no-near") if r["rep"] == rep]
            if n1 and n2 and n1[0] and n2[0]:
                ratios.append(n2[0] / n1[0])
                if b and b[0]:
                    base.append(n1[0] / b[0])
        out.append("\nnode 2 / node 1 (same repetition): %s; node 1 / no near: %s\n" % (
            spread(ratios, "%.2f"), spread(base, "%.2f")))
        rss = [r.get("rss_kb") for r in pick(rows, "cost", "node1") if r.get("rss_kb")]
        settle = [r.get("settle_s") for r in pick(rows, "cost", "node1") if "settle_s" in r]
        out.append("Peak RssAnon of node 1's daemon (epoch and copies): %s MiB; its copies "
                   "settled %s s after its epoch.\n" % (
                       spread([v / 1024 for v in rss], "%.0f"), spread(settle, "%.1f")))

    # the far counters are a mount's: round 2 of split is its difference
    # from round 1 on the same node
    first = {(r["rep"], r["node"]): r for r in pick(rows, "split1")}
    for r in pick(rows, "split2"):
        r1 = first.get((r["rep"], r["node"]))
        if r1 is not None:
            for k in ("far_gets", "far_bytes", "hits"):
                r[k] = r.get(k, 0) - r1.get(k, 0)
    for phase, title in (("fanout", "Four nodes, a whole shuffled epoch each, at once"),
                         ("split1", "DistributedSampler: four nodes, a quarter each, at once"),
                         ("split2", "...then another quarter each (copies settled)")):
        rs = pick(rows, phase)
        if not rs:
            continue
        out.append("### %s\n" % title)
        lines = []
        for node in ("node1", "node2", "node3", "node4"):
            nr = pick(rows, phase, node)
            lines.append([node, spread([fps(r) for r in nr], "%.0f"),
                          spread([r.get("far_gets") for r in nr if r["ok"]], "%.0f"),
                          spread([r.get("far_bytes", 0) / 1048576 for r in nr if r["ok"]], "%.1f"),
                          spread([r.get("hits") for r in nr if r["ok"]], "%.0f")])
        table(w, ["node", "files/s", "far GETs", "far MiB", "near hits"], lines)
        per_rep = []
        for rep in reps:
            rr = [r for r in rs if r["rep"] == rep]
            if rr and all(r["ok"] for r in rr):
                per_rep.append(sum(r.get("far_bytes", 0) for r in rr) / total)
        out.append("\nAll far bytes / dataset bytes (%.1f MiB): %s\n" % (
            total / 1048576, spread(per_rep, "%.2f")))
    print("\n".join(out))


if __name__ == "__main__":
    main()
