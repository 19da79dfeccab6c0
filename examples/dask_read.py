#!/usr/bin/env python3
"""dask_read.py - a dask.bag pipeline over the files of a tierfs mount,
after warming the mount on every worker's node with tierfs.dask.warmup.

    examples/dask_read.py DIR [--scheduler ADDRESS] [--workers N] [--processes]

DIR is a directory inside a tierfs mount (for CSV-like text files: each
file's lines are counted; any file works).  Without --scheduler the
example starts a LocalCluster of N workers (2) as threads of this process
(--processes: as processes).  Prints the warm-up summary of each host and
one JSON line: {"files": N, "bytes": N, "lines": N, "sha256": "..."}
(the SHA-256 of the files' SHA-256s in path order, to compare with a copy).

Needs dask and distributed (Debian: python3-dask python3-distributed) and
the tierfs package (python3-tierfs, or PYTHONPATH=python in the tree).
"""
import argparse
import hashlib
import json
import os
import sys

import dask.bag as db
from dask.distributed import Client, LocalCluster

import tierfs
import tierfs.dask


def summarize(path):
    """What one task computes from one file."""
    h = hashlib.sha256()
    size = lines = 0
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
            size += len(chunk)
            lines += chunk.count(b"\n")
    return {"path": path, "bytes": size, "lines": lines, "sha256": h.hexdigest()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", help="a directory inside a tierfs mount")
    ap.add_argument("--scheduler", help="address of a running Dask scheduler")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--processes", action="store_true", help="LocalCluster workers as processes")
    args = ap.parse_args()
    top = os.path.realpath(args.dir)
    root = tierfs.mount_root(top)  # raises tierfs.NotTierfsError outside a mount

    if args.scheduler:
        cluster, client = None, Client(args.scheduler)
    else:
        cluster = LocalCluster(n_workers=args.workers, threads_per_worker=2,
                               processes=args.processes, host="127.0.0.1",
                               dashboard_address=None)
        client = Client(cluster)
    try:
        # 1. Fill each node's cache: one warm-up per host, in parallel.
        for host, res in tierfs.dask.warmup(client, [top], mount=root, jobs=8).items():
            print("warm-up on %s: %d fetched, %d already cached, %.1f s" % (
                host, res["fetched_files"], res["cached_files"], res["seconds"]),
                file=sys.stderr)
        # 2. The pipeline reads from the warm cache.
        paths = sorted(os.path.join(d, f) for d, _, fs in os.walk(top) for f in fs)
        parts = max(1, min(len(paths), 4 * args.workers))
        rows = db.from_sequence(paths, npartitions=parts).map(summarize).compute()
        rows.sort(key=lambda r: r["path"])
        whole = hashlib.sha256("".join(r["sha256"] for r in rows).encode()).hexdigest()
        print(json.dumps({"files": len(rows), "bytes": sum(r["bytes"] for r in rows),
                          "lines": sum(r["lines"] for r in rows), "sha256": whole}))
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
