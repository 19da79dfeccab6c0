#!/usr/bin/env python3
"""test_mount.py - the read path through a real FUSE mount.

    test_mount.py TIERFS --backend local|moto [--only NAME]

Each test mounts a bucket (a local directory, or a bucket on a moto_server
started by tests/harness/moto.sh on 127.0.0.1), checks what a training job
sees, and unmounts.  Counters come from `tierfs stats --json`.  Prints one
line per test and ends with "mount: N passed, N failed".
"""
import argparse
import concurrent.futures
import hashlib
import json
import os
import random
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
HARNESS = os.path.join(HERE, "..", "harness")
BUCKET = os.environ.get("TFS_TEST_BUCKET", "tierfs-test")


def poll(cond, timeout=20.0, what="condition"):
    """Wait until cond() is truthy; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(0.05)


def data_for(name, size):
    """Deterministic bytes for an object."""
    out = bytearray()
    seed = hashlib.sha256(name.encode()).digest()
    i = 0
    while len(out) < size:
        out += hashlib.sha256(seed + i.to_bytes(8, "little")).digest()
        i += 1
    return bytes(out[:size])


class Bucket:
    """The ground truth: write objects behind tierfs's back."""

    def __init__(self, kind, work):
        self.kind = kind
        self.work = work
        self.server_dir = None
        if kind == "local":
            self.root = os.path.join(work, "bucket")
            os.makedirs(self.root)
            self.source = self.root
            self.env = {}
        else:
            # moto, or Ceph RGW (per-user access: test_shared.py)
            self.server_dir = os.path.join(work, kind)
            os.makedirs(self.server_dir)
            self.start_server()
            self.prefix = "ds%d/" % random.randrange(1 << 30)
            self.source = "s3://%s/%s" % (BUCKET, self.prefix.rstrip("/"))

    def start_server(self):
        subprocess.run([os.path.join(HARNESS, self.kind + ".sh"), "start", self.server_dir],
                       check=True, stdout=subprocess.DEVNULL)
        env = {}
        with open(os.path.join(self.server_dir, "env")) as f:
            for line in f:
                line = line.strip()
                if line.startswith("export "):
                    k, v = line[7:].split("=", 1)
                    env[k] = v.strip("'\"")
        self.env = env
        import boto3
        os.environ.pop("AWS_CA_BUNDLE", None)
        self.s3 = boto3.client("s3", endpoint_url=env["TFS_S3_ENDPOINT"], region_name="us-east-1",
                               aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
                               aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"])

    def stop_server(self):
        if self.server_dir:
            subprocess.run([os.path.join(HARNESS, self.kind + ".sh"), "stop", self.server_dir],
                           stdout=subprocess.DEVNULL)

    def put(self, key, data):
        if self.kind == "local":
            path = os.path.join(self.root, key)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            tmp = path + ".tmp-test"
            with open(tmp, "wb") as f:
                f.write(data)
            os.rename(tmp, path)
        else:
            self.s3.put_object(Bucket=BUCKET, Key=self.prefix + key, Body=data)

    def put_meta(self, key, data, meta):
        """An object with x-amz-meta-* headers, as s3fs writes them."""
        self.s3.put_object(Bucket=BUCKET, Key=self.prefix + key, Body=data, Metadata=meta)

    def delete(self, key):
        if self.kind == "local":
            os.unlink(os.path.join(self.root, key))
        else:
            self.s3.delete_object(Bucket=BUCKET, Key=self.prefix + key)

    def close(self):
        self.stop_server()


class Mount:
    def __init__(self, tierfs, bucket, work, name, conf_extra=None, opts=None, source=None):
        self.tierfs = tierfs
        self.bucket = bucket
        self.source = source or bucket.source
        self.mnt = os.path.join(work, "mnt-" + name)
        os.makedirs(self.mnt, exist_ok=True)
        self.cache = os.path.join(work, "cache-" + name)
        self.conf = os.path.join(work, name + ".conf")
        conf = {
            "ram": {"size": "64M"},
            "ssd": {"dir": self.cache, "size": "1G"},
            "cache": {"block_size": "1M", "metadata_ttl": "forever"},
            "prefetch": {"workers": "4", "readahead": "4M"},
            "log": {"level": "info", "file": os.path.join(work, name + ".log")},
            "backend": {"retries": "2", "retry_base": "10ms", "retry_max": "50ms",
                        "connect_timeout": "1s"},
        }
        if bucket.kind != "local":
            conf["backend"]["endpoint"] = bucket.env["TFS_S3_ENDPOINT"]
        for sec, kv in (conf_extra or {}).items():
            conf.setdefault(sec, {}).update(kv)
        with open(self.conf, "w") as f:
            for sec, kv in conf.items():
                f.write("[%s]\n" % sec)
                for k, v in kv.items():
                    f.write("%s = %s\n" % (k, v))
        self.opts = opts or []
        self.logfile = conf["log"]["file"]
        self.extra_env = {}  # e.g. other credentials (test_shared.py)

    def env(self):
        e = dict(os.environ)
        e.update(self.bucket.env)
        e.update(self.extra_env)
        e.pop("AWS_CA_BUNDLE", None)
        return e

    def mount(self):
        cmd = [self.tierfs, "mount", "-c", self.conf] + self.opts + [self.source, self.mnt]
        r = subprocess.run(cmd, env=self.env(), capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            raise AssertionError("mount failed (%d): %s %s\n%s" % (r.returncode, r.stdout, r.stderr,
                                                                  self.log_tail()))
        poll(lambda: os.path.ismount(self.mnt), 10, "the mount to appear")
        return self

    def pid(self):
        return self.stats()["pid"]

    def umount(self):
        if os.path.ismount(self.mnt):
            r = subprocess.run([self.tierfs, "umount", self.mnt], capture_output=True, text=True,
                               timeout=60)
            if r.returncode != 0:
                subprocess.run(["fusermount3", "-uz", self.mnt], capture_output=True)
                raise AssertionError("umount failed: " + r.stderr)

    def stats(self):
        r = subprocess.run([self.tierfs, "stats", "--json", self.mnt], capture_output=True, text=True,
                           timeout=30)
        if r.returncode != 0:
            raise AssertionError("stats failed: " + r.stderr)
        return json.loads(r.stdout)

    def gets(self):
        return self.stats()["backend"]["get"]["requests"]

    def log_tail(self):
        try:
            with open(self.logfile) as f:
                return "".join(f.readlines()[-20:])
        except OSError:
            return "(no log)"


def process_gone(pid):
    """Whether `pid` has exited (a zombie counts): it may go between any
    two looks at /proc."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def read(path):
    with open(path, "rb") as f:
        return f.read()


# ---------------------------------------------------------------- tests

def populate(bucket, n=120, big=None):
    """Objects of awkward sizes across a few directories."""
    sizes = [0, 1, 4095, 4096, 65537, (1 << 20) - 1, 1 << 20, (1 << 20) + 1, 3 * (1 << 20) + 7]
    files = {}
    for i in range(n):
        size = sizes[i] if i < len(sizes) else random.randrange(1, 300_000)
        key = "train/c%02d/img_%05d.jpg" % (i % 7, i)
        files[key] = data_for(key, size)
    files["README.txt"] = b"dataset\n"
    files["deep/a/b/c/d.bin"] = data_for("deep", 5000)
    if big:
        files["shards/big.tar"] = data_for("big", big)
    for k, v in files.items():
        bucket.put(k, v)
    return files


def t_byte_exact_and_walk(ctx):
    files = populate(ctx.bucket)
    m = ctx.mount("walk").mount()
    try:
        seen = {}
        for root, dirs, names in os.walk(m.mnt):
            for nm in names:
                p = os.path.join(root, nm)
                rel = os.path.relpath(p, m.mnt)
                st = os.stat(p)
                seen[rel] = st.st_size
        assert set(seen) == set(files), "walk differs: missing %s extra %s" % (
            sorted(set(files) - set(seen))[:5], sorted(set(seen) - set(files))[:5])
        for k, v in files.items():
            assert seen[k] == len(v), "%s: size %d, expected %d" % (k, seen[k], len(v))
            got = read(os.path.join(m.mnt, k))
            assert got == v, "%s: content differs" % k
        assert sorted(os.listdir(os.path.join(m.mnt, "train"))) == ["c%02d" % i for i in range(7)]
    finally:
        m.umount()


def t_endpoint_and_region_from_environment(ctx):
    """A config that leaves endpoint and region empty (as the example file
    does) takes them from the AWS SDKs' variables, AWS_ENDPOINT_URL_S3
    before AWS_ENDPOINT_URL and AWS_REGION before AWS_DEFAULT_REGION:
    reads are byte-exact and the log names the store, the region and
    path-style addressing (auto, with an endpoint)."""
    if ctx.bucket.kind == "local":
        return "skip"
    data = data_for("env", 3 * (1 << 20) + 4321)
    ctx.bucket.put("env/obj.bin", data)
    m = ctx.mount("env", {"backend": {"endpoint": "", "region": ""}})
    m.extra_env = {"AWS_ENDPOINT_URL_S3": ctx.bucket.env["TFS_S3_ENDPOINT"],
                   "AWS_ENDPOINT_URL": "http://127.0.0.1:1",
                   "AWS_REGION": "eu-west-2", "AWS_DEFAULT_REGION": "us-west-1"}
    m.mount()
    try:
        assert read(os.path.join(m.mnt, "env/obj.bin")) == data, "content differs"
        with open(m.logfile) as f:
            log = f.read()
        want = "via %s (path-style addressing, region eu-west-2)" % (
            ctx.bucket.env["TFS_S3_ENDPOINT"].rstrip("/"))
        assert want in log, "no '%s' in the log:\n%s" % (want, log[-2000:])
    finally:
        m.umount()


def t_random_offsets_concurrent(ctx):
    size = 24 * (1 << 20) + 12345
    data = data_for("big", size)
    ctx.bucket.put("shards/big.tar", data)
    m = ctx.mount("random").mount()
    errors = []

    def worker(seed):
        rnd = random.Random(seed)
        try:
            with open(os.path.join(m.mnt, "shards/big.tar"), "rb", buffering=0) as f:
                for _ in range(60):
                    off = rnd.randrange(0, size)
                    ln = rnd.choice([1, 100, 4096, 131072, 1 << 20, 3 << 20])
                    got = os.pread(f.fileno(), ln, off)
                    if got != data[off:off + ln]:
                        errors.append("seed %d: mismatch at %d+%d" % (seed, off, ln))
                        return
        except Exception as e:  # noqa: BLE001
            errors.append("seed %d: %r" % (seed, e))

    try:
        ts = [threading.Thread(target=worker, args=(s,)) for s in range(12)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert not errors, errors[:3]
        assert read(os.path.join(m.mnt, "shards/big.tar")) == data
    finally:
        m.umount()


def t_warm_restart_zero_gets(ctx):
    files = populate(ctx.bucket, n=60)
    m = ctx.mount("warm")
    m.mount()
    try:
        for k, v in files.items():
            assert read(os.path.join(m.mnt, k)) == v
        # A background listing cut short by the unmount is done again by
        # the next mount: let them end (a loaded machine is slow here).
        poll(lambda: m.stats()["metadata"]["list_ahead_pending"] == 0,
             what="the background listings")
    finally:
        m.umount()
    m.mount()
    try:
        for k, v in files.items():
            assert read(os.path.join(m.mnt, k)) == v
        st = m.stats()
        assert st["backend"]["get"]["requests"] == 0, "warm remount made %d GETs" % st["backend"]["get"]["requests"]
        # At most one listing of the dataset's directory, plus one that a
        # background listing of the first mount started after the poll
        # above and cut short by its unmount leaves to this mount (seen
        # once under ASan: 2); a listing per file would be 60.
        assert st["backend"]["list"]["requests"] <= 2, "warm remount listed %d times" % st["backend"]["list"]["requests"]
        assert st["ssd"]["hits"] > 0
    finally:
        m.umount()


def t_sequential_read_is_one_get_per_run(ctx):
    """A cold sequential read of a big file: the read-ahead claims its
    runs before the kernel's parallel requests reach them, so every run is
    one ranged GET and no block is fetched alone (it used to be ~1 GET in
    4 for single blocks), and the read's own first block stays in RAM."""
    size = 48 << 20
    data = data_for("seq", size)
    ctx.bucket.put("seq.bin", data)
    m = ctx.mount("seq").mount()  # readahead 4M: runs of 2 blocks
    try:
        got = hashlib.sha256()
        with open(os.path.join(m.mnt, "seq.bin"), "rb", buffering=0) as f:
            while True:
                b = f.read(1 << 20)
                if not b:
                    break
                got.update(b)
        assert got.digest() == hashlib.sha256(data).digest(), "content differs"
        st = m.stats()
        blocks, run = size >> 20, 2
        gets = st["backend"]["get"]["requests"]
        # the first block alone, then the runs; two GETs of slack for a
        # kernel request that reaches a block just before its run is
        # claimed (seen once under ASan on a loaded machine: 27 for 48
        # blocks), far below the ~1 GET in 4 blocks fetched alone before
        assert gets <= 1 + blocks // run + 3, "%d GETs for %d blocks in runs of %d" % (gets, blocks, run)
        assert st["ram"]["stream_consumed"] >= blocks - 2, st["ram"]
        assert st["ram"]["blocks"] >= 1, "the first block was not kept in RAM"
    finally:
        m.umount()


def big_object(ctx, key):
    """An object of hundreds of MiB (local) or tens (moto, slow at big
    ranged GETs), random at every offset; returns its size and SHA-256."""
    size = (320 << 20) + 12345 if ctx.bucket.kind == "local" else (64 << 20) + 12345
    data = os.urandom(size)
    ctx.bucket.put(key, data)
    return size, hashlib.sha256(data).digest()


def digest_of(path):
    """SHA-256 of a file read sequentially in 1 MiB reads, as fast as the
    mount gives it."""
    h = hashlib.sha256()
    with open(path, "rb", buffering=0) as f:
        while True:
            b = f.read(1 << 20)
            if not b:
                return h.digest()
            h.update(b)


def cold_read_then_warm(ctx, name, opts, wait_for_queue):
    """Issue 32: every block a cold sequential read fetched is in the SSD
    tier once the fill queue drains, so a read after a remount (the RAM
    tier empty) and drop_caches makes no backend GET.  With
    `wait_for_queue`, `tierfs stats` must show the queue empty within
    seconds of the read; else the unmount comes at once and must drain it."""
    size, want = big_object(ctx, "shards/big.tar")
    path = lambda m: os.path.join(m.mnt, "shards/big.tar")
    m = ctx.mount(name, opts=opts).mount()
    try:
        assert digest_of(path(m)) == want, "the cold read differs from the source"
        if wait_for_queue:
            poll(lambda: m.stats()["ssd"]["fill_queue_bytes"] == 0, 20, "the fill queue to drain")
    finally:
        m.umount()
    m.mount()
    try:
        os.system("sync; echo 3 > /proc/sys/vm/drop_caches")
        assert digest_of(path(m)) == want, "the warm read differs from the source"
        st = m.stats()
        assert st["backend"]["get"]["requests"] == 0, \
            "the read after a remount made %d backend GETs (ssd: %s)" % (
                st["backend"]["get"]["requests"], st["ssd"])
        assert st["ssd"]["hit_bytes"] >= size, st["ssd"]
    finally:
        m.umount()
    # The cold mount's fills by outcome, as `tierfs stats` shows them
    # (counters start at 0 each mount: the warm mount filled nothing).
    for k in ("fill_refused_policy", "fill_refused_capacity", "fill_failed"):
        assert st["ssd"][k] == 0, (k, st["ssd"])
    assert "fill_dropped" not in st["ssd"], "dropping is off by default: %s" % st["ssd"]


def t_cold_read_cached_whole(ctx):
    """The default fill queue.  On moto only with --extended: the tiny
    queue's run below takes the same path on moto in the default check
    (moto reads slowly; the local backend runs both)."""
    if ctx.bucket.kind == "moto" and not ctx.extended:
        return "skip"
    cold_read_then_warm(ctx, "coldwarm", None, True)


def t_cold_read_cached_whole_tiny_queue(ctx):
    """A 1 MiB fill queue is full at once on any machine: readers must
    write their blocks themselves, not drop them."""
    cold_read_then_warm(ctx, "coldwarm1m", ["-o", "ssd.fill_queue=1M"], False)


def t_change_detected_after_ttl(ctx):
    ctx.bucket.put("mut/obj.txt", b"version one\n")
    m = ctx.mount("ttl", {"cache": {"metadata_ttl": "1s"}}).mount()
    p = os.path.join(m.mnt, "mut/obj.txt")
    try:
        assert read(p) == b"version one\n"
        ctx.bucket.put("mut/obj.txt", b"version two, longer\n")
        # Within the TTL the old version may be served, but never a mix;
        # after it, the new one must be.
        def current():
            got = read(p)
            assert got in (b"version one\n", b"version two, longer\n"), "mixed content %r" % got
            return got == b"version two, longer\n"
        poll(current, 15, "the new version after the TTL")
        ctx.bucket.delete("mut/obj.txt")
        poll(lambda: not os.path.exists(p), 15, "the deleted object to vanish")
    finally:
        m.umount()


def set_ttl(m, ttl):
    """Rewrite cache.metadata_ttl in the mount's config file and reload."""
    with open(m.conf) as f:
        lines = f.read().splitlines()
    lines = ["metadata_ttl = %s" % ttl if ln.startswith("metadata_ttl =") else ln for ln in lines]
    with open(m.conf, "w") as f:
        f.write("\n".join(lines) + "\n")
    r = subprocess.run([m.tierfs, "reload", m.mnt], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, "reload failed: %s %s" % (r.stdout, r.stderr)


def read_sized(path):
    """The content of `path` and its size as fstat() shows it once open."""
    with open(path, "rb") as f:
        return f.read(), os.fstat(f.fileno()).st_size


def t_open_new_version_whole(ctx):
    # The kernel caches a size for its attribute timeout; the daemon's
    # metadata may expire earlier (here: a reload to a TTL of 0, which the
    # kernel's attributes cached with a 1 h timeout do not see).  An open
    # that then finds a new version must not leave the kernel's old size
    # in force: the reads were clipped to it ("version two," of "version
    # two, longer\n").  A shorter version is checked too (the kernel cuts
    # its size after the short read).
    v1, v2, v3 = b"version one\n", b"version two, longer\n", b"v3\n"
    ctx.bucket.put("mut/obj.txt", v1)
    m = ctx.mount("ttlrace", {"cache": {"metadata_ttl": "1h"}}).mount()
    p = os.path.join(m.mnt, "mut/obj.txt")
    try:
        assert read_sized(p) == (v1, len(v1))
        ctx.bucket.put("mut/obj.txt", v2)
        set_ttl(m, "0")
        got, size = read_sized(p)
        assert got == v2, "read %r after the object became %r (size %d shown)" % (got, v2, size)
        assert size == len(v2), "fstat shows %d bytes, read %d" % (size, len(got))
        # Shorter: the kernel holds 20 bytes for an hour again.
        set_ttl(m, "1h")
        assert os.stat(p).st_size == len(v2)
        ctx.bucket.put("mut/obj.txt", v3)
        set_ttl(m, "0")
        got, size = read_sized(p)
        assert got == v3, "read %r after the object became %r (size %d shown)" % (got, v3, size)
        assert size == len(v3), "fstat shows %d bytes, read %d" % (size, len(got))
        # A handle whose version goes before its data is read moves to the
        # new version at its first read (the GET's If-Match fails): read()
        # goes on to the new version's end, not to the old size.
        set_ttl(m, "1h")
        q = os.path.join(m.mnt, "mut/other.txt")
        ctx.bucket.put("mut/other.txt", v1)
        assert os.stat(q).st_size == len(v1)
        with open(q, "rb") as f:
            ctx.bucket.put("mut/other.txt", v2)
            set_ttl(m, "0")
            got = f.read()
        assert got == v2, "an open handle read %r after the object became %r" % (got, v2)
    finally:
        m.umount()


def t_missing_is_enoent(ctx):
    ctx.bucket.put("here.txt", b"x")
    m = ctx.mount("enoent", {"writeback": {"mode": "off"}}).mount()
    try:
        for path in ["nothere.txt", "no/such/dir/file", "here.txt/child"]:
            try:
                os.stat(os.path.join(m.mnt, path))
                raise AssertionError("%s exists" % path)
            except FileNotFoundError:
                pass
            except NotADirectoryError:
                pass
        try:
            open(os.path.join(m.mnt, "here.txt"), "w")
            raise AssertionError("opened for writing")
        except OSError as e:
            # writeback.mode = off makes the mount read-only.
            assert e.errno == 30, "write open gave %s, expected EROFS" % e  # EROFS
    finally:
        m.umount()


def t_kill9_recovery(ctx):
    files = populate(ctx.bucket, n=40)
    m = ctx.mount("kill").mount()
    for k, v in list(files.items())[:20]:
        assert read(os.path.join(m.mnt, k)) == v
    # Fills are written and committed by background threads after the
    # reader has its bytes: the kill comes once they have landed.
    poll(lambda: m.stats()["ssd"]["fill_queue_bytes"] == 0, 20, "the fills to land")
    pid = m.pid()
    os.kill(pid, signal.SIGKILL)
    poll(lambda: process_gone(pid), 10, "the daemon to die")
    subprocess.run(["fusermount3", "-uz", m.mnt], capture_output=True)
    poll(lambda: not os.path.ismount(m.mnt), 10, "the dead mount to go")
    m.mount()
    try:
        for k, v in files.items():
            assert read(os.path.join(m.mnt, k)) == v, "%s differs after kill -9" % k
        st = m.stats()
        # The first 20 were cached before the kill: at most the other 20 are fetched.
        assert st["backend"]["get"]["requests"] <= 20 + 8, st["backend"]["get"]
    finally:
        m.umount()


def t_sigterm_with_open_file(ctx):
    """SIGTERM while a file is open: once the session ends the kernel sends
    no RELEASE for it, so the daemon releases the handle itself and exits
    (LeakSanitizer found the handle leaked, after a lazy unmount)."""
    ctx.bucket.put("open.bin", b"still open")
    m = ctx.mount("term").mount()
    pid = m.pid()
    f = open(os.path.join(m.mnt, "open.bin"), "rb")
    try:
        assert f.read() == b"still open"
        os.kill(pid, signal.SIGTERM)
        poll(lambda: not os.path.exists("/proc/%d" % pid) or
             open("/proc/%d/stat" % pid).read().split()[2] == "Z", 20, "the daemon to exit")
        with open(m.logfile) as lf:
            log = lf.read()
        assert "released 1 file handle(s) still open when the FUSE session ended" in log, m.log_tail()
    finally:
        try:
            f.close()
        except OSError:
            pass  # ENOTCONN: the daemon is gone
        subprocess.run(["fusermount3", "-uz", m.mnt], capture_output=True)


def rss_anon(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    return 0


_sanitizer = {}


def sanitizer(tierfs):
    """"asan" or "tsan" if TIERFS is built with --enable-sanitizers or
    --enable-tsan (it links the sanitizer's runtime), else None."""
    if tierfs not in _sanitizer:
        r = subprocess.run(["ldd", tierfs], capture_output=True, text=True)
        libs = r.stdout
        _sanitizer[tierfs] = "asan" if "libasan" in libs else "tsan" if "libtsan" in libs else None
    return _sanitizer[tierfs]


def assert_rss(ctx, rss, limit, what="RssAnon"):
    """Assert the daemon's RssAnon bound, except with a sanitized build:
    ASan keeps up to 256 MiB of freed blocks in quarantine and pads every
    block, TSan maps shadow memory, and all of it counts in RssAnon without
    being tierfs's memory.  The normal build's run of the same suite checks
    the bound (check.sh runs both)."""
    san = sanitizer(ctx.tierfs)
    if san:
        print("    %s bound not checked under %s: %.1f MiB (limit %.1f MiB)" %
              (what, san, rss / 2**20, limit / 2**20))
        return
    assert rss <= limit, "%s %.1f MiB > %.1f MiB" % (what, rss / 2**20, limit / 2**20)


def t_rss_bound_64_readers(ctx):
    n = 64
    size = 6 * (1 << 20)
    for i in range(n):
        ctx.bucket.put("rss/f%02d.bin" % i, data_for("rss%d" % i, size))
    m = ctx.mount("rss", {"ram": {"size": "32M"}, "prefetch": {"workers": "8", "readahead": "8M"}}).mount()
    pid = m.pid()
    peak = [0]
    stop = threading.Event()
    errors = []

    def sampler():
        while not stop.is_set():
            peak[0] = max(peak[0], rss_anon(pid))
            time.sleep(0.01)

    def reader(i):
        try:
            got = read(os.path.join(m.mnt, "rss/f%02d.bin" % i))
            if got != data_for("rss%d" % i, size):
                errors.append(i)
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))

    try:
        s = threading.Thread(target=sampler)
        s.start()
        ts = [threading.Thread(target=reader, args=(i,)) for i in range(n)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        stop.set()
        s.join()
        assert not errors, errors[:3]
        limit = 32 * (1 << 20) + 64 * (1 << 20)
        print("    RssAnon peak %.1f MiB (limit %.1f MiB)" % (peak[0] / 2**20, limit / 2**20))
        assert peak[0] > 0
        assert_rss(ctx, peak[0], limit, "RssAnon peak")
    finally:
        m.umount()


def t_watermark_eviction(ctx):
    for i in range(40):
        ctx.bucket.put("wm/f%02d.bin" % i, data_for("wm%d" % i, 1 << 20))
    m = ctx.mount("wm", {"ssd": {"size": "16M", "high_watermark": "90", "low_watermark": "50"},
                         "cache": {"policy": "lru"}}).mount()
    try:
        for i in range(40):
            assert read(os.path.join(m.mnt, "wm/f%02d.bin" % i)) == data_for("wm%d" % i, 1 << 20)
        cap = 16 * (1 << 20)

        def settled():
            s = m.stats()["ssd"]
            return s["evictions"] > 0 and s["used_bytes"] <= 0.9 * cap and s
        s = poll(settled, 20, "eviction below the high watermark")
        print("    ssd used %.1f MiB of %.0f MiB after %d evictions" % (
            s["used_bytes"] / 2**20, cap / 2**20, s["evictions"]))
    finally:
        m.umount()


def t_offline_with_ttl_forever(ctx):
    if ctx.bucket.kind == "local":
        return "skip"
    files = populate(ctx.bucket, n=30)
    m = ctx.mount("offline").mount()
    try:
        for k, v in files.items():
            assert read(os.path.join(m.mnt, k)) == v
        ctx.bucket.stop_server()
        for k, v in files.items():
            assert read(os.path.join(m.mnt, k)) == v, "%s unreadable with the server down" % k
        # Data never fetched cannot be served: EIO, not garbage.
        ctx.bucket.start_server()
        ctx.bucket.put("late.bin", b"late")
        ctx.bucket.stop_server()
    finally:
        m.umount()
        ctx.bucket.start_server()


def t_backend_down_gives_eio(ctx):
    if ctx.bucket.kind == "local":
        return "skip"
    ctx.bucket.put("cold/x.bin", data_for("x", 10000))
    m = ctx.mount("eio").mount()
    try:
        os.stat(os.path.join(m.mnt, "cold/x.bin"))  # metadata cached, data not
        ctx.bucket.stop_server()
        try:
            read(os.path.join(m.mnt, "cold/x.bin"))
            raise AssertionError("read succeeded with the server down")
        except OSError as e:
            assert e.errno == 5, "expected EIO, got %r" % e
    finally:
        m.umount()
        ctx.bucket.start_server()


def t_s3fs_headers(ctx):
    if ctx.bucket.kind == "local":
        return "skip"
    b = ctx.bucket
    b.put_meta("s3fs/tool.sh", b"#!/bin/sh\n", {"mode": "33261", "uid": "1234", "gid": "4321",
                                               "mtime": "1600000000"})
    b.put("s3fs/plain.txt", b"plain")
    b.put("s3fs/emptydir/", b"")  # an s3fs directory marker
    # Listings fetch the headers (fetch_headers = true) ...
    m = ctx.mount("hdr", {"cache": {"fetch_headers": "true"}}).mount()
    try:
        names = sorted(os.listdir(os.path.join(m.mnt, "s3fs")))
        assert names == ["emptydir", "plain.txt", "tool.sh"], names
        st = os.stat(os.path.join(m.mnt, "s3fs/tool.sh"))
        assert (st.st_mode & 0o7777, st.st_uid, st.st_gid, int(st.st_mtime)) == (0o755, 1234, 4321, 1600000000), \
            (oct(st.st_mode), st.st_uid, st.st_gid, st.st_mtime)
        st = os.stat(os.path.join(m.mnt, "s3fs/plain.txt"))
        assert st.st_mode & 0o7777 == 0o644 and st.st_uid == os.getuid(), (oct(st.st_mode), st.st_uid)
        assert os.path.isdir(os.path.join(m.mnt, "s3fs/emptydir"))
        assert os.listdir(os.path.join(m.mnt, "s3fs/emptydir")) == []
    finally:
        m.umount()
    # ... and without it, a lookup that HEADs honours them too.
    m = ctx.mount("hdr2").mount()
    try:
        st = os.stat(os.path.join(m.mnt, "s3fs/tool.sh"))
        assert st.st_mode & 0o7777 == 0o755 and st.st_uid == 1234, (oct(st.st_mode), st.st_uid)
    finally:
        m.umount()


def mountinfo(mnt):
    """The /proc/self/mountinfo entry of mnt: per-mount options, source and
    superblock options (octal escapes undone), or None."""
    def unmangle(s):
        return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), s)
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            if unmangle(fields[4]) == mnt:
                sep = fields.index("-")
                return {"opts": fields[5].split(","), "fstype": fields[sep + 1],
                        "source": unmangle(fields[sep + 2]), "super": fields[sep + 3].split(",")}
    return None


def put_mode(bucket, key, data, meta):
    """An object with s3fs's x-amz-meta-* (the local backend: the
    user.tierfs.meta.* xattrs it reads as the same metadata)."""
    if bucket.kind == "local":
        bucket.put(key, data)
        for k, v in meta.items():
            os.setxattr(os.path.join(bucket.root, key), "user.tierfs.meta." + k, v.encode())
    else:
        bucket.put_meta(key, data, meta)


def stored_mode(bucket, key):
    """x-amz-meta-mode as the bucket holds it (None: not there)."""
    if bucket.kind == "local":
        try:
            return os.getxattr(os.path.join(bucket.root, key), "user.tierfs.meta.mode").decode()
        except OSError:
            return None
    try:
        h = bucket.s3.head_object(Bucket=BUCKET, Key=bucket.prefix + key)
    except bucket.s3.exceptions.ClientError:
        return None
    return h.get("Metadata", {}).get("mode")


def t_setid_bits(ctx):
    """x-amz-meta-mode 0104755 (decimal 35309) with uid 0: on a mount that
    is not trusted (the default) it shows as 0755, the mount is
    nosuid,nodev, -o suid is refused, and chmod u+s through the mount
    keeps nothing; [mount] trusted = true shows the bit and mounts suid."""
    setuid_mode = 0o104755
    assert str(setuid_mode) == "35309"
    put_mode(ctx.bucket, "setid/tool", b"#!/bin/sh\n", {"mode": "35309", "uid": "0", "gid": "0"})
    put_mode(ctx.bucket, "setid/sticky", b"x", {"mode": str(0o101777)})
    tool = "setid/tool"
    # Trusted first: its cache (metadata_ttl forever) then holds the bit,
    # and the untrusted mount of the same cache below must still drop it.
    m = ctx.mount("setid", {"mount": {"trusted": "true"}}).mount()
    try:
        st = os.stat(os.path.join(m.mnt, tool))
        assert stat.S_IMODE(st.st_mode) == 0o4755 and st.st_uid == 0, (oct(st.st_mode), st.st_uid)
        mi = mountinfo(m.mnt)
        assert "nosuid" not in mi["opts"] and "nodev" not in mi["opts"], mi
    finally:
        m.umount()
    m = ctx.mount("setid", {"mount": {"trusted": "true"}}, opts=["-o", "nosuid"]).mount()
    try:
        mi = mountinfo(m.mnt)
        assert "nosuid" in mi["opts"] and "nodev" not in mi["opts"], mi
    finally:
        m.umount()
    m = ctx.mount("setid").mount()
    try:
        mi = mountinfo(m.mnt)
        assert "nosuid" in mi["opts"] and "nodev" in mi["opts"], mi
        st = os.stat(os.path.join(m.mnt, tool))
        assert stat.S_IMODE(st.st_mode) == 0o755, oct(st.st_mode)
        st = os.stat(os.path.join(m.mnt, "setid/sticky"))
        assert stat.S_IMODE(st.st_mode) == 0o1777, oct(st.st_mode)  # sticky is kept
        # chmod u+s / g+s and create with setid bits: done, not kept.
        p = os.path.join(m.mnt, "setid/mine")
        with open(os.open(p, os.O_CREAT | os.O_WRONLY, 0o6755), "wb") as f:
            f.write(b"#!/bin/sh\n")
        assert stat.S_IMODE(os.stat(p).st_mode) & 0o6000 == 0, oct(os.stat(p).st_mode)
        os.chmod(p, 0o6755)
        assert stat.S_IMODE(os.stat(p).st_mode) == 0o755, oct(os.stat(p).st_mode)
        os.mkdir(os.path.join(m.mnt, "setid/d"), 0o2775)
        assert stat.S_IMODE(os.stat(os.path.join(m.mnt, "setid/d")).st_mode) & 0o6000 == 0
    finally:
        m.umount()  # drains the uploads
    mode = stored_mode(ctx.bucket, "setid/mine")
    assert mode is not None and int(mode) & 0o6000 == 0, mode
    # -o suid or -o dev on a mount that is not trusted: refused, nothing mounted.
    for opt in ("suid", "dev", "nosuid,suid"):
        r = subprocess.run([ctx.tierfs, "mount", "-c", m.conf, "-o", opt, ctx.bucket.source, m.mnt],
                           env=m.env(), capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and "[mount] trusted" in r.stderr, (opt, r.returncode, r.stderr)
        assert not os.path.ismount(m.mnt)


def t_comma_source(ctx):
    """A SOURCE with commas is the mount's name, never mount options: a
    local directory "b,suid,dev,allow_other" or an S3 prefix "x,suid,dev,
    allow_other" is mounted nosuid,nodev without allow_other, and /proc
    shows the SOURCE whole.  The attack it stops: a setuid-root copy of
    id(1) (x-amz-meta-mode 0104755, uid 0) run by uid 65534 through such
    a mount (with -o allow_other) gives euid 65534, not 0."""
    with open("/usr/bin/id", "rb") as f:
        tool = f.read()
    meta = {"mode": "35309", "uid": "0", "gid": "0"}
    if ctx.bucket.kind == "local":
        saved = ctx.bucket.root
        sources = []
        # A backslash too: it reaches the kernel as itself.
        for name in ("b,suid,dev,allow_other", "c\\,dev"):
            ctx.bucket.root = os.path.join(ctx.work, name)
            os.makedirs(ctx.bucket.root)
            put_mode(ctx.bucket, "tool", tool, meta)
            sources.append(ctx.bucket.root)
        ctx.bucket.root = saved
    else:
        prefix = ctx.bucket.prefix + "x,suid,dev,allow_other"
        ctx.bucket.s3.put_object(Bucket=BUCKET, Key=prefix + "/tool", Body=tool, Metadata=meta)
        sources = ["s3://%s/%s" % (BUCKET, prefix)]
    for i, src in enumerate(sources):
        m = ctx.mount("comma%d" % i, source=src).mount()
        try:
            mi = mountinfo(m.mnt)
            assert mi["source"] == src and mi["fstype"] == "fuse.tierfs", (src, mi)
            assert "nosuid" in mi["opts"] and "nodev" in mi["opts"], mi
            assert "allow_other" not in mi["super"], mi
            st = os.stat(os.path.join(m.mnt, "tool"))
            assert stat.S_IMODE(st.st_mode) == 0o755, oct(st.st_mode)
        finally:
            m.umount()
    os.chmod(ctx.work, 0o755)  # mkdtemp's 0700 would stop uid 65534
    m = ctx.mount("comma-other", opts=["-o", "allow_other"], source=sources[0]).mount()
    try:
        r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                            os.path.join(m.mnt, "tool"), "-u"], capture_output=True, text=True,
                           timeout=30)
        assert r.returncode == 0 and r.stdout.strip() == "65534", (r.returncode, r.stdout, r.stderr)
    finally:
        m.umount()
    # A name mount(2) cannot take is refused, not cut.
    r = subprocess.run([ctx.tierfs, "mount", "-c", m.conf, "s3://%s/%s" % (BUCKET, "p" * 4096), m.mnt],
                       env=m.env(), capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "longer than 4095 bytes" in r.stderr, (r.returncode, r.stderr)


def t_list_ahead(ctx):
    """A lookup that misses lists its directory in the background; the
    directory's other lookups of listed names then need no HEAD.  A name
    the listing lacks is still asked for, so a new object is found at once.
    A HEAD that shows s3fs's x-amz-meta-* lists nothing, so later lookups
    keep honouring those headers.  A listing with few lookups stops after
    its first page.  (cache.fetch_headers = false: with the default,
    small, the small objects here would be HEADed on their first lookup,
    test_posix.py small_objects_headed.)"""
    names = ["f%02d" % i for i in range(40)]
    for n in names:
        ctx.bucket.put("la/" + n, data_for(n, 3000))
    if ctx.bucket.kind != "local":
        for n in ("a.sh", "b.sh"):
            ctx.bucket.put_meta("la_s3fs/" + n, b"#!/bin/sh\n", {"mode": "33261", "uid": "1234"})
    m = ctx.mount("listahead", {"cache": {"fetch_headers": "false"}}).mount()
    try:
        def heads():
            return m.stats()["backend"]["head"]["requests"]

        assert read(os.path.join(m.mnt, "la", names[0])) == data_for(names[0], 3000)
        poll(lambda: m.stats()["metadata"]["listed_ahead"] >= 2
             and m.stats()["metadata"]["list_ahead_pending"] == 0,
             what="the background listings of / and la/")
        h0, md0 = heads(), m.stats()["metadata"]
        for n in names[1:]:
            assert read(os.path.join(m.mnt, "la", n)) == data_for(n, 3000), n
        md = m.stats()["metadata"]
        assert heads() == h0, "lookups after the listing sent %d HEADs" % (heads() - h0)
        assert md["hits"] - md0["hits"] >= len(names) - 1, (md0, md)
        try:
            os.stat(os.path.join(m.mnt, "la", "nope"))
            raise AssertionError("la/nope exists")
        except FileNotFoundError:
            pass
        assert heads() == h0 + 1, "a name the listing lacks was not asked for"
        ctx.bucket.put("la/new", b"new")
        assert read(os.path.join(m.mnt, "la", "new")) == b"new"
        assert m.stats()["metadata"]["negative_hits"] == md0["negative_hits"]
        if ctx.bucket.kind != "local":
            st = os.stat(os.path.join(m.mnt, "la_s3fs/a.sh"))
            assert st.st_mode & 0o7777 == 0o755 and st.st_uid == 1234, (oct(st.st_mode), st.st_uid)
            h1 = heads()
            st = os.stat(os.path.join(m.mnt, "la_s3fs/b.sh"))
            assert st.st_mode & 0o7777 == 0o755 and st.st_uid == 1234, (oct(st.st_mode), st.st_uid)
            assert heads() == h1 + 1, "b.sh was not HEADed"
        if ctx.bucket.kind == "local":
            # A directory of three pages and one lookup: the listing stops
            # after its first page; a name beyond it is HEADed; a readdir
            # lists the directory whole.  (Local only: moto is slow to fill.)
            for i in range(2500):
                ctx.bucket.put("la_big/g%04d" % i, b"%d" % i)
            md0 = m.stats()["metadata"]
            assert read(os.path.join(m.mnt, "la_big", "g0000")) == b"0"
            poll(lambda: m.stats()["metadata"]["listed_ahead_partial"] == md0["listed_ahead_partial"] + 1
                 and m.stats()["metadata"]["list_ahead_pending"] == 0,
                 what="the partial listing of la_big/")
            md = m.stats()["metadata"]
            assert md["list_pages"] - md0["list_pages"] <= 2, (md0, md)
            h1 = heads()
            assert read(os.path.join(m.mnt, "la_big", "g0500")) == b"500"
            assert heads() == h1, "a listed name was HEADed"
            assert read(os.path.join(m.mnt, "la_big", "g2400")) == b"2400"
            assert heads() == h1 + 1, "a name beyond the partial listing was not HEADed"
            assert len(os.listdir(os.path.join(m.mnt, "la_big"))) == 2500
    finally:
        m.umount()
    # Off, every first lookup of a name HEADs.
    m = ctx.mount("listahead-off", {"cache": {"list_ahead": "false"}}).mount()
    try:
        h0 = m.stats()["backend"]["head"]["requests"]
        for n in names[:10]:
            assert read(os.path.join(m.mnt, "la", n)) == data_for(n, 3000), n
        md = m.stats()["metadata"]
        assert md["listed_ahead"] == 0, md
        assert m.stats()["backend"]["head"]["requests"] - h0 >= 10
    finally:
        m.umount()


def t_mount_options(ctx):
    ctx.bucket.put("opts/f.txt", b"x")
    m = ctx.mount("opts", opts=["-o", "uid=4242,gid=4343,file_mode=0600,dir_mode=0711,ro"]).mount()
    try:
        st = os.stat(os.path.join(m.mnt, "opts/f.txt"))
        assert (st.st_uid, st.st_gid, st.st_mode & 0o7777) == (4242, 4343, 0o600), (st.st_uid, st.st_gid, oct(st.st_mode))
        st = os.stat(os.path.join(m.mnt, "opts"))
        assert st.st_mode & 0o7777 == 0o711, oct(st.st_mode)
        # readdir(3) drops entries whose d_ino is 0: the dots must have one.
        ls = subprocess.run(["ls", "-a", os.path.join(m.mnt, "opts")], capture_output=True, text=True)
        assert ls.stdout.split() == [".", "..", "f.txt"], ls.stdout
        with open("/proc/mounts") as f:
            line = [l for l in f if (" " + m.mnt + " ") in l]
        assert line and " fuse.tierfs " in line[0], line
        assert line[0].split()[3].startswith("ro"), line
    finally:
        m.umount()
    # Bad option values are refused before anything is mounted.
    r = subprocess.run([ctx.tierfs, "mount", "-c", m.conf, "-o", "file_mode=999", ctx.bucket.source, m.mnt],
                       env=m.env(), capture_output=True, text=True)
    assert r.returncode == 2 and "octal" in r.stderr, (r.returncode, r.stderr)
    assert not os.path.ismount(m.mnt)


def t_mount_helper(ctx):
    """mount(8) runs mount.tierfs SOURCE DIR -o OPTS with fstab options."""
    ctx.bucket.put("helper.txt", b"via mount(8)")
    src = os.path.join(HERE, "..", "..", "src", "mount.tierfs.in")
    helper = os.path.join(ctx.work, "mount.tierfs")
    with open(src) as f:
        text = f.read().replace("@bindir@/tierfs", ctx.tierfs)
    with open(helper, "w") as f:
        f.write(text)
    os.chmod(helper, 0o755)
    m = ctx.mount("helper")
    # fstab has no -c: everything but the defaults comes as -o section.key=value.
    opts = "defaults,_netdev,nofail,allow_other,cache.metadata_ttl=forever,ssd.dir=%s,log.file=%s" % (
        m.cache, m.logfile)
    if ctx.bucket.kind != "local":
        opts += ",backend.endpoint=" + ctx.bucket.env["TFS_S3_ENDPOINT"]
    r = subprocess.run([helper, ctx.bucket.source, m.mnt, "-s", "-o", opts],
                       env=m.env(), capture_output=True, text=True, timeout=60)
    try:
        assert r.returncode == 0, r.stderr
        poll(lambda: os.path.ismount(m.mnt), 10, "the mount")
        assert read(os.path.join(m.mnt, "helper.txt")) == b"via mount(8)"
    finally:
        m.umount()


def t_big_directory_s3(ctx):
    """1,500 entries with long names behind S3: listing pages of several
    hundred KiB each (one used to be cut at 64 KiB: EIO), every entry."""
    if ctx.bucket.kind == "local":
        return "skip"  # t_big_directory covers the local backend
    n = 1500
    names = ["%s-%04d" % ("n" * 120, i) for i in range(n)]
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda name: ctx.bucket.put("long/" + name, b"x"), names))
    m = ctx.mount("longnames").mount()
    try:
        got = os.listdir(os.path.join(m.mnt, "long"))
        assert sorted(got) == names, (len(got), n)
        assert m.stats()["metadata"]["list_pages"] >= 2
        assert read(os.path.join(m.mnt, "long", names[-1])) == b"x"
    finally:
        m.umount()


def t_big_directory(ctx):
    """100k entries in one directory: complete, sorted, bounded memory."""
    if ctx.bucket.kind != "local":
        return "skip"  # uploading 100k objects to moto takes minutes
    n = 100_000
    d = os.path.join(ctx.bucket.root, "huge")
    os.makedirs(d)
    for i in range(n):
        open(os.path.join(d, "f%06d" % i), "wb").close()
    m = ctx.mount("huge", {"ram": {"size": "32M"}}).mount()
    try:
        pid = m.pid()
        names = os.listdir(os.path.join(m.mnt, "huge"))
        assert len(names) == n, len(names)
        assert set(names) == {"f%06d" % i for i in range(n)}
        rss = rss_anon(pid)
        print("    %d entries; daemon RssAnon %.1f MiB" % (n, rss / 2**20))
        assert_rss(ctx, rss, 32 * 2**20 + 64 * 2**20)
        st = m.stats()
        pages = st["metadata"]["list_pages"]
        assert pages >= n // 1000, pages
        # A second walk comes from the metadata cache: no more listing.
        assert len(os.listdir(os.path.join(m.mnt, "huge"))) == n
        assert m.stats()["metadata"]["list_pages"] == pages
        assert os.stat(os.path.join(m.mnt, "huge/f099999")).st_size == 0
    finally:
        m.umount()


def t_max_inodes_bound(ctx):
    """mount.max_inodes: after a walk that stats 3,000 files, the daemon
    keeps at most the bound (plus the directories in use) of live inodes:
    it asks the kernel to drop the entries, the kernel forgets them, and
    the names still resolve afterwards."""
    if ctx.bucket.kind != "local":
        return "skip"  # the trimming is the FUSE layer's; the backend does not matter
    dirs, per, bound = 3, 1000, 500
    for d in range(dirs):
        p = os.path.join(ctx.bucket.root, "t/d%d" % d)
        os.makedirs(p)
        for i in range(per):
            with open(os.path.join(p, "f%04d" % i), "wb") as f:
                f.write(b"x" * (i % 7))
    m = ctx.mount("maxino", {"mount": {"max_inodes": str(bound)}}).mount()
    try:
        top = os.path.join(m.mnt, "t")
        n = 0
        for root, _, names in os.walk(top):
            for nm in names:
                os.lstat(os.path.join(root, nm))
                n += 1
        assert n == dirs * per, n
        # bound + the root, t/ and its directories the kernel may still use
        live = poll(lambda: (lambda c: c if c <= bound + 5 else None)(m.stats()["fuse"]["inodes"]),
                    20, "the inode count to come down to the bound")
        st = m.stats()["fuse"]
        print("    %d files walked; %d live inodes (bound %d), %d entries invalidated"
              % (n, live, bound, st["inodes_trimmed"]))
        assert st["inodes_trimmed"] > 0, st
        # Dropped entries are looked up again, with the right attributes.
        for d in range(dirs):
            for i in random.Random(d).sample(range(per), 50):
                assert os.lstat(os.path.join(top, "d%d/f%04d" % (d, i))).st_size == i % 7
    finally:
        m.umount()


def t_million_objects(ctx):
    """1M objects in 1,000 directories: a full walk in bounded memory.
    Extended run only (about two minutes)."""
    if ctx.bucket.kind != "local" or not ctx.extended:
        return "skip"
    dirs, per = 1000, 1000
    for d in range(dirs):
        p = os.path.join(ctx.bucket.root, "m/d%04d" % d)
        os.makedirs(p)
        for i in range(per):
            open(os.path.join(p, "o%04d" % i), "wb").close()
    m = ctx.mount("million", {"ram": {"size": "32M"}}).mount()
    pid = m.pid()
    peak = 0
    try:
        count = 0
        for i, (root, _, names) in enumerate(os.walk(os.path.join(m.mnt, "m"))):
            count += len(names)
            if i % 50 == 0:
                peak = max(peak, rss_anon(pid))
        peak = max(peak, rss_anon(pid))
        print("    %d objects walked; daemon RssAnon peak %.1f MiB" % (count, peak / 2**20))
        assert count == dirs * per, count
        assert_rss(ctx, peak, 32 * 2**20 + 64 * 2**20, "RssAnon peak")
    finally:
        m.umount()


TESTS = [
    ("byte_exact_and_walk", t_byte_exact_and_walk),
    ("random_offsets_concurrent", t_random_offsets_concurrent),
    ("endpoint_and_region_from_environment", t_endpoint_and_region_from_environment),
    ("warm_restart_zero_gets", t_warm_restart_zero_gets),
    ("sequential_read_is_one_get_per_run", t_sequential_read_is_one_get_per_run),
    ("cold_read_cached_whole", t_cold_read_cached_whole),
    ("cold_read_cached_whole_tiny_queue", t_cold_read_cached_whole_tiny_queue),
    ("change_detected_after_ttl", t_change_detected_after_ttl),
    ("open_new_version_whole", t_open_new_version_whole),
    ("missing_is_enoent", t_missing_is_enoent),
    ("kill9_recovery", t_kill9_recovery),
    ("sigterm_with_open_file", t_sigterm_with_open_file),
    ("rss_bound_64_readers", t_rss_bound_64_readers),
    ("watermark_eviction", t_watermark_eviction),
    ("offline_with_ttl_forever", t_offline_with_ttl_forever),
    ("backend_down_gives_eio", t_backend_down_gives_eio),
    ("s3fs_headers", t_s3fs_headers),
    ("list_ahead", t_list_ahead),
    ("setid_bits", t_setid_bits),
    ("comma_source", t_comma_source),
    ("mount_options", t_mount_options),
    ("mount_helper", t_mount_helper),
    ("big_directory", t_big_directory),
    ("big_directory_s3", t_big_directory_s3),
    ("max_inodes_bound", t_max_inodes_bound),
    ("million_objects", t_million_objects),
]


class Ctx:
    def __init__(self, tierfs, bucket, work, extended=False):
        self.extended = extended
        self.tierfs = tierfs
        self.bucket = bucket
        self.work = work
        self.mounts = []
        self.cleanups = []  # called after the mounts are gone (more servers)

    def mount(self, name, conf_extra=None, opts=None, source=None):
        m = Mount(self.tierfs, self.bucket, self.work, name, conf_extra, opts, source)
        self.mounts.append(m)
        return m


def run_suite(suite, tests, add_args=None, setup=None):
    """Run `tests` ([(name, fn(ctx))]) with this harness's command line
    (TIERFS --backend local|moto [--only|--skip NAME[,NAME...]] [--extended], plus
    what `add_args(parser)` adds), each in a fresh work directory and
    bucket; `setup(ctx, args)` may copy options into the context.  Print one
    line per test and end with "SUITE: N passed, N failed".  Returns the
    exit status.  A test returns "skip" to be skipped.  Every suite of
    tests/integration that mounts tierfs uses it."""
    ap = argparse.ArgumentParser()
    ap.add_argument("tierfs")
    ap.add_argument("--backend", default="local", choices=["local", "moto", "rgw"])
    ap.add_argument("--only", help="run only these tests (comma-separated names)")
    ap.add_argument("--skip", help="run all but these tests (comma-separated names)")
    ap.add_argument("--extended", action="store_true", help="also the long scale tests")
    if add_args:
        add_args(ap)
    args = ap.parse_args()
    tierfs = os.path.abspath(args.tierfs)
    only = set(args.only.split(",")) if args.only else None
    skip = set(args.skip.split(",")) if args.skip else set()
    unknown = ((only or set()) | skip) - {name for name, _ in tests}
    if unknown:
        ap.error("no such test: %s" % ", ".join(sorted(unknown)))
    passed = failed = 0
    for name, fn in tests:
        if (only and name not in only) or name in skip:
            continue
        work = tempfile.mkdtemp(prefix="tierfs-%s-" % suite)
        bucket = None
        ctx = None
        t0 = time.monotonic()
        try:
            bucket = Bucket(args.backend, work)
            ctx = Ctx(tierfs, bucket, work, args.extended)
            if setup:
                setup(ctx, args)
            res = fn(ctx)
            if res == "skip":
                print("skip %s (%s)" % (name, args.backend))
            else:
                passed += 1
                print("ok   %s (%s, %.1fs)" % (name, args.backend, time.monotonic() - t0))
        except Exception:  # noqa: BLE001
            failed += 1
            print("FAIL %s (%s, %.1fs)" % (name, args.backend, time.monotonic() - t0))
            traceback.print_exc()
            for m in (ctx.mounts if ctx else []):
                print("---- %s log:\n%s" % (m.mnt, m.log_tail()))
        finally:
            for m in (ctx.mounts if ctx else []):
                if os.path.ismount(m.mnt):
                    subprocess.run(["fusermount3", "-uz", m.mnt], capture_output=True)
            for fn in (ctx.cleanups if ctx else []):
                fn()
            if bucket:
                bucket.close()
            shutil.rmtree(work, ignore_errors=True)
        sys.stdout.flush()
    print("%s: %d passed, %d failed" % (suite, passed, failed))
    return 1 if failed else 0


def main():
    return run_suite("mount", TESTS)


if __name__ == "__main__":
    sys.exit(main())
