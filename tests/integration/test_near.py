#!/usr/bin/env python3
"""test_near.py - a copy of the bucket in the cluster ([near],
backends/near.h): the suite's server is far (moto or Ceph RGW), a second
moto server on loopback is near, and several tierfs mounts with their own
SSD tiers stand in for the nodes of a job.

With --extended, also the long tests: four nodes over a bigger dataset
with near a second Ceph RGW (long_epoch_four_nodes), and a near that
answers too slowly (slow_near).

usage: test_near.py TIERFS --backend moto|rgw [--only NAME[,NAME...]] [--extended]
"""
import hashlib
import os
import random
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "faults"))
from test_mount import BUCKET, Bucket, poll, read, run_suite  # noqa: E402


def data_for(key, size):
    """Bytes unique at every offset (random, seeded by the key), so that a
    range served from the wrong offset never compares equal (issue 31:
    a repeated 32-byte pattern hid copies shifted by 1 MiB)."""
    seed = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big")
    return random.Random(seed).randbytes(size)


def dataset(bucket, n=80, prefix="ds"):
    rnd = random.Random(5)
    files = {}
    for i in range(n):
        key = "%s/c%d/img_%04d.jpg" % (prefix, i % 4, i)
        files[key] = data_for(key, rnd.randrange(20_000, 200_000))
        bucket.put(key, files[key])
    return files


class Cluster:
    """The near store and the mounts of the 'nodes'."""

    def __init__(self, ctx, kind="moto", near=None):
        """near: a Bucket to keep the copies in (under copies/) instead of
        a server of its own (the suite's server, to test its S3)."""
        self.ctx = ctx
        self.near = near
        if near is None:
            self.near = Bucket(kind, os.path.join(ctx.work, "near-server"))
            ctx.cleanups.append(self.near.close)

    def node(self, name, ttl="forever", extra=None, endpoint=None, env=None, source=None):
        conf = {
            "near": {"bucket": BUCKET, "prefix": "copies/",
                     "endpoint": endpoint or self.near.env["TFS_S3_ENDPOINT"],
                     "connect_timeout": "500ms", "retries": "0",
                     "breaker_errors": "3", "retry_after": "1h"},
            "cache": {"block_size": "1M", "metadata_ttl": ttl},
        }
        for sec, kv in (extra or {}).items():
            conf.setdefault(sec, {}).update(kv)
        m = self.ctx.mount(name, conf, source=source)
        m.extra_env = env or {}
        return m.mount()


def near_stats(m):
    return m.stats()["backend"]["near"]


def far_get(m):
    g = near_stats(m)["far"]["get"]
    return g["requests"], g["payload_bytes"]


def read_all(m, keys, files, threads=4):
    """Read `keys` on mount m with `threads` threads; every byte checked."""
    errors = []
    nxt = [0]
    lock = threading.Lock()

    def worker():
        while True:
            with lock:
                i = nxt[0]
                nxt[0] += 1
            if i >= len(keys):
                return
            try:
                if read(os.path.join(m.mnt, keys[i])) != files[keys[i]]:
                    errors.append(keys[i] + ": wrong bytes")
            except OSError as e:
                errors.append("%s: %s" % (keys[i], e))

    ts = [threading.Thread(target=worker) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors[:5]


def copies_settled(m):
    st = near_stats(m)
    # every outcome a queued copy can have, those of the checks before
    # the upload (docs/cluster.md, "Integrity") included
    done = st["copies"] + st["copies_existing"] + st["copies_dropped"] + \
        st["copies_failed"] + st["copies_changed"] + st["copies_mismatched"] + \
        st["copies_unverified"]
    return done >= st["copies_queued"]


SECRET = "copies/tierfs-near-secret"  # the cluster secret (backends/near_key.h)


def near_keys(near, secret=False):
    """The objects under near's prefix: the copies, and with secret=True
    the secret too."""
    keys = []
    for page in near.s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET,
                                                                   Prefix="copies/"):
        keys += [o["Key"] for o in page.get("Contents", []) if secret or o["Key"] != SECRET]
    return keys


def t_one_copy_from_far(ctx):
    """Four nodes read a quarter each at once (as DistributedSampler's
    ranks do), then another quarter each: the dataset crosses from far
    once in all, and the second epoch reads no byte from far."""
    files = dataset(ctx.bucket)
    total = sum(len(v) for v in files.values())
    cl = Cluster(ctx)
    nodes = [cl.node("n%d" % i) for i in range(4)]
    keys = sorted(files)
    random.Random(1).shuffle(keys)
    quarters = [keys[i::4] for i in range(4)]
    ts = [threading.Thread(target=read_all, args=(nodes[i], quarters[i], files))
          for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for m in nodes:
        poll(lambda: copies_settled(m), what="the copies to near")
    assert len(near_keys(cl.near)) == len(files), "one copy of each object in near"
    epoch1 = [far_get(m) for m in nodes]
    for i in range(4):
        read_all(nodes[i], quarters[(i + 1) % 4], files)
    far_bytes = 0
    for i, m in enumerate(nodes):
        reqs, nbytes = far_get(m)
        far_bytes += nbytes
        print("    node %d: far GETs %d, %d bytes; near %s" % (
            i, reqs, nbytes, {k: near_stats(m)[k] for k in ("hits", "misses", "copies")}))
        assert (reqs, nbytes) == epoch1[i], "the second epoch read far on node %d" % i
        assert near_stats(m)["hits"] >= len(quarters[(i + 1) % 4])
    assert far_bytes <= 1.2 * total, "far bytes %d for a dataset of %d" % (far_bytes, total)


def t_near_down_mid_epoch(ctx):
    """Near goes away halfway: the epoch ends byte-exact from far, and the
    breaker stops asking near."""
    files = dataset(ctx.bucket, n=40)
    cl = Cluster(ctx)
    a = cl.node("a")
    keys = sorted(files)
    read_all(a, keys, files)
    poll(lambda: copies_settled(a), what="the copies to near")
    b = cl.node("b")
    read_all(b, keys[:20], files)
    assert near_stats(b)["hits"] >= 20
    cl.near.stop_server()
    read_all(b, keys[20:], files)
    st = near_stats(b)
    assert st["breaker_opens"] == 1, st
    assert st["errors"] >= 1, st
    assert st["skipped_breaker_open"] >= 1, st


def t_far_down_near_serves_known_versions(ctx):
    """Far goes away: a node whose metadata is cached (metadata_ttl
    forever) from HEADs of far (its lookups: the far check that lets near
    serve it) reads what near holds; what near lacks fails with EIO."""
    if ctx.bucket.kind == "local":
        return "skip"
    files = dataset(ctx.bucket, n=30)
    cl = Cluster(ctx)
    a = cl.node("a")
    keys = sorted(files)
    read_all(a, keys[:20], files)
    poll(lambda: copies_settled(a), what="the copies to near")
    b = cl.node("b", extra={"cache": {"list_ahead": "false"}})  # each lookup a HEAD
    for k in keys:
        os.stat(os.path.join(b.mnt, k))  # metadata cached, no data
    ctx.bucket.stop_server()
    read_all(b, keys[:20], files)
    assert near_stats(b)["hits"] >= 20
    for k in keys[20:]:
        try:
            read(os.path.join(b.mnt, k))
            raise AssertionError("%s read with far down and no copy" % k)
        except OSError as e:
            assert e.errno == 5, e


def t_rewritten_object_not_stale(ctx):
    """An object rewritten in far is read in its new version once the
    metadata TTL has passed, never the old copy near holds."""
    key = "mut/obj.bin"
    old, new = data_for("old", 50_000), data_for("new", 60_000)
    ctx.bucket.put(key, old)
    cl = Cluster(ctx)
    a = cl.node("a", ttl="1s")
    assert read(os.path.join(a.mnt, key)) == old
    poll(lambda: near_stats(a)["copies"] == 1, what="the copy to near")
    ctx.bucket.put(key, new)
    b = cl.node("b", ttl="1s")
    seen_new = [False]

    def current():
        got = read(os.path.join(b.mnt, key))
        assert got in (old, new), "a mix of versions"
        seen_new[0] = got == new
        return seen_new[0]
    poll(current, what="the new version")
    poll(lambda: copies_settled(b), what="the copy of the new version")
    assert len(near_keys(cl.near)) == 2, "one copy per version"
    for _ in range(3):
        assert read(os.path.join(b.mnt, key)) == new


def t_gc_keeps_the_newest_copies_under_a_size(ctx):
    """`tierfs near gc --max-size` deletes the copies made longest ago
    until the rest fit, and nothing else: other objects in near's prefix,
    objects named like a copy but not tagged as one, and the source bucket
    stay; a copy of the naming scheme before (its own metadata) goes.
    Without a near prefix it refuses, unless told the bucket holds only
    copies."""
    import subprocess
    import time
    files = dataset(ctx.bucket, n=24)
    cl = Cluster(ctx)
    a = cl.node("a")
    keys = sorted(files)
    # The oldest objects: one shaped like a copy but untagged, one old copy.
    forged = "copies/%s/forged.bin" % ("ab" * 16)
    legacy = "copies/%s/legacy.bin" % ("cd" * 8)
    cl.near.s3.put_object(Bucket=BUCKET, Key=forged, Body=unique("forged", 400_000))
    cl.near.s3.put_object(Bucket=BUCKET, Key=legacy, Body=b"old", Metadata={
        "tierfs-key": "legacy.bin", "tierfs-etag": '"0"'})
    cl.near.s3.put_object(Bucket=BUCKET, Key="%s/x" % ("ef" * 16), Body=b"not ours")
    r = subprocess.run([ctx.tierfs, "near", "-c", a.conf, "-o", "near.prefix=", "gc",
                        "--max-size", "0"], env=a.env(), capture_output=True, text=True,
                       timeout=60)
    assert r.returncode != 0 and "prefix is empty" in r.stderr, (r.stdout, r.stderr)
    r = subprocess.run([ctx.tierfs, "near", "-c", a.conf, "-o", "near.prefix=", "gc",
                        "--max-size", "0", "--whole-bucket"], env=a.env(), capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0 and "deleted 0 copies" in r.stdout, (r.stdout, r.stderr)
    assert "not tagged as a copy" in r.stderr, r.stderr
    t = time.time()
    poll(lambda: time.time() >= int(t) + 1.05, what="the next second")  # LastModified: seconds
    read_all(a, keys[:12], files)
    poll(lambda: copies_settled(a) and near_stats(a)["copies"] == 12, what="the first copies")
    t = time.time()
    poll(lambda: time.time() >= int(t) + 1.05, what="the next second")  # LastModified: seconds
    read_all(a, keys[12:], files)
    poll(lambda: copies_settled(a) and near_stats(a)["copies"] == 24, what="the last copies")
    cl.near.s3.put_object(Bucket=BUCKET, Key="copies/not-a-copy.txt", Body=b"keep me")
    newer = sum(len(files[k]) for k in keys[12:])
    r = subprocess.run([ctx.tierfs, "near", "-c", a.conf, "gc", "--max-size", str(newer)],
                       env=a.env(), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    # others: not-a-copy.txt, the secret, the forged copy
    assert "deleted 13 copies" in r.stdout and "3 other objects left alone" in r.stdout, r.stdout
    left = near_keys(cl.near, secret=True)
    stay = ["copies/not-a-copy.txt", SECRET, forged]
    assert all(k in left for k in stay) and legacy not in left, left
    kept = sorted(k.split("/", 2)[2] for k in left if k not in stay)
    assert kept == sorted(keys[12:]), "the newest copies stay"
    far = ctx.bucket.s3.list_objects_v2(Bucket=BUCKET, Prefix=ctx.bucket.prefix)
    assert far["KeyCount"] == len(files), "gc touched far"
    # A second run has nothing to do.
    r = subprocess.run([ctx.tierfs, "near", "-c", a.conf, "gc", "--max-size", str(newer)],
                       env=a.env(), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "deleted 0 copies" in r.stdout, (r.stdout, r.stderr)


def t_write_through_copies_uploads_to_near(ctx):
    """near.write_through: a file written on one node is uploaded to far
    and copied to near, so another node reads it without touching far."""
    cl = Cluster(ctx)
    a = cl.node("a", extra={"near": {"write_through": "true"}})
    data = data_for("ckpt", 300_000)
    path = os.path.join(a.mnt, "ckpt/step-100.pt")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    import subprocess
    r = subprocess.run([ctx.tierfs, "flush", a.mnt], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    poll(lambda: near_stats(a)["copies_write_through"] == 1 and copies_settled(a),
         what="the write-through copy (and none of the directory marker)")
    assert near_stats(a)["copies"] == 1, near_stats(a)
    b = cl.node("b")
    assert read(os.path.join(b.mnt, "ckpt/step-100.pt")) == data
    assert near_stats(b)["hits"] >= 1 and far_get(b) == (0, 0), near_stats(b)


def t_metrics_of_a_near_mount(ctx):
    """The near counters reach Prometheus: every documented tierfs_near_
    family is scraped from a mount with [near], with the values of
    tierfs stats."""
    from test_ops import documented, parse, scrape
    files = dataset(ctx.bucket, n=12)
    cl = Cluster(ctx)
    a = cl.node("a", extra={"metrics": {"listen": "127.0.0.1:0"}})
    keys = sorted(files)
    read_all(a, keys, files)
    poll(lambda: copies_settled(a) and near_stats(a)["copies"] == len(keys),
         what="the copies to near")
    types, samples = parse(scrape(a))
    want = {n for n in documented() if n.startswith("tierfs_near_")}
    assert len(want) >= 10, want
    missing = sorted(want - set(types))
    assert not missing, "documented but not scraped: %s" % missing
    got = {n: v for (n, _), v in samples.items() if n.startswith("tierfs_near_")}
    st = near_stats(a)
    assert got["tierfs_near_misses_total"] == st["misses"] == len(keys), (got, st)
    assert got["tierfs_near_copies_total"] == len(keys), got
    assert got["tierfs_near_far_bytes_total"] == sum(len(v) for v in files.values()), got


def t_near_overlapping_the_source_is_refused(ctx):
    """Copies must never land among far's objects (gc deletes copies),
    however the endpoint is spelled (scheme and host case, default port,
    trailing slash)."""
    ep = ctx.bucket.env["TFS_S3_ENDPOINT"]
    spellings = [(ep, ep), (ep, ep.upper().replace("HTTP://", "HTTP://") + "/"),
                 ("http://LOCALHOST", "http://localhost:80"),
                 ("https://127.0.0.1", "HTTPS://127.0.0.1:443/")]
    for i, (far, near) in enumerate(spellings):
        conf = {"near": {"bucket": BUCKET, "endpoint": near}, "backend": {"endpoint": far}}
        m = ctx.mount("overlap%d" % i, conf)
        try:
            m.mount()
            raise AssertionError("mounted with near %s over the source %s" % (near, far))
        except AssertionError as e:
            assert "overlaps the source" in str(e), e


def unique(name, size):
    """Bytes that differ at every offset and between names."""
    return random.Random(name).randbytes(size)


def read_errno(path):
    try:
        read(path)
    except OSError as e:
        return e.errno
    return 0


LISTER = "tierfs-lister"  # an access key that may LIST but not read private/


def t_restricted_credentials_never_read_through_near(ctx):
    """A LIST is no permission to read: credentials that far lets list
    the bucket but refuses GET and HEAD of private/ (a bucket policy,
    played by a proxy in front of moto) get EACCES for private/secret.bin
    through near, as without near, after a mount with read rights copied
    it; what they may read is still served by near."""
    if ctx.bucket.kind != "moto":
        return "skip"  # the proxy plays the policy for moto, which takes any key
    from s3_policy_proxy import PolicyProxy
    secret, public = unique("secret", 300_000), unique("public", 200_000)
    ctx.bucket.put("private/secret.bin", secret)
    ctx.bucket.put("public/open.bin", public)
    proxy = PolicyProxy(ctx.bucket.env["TFS_S3_ENDPOINT"],
                        deny=lambda method, path, key: key == LISTER and
                        method in ("GET", "HEAD") and "/private/" in path)
    ctx.cleanups.append(proxy.close)
    far = {"backend": {"endpoint": proxy.endpoint}}
    cl = Cluster(ctx)
    a = cl.node("reader", extra=far)
    assert read(os.path.join(a.mnt, "private/secret.bin")) == secret
    assert read(os.path.join(a.mnt, "public/open.bin")) == public
    poll(lambda: copies_settled(a) and near_stats(a)["copies"] == 2, what="the copies to near")
    lister = {"AWS_ACCESS_KEY_ID": LISTER}
    plain = ctx.mount("plain", far)
    plain.extra_env = lister
    plain.mount()
    assert os.listdir(os.path.join(plain.mnt, "private")) == ["secret.bin"]
    assert read_errno(os.path.join(plain.mnt, "private/secret.bin")) == 13, "far lets it read"
    b = cl.node("lister", extra=far, env=lister)
    assert os.listdir(os.path.join(b.mnt, "private")) == ["secret.bin"]
    assert read_errno(os.path.join(b.mnt, "private/secret.bin")) == 13, \
        "read through near what far refuses"
    assert read(os.path.join(b.mnt, "public/open.bin")) == public
    st = near_stats(b)
    assert st["hits"] >= 1 and st["far_refused"] >= 1, st
    assert far_get(b) == (0, 0), "public/ was not served by near"


def t_hostile_far_can_neither_read_nor_plant_copies(ctx):
    """Two sources share near: the victim's far (the suite's server) and a
    hostile far (a proxy over another prefix that reports the victim's
    ETags for its own objects).  The hostile mount reads its own bytes,
    never the victim's copy; and the copy it makes is never served to the
    victim.  The victim's "plant" is a multipart upload, so its ETag is no
    MD5 the hostile bytes could be checked against: the hostile copy is
    verified by its own range digests and reaches near, and only its name
    (an HMAC of its source) keeps it from the victim."""
    if ctx.bucket.kind != "moto":
        return "skip"  # the proxy rewrites a signed header (If-Match): moto does not check
    from s3_policy_proxy import PolicyProxy
    s3, pre = ctx.bucket.s3, ctx.bucket.prefix
    evil = "evil%d/" % random.randrange(1 << 30)
    data = {}
    for name in ("weights", "plant"):
        size = 150_000 if name == "weights" else 6 << 20
        data[name] = unique(name, size)
        data["evil-" + name] = unique("evil-" + name, size)
        s3.put_object(Bucket=BUCKET, Key=evil + "model/%s.bin" % name, Body=data["evil-" + name])
    ctx.bucket.put("model/weights.bin", data["weights"])
    up = s3.create_multipart_upload(Bucket=BUCKET, Key=pre + "model/plant.bin")
    parts = []
    for i, (a, b) in enumerate(((0, 5 << 20), (5 << 20, 6 << 20)), 1):
        r = s3.upload_part(Bucket=BUCKET, Key=pre + "model/plant.bin", UploadId=up["UploadId"],
                           PartNumber=i, Body=data["plant"][a:b])
        parts.append({"PartNumber": i, "ETag": r["ETag"]})
    s3.complete_multipart_upload(Bucket=BUCKET, Key=pre + "model/plant.bin",
                                 UploadId=up["UploadId"], MultipartUpload={"Parts": parts})

    def etag(key):
        return s3.head_object(Bucket=BUCKET, Key=key)["ETag"].strip('"')
    lies = {etag(evil + "model/%s.bin" % n): etag(pre + "model/%s.bin" % n)
            for n in ("weights", "plant")}
    proxy = PolicyProxy(ctx.bucket.env["TFS_S3_ENDPOINT"], etags=lies)
    ctx.cleanups.append(proxy.close)
    cl = Cluster(ctx)
    victim = cl.node("victim")
    assert read(os.path.join(victim.mnt, "model/weights.bin")) == data["weights"]
    poll(lambda: copies_settled(victim) and near_stats(victim)["copies"] == 1,
         what="the victim's copy")
    hostile = cl.node("hostile", extra={"backend": {"endpoint": proxy.endpoint}},
                      source="s3://%s/%s" % (BUCKET, evil.rstrip("/")))
    wrong = []
    got = read(os.path.join(hostile.mnt, "model/weights.bin"))
    if got != data["evil-weights"] or near_stats(hostile)["hits"]:
        wrong.append("the hostile far read the victim's copy: %s" % (got == data["weights"]))
    # The other way: the hostile mount copies first, the victim reads after.
    assert read(os.path.join(hostile.mnt, "model/plant.bin")) == data["evil-plant"]
    poll(lambda: copies_settled(hostile), what="the hostile copy")
    assert near_stats(hostile)["copies"] >= 1, near_stats(hostile)  # it reached near
    later = cl.node("victim-later")
    got = read(os.path.join(later.mnt, "model/plant.bin"))
    if got != data["plant"]:
        wrong.append("the victim read a planted copy: %s" % (got == data["evil-plant"]))
    assert not wrong, wrong


def t_nodes_agree_on_the_near_secret(ctx):
    """Nodes that mount at once over a near with no secret yet make one
    between them (a conditional PUT, If-None-Match: *): one secret
    object, and each reads the other's copies.  near.key names copies
    otherwise.  Near is the suite's own server (copies/ beside the
    source's prefix), so the condition is tried on moto and on RGW."""
    if ctx.bucket.kind == "local":
        return "skip"
    files = dataset(ctx.bucket, n=12)
    keys = sorted(files)
    cl = Cluster(ctx, near=ctx.bucket)
    nodes = [None, None]

    def start(i):
        nodes[i] = cl.node("s%d" % i)
    ts = [threading.Thread(target=start, args=(i,)) for i in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert all(nodes), "a mount failed"
    secrets = [k for k in near_keys(cl.near, secret=True) if k == SECRET]
    assert len(secrets) == 1, near_keys(cl.near, secret=True)
    read_all(nodes[0], keys[:6], files)
    read_all(nodes[1], keys[6:], files)
    for m in nodes:
        poll(lambda: copies_settled(m), what="the copies")
    read_all(nodes[0], keys[6:], files)
    read_all(nodes[1], keys[:6], files)
    for m in nodes:
        assert near_stats(m)["hits"] >= 6, near_stats(m)
    keyed = cl.node("keyed", extra={"near": {"key": "a-cluster-key-of-our-own"}})
    read_all(keyed, keys, files)
    assert near_stats(keyed)["hits"] == 0, "near.key named the copies as the stored secret"


def t_long_epoch_four_nodes(ctx):
    """(--extended) Four nodes, near a second Ceph RGW (or moto), 2,000
    files and a 64 MiB object read in parts (its copy is assembled in the
    spool from its reader's bytes): a quarter each at once crosses from
    far about once; then a whole shuffled epoch on every node reads no
    byte from far."""
    if not ctx.extended:
        return "skip"
    if ctx.bucket.kind == "local":
        return "skip"
    rnd = random.Random(23)
    files = {}
    for i in range(2000):
        key = "long/c%02d/img_%05d.jpg" % (i % 20, i)
        files[key] = data_for(key, rnd.randrange(4_000, 60_000))
        ctx.bucket.put(key, files[key])
    big = "long/shard-00000.tar"
    files[big] = data_for(big, 64 << 20)
    ctx.bucket.put(big, files[big])
    total = sum(len(v) for v in files.values())
    cl = Cluster(ctx, "rgw" if ctx.bucket.kind == "rgw" else "moto")
    extra = {"near": {"copy_budget": "96M", "copiers": "4"}}
    nodes = [cl.node("n%d" % i, extra=extra) for i in range(4)]
    keys = sorted(files)
    random.Random(2).shuffle(keys)
    quarters = [keys[i::4] for i in range(4)]
    ts = [threading.Thread(target=read_all, args=(nodes[i], quarters[i], files, 8))
          for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for m in nodes:
        poll(lambda: copies_settled(m), timeout=300, what="the copies to near")
    stats = [near_stats(m) for m in nodes]
    for st in stats:
        assert st["copy_budget_used"] == 0, "budget left charged: %s" % st
        assert st["copies_failed"] == 0 and st["copies_dropped"] == 0, st
    assert sum(st["copies_spooled"] for st in stats) >= 1, "the big object was not spooled"
    assert sum(st["copy_far_rereads"] for st in stats) == 0, "a copy read far again"
    assert len(near_keys(cl.near)) == len(files), "one copy of each object in near"
    epoch1 = [far_get(m) for m in nodes]
    far_bytes = sum(b for _, b in epoch1)
    print("    epoch 1: far bytes %d for %d (%.2fx)" % (far_bytes, total, far_bytes / total))
    assert far_bytes <= 1.2 * total, (far_bytes, total)
    ts = []
    for i in range(4):
        order = sorted(files)
        random.Random(10 + i).shuffle(order)
        ts.append(threading.Thread(target=read_all, args=(nodes[i], order, files, 8)))
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for i, m in enumerate(nodes):
        assert far_get(m) == epoch1[i], "the second epoch read far on node %d" % i


def t_slow_near(ctx):
    """(--extended) Near answers its GETs 20 s late (a fault proxy in
    front of it): every read goes to far past near.low_speed_time, the
    epoch is byte-exact, the failures are counted and the breaker opens,
    so the epoch does not wait on near for every file."""
    if not ctx.extended:
        return "skip"
    from faultlib import FaultProxy
    files = dataset(ctx.bucket, n=200)
    total = sum(len(v) for v in files.values())
    cl = Cluster(ctx)
    # near.key: the secret is not read from near, whose GETs are slow
    # (a mount that cannot read it leaves near alone from the start)
    key = {"key": "slow-near-cluster-key"}
    a = cl.node("a", extra={"near": key})
    keys = sorted(files)
    read_all(a, keys, files)
    poll(lambda: copies_settled(a), what="the copies to near")
    assert near_stats(a)["copies"] == len(files)
    proxy = FaultProxy(cl.near.env["TFS_S3_ENDPOINT"], ctx.work, "slow-near",
                       args=["--seed", "23", "--rate", "latency=1", "--methods", "GET",
                             "--latency-ms", "20000", "--latency-where", "headers"])
    ctx.cleanups.insert(0, proxy.stop)
    b = cl.node("b", endpoint=proxy.endpoint,
                extra={"near": dict(key, low_speed_time="1s", retry_after="1h")})
    t0 = time.monotonic()
    random.Random(3).shuffle(keys)
    read_all(b, keys, files, threads=8)
    took = time.monotonic() - t0
    st = near_stats(b)
    reqs, nbytes = far_get(b)
    print("    slow near: epoch %.1fs; near %s; far GETs %d, %d bytes" % (
        took, {k: st[k] for k in ("hits", "errors", "breaker_opens", "skipped_breaker_open")},
        reqs, nbytes))
    assert st["hits"] == 0, st
    assert st["errors"] >= 3, st
    # the reads already waiting on near when the breaker opened (8
    # threads) fail too, and neither open it again nor do the copies'
    # HEADs (not delayed) close it
    assert st["breaker_opens"] == 1, st
    assert st["errors"] <= 3 + 8, st
    assert st["skipped_breaker_open"] >= len(files) - 8 - st["errors"], st
    assert nbytes >= total, "every file read from far"
    assert took < 60, "the epoch waited on near: %.1fs" % took


TESTS = [
    ("one_copy_from_far", t_one_copy_from_far),
    ("near_down_mid_epoch", t_near_down_mid_epoch),
    ("far_down_near_serves_known_versions", t_far_down_near_serves_known_versions),
    ("rewritten_object_not_stale", t_rewritten_object_not_stale),
    ("gc_keeps_the_newest_copies_under_a_size", t_gc_keeps_the_newest_copies_under_a_size),
    ("near_overlapping_the_source_is_refused", t_near_overlapping_the_source_is_refused),
    ("restricted_credentials_never_read_through_near",
     t_restricted_credentials_never_read_through_near),
    ("hostile_far_can_neither_read_nor_plant_copies", t_hostile_far_can_neither_read_nor_plant_copies),
    ("nodes_agree_on_the_near_secret", t_nodes_agree_on_the_near_secret),
    ("write_through_copies_uploads_to_near", t_write_through_copies_uploads_to_near),
    ("metrics_of_a_near_mount", t_metrics_of_a_near_mount),
    ("long_epoch_four_nodes", t_long_epoch_four_nodes),
    ("slow_near", t_slow_near),
]


def main():
    return run_suite("near", TESTS)


if __name__ == "__main__":
    sys.exit(main())
