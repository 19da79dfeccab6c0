#!/usr/bin/env python3
"""test_shared.py - several daemons sharing one cache directory (one SSD
tier per node, as the FlexVolume driver sets it up).

    test_shared.py TIERFS --backend local|moto|rgw [--only NAME]

The cache is shared only by mounts reading with the same credentials
(other_credentials_*): those tests need S3 and, to show a denied read,
Ceph RGW's per-user access (--backend rgw); moto accepts any key.

Ends with "shared: N passed, N failed".
"""
import errno
import os
import random
import subprocess
import sys
import threading

from test_mount import BUCKET, data_for, poll, read, run_suite
from test_write import bucket_get, kill9, wait_bucket, write

MIB = 1 << 20


def dataset(bucket, n, size):
    rnd = random.Random(n)
    files = {}
    for i in range(n):
        k = "data/f%03d.bin" % i
        files[k] = data_for(k, rnd.randrange(*size))
        bucket.put(k, files[k])
    return files


def shared_pair(ctx, extra=None):
    """Two mounts of the same bucket with the same ssd.dir."""
    cache = os.path.join(ctx.work, "node-cache")
    conf = {"ssd": {"dir": cache}}
    for sec, kv in (extra or {}).items():
        conf.setdefault(sec, {}).update(kv)
    a = ctx.mount("pod-a", conf)
    b = ctx.mount("pod-b", conf)
    return a, b


def gets(m):
    return m.stats()["backend"]["get"]["requests"]


def t_second_pod_reads_from_the_shared_tier(ctx):
    files = dataset(ctx.bucket, 40, (10_000, 300_000))
    a, b = shared_pair(ctx)
    a.mount()
    b.mount()
    try:
        for k, v in files.items():
            assert read(os.path.join(a.mnt, k)) == v
        assert gets(a) == len(files)
        # a's blocks reach the shared SSD tier in the background.
        poll(lambda: a.stats()["ssd"]["fill_queue_bytes"] == 0, 20, "a's fills to land")
        for k, v in files.items():
            assert read(os.path.join(b.mnt, k)) == v
        assert gets(b) == 0, "the second pod fetched %d objects again" % gets(b)
    finally:
        a.umount()
        b.umount()


def t_concurrent_readers_and_shared_eviction(ctx):
    files = dataset(ctx.bucket, 80, (1 * MIB, 2 * MIB))
    total = sum(len(v) for v in files.values())
    a, b = shared_pair(ctx, {"ssd": {"size": "48M", "high_watermark": "80", "low_watermark": "60"},
                             "cache": {"policy": "lru"}, "ram": {"size": "16M"}})
    a.mount()
    b.mount()
    errors = []

    def reader(m, seed):
        keys = list(files)
        random.Random(seed).shuffle(keys)
        try:
            for k in keys:
                if read(os.path.join(m.mnt, k)) != files[k]:
                    errors.append((m.mnt, k))
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))

    try:
        ts = [threading.Thread(target=reader, args=(m, s)) for m in (a, b) for s in (1, 2)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert not errors, errors[:5]
        assert total > 48 * MIB
        # Both daemons see the same usage, bounded by the shared capacity.
        def settled():
            ua, ub = a.stats()["ssd"], b.stats()["ssd"]
            return ua if ua["used_bytes"] == ub["used_bytes"] else None
        st = poll(settled, 30, "both daemons to agree on the tier's usage")
        assert st["used_bytes"] <= st["capacity_bytes"], st
        assert a.stats()["ssd"]["evictions"] + b.stats()["ssd"]["evictions"] > 0
        # Everything is still byte-exact after the evictions.
        reader(a, 3)
        reader(b, 4)
        assert not errors, errors[:5]
    finally:
        a.umount()
        b.umount()


def t_each_mount_uploads_its_own_writes(ctx):
    a, b = shared_pair(ctx, {"writeback": {"delay": "60s"}})
    a.mount()
    b.mount()
    try:
        for i in range(5):
            write(os.path.join(a.mnt, "from-a-%d" % i), b"A%d" % i)
            write(os.path.join(b.mnt, "from-b-%d" % i), b"B%d" % i)
        kill9(a)
        # b drains its own journal only.
        r = subprocess.run([b.tierfs, "flush", b.mnt], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        for i in range(5):
            assert bucket_get(ctx.bucket, "from-b-%d" % i) == b"B%d" % i
            assert bucket_get(ctx.bucket, "from-a-%d" % i) is None, "b uploaded a's file"
        assert b.stats()["writeback"]["uploads"] == 5
        # a, mounted again on the same mountpoint, resumes its journal.
        a.mount()
        for i in range(5):
            wait_bucket(ctx.bucket, "from-a-%d" % i, b"A%d" % i, 60)
    finally:
        a.umount()
        b.umount()


# Credentials of a second S3 user: on RGW a real user that may list the
# test bucket (ACL authenticated-read) but not read the first user's
# objects; moto accepts any key pair.
OTHER = {"AWS_ACCESS_KEY_ID": "otheraccess", "AWS_SECRET_ACCESS_KEY": "othersecret"}


def other_user(ctx):
    b = ctx.bucket
    if b.kind == "rgw":
        subprocess.run(["radosgw-admin", "-c", b.env["TFS_CEPH_CONF"], "user", "create",
                        "--uid", "other", "--display-name", "other",
                        "--access-key", OTHER["AWS_ACCESS_KEY_ID"],
                        "--secret-key", OTHER["AWS_SECRET_ACCESS_KEY"]],
                       check=True, capture_output=True, timeout=60)
        b.s3.put_bucket_acl(Bucket=BUCKET, ACL="authenticated-read")
    return OTHER


def source_dirs(cache):
    return sorted(d for d in os.listdir(cache) if len(d) == 16)


def t_other_credentials_never_read_the_cache(ctx):
    """A pod whose credentials may list the bucket but not read an object
    must not be served that object from what another pod cached."""
    if ctx.bucket.kind == "local":
        return "skip"  # no credentials: the local backend is keyed by its root
    secret = data_for("private/secret", 100_000)
    ctx.bucket.put("private/secret", secret)
    other = other_user(ctx)
    a, a2 = shared_pair(ctx)
    b = ctx.mount("pod-other", {"ssd": {"dir": os.path.join(ctx.work, "node-cache")}})
    b.extra_env = other
    a.mount()
    try:
        assert read(os.path.join(a.mnt, "private/secret")) == secret
        assert gets(a) == 1
        # Pods sharing credentials (one Secret) share the cache.
        a2.mount()
        assert read(os.path.join(a2.mnt, "private/secret")) == secret
        assert gets(a2) == 0, "the same credentials did not share the cache"
        b.mount()
        assert os.listdir(os.path.join(b.mnt, "private")) == ["secret"]
        if ctx.bucket.kind == "rgw":
            try:
                got = read(os.path.join(b.mnt, "private/secret"))
            except OSError as e:
                assert e.errno in (errno.EACCES, errno.EIO), e
            else:
                raise AssertionError("read %d bytes its credentials may not read%s" %
                                     (len(got), " (the other pod's cached copy)"
                                      if got == secret else ""))
        else:
            assert read(os.path.join(b.mnt, "private/secret")) == secret
        st = b.stats()
        assert st["backend"]["get"]["requests"] + st["backend"]["head"]["requests"] >= 1, \
            "the other credentials were served from the cache without asking the server"
        assert st["ssd"]["hits"] == 0, "a cache hit for other credentials: %s" % st["ssd"]
        assert len(source_dirs(os.path.join(ctx.work, "node-cache"))) == 2
    finally:
        for m in (a, a2, b):
            m.umount()


def t_other_credentials_never_upload_pending_writes(ctx):
    """Writes a killed mount left to upload are uploaded by the next mount
    of that mountpoint with the same credentials, never by one with other
    credentials (which has a cache of its own)."""
    if ctx.bucket.kind != "moto":
        return "skip"  # RGW would refuse the other user's upload anyway
    cache = os.path.join(ctx.work, "node-cache")
    conf = {"ssd": {"dir": cache}, "writeback": {"delay": "60s"}}
    a = ctx.mount("pod", conf)
    a.mount()
    write(os.path.join(a.mnt, "pending"), b"from a")
    kill9(a)
    b = ctx.mount("pod", conf)  # the same mountpoint, so the same owner id
    b.extra_env = other_user(ctx)
    b.mount()
    try:
        r = subprocess.run([b.tierfs, "flush", b.mnt], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert b.stats()["writeback"]["uploads"] == 0
        assert bucket_get(ctx.bucket, "pending") is None, "uploaded with other credentials"
        assert not os.path.exists(os.path.join(b.mnt, "pending")), "sees the other mount's write"
        b.umount()
        a.mount()
        wait_bucket(ctx.bucket, "pending", b"from a", 60)
    finally:
        a.umount()
        b.umount()


TESTS = [
    ("second_pod_reads_from_the_shared_tier", t_second_pod_reads_from_the_shared_tier),
    ("concurrent_readers_and_shared_eviction", t_concurrent_readers_and_shared_eviction),
    ("each_mount_uploads_its_own_writes", t_each_mount_uploads_its_own_writes),
    ("other_credentials_never_read_the_cache", t_other_credentials_never_read_the_cache),
    ("other_credentials_never_upload_pending_writes",
     t_other_credentials_never_upload_pending_writes),
]


def main():
    return run_suite("shared", TESTS)

if __name__ == "__main__":
    sys.exit(main())
