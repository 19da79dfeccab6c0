#!/usr/bin/env python3
"""write_report.py RUN_DIR — turn bench/write.sh's results into a Markdown report.

Reads RUN_DIR/meta.tsv ("key<TAB>value") and RUN_DIR/results.tsv, one line
per measurement:

  who  size_mib  status  bytes  total  close_call  durable  verified  rep

who is a peer (s3fs, rclone, rclone-wb0, tierfs, tierfs-stream) or a direct upload (boto3,
tierfs-put); status ok, fail, bad (wrong bytes) or skip; total is open() to
close() returning, close_call the close() alone, durable the start of the
write until the object was in the bucket, all in seconds ("-" where it does
not apply); verified is sha256 when the object's bytes were checked.  Every
number in the tables is the median over the successful repetitions.
"""
import os
import statistics
import sys

from report import header, load_meta, table

MIB = 1024 * 1024
PEERS = ["s3fs", "rclone", "rclone-wb0", "tierfs", "tierfs-stream"]
DIRECT = ["boto3", "tierfs-put"]
LABELS = {
    "boto3": "direct: boto3 `upload_file`",
    "tierfs-put": "direct: `tierfs backend put`",
    "rclone-wb0": "rclone `--vfs-write-back 0s`",
    "tierfs-stream": "tierfs `writeback.stream=true`",
}
CLOSE_TARGET = 2.0    # tierfs's close at least 2× faster than rclone's
DURABLE_TARGET = 1.2  # tierfs durable within 1.2× the best direct upload


def num(s):
    return None if s == "-" else float(s)


def load(run):
    raw = {}
    path = os.path.join(run, "results.tsv")
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                who, mib, status, nbytes, total, closecall, durable, verified, rep = \
                    line.rstrip("\n").split("\t")
                raw.setdefault((who, int(mib)), []).append({
                    "status": status, "bytes": int(nbytes), "total": num(total),
                    "close": num(closecall), "durable": num(durable),
                    "verified": verified, "rep": int(rep)})
    res = {}
    for key, runs in raw.items():
        good = [r for r in runs if r["status"] == "ok"]
        r = {"status": "ok" if good else runs[0]["status"], "n": len(runs),
             "nfail": len(runs) - len(good), "bytes": runs[0]["bytes"],
             "verified": any(x["verified"] == "sha256" for x in good),
             "mismatch": any(x["status"] == "bad" for x in runs)}
        for m in ("total", "close", "durable"):
            vals = [x[m] for x in good if x[m] is not None]
            r[m] = statistics.median(vals) if vals else None
        res[key] = r
    return raw, res


def ok(r):
    return r is not None and r["status"] == "ok"


def secs(x):
    return "—" if x is None else ("%.2f s" if x >= 1 else "%.3f s") % x


def rate(r, m):
    x = r[m]
    return "—" if not x else "%.0f MiB/s" % (r["bytes"] / MIB / x)


def best_direct(res, mib):
    """(seconds, who) of the fastest direct upload of this size, or None."""
    got = [(res[(d, mib)]["durable"], d) for d in DIRECT
           if ok(res.get((d, mib))) and res[(d, mib)]["durable"]]
    return min(got) if got else None


def size_table(w, res, mib, rows):
    best = best_direct(res, mib)
    w("### %d MiB checkpoint" % mib)
    w("")
    w("| | close returns | write + close | durable in the bucket | end to end | "
      "durable / best direct upload | bytes checked |")
    w("|---|---|---|---|---|---|---|")
    for who in rows:
        r = res.get((who, mib))
        if r is None:
            continue
        label = LABELS.get(who, who)
        if r["status"] == "skip":
            w("| %s | skipped | | | | | |" % label)
            continue
        if not ok(r):
            w("| %s | **failed**%s | | | | | |" % (
                label, " (wrong bytes in the bucket)" if r["mismatch"] else ""))
            continue
        note = " **%d of %d runs failed**" % (r["nfail"], r["n"]) if r["nfail"] else ""
        ratio = ("%.2f×" % (r["durable"] / best[0])) if best and r["durable"] else "—"
        checked = "sha256 ✓" if r["verified"] else "—"
        if r["mismatch"]:
            checked = "**sha256 mismatch in a repetition**"
        w("| %s | %s | %s | %s%s | %s | %s | %s |" % (
            label, secs(r["total"]), rate(r, "total"), secs(r["durable"]), note,
            rate(r, "durable"), ratio, checked))
    w("")
    if best:
        w("Best direct upload: %s, %s." % (LABELS[best[1]].split(": ", 1)[1],
                                            secs(best[0])))
        w("")


def raw_cell(r):
    if r["status"] != "ok":
        return "failed" if r["status"] == "fail" else r["status"]
    return "/".join("%.3f" % r[m] if r[m] is not None else "-"
                    for m in ("total", "close", "durable"))


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    run = sys.argv[1]
    meta = load_meta(run)
    raw, res = load(run)
    sizes = [int(s) for s in meta.get("sizes", "").split()]
    peers = [p for p in PEERS if p in meta.get("fs", "").split()]
    direct = [d for d in DIRECT if d in meta.get("direct", "").split()]
    out = []
    w = out.append

    out.extend(header(meta, "tierfs checkpoint write benchmark"))
    w("- checkpoints: %s of random bytes, in the page cache before every write; "
      "every write goes to a new key on a fresh mount with an empty cache"
      % ", ".join("%d MiB" % s for s in sizes))
    w("- writer: %s" % meta.get("writer", "?"))
    w("- durable: %s" % meta.get("poll", "?"))
    if peers:
        w("- peers: %s" % "; ".join(
            "%s: %s" % (p, meta.get("peer_" + p, p)) for p in peers))
    if meta.get("tierfs_write"):
        w("- tierfs write settings: %s" % meta["tierfs_write"])
    if meta.get("tierfs_binary"):
        w("- tierfs binary: %s" % meta["tierfs_binary"])
    w("- direct uploads: %s" % "; ".join(
        {"boto3": meta.get("boto3", "boto3 upload_file"),
         "tierfs-put": "`tierfs backend put FILE KEY` (tierfs's own multipart "
                       "client, the same [backend] settings)"}[d] for d in direct))
    w("")
    w("Medians of %s repetitions. *Close returns*: open() until close() returns "
      "after writing the whole file (no fsync); *write + close* is the size over "
      "that time. *Durable*: from open() until the object is in the bucket with "
      "its full size; for a direct upload, the upload call's own time. *End to "
      "end* is the size over the durable time." % meta.get("reps", "?"))
    w("")
    for mib in sizes:
        size_table(w, res, mib, direct + peers)

    # the targets, for every peer (they are tierfs's targets)
    rows = []
    for mib in sizes:
        ref = res.get(("rclone", mib))
        cells = []
        for p in peers:
            r = res.get((p, mib))
            if ok(r) and ok(ref) and r["total"] and ref["total"]:
                x = ref["total"] / r["total"]
                cells.append("%.2f× %s" % (x, "✓" if x >= CLOSE_TARGET else "✗"))
            else:
                cells.append("—")
        if any(c != "—" for c in cells):
            rows.append("| close returns ≥ %g× faster than rclone (rclone's time / "
                        "the FS's) | %d MiB | %s |" % (CLOSE_TARGET, mib, " | ".join(cells)))
    for mib in sizes:
        best = best_direct(res, mib)
        cells = []
        for p in peers:
            r = res.get((p, mib))
            if ok(r) and best and r["durable"]:
                x = r["durable"] / best[0]
                cells.append("%.2f× %s" % (x, "✓" if x <= DURABLE_TARGET else "✗"))
            else:
                cells.append("—")
        if any(c != "—" for c in cells):
            rows.append("| time until durable ≤ %g× the best direct multipart upload "
                        "| %d MiB | %s |" % (DURABLE_TARGET, mib, " | ".join(cells)))
    if rows:
        w("Targets (tierfs must meet them; the peers are shown for reference):")
        w("")
        w("| target | size | " + " | ".join(LABELS.get(p, p) for p in peers) + " |")
        w("|---|---|" + "---|" * len(peers))
        out.extend(rows)
        w("")

    order = direct + peers
    keys = sorted((k for k in raw if raw[k][0]["status"] != "skip"),
                  key=lambda k: (k[1], order.index(k[0]) if k[0] in order else 99))
    if keys:
        w("Raw seconds per repetition (close returns / close() call alone / durable):")
        w("")
        table(w, ["size", "who", "seconds"],
              [["%d MiB" % mib, who, ", ".join(raw_cell(r) for r in raw[(who, mib)])]
               for who, mib in keys])
    print("\n".join(out))


if __name__ == "__main__":
    main()
