#!/usr/bin/env python3
"""dataset.py — generate, upload and fetch the tierfs benchmark dataset.

  dataset.py gen DIR N BIG_MIB        generate DIR (idempotent, cached)
  dataset.py upload DIR               upload DIR to $TFS_TEST_BUCKET
  dataset.py put FILE KEY             time one boto3 upload_file of FILE to
                                      KEY with boto3's default TransferConfig
                                      (bench/write.sh's direct-upload baseline)

The dataset is deterministic: N small files train/cNN/img_NNNNN.jpg spread
over 30 directories with sizes drawn uniformly from 90..130 KiB (seed 42),
plus one object big/shard-00000.tar of BIG_MIB MiB, stored under
DIR/objects/ exactly as they are keyed in the bucket.  DIR/manifest.tsv lists
"key<TAB>size" for every object, the big one last; DIR/small.tsv and
DIR/big.tsv split it for epoch_reader; DIR/.complete marks a finished
generation so reruns reuse the local copy.

S3 settings come from the environment written by tests/harness/{rgw,moto}.sh:
TFS_S3_ENDPOINT, TFS_S3_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
TFS_TEST_BUCKET.
"""
import os
import random
import sys
import time

NDIRS = 30
SEED = 42
BIG_KEY = "big/shard-00000.tar"
KIB = 1024
MIB = 1024 * 1024


def small_key(i):
    return "train/c%02d/img_%05d.jpg" % (i % NDIRS, i)


def gen(root, n, big_mib):
    marker = os.path.join(root, ".complete")
    if os.path.exists(marker):
        return
    t0 = time.time()
    rng = random.Random(SEED)
    manifest = []
    for i in range(n):
        key = small_key(i)
        size = rng.randint(90 * KIB, 130 * KIB)
        path = os.path.join(root, "objects", key)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(rng.randbytes(size))
        manifest.append((key, size))
    path = os.path.join(root, "objects", BIG_KEY)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    brng = random.Random(SEED + 1)
    with open(path, "wb") as f:
        for _ in range(big_mib):
            f.write(brng.randbytes(MIB))
    manifest.append((BIG_KEY, big_mib * MIB))
    with open(os.path.join(root, "manifest.tsv"), "w") as f:
        for key, size in manifest:
            f.write("%s\t%d\n" % (key, size))
    with open(os.path.join(root, "small.tsv"), "w") as f:
        for key, size in manifest[:-1]:
            f.write("%s\t%d\n" % (key, size))
    with open(os.path.join(root, "big.tsv"), "w") as f:
        f.write("%s\t%d\n" % manifest[-1])
    with open(marker, "w") as f:
        f.write("%d files + %d MiB\n" % (n, big_mib))
    print("dataset.py: generated %s in %.1f s" % (root, time.time() - t0),
          file=sys.stderr)


def client(pool=32):
    import boto3
    from botocore.config import Config
    return boto3.client(
        "s3",
        endpoint_url=os.environ["TFS_S3_ENDPOINT"],
        region_name=os.environ.get("TFS_S3_REGION", "us-east-1"),
        aws_access_key_id=os.environ["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"],
        config=Config(s3={"addressing_style": "path"},
                      max_pool_connections=pool,
                      retries={"max_attempts": 5, "mode": "standard"}),
    )


def manifest(root):
    with open(os.path.join(root, "manifest.tsv")) as f:
        return [(k, int(s)) for k, s in (ln.rstrip("\n").split("\t") for ln in f)]


def upload(root):
    from concurrent.futures import ThreadPoolExecutor
    from boto3.s3.transfer import TransferConfig
    bucket = os.environ.get("TFS_TEST_BUCKET", "tierfs-test")
    s3 = client()
    items = manifest(root)
    t0 = time.time()

    def put(item):
        key, size = item
        with open(os.path.join(root, "objects", key), "rb") as f:
            data = f.read()
        assert len(data) == size, key
        s3.put_object(Bucket=bucket, Key=key, Body=data)
        return size

    small = [it for it in items if it[0] != BIG_KEY]
    with ThreadPoolExecutor(16) as ex:
        nbytes = sum(ex.map(put, small))
    t1 = time.time()
    big_size = dict(items)[BIG_KEY]
    s3.upload_file(os.path.join(root, "objects", BIG_KEY), bucket, BIG_KEY,
                   Config=TransferConfig(multipart_threshold=64 * MIB,
                                         multipart_chunksize=64 * MIB,
                                         max_concurrency=8))
    t2 = time.time()
    # verify: every key listed with the right size
    seen = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for o in page.get("Contents", []):
            seen[o["Key"]] = o["Size"]
    bad = [k for k, s in items if seen.get(k) != s]
    if bad:
        sys.exit("dataset.py: %d objects missing or wrong size after upload, e.g. %s"
                 % (len(bad), bad[0]))
    print("dataset.py: uploaded %d small files (%.0f MiB) in %.1f s, "
          "%d MiB object in %.1f s" % (len(small), nbytes / MIB, t1 - t0,
                                       big_size // MIB, t2 - t1),
          file=sys.stderr)


def put(path, key):
    """Upload FILE with upload_file and boto3's default transfer settings
    (multipart from 8 MiB, 8 MiB parts, 10 threads); print the seconds the
    call took (the client is made before the clock starts)."""
    from boto3.s3.transfer import TransferConfig
    bucket = os.environ.get("TFS_TEST_BUCKET", "tierfs-test")
    s3 = client()
    cfg = TransferConfig()
    s3.head_bucket(Bucket=bucket)  # open a connection outside the timing
    t0 = time.time()
    s3.upload_file(path, bucket, key, Config=cfg)
    t1 = time.time()
    print("bytes=%d secs=%.6f threshold=%d chunk=%d threads=%d" % (
        os.path.getsize(path), t1 - t0, cfg.multipart_threshold,
        cfg.multipart_chunksize, cfg.max_request_concurrency))


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    cmd, root = sys.argv[1], sys.argv[2]
    if cmd == "gen" and len(sys.argv) == 5:
        gen(root, int(sys.argv[3]), int(sys.argv[4]))
    elif cmd == "upload" and len(sys.argv) == 3:
        upload(root)
    elif cmd == "put" and len(sys.argv) == 4:
        put(root, sys.argv[3])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
