#!/usr/bin/env python3
"""test_write.py - the write path through a real FUSE mount.

    test_write.py TIERFS --backend local|moto [--only NAME] [--extended]
                  [--seed N] [--ops N]

Writes go through a mounted tierfs; the truth is read from the bucket
behind it (the local directory, or moto via boto3).  Crash tests kill -9
the daemon and remount with the same cache directory.  Prints one line per
test and ends with "write: N passed, N failed".

reference_model and reference_model_racing_uploads apply a seeded random
sequence of file operations to the mount and to a local directory and
compare them after every step (see RefModel); a failure prints the seed,
the step and the last operations, and writes the whole operation log to
/tmp/tierfs-model-seedN.log.  --seed N replays a run (also for
random_small_writes), --ops N sets its length.  Tests whose failure
message starts with "BUG" are reproducers of tierfs bugs the randomized
tests found; they fail until the bug is fixed.
"""
import errno
import glob
import hashlib
import os
import random
import re
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time

from test_mount import BUCKET, data_for, poll, read, run_suite

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


def dead(pid):
    """The process is gone, or a zombie with no thread left: the leader of
    a killed process turns zombie while its other threads are still
    exiting and holding its files (such as the control socket's lock)."""
    try:
        return (open("/proc/%d/stat" % pid).read().split()[2] == "Z" and
                len(os.listdir("/proc/%d/task" % pid)) <= 1)
    except (FileNotFoundError, ProcessLookupError):
        return True


def kill9(m):
    """kill -9 of the daemon and of its keeper, which would otherwise
    start a new daemon on the same mount (test_keeper.py tests that): the
    mount ends as after a crash of the node's tierfs, and the next mount
    recovers."""
    st = m.stats()
    pid, keeper = st["pid"], st.get("keeper", {}).get("pid")
    if keeper:
        os.kill(keeper, signal.SIGKILL)
        poll(lambda: dead(keeper), 10, "the keeper to die")
    os.kill(pid, signal.SIGKILL)
    poll(lambda: dead(pid), 10, "the daemon to die")
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
# Write-back at once: every change uploaded right after it (rewrite_delay
# 0 too), and quick retries.
FAST = {"writeback": {"delay": "0s", "rewrite_delay": "0s", "retry_base": "100ms",
                      "retry_max": "500ms"}}


def conf(*parts, **extra):
    out = {}
    for p in parts + (extra,):
        for sec, kv in p.items():
            out.setdefault(sec, {}).update(kv)
    return out


def flush(m, timeout=300):
    """`tierfs flush`: upload everything pending now and wait for it."""
    try:
        r = subprocess.run([m.tierfs, "flush", m.mnt], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise AssertionError("tierfs flush did not return in %d s; failing uploads: %s"
                             % (timeout, wb(m).get("failing")))
    assert r.returncode == 0, "tierfs flush failed: %s" % r.stderr


def backend_put_marker(m, key):
    """A directory marker 'dir/' written by `tierfs backend put` (the local
    backend keeps markers its own way)."""
    cmd = [m.tierfs, "backend"]
    if m.bucket.kind != "local":
        cmd += ["-o", "backend.endpoint=" + m.bucket.env["TFS_S3_ENDPOINT"]]
    r = subprocess.run(cmd + [m.bucket.source, "put", "-", key], env=m.env(), input=b"",
                       capture_output=True, timeout=60)
    assert r.returncode == 0, "tierfs backend put %s: %s" % (key, r.stderr.decode(errors="replace"))


def chunk_for(name, i, size=MIB):
    """Chunk i of a large deterministic file: fast (randbytes), and every
    chunk differs, so a misplaced or repeated chunk changes the checksum."""
    return random.Random("%s/%d" % (name, i)).randbytes(size)


def bucket_sha256(b, key, bufsize=8 * MIB):
    """(size, sha256 hex) of an object, streamed: never all in memory."""
    h = hashlib.sha256()
    n = 0
    if b.kind == "local":
        with open(os.path.join(b.root, key), "rb") as f:
            for c in iter(lambda: f.read(bufsize), b""):
                h.update(c)
                n += len(c)
    else:
        body = b.s3.get_object(Bucket=BUCKET, Key=b.prefix + key)["Body"]
        for c in body.iter_chunks(bufsize):
            h.update(c)
            n += len(c)
    return n, h.hexdigest()


def file_sha256(path, bufsize=8 * MIB):
    h = hashlib.sha256()
    n = 0
    with open(path, "rb") as f:
        for c in iter(lambda: f.read(bufsize), b""):
            h.update(c)
            n += len(c)
    return n, h.hexdigest()


LOCAL_TMP = ".tierfs-tmp."  # the local backend's own files: never keys (backends/local.c)


def local_walk(root):
    """os.walk of a local bucket without the backend's own files."""
    for r, ds, names in os.walk(root):
        ds[:] = [d for d in ds if not d.startswith(LOCAL_TMP)]
        yield r, ds, [nm for nm in names if not nm.startswith(LOCAL_TMP)]


def bucket_keys(b):
    """{key: (size, md5 hex or None)} of every object under the test prefix
    (directory markers end in '/'; the local backend: directories).  S3
    gives the MD5 of a single-part object as its ETag, so this checks
    contents without GETs; None for a multipart ETag."""
    out = {}
    if b.kind == "local":
        for root, dirs, names in local_walk(b.root):
            rel = os.path.relpath(root, b.root)
            for d in dirs:
                out[os.path.normpath(os.path.join(rel, d)) + "/"] = (0, hashlib.md5(b"").hexdigest())
            for nm in names:
                k = os.path.normpath(os.path.join(rel, nm))
                data = read(os.path.join(root, nm))
                out[k] = (len(data), hashlib.md5(data).hexdigest())
        return out
    pages = b.s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=b.prefix)
    for page in pages:
        for o in page.get("Contents", []):
            etag = o["ETag"].strip('"')
            out[o["Key"][len(b.prefix):]] = (o["Size"], None if "-" in etag else etag)
    return out


def bucket_tree(b):
    """(files {key: bytes}, directories) under the test prefix, as a tree:
    a directory is a marker 'dir/' or a prefix of a key."""
    files, dirs = {}, set()
    if b.kind == "local":
        for root, ds, names in local_walk(b.root):
            rel = os.path.relpath(root, b.root)
            for d in ds:
                dirs.add(os.path.normpath(os.path.join(rel, d)))
            for nm in names:
                files[os.path.normpath(os.path.join(rel, nm))] = read(os.path.join(root, nm))
        return files, dirs
    for k in bucket_keys(b):
        if k.endswith("/"):
            dirs.add(k[:-1])
        else:
            files[k] = bucket_get(b, k)
    for k in list(files) + list(dirs):
        parts = k.split("/")
        for i in range(1, len(parts)):
            dirs.add("/".join(parts[:i]))
    return files, dirs


def local_tree(root):
    """(files {relpath: bytes}, directories) of a directory tree."""
    files, dirs = {}, set()
    for r, ds, names in os.walk(root):
        rel = os.path.relpath(r, root)
        for d in ds:
            dirs.add(os.path.normpath(os.path.join(rel, d)))
        for nm in names:
            files[os.path.normpath(os.path.join(rel, nm))] = read(os.path.join(r, nm))
    return files, dirs


def diff_trees(what, got, want):
    """A readable difference of two (files, dirs) trees, or None."""
    gf, gd = got
    wf, wd = want
    out = []
    for k in sorted(set(wf) - set(gf)):
        out.append("missing file %s (%d bytes)" % (k, len(wf[k])))
    for k in sorted(set(gf) - set(wf)):
        out.append("extra file %s (%d bytes)" % (k, len(gf[k])))
    for k in sorted(set(gf) & set(wf)):
        if gf[k] != wf[k]:
            first = next((i for i in range(min(len(gf[k]), len(wf[k]))) if gf[k][i] != wf[k][i]),
                         min(len(gf[k]), len(wf[k])))
            out.append("file %s: %d bytes, expected %d; first difference at offset %d"
                       % (k, len(gf[k]), len(wf[k]), first))
    for d in sorted(wd - gd):
        out.append("missing directory %s" % d)
    for d in sorted(gd - wd):
        out.append("extra directory %s" % d)
    if not out:
        return None
    return "%s differs from the model:\n  %s" % (what, "\n  ".join(out[:30]))


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


def t_upload_xattr(ctx):
    """getxattr user.tierfs.upload says whether a file is in the bucket
    (what tierfs.torch.save(durable=True) polls): "pending" while a writer
    has it open and until its upload, "clean" once the bucket has what was
    closed; other names are ENODATA and none is listed."""
    ctx.bucket.put("old", b"in the bucket")
    m = ctx.mount("xattr", SLOW).mount()
    try:
        old = os.path.join(m.mnt, "old")
        assert os.getxattr(old, "user.tierfs.upload") == b"clean"
        assert os.getxattr(m.mnt, "user.tierfs.upload") == b"clean"
        expect_errno(lambda: os.getxattr(old, "user.other"), errno.ENODATA, "another name")
        assert os.listxattr(old) == []
        p = os.path.join(m.mnt, "ckpt.pt")
        with open(p, "wb") as f:
            f.write(b"weights")
            assert os.getxattr(p, "user.tierfs.upload") == b"pending", "open writer"
        assert os.getxattr(p, "user.tierfs.upload") == b"pending", "closed, not uploaded"
        assert bucket_get(ctx.bucket, "ckpt.pt") is None
        n = os.getxattr(p, "user.tierfs.upload")  # size query then value, as libc does
        assert n == b"pending"
        flush(m)
        assert os.getxattr(p, "user.tierfs.upload") == b"clean"
        assert bucket_get(ctx.bucket, "ckpt.pt") == b"weights"
        expect_errno(lambda: os.getxattr(os.path.join(m.mnt, ".tierfs-order"), "user.tierfs.upload"),
                     errno.ENODATA, "the control file")
    finally:
        m.umount()


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


def t_large_copies_in_parts(ctx):
    """A rename or chmod of a file in the bucket larger than
    backend.copy_part_size is a copy in parts (S3 copies at most 5 GiB in
    one request: a larger checkpoint could not be renamed otherwise)."""
    data = data_for("large", 12 * 2**20 + 999)
    ctx.bucket.put("large.bin", data)
    m = ctx.mount("large-copy", conf(FAST, backend={"copy_part_size": "5M"})).mount()
    try:
        moved = os.path.join(m.mnt, "moved.bin")
        os.rename(os.path.join(m.mnt, "large.bin"), moved)
        assert read(moved) == data
        assert bucket_get(ctx.bucket, "large.bin") is None
        os.chmod(moved, 0o600)
        poll(lambda: drained(m), 20, "write-back to finish")
        assert bucket_get(ctx.bucket, "moved.bin") == data
        if ctx.bucket.kind != "local":
            h = ctx.bucket.s3.head_object(Bucket=BUCKET, Key=ctx.bucket.prefix + "moved.bin")
            assert h["ETag"].endswith('-3"'), "not copied in 3 parts: %s" % h["ETag"]
            assert int(h["Metadata"]["mode"]) & 0o7777 == 0o600, h["Metadata"]
        assert os.stat(moved).st_mode & 0o7777 == 0o600
        assert read(moved) == data
    finally:
        m.umount()


def t_names_the_backend_refuses(ctx):
    """Names the backend cannot store are refused at create, mkdir, mknod
    and rename (ENAMETOOLONG: S3 keys over 1,024 bytes with the prefix;
    EINVAL: the local backend's reserved .tierfs-tmp.* names), before
    anything is staged, rather than accepted and then never uploaded."""
    m = ctx.mount("names", FAST).mount()
    mnt = m.mnt
    try:
        write(os.path.join(mnt, "short"), b"s")
        os.mkdir(os.path.join(mnt, "sdir"))
        write(os.path.join(mnt, "sdir/child"), b"c")
        deep = "/".join(c * 200 for c in "abcd")  # an 803-byte directory key
        os.makedirs(os.path.join(mnt, deep))
        if ctx.bucket.kind == "local":
            # A directory holds any 1,100-byte key; its own reserved names not.
            long_key = deep + "/" + "d" * 200 + "/" + "f" * 95
            os.mkdir(os.path.join(mnt, deep, "d" * 200))
            write(os.path.join(mnt, long_key), b"L")
            for name in (".tierfs-tmp.x", ".tierfs-tmp.d", "sdir/.tierfs-tmp.dir"):
                p = os.path.join(mnt, name)
                expect_errno(lambda: write(p, b"x"), errno.EINVAL, "create " + name)
                expect_errno(lambda: os.mkdir(p), errno.EINVAL, "mkdir " + name)
                expect_errno(lambda: os.mknod(p, 0o644 | stat.S_IFREG), errno.EINVAL, "mknod " + name)
                expect_errno(lambda: os.rename(os.path.join(mnt, "short"), p), errno.EINVAL,
                             "rename to " + name)
            expect_errno(lambda: os.rename(os.path.join(mnt, "sdir"), os.path.join(mnt, ".tierfs-tmp.s")),
                         errno.EINVAL, "rename a directory to .tierfs-tmp.s")
            poll(lambda: drained(m), 20, "write-back to finish")
            assert bucket_get(ctx.bucket, long_key) == b"L"
        else:
            room = 1024 - len(ctx.bucket.prefix) - len(deep) - 1  # bytes left for the last name
            fits = os.path.join(mnt, deep, "f" * room)  # a 1,024-byte key
            over = os.path.join(mnt, deep, "f" * (room + 1))
            write(fits, b"F")
            expect_errno(lambda: write(over, b"x"), errno.ENAMETOOLONG, "create a 1,025-byte key")
            expect_errno(lambda: os.mknod(over, 0o644 | stat.S_IFREG), errno.ENAMETOOLONG,
                         "mknod a 1,025-byte key")
            # A directory's key is its marker "name/": one byte more.
            expect_errno(lambda: os.mkdir(os.path.join(mnt, deep, "d" * room)), errno.ENAMETOOLONG,
                         "mkdir with a 1,025-byte marker")
            os.mkdir(os.path.join(mnt, deep, "d" * (room - 1)))
            expect_errno(lambda: os.rename(os.path.join(mnt, "short"), over), errno.ENAMETOOLONG,
                         "rename to a 1,025-byte key")
            # A directory whose marker fits, but not its child's key.
            expect_errno(lambda: os.rename(os.path.join(mnt, "sdir"), os.path.join(mnt, deep, "s" * (room - 5))),
                         errno.ENAMETOOLONG, "rename a directory whose child's key is too long")
            assert not os.path.exists(over)
            poll(lambda: drained(m), 20, "write-back to finish")
            assert bucket_get(ctx.bucket, deep + "/" + "f" * room) == b"F"
        # Nothing was moved or left staged by the refused calls.
        assert read(os.path.join(mnt, "short")) == b"s"
        assert read(os.path.join(mnt, "sdir/child")) == b"c"
        st = wb(m)
        assert st["pending_files"] == 0 and st.get("failures", 0) == 0, st
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
                         (lambda: os.setxattr(p, "user.k", b"v"), errno.ENOTSUP),
                         (lambda: os.getxattr(p, "user.k"), errno.ENODATA)):
            try:
                fn()
                raise AssertionError("an unsupported call succeeded")
            except OSError as e:
                assert e.errno == want, (e, want)
        sv = os.statvfs(m.mnt)
        assert sv.f_bsize > 0 and sv.f_blocks > 0 and sv.f_bavail <= sv.f_blocks, sv
    finally:
        m.umount()


def t_sigterm_does_not_commit_an_unclosed_file(ctx):
    """The daemon stopped (SIGTERM) while a writer still has a file open:
    what it wrote since its last close is no complete version and must not
    replace the object, neither now nor from the journal at the next mount;
    as after a crash, its staged copy goes to lost+found."""
    ctx.bucket.put("u/ckpt.bin", b"old complete checkpoint")
    m = ctx.mount("unclosed", FAST).mount()
    pid = m.pid()
    fd = os.open(os.path.join(m.mnt, "u/ckpt.bin"), os.O_WRONLY)
    try:
        os.pwrite(fd, b"NEW, HALF WRITTEN", 0)
        os.kill(pid, signal.SIGTERM)
        poll(lambda: dead(pid), 30, "the daemon to exit")
    finally:
        try:
            os.close(fd)
        except OSError:
            pass  # ENOTCONN: the daemon is gone
        subprocess.run(["fusermount3", "-uz", m.mnt], capture_output=True)
    poll(lambda: not os.path.ismount(m.mnt), 10, "the mount to go")
    assert bucket_get(ctx.bucket, "u/ckpt.bin") == b"old complete checkpoint", "replaced at exit"
    m.mount()
    try:
        poll(lambda: drained(m), 30, "write-back to finish")
        assert bucket_get(ctx.bucket, "u/ckpt.bin") == b"old complete checkpoint", \
            "replaced from the journal at the next mount"
        assert read(os.path.join(m.mnt, "u/ckpt.bin")) == b"old complete checkpoint"
        # ... and its bytes are not thrown away: lost+found has them.
        found = [read(p) for p in glob.glob(os.path.join(m.cache, "*", "lost+found", "*"))]
        assert b"NEW, HALF WRITTEN" + b"old complete checkpoint"[len(b"NEW, HALF WRITTEN"):] in found, \
            "the unclosed file's staged copy is not in lost+found: %r" % found
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


def t_rewrites_coalesce(ctx):
    """writeback.rewrite_delay: a file written once is uploaded at once
    (delay 0); one rewritten over and over right after its upload waits
    for the burst to end, so twenty rewrites cost one or two uploads,
    not twenty, and the last version wins."""
    cfg = conf(FAST, {"writeback": {"rewrite_delay": "3s"}})
    m = ctx.mount("rewrites", cfg).mount()
    try:
        def puts():
            return m.stats()["backend"]["put"]["requests"]
        p = os.path.join(m.mnt, "log.txt")
        write(p, b"first")
        poll(lambda: drained(m), 20, "the first upload")
        assert bucket_get(ctx.bucket, "log.txt") == b"first"
        before = puts()
        for i in range(20):
            write(p, b"version %d" % i)
        poll(lambda: drained(m), 30, "the rewrites' upload")
        assert bucket_get(ctx.bucket, "log.txt") == b"version 19"
        assert puts() - before <= 2, "%d uploads for 20 rewrites" % (puts() - before)
        # A new file, written once, does not wait for the rewrite delay.
        before = puts()
        write(os.path.join(m.mnt, "ckpt.pt"), b"once")
        poll(lambda: drained(m), 20, "the new file's upload")
        assert puts() - before == 1
    finally:
        m.umount()


def t_edited_files_wait(ctx):
    """writeback.rewrite_delay holds back every change but a file written
    front to back and closed once: a file written before or beyond its
    end, or truncated, an empty file, a new directory, a delete (fsstress
    and editors make such changes and undo them within seconds).  A file
    written front to back in many writes (a checkpoint) is uploaded at
    once, as is one truncated to 0 and written again; `tierfs flush`
    sends the rest."""
    ctx.bucket.put("old", b"old")
    cfg = conf(FAST, {"writeback": {"rewrite_delay": "1h"}})
    m = ctx.mount("edited", cfg).mount()
    try:
        with open(os.path.join(m.mnt, "sparse"), "wb") as f:
            f.write(b"head")
            f.seek(1 * MIB)
            f.write(b"tail")  # beyond the end: a hole
        with open(os.path.join(m.mnt, "inplace"), "wb") as f:
            f.write(b"x" * 4096)
            f.seek(0)
            f.write(b"y")  # before the end
        with open(os.path.join(m.mnt, "shrunk"), "wb") as f:
            f.write(b"z" * 4096)
            f.truncate(100)
        with open(os.path.join(m.mnt, "again"), "wb") as f:
            f.write(b"old" * 100)
            f.seek(0)
            f.write(b"o")
            f.truncate(0)  # new again: appending starts over
            f.seek(0)
            f.write(b"new")
        open(os.path.join(m.mnt, "empty"), "wb").close()
        os.mkdir(os.path.join(m.mnt, "newdir"))
        os.unlink(os.path.join(m.mnt, "old"))
        ckpt = data_for("ckpt", 3 * MIB)
        with open(os.path.join(m.mnt, "ckpt.pt"), "wb") as f:
            for i in range(0, len(ckpt), 64 * 1024):
                f.write(ckpt[i:i + 64 * 1024])
        wait_bucket(ctx.bucket, "ckpt.pt", ckpt)
        wait_bucket(ctx.bucket, "again", b"new")
        held = ("sparse", "inplace", "shrunk", "empty", "newdir", "old")
        poll(lambda: wb(m)["pending_files"] == len(held) and wb(m)["uploading"] == 0, 20,
             "only the held-back changes to be left")
        for k in ("sparse", "inplace", "shrunk", "empty"):
            assert bucket_get(ctx.bucket, k) is None, "'%s' was uploaded at once" % k
        assert "newdir/" not in bucket_keys(ctx.bucket), "the directory was made at once"
        assert bucket_get(ctx.bucket, "old") == b"old", "the delete was sent at once"
        flush(m)  # tierfs flush does not wait for the delay
        assert bucket_get(ctx.bucket, "inplace") == b"y" + b"x" * 4095
        assert bucket_get(ctx.bucket, "shrunk") == b"z" * 100
        assert bucket_get(ctx.bucket, "sparse") == b"head" + bytes(MIB - 4) + b"tail"
        assert bucket_get(ctx.bucket, "empty") == b""
        assert "newdir/" in bucket_keys(ctx.bucket)
        assert bucket_get(ctx.bucket, "old") is None
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


def sync_rename_open(m, ctx):
    """Sync mode: a file fsynced (so uploaded) and renamed while still open
    keeps its handle: later writes land under the new name (the rename
    once failed with ENOENT: its commit uploaded and retired the record
    it was to move)."""
    with open(os.path.join(m.mnt, "t.tmp"), "wb") as f:
        f.write(b"first")
        f.flush()
        os.fsync(f.fileno())
        assert bucket_get(ctx.bucket, "t.tmp") == b"first", "fsync returned before the upload"
        os.replace(os.path.join(m.mnt, "t.tmp"), os.path.join(m.mnt, "t"))
        f.write(b"+more")
    assert read(os.path.join(m.mnt, "t")) == b"first+more"
    assert not os.path.exists(os.path.join(m.mnt, "t.tmp"))
    assert bucket_get(ctx.bucket, "t") == b"first+more", "close returned before the upload"
    wait_gone(ctx.bucket, "t.tmp")


def t_temporary_names_wait(ctx):
    """A file closed under a temporary name is renamed into place right
    after (atomic saves: Python's tempfile, x.tmp, TensorFlow's
    .tempstate): it waits writeback.rewrite_delay, so only its final name
    is uploaded.  Uploaded at once, it was sent twice: here always on the
    local backend, and in 20 of 20 renames of 4 MiB files on moto."""
    m = ctx.mount("tmpnames", conf(FAST, writeback={"rewrite_delay": "5s"})).mount()
    try:
        names = [("ckpt.pt.tmp", "ckpt.pt"), ("tmpk3j2h1_x", "data.json"),
                 ("model.data-00000-of-00001.tempstate6021", "model.data-00000-of-00001"),
                 ("w.TMP.41", "w.bin")]
        data = data_for("temporary", 300000)
        b0 = m.stats()["backend"]["put"]
        for tmp, final in names:
            write(os.path.join(m.mnt, tmp), data)
            os.replace(os.path.join(m.mnt, tmp), os.path.join(m.mnt, final))
        t0 = time.monotonic()
        for _, final in names:
            wait_bucket(ctx.bucket, final, data)
        # The final names go at once (the 5 s are for the temporary ones).
        assert time.monotonic() - t0 < 4, "renamed files waited %.1fs" % (time.monotonic() - t0)
        b1 = m.stats()["backend"]["put"]
        sent = b1["payload_bytes"] - b0["payload_bytes"]
        assert sent == len(names) * len(data), \
            "%d bytes sent for %d files of %d" % (sent, len(names), len(data))
        for tmp, _ in names:
            assert bucket_get(ctx.bucket, tmp) is None, tmp
    finally:
        m.umount()


def t_sync_mode(ctx):
    if ctx.bucket.kind == "local":
        m = ctx.mount("sync", conf({"writeback": {"mode": "sync"}})).mount()
        try:
            write(os.path.join(m.mnt, "s"), b"sync")
            assert bucket_get(ctx.bucket, "s") == b"sync", "close returned before the upload"
            sync_rename_open(m, ctx)
        finally:
            m.umount()
        return None
    cfg = conf({"writeback": {"mode": "sync", "retry_base": "100ms", "retry_max": "200ms"},
                "backend": {"retries": "0", "low_speed_time": "1s", "connect_timeout": "1s"}})
    m = ctx.mount("sync", cfg).mount()
    try:
        write(os.path.join(m.mnt, "s"), b"sync")
        assert bucket_get(ctx.bucket, "s") == b"sync", "close returned before the upload"
        sync_rename_open(m, ctx)
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
            # close() reports the failure too (it writes the buffered "x"
            # and uploads again): not only fsync.
            expect_errno(f.close, errno.EIO, "close() after a failed fsync, the server down")
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


def t_sequential_checkpoint(ctx):
    """A 1 GiB checkpoint written sequentially (1 MiB writes) through the
    mount, read back through it while still staged, then verified in the
    bucket by a streamed SHA-256 once write-back is done (multipart: 16 MiB
    parts).  Read again after the upload, it comes from the cache: no GET.
    1 GiB on the local backend and with --extended (local 10-15 s); 256 MiB,
    16 parts, on a server in the default run (moto takes 30-40 s a GiB).
    Nothing holds the checkpoint in Python memory."""
    size_mib = 1024 if ctx.extended or ctx.bucket.kind == "local" else 256
    size = size_mib * MIB
    cfg = conf(FAST, {"ssd": {"size": "2G"}})
    m = ctx.mount("ckpt1g", cfg).mount()
    try:
        p = os.path.join(m.mnt, "ckpt/epoch-3.pt")
        os.makedirs(os.path.dirname(p))
        h = hashlib.sha256()
        t0 = time.monotonic()
        with open(p, "wb") as f:
            for i in range(size_mib):
                c = chunk_for("ckpt", i)
                h.update(c)
                f.write(c)
        want = h.hexdigest()
        t_close = time.monotonic() - t0
        assert os.stat(p).st_size == size, os.stat(p).st_size
        assert file_sha256(p) == (size, want), "read back through the mount differs"
        poll(lambda: drained(m), 240, "write-back of the checkpoint")
        t_durable = time.monotonic() - t0
        got = bucket_sha256(ctx.bucket, "ckpt/epoch-3.pt")
        assert got == (size, want), "bucket: %d bytes sha256 %s, expected %d bytes %s" % (
            got[0], got[1], size, want)
        assert bucket_uploads(ctx.bucket) == [], "multipart uploads left behind"
        st = wb(m)
        assert st["uploads"] == 1 and st["upload_bytes"] == size, st
        gets = m.gets()
        assert file_sha256(p) == (size, want), "read back after the upload differs"
        assert m.gets() == gets, "re-downloaded %d blocks that were just uploaded" % (m.gets() - gets)
        print("    %d MiB: close after %.1fs, in the bucket after %.1fs" % (size_mib, t_close, t_durable))
    finally:
        m.umount()


def t_random_small_writes(ctx):
    """Thousands of pwrite of 1..4096 bytes at random offsets into a few
    files (one an existing object: copy-on-write), appends through
    O_APPEND, truncates up and down by handle and by path, files closed and
    reopened so uploads run in between; every file is compared with the
    same operations on a local reference file, through the mount, in the
    bucket, and through a fresh mount."""
    seed = ctx.seed if ctx.seed is not None else random.randrange(1 << 30)
    rnd = random.Random(seed)
    nops = ctx.ops or (50000 if ctx.extended else 10000)
    print("    seed %d, %d operations" % (seed, nops))
    names = ["w/f0", "w/f1", "w/sub/f2", "w/f3"]
    ctx.bucket.put("w/f3", data_for("f3-orig", 300_000))
    ref = os.path.join(ctx.work, "ref-small")
    os.makedirs(os.path.join(ref, "w/sub"))
    with open(os.path.join(ref, "w/f3"), "wb") as f:
        f.write(data_for("f3-orig", 300_000))
    m = ctx.mount("small", FAST).mount()
    fds = {}  # name -> (fd on the mount, fd on the reference, append)
    log = []
    written = set()  # names written through their open handle
    waits = []  # uploads seen after the closes the run waits on

    def close(nm):
        fm, fr, _ = fds.pop(nm)
        before = wb(m)["uploads"] if nm in written and len(waits) < 3 else None
        os.close(fm)
        os.close(fr)
        written.discard(nm)
        if before is not None:
            # Let the first few uploads run between the writes, whatever
            # the load on the machine (they are what this test races).
            waits.append(poll(lambda: wb(m)["uploads"] > before and wb(m)["uploads"], 30,
                              "the upload of %s to start and finish" % nm))

    def same(nm, where):
        if not os.path.exists(os.path.join(ref, nm)):
            return
        got, want = read(os.path.join(m.mnt, nm)), read(os.path.join(ref, nm))
        size = os.stat(os.path.join(m.mnt, nm)).st_size
        if got != want or size != len(want):
            first = next((i for i in range(min(len(got), len(want))) if got[i] != want[i]),
                         min(len(got), len(want)))
            raise AssertionError("%s: %s has %d bytes (stat: %d), expected %d; first difference at %d"
                                 % (where, nm, len(got), size, len(want), first))

    try:
        os.makedirs(os.path.join(m.mnt, "w/sub"), exist_ok=True)
        for step in range(nops):
            nm = rnd.choice(names)
            kind = rnd.choices(["pwrite", "append", "ftruncate", "truncate", "close"],
                               [80, 8, 4, 3, 5])[0]
            want_append = kind == "append"
            if nm in fds and fds[nm][2] != want_append and kind in ("pwrite", "append", "ftruncate"):
                close(nm)
            if kind == "close":
                if nm in fds:
                    close(nm)
                    log.append("%d close %s" % (step, nm))
                continue
            size = os.stat(os.path.join(ref, nm)).st_size if os.path.exists(os.path.join(ref, nm)) else 0
            if kind == "truncate":
                if not os.path.exists(os.path.join(ref, nm)):
                    continue
                n = rnd.choice([0, rnd.randrange(0, size + 1), size + rnd.randrange(1, 70000)])
                os.truncate(os.path.join(m.mnt, nm), n)
                os.truncate(os.path.join(ref, nm), n)
                log.append("%d truncate %s %d" % (step, nm, n))
                continue
            if nm not in fds:
                fl = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if want_append else 0)
                fds[nm] = (os.open(os.path.join(m.mnt, nm), fl, 0o644),
                           os.open(os.path.join(ref, nm), fl, 0o644), want_append)
                log.append("%d open %s%s" % (step, nm, " append" if want_append else ""))
            fm, fr, _ = fds[nm]
            if kind != "ftruncate":
                written.add(nm)
            if kind == "ftruncate":
                n = rnd.choice([rnd.randrange(0, size + 1), size + rnd.randrange(1, 70000)])
                os.ftruncate(fm, n)
                os.ftruncate(fr, n)
                log.append("%d ftruncate %s %d" % (step, nm, n))
            elif kind == "append":
                data = rnd.randbytes(rnd.randint(1, 4096))
                n = os.write(fm, data)
                assert n == len(data), "append %s: wrote %d of %d bytes" % (nm, n, len(data))
                os.write(fr, data)
                log.append("%d append %s %d" % (step, nm, len(data)))
            else:
                off = rnd.randrange(0, size + 4096)
                data = rnd.randbytes(rnd.randint(1, 4096))
                n = os.pwrite(fm, data, off)
                assert n == len(data), "pwrite %s: wrote %d of %d bytes" % (nm, n, len(data))
                os.pwrite(fr, data, off)
                log.append("%d pwrite %s %d+%d" % (step, nm, off, len(data)))
            if step % 200 == 0:
                for x in names:
                    same(x, "step %d" % step)
        for nm in list(fds):
            close(nm)
        for nm in names:
            same(nm, "after the run")
        poll(lambda: drained(m), 60, "write-back to finish")
        for nm in names:
            same(nm, "after the upload")
            want = read(os.path.join(ref, nm))
            got = bucket_get(ctx.bucket, nm)
            assert got == want, "%s in the bucket: %s bytes, expected %d" % (
                nm, None if got is None else len(got), len(want))
        assert len(waits) == 3, "uploads did not run between the writes"
    except Exception as e:
        raise AssertionError("seed %d: %s: %s\nlast operations:\n  %s"
                             % (seed, type(e).__name__, e, "\n  ".join(log[-20:]))) from e
    finally:
        for nm in list(fds):
            close(nm)
        m.umount()
    fresh = ctx.mount("small-fresh").mount()  # an empty cache
    try:
        for nm in names:
            assert read(os.path.join(fresh.mnt, nm)) == read(os.path.join(ref, nm)), \
                "seed %d: %s differs through a fresh mount" % (seed, nm)
    finally:
        fresh.umount()


def t_reopen_while_uploading(ctx):
    """A file closed and reopened for writing again and again, with
    write-back at once: each reopen races the upload of the last close,
    which retires the staged copy.  An open that saw the file staged and
    found it retired must stage the uploaded version, not an empty file
    (the data lost when that race was lost)."""
    rnd = random.Random(11)
    want = bytearray(data_for("reopen", 65536))
    ctx.bucket.put("r/f", bytes(want))
    # rewrite_delay 0: every close uploads at once (by default these
    # in-place rewrites would wait for the burst to end)
    m = ctx.mount("reopen", conf(FAST, {"writeback": {"rewrite_delay": "0s"}})).mount()
    path = os.path.join(m.mnt, "r/f")
    try:
        for i in range(8000):
            off = rnd.randrange(len(want))
            b = bytes([rnd.randrange(256)])
            fd = os.open(path, os.O_WRONLY)
            try:
                os.pwrite(fd, b, off)
            finally:
                os.close(fd)
            want[off] = b[0]
            if i % 500 == 0:
                assert read(path) == want, "after %d reopens the file differs" % (i + 1)
        assert read(path) == want
        poll(lambda: drained(m), 60, "write-back to finish")
        assert bucket_get(ctx.bucket, "r/f") == want, "the bucket differs"
        st = wb(m)
        assert st["uploads"] + st["reuploads"] > 1, "no upload ran between the reopens: %s" % st
    finally:
        m.umount()


def t_thousands_of_small_files(ctx):
    """3000 files of 0..8 KiB across 6 directories, written through the
    mount; listed and read back at once, then every one verified in the
    bucket (size and MD5 from the listing), and nothing else is there."""
    n = 3000
    rnd = random.Random(77)
    files = {"many/d%d/f%04d" % (i % 6, i): rnd.randbytes(rnd.randint(0, 8192)) for i in range(n)}
    m = ctx.mount("many", conf(FAST, {"writeback": {"uploaders": "8"}})).mount()
    try:
        for d in range(6):
            os.makedirs(os.path.join(m.mnt, "many/d%d" % d))
        for k, v in files.items():
            write(os.path.join(m.mnt, k), v)
        for d in range(6):
            names = sorted(os.listdir(os.path.join(m.mnt, "many/d%d" % d)))
            assert names == sorted(k.rsplit("/", 1)[1] for k in files if k.startswith("many/d%d/" % d)), \
                "listing of many/d%d: %d names" % (d, len(names))
        for k, v in list(files.items())[::7]:
            assert read(os.path.join(m.mnt, k)) == v, k
        poll(lambda: drained(m), 240, "write-back of %d files" % n)
        keys = bucket_keys(ctx.bucket)
        want = {k: (len(v), hashlib.md5(v).hexdigest()) for k, v in files.items()}
        # directory markers (the local backend: the directories)
        want.update({d: (0, hashlib.md5(b"").hexdigest()) for d in ["many/"] + ["many/d%d/" % d for d in range(6)]})
        missing = sorted(set(want) - set(keys))
        extra = sorted(set(keys) - set(want))
        wrong = sorted(k for k in set(want) & set(keys) if keys[k] != want[k])
        assert not (missing or extra or wrong), "bucket: %d missing %s, %d extra %s, %d differ %s" % (
            len(missing), missing[:5], len(extra), extra[:5], len(wrong), wrong[:5])
        assert wb(m)["uploads"] >= n
    finally:
        m.umount()


def t_readers_during_writeback(ctx):
    """While uploads run (multipart, one part at a time), the files being
    uploaded are rewritten again and again, and reader threads read them:
    a reader always gets the latest version closed before it opened, whole
    (never an older version, never a mix), by path and by listing size."""
    cfg = conf({"writeback": {"delay": "0s", "uploaders": "2"},
                "backend": {"multipart_threshold": "5M", "part_size": "5M", "upload_parallel": "1"}})
    m = ctx.mount("readers", cfg).mount()
    nfiles, versions = 4, 60 if ctx.extended else 16
    locks = [threading.Lock() for _ in range(nfiles)]
    latest = [0] * nfiles
    errors = []
    stop = threading.Event()
    overlapped = [0, 0, 0]  # reads sampled while an upload ran, while write-back was pending; all reads

    cache = {}

    def content(i, v):
        if (i, v) not in cache:
            size = (v * 3 % 11 + 1) * MIB + v * 4099  # 1..11 MiB: some multipart
            cache[(i, v)] = ("file %d version %06d\n" % (i, v)).encode() + chunk_for("r%d" % i, v, size)
        return cache[(i, v)]

    def path(i):
        return os.path.join(m.mnt, "live/f%d.bin" % i)

    def writer():
        try:
            for v in range(1, versions + 1):
                for i in range(nfiles):
                    with locks[i]:
                        write(path(i), content(i, v))
                        latest[i] = v
                    time.sleep(0)  # let readers in
        except Exception as e:  # noqa: BLE001
            errors.append("writer: %r" % e)
        finally:
            stop.set()

    def reader(seed):
        rnd = random.Random(seed)
        try:
            while not stop.is_set() and not errors:
                i = rnd.randrange(nfiles)
                with locks[i]:
                    v0 = latest[i]
                    if v0 == 0:
                        continue
                    s = wb(m) if rnd.random() < 0.25 else None
                    if rnd.random() < 0.5:
                        got = read(path(i))
                    else:
                        with open(path(i), "rb", buffering=0) as f:
                            size = os.fstat(f.fileno()).st_size
                            got = b"".join(iter(lambda: f.read(rnd.choice([4096, 65536, MIB])), b""))
                            if size != len(got):
                                errors.append("f%d: fstat says %d bytes, read %d" % (i, size, len(got)))
                    st = os.stat(path(i)).st_size
                    want = content(i, v0)
                    if got != want or st != len(want):
                        head = got[:32].decode(errors="replace").strip()
                        errors.append("f%d: latest version %d (%d bytes); read %d bytes starting %r, "
                                      "stat size %d" % (i, v0, len(want), len(got), head, st))
                    overlapped[2] += 1
                    if s and s["uploading"] > 0:
                        overlapped[0] += 1
                    if s and s["pending_files"] > 0:
                        overlapped[1] += 1
        except Exception as e:  # noqa: BLE001
            errors.append("reader %d: %r" % (seed, e))

    try:
        os.makedirs(os.path.join(m.mnt, "live"))
        ts = [threading.Thread(target=writer)] + [threading.Thread(target=reader, args=(s,))
                                                   for s in range(3)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert not errors, errors[:5]
        print("    %d reads; sampled: %d while an upload ran, %d while write-back was pending; "
              "%d uploads, %d re-uploads" % (overlapped[2], overlapped[0], overlapped[1], wb(m)["uploads"],
                                             wb(m)["reuploads"]))
        assert overlapped[2] >= nfiles and overlapped[1] > 0, "no read overlapped write-back: %r" % overlapped
        # Local uploads are file copies, often too quick to be caught running.
        assert overlapped[0] > 0 or ctx.bucket.kind == "local", "no read overlapped an upload: %r" % overlapped
        poll(lambda: drained(m), 120, "write-back to finish")
        for i in range(nfiles):
            assert read(path(i)) == content(i, versions)
            assert bucket_get(ctx.bucket, "live/f%d.bin" % i) == content(i, versions), "f%d in the bucket" % i
        left = bucket_uploads(ctx.bucket)
        assert not left, ("BUG multipart-orphan (see rewrites_leave_no_multipart_upload): %d multipart "
                          "upload(s) left on the server" % len(left))
    finally:
        stop.set()
        m.umount()


def outcome(fn):
    """fn()'s value, or "errno NAME" if it raised OSError."""
    try:
        return fn()
    except OSError as e:
        return "errno " + errno.errorcode.get(e.errno, str(e.errno))


def expect_all(bug, checks):
    """Run (what, fn, expected) checks; raise one error naming `bug` that
    lists every check that failed."""
    def short(x):
        s = repr(x)
        return s if len(s) <= 60 else s[:50] + "... (%d bytes)" % len(x)

    bad = []
    for what, fn, want in checks:
        got = outcome(fn)
        if got != want:
            bad.append("%s gave %s, expected %s" % (what, short(got), short(want)))
    if bad:
        raise AssertionError("BUG %s:\n  %s" % (bug, "\n  ".join(bad)))


def t_unlinked_handle_stays_usable(ctx):
    """POSIX: a file unlinked, or replaced by a rename, while it is open
    lives on through its handles: fstat, pread (also past the size the
    kernel had cached, and after the DELETE reached the bucket), pwrite and
    ftruncate keep working, and nothing of it reaches the bucket.  Found by
    reference_model; a reproducer."""
    ctx.bucket.put("clean.txt", b"clean data")
    m = ctx.mount("unlinked", SLOW).mount()
    P = lambda k: os.path.join(m.mnt, k)  # noqa: E731
    fds = []
    try:
        # A new (staged) file, unlinked while open for writing.
        fd = os.open(P("new.txt"), os.O_RDWR | os.O_CREAT, 0o644)
        fds.append(fd)
        os.pwrite(fd, b"hello", 0)
        os.unlink(P("new.txt"))
        # A staged file replaced by a rename onto its name.
        write(P("other"), b"other file")
        fv = os.open(P("victim"), os.O_RDWR | os.O_CREAT, 0o644)
        fds.append(fv)
        os.pwrite(fv, b"victim", 0)
        os.rename(P("other"), P("victim"))
        # A clean object unlinked while open for reading (its DELETE waits
        # for writeback.delay).
        fc = os.open(P("clean.txt"), os.O_RDONLY)
        fds.append(fc)
        os.unlink(P("clean.txt"))
        expect_all("unlinked-open-file (fs.c fs_getattr and fs_write.c tfs_fs_op_setattr look the inode's "
                   "path up, '//detached/N' after unlink or rename-over: EINVAL from the local backend, "
                   "ENOENT from S3, instead of using the open handle's staged file)", [
            ("fstat of the unlinked new file", lambda: os.fstat(fd).st_size, 5),
            ("pwrite to it", lambda: os.pwrite(fd, b"XY", 10), 2),
            ("pread of it", lambda: os.pread(fd, 100, 0), b"hello\0\0\0\0\0XY"),
            ("ftruncate of it", lambda: os.ftruncate(fd, 3), None),
            ("pread after the ftruncate", lambda: os.pread(fd, 100, 0), b"hel"),
            ("fstat of the replaced file", lambda: os.fstat(fv).st_size, 6),
            ("pread of it", lambda: os.pread(fv, 100, 0), b"victim"),
            ("fstat of the unlinked clean object", lambda: os.fstat(fc).st_size, 10),
            ("pread of it", lambda: os.pread(fc, 100, 0), b"clean data"),
            ("the name of the unlinked file", lambda: os.path.exists(P("new.txt")), False),
            ("the replacing file", lambda: read(P("victim")), b"other file"),
            ("pread of the unlinked clean object once its DELETE is uploaded",
             lambda: (flush(m), os.posix_fadvise(fc, 0, 0, os.POSIX_FADV_DONTNEED),
                      os.pread(fc, 100, 0))[2], b"clean data"),
        ])
    finally:
        for f in fds:
            try:
                os.close(f)
            except OSError:
                pass
        m.umount()
    assert bucket_get(ctx.bucket, "new.txt") is None, "an unlinked file was uploaded"
    assert bucket_get(ctx.bucket, "victim") == b"other file"
    assert bucket_get(ctx.bucket, "clean.txt") is None


def t_open_reader_sees_later_writes(ctx):
    """docs/semantics.md: data written through the mount is visible at once
    to every reader of the same mount.  A handle opened for reading while
    the file is clean (in the bucket) must read what another handle of the
    same mount writes, truncates or appends afterwards (`tail -f` of a log
    written in the mount).  Found by reference_model_racing_uploads; a
    reproducer."""
    ctx.bucket.put("x", b"old!")
    ctx.bucket.put("log", b"")
    old, new = data_for("y-old", 3 * MIB), data_for("y-new", 3 * MIB)
    ctx.bucket.put("y", old)
    m = ctx.mount("pinned", SLOW).mount()
    P = lambda k: os.path.join(m.mnt, k)  # noqa: E731
    fds = []
    try:
        fr = os.open(P("x"), os.O_RDONLY)
        fds.append(fr)
        assert os.pread(fr, 100, 0) == b"old!"
        fw = os.open(P("x"), os.O_RDWR)
        fds.append(fw)
        os.pwrite(fw, b"NEW!-longer", 0)
        fl = os.open(P("log"), os.O_RDONLY)
        fds.append(fl)
        with open(P("log"), "ab") as f:
            f.write(b"line 1\n")
        # A reader of y, then y rewritten and the new version uploaded.
        fy = os.open(P("y"), os.O_RDONLY)
        fds.append(fy)
        assert os.pread(fy, 4096, 0) == old[:4096]
        write(P("y"), new)
        flush(m)
        os.posix_fadvise(fy, 0, 0, os.POSIX_FADV_DONTNEED)  # no answer from the kernel's page cache
        expect_all("pinned-reader (vfs/read.c tfs_vfs_open_read pins the clean version in h->obj, and tfs_vfs_read never "
                   "looks for a staged copy made after the open; once the new version is uploaded, "
                   "the pinned ETag makes its reads fail with ESTALE)", [
            ("pread of the reader after a write by another handle", lambda: os.pread(fr, 100, 0),
             b"NEW!-longer"),
            ("fstat of the reader", lambda: os.fstat(fr).st_size, 11),
            ("a new open of the file", lambda: read(P("x")), b"NEW!-longer"),
            ("pread of a reader of the log after an append", lambda: os.pread(fl, 100, 0), b"line 1\n"),
            ("pread at 2 MiB of a reader of y after y was rewritten and uploaded",
             lambda: os.pread(fy, 100, 2 * MIB), new[2 * MIB:2 * MIB + 100]),
        ])
    finally:
        for f in fds:
            os.close(f)
        m.umount()


def t_unlinked_reader_sees_appends(ctx):
    """A reader opened while the file was clean, and a writer: once the
    name is unlinked, the reader still reads what the writer appends
    (POSIX: an unlinked file lives on through its open handles).  The
    reader must not have read since the writer started (it would then hold
    the staged copy already).  Found by reference_model --seed 8 on
    --backend local; a reproducer."""
    a, b1, b2 = data_for("ua", 20579), data_for("ub1", 2213), data_for("ub2", 2298)
    ctx.bucket.put("u/f", a)
    m = ctx.mount("unlinked", SLOW).mount()
    P = lambda k: os.path.join(m.mnt, k)  # noqa: E731
    fr = fw = None
    try:
        fr = os.open(P("u/f"), os.O_RDONLY)
        assert os.pread(fr, 1 << 20, 0) == a
        fw = os.open(P("u/f"), os.O_WRONLY | os.O_APPEND)
        os.write(fw, b1)
        os.rename(P("u/f"), P("u/g"))
        os.unlink(P("u/g"))
        os.write(fw, b2)
        os.posix_fadvise(fr, 0, 0, os.POSIX_FADV_DONTNEED)  # no answer from the page cache
        expect_all("unlinked-reader (vfs/read.c tfs_vfs_read: a handle without a staged copy and without a "
                   "name read its clean version, not the staged copy the unlinked inode keeps)", [
            ("fstat of the reader", lambda: os.fstat(fr).st_size, len(a + b1 + b2)),
            ("pread of the reader after the append", lambda: os.pread(fr, 1 << 20, 0), a + b1 + b2),
        ])
    finally:
        for f in (fr, fw):
            if f is not None:
                os.close(f)
        m.umount()


def t_emptied_directory_stays(ctx):
    """A directory made with mkdir stays when its last file is removed and
    the removal is uploaded: through the mount, in the bucket (S3: its
    marker 'd/'; the local backend: the directory) and after a remount.
    Found by reference_model on --backend local; a reproducer."""
    m = ctx.mount("emptied", FAST).mount()
    try:
        os.makedirs(os.path.join(m.mnt, "d/sub"))
        write(os.path.join(m.mnt, "d/x"), b"x")
        write(os.path.join(m.mnt, "d/sub/y"), b"y")
        poll(lambda: drained(m), 30, "write-back to finish")
        os.unlink(os.path.join(m.mnt, "d/x"))
        os.unlink(os.path.join(m.mnt, "d/sub/y"))
        poll(lambda: drained(m), 30, "write-back to finish")
        mounted = (outcome(lambda: sorted(os.listdir(m.mnt))),
                   outcome(lambda: sorted(os.listdir(os.path.join(m.mnt, "d")))))
    finally:
        m.umount()
    _, dirs = bucket_tree(ctx.bucket)
    fresh = ctx.mount("emptied-fresh").mount()
    try:
        remounted = outcome(lambda: sorted(os.listdir(fresh.mnt)))
    finally:
        fresh.umount()
    bad = []
    if mounted != (["d"], ["sub"]):
        bad.append("through the mount: / and d/ list %r, expected (['d'], ['sub'])" % (mounted,))
    if {"d", "d/sub"} - dirs:
        bad.append("the bucket has directories %r, expected d and d/sub" % sorted(dirs))
    if remounted != ["d"]:
        bad.append("after a remount / lists %r, expected ['d']" % remounted)
    if bad:
        raise AssertionError("BUG local-prunes-directories (backends/local.c local_delete -> "
                             "prune_parents removes every directory a DELETE leaves empty, also "
                             "those made by mkdir, i.e. marker objects):\n  " + "\n  ".join(bad))


def t_name_reused_across_types(ctx):
    """A name removed and made again as the other type before write-back
    (unlink file b, mkdir b; rmdir d, create file d): the bucket ends with
    exactly the new one (S3 keys 'b/' and 'd'; the old 'b' and 'd/' deleted),
    tierfs flush returns, and the mount and a remount show the new type.
    Also twice over (unlink e, mkdir e, rmdir e; rmdir g, create g, unlink
    g): nothing of e and g is left.  Found by reference_model (first on
    --backend local); a reproducer."""
    m = ctx.mount("retype", conf(SLOW, {"writeback": {"retry_base": "100ms", "retry_max": "500ms",
                                                      "drain_timeout": "5s"}})).mount()
    P = lambda k: os.path.join(m.mnt, k)  # noqa: E731
    bad = []
    try:
        write(P("b"), b"file b")
        os.mkdir(P("d"))
        write(P("e"), b"file e")
        os.mkdir(P("g"))
        flush(m)
        os.unlink(P("b"))
        os.mkdir(P("b"))
        os.rmdir(P("d"))
        write(P("d"), b"file d")
        # Twice over: nothing of e and g may be left.
        os.unlink(P("e"))
        os.mkdir(P("e"))
        os.rmdir(P("e"))
        os.rmdir(P("g"))
        write(P("g"), b"file g")
        os.unlink(P("g"))
        try:
            flush(m, 20)
        except AssertionError as e:
            bad.append(str(e))
        for what, fn, want in (("b is a directory through the mount", lambda: os.path.isdir(P("b")), True),
                               ("d through the mount", lambda: read(P("d")), b"file d")):
            got = outcome(fn)
            if got != want:
                bad.append("%s: %r, expected %r" % (what, got, want))
    finally:
        m.umount()
    keys = sorted(k for k in bucket_keys(ctx.bucket))
    want_keys = ["b/", "d"]
    if keys != want_keys:
        bad.append("bucket keys %r, expected %r" % (keys, want_keys))
    fresh = ctx.mount("retype-fresh").mount()
    try:
        got = (outcome(lambda: os.path.isdir(os.path.join(fresh.mnt, "b"))),
               outcome(lambda: read(os.path.join(fresh.mnt, "d"))))
        if got != (True, b"file d"):
            bad.append("after a remount: b is a directory: %r, d reads %r" % got)
    finally:
        fresh.umount()
    if bad:
        raise AssertionError("BUG name-reused-across-types (cache/writeback.c: the journal keeps one "
                             "record per path, so the MKDIR of 'b' replaces the pending DELETE of the "
                             "object 'b', and the PUT of 'd' the DELETE of the marker 'd/'):\n  "
                             + "\n  ".join(bad))


def t_directory_of_staged_file_stays(ctx):
    """A directory that exists in the bucket only as a key prefix (no marker)
    holds a staged file not uploaded yet; when its last object leaves the
    bucket (here: a rename of that clean object, done at once), the
    directory and the staged file stay listed.  Found by reference_model
    on --backend local; a reproducer."""
    ctx.bucket.put("b/c/old", b"old")
    ctx.bucket.put("b/f", b"f")
    m = ctx.mount("orphan", SLOW).mount()
    P = lambda k: os.path.join(m.mnt, k)  # noqa: E731
    try:
        assert os.listdir(P("b/c")) == ["old"]
        write(P("b/c/new"), b"staged")
        os.rename(P("b/c/old"), P("old"))
        expect_all("orphaned-staged-file (cache/meta_list.c refresh -> prune drops the entry of a child "
                   "directory missing from the bucket listing although LOCAL entries live below it)", [
            ("listing of b", lambda: sorted(os.listdir(P("b"))), ["c", "f"]),
            ("listing of b/c", lambda: sorted(os.listdir(P("b/c"))), ["new"]),
            ("b/c/new", lambda: read(P("b/c/new")), b"staged"),
        ])
    finally:
        m.umount()
    assert bucket_get(ctx.bucket, "b/c/new") == b"staged"


def tmp_files(root):
    """Regular files of the local backend's own under `root`."""
    out = []
    for r, _, names in os.walk(root):
        inside = any(part.startswith(LOCAL_TMP) for part in os.path.relpath(r, root).split(os.sep))
        out += [os.path.join(r, nm) for nm in names if inside or nm.startswith(LOCAL_TMP)]
    return out


def t_local_crash_leaves_no_temp_files(ctx):
    """kill -9 while the local backend writes objects (it writes a temporary
    file in the bucket directory, then renames it): after a remount and the
    write-back, every file is in place and no temporary file is left in
    the bucket directory.  Timing-dependent: a kill lands during a PUT in
    most rounds.  Found by reference_model_racing_uploads on
    --backend local; a reproducer."""
    if ctx.bucket.kind != "local":
        return "skip"
    m = ctx.mount("tmpleak", FAST)
    want = {}
    hits = 0
    pids = []
    for rd in range(6):
        m.mount()
        for j in range(3):
            want["f%d" % j] = chunk_for("tmpleak%d" % rd, j, 24 * MIB)
            write(os.path.join(m.mnt, "f%d" % j), want["f%d" % j])
        pids.append(m.pid())
        kill9(m)  # at once: the uploads of the first files run (delay 0)
        if any(os.path.getsize(p) > 0 for p in tmp_files(ctx.bucket.root)):
            hits += 1
    print("    after %d of 6 kills a temporary file was in the bucket directory" % hits)
    # As after a real crash, the killed daemons are gone, not zombies
    # waiting for a parent to reap them (a container's init may be slow).
    t0 = time.monotonic()
    while any(os.path.exists("/proc/%d" % p) for p in pids) and time.monotonic() - t0 < 15:
        time.sleep(0.1)
    m.mount()
    try:
        poll(lambda: drained(m), 60, "write-back to finish")
        for k, v in want.items():
            assert read(os.path.join(m.mnt, k)) == v, k
    finally:
        m.umount()
    for k, v in want.items():
        assert bucket_get(ctx.bucket, k) == v, k
    # Files of the backend's own (names starting with .tierfs-tmp., or in
    # such a directory) holding data: what interrupted PUTs left.
    left = sorted(os.path.relpath(p, ctx.bucket.root) for p in tmp_files(ctx.bucket.root)
                  if os.path.getsize(p) > 0)
    if left:
        raise AssertionError("BUG local-temp-files-leak (backends/local.c: a PUT interrupted by kill -9 "
                             "leaves its temporary file in the bucket directory; nothing removes it "
                             "later): %r" % left)


def t_rewrites_leave_no_multipart_upload(ctx):
    """A multipart-sized file rewritten over and over while its upload
    runs: every superseded upload is completed or aborted, none is left
    on the server, and the last version is in the bucket.  Found by
    readers_during_writeback; a reproducer (timing-dependent: the rewrite
    must land between CreateMultipartUpload and the journal recording the
    upload id, which happens many times in two seconds of rewrites)."""
    if ctx.bucket.kind == "local":
        return "skip"
    cfg = conf({"writeback": {"delay": "0s", "uploaders": "2"},
                "backend": {"multipart_threshold": "5M", "part_size": "5M", "upload_parallel": "1"}})
    m = ctx.mount("mpuorphan", cfg).mount()
    p = os.path.join(m.mnt, "ckpt.bin")
    base = chunk_for("mpuorphan", 0, 6 * MIB)
    try:
        write(p, base)
        poll(lambda: wb(m)["uploading"] > 0, 20, "the first upload to start")
        deadline = time.monotonic() + 2
        n = 0
        while time.monotonic() < deadline:
            n += 1
            with open(p, "r+b") as f:  # a small change, then close: a new generation
                f.seek(n % (6 * MIB - 8))
                f.write(b"%08d" % n)
        want = read(p)
        poll(lambda: drained(m), 60, "write-back to finish")
        assert bucket_get(ctx.bucket, "ckpt.bin") == want, "the last version is not in the bucket"
        left = bucket_uploads(ctx.bucket)
        print("    %d rewrites, %d re-uploads" % (n, wb(m)["reuploads"]))
        if left:
            raise AssertionError(
                "BUG multipart-orphan (cache/writeback.c do_put: when save_mpu refuses the new upload "
                "id with ECANCELED because the file got a newer generation, the upload just created by "
                "CreateMultipartUpload is neither recorded nor aborted): %d upload(s) left: %s"
                % (len(left), [u["UploadId"][:12] for u in left[:5]]))
    finally:
        m.umount()


def t_umount_waits_for_the_daemon(ctx):
    """`tierfs umount` (tierfs(1): "wait for the daemon to finish") returns
    only once the daemon is gone, also when an upload is still in flight
    at the drain timeout; so a remount with the same cache directory never
    runs next to the old daemon, and it uploads what was left.  Found by
    umount_reports_leftovers (the remount died of SIGSEGV in 1 of ~4 runs);
    a reproducer."""
    if ctx.bucket.kind == "local":
        return "skip"
    cfg = conf(SLOW, {"writeback": {"drain_timeout": "1s", "retry_base": "100ms", "retry_max": "200ms"},
                      "backend": {"retries": "0", "low_speed_time": "4s", "connect_timeout": "1s"}})
    m = ctx.mount("inflight", cfg).mount()
    moto = moto_pid(ctx.bucket)
    bad = []
    for rd in range(3):
        if rd:
            m.mount()  # the same cache directory
        files = {"r%d-%d" % (rd, i): data_for("inflight%d-%d" % (rd, i), 100 + i) for i in range(3)}
        for k, v in files.items():
            write(os.path.join(m.mnt, k), v)
        pid = m.pid()
        os.kill(moto, signal.SIGSTOP)  # the uploads hang in flight
        try:
            r = subprocess.run([m.tierfs, "umount", m.mnt], capture_output=True, text=True, timeout=60)
            assert r.returncode == 0, r.stderr
            if not dead(pid):
                bad.append("round %d: tierfs umount returned while the daemon (pid %d) still ran" % (rd, pid))
        finally:
            os.kill(moto, signal.SIGCONT)
    try:
        m.mount()
    except AssertionError as e:
        bad.append("the remount failed: %s" % str(e).splitlines()[0])
    try:
        for rd in range(3):
            for i in range(3):
                k = "r%d-%d" % (rd, i)
                try:
                    wait_bucket(ctx.bucket, k, data_for("inflight%d-%d" % (rd, i), 100 + i))
                except AssertionError as e:
                    bad.append(str(e))
    finally:
        if os.path.ismount(m.mnt):
            m.umount()
    if bad:
        raise AssertionError(
            "BUG umount-returns-early (src/cmd_ctl.c tfs_cmd_umount waits only until the control socket "
            "stops answering, but the daemon stops it before tfs_wb_destroy lets the upload in flight "
            "finish, and nothing keeps a second daemon off the same cache directory; the two then "
            "retire the same journal records, and cache/writeback.c retire()/save_mpu() call "
            "tfs_jrec_clear() on an uninitialized record when tfs_journal_get() says ENOENT: SIGSEGV):"
            "\n  " + "\n  ".join(bad))


# ---------------------------------------------------------------- limits and failures

class BrokenUploads:
    """Make the uploads of `key` fail until stop(), deterministically: on
    moto, through tests/faults/s3_fault_proxy.py, which answers every PUT
    and POST of the key with a 500 without forwarding it (a stopped server
    would still execute the requests queued meanwhile once it resumes); on
    the local backend, a directory at the key's path, onto which the
    backend's rename of the new file fails (EISDIR).  Mount with conf():
    the proxy is the endpoint, and stays it (the cache directory is named
    after the endpoint too).  List the mount before start(): a cached
    listing answers "no such name" without asking the bucket."""

    def __init__(self, ctx, key):
        self.b, self.key, self.on, self.proxy = ctx.bucket, key, False, None
        if self.b.kind != "local":
            sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "faults"))
            from faultlib import FaultProxy
            self.proxy = FaultProxy(self.b.env["TFS_S3_ENDPOINT"], ctx.work, name="uploads-proxy")

    def conf(self):
        return {"backend": {"endpoint": self.proxy.endpoint}} if self.proxy else {}

    def start(self):
        if self.proxy:
            self.proxy.config(rules=[{"methods": ["PUT", "POST"], "rates": {"500": 1.0},
                                      "path_regex": "/" + re.escape(self.b.prefix + self.key) + "([?]|$)"}])
        else:
            os.makedirs(os.path.join(self.b.root, self.key, "blocker"))
        self.on = True

    def failures(self):
        """Requests the proxy failed (None on the local backend)."""
        return self.proxy.stats()["faults_total"] if self.proxy else None

    def stop(self):
        if not self.on:
            return
        self.on = False
        if self.proxy:
            self.proxy.config(rules=[])
        else:
            os.rmdir(os.path.join(self.b.root, self.key, "blocker"))
            os.rmdir(os.path.join(self.b.root, self.key))

    def close(self):
        self.stop()
        if self.proxy:
            self.proxy.stop()


FAILING = {"writeback": {"retry_base": "100ms", "retry_max": "200ms"},
           "backend": {"retries": "0", "low_speed_time": "1s", "connect_timeout": "1s"}}


def expect_errno(fn, want, what):
    try:
        fn()
    except OSError as e:
        assert e.errno == want, "%s: %s, not %s" % (what, e, errno.errorcode[want])
        return
    raise AssertionError("%s succeeded; expected %s" % (what, errno.errorcode[want]))


def t_staging_full_enospc(ctx):
    """writeback.staging_size bounds the staged bytes: a write, an ftruncate
    or a copy-on-write open that would grow staging past it fails with
    ENOSPC; writes that do not grow it still work; clean data (cached or
    not) is still served; what was closed before is uploaded; and once the
    uploads free the space, writes work again (tierfs.conf(5))."""
    cap = MIB  # the smallest staging_size allowed
    big = data_for("clean-big", 3 * MIB + 5)  # larger than staging
    small = data_for("clean-small", 200_000)
    ctx.bucket.put("clean/big.bin", big)
    ctx.bucket.put("clean/small.bin", small)
    m = ctx.mount("full", conf(SLOW, {"writeback": {"staging_size": "1M"}})).mount()
    try:
        mnt = m.mnt
        assert read(os.path.join(mnt, "clean/big.bin")) == big  # in the cache now
        one = data_for("one", 600_000)
        write(os.path.join(mnt, "one.bin"), one)  # closed: committed
        st = wb(m)
        assert st["staging_capacity_bytes"] == cap, st
        assert st["staged_bytes"] == len(one), st
        chunk = data_for("two", 64 * 1024)
        two = b""
        fd = os.open(os.path.join(mnt, "two.bin"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            err = None
            for _ in range(64):  # 4 MiB: far past the bound
                try:
                    n = os.write(fd, chunk)
                except OSError as e:
                    err = e
                    break
                two += chunk[:n]
            assert err is not None, "wrote 4 MiB into 1 MiB of staging"
            assert err.errno == errno.ENOSPC, err
            assert cap - len(one) - len(chunk) < len(two) <= cap - len(one), \
                "ENOSPC after %d bytes with %d of %d staged" % (len(two), len(one), cap)
            # Exactly the room left fits; one byte more does not.
            room = cap - len(one) - len(two)
            assert os.write(fd, chunk[:room]) == room
            two += chunk[:room]
            assert wb(m)["staged_bytes"] == cap
            expect_errno(lambda: os.write(fd, b"x"), errno.ENOSPC, "a 1-byte append to full staging")
            expect_errno(lambda: os.ftruncate(fd, 10 * MIB), errno.ENOSPC, "ftruncate past staging_size")
            # Rewriting bytes already staged does not grow staging.
            os.pwrite(fd, b"Z" * 100, 0)
            two = b"Z" * 100 + two[100:]
        finally:
            os.close(fd)
        st = wb(m)
        assert st["staged_bytes"] <= cap, st
        # Copy-on-write of an object staging cannot hold fails at open.
        expect_errno(lambda: os.open(os.path.join(mnt, "clean/big.bin"), os.O_RDWR), errno.ENOSPC,
                     "opening a 3 MiB object for writing with staging full")
        # Clean data is still served: cached, and never read before.
        gets = m.gets()
        assert read(os.path.join(mnt, "clean/big.bin")) == big
        assert read(os.path.join(mnt, "clean/small.bin")) == small
        assert m.gets() > gets, "clean/small.bin was not fetched"
        assert os.stat(os.path.join(mnt, "clean/big.bin")).st_size == len(big)
        # Staged files read back as written, and are not uploaded yet.
        assert read(os.path.join(mnt, "one.bin")) == one
        assert read(os.path.join(mnt, "two.bin")) == two
        assert bucket_get(ctx.bucket, "one.bin") is None, "uploaded before the delay"
        # Nothing committed is lost: it uploads, and frees staging.
        flush(m)
        assert bucket_get(ctx.bucket, "one.bin") == one
        assert bucket_get(ctx.bucket, "two.bin") == two
        assert bucket_get(ctx.bucket, "clean/big.bin") == big, "the failed open changed the object"
        poll(lambda: wb(m)["staged_bytes"] == 0, 20, "uploaded files to leave staging")
        three = data_for("three", 900_000)
        write(os.path.join(mnt, "three.bin"), three)
        assert read(os.path.join(mnt, "three.bin")) == three
    finally:
        m.umount()
    assert bucket_get(ctx.bucket, "three.bin") == three


def t_staging_full_parallel_writers(ctx):
    """The staging bound holds with concurrent writers: eight threads append
    to eight files until ENOSPC; the staged bytes (and the files) never add
    up to more than writeback.staging_size."""
    cap = 2 * MIB
    m = ctx.mount("fullpar", conf(SLOW, {"writeback": {"staging_size": "2M"}})).mount()
    try:
        results = {}
        start = threading.Barrier(8)

        def writer(i):
            fd = os.open(os.path.join(m.mnt, "w%d" % i), os.O_WRONLY | os.O_CREAT, 0o644)
            done, err = 0, None
            try:
                start.wait()
                for _ in range(200):
                    try:
                        done += os.write(fd, b"%d" % i * 16384)
                    except OSError as e:
                        err = e.errno
                        break
            finally:
                os.close(fd)
            results[i] = (done, err)

        ts = [threading.Thread(target=writer, args=(i,)) for i in range(8)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(60)
        assert len(results) == 8, results
        assert all(e == errno.ENOSPC for _, e in results.values()), results
        total = sum(d for d, _ in results.values())
        staged = wb(m)["staged_bytes"]
        sizes = sum(os.stat(os.path.join(m.mnt, "w%d" % i)).st_size for i in range(8))
        assert sizes == total == staged, (sizes, total, staged)
        assert staged <= cap, "%d bytes staged with writeback.staging_size = %d" % (staged, cap)
        assert staged > cap - 8 * 16384, "ENOSPC with only %d of %d bytes staged" % (staged, cap)
    finally:
        m.umount()


def t_max_retries_gives_up(ctx):
    """writeback.max_retries: after that many failed attempts the mount
    stops trying a file and says so (`tierfs stats` failing[]: path,
    attempts, last error, gave_up; failed_files), `tierfs flush` reports it
    instead of waiting, the record stays in the journal through the
    unmount, and the next mount uploads it once the server works."""
    broken = BrokenUploads(ctx, "g.bin")
    cfg = conf(FAILING, broken.conf(), {"writeback": {"delay": "0s", "max_retries": "3"}})
    m = ctx.mount("giveup", cfg).mount()
    data = data_for("giveup", 5000)
    p = os.path.join(m.mnt, "g.bin")
    try:
        os.listdir(m.mnt)
        broken.start()
        write(p, data)

        def gave_up():
            f = [x for x in wb(m).get("failing", []) if x["path"] == "g.bin"]
            return f[0] if f and f[0]["gave_up"] else None

        ent = poll(gave_up, 60, "the upload of g.bin to give up")
        assert ent["attempts"] == 3, ent
        state = os.getxattr(p, "user.tierfs.upload")
        assert state.startswith(b"failed: ") and len(state) > 8, state
        assert isinstance(ent["last_error"], str) and ent["last_error"].strip(), ent
        st = wb(m)
        assert st["failed_files"] == 1 and st["pending_files"] == 1, st
        assert st["attempt_failures"] == 3, st
        assert st["dirty_bytes"] == len(data), st
        assert broken.failures() in (None, 3), "%s requests failed for 3 attempts" % broken.failures()
    finally:
        broken.stop()
    try:
        # The server works again, but this mount gave up: flush reports the
        # file instead of waiting for it, and does not try it again.
        r = subprocess.run([m.tierfs, "flush", m.mnt], capture_output=True, text=True, timeout=60)
        assert r.returncode != 0, "tierfs flush succeeded with an upload that gave up"
        assert "1 file(s) (%d bytes) could not be uploaded" % len(data) in r.stderr, r.stderr
        st = wb(m)
        assert st["attempt_failures"] == 3 and st["failed_files"] == 1, st
        assert bucket_get(ctx.bucket, "g.bin") is None
        assert read(p) == data  # still served from staging
        r = subprocess.run([m.tierfs, "umount", m.mnt], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert "1 file(s) (%d bytes) not uploaded yet" % len(data) in r.stderr, r.stderr
        poll(lambda: not os.path.ismount(m.mnt), 20, "the unmount")
        m.mount()  # the same cache directory: the journal still has it
        wait_bucket(ctx.bucket, "g.bin", data, 30)
        poll(lambda: drained(m), 20, "write-back to finish")
        assert wb(m)["failed_files"] == 0
        assert os.getxattr(p, "user.tierfs.upload") == b"clean"
        assert read(p) == data
    finally:
        m.umount()
        broken.close()


def t_sync_close_reports_upload_error(ctx):
    """writeback.mode = sync: close() itself (no fsync before it) returns
    the upload's failure as EIO, within the backend's bounds; a later
    rewrite of the file still succeeds, and the failed version is retried
    in the background once the server works."""
    broken = BrokenUploads(ctx, "c.bin")
    cfg = conf(FAILING, broken.conf(), {"writeback": {"mode": "sync"}})
    m = ctx.mount("syncclose", cfg).mount()
    p = os.path.join(m.mnt, "c.bin")
    try:
        write(os.path.join(m.mnt, "ok.bin"), b"fine")
        assert bucket_get(ctx.bucket, "ok.bin") == b"fine", "close returned before the upload"
        os.listdir(m.mnt)
        broken.start()
        try:
            fd = os.open(p, os.O_WRONLY | os.O_CREAT, 0o644)
            os.write(fd, b"first")
            t0 = time.monotonic()
            expect_errno(lambda: os.close(fd), errno.EIO, "close() in sync mode with failing uploads")
            assert time.monotonic() - t0 < 20, "close took %.1f s" % (time.monotonic() - t0)
            # The same through Python's buffered file: the error is not lost.
            f = open(p, "ab")
            f.write(b"+second")
            expect_errno(f.close, errno.EIO, "a buffered close() in sync mode with failing uploads")
            assert read(p) == b"first+second"  # the staged copy is intact
        finally:
            broken.stop()
        wait_bucket(ctx.bucket, "c.bin", b"first+second", 30)  # still retried afterwards
        write(p, b"third")  # and close succeeds again
        assert bucket_get(ctx.bucket, "c.bin") == b"third", "close returned before the upload"
    finally:
        broken.close()
        m.umount()


def t_rename_dir_bound(ctx):
    """Renaming a directory moves its entries one by one, at most 1000
    (files and directories, counted recursively, staged ones included):
    beyond that rename(2) fails with EXDEV (so mv(1) copies) and nothing
    changes, in the mount or in the bucket.  At the bound it succeeds
    (local backend only: 1000 server-side copies are slow on moto).  On
    moto it is also the reproducer of a listing bug (the BUG message)."""
    names = ["f%04d" % i for i in range(998)]
    if ctx.bucket.kind == "local":
        for nm in names:
            ctx.bucket.put("big/" + nm, nm.encode())
    else:
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(8) as ex:
            list(ex.map(lambda nm: ctx.bucket.put("big/" + nm, nm.encode()), names))
    ctx.bucket.put("big/sub/g", b"g")
    m = ctx.mount("rdbound", SLOW).mount()
    try:
        mnt = m.mnt
        big = os.path.join(mnt, "big")
        write(os.path.join(big, "new.bin"), b"staged")  # not uploaded: SLOW
        # 1000 entries directly in big/ (998 + sub + new.bin), 1001 with sub/g.
        try:
            before = sorted(os.listdir(big))
        except OSError as e:
            if ctx.bucket.kind == "local" or e.errno != errno.EIO:
                raise
            raise AssertionError(
                "BUG s3-list-reply-cap: listing a directory of 999 objects fails with EIO (%s): "
                "backends/s3_http.c collects a reply without a destination (a ListObjectsV2 page) "
                "into a tfs_dbuf capped at ERROR_BODY_MAX = 64 KiB and silently drops the rest, so "
                "any page over 64 KiB (about 270 keys) is cut and backends/s3.c s3_list() reports "
                "'malformed ListObjectsV2 reply'; every S3 directory of more than ~270 entries is "
                "unreadable.  Seen in the daemon log above." % e)
        assert len(before) == 1000, len(before)
        expect_errno(lambda: os.rename(big, os.path.join(mnt, "big2")), errno.EXDEV,
                     "renaming a directory of 1001 entries")
        assert not os.path.exists(os.path.join(mnt, "big2"))
        assert sorted(os.listdir(big)) == before
        assert os.listdir(os.path.join(big, "sub")) == ["g"]
        assert read(os.path.join(big, "new.bin")) == b"staged"
        assert read(os.path.join(big, "f0500")) == b"f0500"
        flush(m)
        keys = bucket_keys(ctx.bucket)
        assert not [k for k in keys if k.startswith("big2")], "the failed rename reached the bucket"
        assert all(("big/" + nm) in keys for nm in names + ["new.bin", "sub/g"]), "lost entries"
        assert bucket_get(ctx.bucket, "big/new.bin") == b"staged"
        if ctx.bucket.kind != "local":
            return None
        # At the bound (1000 entries with sub/g gone) it is a rename.
        os.unlink(os.path.join(big, "sub/g"))
        os.rename(big, os.path.join(mnt, "big2"))
        assert not os.path.exists(big)
        assert sorted(os.listdir(os.path.join(mnt, "big2"))) == before
        assert read(os.path.join(mnt, "big2/new.bin")) == b"staged"
        assert read(os.path.join(mnt, "big2/f0997")) == b"f0997"
        flush(m)
        keys = bucket_keys(ctx.bucket)
        assert not [k for k in keys if k.startswith("big/")], "entries left under the old name"
        assert bucket_get(ctx.bucket, "big2/f0000") == b"f0000"
        assert bucket_get(ctx.bucket, "big2/new.bin") == b"staged"
    finally:
        m.umount()


RENAME_NOREPLACE, RENAME_EXCHANGE, RENAME_WHITEOUT = 1, 2, 4  # <linux/fs.h>


def libc_call(name, argtypes, *args):
    """A libc call Python has no wrapper for; OSError on failure."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    fn = getattr(libc, name)
    fn.argtypes = argtypes
    if fn(*args) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def renameat2(src, dst, flags):
    import ctypes
    libc_call("renameat2", [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint],
              -100, os.fsencode(src), -100, os.fsencode(dst), flags)  # AT_FDCWD


def fallocate(fd, mode, off, length):
    import ctypes
    libc_call("fallocate", [ctypes.c_int, ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong],
              fd, mode, off, length)


def t_posix_differences(ctx):
    """The calls docs/semantics.md ("POSIX calls that differ") lists besides
    links and xattrs (attrs_and_unsupported): renameat2 flags (NOREPLACE
    works; EXCHANGE and WHITEOUT are EINVAL and change nothing), mknod of a
    regular file (an empty file), fallocate (EOPNOTSUPP), and times (atime
    is kept, and not moved by reads; ctime moves with every change).
    Special files and symlinks are test_posix.py's."""
    m = ctx.mount("posixdiff", FAST).mount()
    try:
        def p(name):
            return os.path.join(m.mnt, name)
        write(p("a"), b"A")
        write(p("b"), b"B")
        expect_errno(lambda: renameat2(p("a"), p("b"), RENAME_NOREPLACE), errno.EEXIST,
                     "RENAME_NOREPLACE onto an existing file")
        expect_errno(lambda: renameat2(p("a"), p("b"), RENAME_EXCHANGE), errno.EINVAL, "RENAME_EXCHANGE")
        if os.geteuid() == 0:  # otherwise the kernel refuses it first (EPERM)
            expect_errno(lambda: renameat2(p("a"), p("c"), RENAME_WHITEOUT), errno.EINVAL,
                         "RENAME_WHITEOUT")
        assert read(p("a")) == b"A" and read(p("b")) == b"B", "a refused rename changed the files"
        assert not os.path.exists(p("c")), "RENAME_WHITEOUT was done as a plain rename"
        renameat2(p("a"), p("c"), RENAME_NOREPLACE)
        assert read(p("c")) == b"A" and not os.path.exists(p("a"))
        # A regular file made by mknod is an empty file.
        os.mknod(p("empty"), 0o600 | stat.S_IFREG)
        assert read(p("empty")) == b""
        assert sorted(os.listdir(m.mnt)) == ["b", "c", "empty"], os.listdir(m.mnt)
        fd = os.open(p("c"), os.O_RDWR)
        try:
            expect_errno(lambda: fallocate(fd, 0, 0, 1 << 20), errno.EOPNOTSUPP, "fallocate")
        finally:
            os.close(fd)
        assert os.stat(p("c")).st_size == 1
        # Times: mtime and atime are kept; ctime is the time of the change.
        os.utime(p("c"), (1_000_000_000, 1_600_000_000))
        read(p("c"))
        st = os.stat(p("c"))
        assert int(st.st_mtime) == 1_600_000_000, st
        assert int(st.st_atime) == 1_000_000_000, st
        assert st.st_ctime > 1_600_000_000, st
        assert st.st_nlink == 1, st
        wait_bucket(ctx.bucket, "c", b"A")
        wait_bucket(ctx.bucket, "empty", b"")
        wait_gone(ctx.bucket, "a")
        poll(lambda: drained(m), 20, "write-back to finish")
        assert bucket_get(ctx.bucket, "b") == b"B"
        for k in ("fifo", "sock", "null"):
            assert bucket_get(ctx.bucket, k) is None, k
        if ctx.bucket.kind != "local":
            assert bucket_head(ctx.bucket, "c")["mtime"] == "1600000000"
    finally:
        m.umount()


class ModelMismatch(AssertionError):
    pass


class Handle:
    """One open file: a descriptor on the mount and one on the model."""

    def __init__(self, hid, path, flags, fds):
        self.hid = hid
        self.path = path  # its current name; None once unlinked or replaced
        self.flags = flags
        self.fd = fds  # {"m": fd, "r": fd}
        acc = flags & os.O_ACCMODE
        self.readable = acc in (os.O_RDONLY, os.O_RDWR)
        self.writable = acc in (os.O_WRONLY, os.O_RDWR)
        self.append = bool(flags & os.O_APPEND)

    def __str__(self):
        return "h%d" % self.hid


def flag_names(fl):
    acc = {os.O_RDONLY: "RDONLY", os.O_WRONLY: "WRONLY", os.O_RDWR: "RDWR"}[fl & os.O_ACCMODE]
    return "|".join([acc] + [n for n, b in (("CREAT", os.O_CREAT), ("EXCL", os.O_EXCL),
                                          ("TRUNC", os.O_TRUNC), ("APPEND", os.O_APPEND)) if fl & b])


class RefModel:
    """The randomized reference-model test, after mountpoint-s3's reference
    tests: a seeded random sequence of operations is applied to the mount
    ("m") and to a plain local directory, the model ("r").  Operations:
    open/create (O_CREAT, O_EXCL, O_TRUNC, O_APPEND, read-only, write-only),
    pwrite/append at random offsets (1 B .. 6 MiB), pread, ftruncate and
    truncate up and down, fstat, fsync, close, rename of files (often onto
    existing names, or onto a directory's name) and of directories, unlink
    (often of an open file, whose handle is used on afterwards), mkdir,
    rmdir, listdir, `tierfs flush` (then the bucket must hold the model's
    tree if nothing is open for writing) and kill -9 plus a remount with
    the same cache.  Each operation must have the same outcome on both (the
    same value or the same errno); after each one the files and handles it
    touched must have the same size and bytes, and their directories the
    same names.  Every operation is logged; with the same seed, --ops N
    replays the first N operations exactly."""

    FILE_NAMES = ["f0", "f1", "f2", "f3"]
    PARENTS = ["", "a", "b", "a/c", "b/c"]
    DIR_PATHS = ["a", "b", "c", "a/c", "b/c", "a/b"]
    MAX_FILE = 8 * MIB
    MAX_HANDLES = 8
    CROSS = 0.1  # how often a name of one type is used as the other (file <-> directory)
    OPEN_FLAGS = [os.O_RDWR | os.O_CREAT, os.O_RDWR | os.O_CREAT, os.O_RDWR, os.O_RDONLY, os.O_RDONLY,
                  os.O_WRONLY | os.O_CREAT | os.O_TRUNC, os.O_RDWR | os.O_CREAT | os.O_EXCL,
                  os.O_WRONLY | os.O_APPEND | os.O_CREAT, os.O_RDWR | os.O_TRUNC, os.O_RDWR | os.O_APPEND]
    WEIGHTS = [("open", 14), ("write", 26), ("read", 10), ("ftruncate", 5), ("truncate", 3),
               ("fstat", 3), ("close", 9), ("fsync", 2), ("rename", 6), ("rename_dir", 1),
               ("unlink", 5), ("mkdir", 3), ("rmdir", 2), ("listdir", 2), ("flush", 0.5), ("crash", 0.2)]

    def __init__(self, name, m, ref, seed, flush_ops=True):
        self.name = name
        self.m = m
        self.bucket = m.bucket
        self.root = {"m": m.mnt, "r": ref}
        self.seed = seed
        self.rnd = random.Random(seed)
        self.handles = {}
        self.next_h = 1
        self.step = 0
        self.log = []
        self.file_paths = [os.path.join(p, n) for p in self.PARENTS for n in self.FILE_NAMES]
        self.ops = [w for w in self.WEIGHTS if flush_ops or w[0] != "flush"]
        self.counts = {}

    # -- plumbing

    def p(self, side, rel):
        return os.path.join(self.root[side], rel) if rel else self.root[side]

    def note(self, text):
        self.log.append("%5d %s" % (self.step, text))

    def fail(self, text):
        path = os.path.join(tempfile.gettempdir(), "tierfs-model-seed%d.log" % self.seed)
        with open(path, "w") as f:
            f.write("\n".join(self.log) + "\n")
        raise ModelMismatch("reference model, seed %d, step %d: %s\n"
                            "rerun: test_write.py TIERFS --backend %s --only %s --seed %d --ops %d\n"
                            "full operation log: %s\nlast operations:\n  %s"
                            % (self.seed, self.step, text, self.bucket.kind, self.name, self.seed,
                               self.step + 1, path,
                               "\n  ".join(self.log[-25:])))

    @staticmethod
    def show(x, compare=True):
        if x[0] == "err":
            return x[1]
        v = x[1]
        if not compare or v is None:
            return "ok"
        if isinstance(v, bytes):
            return "%d bytes %r" % (len(v), v[:12])
        return repr(v)

    def hint(self, h, m, r):
        """The known tierfs bug a mismatch looks like, to help triage."""
        if h is not None and h.path is None and m[0] == "err":
            return ("\nthis looks like BUG unlinked-open-file: a handle whose name was unlinked or "
                    "replaced fails getattr/setattr, EINVAL or ENOENT (test unlinked_handle_stays_usable)")
        if h is not None and not h.writable and (m[0] == r[0] == "ok" or m == ("err", "ESTALE")):
            return ("\nthis looks like BUG pinned-reader: a read-only handle opened on a clean object "
                    "does not see later writes of the same mount, and gets ESTALE once they are "
                    "uploaded (test open_reader_sees_later_writes)")
        return ""

    def both(self, desc, fn, compare=True, h=None):
        """Run fn(side) on the mount and on the model: the outcome must be
        the same (and the value, if `compare`).  Returns {side: value}, or
        the errno name when both failed alike.  `h`: the handle used."""
        out = {}
        for side in ("m", "r"):
            try:
                out[side] = ("ok", fn(side))
            except OSError as e:
                out[side] = ("err", errno.errorcode.get(e.errno, str(e.errno)))
        m, r = out["m"], out["r"]
        self.note("%s -> %s" % (desc, self.show(r, compare)))
        if m[0] != r[0] or (compare and m != r):
            detail = ""
            if m[0] == r[0] == "ok" and isinstance(m[1], bytes):
                a, b = m[1], r[1]
                first = next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), min(len(a), len(b)))
                detail = " (first difference at offset %d)" % first
            if not compare:  # an open: close what only one side opened
                for x in (m, r):
                    if x[0] == "ok":
                        os.close(x[1])
            self.fail("%s: the mount gave %s, the model %s%s%s" % (
                desc, self.show(m, compare), self.show(r, compare), detail, self.hint(h, m, r)))
        return {s: out[s][1] for s in out} if r[0] == "ok" else r[1]

    # -- state of the model (decides what to do next; never the mount)

    def files(self):
        return sorted(k for k in local_tree(self.root["r"])[0])

    def dirs(self):
        return sorted(local_tree(self.root["r"])[1])

    def size(self, h):
        return os.fstat(h.fd["r"]).st_size

    def pick_handle(self, cond):
        hs = [h for _, h in sorted(self.handles.items()) if cond(h)]
        return self.rnd.choice(hs) if hs else None

    def pick_file(self, existing=0.7):
        fs = self.files()
        if fs and self.rnd.random() < existing:
            return self.rnd.choice(fs)
        return self.rnd.choice(self.file_paths)

    def pick_size(self, size):
        r = self.rnd.random()
        if r < 0.15:
            return 0
        if r < 0.5:
            return self.rnd.randrange(0, size + 1)
        if r < 0.85:
            return size + self.rnd.randint(1, 70000)
        if r < 0.95:
            return MIB + self.rnd.randint(-20, 20)  # around a cache block boundary
        return self.rnd.randrange(0, 2 * MIB)

    # -- checks after each step

    def stat_of(self, side, rel):
        st = os.stat(self.p(side, rel))
        return ("dir",) if stat_isdir(st) else ("file", st.st_size)

    def check_path(self, rel):
        st = self.both("  stat %s" % rel, lambda s: self.stat_of(s, rel))
        if isinstance(st, dict) and st["r"][0] == "file":
            self.both("  read %s" % rel, lambda s: read(self.p(s, rel)))
        elif isinstance(st, dict):
            self.both("  listdir %s" % rel, lambda s: sorted(os.listdir(self.p(s, rel))))
        parent = os.path.dirname(rel)
        if rel and os.path.isdir(self.p("r", parent)):
            self.both("  listdir %s/" % parent, lambda s: sorted(os.listdir(self.p(s, parent))))

    def fstat_of(self, side, h):
        st = os.fstat(h.fd[side])
        return ("dir",) if stat_isdir(st) else ("file", st.st_size)

    def check_handle(self, h):
        self.both("  fstat %s" % h, lambda s: self.fstat_of(s, h), h=h)
        if h.readable:
            n = self.size(h)
            self.both("  pread %s %d+%d" % (h, 0, n + 1), lambda s: os.pread(h.fd[s], n + 1, 0), h=h)

    # -- operations

    def do_open(self):
        if len(self.handles) >= self.MAX_HANDLES:
            return self.do_close()
        rel = self.pick_file(0.6)
        fl = self.rnd.choice(self.OPEN_FLAGS)
        hid = self.next_h
        fds = self.both("open h%d = %s %s" % (hid, rel, flag_names(fl)),
                        lambda s: os.open(self.p(s, rel), fl, 0o644), compare=False)
        if isinstance(fds, dict):
            self.next_h += 1
            h = Handle(hid, rel, fl, fds)
            self.handles[hid] = h
            return [h], [rel]
        return [], [rel]

    def do_close(self):
        h = self.pick_handle(lambda h: True)
        if h is None:
            return self.do_open()
        del self.handles[h.hid]
        self.both("close %s (%s)" % (h, h.path or "unlinked"), lambda s: os.close(h.fd[s]), h=h)
        return [], [h.path] if h.path else []

    def do_write(self):
        h = self.pick_handle(lambda h: h.writable)
        if h is None:
            return self.do_open()
        size = self.size(h)
        r = self.rnd.random()
        n = (self.rnd.randint(1, 4096) if r < 0.85 else self.rnd.randint(4097, 256 * 1024) if r < 0.98
             else self.rnd.randint(MIB, 6 * MIB))
        r = self.rnd.random()
        off = (size if r < 0.2 else self.rnd.randrange(0, size + 1) if r < 0.7
               else max(0, self.rnd.randrange(1, 4) * MIB - self.rnd.randrange(0, 200)) if r < 0.8
               else self.rnd.randrange(0, size + 65536))
        if h.append:
            off = size
        if off + n > self.MAX_FILE:
            off, n = 0, min(n, self.MAX_FILE)
        data = self.rnd.randbytes(n)
        if h.append:
            self.both("write %s +%d (append)" % (h, n), lambda s: os.write(h.fd[s], data), h=h)
        else:
            self.both("pwrite %s %d+%d" % (h, off, n), lambda s: os.pwrite(h.fd[s], data, off), h=h)
        return [h], [h.path] if h.path else []

    def do_read(self):
        h = self.pick_handle(lambda h: h.readable)
        if h is None:
            return self.do_open()
        size = self.size(h)
        off = self.rnd.randrange(0, size + 100)
        n = self.rnd.choice([1, self.rnd.randint(1, 8192), self.rnd.randint(1, 300000), size + 1])
        self.both("pread %s %d+%d" % (h, off, n), lambda s: os.pread(h.fd[s], n, off), h=h)
        return [h], []

    def do_ftruncate(self):
        h = self.pick_handle(lambda h: h.writable)
        if h is None:
            return self.do_open()
        n = self.pick_size(self.size(h))
        self.both("ftruncate %s %d" % (h, n), lambda s: os.ftruncate(h.fd[s], n), h=h)
        return [h], [h.path] if h.path else []

    def do_truncate(self):
        rel = self.pick_file(0.9)
        n = self.pick_size(os.path.getsize(self.p("r", rel)) if os.path.isfile(self.p("r", rel)) else 0)
        self.both("truncate %s %d" % (rel, n), lambda s: os.truncate(self.p(s, rel), n))
        return [h for h in self.handles.values() if h.path == rel], [rel]

    def do_fstat(self):
        h = self.pick_handle(lambda h: True)
        if h is None:
            return self.do_open()
        self.both("fstat %s" % h, lambda s: self.fstat_of(s, h), h=h)
        return [h], []

    def do_fsync(self):
        h = self.pick_handle(lambda h: True)
        if h is None:
            return self.do_open()
        self.both("fsync %s" % h, lambda s: os.fsync(h.fd[s]), h=h)
        return [h], [h.path] if h.path else []

    def moved(self, src, dst):
        """Handles follow a rename; those of a replaced file lose their name."""
        for h in self.handles.values():
            if h.path == dst:
                h.path = None
        for h in self.handles.values():
            if h.path and (h.path == src or h.path.startswith(src + "/")):
                h.path = dst + h.path[len(src):]

    def do_rename(self):
        src = self.pick_file(0.9)
        dst = self.pick_file(0.5) if self.rnd.random() >= self.CROSS else self.rnd.choice(self.DIR_PATHS)
        if self.rnd.random() < 0.3:  # prefer a file that is open
            h = self.pick_handle(lambda h: h.path is not None)
            src = h.path if h else src
        res = self.both("rename %s -> %s" % (src, dst), lambda s: os.rename(self.p(s, src), self.p(s, dst)))
        if isinstance(res, dict) and src != dst:
            self.moved(src, dst)
        return [h for h in self.handles.values() if h.path == dst], [src, dst]

    def do_rename_dir(self):
        src = self.rnd.choice(self.dirs() or self.DIR_PATHS)
        dst = (self.rnd.choice(self.DIR_PATHS + ["d", "a/d"]) if self.rnd.random() >= self.CROSS
               else self.pick_file(0.5))
        res = self.both("rename %s/ -> %s" % (src, dst), lambda s: os.rename(self.p(s, src), self.p(s, dst)))
        if isinstance(res, dict) and src != dst:
            self.moved(src, dst)
        return [h for h in self.handles.values() if h.path and h.path.startswith(dst + "/")], [src, dst]

    def do_unlink(self):
        h = self.pick_handle(lambda h: h.path is not None) if self.rnd.random() < 0.5 else None
        rel = h.path if h else self.pick_file(0.9)
        res = self.both("unlink %s" % rel, lambda s: os.unlink(self.p(s, rel)))
        touched = [x for x in self.handles.values() if x.path == rel]
        if isinstance(res, dict):
            for x in touched:
                x.path = None  # keeps being used below: unlink while open
        return touched, [rel]

    def do_mkdir(self):
        rel = self.rnd.choice(self.DIR_PATHS) if self.rnd.random() >= self.CROSS else self.pick_file(0.5)
        self.both("mkdir %s" % rel, lambda s: os.mkdir(self.p(s, rel)))
        return [], [rel]

    def do_rmdir(self):
        rel = self.rnd.choice(self.dirs() or self.DIR_PATHS)
        self.both("rmdir %s" % rel, lambda s: os.rmdir(self.p(s, rel)))
        return [], [rel]

    def do_listdir(self):
        rel = self.rnd.choice([""] + self.dirs())
        self.both("listdir %s/" % rel, lambda s: sorted(os.listdir(self.p(s, rel))))
        return [], []

    def do_flush(self):
        self.note("flush (tierfs flush: upload everything now)")
        try:
            flush(self.m, 60)
        except AssertionError as e:
            self.fail(str(e))
        left = wb(self.m)["pending_files"]
        if left:
            self.fail("tierfs flush returned with %d file(s) still pending" % left)
        if not any(h.writable and h.path for h in self.handles.values()):
            # Nothing is being written: the bucket holds the model's tree.
            self.note("  the bucket matches the model")
            self.compare("the bucket after tierfs flush", bucket_tree(self.bucket), self.bucket.kind)
        return [], []

    def do_crash(self):
        """Close every handle, kill -9 the daemon, remount with the same
        cache directory: the journal brings back every change."""
        for hid in sorted(self.handles):
            h = self.handles.pop(hid)
            self.both("close %s (%s)" % (h, h.path or "unlinked"), lambda s: os.close(h.fd[s]), h=h)
        self.note("kill -9 the daemon, remount with the same cache")
        kill9(self.m)
        self.m.mount()
        self.compare("the mount after kill -9 and a remount", local_tree(self.m.mnt), self.bucket.kind)
        return [], []

    def run(self, nops):
        names = [n for n, _ in self.ops]
        weights = [w for _, w in self.ops]
        for self.step in range(nops):
            op = self.rnd.choices(names, weights)[0]
            self.counts[op] = self.counts.get(op, 0) + 1
            hs, paths = getattr(self, "do_" + op)()
            for h in hs:
                if h.hid in self.handles:
                    self.check_handle(h)
            for rel in paths:
                if rel is not None:
                    self.check_path(rel)

    def close_all(self):
        self.step += 1
        for hid in sorted(self.handles):
            h = self.handles.pop(hid)
            self.both("close %s (%s)" % (h, h.path or "unlinked"), lambda s: os.close(h.fd[s]), h=h)

    def compare(self, what, tree, bucket_kind=None):
        d = diff_trees(what, tree, local_tree(self.root["r"]))
        if d and bucket_kind == "local" and "missing directory" in d:
            d += ("\nthis looks like BUG local-prunes-directories: the local backend removes a "
                  "directory made by mkdir once its last file is deleted (test emptied_directory_stays)")
        if d:
            self.fail(d)


def stat_isdir(st):
    return (st.st_mode & 0o170000) == 0o040000


def run_model(ctx, test, name, cfg, nops, flush_ops):
    seed = ctx.seed if ctx.seed is not None else random.randrange(1 << 31)
    print("    seed %d, %d operations" % (seed, nops))
    ref = os.path.join(ctx.work, "model-" + name)
    os.makedirs(ref)
    # Objects already in the bucket (copy-on-write, renames of clean objects),
    # and directory markers that keep a/, b/ and b/c/ when their files are
    # gone (an S3 prefix without a marker vanishes with its last object).
    pre = {"a/f0": data_for("pre-a-f0", 100_000), "b/f1": data_for("pre-b-f1", MIB + 4321),
           "f2": b"ten bytes!", "b/c/f3": b""}
    for k, v in pre.items():
        ctx.bucket.put(k, v)
        os.makedirs(os.path.dirname(os.path.join(ref, k)), exist_ok=True)
        with open(os.path.join(ref, k), "wb") as f:
            f.write(v)
    m = ctx.mount(name, cfg)
    for d in ("a/", "b/", "b/c/"):
        backend_put_marker(m, d)
    m.mount()
    model = RefModel(test, m, ref, seed, flush_ops)
    t0 = time.monotonic()
    try:
        model.run(nops)
        model.close_all()
        t_ops = time.monotonic() - t0
        pending = wb(m)["pending_files"]
        model.compare("the mount, before upload", local_tree(m.mnt))
        try:
            flush(m, 120)
            poll(lambda: drained(m), 60, "write-back to finish")
        except AssertionError as e:
            model.fail("after the run: %s" % e)
        model.compare("the mount, after upload", local_tree(m.mnt), ctx.bucket.kind)
        model.compare("the bucket", bucket_tree(ctx.bucket), ctx.bucket.kind)
        if bucket_uploads(ctx.bucket):
            model.fail("%d multipart upload(s) left in the bucket; this looks like BUG multipart-orphan "
                       "(test rewrites_leave_no_multipart_upload)" % len(bucket_uploads(ctx.bucket)))
        st = wb(m)
    finally:
        for h in model.handles.values():
            for fd in h.fd.values():
                try:
                    os.close(fd)
                except OSError:
                    pass
        m.umount()
    fresh = ctx.mount(name + "-empty-cache").mount()
    try:
        model.compare("a remount through an empty cache", local_tree(fresh.mnt), ctx.bucket.kind)
    finally:
        fresh.umount()
    print("    %.1fs for the operations (%s); %d files pending at the end; since the last remount: "
          "uploads %d, deletes %d, re-uploads %d" % (
              t_ops, " ".join("%s %d" % kv for kv in sorted(model.counts.items())), pending,
              st["uploads"], st["deletes"], st["reuploads"]))


def t_reference_model(ctx):
    """The randomized reference-model test (see RefModel): a few thousand
    operations with write-back held back (writeback.delay = 1h) except for
    random `tierfs flush` steps, so later operations meet both staged files
    and clean objects.  At the end the whole tree (names, sizes, bytes) must
    match the model through the mount before the upload, after it, in the
    bucket, and through a remount with an empty cache.  --seed S replays a
    run; --ops N sets the number of operations (default 5000 on the local
    backend, about 15 s, and 2500 on a server, whose requests cost more;
    30000 with --extended)."""
    nops = ctx.ops or (30000 if ctx.extended else 5000 if ctx.bucket.kind == "local" else 2500)
    cfg = conf({"writeback": {"delay": "1h", "drain_timeout": "10s"},
                "backend": {"multipart_threshold": "5M", "part_size": "5M"}})
    run_model(ctx, "reference_model", "model", cfg, nops, flush_ops=True)


def t_reference_model_racing_uploads(ctx):
    """The reference model with uploads racing the operations
    (writeback.delay = 0, two uploaders, multipart above 5 MiB): files are
    uploaded, rewritten, renamed and removed while their uploads run.
    Same checks as reference_model; --ops N (default 3000 on the local
    backend, about 10 s, 1500 on a server; 20000 with --extended)."""
    nops = ctx.ops or (20000 if ctx.extended else 3000 if ctx.bucket.kind == "local" else 1500)
    cfg = conf({"writeback": {"delay": "0s", "uploaders": "2", "retry_base": "100ms", "retry_max": "500ms",
                              "drain_timeout": "10s"},
                "backend": {"multipart_threshold": "5M", "part_size": "5M", "upload_parallel": "2"}})
    run_model(ctx, "reference_model_racing_uploads", "model-racing", cfg, nops, flush_ops=False)


# ------------------------------------------------ streaming (upload_stream.h)

STREAM = {"writeback": {"delay": "0s", "stream": "true"},
          "backend": {"multipart_threshold": "10M", "part_size": "5M", "upload_parallel": "2"}}


def stream_parts(b, key):
    """Parts on the server in the multipart uploads of `key` in progress."""
    n = 0
    for u in bucket_uploads(b):
        if u["Key"] == b.prefix + key:
            r = b.s3.list_parts(Bucket=BUCKET, Key=u["Key"], UploadId=u["UploadId"])
            n += len(r.get("Parts", []))
    return n


def stream_start(ctx, name, key, nbytes, cfg=STREAM):
    """Mount, create `key` and append nbytes of it, and wait until the
    server holds two parts of it while the file is still open.  Returns
    (mount, fd, data written)."""
    m = ctx.mount(name, cfg).mount()
    data = data_for(name, nbytes)
    fd = os.open(os.path.join(m.mnt, key), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        assert os.write(fd, data) == len(data)
        poll(lambda: stream_parts(ctx.bucket, key) >= 2, 30,
             "parts of '%s' to reach the server before close" % key)
    except BaseException:
        os.close(fd)
        m.umount()
        raise
    return m, fd, data


def t_streamed_checkpoint(ctx):
    """A file written from its start by appending is uploaded while it is
    written (parts reach the server before close); after close only the
    rest goes up, and the object is byte-exact with no upload left over."""
    if ctx.bucket.kind == "local":
        return "skip"
    m, fd, head = stream_start(ctx, "stream", "ckpt.bin", 20 * MIB)
    try:
        tail = data_for("stream-tail", 17 * MIB + 123)
        assert os.write(fd, tail) == len(tail)
        os.close(fd)
        flush(m)
        assert bucket_get(ctx.bucket, "ckpt.bin") == head + tail, "the object is not what was written"
        assert bucket_uploads(ctx.bucket) == [], "multipart uploads left"
        s = wb(m)
        assert s["streams"] == 1 and s["streams_finished"] == 1, s
        assert s["streamed_parts"] >= 2, s
        assert s["streams_cancelled"] == 0, s
        assert read(os.path.join(m.mnt, "ckpt.bin")) == head + tail
    finally:
        m.umount()


def t_stream_cancelled_by_other_changes(ctx):
    """Anything but an append cancels the stream: the upload made so far
    is aborted and the file is uploaded whole after close.  Covers a write
    before the end, a truncate, an unlink and a rename of the open file."""
    if ctx.bucket.kind == "local":
        return "skip"
    more = data_for("more", 3 * MIB)

    # A write into what was already sent.
    m, fd, data = stream_start(ctx, "streampw", "a.bin", 16 * MIB)
    try:
        os.pwrite(fd, b"PATCHED!", 1 * MIB)
        os.write(fd, more)
        os.close(fd)
        want = data[:MIB] + b"PATCHED!" + data[MIB + 8:] + more
        flush(m)
        assert bucket_get(ctx.bucket, "a.bin") == want, "a.bin: the write before the end was lost"
        assert bucket_uploads(ctx.bucket) == [], "a.bin: the cancelled upload was not aborted"
        s = wb(m)
        assert s["streams_cancelled"] == 1 and s["streams_finished"] == 0, s
    finally:
        m.umount()

    # A truncate below what was sent, then appending again.
    m, fd, data = stream_start(ctx, "streamtr", "b.bin", 16 * MIB)
    try:
        os.ftruncate(fd, 7 * MIB)
        os.lseek(fd, 7 * MIB, os.SEEK_SET)
        os.write(fd, more)
        os.close(fd)
        flush(m)
        assert bucket_get(ctx.bucket, "b.bin") == data[:7 * MIB] + more, "b.bin differs"
        assert bucket_uploads(ctx.bucket) == [], "b.bin: the cancelled upload was not aborted"
    finally:
        m.umount()

    # Unlinked while written: nothing reaches the bucket.
    m, fd, data = stream_start(ctx, "streamrm", "c.bin", 16 * MIB)
    try:
        os.unlink(os.path.join(m.mnt, "c.bin"))
        os.write(fd, more)
        os.close(fd)
        flush(m)
        assert bucket_get(ctx.bucket, "c.bin") is None, "an unlinked file reached the bucket"
        poll(lambda: bucket_uploads(ctx.bucket) == [], 20, "c.bin: the upload to be aborted")
    finally:
        m.umount()

    # Renamed while written: the new name gets the whole file.
    m, fd, data = stream_start(ctx, "streammv", "d.bin", 16 * MIB)
    try:
        os.rename(os.path.join(m.mnt, "d.bin"), os.path.join(m.mnt, "e.bin"))
        os.write(fd, more)
        os.close(fd)
        flush(m)
        assert bucket_get(ctx.bucket, "e.bin") == data + more, "e.bin differs"
        assert bucket_get(ctx.bucket, "d.bin") is None, "the old name stayed"
        poll(lambda: bucket_uploads(ctx.bucket) == [], 20, "d.bin: the upload to be aborted")
    finally:
        m.umount()

    # utimens, or chmod, of the open file: the object gets the new headers.
    for key, change, want in [("f.bin", lambda fd: os.utime(fd, (1500000000, 1500000000)),
                               {"mtime": "1500000000"}),
                              ("g.bin", lambda fd: os.fchmod(fd, 0o600), {"mode": str(0o100600)})]:
        m, fd, data = stream_start(ctx, "stream" + key[0], key, 16 * MIB)
        try:
            os.write(fd, more)
            change(fd)  # after the last write, which sets mtime
            os.close(fd)
            flush(m)
            assert bucket_get(ctx.bucket, key) == data + more, "%s differs" % key
            h = bucket_head(ctx.bucket, key)
            assert all(h.get(k) == v for k, v in want.items()), (key, h)
            assert bucket_uploads(ctx.bucket) == [], "%s: the cancelled upload was not aborted" % key
        finally:
            m.umount()


def t_stream_killed_leaves_no_upload(ctx):
    """kill -9 while a streamed file is open: the next mount aborts the
    upload begun for it (registered in the journal's table of streams),
    leaving none behind, and uploads what was staged (a new file; see the
    durability table of docs/semantics.md) from the start."""
    if ctx.bucket.kind == "local":
        return "skip"
    m, fd, data = stream_start(ctx, "streamkill", "k.bin", 16 * MIB)
    try:
        kill9(m)
    finally:
        try:
            os.close(fd)
        except OSError:
            pass
    assert len(bucket_uploads(ctx.bucket)) == 1, "the stream's upload should still be open"
    m.mount()
    try:
        poll(lambda: bucket_uploads(ctx.bucket) == [], 30, "the next mount to abort the upload")
        flush(m)
        assert bucket_get(ctx.bucket, "k.bin") == data, "k.bin is not what was staged"
        assert bucket_uploads(ctx.bucket) == [], "multipart uploads left"
    finally:
        m.umount()


TESTS = [
    ("create_read_own_writes_and_upload", t_create_read_own_writes_and_upload),
    ("overwrite_is_copy_on_write", t_overwrite_is_copy_on_write),
    ("truncate_unlink_mkdir_rmdir", t_truncate_unlink_mkdir_rmdir),
    ("rename", t_rename),
    ("large_copies_in_parts", t_large_copies_in_parts),
    ("rename_dir_bound", t_rename_dir_bound),
    ("names_the_backend_refuses", t_names_the_backend_refuses),
    ("attrs_and_unsupported", t_attrs_and_unsupported),
    ("posix_differences", t_posix_differences),
    ("fsync_and_close_survive_kill9", t_fsync_and_close_survive_kill9),
    ("sigterm_does_not_commit_an_unclosed_file", t_sigterm_does_not_commit_an_unclosed_file),
    ("crash_rounds", t_crash_rounds),
    ("multipart_resumes_after_kill9", t_multipart_resumes_after_kill9),
    ("rewrites_coalesce", t_rewrites_coalesce),
    ("edited_files_wait", t_edited_files_wait),
    ("temporary_names_wait", t_temporary_names_wait),
    ("rewrite_during_upload", t_rewrite_during_upload),
    ("server_down_retries_then_uploads", t_server_down_retries_then_uploads),
    ("sync_mode", t_sync_mode),
    ("upload_xattr", t_upload_xattr),
    ("sync_close_reports_upload_error", t_sync_close_reports_upload_error),
    ("max_retries_gives_up", t_max_retries_gives_up),
    ("staging_full_enospc", t_staging_full_enospc),
    ("staging_full_parallel_writers", t_staging_full_parallel_writers),
    ("umount_reports_leftovers", t_umount_reports_leftovers),
    ("listing_hides_deleted_until_done", t_listing_hides_deleted_until_done),
    ("mode_off_is_read_only", t_mode_off_is_read_only),
    ("parallel_writers", t_parallel_writers),
    ("sequential_checkpoint", t_sequential_checkpoint),
    ("random_small_writes", t_random_small_writes),
    ("reopen_while_uploading", t_reopen_while_uploading),
    ("thousands_of_small_files", t_thousands_of_small_files),
    ("readers_during_writeback", t_readers_during_writeback),
    ("reference_model", t_reference_model),
    ("reference_model_racing_uploads", t_reference_model_racing_uploads),
    ("unlinked_handle_stays_usable", t_unlinked_handle_stays_usable),
    ("open_reader_sees_later_writes", t_open_reader_sees_later_writes),
    ("unlinked_reader_sees_appends", t_unlinked_reader_sees_appends),
    ("emptied_directory_stays", t_emptied_directory_stays),
    ("name_reused_across_types", t_name_reused_across_types),
    ("directory_of_staged_file_stays", t_directory_of_staged_file_stays),
    ("local_crash_leaves_no_temp_files", t_local_crash_leaves_no_temp_files),
    ("rewrites_leave_no_multipart_upload", t_rewrites_leave_no_multipart_upload),
    ("umount_waits_for_the_daemon", t_umount_waits_for_the_daemon),
    ("streamed_checkpoint", t_streamed_checkpoint),
    ("stream_cancelled_by_other_changes", t_stream_cancelled_by_other_changes),
    ("stream_killed_leaves_no_upload", t_stream_killed_leaves_no_upload),
]


def main():
    def add_args(ap):
        ap.add_argument("--seed", type=int,
                        help="seed of the randomized tests (default: a random one, printed)")
        ap.add_argument("--ops", type=int, help="operations of the reference-model tests")

    def setup(ctx, args):
        ctx.seed, ctx.ops = args.seed, args.ops

    return run_suite("write", TESTS, add_args, setup)

if __name__ == "__main__":
    sys.exit(main())
