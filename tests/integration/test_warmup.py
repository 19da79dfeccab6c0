#!/usr/bin/env python3
"""test_warmup.py - warm-up, pinning, eviction and sampler-order prefetch.

    test_warmup.py TIERFS --backend local|moto [--only NAME]

Uses the harness of test_mount.py (Bucket, Mount).  Backend GETs are
counted through `tierfs stats --json`.  Ends with
"warmup: N passed, N failed".
"""
import ctypes
import errno
import os
import pty
import random
import select
import signal
import subprocess
import sys
import threading
import time

from test_mount import assert_rss, data_for, poll, read, rss_anon, run_suite

MIB = 1 << 20


def dataset(bucket, n=120, size=(1000, 150_000), prefix="ds"):
    rnd = random.Random(n)
    files = {}
    for i in range(n):
        key = "%s/c%d/f%04d.bin" % (prefix, i % 5, i)
        files[key] = data_for(key, rnd.randrange(*size))
        bucket.put(key, files[key])
    return files


def tierfs(m, *args, timeout=120):
    return subprocess.run([m.tierfs] + list(args), capture_output=True, text=True, timeout=timeout,
                          env=m.env())


def stats(m):
    return m.stats()


def gets(m):
    return stats(m)["backend"]["get"]["requests"]


def read_all(m, files, threads=4):
    errors = []
    keys = list(files)

    def worker(part):
        for k in part:
            if read(os.path.join(m.mnt, k)) != files[k]:
                errors.append(k)

    ts = [threading.Thread(target=worker, args=(keys[i::threads],)) for i in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, "content differs: %s" % errors[:5]


def t_warm_tree_then_epoch_without_gets(ctx):
    files = dataset(ctx.bucket)
    m = ctx.mount("warm").mount()
    try:
        r = tierfs(m, "warmup", "--quiet", "-j", "8", m.mnt)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "%d fetched" % len(files) in r.stdout, r.stdout
        before = gets(m)
        os.system("sync; echo 3 > /proc/sys/vm/drop_caches")
        read_all(m, files)
        assert gets(m) == before, "the epoch after warm-up made backend GETs"
        # Re-running is cheap: everything is already cached.
        r = tierfs(m, "warmup", "--quiet", m.mnt, os.path.join(m.mnt, "ds"))
        assert r.returncode == 0 and "0 fetched" in r.stdout, r.stdout
        assert "%d already cached" % len(files) in r.stdout, r.stdout
        assert gets(m) == before
    finally:
        m.umount()


def t_manifest_with_bad_entries(ctx):
    files = dataset(ctx.bucket, n=30)
    m = ctx.mount("manifest").mount()
    keys = sorted(files)
    man = os.path.join(ctx.work, "manifest.jsonl")
    url = "s3://%s/%s" % (ctx.bucket.source[5:].split("/")[0], ctx.bucket.prefix) \
        if ctx.bucket.kind != "local" else None
    with open(man, "w") as f:
        f.write(keys[0] + "\n")                                  # a path
        f.write('{"key": "%s", "label": 3}\n' % keys[1])           # JSON with a key
        f.write(os.path.join(m.mnt, keys[2]) + "\n")             # absolute path
        if url:
            f.write('{"url": "%s%s"}\n' % (url, keys[3]))        # a URL of this bucket
        f.write("ds/missing/file.bin\n")                         # missing
        f.write("{not json\n")                                   # bad JSON
        f.write('{"label": 1}\n')                                # no key
        f.write("s3://another-bucket/x\n")                       # another bucket
        f.write("\n# comments and blank lines are skipped\n")
    try:
        r = tierfs(m, "warmup", "--quiet", "--manifest", man, m.mnt)
        assert r.returncode == 1, "failures must make the exit status non-zero: %s" % r.stdout
        out = r.stdout
        assert "ds/missing/file.bin: no such file or directory" in out, out
        assert "invalid JSON" in out and "no \"key\"" in out, out
        assert "another bucket" in out or "local directory" in out, out
        good = 4 if url else 3
        assert "%d fetched" % good in out, out
        before = gets(m)
        for k in keys[:good]:
            assert read(os.path.join(m.mnt, k)) == files[k]
        assert gets(m) == before, "manifest files were not warmed"
    finally:
        m.umount()


def on_a_terminal(m, *args, timeout=120):
    """Run `tierfs ARGS` with stderr on a pseudo-terminal; returns
    (returncode, stdout, what the terminal showed)."""
    master, slave = pty.openpty()
    try:
        p = subprocess.Popen([m.tierfs] + list(args), stdout=subprocess.PIPE, stderr=slave,
                             text=True, env=m.env())
        os.close(slave)
        slave = -1
        shown = b""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            r, _, _ = select.select([master], [], [], 0.5)
            if r:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: the other side is closed
                    break
                if not chunk:
                    break
                shown += chunk
            elif p.poll() is not None:
                break
        out = p.communicate(timeout=max(1, deadline - time.monotonic()))[0]
        return p.returncode, out, shown.decode(errors="replace")
    finally:
        os.close(master)
        if slave >= 0:
            os.close(slave)


def t_progress_display(ctx):
    files = dataset(ctx.bucket, n=60, size=(20_000, 60_000))
    m = ctx.mount("progress").mount()
    try:
        # On a terminal: a live bar, redrawn in place, that ends full.
        rc, out, shown = on_a_terminal(m, "warmup", "-j", "2", m.mnt)
        assert rc == 0, (rc, out, shown)
        assert "\r" in shown, repr(shown)
        bars = [b for b in shown.split("\r") if "files" in b]
        assert bars, repr(shown)
        last = bars[-1]
        for part in ("[", "]", "%d/%d files" % (len(files), len(files)), "/s", "ETA"):
            assert part in last, (part, last)
        assert "[" + "=" * 30 + "]" in last, last
        assert "%d fetched" % len(files) in out, out
        # --quiet: no bar, the summary still comes.
        r_q = on_a_terminal(m, "warmup", "--quiet", m.mnt)
        assert r_q[0] == 0 and "files" not in r_q[2], r_q
        assert "%d already cached" % len(files) in r_q[1], r_q
        # Not a terminal: no bar (plain lines come every 5 s at most).
        r = tierfs(m, "warmup", m.mnt)
        assert r.returncode == 0 and "\r" not in r.stderr and "[" not in r.stderr, r.stderr
    finally:
        m.umount()


def t_interrupted_warmup_finishes_on_rerun(ctx):
    # Enough files that -j 1 is still running when the signal comes.
    files = dataset(ctx.bucket, n=1500 if ctx.bucket.kind == "local" else 300, size=(20_000, 60_000))
    m = ctx.mount("interrupt").mount()
    try:
        p = subprocess.Popen([m.tierfs, "warmup", "-j", "1", m.mnt], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=m.env())
        poll(lambda: stats(m)["ssd"]["objects"] >= 5, 30, "the warm-up to make progress")
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=30)
        assert p.returncode == 130, (p.returncode, out, err)
        assert "interrupted" in err, err
        # The daemon stops the run: the count stops growing.
        def settled():
            a = stats(m)["ssd"]["objects"]
            time.sleep(0.3)
            return a if stats(m)["ssd"]["objects"] == a else None
        done = poll(settled, 20, "the warm-up to stop")
        assert done < len(files), "the interrupted run did everything"
        r = tierfs(m, "warmup", "--quiet", m.mnt)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "%d fetched" % (len(files) - done) in r.stdout, (done, r.stdout)
        assert "%d already cached" % done in r.stdout, (done, r.stdout)
        before = gets(m)
        read_all(m, files)
        assert gets(m) == before
    finally:
        m.umount()


def t_warmup_with_concurrent_reader(ctx):
    files = dataset(ctx.bucket, n=200, size=(1000, 200_000))
    m = ctx.mount("concurrent").mount()
    try:
        p = subprocess.Popen([m.tierfs, "warmup", "--quiet", "-j", "8", m.mnt],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=m.env())
        read_all(m, files, threads=8)
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, out + err
        read_all(m, files, threads=8)
        # Every file is one block (< 1 MiB): one GET each, never two.
        assert gets(m) == len(files), "duplicate GETs: %d for %d files" % (gets(m), len(files))
    finally:
        m.umount()


def t_ram_budget_during_prefetch(ctx):
    files = dataset(ctx.bucket, n=60, size=(2 * MIB, 4 * MIB))
    m = ctx.mount("budget", {"ram": {"size": "32M"}}).mount()
    try:
        pid = m.pid()
        base = rss_anon(pid)
        peak = [base]
        stop = threading.Event()

        def sample():
            while not stop.is_set():
                peak[0] = max(peak[0], rss_anon(pid))
                time.sleep(0.01)

        t = threading.Thread(target=sample)
        t.start()
        try:
            r = tierfs(m, "warmup", "--quiet", "--tier", "ram", "-j", "16", m.mnt)
            r2 = tierfs(m, "warmup", "--quiet", "-j", "16", m.mnt)
        finally:
            stop.set()
            t.join()
        assert r.returncode == 0 and r2.returncode == 0, r.stdout + r2.stdout
        st = stats(m)["ram"]
        assert st["used_bytes"] <= st["capacity_bytes"], st
        assert_rss(ctx, peak[0], 32 * MIB + 64 * MIB)
        read_all(m, files)
    finally:
        m.umount()


def t_pin_survives_eviction_and_cap(ctx):
    pinned = dataset(ctx.bucket, n=10, size=(1 * MIB, 2 * MIB), prefix="keep")
    other = dataset(ctx.bucket, n=60, size=(1 * MIB, 2 * MIB), prefix="other")
    m = ctx.mount("pin", {"ssd": {"size": "64M", "high_watermark": "80", "low_watermark": "50",
                                  "pin_max": "30M"},
                          "cache": {"policy": "lru"}}).mount()
    try:
        r = tierfs(m, "pin", os.path.join(m.mnt, "keep"))
        assert r.returncode == 0, r.stdout + r.stderr
        assert stats(m)["ssd"]["pinned_bytes"] == sum(len(v) for v in pinned.values())
        # Push far more than the tier holds through it.
        for _ in range(2):
            for k in other:
                read(os.path.join(m.mnt, k))
        poll(lambda: stats(m)["ssd"]["evictions"] > 0, 30, "evictions")
        before = gets(m)
        read_all(m, pinned)
        assert gets(m) == before, "pinned data was evicted"
        # Past the cap: a clear error, and the rest stays pinned.
        r = tierfs(m, "pin", os.path.join(m.mnt, "other"))
        assert r.returncode == 1, r.stdout
        assert "ssd.pin_max" in r.stdout, r.stdout
        r = tierfs(m, "unpin", os.path.join(m.mnt, "keep"), os.path.join(m.mnt, "other"))
        assert r.returncode == 0, r.stdout + r.stderr
        assert stats(m)["ssd"]["pinned_bytes"] == 0
    finally:
        m.umount()


def t_evict_drops_clean_data(ctx):
    files = dataset(ctx.bucket, n=20)
    m = ctx.mount("evict").mount()
    try:
        read_all(m, files)
        n = gets(m)
        r = tierfs(m, "evict", m.mnt, os.path.join(m.mnt, "ds"))
        assert r.returncode == 0, r.stdout + r.stderr
        os.system("sync; echo 3 > /proc/sys/vm/drop_caches")
        read_all(m, files)
        assert gets(m) == 2 * n, "evicted data was served from the cache"
        # Dirty data is never dropped.
        with open(os.path.join(m.mnt, "ds/new.bin"), "wb") as f:
            f.write(b"staged")
        r = tierfs(m, "evict", m.mnt, os.path.join(m.mnt, "ds"))
        assert read(os.path.join(m.mnt, "ds/new.bin")) == b"staged"
    finally:
        m.umount()


def order_reader(m, order, files, threads=8):
    nxt = [0]
    lock = threading.Lock()
    errors = []

    def worker():
        while True:
            with lock:
                i = nxt[0]
                nxt[0] += 1
            if i >= len(order):
                return
            if read(os.path.join(m.mnt, order[i])) != files[order[i]]:
                errors.append(order[i])

    ts = [threading.Thread(target=worker) for _ in range(threads)]
    t0 = time.monotonic()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors[:5]
    return time.monotonic() - t0


def t_follow_control_file(ctx):
    files = dataset(ctx.bucket, n=150, size=(50_000, 150_000))
    m = ctx.mount("follow").mount()
    try:
        order = list(files)
        random.Random(7).shuffle(order)
        with open(os.path.join(m.mnt, ".tierfs-order"), "w") as f:
            f.write("\n".join(order) + "\n")
        assert ".tierfs-order" not in os.listdir(m.mnt)
        order_reader(m, order, files)
        st = stats(m)
        assert st["follow"]["order_files"] == len(order), st["follow"]
        assert st["follow"]["prefetched_files"] >= len(order) // 2, st["follow"]
        assert st["backend"]["get"]["requests"] == len(files), "duplicate GETs"
        # The prefetched files stay in RAM as files read without an order
        # would (the dataset is far below half the RAM tier).
        assert st["ram"]["stream_kept"] >= len(order) // 2, st["ram"]
        # A second epoch in a new order replaces the first, and is read
        # from RAM.
        misses = st["ram"]["misses"]
        random.Random(8).shuffle(order)
        with open(os.path.join(m.mnt, ".tierfs-order"), "w") as f:
            f.write("\n".join(order))
        order_reader(m, order, files)
        st = stats(m)
        assert st["follow"]["position"] == len(order)
        assert st["ram"]["misses"] - misses <= len(order) // 10, st["ram"]
    finally:
        m.umount()


def t_follow_cli(ctx):
    files = dataset(ctx.bucket, n=80, size=(50_000, 150_000))
    m = ctx.mount("followcli").mount()
    try:
        order = list(files)
        random.Random(9).shuffle(order)
        man = os.path.join(ctx.work, "epoch.txt")
        with open(man, "w") as f:
            f.write("\n".join(order) + "\nnot/there.bin\n")
        p = subprocess.Popen([m.tierfs, "warmup", "--follow", man, m.mnt], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=m.env())
        poll(lambda: stats(m).get("follow", {}).get("order_files") == len(order) + 1, 20,
             "the order to be set")
        order_reader(m, order, files)
        # The reader never opens the missing entry: stop following with Ctrl-C.
        p.send_signal(signal.SIGINT)
        p.communicate(timeout=30)
        poll(lambda: stats(m)["follow"]["order_files"] == 0, 20, "following to stop")
        assert stats(m)["follow"]["prefetched_files"] >= len(order) // 2
    finally:
        m.umount()


# A reader process (a training rank): writes its order into the control
# file, then on "go" reads the first COUNT files of it with 2 threads,
# checking their digests; "empty" writes an empty order.  It stays alive
# until its stdin closes, so its stream stays.
READER = r"""
import hashlib, json, os, sys, threading
mnt, order_path, count, digests = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
order = open(order_path).read().split()
want = json.load(open(digests))
with open(os.path.join(mnt, ".tierfs-order"), "w") as f:
    f.write("\n".join(order) + "\n")
print("set", flush=True)
for line in sys.stdin:
    if line.strip() == "go":
        nxt, lock, bad = [0], threading.Lock(), []
        def work():
            while True:
                with lock:
                    i = nxt[0]
                    nxt[0] += 1
                if i >= count:
                    return
                with open(os.path.join(mnt, order[i]), "rb") as f:
                    if hashlib.sha256(f.read()).hexdigest() != want[order[i]]:
                        bad.append(order[i])
        ts = [threading.Thread(target=work) for _ in range(2)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        print("done %d" % len(bad), flush=True)
    elif line.strip() == "empty":
        open(os.path.join(mnt, ".tierfs-order"), "w").close()
        print("emptied", flush=True)
"""


def stream_of(follow, pid):
    for s in follow["streams"]:
        if s["owner"] == pid:
            return s
    return None


def t_follow_several_orders(ctx):
    """Three processes write their own orders over the same files (as
    ranks or jobs sharing a node do): each open is credited to the
    opener's stream, the two that read are both prefetched for, and the
    one that stopped reading goes idle after prefetch.stall without
    stopping the others; an empty order removes its writer's stream."""
    files = dataset(ctx.bucket, n=60, size=(50_000, 150_000))
    m = ctx.mount("streams", {"prefetch": {"stall": "2s"}}).mount()
    import hashlib
    import json
    digests = os.path.join(ctx.work, "digests.json")
    with open(digests, "w") as f:
        json.dump({k: hashlib.sha256(v).hexdigest() for k, v in files.items()}, f)
    procs = []

    def start(name, seed, count):
        order = list(files)
        random.Random(seed).shuffle(order)
        path = os.path.join(ctx.work, name + ".txt")
        with open(path, "w") as f:
            f.write("\n".join(order))
        p = subprocess.Popen([sys.executable, "-c", READER, m.mnt, path, str(count), digests],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        procs.append(p)
        assert p.stdout.readline().strip() == "set", "reader %s did not set its order" % name
        return p

    def tell(p, what):
        p.stdin.write(what + "\n")
        p.stdin.flush()

    def answer(p):
        line = p.stdout.readline().strip()
        assert line, "a reader died"
        return line

    def follow():
        return stats(m)["follow"]

    try:
        c = start("c", 13, 5)
        tell(c, "go")
        assert answer(c) == "done 0"
        poll(lambda: stream_of(follow(), c.pid)["state"] == "idle", 20,
             "the stream of the reader that stopped to go idle")
        c_fetched = stream_of(follow(), c.pid)["prefetched_files"]
        a = start("a", 11, len(files))
        b = start("b", 12, len(files))
        st = follow()
        assert len(st["streams"]) == 3 and st["order_files"] == 3 * len(files), st
        assert st["active_streams"] == 2, st
        tell(a, "go")
        tell(b, "go")
        assert answer(a) == "done 0" and answer(b) == "done 0", "content differs"
        st = follow()
        for p in (a, b):
            s = stream_of(st, p.pid)
            assert s["opened_in_order"] == len(files) and s["position"] == len(files), s
            assert s["prefetched_files"] >= len(files) // 2, s
        s = stream_of(st, c.pid)
        assert s["opened_in_order"] == 5, s
        assert s["state"] == "idle" and s["prefetched_files"] == c_fetched, s
        assert st["opened_in_order"] == 2 * len(files) + 5, st
        tell(a, "empty")
        assert answer(a) == "emptied"
        poll(lambda: stream_of(follow(), a.pid) is None, 10, "the empty order to remove a's stream")
        st = follow()
        assert stream_of(st, b.pid) and stream_of(st, c.pid), st
    finally:
        for p in procs:
            p.stdin.close()
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        m.umount()


def t_order_dup_close_keeps_position(ctx):
    """The order is the writing process's; a close of a duplicate of its
    fd (a dup, or the copy a forked child closes: every `tierfs stats`
    run here forks while an fd is open) with nothing new written commits
    nothing, so the reader keeps its position; bytes written after a
    commit set the order again."""
    files = dataset(ctx.bucket, n=10, size=(1000, 2000))
    m = ctx.mount("orderdup").mount()
    ctl = os.path.join(m.mnt, ".tierfs-order")
    order = sorted(files)
    fds = []

    def mine():
        return stream_of(stats(m)["follow"], os.getpid())

    def close(fd):
        fds.remove(fd)
        os.close(fd)

    try:
        fds.append(os.open(ctl, os.O_WRONLY))
        os.write(fds[0], ("\n".join(order) + "\n").encode())
        fds.append(os.dup(fds[0]))
        close(fds[0])  # the flush commits, before close() returns
        s = mine()
        assert s and s["files"] == len(order) and s["position"] == 0, s
        for k in order[:3]:
            assert read(os.path.join(m.mnt, k)) == files[k]
        assert mine()["position"] == 3, "a close with nothing new set the order again"
        close(fds[0])
        assert mine()["position"] == 3, "a close with nothing new set the order again"
        fds.append(os.open(ctl, os.O_WRONLY))
        os.write(fds[0], ("\n".join(order[:5]) + "\n").encode())
        fds.append(os.dup(fds[0]))
        close(fds[0])
        os.write(fds[0], (order[5] + "\n").encode())
        close(fds[0])
        s = mine()
        assert s["files"] == 6 and s["position"] == 0, s
    finally:
        for fd in fds:
            os.close(fd)
        m.umount()

NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def t_order_file_owner_and_budget(ctx):
    """.tierfs-order is 0644, owned by the mount's uid: another uid cannot
    set the order; all open handles of a uid share its part of one
    prefetch.order_max budget (EFBIG beyond it), given back when a handle
    is released."""
    files = dataset(ctx.bucket, n=10, size=(1000, 2000))
    os.chmod(ctx.work, 0o755)  # mkdtemp's 0700 would stop uid 65534 on its own
    # A uid's share is 79 KiB: one 40 KiB text and its order (2,048 lines,
    # 32 KiB of positions while it grows) fit, two texts do not.
    m = ctx.mount("orderbudget", opts=["-o", "allow_other", "-o", "prefetch.order_max=158K"]).mount()
    ctl = os.path.join(m.mnt, ".tierfs-order")
    try:
        st = os.stat(ctl)
        assert st.st_mode & 0o7777 == 0o644 and st.st_uid == os.getuid(), oct(st.st_mode)
        r = subprocess.run(NOBODY + ["sh", "-c", "printf '%%s\\n' %s > %s" % (sorted(files)[0], ctl)],
                           capture_output=True, text=True)
        assert r.returncode != 0 and "denied" in r.stderr, (r.returncode, r.stderr)
        assert stats(m)["follow"]["order_files"] == 0, "uid 65534 set the order"
        # Two handles: 40 KiB each do not fit in 64 KiB together.
        line = (sorted(files)[0] + "\n").encode()
        chunk = line * (40 * 1024 // len(line))
        a = os.open(ctl, os.O_WRONLY)
        b = os.open(ctl, os.O_WRONLY)
        try:
            assert os.write(a, chunk) == len(chunk)
            try:
                os.write(b, chunk)
                raise AssertionError("a write beyond prefetch.order_max was accepted")
            except OSError as e:
                assert e.errno == errno.EFBIG, e
            os.close(a)
            a = -1
            # The release (after close) gives the budget back.
            def fits():
                try:
                    return os.write(b, chunk) == len(chunk)
                except OSError as e:
                    assert e.errno == errno.EFBIG, e
                    return False
            poll(fits, 10, "the released handle's bytes to be given back")
        finally:
            if a >= 0:
                os.close(a)
            os.close(b)
        poll(lambda: stats(m)["follow"]["order_files"] == len(chunk) // len(line), 10,
             "the owner's order to be set")
        # One write larger than the uid's share.
        with open(ctl, "wb", buffering=0) as f:
            try:
                f.write(b"x\n" * (40 * 1024))
                raise AssertionError("a 80 KiB write into a 79 KiB share was accepted")
            except OSError as e:
                assert e.errno == errno.EFBIG, e
    finally:
        m.umount()


# A writer of an order: writes N copies of NAME into the control file,
# prints "written", closes it on a line of stdin and prints "closed ERRNO",
# then lives until its stdin closes (so its order's stream stays).
CLOSER = r"""
import os, sys
ctl, name, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
fd = os.open(ctl, os.O_WRONLY)
data = ((name + "\n") * n).encode()
while data:
    data = data[os.write(fd, data):]
print("written", flush=True)
sys.stdin.readline()
try:
    os.close(fd)
    print("closed 0", flush=True)
except OSError as e:
    print("closed %d" % e.errno, flush=True)
sys.stdin.read()
"""

_libc = ctypes.CDLL(None, use_errno=True)
_libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
PTRACE_SEIZE, PTRACE_INTERRUPT, PTRACE_DETACH = 0x4206, 0x4207, 17
WALL = 0x40000000


def thread_named(pid, name):
    """The id of the thread of `pid` called `name`, or None."""
    for tid in os.listdir("/proc/%d/task" % pid):
        with open("/proc/%d/task/%s/comm" % (pid, tid)) as f:
            if f.read().strip() == name:
                return int(tid)
    return None


def freeze_thread(tid):
    """Stop one thread of another process (ptrace), the others run on."""
    if _libc.ptrace(PTRACE_SEIZE, tid, None, None) != 0:
        raise OSError(ctypes.get_errno(), "ptrace(SEIZE, %d)" % tid)
    if _libc.ptrace(PTRACE_INTERRUPT, tid, None, None) != 0:
        raise OSError(ctypes.get_errno(), "ptrace(INTERRUPT, %d)" % tid)
    os.waitpid(tid, WALL)


def thaw_thread(tid):
    _libc.ptrace(PTRACE_DETACH, tid, None, None)


def in_close(pid):
    """Whether process `pid` sleeps in close(2) (x86-64: 3, arm64: 57)."""
    nr = {"x86_64": "3", "aarch64": "57"}[os.uname().machine]
    try:
        with open("/proc/%d/syscall" % pid) as f:
            return f.read().split()[0] == nr
    except (OSError, IndexError):
        return False


def t_order_repeats_never_block_the_mount(ctx):
    """An order may name a file many times (sampling with replacement):
    80,000 copies of one name cost linear time, and no FUSE thread builds
    an order.  With the daemon's order builder held (ptrace), 24 closes of
    such orders wait for it -- more than the 16 FUSE threads -- while a
    stat by another user is answered, before any of the closes returns:
    closes that built their orders on FUSE threads would hold every one of
    them, and the stat would wait behind them.  Released, every close
    returns 0 and every order is set, each occurrence a position."""
    files = dataset(ctx.bucket, n=4, size=(1000, 2000))
    name = sorted(files)[0]
    copies, writers = 80_000, 24
    os.chmod(ctx.work, 0o755)  # mkdtemp's 0700 would stop uid 65534 on its own
    m = ctx.mount("orderrep", opts=["-o", "allow_other"]).mount()
    ctl = os.path.join(m.mnt, ".tierfs-order")
    procs, tid = [], None
    try:
        pid = m.pid()
        tid = thread_named(pid, "tierfs-order")
        if tid is not None:
            freeze_thread(tid)
        for _ in range(writers):
            procs.append(subprocess.Popen([sys.executable, "-c", CLOSER, ctl, name, str(copies)],
                                          stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                          text=True))
        for p in procs:
            assert p.stdout.readline().strip() == "written"
        for p in procs:
            p.stdin.write("close\n")
            p.stdin.flush()
        poll(lambda: all(in_close(p.pid) for p in procs), 60, "every writer to be in close()")
        st = subprocess.Popen(NOBODY + ["stat", "-c", "%s", os.path.join(m.mnt, name)],
                              stdout=subprocess.PIPE, text=True)
        poll(lambda: st.poll() is not None, 60, "the stat by uid 65534")
        returned = [p.pid for p in procs if p.poll() is not None or not in_close(p.pid)]
        size = st.communicate()[0].strip()
        assert st.returncode == 0 and size == str(len(files[name])), size
        assert not returned, "the stat waited until %d closes returned" % len(returned)
        f = stats(m)["follow"]
        assert f["orders_queued"] == writers, f["orders_queued"]
        if tid is not None:
            thaw_thread(tid)
            tid = None
        for p in procs:
            assert p.stdout.readline().strip() == "closed 0"
        f = stats(m)["follow"]
        assert f["orders_queued"] == 0 and f["orders_built"] == writers, f
        assert len(f["streams"]) == writers
        assert all(s["files"] == copies for s in f["streams"]), [s["files"] for s in f["streams"]]
        # One name, stored once: two 4-byte words a position.
        assert all(s["bytes"] <= copies * 8 + 4096 for s in f["streams"]), f["streams"][0]
    finally:
        if tid is not None:
            thaw_thread(tid)
        for p in procs:
            p.stdin.close()
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        m.umount()


def t_order_memory_counted_and_bounded_per_uid(ctx):
    """Order memory is counted as allocated, against prefetch.order_max
    and a share per uid (half of it): an order of 600,000 names grows the
    daemon's RSS by about what is counted for it (once by 14x); one uid
    that fills its share gets EFBIG, on a write and on the close of an
    order that cannot be built in it, while the other uid that may write
    orders (the mount's) still sets its own."""
    files = dataset(ctx.bucket, n=10, size=(1000, 2000))
    os.chmod(ctx.work, 0o755)
    share = 64 * MIB
    m = ctx.mount("ordermem", opts=["-o", "allow_other", "-o", "uid=65534", "-o",
                                    "prefetch.order_max=%d" % (2 * share)]).mount()
    ctl = os.path.join(m.mnt, ".tierfs-order")
    try:
        pid = m.pid()
        # A writer of the mount's uid, started first: every process
        # started while root's handle is open closes a copy of it at exec.
        other = sorted(files)[2:6]
        helper = subprocess.Popen(NOBODY + [sys.executable, "-c", CLOSER, ctl, other[0], "3"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert helper.stdout.readline().strip() == "written"
        # Root fills its share with a text: the write beyond it fails.
        fd = os.open(ctl, os.O_WRONLY)
        try:
            chunk = ((sorted(files)[1] + "\n") * 40_000).encode()
            written = 0
            try:
                while True:
                    written += os.write(fd, chunk)
                    assert written <= share, "a text beyond the uid's share was accepted"
            except OSError as e:
                assert e.errno == errno.EFBIG, e
            assert written > share - len(chunk) - 4096, written
            # The mount's uid sets its order beside it.
            helper.stdin.write("close\n")
            helper.stdin.flush()
            assert helper.stdout.readline().strip() == "closed 0"
            f = stats(m)["follow"]
            assert [s["files"] for s in f["streams"] if s["uid"] == 65534] == [3], f
            assert f["uid_bytes"]["65534"] < f["uid_bytes"]["0"] <= share, f["uid_bytes"]
        finally:
            try:
                os.close(fd)
                raise AssertionError("an order beyond the uid's share was set")
            except OSError as e:
                assert e.errno == errno.EFBIG, e
            helper.stdin.close()
            helper.wait(30)
        assert stats(m)["follow"]["orders_refused"] >= 1
        read_all(m, files)
        with open(ctl, "w") as f:  # the FUSE threads' buffers, the builder
            f.write(sorted(files)[0] + "\n")
        rss0 = rss_anon(pid)
        n = 600_000
        text = "".join("big/d%03d/name-%07d.bin\n" % (i % 500, i) for i in range(n))
        with open(ctl, "w") as f:
            f.write(text)
        # The text's memory is given back once its handle is released.
        def mine():
            fo = stats(m)["follow"]
            s = [s for s in fo["streams"] if s["owner"] == os.getpid()]
            return (fo, s[0]) if s and fo["order_bytes"] == s[0]["bytes"] else None
        fo, s = poll(mine, 30, "the order's text to be given back")
        counted = s["bytes"]
        assert s["files"] == n and s["uid"] == 0, s
        assert fo["uid_bytes"] == {"0": counted}, fo["uid_bytes"]
        assert counted >= len(text), (counted, len(text))  # the names are in it
        grown = rss_anon(pid) - rss0
        print("    order of %d names (%.1f MiB of text): %.1f MiB counted, RssAnon +%.1f MiB" %
              (n, len(text) / MIB, counted / MIB, grown / MIB))
        assert_rss(ctx, grown, 3 * counted // 2 + 8 * MIB, "RssAnon growth for the order")
        with open(ctl, "w") as f:
            pass  # an empty order: the stream and its memory go
        poll(lambda: stats(m)["follow"]["order_bytes"] == 0, 30, "the order's memory to go")
    finally:
        m.umount()


TESTS = [
    ("order_file_owner_and_budget", t_order_file_owner_and_budget),
    ("warm_tree_then_epoch_without_gets", t_warm_tree_then_epoch_without_gets),
    ("manifest_with_bad_entries", t_manifest_with_bad_entries),
    ("progress_display", t_progress_display),
    ("interrupted_warmup_finishes_on_rerun", t_interrupted_warmup_finishes_on_rerun),
    ("warmup_with_concurrent_reader", t_warmup_with_concurrent_reader),
    ("ram_budget_during_prefetch", t_ram_budget_during_prefetch),
    ("pin_survives_eviction_and_cap", t_pin_survives_eviction_and_cap),
    ("evict_drops_clean_data", t_evict_drops_clean_data),
    ("follow_control_file", t_follow_control_file),
    ("follow_cli", t_follow_cli),
    ("follow_several_orders", t_follow_several_orders),
    ("order_dup_close_keeps_position", t_order_dup_close_keeps_position),
    ("order_repeats_never_block_the_mount", t_order_repeats_never_block_the_mount),
    ("order_memory_counted_and_bounded_per_uid", t_order_memory_counted_and_bounded_per_uid),
]


def main():
    return run_suite("warmup", TESTS)

if __name__ == "__main__":
    sys.exit(main())
