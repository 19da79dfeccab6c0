#!/usr/bin/env python3
"""bench/realistic_report.py RUN_DIR — the Markdown report of
bench/realistic.sh: RUN_DIR/results.tsv (who, workload, status, files,
bytes, secs, repetition, note) and RUN_DIR/meta.tsv.  Medians over the
repetitions; ratios against the baselines of the same run."""
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report import header, load_meta, table  # noqa: E402

MIB = 1048576.0


def load(run):
    res = {}
    with open(os.path.join(run, "results.tsv")) as f:
        for line in f:
            who, wl, st, files, nbytes, secs, rep, note = line.rstrip("\n").split("\t")
            r = res.setdefault((who, wl), {"ok": [], "fail": 0, "skip": 0, "rss": [], "raw": [], "gets": [], "cpu": [], "cpu_proxy": [], "cpu_server": []})
            if st == "ok":
                r["ok"].append((int(files), int(nbytes), float(secs)))
                r["raw"].append("%.2f" % float(secs))
                for word in note.split():
                    if word.startswith("cpu_proxy_s="):
                        r["cpu_proxy"].append(float(word[12:]))
                    elif word.startswith("cpu_server_s="):
                        r["cpu_server"].append(float(word[13:]))
                    elif word.startswith("rss_kb="):
                        r["rss"].append(int(word[7:]))
                    elif word.startswith("cpu_s="):
                        r["cpu"].append(float(word[6:]))
                    elif word.startswith("gets_max="):
                        r["gets"].append(word[9:])
                    elif word.startswith("gets=") and r["gets"]:
                        r["gets"][-1] += " / " + word[5:]
            elif st == "skip":
                r["skip"] += 1
            else:
                r["fail"] += 1
                r["raw"].append("fail")
    return res


def med(res, who, wl):
    """(files/s, MiB/s) medians of (who, wl), or None"""
    r = res.get((who, wl))
    if not r or not r["ok"]:
        return None
    fps = statistics.median(f / s for f, b, s in r["ok"])
    mbs = statistics.median(b / MIB / s for f, b, s in r["ok"])
    return fps, mbs


def status(res, who, wl):
    r = res.get((who, wl))
    if r is None:
        return "not run"
    return "skipped" if r["skip"] else "failed"


def ratio(a, b):
    return "%.2fx" % (a / b) if a is not None and b else "n/a"


def main():
    run = sys.argv[1]
    meta = load_meta(run)
    res = load(run)
    out = []
    w = out.append
    n, tn = int(meta["ranged"]), int(meta["tierfs_n"])
    ram = int(meta["ram_size"])
    bound_kb = (ram + 64 * MIB) / 1024
    for line in header(meta, "tierfs against a store that behaves like S3 (bench/realistic.sh)"):
        w(line)
    w("- proxy: %s" % meta["proxy"])
    w("- tierfs: %s, so **%d GETs in flight** for one sequential reader; ranged baseline N = %d"
      % (meta["tierfs_geometry"], tn, n))
    w("- peers: %s; %s repetitions, rotating order; medians" % (meta["fs"].strip(), meta["reps"]))
    for k in ("peer_s3fs", "peer_rclone", "peer_tierfs"):
        w("- %s" % meta.get(k, ""))
    w("")
    ceils = sorted(((med(res, who, "seq"), who[8:]) for who, wl in res
                    if who.startswith("ceiling-") and med(res, who, "seq")), reverse=True)
    ceil, ceil_p = ceils[0] if ceils else (None, "?")
    if ceil:
        w("Proxy ceiling: the best of %s ranged GETs of the big object at once, to /dev/null: "
          "**%.0f MiB/s** (%.0f MB/s) with %s (%s). No client reads faster through this proxy "
          "on this machine."
          % (meta["ceil"].replace(",", ", "), ceil[1], ceil[1] * MIB / 1e6, ceil_p,
             ", ".join("%s: %.0f MiB/s" % (p, m[1]) for m, p in sorted(ceils, key=lambda x: int(x[1])))))
        w("")
    peers = [p for p in meta["fs"].split()]

    def rss_cell(who, wl):
        r = res.get((who, wl))
        if not r or not r["rss"]:
            return ""
        gets = ("; GETs in flight at most / GETs: " + ", ".join(r["gets"])) if r["gets"] else ""
        if r["cpu"]:
            gets += "; CPU s: FS %.1f" % statistics.median(r["cpu"])
        if r["cpu_proxy"]:
            gets += ", proxy %.1f, server %.1f" % (statistics.median(r["cpu_proxy"]),
                                                   statistics.median(r["cpu_server"]))
        kb = max(r["rss"])
        return "%.0f MiB%s" % (kb / 1024, "" if kb <= bound_kb or who not in ("tierfs", "tierfs-order")
                                else " (**over** ram.size + 64 MiB)") + gets

    targets = []
    if ("curl-1", "seq") in res or any((p, "seq") in res for p in peers):
        w("### Cold sequential read of %s MiB (fresh mount, empty cache, one reader, 1 MiB reads)"
          % meta["big_mib"])
        w("")
        one, par = med(res, "curl-1", "seq"), med(res, "curl-N", "seq")
        rows = []
        for who, label in [("curl-1", "one curl GET \\| dd"),
                           ("curl-N", "%d ranged curl GETs, each \\| dd" % n),
                           ("ceiling-%s" % ceil_p, "%s ranged curl GETs to /dev/null (ceiling)" % ceil_p)] + \
                [(p, p) for p in peers]:
            m = med(res, who, "seq")
            if m is None:
                rows.append([label, status(res, who, "seq"), "", "", "", ""])
                continue
            rows.append([label, "%.0f" % m[1], ratio(m[1], par and par[1]), ratio(m[1], one and one[1]),
                         ratio(m[1], ceil and ceil[1]), rss_cell(who, "seq")])
        table(w, ["reader", "MiB/s", "/ %d ranged GETs" % n, "/ one GET", "/ proxy ceiling",
                  "peak RssAnon; prefetch (tierfs); CPU"], rows)
        t = med(res, "tierfs", "seq")
        targets.append(("cold sequential >= 0.9x %d ranged GETs" % n,
                        ratio(t and t[1], par and par[1]),
                        t and par and t[1] / par[1] >= 0.9))
        targets.append(("cold sequential >= 8x one GET", ratio(t and t[1], one and one[1]),
                        t and one and t[1] / one[1] >= 8))
    if ("xargs-P", "epoch") in res or any((p, "epoch") in res for p in peers):
        w("### Cold small-file epoch: %s files of 90-130 KiB, %s reader threads, shuffled (seed 1)"
          % (meta["small"], meta["threads"]))
        w("")
        xp, xo = med(res, "xargs-P", "epoch"), med(res, "xargs-Porder", "epoch")
        rows = []
        order = [("xargs-P", "`xargs -P %s curl`, same order" % meta["threads"]),
                 ("xargs-Porder", "`xargs -P %s curl`, same order" % meta["order_par"])]
        for p in peers:
            order.append((p, p))
            if p == "tierfs":
                order.append(("tierfs-order", "tierfs, order in `.tierfs-order`"))
        for who, label in order:
            m = med(res, who, "epoch")
            if m is None:
                rows.append([label, status(res, who, "epoch"), "", "", "", ""])
                continue
            rows.append([label, "%.0f" % m[0], "%.1f" % m[1], ratio(m[0], xp and xp[0]),
                         ratio(m[0], xo and xo[0]), rss_cell(who, "epoch")])
        table(w, ["reader", "files/s", "MiB/s", "/ xargs -P %s" % meta["threads"],
                  "/ xargs -P %s" % meta["order_par"], "peak RssAnon; prefetch (tierfs); CPU"], rows)
        t, to = med(res, "tierfs", "epoch"), med(res, "tierfs-order", "epoch")
        targets.append(("cold epoch >= 0.9x xargs -P %s" % meta["threads"], ratio(t and t[0], xp and xp[0]),
                        t and xp and t[0] / xp[0] >= 0.9))
        targets.append(("cold epoch with the order >= 0.9x xargs -P %s" % meta["order_par"],
                        ratio(to and to[0], xo and xo[0]), to and xo and to[0] / xo[0] >= 0.9))
    rss = [kb for (who, wl), r in res.items() if who.startswith("tierfs") for kb in r["rss"]]
    if rss:
        targets.append(("peak RssAnon <= ram.size + 64 MiB (%.0f MiB)" % (bound_kb / 1024),
                        "%.0f MiB" % (max(rss) / 1024), max(rss) <= bound_kb))
    if targets:
        w("### Targets (issue 22, part 1), tierfs")
        w("")
        table(w, ["target", "tierfs", "met"],
              [[name, val, "yes" if ok else "**no**"] for name, val, ok in targets])
    w("### Raw seconds per repetition")
    w("")
    table(w, ["reader", "workload", "seconds"],
          [[who, wl, ", ".join(r["raw"]) or "skipped"] for (who, wl), r in sorted(res.items())])
    print("\n".join(out).rstrip())


if __name__ == "__main__":
    main()
