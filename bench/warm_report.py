#!/usr/bin/env python3
"""warm_report.py RUN: the Markdown report of one bench/warm.sh run.

Reads RUN/results.tsv (round, kind, what, secs, reader CPU s, daemon CPU
s, bytes per line) and RUN/meta.tsv.  Per round: the median speed of
tierfs and of the plain reads, their ratio, and the median CPU seconds
per GiB (reader, daemon, sum) of each and their ratio; then the spread of
the ratios over the rounds against the issue's targets; for the hot epoch,
the FUSE floor's (bench/fuse_floor.c) speed against both.
"""
import statistics
import sys

GIB = 1 << 30


def main(run):
    meta = {}
    with open(run + "/meta.tsv") as f:
        for line in f:
            k, _, v = line.rstrip("\n").partition("\t")
            meta[k] = v
    rows = []
    with open(run + "/results.tsv") as f:
        for line in f:
            r, kind, what, secs, rcpu, dcpu, nbytes = line.rstrip("\n").split("\t")
            rows.append((int(r), kind, what, float(secs), float(rcpu), float(dcpu), int(nbytes)))
    out = ["### bench/warm.sh, %s" % meta.get("date", "?"), ""]
    out.append("`%s`, commit %s, %s CPUs, kernel %s, %s; %s reads of each kind per round, "
               "alternating, medians; %s rounds." % (
                   meta.get("command"), meta.get("commit"), meta.get("nproc"), meta.get("kernel"),
                   meta.get("disk"), meta.get("reps"), meta.get("rounds")))
    out.append("tierfs: %s." % meta.get("peer_tierfs", "?"))
    out.append("")
    targets = {"seq": ("warm sequential, %s MiB, page cache dropped" % meta.get("big_mib"), 0.8, 2.0),
               "hot": ("small-file hot epoch, %s files, %s threads" % (meta.get("small"),
                                                                       meta.get("threads")), 0.8, None)}
    for kind in ("seq", "hot"):
        if not any(x[1] == kind for x in rows):
            continue
        title, speed_target, cpu_target = targets[kind]
        out += ["#### " + title, "",
                "| round | tierfs MiB/s | plain MiB/s | speed ratio | tierfs reader CPU s/GiB "
                "| daemon CPU s/GiB | tierfs total | plain CPU s/GiB | CPU ratio |",
                "|---|---|---|---|---|---|---|---|---|"]
        speed, cpu = [], []
        for r in sorted({x[0] for x in rows if x[1] == kind}):
            def med(what, f):
                return statistics.median(f(x) for x in rows if x[0] == r and x[1] == kind and x[2] == what)
            mibs = lambda x: x[6] / (1 << 20) / x[3]
            t, p = med("tierfs", mibs), med("plain", mibs)
            rc = med("tierfs", lambda x: x[4] / (x[6] / GIB))
            dc = med("tierfs", lambda x: x[5] / (x[6] / GIB))
            tc = med("tierfs", lambda x: (x[4] + x[5]) / (x[6] / GIB))
            pc = med("plain", lambda x: x[4] / (x[6] / GIB))
            speed.append(t / p)
            cpu.append(tc / pc if pc > 0 else float("inf"))
            out.append("| %d | %.0f | %.0f | %.2fx | %.3f | %.3f | %.3f | %.3f | %.2fx |" % (
                r, t, p, t / p, rc, dc, tc, pc, cpu[-1]))
        out.append("")
        line = "Speed ratio %.2f-%.2fx (target >= %.1fx)" % (min(speed), max(speed), speed_target)
        if cpu_target:
            line += "; CPU ratio %.2f-%.2fx (target <= %.1fx)" % (min(cpu), max(cpu), cpu_target)
        out += [line + ".", ""]
        if any(x[1] == kind and x[2] == "floor" for x in rows):
            out += floor_table(rows, kind, meta)
    print("\n".join(out).rstrip())


def floor_table(rows, kind, meta):
    """The FUSE floor (bench/fuse_floor.c) beside tierfs and the plain
    reads of the same rounds: what any FUSE daemon pays here."""
    out = ["The FUSE floor (bench/fuse_floor.c, %s FUSE threads, one syscall per request), "
           "same rounds:" % meta.get("floor_threads", "?"), "",
           "| round | floor MiB/s | floor / plain | tierfs / floor | floor daemon CPU s/GiB "
           "| floor total CPU s/GiB | floor CPU / plain | tierfs CPU / floor |",
           "|---|---|---|---|---|---|---|---|"]
    fp, tf, fc, tc = [], [], [], []
    for r in sorted({x[0] for x in rows if x[1] == kind}):
        def med(what, f):
            return statistics.median(f(x) for x in rows if x[0] == r and x[1] == kind and x[2] == what)
        mibs = lambda x: x[6] / (1 << 20) / x[3]
        total = lambda x: (x[4] + x[5]) / (x[6] / GIB)
        f, p, t = med("floor", mibs), med("plain", mibs), med("tierfs", mibs)
        fcpu, pcpu, tcpu = med("floor", total), med("plain", total), med("tierfs", total)
        fp.append(f / p)
        tf.append(t / f)
        fc.append(fcpu / pcpu if pcpu > 0 else float("inf"))
        tc.append(tcpu / fcpu if fcpu > 0 else float("inf"))
        out.append("| %d | %.0f | %.2fx | %.2fx | %.3f | %.3f | %.2fx | %.2fx |" % (
            r, f, fp[-1], tf[-1], med("floor", lambda x: x[5] / (x[6] / GIB)), fcpu, fc[-1], tc[-1]))
    out += ["", "Floor / plain: speed %.2f-%.2fx, CPU %.2f-%.2fx; tierfs / floor: speed "
            "%.2f-%.2fx, CPU %.2f-%.2fx." % (min(fp), max(fp), min(fc), max(fc),
                                              min(tf), max(tf), min(tc), max(tc)), ""]
    return out


if __name__ == "__main__":
    main(sys.argv[1])
