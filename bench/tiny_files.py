#!/usr/bin/env python3
"""tiny_files.py - what cache.fetch_headers costs a cold epoch over tiny files.

    sudo bench/tiny_files.py [--tierfs build/tierfs] [--files 2000] [--size 2048]
                             [--threads 8] [--reps 2] [--server rgw|moto]

A listed object under 4 KiB could be a symlink or a special file, so with
cache.fetch_headers = small (the default) its first lookup HEADs it;
false trusts the listing.  This uploads FILES objects of SIZE bytes over 10
directories, then for each setting (alternating, REPS times each, every
run on a fresh mount and cache) reads every file once with THREADS
readers, in a shuffled order, and prints per setting the median epoch time
and the backend requests (HEAD, LIST, GET) the mount made.  Needs root
(FUSE) and the S3 server of tests/harness/.
"""
import argparse
import concurrent.futures
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
HARNESS = os.path.join(REPO, "tests", "harness")


def server_env(kind, d):
    subprocess.run([os.path.join(HARNESS, kind + ".sh"), "start", d], check=True,
                   stdout=subprocess.DEVNULL)
    env = {}
    with open(os.path.join(d, "env")) as f:
        for line in f:
            if line.startswith("export "):
                k, v = line[7:].strip().split("=", 1)
                env[k] = v.strip("'\"")
    return env


def upload(env, bucket, prefix, n, size):
    import boto3
    s3 = boto3.client("s3", endpoint_url=env["TFS_S3_ENDPOINT"], region_name="us-east-1",
                      aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
                      aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"])
    keys = ["d%02d/f%05d" % (i % 10, i) for i in range(n)]
    body = os.urandom(size)
    with concurrent.futures.ThreadPoolExecutor(16) as ex:
        list(ex.map(lambda k: s3.put_object(Bucket=bucket, Key=prefix + k, Body=body), keys))
    return keys


def epoch(args, env, work, source, keys, headers, run):
    mnt = os.path.join(work, "mnt%d" % run)
    cache = os.path.join(work, "cache%d" % run)
    os.makedirs(mnt)
    conf = os.path.join(work, "t%d.conf" % run)
    with open(conf, "w") as f:
        f.write("[ssd]\ndir = %s\nsize = 1G\n[cache]\nmetadata_ttl = forever\nfetch_headers = %s\n"
                "[log]\nfile = %s/log%d\n[backend]\nendpoint = %s\n"
                % (cache, headers, work, run, env["TFS_S3_ENDPOINT"]))
    e = dict(os.environ)
    e.update(env)
    e.pop("AWS_CA_BUNDLE", None)
    subprocess.run([args.tierfs, "mount", "-c", conf, source, mnt], env=e, check=True)
    try:
        order = list(keys)
        random.Random(run).shuffle(order)
        t0 = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(args.threads) as ex:
            got = list(ex.map(lambda k: len(open(os.path.join(mnt, k), "rb").read()), order))
        dt = time.monotonic() - t0
        assert all(g == args.size for g in got)
        import json
        st = json.loads(subprocess.run([args.tierfs, "stats", "--json", mnt], check=True,
                                       capture_output=True, text=True).stdout)["backend"]
        return dt, st["head"]["requests"], st["list"]["requests"], st["get"]["requests"]
    finally:
        subprocess.run([args.tierfs, "umount", mnt], capture_output=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tierfs", default=os.path.join(REPO, "build", "tierfs"))
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--size", type=int, default=2048)
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--server", default="rgw", choices=["rgw", "moto"])
    args = ap.parse_args()
    args.tierfs = os.path.abspath(args.tierfs)
    work = tempfile.mkdtemp(prefix="tierfs-tiny-")
    sdir = os.path.join(work, args.server)
    os.makedirs(sdir)
    env = server_env(args.server, sdir)
    try:
        bucket = env.get("TFS_TEST_BUCKET", "tierfs-test")
        keys = upload(env, bucket, "tiny/", args.files, args.size)
        results = {"small": [], "false": []}
        run = 0
        for rep in range(args.reps):
            for h in (("small", "false") if rep % 2 == 0 else ("false", "small")):
                run += 1
                r = epoch(args, env, work, "s3://%s/tiny" % bucket, keys, h, run)
                results[h].append(r)
                print("run %d fetch_headers=%s: %.2f s, HEAD %d, LIST %d, GET %d" % ((run, h) + r),
                      file=sys.stderr)
        print("| cache.fetch_headers | epoch (median of %d) | files/s | HEAD | LIST | GET |"
              % args.reps)
        print("|---|---|---|---|---|---|")
        for h, rs in results.items():
            t = statistics.median(r[0] for r in rs)
            print("| %s | %.2f s | %.0f | %d | %d | %d |" % (h, t, args.files / t, rs[-1][1],
                                                           rs[-1][2], rs[-1][3]))
        ts = statistics.median(r[0] for r in results["small"])
        tf = statistics.median(r[0] for r in results["false"])
        print("\nsmall / false epoch time: %.2fx" % (ts / tf))
    finally:
        subprocess.run([os.path.join(HARNESS, args.server + ".sh"), "stop", sdir],
                       stdout=subprocess.DEVNULL)
        subprocess.run(["rm", "-rf", work])
    return 0


if __name__ == "__main__":
    sys.exit(main())
