#!/usr/bin/env python3
"""test_write.py - the write path through a real FUSE mount.

    test_write.py TIERFS --backend local|moto [--only NAME] [--extended]

Writes go through a mounted tierfs; the truth is read from the bucket
behind it (the local directory, or moto via boto3).  Crash tests kill -9
the daemon and remount with the same cache directory.  Prints one line per
test and ends with "write: N passed, N failed".
"""
import argparse
import errno
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback

from test_mount import BUCKET, Bucket, Ctx, data_for, poll, read

MIB = 1 << 20


# ---------------------------------------------------------------- helpers

def bucket_get(b, key):
    """The object's bytes, or None."""
    if b.kind == "local":
        try:
            return read(os.path.join(b.root, key))
        except FileNotFoundError:
            return None
    try:
        return b.s3.get_object(Bucket=BUCKET, Key=b.prefix + key)["Body"].read()
    except b.s3.exceptions.NoSuchKey:
        return None


def bucket_head(b, key):
    """x-amz-meta-* of the object (moto only)."""
    return b.s3.head_object(Bucket=BUCKET, Key=b.prefix + key)["Metadata"]


def bucket_uploads(b):
    """Multipart uploads in progress under the test prefix."""
    if b.kind == "local":
        return []
    r = b.s3.list_multipart_uploads(Bucket=BUCKET, Prefix=b.prefix)
    return r.get("Uploads", [])


def wait_bucket(b, key, data, timeout=30):
    poll(lambda: bucket_get(b, key) == data, timeout, "'%s' to reach the bucket byte-exact" % key)


def wait_gone(b, key, timeout=30):
    poll(lambda: bucket_get(b, key) is None, timeout, "'%s' to leave the bucket" % key)


def write(path, data, fsync=False):
    with open(path, "wb") as f:
        f.write(data)
        if fsync:
            f.flush()
            os.fsync(f.fileno())


def kill9(m):
    pid = m.pid()
    os.kill(pid, signal.SIGKILL)
    poll(lambda: not os.path.exists("/proc/%d" % pid) or
         open("/proc/%d/stat" % pid).read().split()[2] == "Z", 10, "the daemon to die")
    subprocess.run(["fusermount3", "-uz", m.mnt], capture_output=True)
    poll(lambda: not os.path.ismount(m.mnt), 10, "the dead mount to go")


def wb(m):
    return m.stats()["writeback"]


def drained(m):
    s = wb(m)
    return s["pending_files"] == 0 and s["uploading"] == 0


def moto_pid(b):
    with open(os.path.join(b.server_dir, "moto.pid")) as f:
        return int(f.read().split()[0])


SLOW = {"writeback": {"delay": "60s"}}  # nothing uploads until drained
FAST = {"writeback": {"delay": "0s", "retry_base": "100ms", "retry_max": "500ms"}}


def conf(*parts, **extra):
    out = {}
    for p in parts + (extra,):
        for sec, kv in p.items():
            out.setdefault(sec, {}).update(kv)
    return out


# ---------------------------------------------------------------- tests

def t_create_read_own_writes_and_upload(ctx):
    m = ctx.mount("basic", SLOW).mount()
    try:
        os.makedirs(os.path.join(m.mnt, "ckpt"))
        data = data_for("model", 3 * MIB + 17)
        p = os.path.join(m.mnt, "ckpt/model.pt")
        with open(p, "wb") as f:
            f.write(data[:MIB])
            f.flush()
            # Readers in the same mount see the bytes at once.
            assert read(p) == data[:MIB]
            f.write(data[MIB:])
        assert read(p) == data
        assert os.stat(p).st_size == len(data)
        # Listed before it is uploaded.
        assert os.listdir(os.path.join(m.mnt, "ckpt")) == ["model.pt"]
        assert bucket_get(ctx.bucket, "ckpt/model.pt") is None, "uploaded before the delay"
        assert wb(m)["pending_files"] >= 1
        # Appends and writes at offsets.
        with open(p, "r+b") as f:
            f.seek(100)
            f.write(b"X" * 10)
        with open(p, "ab") as f:
            f.write(b"tail")
        want = data[:100] + b"X" * 10 + data[110:] + b"tail"
        assert read(p) == want
    finally:
        m.umount()  # drains
    assert bucket_get(ctx.bucket, "ckpt/model.pt") == want
    if ctx.bucket.kind != "local":
        assert bucket_get(ctx.bucket, "ckpt/") == b"", "no directory marker"


def t_overwrite_is_copy_on_write(ctx):
    orig = data_for("orig", 5 * MIB + 3)
    ctx.bucket.put("data/shard.bin", orig)
    m = ctx.mount("cow", FAST).mount()
    try:
        p = os.path.join(m.mnt, "data/shard.bin")
        with open(p, "r+b") as f:
            f.seek(2 * MIB)
            f.write(b"patched")
        want = orig[:2 * MIB] + b"patched" + orig[2 * MIB + 7:]
        assert read(p) == want
        wait_bucket(ctx.bucket, "data/shard.bin", want)
        poll(lambda: drained(m), 20, "write-back to finish")
        # The uploaded bytes became clean cache: no download to read them.
        gets = m.gets()
        os.system("sync; echo 3 > /proc/sys/vm/drop_caches")
        assert read(p) == want
        assert m.gets() == gets, "re-downloaded what was just uploaded"
        # O_TRUNC replaces without reading the old data.
        write(p, b"short")
        wait_bucket(ctx.bucket, "data/shard.bin", b"short")
    finally:
        m.umount()


def t_truncate_unlink_mkdir_rmdir(ctx):
    ctx.bucket.put("d/old.txt", b"0123456789")
    ctx.bucket.put("d/sub/keep.txt", b"k")
    m = ctx.mount("posix", FAST).mount()
    try:
        p = os.path.join(m.mnt, "d/old.txt")
        os.truncate(p, 4)
        assert read(p) == b"0123"
        with open(p, "r+b") as f:
            f.truncate(8)
        assert read(p) == b"0123\0\0\0\0"
        wait_bucket(ctx.bucket, "d/old.txt", b"0123\0\0\0\0")
        # rmdir of a non-empty directory
        try:
            os.rmdir(os.path.join(m.mnt, "d/sub"))
            raise AssertionError("rmdir of a non-empty directory succeeded")
        except OSError as e:
            assert e.errno == errno.ENOTEMPTY, e
        os.unlink(os.path.join(m.mnt, "d/sub/keep.txt"))
        assert not os.path.exists(os.path.join(m.mnt, "d/sub/keep.txt"))
        os.rmdir(os.path.join(m.mnt, "d/sub"))
        assert sorted(os.listdir(os.path.join(m.mnt, "d"))) == ["old.txt"]
        wait_gone(ctx.bucket, "d/sub/keep.txt")
        os.mkdir(os.path.join(m.mnt, "new"))
        os.mkdir(os.path.join(m.mnt, "new/deeper"))
        try:
            os.mkdir(os.path.join(m.mnt, "new"))
            raise AssertionError("mkdir of an existing directory succeeded")
        except FileExistsError:
            pass
        write(os.path.join(m.mnt, "new/deeper/f"), b"f")
        wait_bucket(ctx.bucket, "new/deeper/f", b"f")
        try:
            os.unlink(os.path.join(m.mnt, "nope"))
            raise AssertionError("unlink of a missing file succeeded")
        except FileNotFoundError:
            pass
        try:
            os.rmdir(os.path.join(m.mnt, "d/old.txt"))
            raise AssertionError("rmdir of a file succeeded")
        except NotADirectoryError:
            pass
    finally:
        m.umount()
    # A remount (fresh cache) sees the bucket the same way.
    m2 = ctx.mount("posix2", FAST).mount()
    try:
        assert sorted(os.listdir(m2.mnt)) == ["d", "new"]
        assert os.listdir(os.path.join(m2.mnt, "new")) == ["deeper"]
        assert read(os.path.join(m2.mnt, "d/old.txt")) == b"0123\0\0\0\0"
    finally:
        m2.umount()


def t_rename(ctx):
    ctx.bucket.put("clean.bin", data_for("clean", 70000))
    for i in range(5):
        ctx.bucket.put("dir/f%d" % i, b"f%d" % i)
    ctx.bucket.put("dir/sub/g", b"g")
    m = ctx.mount("rename", FAST).mount()
    try:
        mnt = m.mnt
        # A clean object: server-side copy plus delete.
        os.rename(os.path.join(mnt, "clean.bin"), os.path.join(mnt, "moved.bin"))
        assert not os.path.exists(os.path.join(mnt, "clean.bin"))
        assert read(os.path.join(mnt, "moved.bin")) == data_for("clean", 70000)
        assert bucket_get(ctx.bucket, "moved.bin") == data_for("clean", 70000)
        assert bucket_get(ctx.bucket, "clean.bin") is None
        # A dirty file, still open for writing.
        with open(os.path.join(mnt, "w.tmp"), "wb") as f:
            f.write(b"part1")
            os.rename(os.path.join(mnt, "w.tmp"), os.path.join(mnt, "w.final"))
            f.write(b"part2")
        assert read(os.path.join(mnt, "w.final")) == b"part1part2"
        wait_bucket(ctx.bucket, "w.final", b"part1part2")
        assert bucket_get(ctx.bucket, "w.tmp") is None
        # Onto an existing file.
        write(os.path.join(mnt, "a"), b"AAA")
        write(os.path.join(mnt, "b"), b"BBB")
        os.rename(os.path.join(mnt, "a"), os.path.join(mnt, "b"))
        assert read(os.path.join(mnt, "b")) == b"AAA"
        wait_bucket(ctx.bucket, "b", b"AAA")
        wait_gone(ctx.bucket, "a")
        # A directory (bounded; documented).
        os.rename(os.path.join(mnt, "dir"), os.path.join(mnt, "dir2"))
        assert sorted(os.listdir(os.path.join(mnt, "dir2"))) == ["f0", "f1", "f2", "f3", "f4", "sub"]
        assert not os.path.exists(os.path.join(mnt, "dir"))
        assert read(os.path.join(mnt, "dir2/sub/g")) == b"g"
        poll(lambda: drained(m), 20, "write-back to finish")
        for i in range(5):
            assert bucket_get(ctx.bucket, "dir2/f%d" % i) == b"f%d" % i
            assert bucket_get(ctx.bucket, "dir/f%d" % i) is None
        assert bucket_get(ctx.bucket, "dir2/sub/g") == b"g"
    finally:
        m.umount()


def t_attrs_and_unsupported(ctx):
    m = ctx.mount("attrs", FAST).mount()
    try:
        p = os.path.join(m.mnt, "f")
        write(p, b"x")
        os.chmod(p, 0o600)
        os.utime(p, (1_600_000_000, 1_600_000_000))
        st = os.stat(p)
        assert st.st_mode & 0o7777 == 0o600, oct(st.st_mode)
        assert int(st.st_mtime) == 1_600_000_000
        poll(lambda: drained(m), 20, "write-back to finish")
        if ctx.bucket.kind != "local":
            meta = bucket_head(ctx.bucket, "f")
            assert int(meta["mode"]) & 0o7777 == 0o600, meta
            assert meta["mtime"] == "1600000000", meta
        # chmod of a clean object: a server-side copy with new headers.
        os.chmod(p, 0o640)
        assert os.stat(p).st_mode & 0o7777 == 0o640
        poll(lambda: drained(m), 20, "write-back to finish")
        if ctx.bucket.kind != "local":
            assert int(bucket_head(ctx.bucket, "f")["mode"]) & 0o7777 == 0o640
        assert bucket_get(ctx.bucket, "f") == b"x"
        for fn, want in ((lambda: os.link(p, os.path.join(m.mnt, "hard")), errno.EPERM),
                         (lambda: os.symlink("f", os.path.join(m.mnt, "sym")), errno.EPERM),
                         (lambda: os.setxattr(p, "user.k", b"v"), errno.ENOTSUP),
                         (lambda: os.getxattr(p, "user.k"), errno.ENOTSUP)):
            try:
                fn()
                raise AssertionError("an unsupported call succeeded")
            except OSError as e:
                assert e.errno == want, (e, want)
        sv = os.statvfs(m.mnt)
        assert sv.f_bsize > 0 and sv.f_blocks > 0 and sv.f_bavail <= sv.f_blocks, sv
    finally:
        m.umount()


def t_fsync_and_close_survive_kill9(ctx):
    m = ctx.mount("crash", SLOW).mount()
    closed = {"closed/%d" % i: data_for("c%d" % i, random.randrange(1, 300000)) for i in range(10)}
    synced = {"synced/%d" % i: data_for("s%d" % i, 2 * MIB + i) for i in range(3)}
    os.makedirs(os.path.join(m.mnt, "closed"))
    os.makedirs(os.path.join(m.mnt, "synced"))
    for k, v in closed.items():
        write(os.path.join(m.mnt, k), v)
    for k, v in synced.items():
        write(os.path.join(m.mnt, k), v, fsync=True)
    # One still open and being written at the kill.
    f = open(os.path.join(m.mnt, "open.bin"), "wb")
    f.write(b"partial")
    f.flush()
    assert bucket_get(ctx.bucket, "closed/0") is None
    kill9(m)
    try:
        f.close()
    except OSError:
        pass
    m.mount()
    try:
        for k, v in list(closed.items()) + list(synced.items()):
            wait_bucket(ctx.bucket, k, v, 60)
            assert read(os.path.join(m.mnt, k)) == v
        st = wb(m)
        assert st["recovered"] >= 13, st
    finally:
        m.umount()


def t_crash_rounds(ctx):
    """kill -9 at random moments while files are written and uploaded;
    every file closed before the kill ends up byte-exact in the bucket."""
    rounds = 20 if ctx.extended else 3
    rnd = random.Random(1234)
    cfg = conf(FAST, {"backend": {"multipart_threshold": "5M", "part_size": "5M"}})
    m = ctx.mount("rounds", cfg)
    expect = {}
    for rd in range(rounds):
        m.mount()
        os.makedirs(os.path.join(m.mnt, "r%02d" % rd), exist_ok=True)
        done = []
        stop = threading.Event()

        def writer():
            i = 0
            while not stop.is_set() and i < 200:
                key = "r%02d/f%03d" % (rd, i)
                size = rnd.choice([0, 1, 4096, 100_000, 1 << 20, 7 << 20]) if ctx.bucket.kind != "local" \
                    else rnd.choice([0, 1, 4096, 100_000, 1 << 20, 3 << 20])
                data = data_for(key + "-%d" % rd, size)
                try:
                    write(os.path.join(m.mnt, key), data, fsync=(i % 5 == 0))
                except OSError:
                    return  # the daemon died mid-write: this file was not closed
                done.append((key, data))
                i += 1

        t = threading.Thread(target=writer)
        t.start()
        poll(lambda: len(done) >= 3, 30, "some files to be written")
        time.sleep(rnd.uniform(0, 0.4))  # a random moment, not a wait for a condition
        kill9(m)
        stop.set()
        t.join(30)
        for k, v in done:
            expect[k] = v
    m.mount()
    try:
        for k, v in expect.items():
            wait_bucket(ctx.bucket, k, v, 120)
        poll(lambda: drained(m), 60, "write-back to finish")
        assert bucket_uploads(ctx.bucket) == [], "orphaned multipart uploads"
    finally:
        m.umount()
    fresh = ctx.mount("rounds-fresh").mount()  # an empty cache
    try:
        for k, v in expect.items():
            assert read(os.path.join(fresh.mnt, k)) == v, k
    finally:
        fresh.umount()


def t_multipart_resumes_after_kill9(ctx):
    if ctx.bucket.kind == "local":
        return "skip"
    cfg = conf({"writeback": {"delay": "0s", "uploaders": "1"},
                "backend": {"multipart_threshold": "5M", "part_size": "5M", "upload_parallel": "1"}})
    m = ctx.mount("mpu", cfg).mount()
    data = data_for("mpu", 60 * MIB + 11)
    write(os.path.join(m.mnt, "big.bin"), data)
    # Kill in the middle: once the upload exists on the server.
    poll(lambda: len(bucket_uploads(ctx.bucket)) > 0 or bucket_get(ctx.bucket, "big.bin") is not None,
         30, "the multipart upload to start")
    kill9(m)
    m.mount()
    try:
        wait_bucket(ctx.bucket, "big.bin", data, 120)
        poll(lambda: drained(m), 30, "write-back to finish")
        assert bucket_uploads(ctx.bucket) == [], "orphaned multipart uploads left"
        assert read(os.path.join(m.mnt, "big.bin")) == data
    finally:
        m.umount()


def t_rewrite_during_upload(ctx):
    if ctx.bucket.kind == "local":
        return "skip"
    cfg = conf({"writeback": {"delay": "0s", "uploaders": "2"},
                "backend": {"multipart_threshold": "5M", "part_size": "5M", "upload_parallel": "1"}})
    m = ctx.mount("gen", cfg).mount()
    try:
        p = os.path.join(m.mnt, "ckpt.pt")
        v1 = data_for("v1", 40 * MIB)
        write(p, v1)
        poll(lambda: wb(m)["uploading"] > 0, 20, "the upload of v1 to start")
        v2 = data_for("v2", 3 * MIB)
        write(p, v2)
        poll(lambda: drained(m), 60, "write-back to finish")
        assert bucket_get(ctx.bucket, "ckpt.pt") == v2, "an older version won"
        assert read(p) == v2
        assert bucket_uploads(ctx.bucket) == []
    finally:
        m.umount()


def t_server_down_retries_then_uploads(ctx):
    if ctx.bucket.kind == "local":
        return "skip"
    cfg = conf(FAST, {"backend": {"retries": "0", "low_speed_time": "1s", "connect_timeout": "1s"}})
    m = ctx.mount("down", cfg).mount()
    pid = moto_pid(ctx.bucket)
    try:
        os.listdir(m.mnt)  # a cached listing answers "no such name" offline
        os.kill(pid, signal.SIGSTOP)
        try:
            write(os.path.join(m.mnt, "during-outage"), b"must not be lost")
            poll(lambda: wb(m)["attempt_failures"] >= 2, 30, "failed attempts")
            assert wb(m)["pending_files"] == 1
        finally:
            os.kill(pid, signal.SIGCONT)
        wait_bucket(ctx.bucket, "during-outage", b"must not be lost", 30)
    finally:
        m.umount()


def t_sync_mode(ctx):
    if ctx.bucket.kind == "local":
        m = ctx.mount("sync", conf({"writeback": {"mode": "sync"}})).mount()
        try:
            write(os.path.join(m.mnt, "s"), b"sync")
            assert bucket_get(ctx.bucket, "s") == b"sync", "close returned before the upload"
        finally:
            m.umount()
        return None
    cfg = conf({"writeback": {"mode": "sync", "retry_base": "100ms", "retry_max": "200ms"},
                "backend": {"retries": "0", "low_speed_time": "1s", "connect_timeout": "1s"}})
    m = ctx.mount("sync", cfg).mount()
    try:
        write(os.path.join(m.mnt, "s"), b"sync")
        assert bucket_get(ctx.bucket, "s") == b"sync", "close returned before the upload"
        pid = moto_pid(ctx.bucket)
        os.listdir(m.mnt)  # a cached listing answers "no such name" offline
        os.kill(pid, signal.SIGSTOP)
        try:
            f = open(os.path.join(m.mnt, "s2"), "wb")
            f.write(b"x")
            t0 = time.monotonic()
            try:
                os.fsync(f.fileno())
                raise AssertionError("fsync succeeded with the server down")
            except OSError as e:
                assert e.errno == errno.EIO, e
            assert time.monotonic() - t0 < 20
            try:
                f.close()
            except OSError:
                pass
        finally:
            os.kill(pid, signal.SIGCONT)
        wait_bucket(ctx.bucket, "s2", b"x", 30)  # still retried afterwards
    finally:
        m.umount()


def t_umount_reports_leftovers(ctx):
    if ctx.bucket.kind == "local":
        return "skip"
    cfg = conf(SLOW, {"writeback": {"drain_timeout": "2s", "retry_base": "100ms", "retry_max": "200ms"},
                      "backend": {"retries": "0", "low_speed_time": "1s", "connect_timeout": "1s"}})
    m = ctx.mount("left", cfg).mount()
    pid = moto_pid(ctx.bucket)
    write(os.path.join(m.mnt, "l1"), b"1" * 1000)
    write(os.path.join(m.mnt, "l2"), b"2" * 24)
    os.kill(pid, signal.SIGSTOP)
    try:
        r = subprocess.run([m.tierfs, "umount", m.mnt], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert "2 file(s) (1024 bytes) not uploaded yet" in r.stderr, r.stderr
        poll(lambda: not os.path.ismount(m.mnt), 20, "the unmount")
    finally:
        os.kill(pid, signal.SIGCONT)
    m.mount()  # the same cache directory: the journal resumes
    try:
        wait_bucket(ctx.bucket, "l1", b"1" * 1000)
        wait_bucket(ctx.bucket, "l2", b"2" * 24)
    finally:
        m.umount()


def t_listing_hides_deleted_until_done(ctx):
    ctx.bucket.put("x/gone", b"g")
    ctx.bucket.put("x/stay", b"s")
    m = ctx.mount("hide", SLOW).mount()
    try:
        os.unlink(os.path.join(m.mnt, "x/gone"))
        assert os.listdir(os.path.join(m.mnt, "x")) == ["stay"]
        assert bucket_get(ctx.bucket, "x/gone") == b"g", "deleted before the delay"
        write(os.path.join(m.mnt, "x/gone"), b"again")  # recreate over the pending delete
        assert read(os.path.join(m.mnt, "x/gone")) == b"again"
    finally:
        m.umount()
    assert bucket_get(ctx.bucket, "x/gone") == b"again"


def t_mode_off_is_read_only(ctx):
    ctx.bucket.put("r", b"r")
    m = ctx.mount("off", conf({"writeback": {"mode": "off"}})).mount()
    try:
        assert read(os.path.join(m.mnt, "r")) == b"r"
        for fn in (lambda: write(os.path.join(m.mnt, "w"), b"w"),
                   lambda: os.mkdir(os.path.join(m.mnt, "d")),
                   lambda: os.unlink(os.path.join(m.mnt, "r"))):
            try:
                fn()
                raise AssertionError("a write succeeded on a read-only mount")
            except OSError as e:
                assert e.errno == errno.EROFS, e
    finally:
        m.umount()


def t_parallel_writers(ctx):
    m = ctx.mount("par", FAST).mount()
    files = {"p/%02d/f%d" % (i % 4, i): data_for("p%d" % i, random.randrange(0, 2 * MIB))
             for i in range(40)}
    errors = []
    for d in range(4):
        os.makedirs(os.path.join(m.mnt, "p/%02d" % d), exist_ok=True)

    def worker(items):
        try:
            for k, v in items:
                write(os.path.join(m.mnt, k), v)
                if read(os.path.join(m.mnt, k)) != v:
                    errors.append(k)
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))

    items = list(files.items())
    ts = [threading.Thread(target=worker, args=(items[i::8],)) for i in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    try:
        assert not errors, errors[:5]
        poll(lambda: drained(m), 60, "write-back to finish")
        for k, v in files.items():
            assert bucket_get(ctx.bucket, k) == v, k
    finally:
        m.umount()


TESTS = [
    ("create_read_own_writes_and_upload", t_create_read_own_writes_and_upload),
    ("overwrite_is_copy_on_write", t_overwrite_is_copy_on_write),
    ("truncate_unlink_mkdir_rmdir", t_truncate_unlink_mkdir_rmdir),
    ("rename", t_rename),
    ("attrs_and_unsupported", t_attrs_and_unsupported),
    ("fsync_and_close_survive_kill9", t_fsync_and_close_survive_kill9),
    ("crash_rounds", t_crash_rounds),
    ("multipart_resumes_after_kill9", t_multipart_resumes_after_kill9),
    ("rewrite_during_upload", t_rewrite_during_upload),
    ("server_down_retries_then_uploads", t_server_down_retries_then_uploads),
    ("sync_mode", t_sync_mode),
    ("umount_reports_leftovers", t_umount_reports_leftovers),
    ("listing_hides_deleted_until_done", t_listing_hides_deleted_until_done),
    ("mode_off_is_read_only", t_mode_off_is_read_only),
    ("parallel_writers", t_parallel_writers),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tierfs")
    ap.add_argument("--backend", default="local", choices=["local", "moto"])
    ap.add_argument("--only")
    ap.add_argument("--extended", action="store_true")
    args = ap.parse_args()
    tierfs = os.path.abspath(args.tierfs)
    passed = failed = 0
    for name, fn in TESTS:
        if args.only and args.only != name:
            continue
        work = tempfile.mkdtemp(prefix="tierfs-wr-")
        bucket = ctx = None
        t0 = time.monotonic()
        try:
            bucket = Bucket(args.backend, work)
            ctx = Ctx(tierfs, bucket, work, args.extended)
            res = fn(ctx)
            if res == "skip":
                print("skip %s (%s)" % (name, args.backend))
            else:
                passed += 1
                print("ok   %s (%s, %.1fs)" % (name, args.backend, time.monotonic() - t0))
        except Exception:  # noqa: BLE001
            failed += 1
            print("FAIL %s (%s)" % (name, args.backend))
            traceback.print_exc()
            for m in (ctx.mounts if ctx else []):
                print("---- %s log:\n%s" % (m.mnt, m.log_tail()))
        finally:
            for m in (ctx.mounts if ctx else []):
                if os.path.ismount(m.mnt):
                    subprocess.run(["fusermount3", "-uz", m.mnt], capture_output=True)
            if bucket:
                bucket.close()
            shutil.rmtree(work, ignore_errors=True)
    print("write: %d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
