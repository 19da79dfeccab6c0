#!/usr/bin/env python3
"""test_robust.py - damage, limits and hostile names (issue 7, sections 3, 6
and 7) through a real FUSE mount.

    test_robust.py TIERFS --backend local|moto [--only NAME] [--extended]

Uses the harness of test_mount.py (Bucket, Mount, Ctx, poll, data_for).
Section 3 damages the SSD tier (data files and the LMDB index) with the
daemon stopped or running and checks that every kind of damage is found,
fetched again from the bucket (the GET count rises) and never served: every
read is compared byte for byte.  Section 6 holds 10,000 files open, lists a
directory of 20k entries (200k with --extended), reads a 50 GiB sparse
object and checks statfs; 64 concurrent readers are test_mount.py's
rss_bound_64_readers.  Section 7 feeds hostile keys and checks that the
cache directory holds only hash-named files, that nothing aliases, and the
permissions (cache files, allow_other, default_permissions), and that
symlinks in a local bucket pointing out of it are never followed by the
daemon: shown with their target as body, and no key through one is
written (issue 16, section 2, and issue 18:
local_symlink_not_followed_on_read/_on_write).  The
credentials-file mode check is unit-tested in tests/unit/test_s3_creds.c
(group_readable_file_is_refused); credentials_file_mode_checked here only
checks that a refused file stops the mount.

Prints one line per test and ends with "robust: N passed, N failed".
"""
import contextlib
import errno
import glob
import hashlib
import os
import random
import re
import resource
import shutil
import stat
import subprocess
import sys
import threading
import time
import unicodedata
from concurrent.futures import ThreadPoolExecutor

from test_mount import assert_rss, data_for, poll, read, rss_anon, run_suite
from test_write import bucket_get, kill9, write

MIB = 1 << 20
GIB = 1 << 30
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


# ---------------------------------------------------------------- helpers

def sha(key):
    return hashlib.sha256(key.encode()).hexdigest()


def cache_root(m):
    """<ssd.dir>/<16 hex>: the directory of this mount's source."""
    subs = [d for d in os.listdir(m.cache) if re.fullmatch(r"[0-9a-f]{16}", d)]
    assert len(subs) == 1, "expected one source directory in %s, found %s" % (m.cache, os.listdir(m.cache))
    return os.path.join(m.cache, subs[0])


def data_file(m, key):
    """The SSD tier's data file of `key`: data/XX/<SHA-256 of the key>."""
    h = sha(key)
    return os.path.join(cache_root(m), "data", h[:2], h)


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def stop(m):
    """Unmount and wait until the daemon has exited: its teardown still
    writes the index after the mount is gone, and damaging the index
    before that would race with it."""
    pid = m.pid()
    m.umount()
    poll(lambda: not alive(pid), 30, "the daemon (pid %d) to exit after umount" % pid)


def log_text(m):
    try:
        with open(m.logfile, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def mount_or_explain(m, what):
    """Mount; on failure say which damage the daemon did not survive."""
    try:
        m.mount()
    except AssertionError as e:
        raise AssertionError("%s: the daemon did not come up: %s" % (what, str(e)[:1500]))
    return m


def drop_page_cache(path):
    """Drop the kernel's cached pages of a file in the mount, so the next
    read reaches the daemon."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def gets_during(m, fn):
    g0 = m.gets()
    fn()
    return m.gets() - g0


def check_exact(m, files, keys=None):
    """Read every key through the mount; return the keys that differ."""
    bad = []
    for k in (keys if keys is not None else files):
        try:
            got = read(os.path.join(m.mnt, k))
        except OSError as e:
            bad.append("%s: %s" % (k, e))
            continue
        if got != files[k]:
            bad.append("%s: %d bytes read, %d expected, first difference at %s" % (
                k, len(got), len(files[k]), next((i for i, (a, b) in enumerate(zip(got, files[k])) if a != b),
                                                 min(len(got), len(files[k])))))
    return bad


def put_many(bucket, items, threads=16):
    """PUT {key: bytes} in parallel (moto is slow one at a time)."""
    items = list(items.items())
    if bucket.kind == "local":
        for k, v in items:  # Bucket.put's temporary name would exceed NAME_MAX for long names
            path = os.path.join(bucket.root, k)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            tmp = os.path.join(os.path.dirname(path), ".put-tmp")
            with open(tmp, "wb") as f:
                f.write(v)
            os.rename(tmp, path)
        return
    with ThreadPoolExecutor(threads) as ex:
        list(ex.map(lambda kv: bucket.put(*kv), items))


@contextlib.contextmanager
def nofile(soft):
    """RLIMIT_NOFILE soft limit `soft` for this process (and what it
    starts) inside the block."""
    old = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, old[1]), old[1]))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, old)


def dataset(bucket, n, sizes, prefix="ds"):
    rnd = random.Random(n)
    files = {}
    for i in range(n):
        k = "%s/f%03d.bin" % (prefix, i)
        files[k] = data_for(k, sizes[i] if i < len(sizes) else rnd.randrange(1, 2 * MIB))
    put_many(bucket, files)
    return files


def disk_usage(root):
    """Bytes allocated under root (st_blocks), and the largest apparent size."""
    used = biggest = 0
    for r, ds, names in os.walk(root):
        for nm in names:
            try:
                st = os.lstat(os.path.join(r, nm))
            except FileNotFoundError:
                continue
            used += st.st_blocks * 512
            biggest = max(biggest, st.st_size)
    return used, biggest


# ------------------------------------------------- section 3: corruption

BS = MIB  # cache.block_size in the harness config


def flip(path, offsets):
    with open(path, "r+b") as f:
        for off in offsets:
            f.seek(off)
            b = f.read(1)
            f.seek(off)
            f.write(bytes([b[0] ^ 0x5A]))


def t_corrupt_data_files_offline(ctx):
    """Damage data files of a warm SSD tier with the daemon stopped: each
    kind is found on the next read, fetched again, and never served."""
    big = 3 * BS + 4321  # four blocks, the last one short
    # Read in this order.  The "dropped the cached copy" warning is rate
    # limited (10 lines per 10 s), so the objects whose reason the log is
    # checked for come first and are small: one line each.
    names = ["symlink", "deleted", "small_flip", "trunc_mid", "control", "trunc_zero", "deleted_big", "flipped",
             "flip_last", "swap_a", "swap_b", "symlink_big", "directory", "grown"]
    small = {"symlink", "deleted", "small_flip"}
    files = {}
    for nm in names:
        k = "dmg/%s.bin" % nm
        files[k] = data_for(k, 5000 if nm in small else big)
    put_many(ctx.bucket, files)
    m = ctx.mount("dmg")
    m.mount()
    try:
        assert not check_exact(m, files)
        # The SSD tier writes a reader's blocks in the background
        # (ssd.fill_queue): wait for every data file.
        poll(lambda: all(os.path.exists(data_file(m, k)) for k in files), 20,
             "the data files to be written")
        for k in files:
            assert os.path.exists(data_file(m, k)), "no data file %s for '%s' (key -> cache file mapping)" % (
                data_file(m, k), k)
    finally:
        stop(m)

    df = {k.split("/")[1][:-4]: data_file(m, k) for k in files}
    os.truncate(df["trunc_mid"], BS + BS // 2)          # block 1 short, blocks 2-3 gone
    os.truncate(df["trunc_zero"], 0)                    # every block gone
    os.unlink(df["deleted"])                            # the file is missing
    os.unlink(df["deleted_big"])
    flip(df["flipped"], [BS + 12345])                   # one bit pattern in block 1
    flip(df["flip_last"], [big - 1])                    # the last byte of the short block
    flip(df["small_flip"], [0, 4999])                   # a one-block object
    tmp = df["swap_a"] + ".tmp"                         # two objects' files exchanged
    os.rename(df["swap_a"], tmp)
    os.rename(df["swap_b"], df["swap_a"])
    os.rename(tmp, df["swap_b"])
    for nm in ("symlink", "symlink_big"):               # a symlink to another object's file
        os.unlink(df[nm])
        os.symlink(df["control"], df[nm])
    os.unlink(df["directory"])                          # a directory instead of a file
    os.mkdir(df["directory"], 0o700)
    with open(df["grown"], "ab") as f:                  # bytes appended: cached blocks intact
        f.write(b"x" * 1000)
    control_before = read(df["control"])

    mount_or_explain(m, "damaged data files")
    try:
        corrupt0 = m.stats()["ssd"]["corrupt"]
        per_key = {}
        for k in files:
            bad = []
            per_key[k] = gets_during(m, lambda: bad.extend(check_exact(m, files, [k])))
            assert not bad, "served wrong bytes: %s" % bad
        intact = {"dmg/control.bin", "dmg/grown.bin"}
        for k, n in per_key.items():
            if k in intact:
                assert n == 0, "'%s' was intact in the SSD tier but was fetched again (%d GETs)" % (k, n)
            else:
                assert n >= 1, "'%s' was damaged but not fetched again (%d GETs): served from a damaged cache?" % (k, n)
        st = m.stats()["ssd"]
        # Every damaged object has at least one block whose bytes fail
        # verification (a symlink cannot be opened: O_NOFOLLOW; a directory
        # cannot be read).
        assert st["corrupt"] - corrupt0 >= len(files) - len(intact), \
            "ssd.corrupt rose by %d for %d damaged objects" % (st["corrupt"] - corrupt0, len(files) - len(intact))
        log = log_text(m)
        for why in ("checksum mismatch", "short data file", "data file missing", "read error"):
            assert why in log, "no '%s' in the log:\n%s" % (why, m.log_tail())
        assert read(df["control"]) == control_before, "the symlink's target was written through"
        # Random reads across block boundaries of a damaged-then-refetched object.
        k = "dmg/flipped.bin"
        with open(os.path.join(m.mnt, k), "rb", buffering=0) as f:
            for off in (0, BS - 1, BS, 2 * BS - 7, 3 * BS, big - 1):
                assert os.pread(f.fileno(), 4096, off) == files[k][off:off + 4096], "pread at %d" % off
    finally:
        stop(m)
    # Repaired: a third mount serves everything from the SSD tier, but the
    # objects whose data path is not a regular file (symlinks, directory):
    # they cannot be cached and are fetched each time.
    m.mount()
    try:
        bad = []
        n = gets_during(m, lambda: bad.extend(check_exact(m, files)))
        assert not bad, "wrong bytes after the repair: %s" % bad
        assert n <= 1 + 4 + 4, "after the refetch the tier was not repaired: %d GETs on a warm mount" % n
    finally:
        m.umount()


def t_corrupt_data_files_live(ctx):
    """Damage data files while the daemon runs (the blocks are no longer
    in the RAM tier): found, fetched again, never served."""
    big = 3 * BS + 777
    files = {"live/%s.bin" % nm: data_for("live/" + nm, big) for nm in ("trunc", "flip", "gone", "swap")}
    filler = {"live/filler%d.bin" % i: data_for("filler%d" % i, 8 * BS) for i in range(4)}
    put_many(ctx.bucket, dict(files, **filler))
    m = ctx.mount("live", {"ram": {"size": "16M"}, "cache": {"policy": "lru"}}).mount()
    try:
        assert not check_exact(m, files)
        # Push the targets out of the 16 MiB RAM tier.
        assert not check_exact(m, filler)
        df = {k: data_file(m, k) for k in files}
        # The SSD tier writes a reader's blocks in the background.
        poll(lambda: all(os.path.exists(p) for p in df.values()), 20, "the data files")
        os.truncate(df["live/trunc.bin"], BS // 3)
        flip(df["live/flip.bin"], [2 * BS + 5])
        os.unlink(df["live/gone.bin"])
        with open(df["live/swap.bin"], "r+b") as f:  # another object's bytes in its place
            f.write(data_for("other", big))
        for k in files:
            drop_page_cache(os.path.join(m.mnt, k))
        c0 = m.stats()["ssd"]["corrupt"]
        for k in files:
            bad = []
            n = gets_during(m, lambda: bad.extend(check_exact(m, files, [k])))
            assert not bad, "served wrong bytes: %s" % bad
            assert n >= 1, "'%s' damaged under a running daemon but not fetched again" % k
        c1 = m.stats()["ssd"]["corrupt"]
        assert c1 - c0 >= len(files), "ssd.corrupt rose by %d for %d damaged objects" % (c1 - c0, len(files))
        assert not m.stats()["ssd"]["disabled"], "damaged data files disabled the whole tier"
        # And the refetched blocks are cached again: a second pass (out of
        # RAM once more) makes no GET.
        assert not check_exact(m, filler)
        for k in files:
            drop_page_cache(os.path.join(m.mnt, k))
        bad = []
        n = gets_during(m, lambda: bad.extend(check_exact(m, files)))
        assert not bad, bad
        assert n == 0, "refetched blocks were not cached again (%d GETs)" % n
        # Those hits came off the disk with O_DIRECT (ssd.direct_io), verified
        # all the same.
        d = m.stats()["ssd"]["direct_read_bytes"]
        assert d >= len(files) * big, "only %d bytes of hits read with O_DIRECT" % d
    finally:
        m.umount()


# Damage to the LMDB index (data.mdb, lock.mdb, index/).  Each kind is
# applied to a pristine copy of a warm cache, with the daemon stopped.

def _meta_pages(path):
    """(page size, index of the newer meta page, main DB root pgno, last pgno)."""
    with open(path, "rb") as f:
        head = f.read(2 * 65536)
    # Page header 16 bytes; MDB_meta: magic u32, version u32, address u64,
    # mapsize u64, dbs[2] of 48 bytes (root at +40), last_pg u64, txnid u64.
    psize = 4096
    for cand in (4096, 8192, 16384, 65536):
        if int.from_bytes(head[cand + 16:cand + 20], "little") == 0xBEEFC0DE:
            psize = cand
            break
    best = None
    for i in (0, 1):
        base = i * psize + 16
        txnid = int.from_bytes(head[base + 24 + 96 + 8:base + 24 + 96 + 16], "little")
        root = int.from_bytes(head[base + 24 + 48 + 40:base + 24 + 48 + 48], "little")
        last = int.from_bytes(head[base + 24 + 96:base + 24 + 104], "little")
        if best is None or txnid > best[0]:
            best = (txnid, i, root, last)
    return psize, best[1], best[2], best[3]


def _garbage(path, offset, n, seed):
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(random.Random(seed).randbytes(n))


def _damage_index(kind, index):
    dm = os.path.join(index, "data.mdb")
    size = os.path.getsize(dm)
    psize, newer, _, _ = _meta_pages(dm)
    if kind == "meta_pages_garbage":
        _garbage(dm, 0, 2 * psize, 1)
    elif kind == "newer_meta_page_garbage":
        _garbage(dm, newer * psize, psize, 2)
    elif kind == "data_pages_zeroed":
        with open(dm, "r+b") as f:
            f.seek(2 * psize)
            f.write(bytes(size - 2 * psize))
    elif kind == "truncated":
        os.truncate(dm, 3 * psize)
    elif kind == "emptied":
        os.truncate(dm, 0)
    elif kind == "lock_file_garbage":
        _garbage(os.path.join(index, "lock.mdb"), 0, 8192, 4)
    elif kind == "index_deleted":
        shutil.rmtree(index)
    else:
        raise ValueError(kind)


# kind -> the log line that must say what happened (None: a missing or
# empty index is no damage, and the sweep of the data files it no longer
# describes reports it; a scribbled lock file is rebuilt by LMDB).
INDEX_DAMAGE = {
    "meta_pages_garbage": "is damaged",
    "newer_meta_page_garbage": "is damaged",
    "data_pages_zeroed": "is damaged",
    "truncated": "is damaged",
    "emptied": None,
    "lock_file_garbage": None,
    "index_deleted": None,
}


def _warm_cache(ctx, name, files):
    m = ctx.mount(name).mount()
    try:
        assert not check_exact(m, files)
    finally:
        stop(m)
    return m


def _restore(m, pristine):
    shutil.rmtree(m.cache)
    shutil.copytree(pristine, m.cache, symlinks=True)


def t_damaged_index_offline(ctx):
    """Each kind of damage to the index: the daemon comes up, says so in
    the log, moves a damaged index aside, refetches, serves exact bytes;
    and the next mount is warm again."""
    files = dataset(ctx.bucket, 24, [0, 1, BS, BS + 1, 3 * BS + 5])
    m = _warm_cache(ctx, "idx", files)
    pristine = os.path.join(ctx.work, "pristine-idx")
    shutil.copytree(m.cache, pristine, symlinks=True)
    failures = []
    for kind, line in INDEX_DAMAGE.items():
        _restore(m, pristine)
        index = os.path.join(cache_root(m), "index")
        _damage_index(kind, index)
        open(m.logfile, "w").close()
        try:
            mount_or_explain(m, "index damage '%s'" % kind)
        except AssertionError as e:
            failures.append(str(e))
            continue
        try:
            bad = []
            n = gets_during(m, lambda: bad.extend(check_exact(m, files)))
            if bad:
                failures.append("%s: wrong bytes served: %s" % (kind, bad[:3]))
            nonempty = sum(1 for v in files.values() if v)
            if kind == "lock_file_garbage":
                # LMDB rebuilds the lock file when it is the only user: the
                # index itself is intact and the cache stays warm.
                if n:
                    failures.append("%s: %d GETs: an intact index was thrown away" % (kind, n))
            elif n < nonempty:
                failures.append("%s: only %d GETs for %d objects: served from a damaged index?" % (kind, n, nonempty))
            log = log_text(m)
            if line and line not in log:
                failures.append("%s: no '%s' line in the log:\n%s" % (kind, line, log[-2000:]))
            if line == "is damaged":
                moved = glob.glob(os.path.join(index, "corrupt-*", "data.mdb"))
                if not moved:
                    failures.append("%s: the damaged index was not moved aside to index/corrupt-*/" % kind)
            if kind in ("index_deleted", "emptied"):
                if "data files that had no index record" not in log and \
                        not poll_log(m, "data files that had no index record"):
                    failures.append("%s: the unindexed data files were not reported as swept" % kind)
        finally:
            stop(m)
        # The rebuilt index works: a warm remount makes no GET.
        try:
            m.mount()
            bad = []
            n = gets_during(m, lambda: bad.extend(check_exact(m, files)))
            if bad or n:
                failures.append("%s: after the rebuild, %d GETs on a warm remount, wrong: %s" % (kind, n, bad[:3]))
        except AssertionError as e:
            failures.append("%s: remount after the rebuild failed: %s" % (kind, e))
        finally:
            if os.path.ismount(m.mnt):
                stop(m)
    assert not failures, "\n".join(failures)


def poll_log(m, text, timeout=10):
    try:
        poll(lambda: text in log_text(m), timeout, "'%s' in the log" % text)
        return True
    except AssertionError:
        return False


def t_index_page_faults(ctx):
    """Garbage over each page of data.mdb in turn (the daemon stopped): the
    daemon must come up every time and serve exact bytes.  LMDB has no
    page checksums, so this is what a torn or scribbled page looks like."""
    files = dataset(ctx.bucket, 40, [0, 1, BS, 2 * BS + 3])
    m = _warm_cache(ctx, "pages", files)
    pristine = os.path.join(ctx.work, "pristine-pages")
    shutil.copytree(m.cache, pristine, symlinks=True)
    dm0 = os.path.join(pristine, os.path.basename(cache_root(m)), "index", "data.mdb")
    psize = _meta_pages(dm0)[0]
    npages = os.path.getsize(dm0) // psize
    seeds = range(2 if ctx.extended else 1)
    crashed, wrong = [], []
    rounds = 0
    for seed in seeds:
        for pg in range(2, npages):
            _restore(m, pristine)
            dm = os.path.join(cache_root(m), "index", "data.mdb")
            _garbage(dm, pg * psize, psize, 1000 * seed + pg)
            rounds += 1
            try:
                m.mount()
            except AssertionError as e:
                crashed.append("page %d (seed %d): %s" % (pg, seed, str(e).splitlines()[0][:200]))
                subprocess.run(["fusermount3", "-uz", m.mnt], capture_output=True)
                continue
            try:
                bad = check_exact(m, files)
                if bad:
                    wrong.append("page %d (seed %d): %s" % (pg, seed, bad[:2]))
                ls = sorted(os.listdir(os.path.join(m.mnt, "ds")))
                if ls != sorted(k.split("/")[1] for k in files):
                    wrong.append("page %d (seed %d): listing differs" % (pg, seed))
            except OSError as e:
                wrong.append("page %d (seed %d): %s" % (pg, seed, e))
            finally:
                try:
                    stop(m)
                except AssertionError as e:  # the daemon died at unmount
                    crashed.append("page %d (seed %d) at unmount: %s" % (pg, seed, e))
    print("    %d pages of %d bytes, %d rounds: %d crashed, %d served wrong or failed" % (
        npages, psize, rounds, len(crashed), len(wrong)))
    assert not wrong, "wrong bytes or errors with a damaged index page:\n" + "\n".join(wrong)
    assert not crashed, ("the daemon died on %d of %d single-page damages of data.mdb (LMDB follows "
                         "garbage pointers; see the report):\n" % (len(crashed), rounds)) + "\n".join(crashed)


def t_damaged_index_live(ctx):
    """The index is zeroed under a running daemon (blocks no longer in
    RAM): reads stay exact and keep working from the healthy bucket (the
    SSD tier passes them through and says so), and a restart rebuilds the
    index."""
    files = dataset(ctx.bucket, 12, [BS + 9, 3 * BS])
    filler = {"fill/%d.bin" % i: data_for("fill%d" % i, 8 * BS) for i in range(3)}
    put_many(ctx.bucket, filler)
    m = ctx.mount("live-idx", {"ram": {"size": "16M"}, "cache": {"policy": "lru"}}).mount()
    failures = []
    try:
        assert not check_exact(m, files)
        assert not check_exact(m, filler)
        for k in files:
            drop_page_cache(os.path.join(m.mnt, k))
        dm = os.path.join(cache_root(m), "index", "data.mdb")
        psize, _, _, _ = _meta_pages(dm)
        with open(dm, "r+b") as f:
            f.seek(2 * psize)
            f.write(bytes(os.path.getsize(dm) - 2 * psize))
        bad = check_exact(m, files)
        if bad:
            failures.append("with the index zeroed under the running daemon, %d of %d reads failed or "
                            "differ although the bucket is healthy: %s" % (len(bad), len(files), bad[:2]))
        if not poll_log(m, "the cache index is damaged", 5):
            failures.append("no log line saying the SSD tier stopped using the damaged index")
        if not m.stats()["ssd"]["disabled"]:
            failures.append("the SSD tier still uses the damaged index (ssd.disabled is false)")
        lines = [l for l in log_text(m).splitlines() if "[error]" in l or "[warn]" in l]
        if failures:
            failures.append("daemon log:\n" + "\n".join(lines[:12]))
    finally:
        stop(m)
    open(m.logfile, "w").close()
    mount_or_explain(m, "restart after the index was damaged at run time")
    try:
        bad = []
        gets_during(m, lambda: bad.extend(check_exact(m, files)))
        if bad:
            failures.append("after a restart: %s" % bad[:3])
        log = log_text(m)
        if "is damaged" not in log and "unreadable" not in log:
            failures.append("the restart did not report the damaged index:\n" + log)
        if m.stats()["ssd"]["disabled"]:
            failures.append("the SSD tier is still disabled after a restart")
    finally:
        stop(m)
    assert not failures, "\n".join(failures)


def t_staged_data_survives_index_loss(ctx):
    """Dirty staged files whose journal is lost with a damaged index end
    up in <cache>/lost+found, byte-exact, with a warning: never deleted.
    Twice, and from two daemons sharing the cache: nothing rescued before
    is overwritten."""
    slow = {"writeback": {"delay": "60s"}}
    cache = os.path.join(ctx.work, "node-cache")
    a = ctx.mount("lf-a", dict(slow, ssd={"dir": cache, "size": "1G"}))
    b = ctx.mount("lf-b", dict(slow, ssd={"dir": cache, "size": "1G"}))
    a.cache = b.cache = cache
    want = []
    for rnd, kind in enumerate(["meta_pages_garbage", "index_deleted"]):
        a.mount()
        b.mount()
        for m, who in ((a, "a"), (b, "b")):
            small = b"round %d pod %s\n" % (rnd, who.encode())
            write(os.path.join(m.mnt, "new-%d-%s.txt" % (rnd, who)), small, fsync=True)
            want.append(small)
            # A new file still open (never closed) when the daemon dies.
            fd = os.open(os.path.join(m.mnt, "open-%d-%s.bin" % (rnd, who)), os.O_WRONLY | os.O_CREAT, 0o644)
            big = data_for("big%d%s" % (rnd, who), 3 * MIB + 11)
            assert os.write(fd, big) == len(big)
            want.append(big)
            kill9(m)
            with contextlib.suppress(OSError):
                os.close(fd)
        index = os.path.join(cache_root(a), "index")
        _damage_index(kind, index)
        for m in (a, b):
            open(m.logfile, "w").close()
            mount_or_explain(m, "remount after '%s' with staged data" % kind)
        root = cache_root(a)
        lost = os.path.join(root, "lost+found")
        got = {}
        for nm in (os.listdir(lost) if os.path.isdir(lost) else []):
            got[nm] = read(os.path.join(lost, nm))
        for i, data in enumerate(want):
            assert data in got.values(), (
                "round %d ('%s'): staged file #%d (%d bytes) is not in %s any more; lost+found holds %s" % (
                    rnd, kind, i, len(data), lost, {k: len(v) for k, v in got.items()}))
        st = os.stat(lost)
        assert stat.S_IMODE(st.st_mode) == 0o700, oct(st.st_mode)
        for nm in got:
            assert stat.S_IMODE(os.stat(os.path.join(lost, nm)).st_mode) == 0o600, nm
        for m in (a, b):
            assert "moved to %s" % lost in log_text(m) or "lost+found" in log_text(m), \
                "no warning about lost+found in the log:\n" + m.log_tail()
        # The staging directories no longer hold them, and the bucket never
        # got them (writeback.delay = 60s): lost+found has the only copy.
        left = [p for p in glob.glob(os.path.join(root, "staging", "*", "*")) if os.path.getsize(p)]
        assert not left, "staged files neither journalled nor moved: %s" % left
        for who in "ab":
            assert bucket_get(ctx.bucket, "new-%d-%s.txt" % (rnd, who)) is None
        for m in (a, b):
            stop(m)


# ----------------------------------------------------- section 6: limits

def t_ten_thousand_open_files(ctx):
    """10,000 files open at once through the mount, read byte-exact while
    all are open; then 2,000 (10k with --extended) held open for writing,
    each of which keeps its staged file open in the daemon.  The daemon is
    started with the usual soft limit of 1024 open files."""
    # moto takes minutes to create and serve 10k objects: 1,500 there
    # (still above the daemon's soft limit), 10k with --extended.
    n = 10_000 if (ctx.bucket.kind == "local" or ctx.extended) else 1_500
    files = {"many/f%05d" % i: data_for("many%d" % i, 64 + i % 200) for i in range(n)}
    t0 = time.monotonic()
    put_many(ctx.bucket, files, threads=32)
    print("    %d objects in the bucket in %.1fs" % (n, time.monotonic() - t0))
    m = ctx.mount("many", {"ram": {"size": "64M"}})
    with nofile(1024):
        m.mount()
    try:
        pid = m.pid()
        with open("/proc/%d/limits" % pid) as f:
            lim = [l for l in f if l.startswith("Max open files")][0].split()
        print("    daemon started with a soft limit of 1024 open files; now soft %s hard %s" % (lim[3], lim[4]))
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        assert hard >= n + 200, "the hard limit %d is below %d: cannot run this test" % (hard, n + 200)
        with nofile(n + 200):
            fds = {}
            try:
                for k in files:
                    fds[k] = os.open(os.path.join(m.mnt, k), os.O_RDONLY)
                dfd = len(os.listdir("/proc/%d/fd" % pid))
                print("    %d files open; the daemon holds %d descriptors" % (len(fds), dfd))
                keys = list(files)
                random.Random(7).shuffle(keys)
                for k in keys:
                    got = os.pread(fds[k], 4096, 0)
                    assert got == files[k], "'%s' differs with %d files open" % (k, len(fds))
            finally:
                for fd in fds.values():
                    os.close(fd)
        assert m.stats()["fuse"]["open"]["errors"] == 0
    finally:
        m.umount()
    if ctx.bucket.kind != "local":
        return
    # Writers: files held open for writing keep a staged file open each.
    nw = 10_000 if ctx.extended else 2_000
    m = ctx.mount("many-w", {"writeback": {"delay": "0s"}})
    with nofile(1024):
        m.mount()
    try:
        with nofile(nw + 200):
            fds = []
            err = None
            try:
                for i in range(nw):
                    fds.append(os.open(os.path.join(m.mnt, "w%05d" % i), os.O_WRONLY | os.O_CREAT, 0o644))
                    os.write(fds[-1], b"file %d\n" % i)
            except OSError as e:
                err = e
            finally:
                for fd in fds:
                    os.close(fd)
            assert err is None, ("creating file %d of %d for writing failed: %s (the daemon runs with a soft "
                                 "limit of 1024 open files and keeps one descriptor per file open for "
                                 "writing)\n%s" % (len(fds), nw, err, m.log_tail()))
        for i in random.Random(1).sample(range(nw), 50):
            assert read(os.path.join(m.mnt, "w%05d" % i)) == b"file %d\n" % i
    finally:
        m.umount()


def t_big_directory_listing(ctx):
    """20k entries in one directory (200k with --extended): the listing is
    complete, without duplicates, in order, and memory stays bounded."""
    if ctx.bucket.kind != "local":
        return "skip"  # 20k PUTs to moto take minutes; the listing code is shared
    n = 200_000 if ctx.extended else 20_000
    d = os.path.join(ctx.bucket.root, "big")
    os.makedirs(d)
    names = ["e%07d-%s" % (i, "x" * (i % 40)) for i in range(n)]
    for nm in names:
        os.close(os.open(os.path.join(d, nm), os.O_CREAT | os.O_WRONLY, 0o644))
    m = ctx.mount("bigdir", {"ram": {"size": "32M"}}).mount()
    try:
        pid = m.pid()
        peak = [0]
        stop_ev = threading.Event()

        def sampler():
            while not stop_ev.is_set():
                peak[0] = max(peak[0], rss_anon(pid))
                time.sleep(0.02)
        s = threading.Thread(target=sampler)
        s.start()
        try:
            t0 = time.monotonic()
            got = os.listdir(os.path.join(m.mnt, "big"))
            dt = time.monotonic() - t0
            # A reader that stops and restarts at offsets (small getdents buffers).
            ls = subprocess.run(["ls", "-f", os.path.join(m.mnt, "big")], capture_output=True, text=True)
            again = os.listdir(os.path.join(m.mnt, "big"))
        finally:
            stop_ev.set()
            s.join()
        peak[0] = max(peak[0], rss_anon(pid))
        print("    %d entries listed in %.1fs; daemon RssAnon peak %.1f MiB" % (len(got), dt, peak[0] / MIB))
        assert len(got) == n, "listed %d of %d entries" % (len(got), n)
        assert len(set(got)) == n, "duplicate entries"
        assert set(got) == set(names), "entries differ"
        assert got == sorted(got), "the listing is not in name order"
        assert sorted(ls.stdout.split("\n")[:-1]) == sorted(names + [".", ".."]), "ls -f differs"
        assert again == got
        assert_rss(ctx, peak[0], 32 * MIB + 64 * MIB, "RssAnon peak (ram.size + 64 MiB)")
        for nm in random.Random(3).sample(names, 20):
            assert os.stat(os.path.join(m.mnt, "big", nm)).st_size == 0
    finally:
        m.umount()


def t_fifty_gib_sparse_object(ctx):
    """A 50 GiB object (a sparse file in the local backend): random reads
    near the start, the middle and the end are exact, stat is right, and
    nothing allocates anything like 50 GiB."""
    if ctx.bucket.kind != "local":
        return "skip"  # simulated by the local backend with a sparse file
    size = 50 * GIB
    path = os.path.join(ctx.bucket.root, "huge", "50g.bin")
    os.makedirs(os.path.dirname(path))
    regions = []  # (offset, bytes): everything else is zeros
    for i, off in enumerate([0, 25 * GIB - 3 * MIB - 777, size - 5 * MIB - 4321]):
        regions.append((off, random.Random(i).randbytes(4 * MIB + 12345 if i < 2 else 5 * MIB + 4321)))
    with open(path, "wb") as f:
        f.truncate(size)
        for off, data in regions:
            f.seek(off)
            f.write(data)
    assert regions[-1][0] + len(regions[-1][1]) == size

    def expect(off, ln):
        ln = max(0, min(ln, size - off))
        out = bytearray(ln)
        for roff, data in regions:
            a, b = max(off, roff), min(off + ln, roff + len(data))
            if a < b:
                out[a - off:b - off] = data[a - roff:b - roff]
        return bytes(out)

    m = ctx.mount("huge", {"ram": {"size": "32M"}}).mount()
    try:
        p = os.path.join(m.mnt, "huge", "50g.bin")
        assert os.stat(p).st_size == size, os.stat(p).st_size
        rnd = random.Random(50)
        pid = m.pid()
        peak = 0
        with open(p, "rb", buffering=0) as f:
            fd = f.fileno()
            probes = [(0, 1), (size - 1, 1), (size - 4096, 8192), (size, 10), (25 * GIB, 1 * MIB)]
            for centre in (0, 25 * GIB, size):
                for _ in range(40):
                    off = max(0, min(size - 1, centre + rnd.randrange(-48 * MIB, 48 * MIB)))
                    probes.append((off, rnd.choice([1, 4096, 65536, MIB + 17, 2 * MIB])))
            for off, ln in probes:
                got = os.pread(fd, ln, off)
                assert got == expect(off, ln), "read of %d bytes at %d differs (got %d bytes)" % (ln, off, len(got))
                peak = max(peak, rss_anon(pid))
            # A sequential stretch across the middle region.
            f.seek(25 * GIB - 8 * MIB)
            for i in range(16):
                off = 25 * GIB - 8 * MIB + i * MIB
                assert f.read(MIB) == expect(off, MIB), "sequential read at %d differs" % off
        peak = max(peak, rss_anon(pid))
        used, biggest = disk_usage(m.cache)
        print("    %d probes; cache dir allocates %.1f MiB (largest file %.1f GiB apparent); daemon RssAnon "
              "peak %.1f MiB" % (len(probes), used / MIB, biggest / GIB, peak / MIB))
        assert used < 512 * MIB, "the cache dir allocates %.1f MiB for a few MiB of reads" % (used / MIB)
        assert_rss(ctx, peak, 32 * MIB + 64 * MIB, "RssAnon peak")
        bucket_alloc = os.stat(path).st_blocks * 512
        assert bucket_alloc < 64 * MIB, "the bucket's sparse file got allocated (%d bytes)" % bucket_alloc
    finally:
        m.umount()


def t_statfs_sensible(ctx):
    """statfs on the mount: non-zero sizes, free <= total, a sane block
    size, NAME_MAX; the numbers are those of the cache directory's disk."""
    ctx.bucket.put("s.txt", b"s")
    m = ctx.mount("statfs").mount()
    try:
        sv = os.statvfs(m.mnt)
        ref = os.statvfs(m.cache)
        print("    bsize %d frsize %d blocks %d bfree %d bavail %d files %d ffree %d namemax %d" % (
            sv.f_bsize, sv.f_frsize, sv.f_blocks, sv.f_bfree, sv.f_bavail, sv.f_files, sv.f_ffree, sv.f_namemax))
        assert sv.f_bsize >= 512 and sv.f_bsize <= 16 * MIB and sv.f_bsize & (sv.f_bsize - 1) == 0, sv.f_bsize
        assert sv.f_frsize >= 512 and sv.f_frsize & (sv.f_frsize - 1) == 0, sv.f_frsize
        assert sv.f_blocks > 0 and sv.f_files > 0
        assert sv.f_bfree <= sv.f_blocks and sv.f_bavail <= sv.f_bfree, sv
        assert sv.f_ffree <= sv.f_files and sv.f_favail <= sv.f_files, sv
        assert sv.f_namemax == 255, sv.f_namemax
        total, rtotal = sv.f_blocks * sv.f_frsize, ref.f_blocks * ref.f_frsize
        assert abs(total - rtotal) <= rtotal // 100, "total %d, the cache disk has %d" % (total, rtotal)
        df = subprocess.run(["df", "-B1", "--output=size,avail", m.mnt], capture_output=True, text=True)
        assert df.returncode == 0, df.stderr
        size, avail = (int(x) for x in df.stdout.split("\n")[1].split())
        assert size > 0 and 0 <= avail <= size, df.stdout
    finally:
        m.umount()


# --------------------------------------------------- section 7: security

def hostile_keys(bucket):
    """{key: bytes}: names that differ only by case, by Unicode
    normalisation, by escaping, by a trailing space; '..' inside names; the
    longest component (NAME_MAX) and the longest key S3 takes (1024 bytes
    with the bucket prefix); keys shaped like the cache's own file names."""
    keys = [
        "sec/a..b", "sec/..x", "sec/x..", "sec/...", "sec/....", "sec/.hidden", "sec/..%2f..%2fescape",
        "sec/..\\..\\escape", "sec/Case.bin", "sec/case.bin", "sec/CASE.bin", "sec/cAse.bin",
        "sec/" + unicodedata.normalize("NFC", "\u00e9t\u00e9.txt"),
        "sec/" + unicodedata.normalize("NFD", "\u00e9t\u00e9.txt"),
        "sec/a b", "sec/a+b", "sec/a%20b", "sec/a%2Bb", "sec/a%2fb", "sec/trail ", "sec/trail",
        "sec/tab\tname", "sec/semi;colon", "sec/q?uery", "sec/h#sh", "sec/\u20ac" * 1,
        "sec/" + "L" * 255, "sec/" + "L" * 254, "sec/" + "l" * 255, "sec/" + "\u20ac" * 85,
        "sec/data/" + sha("sec/a..b")[:2] + "/" + sha("sec/a..b"),   # a key named like a cache file
        "sec/index/data.mdb", "sec/staging/0000000000000001", "sec/lost+found/0000000000000001",
    ]
    if bucket.kind == "local":
        keys.append("sec/new\nline")  # S3 takes it; moto's HTTP server answers 404
    prefix = len(bucket.prefix) if bucket.kind != "local" else 0
    room = 1024 - prefix - len("sec/long/")
    parts, left = [], room
    while left > 0:  # components of at most 255 bytes joined by '/'
        c = min(255, left)
        if left - c == 1:
            c -= 2
        parts.append(chr(ord("a") + len(parts)) * c)
        left -= c + 1
        if left == 0:
            break
    long_key = "sec/long/" + "/".join(parts)
    long_key = long_key[:1024 - prefix]
    assert len(long_key.encode()) + prefix == 1024, (len(long_key.encode()), prefix)
    keys.append(long_key)
    out = {}
    for i, k in enumerate(keys):
        out[k] = data_for("hostile%d" % i, 1 + (i * 7919) % 20000) + k.encode()
    assert len(out) == len(keys), "duplicate test keys"
    return out


ALLOWED = [
    re.compile(r"[0-9a-f]{16}$"),
    re.compile(r"[0-9a-f]{16}/data(/[0-9a-f]{2}(/[0-9a-f]{64})?|/trash(/[0-9a-f]{64}\.[0-9]+)?)?$"),
    re.compile(r"[0-9a-f]{16}/index(/(data|lock)\.mdb|/corrupt-[0-9TZ-]+(/(data|lock)\.mdb)?)?$"),
    re.compile(r"[0-9a-f]{16}/staging(/[0-9a-f]{16}(/[0-9a-f]{16})?)?$"),
    re.compile(r"[0-9a-f]{16}/lost\+found(/[0-9a-f.+-]+)?$"),
]


def walk_cache(m):
    """Every path under the cache dir (relative), after checking that each
    is a regular file or a directory inside it and has an allowed name."""
    root = os.path.realpath(m.cache)
    rels = []
    for r, ds, names in os.walk(m.cache):
        for nm in ds + names:
            p = os.path.join(r, nm)
            st = os.lstat(p)
            assert stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode), "%s is neither a file nor a directory" % p
            assert os.path.realpath(p).startswith(root + "/"), "%s is outside the cache dir" % p
            rel = os.path.relpath(p, m.cache)
            assert any(a.match(rel) for a in ALLOWED), "unexpected name in the cache dir: %r" % rel
            rels.append(rel)
    return rels


def snapshot(root, skip):
    out = set()
    for r, ds, names in os.walk(root):
        ds[:] = [d for d in ds if os.path.join(r, d) not in skip]
        for nm in names:
            out.add(os.path.join(r, nm))
    return out


def t_hostile_keys(ctx):
    """Hostile keys never escape the cache dir, never alias each other,
    and the cache holds exactly data/XX/<SHA-256 of each key>."""
    b = ctx.bucket
    files = hostile_keys(b)
    put_many(b, files)
    tag = "tierfs-escape-%d" % random.randrange(1 << 30)
    unreachable = {}
    if b.kind != "local":
        # Keys a directory cannot hold: '.' and '..' segments, empty
        # segments.  They must not be reachable as anything else.
        for i, k in enumerate(["sec/../" + tag, "../" + tag, "sec/../../../../../../../tmp/" + tag,
                               "sec/./dot", "sec//empty", "/" + tag, "sec/..", "sec/.", "sec/" + "x" * 256]):
            unreachable[k] = b"unreachable %d" % i
        put_many(b, unreachable)
    m = ctx.mount("hostile")
    skip = {m.cache, m.mnt, b.root if b.kind == "local" else "", b.server_dir or ""}
    before = snapshot(ctx.work, skip)
    m.mount()
    try:
        names = os.listdir(os.path.join(m.mnt, "sec"))
        for bad in (".", "..", ""):
            assert bad not in names, "the listing has an entry %r" % bad
        want_top = sorted({k.split("/")[1] for k in files})
        assert sorted(names) == want_top, "listing of sec/ differs: extra %r missing %r" % (
            sorted(set(names) - set(want_top))[:5], sorted(set(want_top) - set(names))[:5])
        bad = check_exact(m, files)
        assert not bad, "aliased or wrong: %s" % bad[:5]
        for k in files:
            assert os.stat(os.path.join(m.mnt, k)).st_size == len(files[k]), k
        if unreachable:
            assert sorted(os.listdir(m.mnt)) == ["sec"], os.listdir(m.mnt)
    finally:
        stop(m)
    # Warm: every key from its own data file in the SSD tier.
    m.mount()
    try:
        bad = []
        n = gets_during(m, lambda: bad.extend(check_exact(m, files)))
        assert not bad, "aliased in the SSD tier: %s" % bad[:5]
        assert n == 0, "%d GETs on a warm remount" % n
    finally:
        stop(m)
    rels = walk_cache(m)
    data = {os.path.basename(r) for r in rels if re.search(r"/data/[0-9a-f]{2}/[0-9a-f]{64}$", r)}
    want = {sha(k) for k, v in files.items() if v}
    assert data == want, "data files are not exactly SHA-256 of the keys read: extra %s missing %s" % (
        sorted(data - want)[:3], sorted(want - data)[:3])
    after = snapshot(ctx.work, skip)
    assert after - before <= {m.logfile, m.conf}, "files appeared outside the cache dir: %s" % sorted(after - before)
    for p in ("/tmp/" + tag, os.path.join(ctx.work, tag), os.path.join(m.cache, tag)):
        assert not os.path.exists(p), "%s exists: a key escaped" % p


def t_hostile_names_written(ctx):
    """Files created through the mount with hostile names: staged under
    hex names only, uploaded under exactly their names, no aliasing."""
    want = {}
    for i, nm in enumerate(["a..b", "..x", "...", "W.txt", "w.txt", "L" * 255, "\u20ac" * 85, "sp ace ",
                            unicodedata.normalize("NFC", "\u00e9"), unicodedata.normalize("NFD", "\u00e9")]):
        want["wr/" + nm] = data_for("w%d" % i, 100 + 977 * i) + nm.encode()
    m = ctx.mount("hostile-w", {"writeback": {"delay": "60s"}}).mount()
    try:
        os.mkdir(os.path.join(m.mnt, "wr"))
        for k, v in want.items():
            write(os.path.join(m.mnt, k), v)
        walk_cache(m)
        staged = [p for p in glob.glob(os.path.join(cache_root(m), "staging", "*", "*")) if os.path.getsize(p)]
        assert len(staged) == len(want), "%d staged files for %d new files" % (len(staged), len(want))
        assert not check_exact(m, want), "own writes aliased"
        r = subprocess.run([m.tierfs, "flush", m.mnt], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        for k, v in want.items():
            got = bucket_get(ctx.bucket, k)
            assert got == v, "'%s' uploaded as %s" % (k, None if got is None else "%d other bytes" % len(got))
    finally:
        m.umount()


def _modes(m):
    bad = []
    for rel in walk_cache(m):
        st = os.lstat(os.path.join(m.cache, rel))
        want = 0o700 if stat.S_ISDIR(st.st_mode) else 0o600
        if stat.S_IMODE(st.st_mode) != want:
            bad.append("%s %o" % (rel, stat.S_IMODE(st.st_mode)))
        if st.st_uid != os.getuid():
            bad.append("%s owned by %d" % (rel, st.st_uid))
    return bad


def t_cache_file_modes(ctx):
    """Cache files 0600 and directories 0700 (data, index, staging, trash,
    lost+found, a moved-aside index), even with umask 000."""
    files = dataset(ctx.bucket, 8, [BS + 1])
    m = ctx.mount("modes", {"writeback": {"delay": "60s"}})
    old = os.umask(0)
    try:
        m.mount()
    finally:
        os.umask(old)
    try:
        assert not check_exact(m, files)
        write(os.path.join(m.mnt, "staged.bin"), b"x" * 5000)
        bad = _modes(m)
        assert not bad, "modes: %s" % bad
        st = os.stat(m.cache)
        assert stat.S_IMODE(st.st_mode) == 0o700, "ssd.dir has mode %o" % stat.S_IMODE(st.st_mode)
        kill9(m)
    except BaseException:
        m.umount()
        raise
    _damage_index("meta_pages_garbage", os.path.join(cache_root(m), "index"))
    old = os.umask(0)
    try:
        m.mount()
    finally:
        os.umask(old)
    try:
        assert glob.glob(os.path.join(cache_root(m), "lost+found", "*")), "no lost+found entry"
        assert glob.glob(os.path.join(cache_root(m), "index", "corrupt-*")), "no moved-aside index"
        assert not check_exact(m, files)
        bad = _modes(m)
        assert not bad, "modes after recovery: %s" % bad
    finally:
        m.umount()


def t_credentials_file_mode_checked(ctx):
    """A credentials file readable by group or others stops the mount with
    a clear message (the parser itself: tests/unit/test_s3_creds.c,
    group_readable_file_is_refused)."""
    if ctx.bucket.kind == "local":
        return "skip"
    ctx.bucket.put("c.txt", b"creds")
    creds = os.path.join(ctx.work, "credentials")
    with open(creds, "w") as f:
        f.write("[default]\naws_access_key_id = %s\naws_secret_access_key = %s\n" % (
            ctx.bucket.env["AWS_ACCESS_KEY_ID"], ctx.bucket.env["AWS_SECRET_ACCESS_KEY"]))
    for mode in (0o644, 0o640, 0o604):
        os.chmod(creds, mode)
        m = ctx.mount("creds%o" % mode, {"backend": {"credentials_file": creds}})
        try:
            m.mount()
        except AssertionError as e:
            msg = str(e)
            assert "must not be readable by group or others" in msg, "unclear refusal: %s" % msg[:1000]
        else:
            m.umount()
            raise AssertionError("mounted with a credentials file of mode %o" % mode)
        assert not os.path.ismount(m.mnt)
    os.chmod(creds, 0o600)
    m = ctx.mount("creds600", {"backend": {"credentials_file": creds}}).mount()
    try:
        assert read(os.path.join(m.mnt, "c.txt")) == b"creds"
    finally:
        m.umount()


def as_nobody(*cmd):
    return subprocess.run(NOBODY + list(cmd), capture_output=True, text=True, timeout=30)


def t_allow_other_and_permissions(ctx):
    """Without allow_other another uid cannot use the mount at all; with
    it, modes are enforced (default_permissions)."""
    os.chmod(ctx.work, 0o755)  # mkdtemp's 0700 would stop uid 65534 on its own
    ctx.bucket.put("pub/plain.txt", b"plain object\n")
    m = ctx.mount("private").mount()
    try:
        assert read(os.path.join(m.mnt, "pub/plain.txt")) == b"plain object\n"
        r = as_nobody("cat", os.path.join(m.mnt, "pub/plain.txt"))
        assert r.returncode != 0 and "Permission denied" in r.stderr, (
            "uid 65534 read a mount without allow_other: rc %d %r %r" % (r.returncode, r.stdout, r.stderr))
        r = as_nobody("stat", m.mnt)
        assert r.returncode != 0 and "Permission denied" in r.stderr, (r.returncode, r.stderr)
        with open("/proc/mounts") as f:
            opts = [l.split()[3] for l in f if l.split()[1] == m.mnt][0]
        assert "allow_other" not in opts, opts
    finally:
        m.umount()
    m = ctx.mount("shared", opts=["-o", "allow_other"]).mount()
    try:
        with open("/proc/mounts") as f:
            opts = [l.split()[3] for l in f if l.split()[1] == m.mnt][0].split(",")
        assert "allow_other" in opts and "default_permissions" in opts, opts
        d = os.path.join(m.mnt, "perm")
        os.mkdir(d)
        os.mkdir(os.path.join(d, "closed"))
        for nm, mode in (("private.txt", 0o600), ("public.txt", 0o644), ("closed/inner.txt", 0o644)):
            write(os.path.join(d, nm), nm.encode())
            os.chmod(os.path.join(d, nm), mode)
        os.chmod(os.path.join(d, "closed"), 0o700)
        assert os.stat(os.path.join(d, "private.txt")).st_uid == 0
        r = as_nobody("cat", os.path.join(d, "public.txt"))
        assert r.returncode == 0 and r.stdout == "public.txt", ("0644 file unreadable by others", r.stderr)
        r = as_nobody("cat", os.path.join(m.mnt, "pub/plain.txt"))
        assert r.returncode == 0 and r.stdout == "plain object\n", r.stderr
        for nm in ("private.txt", "closed/inner.txt"):
            r = as_nobody("cat", os.path.join(d, nm))
            assert r.returncode != 0 and "Permission denied" in r.stderr, (
                "uid 65534 read %s: rc %d %r %r" % (nm, r.returncode, r.stdout, r.stderr))
        r = as_nobody("ls", os.path.join(d, "closed"))
        assert r.returncode != 0 and "Permission denied" in r.stderr, (r.returncode, r.stdout, r.stderr)
        r = as_nobody("sh", "-c", "echo x >> '%s'" % os.path.join(d, "public.txt"))
        assert r.returncode != 0 and "Permission denied" in r.stderr, (r.returncode, r.stderr)
        r = as_nobody("touch", os.path.join(d, "new.txt"))
        assert r.returncode != 0 and "Permission denied" in r.stderr, (r.returncode, r.stderr)
        assert read(os.path.join(d, "public.txt")) == b"public.txt"
        assert not os.path.exists(os.path.join(d, "new.txt"))
    finally:
        m.umount()


def _bucket_with_symlinks(ctx):
    """outside/ (a 0600 secret, and ckpt/) next to the bucket directory, and
    symlinks in the bucket pointing there: x and rel -> the secret, ckpt ->
    outside/ckpt.  Returns (outside, secret path)."""
    os.chmod(ctx.work, 0o755)  # mkdtemp's 0700 would stop uid 65534 on its own
    outside = os.path.join(ctx.work, "outside")
    os.makedirs(os.path.join(outside, "ckpt"))
    secret = os.path.join(outside, "secret")
    with open(secret, "wb") as f:
        f.write(b"top secret\n")
    os.chmod(secret, 0o600)
    ctx.bucket.put("pub.txt", b"public\n")
    os.symlink(secret, os.path.join(ctx.bucket.root, "x"))
    os.symlink("../outside/secret", os.path.join(ctx.bucket.root, "rel"))
    os.symlink(os.path.join(outside, "ckpt"), os.path.join(ctx.bucket.root, "ckpt"))
    return outside, secret


def _outside_unchanged(outside, secret):
    got = sorted(os.path.relpath(os.path.join(r, n), outside) for r, ds, ns in os.walk(outside) for n in ds + ns)
    assert got == ["ckpt", "secret"], "the directory outside the bucket changed: %s" % got
    with open(secret, "rb") as f:
        assert f.read() == b"top secret\n", "the secret outside the bucket changed"


def t_local_symlink_not_followed_on_read(ctx):
    """Local backend mounted by root with allow_other: symlinks in the
    bucket directory pointing out of it (to a 0600 file, to a directory)
    are objects whose body is their target, and the daemon never follows
    them.  The mount shows each one's target text: as a symlink's target
    (a FUSE layer that shows mode S_IFLNK as a symlink) or as a file's
    bytes (one that does not).  Only the kernel may follow a symlink, with
    the reader's permissions, so uid 65534 never reads the secret.  A FIFO
    in the bucket is not listed, and the log names it."""
    if ctx.bucket.kind != "local":
        return "skip"
    outside, secret = _bucket_with_symlinks(ctx)
    os.mkfifo(os.path.join(ctx.bucket.root, "pipe"))
    m = ctx.mount("symlinks", opts=["-o", "allow_other"]).mount()
    try:
        r = as_nobody("cat", os.path.join(m.mnt, "pub.txt"))
        assert r.returncode == 0 and r.stdout == "public\n", ("uid 65534 cannot read the mount", r.stderr)
        assert sorted(os.listdir(m.mnt)) == ["ckpt", "pub.txt", "rel", "x"], "listing: %s" % sorted(os.listdir(m.mnt))
        targets = {"x": secret, "rel": "../outside/secret", "ckpt": os.path.join(outside, "ckpt")}
        for key, target in targets.items():
            p = os.path.join(m.mnt, key)
            st = os.lstat(p)
            if stat.S_ISLNK(st.st_mode):
                got = os.readlink(p)
            else:
                assert stat.S_ISREG(st.st_mode), "%s: mode %o" % (key, st.st_mode)
                got = read(p).decode()
            assert got == target, "%s shows %r, not its target %r" % (key, got, target)
        for key in ("x", "rel", "ckpt/secret", "ckpt/../secret"):
            r = as_nobody("cat", os.path.join(m.mnt, key))
            assert "top secret" not in r.stdout, (
                "uid 65534 read %s: rc %d %r %r" % (key, r.returncode, r.stdout, r.stderr))
        poll(lambda: "'pipe' in " in log_text(m) and "not a file, symlink or directory" in log_text(m), 10,
             "the log line naming the FIFO pipe")
        _outside_unchanged(outside, secret)
    finally:
        m.umount()


def t_local_symlink_not_followed_on_write(ctx):
    """The bucket's directory ckpt/ is replaced by a symlink to a directory
    outside it while the mount still knows it as a directory: a file
    written through the mount under ckpt/ never lands outside.  Its upload
    (key ckpt/file, a symlink on its path) fails with EACCES, logged with
    the key, `tierfs flush` reports it, the outside directory stays empty
    and the symlink stays."""
    if ctx.bucket.kind != "local":
        return "skip"
    os.chmod(ctx.work, 0o755)
    outside = os.path.join(ctx.work, "outside")
    os.makedirs(os.path.join(outside, "ckpt"))
    secret = os.path.join(outside, "secret")
    with open(secret, "wb") as f:
        f.write(b"top secret\n")
    ctx.bucket.put("ckpt/old", b"old checkpoint\n")
    m = ctx.mount("symlinks-w", {"writeback": {"delay": "0s", "max_retries": "2", "retry_base": "10ms",
                                               "retry_max": "50ms"}},
                  opts=["-o", "allow_other"]).mount()
    try:
        assert os.listdir(os.path.join(m.mnt, "ckpt")) == ["old"]
        shutil.rmtree(os.path.join(ctx.bucket.root, "ckpt"))
        os.symlink(os.path.join(outside, "ckpt"), os.path.join(ctx.bucket.root, "ckpt"))
        write(os.path.join(m.mnt, "ckpt", "file"), b"checkpoint\n")
        r = subprocess.run([m.tierfs, "flush", m.mnt], capture_output=True, text=True, timeout=60)
        assert r.returncode != 0 and "could not be uploaded" in r.stderr, (
            "tierfs flush: rc %d %r" % (r.returncode, r.stderr))
        assert "local: write 'ckpt/file': a symlink on its path" in log_text(m), m.log_tail()
        _outside_unchanged(outside, secret)
        assert os.path.islink(os.path.join(ctx.bucket.root, "ckpt")), "the symlink ckpt was replaced"
    finally:
        m.umount()
    _outside_unchanged(outside, secret)


TESTS = [
    # section 3
    ("corrupt_data_files_offline", t_corrupt_data_files_offline),
    ("corrupt_data_files_live", t_corrupt_data_files_live),
    ("damaged_index_offline", t_damaged_index_offline),
    ("index_page_faults", t_index_page_faults),
    ("damaged_index_live", t_damaged_index_live),
    ("staged_data_survives_index_loss", t_staged_data_survives_index_loss),
    # section 6 (64 concurrent readers: test_mount.py rss_bound_64_readers)
    ("ten_thousand_open_files", t_ten_thousand_open_files),
    ("big_directory_listing", t_big_directory_listing),
    ("fifty_gib_sparse_object", t_fifty_gib_sparse_object),
    ("statfs_sensible", t_statfs_sensible),
    # section 7
    ("hostile_keys", t_hostile_keys),
    ("hostile_names_written", t_hostile_names_written),
    ("cache_file_modes", t_cache_file_modes),
    ("credentials_file_mode_checked", t_credentials_file_mode_checked),
    ("allow_other_and_permissions", t_allow_other_and_permissions),
    ("local_symlink_not_followed_on_read", t_local_symlink_not_followed_on_read),
    ("local_symlink_not_followed_on_write", t_local_symlink_not_followed_on_write),
]


def main():
    return run_suite("robust", TESTS)

if __name__ == "__main__":
    sys.exit(main())
