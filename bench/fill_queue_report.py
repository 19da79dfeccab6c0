#!/usr/bin/env python3
"""fill_queue_report.py RUN: the Markdown report of one bench/fill_queue.sh
run.

Reads RUN/results.tsv (rep, ssd.fill_queue, cold dd s, MiB queued at its
end, s until the queue was empty, blocks written, queued, failed, dropped,
warm dd s, warm GETs per line) and RUN/meta.tsv; per ssd.fill_queue value the
median (min-max) speeds and each repetition's counts.
"""
import statistics
import sys

run = sys.argv[1]
meta = dict(l.rstrip("\n").split("\t", 1) for l in open(run + "/meta.tsv"))
rows = [l.rstrip("\n").split("\t") for l in open(run + "/results.tsv")]
big = int(meta["big_mib"])
order = []
for r in rows:
    if r[1] not in order:
        order.append(r[1])
print("### bench/fill_queue.sh, %s" % meta["date"])
print()
print("`%s`, commit %s, binary %s, %s CPUs, %s RAM, kernel %s, %s; %s; %s repetitions, "
      "medians (min-max); load %s." % (meta["command"], meta["commit"], meta["binary"],
                                       meta["nproc"], meta["ram"], meta["kernel"], meta["disk"],
                                       meta["tierfs"], meta["reps"], meta["load"]))
print()
print("| ssd.fill_queue | cold MB/s | MiB queued at the end | then empty after (s) "
      "| blocks written | queued | failed | dropped | warm MB/s | warm backend GETs |")
print("|---|---|---|---|---|---|---|---|---|---|")
def med(xs):
    return statistics.median(xs)
def span(xs, fmt):
    return (fmt + " (" + fmt + "-" + fmt + ")") % (med(xs), min(xs), max(xs))
for q in order:
    rs = [r for r in rows if r[1] == q]
    mb = big * 1048576 / 1e6
    cold = [mb / float(r[2]) for r in rs]
    warm = [mb / float(r[9]) for r in rs]
    print("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
        q, span(cold, "%.0f"), "/".join(r[3] for r in rs), span([float(r[4]) for r in rs], "%.2f"),
        "/".join(r[5] for r in rs), "/".join(r[6] for r in rs), "/".join(r[7] for r in rs),
        "/".join(r[8] for r in rs), span(warm, "%.0f"), "/".join(r[10] for r in rs)))
