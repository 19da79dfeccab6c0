#!/usr/bin/env python3
"""test_faults.py - the read path through a FUSE mount under injected S3 faults.

    test_faults.py [TIERFS] [unittest options, e.g. -k blackhole]

Starts moto_server on 127.0.0.1 (tests/harness/moto.sh), uploads a data set
straight to it, puts tests/faults/s3_fault_proxy.py in front of it and
mounts tierfs against the PROXY with short retry backoffs and timeouts.
Then, with faults switched on through the proxy's control endpoint:

  mixed_faults_epoch   ~10% of all requests fail (500, 503, reset, truncated
                       body, latency): every read is byte-exact or EIO, never
                       wrong or short; afterwards, and after a remount, every
                       byte is right.
  blackhole_bounded    black holes and mid-body stalls: every read returns
                       (data or EIO) within a bound computed from the config.
  all_500_eio_recovers every GET answered 500 (then 503): reads give EIO, the
                       daemon stays up, and reads work again once faults stop.
  truncated_header_block_gives_eio
                       every GET reply cut inside its header block: EIO,
                       never ESTALE (the cut reply is retried).
  stream_gets_in_flight
                       with a 150 ms time to first byte, one sequential
                       reader has prefetch.stream_gets GETs in flight.
  hostile_*             a lying server (issue 16): names outside the listing
                       dropped, a looping listing cut off with EIO, sizes
                       beyond 2^63-1 and 206 replies of another range refused
                       (EIO, never cached).  check.sh runs them under ASan.

Also runs the proxy's own self-test (tests/faults/test_proxy.py) unless
--no-selftest.  Ends with "faults: N passed, N failed".
"""
import errno
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(TOP, "tests", "faults"))

from faultlib import FaultProxy, Moto, fault_count, poll  # noqa: E402

TIERFS = os.environ.get("TIERFS", os.path.join(TOP, "build", "tierfs"))

# The backend settings every mount gets; the time bounds below derive from them.
BACKEND = {
    "retries": 2,
    "retry_base_ms": 10,
    "retry_max_ms": 50,
    "connect_timeout_ms": 1000,
    "low_speed_time_s": 1,
    "low_speed_limit": 1024,
}
BLOCK = 256 * 1024

M = None  # the module fixture: moto, proxy, data set


def data_for(name, size):
    """Deterministic bytes for an object."""
    out = bytearray()
    seed = hashlib.sha256(name.encode()).digest()
    i = 0
    while len(out) < size:
        out += hashlib.sha256(seed + i.to_bytes(8, "little")).digest()
        i += 1
    return bytes(out[:size])


# curl aborts a transfer slower than low_speed_limit for low_speed_time, but
# it measures the speed as an average over its last 5 one-second samples, and
# checks once a second: a server that goes silent after sending a burst is
# noticed up to ~6 s late, one that never sends a byte ~1 s late.
CURL_SPEED_WINDOW_S = 5.0
CURL_TICK_S = 1.0
# The kernel retries a page-cache read that failed (a readahead READ fails,
# then filemap_read_folio() sends another READ), so one read() of a block the
# backend cannot deliver costs two block fills, and three were seen behind
# one pread() when another reader of the same file failed on the same page.
KERNEL_READ_TRIES = 3
SLACK_S = 3.0  # scheduling on a busy 2-core machine


def attempt_bound_s(stall, b=BACKEND):
    """Longest one HTTP attempt can take against a silent server (stall: one
    that went silent mid-body): the connect timeout (a black hole accepts at
    once, but count it) plus curl's low-speed detection."""
    t = b["connect_timeout_ms"] / 1000.0 + b["low_speed_time_s"] + CURL_TICK_S
    return t + (CURL_SPEED_WINDOW_S if stall else 0.0)


def fill_bound_s(stall, b=BACKEND):
    """Longest one block fill can take: every attempt times out, with the
    longest backoff between attempts."""
    return (b["retries"] + 1) * attempt_bound_s(stall, b) + b["retries"] * b["retry_max_ms"] / 1000.0


def read_bound_s(stall, b=BACKEND):
    """Longest one read() of one block (or one lookup) may take."""
    return KERNEL_READ_TRIES * fill_bound_s(stall, b) + SLACK_S


class Fixture:
    def __init__(self):
        self.work = tempfile.mkdtemp(prefix="tierfs-faults-")
        self.moto = None
        self.proxy = None
        try:
            self.moto = Moto(self.work)
            self.s3 = self.moto.client()
            self.bucket = self.moto.bucket
            self.prefix = "faults%d/" % random.randrange(1 << 30)
            self.files = {}
            rnd = random.Random(7)
            sizes = [0, 1, 4095, 65536, BLOCK - 1, BLOCK, BLOCK + 1, 2 * BLOCK + 17]
            for i in range(150):
                size = sizes[i] if i < len(sizes) else rnd.randrange(1, 600_000)
                key = "train/c%02d/img_%05d.jpg" % (i % 6, i)
                self.files[key] = data_for(key, size)
            self.big_key = "shards/big.tar"
            self.big = data_for("big", 12 * (1 << 20) + 12345)
            for k, v in list(self.files.items()) + [(self.big_key, self.big)]:
                self.s3.put_object(Bucket=self.bucket, Key=self.prefix + k, Body=v)
            self.proxy = FaultProxy(self.moto.endpoint, self.work, args=["--seed", "20240607"])
        except BaseException:
            self.close()
            raise

    def close(self):
        if self.proxy:
            self.proxy.stop()
        if self.moto:
            self.moto.stop()
        shutil.rmtree(self.work, ignore_errors=True)


def setUpModule():
    global M
    if not os.access(TIERFS, os.X_OK):
        raise unittest.SkipTest("no tierfs binary at %s" % TIERFS)
    M = Fixture()


def tearDownModule():
    if M:
        M.close()


class Mount:
    """One tierfs mount of the data set through the proxy."""

    def __init__(self, name, conf_extra=None):
        self.mnt = os.path.join(M.work, "mnt-" + name)
        os.makedirs(self.mnt, exist_ok=True)
        self.cache = os.path.join(M.work, "cache-" + name)
        self.conf = os.path.join(M.work, name + ".conf")
        self.logfile = os.path.join(M.work, name + ".log")
        b = BACKEND
        conf = {
            "ram": {"size": "64M"},
            "ssd": {"dir": self.cache, "size": "1G"},
            "cache": {"block_size": "%dK" % (BLOCK // 1024), "metadata_ttl": "forever",
                      "policy": "lru"},
            "prefetch": {"workers": "4", "readahead": "1M"},
            "log": {"level": "info", "file": self.logfile},
            "backend": {"endpoint": M.proxy.endpoint,
                        "retries": str(b["retries"]),
                        "retry_base": "%dms" % b["retry_base_ms"],
                        "retry_max": "%dms" % b["retry_max_ms"],
                        "connect_timeout": "%dms" % b["connect_timeout_ms"],
                        "low_speed_time": "%ds" % b["low_speed_time_s"],
                        "low_speed_limit": str(b["low_speed_limit"])},
        }
        for sec, kv in (conf_extra or {}).items():
            conf.setdefault(sec, {}).update(kv)
        with open(self.conf, "w") as f:
            for sec, kv in conf.items():
                f.write("[%s]\n" % sec)
                for k, v in kv.items():
                    f.write("%s = %s\n" % (k, v))
        self.source = "s3://%s/%s" % (M.bucket, M.prefix.rstrip("/"))
        self.daemon_pid = None

    def env(self):
        e = dict(os.environ)
        e.update(M.moto.env)
        e.pop("AWS_CA_BUNDLE", None)
        return e

    def mount(self):
        r = subprocess.run([TIERFS, "mount", "-c", self.conf, self.source, self.mnt], env=self.env(),
                           capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            raise AssertionError("mount failed (%d): %s %s\n%s" % (
                r.returncode, r.stdout, r.stderr, self.log_tail()))
        poll(lambda: os.path.ismount(self.mnt), 10, "the mount to appear")
        self.daemon_pid = self.stats()["pid"]
        return self

    def stats(self):
        r = subprocess.run([TIERFS, "stats", "--json", self.mnt], capture_output=True, text=True,
                           timeout=30)
        if r.returncode != 0:
            raise AssertionError("stats failed: " + r.stderr)
        return json.loads(r.stdout)

    def alive(self):
        try:
            with open("/proc/%d/stat" % self.daemon_pid) as f:
                return f.read().split()[2] != "Z"
        except OSError:
            return False

    def umount(self):
        if os.path.ismount(self.mnt):
            r = subprocess.run([TIERFS, "umount", self.mnt], capture_output=True, text=True, timeout=60)
            if r.returncode != 0:
                subprocess.run(["fusermount3", "-uz", self.mnt], capture_output=True)
                raise AssertionError("umount failed: " + r.stderr)

    def force_umount(self):
        if os.path.ismount(self.mnt):
            subprocess.run(["fusermount3", "-uz", self.mnt], capture_output=True)
        if self.daemon_pid and self.alive():
            try:
                os.kill(self.daemon_pid, 9)
            except OSError:
                pass

    def path(self, key):
        return os.path.join(self.mnt, key)

    def log_tail(self, n=25):
        try:
            with open(self.logfile) as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return "(no log)"


# ---------------------------------------------------------------- read operations

class Outcome:
    def __init__(self):
        self.lock = threading.Lock()
        self.ok = 0
        self.eio = 0
        self.bad = []
        self.slowest = 0.0
        self.times = []

    def add(self, what, res, secs):
        with self.lock:
            self.slowest = max(self.slowest, secs)
            self.times.append((secs, what))
            if res == "ok":
                self.ok += 1
            elif res == "eio":
                self.eio += 1
            else:
                self.bad.append("%s: %s" % (what, res))

    def __str__(self):
        return "%d ok, %d EIO, %d bad, slowest %.2fs" % (self.ok, self.eio, len(self.bad), self.slowest)


def read_file(m, key, want):
    """Read a whole file: 'ok', 'eio' or a description of what went wrong."""
    try:
        with open(m.path(key), "rb", buffering=0) as f:
            size = os.fstat(f.fileno()).st_size
            if size != len(want):
                return "st_size %d, expected %d" % (size, len(want))
            got = bytearray()
            while True:
                b = f.read(1 << 20)
                if not b:
                    break
                got += b
    except OSError as e:
        return "eio" if e.errno == errno.EIO else "error %r" % e
    if len(got) != len(want):
        return "SHORT/LONG read: %d bytes, expected %d" % (len(got), len(want))
    if got != want:
        i = next(i for i in range(len(got)) if got[i] != want[i])
        return "WRONG BYTES from offset %d" % i
    return "ok"


def pread_big(m, off, ln):
    want = M.big[off:off + ln]
    try:
        fd = os.open(m.path(M.big_key), os.O_RDONLY)
        try:
            got = os.pread(fd, ln, off)
        finally:
            os.close(fd)
    except OSError as e:
        return "eio" if e.errno == errno.EIO else "error %r" % e
    if len(got) != len(want):
        return "SHORT pread at %d+%d: %d bytes, expected %d" % (off, ln, len(got), len(want))
    if got != want:
        return "WRONG BYTES in pread at %d+%d" % (off, ln)
    return "ok"


def run_ops(ops, threads=4, deadline_s=None):
    """Run ops (what, fn) on `threads` threads; returns (Outcome, unfinished ops)."""
    out = Outcome()
    lock = threading.Lock()
    todo = list(ops)
    running = {}

    def worker():
        while True:
            with lock:
                if not todo:
                    return
                what, fn = todo.pop()
                running[threading.get_ident()] = (what, time.monotonic())
            t0 = time.monotonic()
            res = fn()
            out.add(what, res, time.monotonic() - t0)
            with lock:
                running.pop(threading.get_ident(), None)

    ts = [threading.Thread(target=worker, daemon=True) for _ in range(threads)]
    for t in ts:
        t.start()
    end = time.monotonic() + (deadline_s if deadline_s else 3600)
    for t in ts:
        t.join(max(0.0, end - time.monotonic()))
    with lock:
        hung = [(w, time.monotonic() - t0) for w, t0 in running.values()]
    return out, hung


def file_ops(m, keys):
    return [("read %s" % k, (lambda k=k: read_file(m, k, M.files[k]))) for k in keys]


def pread_ops(m, n, seed):
    rnd = random.Random(seed)
    ops = []
    for _ in range(n):
        off = rnd.randrange(0, len(M.big))
        ln = rnd.choice([1, 100, 4096, 65536, BLOCK, 3 * BLOCK + 5])
        ops.append(("pread big %d+%d" % (off, ln), (lambda off=off, ln=ln: pread_big(m, off, ln))))
    return ops


def walk(m):
    """Names under the mount, as {key: size}; raises OSError on a failed listing."""
    seen = {}

    def fail(e):
        raise e
    for root, _, names in os.walk(m.mnt, onerror=fail):
        for n in names:
            p = os.path.join(root, n)
            seen[os.path.relpath(p, m.mnt)] = os.stat(p).st_size
    return seen


# ---------------------------------------------------------------- tests

class FaultTests(unittest.TestCase):
    def setUp(self):
        M.proxy.off()
        self.mounts = []

    def tearDown(self):
        M.proxy.off()
        for m in self.mounts:
            try:
                m.umount()
            except Exception:  # noqa: BLE001
                m.force_umount()

    def mount(self, name, conf_extra=None):
        m = Mount(name, conf_extra)
        self.mounts.append(m)
        return m.mount()

    def diag(self, m):
        return "\n---- tierfs log:\n%s---- proxy log:\n%s" % (m.log_tail(), M.proxy.log_tail())

    def expect_walk(self, m):
        want = {k: len(v) for k, v in M.files.items()}
        want[M.big_key] = len(M.big)
        seen = walk(m)
        self.assertEqual(seen, want, "the listing differs" + self.diag(m))

    def test_mixed_faults_epoch(self):
        """~10% faults of every kind but hangs: byte-exact data or EIO."""
        m = self.mount("mixed")
        M.proxy.config(rates={"500": 0.02, "503": 0.02, "reset": 0.02, "truncate": 0.02,
                              "latency": 0.02},
                       latency_ms=[20, 300], methods=[], seed=20240607)
        M.proxy.reset_stats()
        # Cold lookups (HEAD, then LIST for directories) under faults: the
        # right size or EIO, never ENOENT for an object that exists.
        looked = sorted(M.files)[::5]
        out, hung = run_ops([("stat " + k, (lambda k=k: stat_size(m, k, len(M.files[k]))))
                             for k in looked], threads=4, deadline_s=60)
        print("\n    cold lookups under faults: %s" % out)
        self.assertFalse(hung or out.bad, "lookups: %s %s%s" % (out.bad[:5], hung[:5], self.diag(m)))
        # The listing is fetched under faults too: complete and right, or EIO.
        for _ in range(10):
            try:
                self.expect_walk(m)
                break
            except OSError as e:
                self.assertEqual(e.errno, errno.EIO, "walk: %r" % e)
        else:
            self.fail("the listing failed 10 times in a row" + self.diag(m))

        keys = sorted(M.files)
        random.Random(1).shuffle(keys)
        ops = file_ops(m, keys) + pread_ops(m, 120, seed=2)
        random.Random(3).shuffle(ops)
        out, hung = run_ops(ops, threads=4, deadline_s=60)
        st = M.proxy.stats()
        print("    epoch under faults: %s; proxy: %d requests, faults %s" % (
            out, st["requests"], json.dumps({k: v for k, v in st["faults"].items() if v})))
        self.assertFalse(hung, "reads still running: %s%s" % (hung[:5], self.diag(m)))
        self.assertFalse(out.bad, "wrong results: %s%s" % (out.bad[:5], self.diag(m)))
        self.assertGreaterEqual(fault_count(st, method="GET"), 5, "too few GET faults injected")
        self.assertGreaterEqual(sum(1 for v in st["faults"].values() if v), 3,
                                "too few kinds of faults injected: %s" % st["faults"])
        self.assertTrue(m.alive(), "the daemon died")

        # Faults off: everything reads back exactly (nothing bad was cached).
        M.proxy.off()
        out, hung = run_ops(file_ops(m, keys) + pread_ops(m, 40, seed=4), threads=4, deadline_s=60)
        self.assertFalse(hung or out.bad or out.eio, "after faults: %s %s %s%s" % (
            out, out.bad[:5], hung[:5], self.diag(m)))
        # And after a remount, from the SSD tier.
        m.umount()
        m.mount()
        gets0 = m.stats()["backend"]["get"]["requests"]
        out, hung = run_ops(file_ops(m, keys), threads=4, deadline_s=60)
        self.assertFalse(hung or out.bad or out.eio, "after remount: %s %s%s" % (
            out, out.bad[:5], self.diag(m)))
        st = m.stats()
        print("    after remount: %s; %d GETs, ssd hits %s" % (
            out, st["backend"]["get"]["requests"] - gets0, st["ssd"].get("hits")))

    def test_writes_under_faults_all_arrive(self):
        """~20% faults on PUT/POST (500, 503, resets, truncated replies):
        every file written through the mount ends up in the bucket
        byte-exact, multipart uploads included, and none is left open."""
        m = self.mount("writes", {"writeback": {"delay": "0s", "retry_base": "50ms",
                                                "retry_max": "200ms"},
                                  "backend": {"multipart_threshold": "6M", "part_size": "5M",
                                              "upload_parallel": "2"}})
        want = {}
        for i in range(24):
            want["w/f%02d.bin" % i] = os.urandom(random.choice([1, 5000, 300_000, 1 << 20]))
        for i in range(2):
            want["w/big%d.bin" % i] = os.urandom(13 * (1 << 20) + 7)  # three parts
        M.proxy.config(rates={"500": 0.05, "503": 0.05, "reset": 0.05, "truncate": 0.05},
                       methods=["PUT", "POST"])
        M.proxy.reset_stats()
        os.makedirs(os.path.join(m.mnt, "w"), exist_ok=True)
        for k, v in want.items():
            with open(os.path.join(m.mnt, k), "wb") as f:
                f.write(v)

        def drained():
            wb = m.stats()["writeback"]
            return wb["pending_files"] == 0 and wb["uploading"] == 0

        poll(drained, 120, "write-back to finish under faults")
        st = M.proxy.stats()
        M.proxy.off()
        self.assertGreater(sum(fault_count(st, k) for k in ("500", "503", "reset", "truncate")), 0,
                           "no fault was injected")
        for k, v in want.items():
            got = M.s3.get_object(Bucket=M.bucket, Key=M.prefix + k)["Body"].read()
            self.assertEqual(got, v, "%s differs in the bucket%s" % (k, self.diag(m)))
        left = M.s3.list_multipart_uploads(Bucket=M.bucket, Prefix=M.prefix).get("Uploads", [])
        self.assertEqual(left, [], "multipart uploads left open")

    def test_blackhole_bounded(self):
        """Silent servers: every read returns within the configured timeouts."""
        m = self.mount("hole")
        keys = sorted(M.files)
        random.Random(5).shuffle(keys)

        # 1. Every request is a black hole, metadata cold: lookups and
        #    listings fail with EIO, in time.
        bound = read_bound_s(stall=False)
        M.proxy.config(rates={"blackhole": 1.0}, methods=[], stall_s=60)
        M.proxy.reset_stats()
        ops = [("stat big", lambda: meta_op(lambda: os.stat(m.path(M.big_key)))),
               ("listdir train/c01", lambda: meta_op(lambda: os.listdir(m.path("train/c01"))))]
        out, hung = run_ops(ops, threads=len(ops), deadline_s=bound + 10)
        print("\n    metadata, all silent (bound %.1fs): %s" % (bound, out))
        self.assertFalse(hung, "hung past %.1fs: %s%s" % (bound + 10, hung, self.diag(m)))
        self.assertFalse(out.bad, "wrong results: %s%s" % (out.bad[:5], self.diag(m)))
        self.assertEqual(out.eio, len(ops), str(out))
        self.assertLessEqual(out.slowest, bound, "took %.1fs > %.1fs: %s%s" % (
            out.slowest, bound, max(out.times), self.diag(m)))
        M.proxy.off()
        self.expect_walk(m)  # no failure was remembered; metadata now warm

        # 2. Every GET is a black hole: every read fails with EIO, in time.
        M.proxy.config(rates={"blackhole": 1.0}, methods=["GET"], stall_s=60)
        first = [k for k in keys if M.files[k]][:6]
        ops = file_ops(m, first) + pread_ops(m, 2, seed=6)
        out, hung = run_ops(ops, threads=len(ops), deadline_s=bound + 10)
        st = M.proxy.stats()
        print("    data, all silent (bound %.1fs): %s; faults %s" % (
            bound, out, json.dumps({k: v for k, v in st["faults"].items() if v})))
        self.assertFalse(hung, "reads hung past %.1fs: %s%s" % (bound + 10, hung, self.diag(m)))
        self.assertFalse(out.bad, "wrong results: %s%s" % (out.bad[:5], self.diag(m)))
        self.assertLessEqual(out.slowest, bound, "a read took %.1fs > %.1fs: %s%s" % (
            out.slowest, bound, max(out.times), self.diag(m)))
        self.assertEqual(out.eio, len(ops), "a read succeeded although every GET was silent")
        self.assertGreaterEqual(fault_count(st, "blackhole", "GET"), len(ops) * (BACKEND["retries"] + 1))

        # 3. Silent servers and mid-body stalls on 30% of the GETs: reads are
        #    byte-exact or EIO, each within the bound.
        bound = read_bound_s(stall=True)
        M.proxy.config(rates={"blackhole": 0.2, "stall": 0.1})
        M.proxy.reset_stats()
        #    The faults fall on requests by chance (the proxy's random
        #    seed): a dozen files now and then draw none, so more files are
        #    read, a dozen at a time, until some did.
        for first in range(6, 150, 12):
            rest = keys[first:first + 12]
            out, hung = run_ops(file_ops(m, rest), threads=6, deadline_s=bound + 10)
            st = M.proxy.stats()
            print("    30%% silent or stalled (bound %.1fs): %s; faults %s" % (
                bound, out, json.dumps({k: v for k, v in st["faults"].items() if v})))
            self.assertFalse(hung, "reads hung: %s%s" % (hung, self.diag(m)))
            self.assertFalse(out.bad, "wrong results: %s%s" % (out.bad[:5], self.diag(m)))
            self.assertLessEqual(out.slowest, bound, "a read took %.1fs > %.1fs%s" % (
                out.slowest, bound, self.diag(m)))
            self.assertGreater(out.ok, 0, "no read succeeded at 30% faults")
            if fault_count(st, "stall") + fault_count(st, "blackhole") > 0:
                break
        self.assertGreater(fault_count(st, "stall") + fault_count(st, "blackhole"), 0)

        M.proxy.off()
        self.assertTrue(m.alive(), "the daemon died")
        out, hung = run_ops(file_ops(m, keys[:18]), threads=4, deadline_s=60)
        self.assertFalse(hung or out.bad or out.eio, "after faults: %s %s%s" % (
            out, out.bad[:5], self.diag(m)))

    def test_truncated_header_block_gives_eio(self):
        """Every GET reply cut inside its header block: EIO, never ESTALE.

        curl takes a header block cut short and closed as a complete reply;
        tierfs treats an object reply without Content-Length or ETag as a
        transport failure (backends/s3_http.c) and retries it, so a read
        ends in data or EIO, never in ESTALE for an unchanged object."""
        m = self.mount("hdrcut")
        self.expect_walk(m)
        M.proxy.config(rates={"truncate": 1.0}, methods=["GET"], cut_where="headers")
        M.proxy.reset_stats()
        keys = [k for k in sorted(M.files) if M.files[k]][:16]
        out, hung = run_ops(file_ops(m, keys), threads=4, deadline_s=60)
        st = M.proxy.stats()
        print("\n    every GET reply cut in its header block: %s; %d faults" % (
            out, fault_count(st, "truncate")))
        self.assertFalse(hung, "reads hung: %s" % hung)
        self.assertGreater(fault_count(st, "truncate", "GET"), 0)
        M.proxy.off()
        self.assertTrue(m.alive(), "the daemon died")
        after, _ = run_ops(file_ops(m, keys), threads=4, deadline_s=60)
        self.assertEqual((after.ok, after.bad), (len(keys), []), "after faults: %s" % after)
        self.assertFalse(out.bad, "not EIO: %s%s" % (out.bad[:3], self.diag(m)))
        self.assertEqual(out.eio, len(keys), str(out))

    def test_all_500_eio_recovers(self):
        """Every GET fails: EIO (not garbage), the daemon lives, and recovers."""
        m = self.mount("e500")
        self.expect_walk(m)
        keys = [k for k in sorted(M.files) if len(M.files[k]) > 0][:12]
        cached = keys[:4]
        out, _ = run_ops(file_ops(m, cached), threads=2)
        self.assertEqual(out.ok, len(cached), str(out))

        for kind in ("500", "503"):
            M.proxy.config(rates={kind: 1.0}, methods=["GET"])
            M.proxy.reset_stats()
            cold = keys[4:8] if kind == "500" else keys[8:12]
            t0 = time.monotonic()
            for k in cold:
                self.assertEqual(read_file(m, k, M.files[k]), "eio",
                                 "%s with every GET answered %s%s" % (k, kind, self.diag(m)))
            secs = time.monotonic() - t0
            st = M.proxy.stats()
            n = fault_count(st, kind, "GET")
            print("\n    all GETs %s: %d reads -> EIO in %.2fs, %d faults" % (kind, len(cold), secs, n))
            # each read made every attempt it is allowed
            self.assertGreaterEqual(n, len(cold) * (BACKEND["retries"] + 1), st["faults"])
            self.assertTrue(m.alive(), "the daemon died")
            m.stats()  # the control socket answers
            # data already cached is still served, exactly
            out, _ = run_ops(file_ops(m, cached), threads=2)
            self.assertEqual((out.ok, out.bad), (len(cached), []), str(out))

        M.proxy.off()
        out, hung = run_ops(file_ops(m, keys), threads=4, deadline_s=60)
        self.assertFalse(hung or out.bad or out.eio, "after faults: %s %s%s" % (
            out, out.bad[:5], self.diag(m)))
        self.assertTrue(m.alive())

    # -- hostile replies (issue 16): a lying server, or a tampered http://

    def hostile(self, kind, methods, regex=""):
        rule = {"methods": methods, "rates": {kind: 1.0}}
        if regex:
            rule["path_regex"] = regex
        M.proxy.config(rules=[rule])
        M.proxy.reset_stats()

    def listdir_bounded(self, m, rel, secs=30.0):
        """os.listdir in a thread: its names, 'eio', an error, or 'hung'."""
        out = []

        def run():
            try:
                out.append(sorted(os.listdir(m.path(rel))))
            except OSError as e:
                out.append("eio" if e.errno == errno.EIO else "error %r" % e)

        t = threading.Thread(target=run, daemon=True)
        t.start()
        t.join(secs)
        return out[0] if out else "hung"

    def test_hostile_foreign_listing_names_dropped(self):
        """Listed names outside the prefix asked for never reach the namespace."""
        m = self.mount("foreign")
        self.hostile("foreign_list", ["GET"], "list-type=2")
        self.expect_walk(m)  # exactly the data set: no sibling's names, no nested keys
        st = M.proxy.stats()
        self.assertGreater(fault_count(st, "foreign_list"), 0, st["faults"])
        dropped = m.stats()["backend"]["list_foreign_dropped"]
        print("\n    %d replies with foreign names, %d names dropped" % (
            fault_count(st, "foreign_list"), dropped))
        self.assertGreaterEqual(dropped, fault_count(st, "foreign_list"))
        self.assertTrue(m.alive(), "the daemon died")

    def test_hostile_looping_listing_gives_eio(self):
        """A listing whose continuation tokens loop ends in EIO, soon."""
        m = self.mount("loop")
        self.hostile("loop_token", ["GET"], "list-type=2")
        t0 = time.monotonic()
        res = self.listdir_bounded(m, "train/c01")
        secs = time.monotonic() - t0
        self.assertEqual(res, "eio", "readdir of a looping listing%s" % self.diag(m))
        st = M.proxy.stats()
        print("\n    looping listing -> EIO in %.2fs after %d list pages" % (
            secs, fault_count(st, "loop_token")))
        self.assertGreaterEqual(m.stats()["backend"]["list_loops"], 1, self.diag(m))
        M.proxy.off()
        self.assertEqual(self.listdir_bounded(m, "train/c02"),
                         sorted({k.split("/")[2] for k in M.files if k.startswith("train/c02/")}))

    def test_hostile_huge_sizes_refused(self):
        """Sizes beyond 2^63-1 (listing, HEAD, Content-Range) give EIO."""
        m = self.mount("huge")
        self.hostile("huge_size", ["GET"], "list-type=2")
        self.assertEqual(self.listdir_bounded(m, "train/c03"), "eio", self.diag(m))
        self.hostile("huge_size", ["HEAD"])
        key = sorted(k for k in M.files if k.startswith("train/c04/"))[0]
        self.assertEqual(meta_op(lambda: os.stat(m.path(key))), "eio", self.diag(m))
        self.assertEqual(fault_count(M.proxy.stats(), "huge_size", "HEAD"), 1,
                         "a refused size is retried")
        M.proxy.off()
        key = sorted(k for k in M.files if k.startswith("train/c05/") and len(M.files[k]))[0]
        self.assertEqual(stat_size(m, key, len(M.files[key])), "ok")
        self.hostile("huge_size", ["GET"])
        self.assertEqual(read_file(m, key, M.files[key]), "eio", self.diag(m))
        self.assertGreater(fault_count(M.proxy.stats(), "huge_size", "GET"), 0)
        with open(m.logfile) as f:
            self.assertIn("beyond 2^63-1", f.read())

    def test_hostile_wrong_content_range_never_cached(self):
        """A 206 of another range than asked for is EIO, and is not cached."""
        m = self.mount("range")
        keys = sorted(k for k in M.files if k.startswith("train/c00/") and len(M.files[k]))[:3]
        for k in keys:
            self.assertEqual(stat_size(m, k, len(M.files[k])), "ok")
        self.hostile("bad_range", ["GET"])
        for k in keys:
            self.assertEqual(read_file(m, k, M.files[k]), "eio", k + self.diag(m))
        self.assertGreater(fault_count(M.proxy.stats(), "bad_range", "GET"), 0)
        M.proxy.off()
        for k in keys:
            self.assertEqual(read_file(m, k, M.files[k]), "ok", k)

    def test_stream_gets_in_flight(self):
        """prefetch.stream_gets runs are fetched at once ahead of one
        sequential reader when every reply waits for its first byte (the
        proxy's realistic mode): the default 4 keeps at most 6 in flight
        (its window, the reader's own block, one refill early), 12 reaches
        10 or more."""
        ra = {"workers": "16", "readahead": "%dK" % (2 * BLOCK // 1024)}  # runs of 1 block
        M.proxy.config(ttfb_ms=150)
        try:
            seen = {}
            for gets in ("4", "12"):
                m = self.mount("gets" + gets, {"prefetch": dict(ra, stream_gets=gets)})
                with open(m.path(M.big_key), "rb") as f:
                    got = f.read()
                self.assertEqual(hashlib.sha256(got).hexdigest(),
                                 hashlib.sha256(M.big).hexdigest(), "bytes differ" + self.diag(m))
                seen[gets] = m.stats()["prefetch"]["active_max"]
                m.umount()
        finally:
            M.proxy.config(ttfb_ms=0)
        self.assertLessEqual(seen["4"], 6, seen)
        self.assertGreaterEqual(seen["12"], 10, seen)


    def test_rename_copy_does_not_block_namespace(self):
        """A rename of a clean object (a server-side copy and a delete)
        waits for the bucket without holding up namespace changes
        elsewhere: while the copy's PUT is held by the proxy, a mkdir and a
        create in another directory complete, and a change of the renamed
        name waits for the rename."""
        body = os.urandom(70_000)
        M.s3.put_object(Bucket=M.bucket, Key=M.prefix + "ren/src.bin", Body=body)
        m = self.mount("rename", {"writeback": {"delay": "0s"},
                                  "backend": {"low_speed_time": "30s"}})
        self.assertEqual(os.stat(m.path("ren/src.bin")).st_size, len(body))
        os.makedirs(m.path("other"), exist_ok=True)
        self.addCleanup(delete_prefixes, ("ren/", "other/"))
        # No held PUT can end before t_held + 4 s: the proxy holds it 4 s
        # from a moment after this one.
        t_held = time.monotonic()
        M.proxy.config(rules=[{"methods": ["PUT"], "path_regex": "ren/dst\\.bin",
                               "rates": {"latency": 1.0}, "latency_ms": [4000, 4000],
                               "latency_where": "headers"}])
        M.proxy.reset_stats()
        err = []

        def rename():
            try:
                os.rename(m.path("ren/src.bin"), m.path("ren/dst.bin"))
            except OSError as e:
                err.append(e)

        t = threading.Thread(target=rename)
        t.start()
        try:
            poll(lambda: fault_count(M.proxy.stats(), "latency", "PUT") > 0, 30,
                 "the copy to reach the proxy")
            os.mkdir(m.path("other/d1"))
            with open(m.path("other/f1"), "wb") as f:
                f.write(b"x")
            self.assertTrue(t.is_alive(), "mkdir and create waited for the rename's copy"
                            + self.diag(m))
            # the renamed name itself waits for the rename
            os.unlink(m.path("ren/dst.bin"))
            # The thread may not have run since its rename returned, so
            # is_alive() cannot tell; the clock can: an unlink that waited
            # for the rename returns after the held PUT.
            waited = time.monotonic() - t_held
            self.assertGreaterEqual(waited, 3.9, "unlink of the target ran before the rename"
                                    + self.diag(m))
        finally:
            t.join(60)
            M.proxy.off()
        self.assertEqual(err, [])
        self.assertFalse(os.path.exists(m.path("ren/src.bin")))
        self.assertFalse(os.path.exists(m.path("ren/dst.bin")))
        self.assertTrue(os.path.isdir(m.path("other/d1")))
        # leave the bucket as the other tests expect it (expect_walk)
        os.unlink(m.path("other/f1"))
        os.rmdir(m.path("other/d1"))
        os.rmdir(m.path("other"))

        def drained():
            wb = m.stats()["writeback"]
            return wb["pending_files"] == 0 and wb["uploading"] == 0

        poll(drained, 60, "write-back to finish")
        left = [o["Key"] for o in M.s3.list_objects_v2(Bucket=M.bucket, Prefix=M.prefix).get(
            "Contents", []) if o["Key"][len(M.prefix):].startswith(("ren/", "other/"))]
        self.assertEqual(left, [], "objects left in the bucket")


def delete_prefixes(prefixes):
    """Delete the bucket's objects under the dataset prefix + each of
    `prefixes`, so that a test that failed half-way leaves the listing
    that expect_walk wants."""
    for o in M.s3.list_objects_v2(Bucket=M.bucket, Prefix=M.prefix).get("Contents", []):
        if o["Key"][len(M.prefix):].startswith(tuple(prefixes)):
            M.s3.delete_object(Bucket=M.bucket, Key=o["Key"])


def stat_size(m, key, size):
    try:
        st = os.stat(m.path(key))
    except OSError as e:
        return "eio" if e.errno == errno.EIO else "error %r" % e
    return "ok" if st.st_size == size else "st_size %d, expected %d" % (st.st_size, size)


def meta_op(fn):
    """A lookup or listing: 'ok', 'eio' or what went wrong."""
    try:
        fn()
        return "ok"
    except OSError as e:
        return "eio" if e.errno == errno.EIO else "error %r" % e


# ---------------------------------------------------------------- main

def main():
    global TIERFS
    args = sys.argv[1:]
    selftest = "--no-selftest" not in args
    args = [a for a in args if a != "--no-selftest"]
    if args and not args[0].startswith("-"):
        TIERFS = os.path.abspath(args.pop(0))
    os.environ["TIERFS"] = TIERFS  # test_proxy.py runs `tierfs backend put` with it
    loader = unittest.TestLoader()
    if "-k" in args and args.index("-k") + 1 < len(args):
        loader.testNamePatterns = ["*%s*" % args[args.index("-k") + 1]]
    suite = unittest.TestSuite()
    suite.addTests(loader.loadTestsFromModule(sys.modules[__name__]))
    if selftest:
        import test_proxy
        suite.addTests(loader.loadTestsFromModule(test_proxy))
    r = unittest.TextTestRunner(verbosity=2).run(suite)
    failed = len(r.failures) + len(r.errors) + len(r.unexpectedSuccesses)
    skipped = len(r.skipped)
    passed = r.testsRun - failed - skipped - len(r.expectedFailures)
    for test, why in r.skipped:
        print("skipped: %s: %s" % (test.id().split(".")[-1], why))
    print("faults: %d passed, %d failed (%d skipped)" % (passed, failed, skipped))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
