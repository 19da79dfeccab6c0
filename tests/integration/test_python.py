#!/usr/bin/python3
"""test_python.py - tierfs.torch and the examples against real PyTorch.

    /usr/bin/python3 test_python.py TIERFS --backend local|moto [--only NAME]

Runs under Debian's python3 (python3-torch 1.13, python3-torchvision 0.14,
python3-pil); python/ of the tree is put on sys.path.  Mounts use the
harness of test_mount.py; latency is injected with
tests/faults/s3_fault_proxy.py in front of moto.  Ends with
"python: N passed, N failed".

- correctness: ImageFolder + 4-worker DataLoader + tierfs.torch.Sampler:
  the batches of two epochs equal those over a local copy;
- order: with 20 ms per request, a cold epoch guided by the sampler is
  prefetched in its order (one stream per rank on a shared mount); the
  speed-ups are printed, not asserted (speed goals live in bench/);
- durability: save(durable=True) then kill -9 of the daemon: the bucket
  holds the checkpoint byte for byte and torch.load reads it;
- errors: no tierfs mount, a dead daemon, bad paths, failed uploads;
- the examples (train_imagefolder.py, train_ddp.py, k8s-job.yaml).
"""
import errno
import io
import logging
import multiprocessing
import os
import signal
import subprocess
import sys
import tarfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(TOP, "tests", "faults"))
sys.path.insert(0, os.path.join(TOP, "python"))

import torch  # noqa: E402
import torch.utils.data as tud  # noqa: E402
import torchvision.transforms as T  # noqa: E402

import tierfs.torch  # noqa: E402
from faultlib import FaultProxy  # noqa: E402
from test_mount import BUCKET, data_for, poll, read, run_suite  # noqa: E402

EXAMPLES = os.path.join(TOP, "examples")


def py_env():
    e = dict(os.environ)
    e["PYTHONPATH"] = os.path.join(TOP, "python") + (
        ":" + e["PYTHONPATH"] if e.get("PYTHONPATH") else "")
    e.pop("AWS_CA_BUNDLE", None)
    return e


def sample_data(ctx, classes=10, per_class=40):
    """The examples' ImageFolder, made locally (the reference copy)."""
    d = os.path.join(ctx.work, "local-data")
    subprocess.run([sys.executable, os.path.join(EXAMPLES, "make_sample_data.py"), d,
                    "--classes", str(classes), "--per-class", str(per_class)],
                   check=True, stdout=subprocess.DEVNULL)
    return d


def upload_tree(bucket, src, prefix):
    n = 0
    for d, _, files in os.walk(src):
        for name in files:
            p = os.path.join(d, name)
            bucket.put(prefix + "/" + os.path.relpath(p, src), read(p))
            n += 1
    return n


def bucket_bytes(bucket, key):
    if bucket.kind == "local":
        try:
            with open(os.path.join(bucket.root, key), "rb") as f:
                return f.read()
        except FileNotFoundError:
            return None
    try:
        return bucket.s3.get_object(Bucket=BUCKET, Key=bucket.prefix + key)["Body"].read()
    except bucket.s3.exceptions.NoSuchKey:
        return None


def bucket_keys(bucket, prefix):
    if bucket.kind == "local":
        root = os.path.join(bucket.root, prefix)
        return sorted(os.path.relpath(os.path.join(d, f), bucket.root)
                      for d, _, fs in os.walk(root) for f in fs
                      if not f.startswith(".tierfs-tmp."))  # the backend's own
    r = bucket.s3.list_objects_v2(Bucket=BUCKET, Prefix=bucket.prefix + prefix)
    return sorted(o["Key"][len(bucket.prefix):] for o in r.get("Contents", []))


class Warnings(logging.Handler):
    """Collects the warnings of the logger tierfs.torch."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.msgs = []

    def emit(self, record):
        self.msgs.append(record.getMessage())

    def __enter__(self):
        logging.getLogger("tierfs.torch").addHandler(self)
        return self

    def __exit__(self, *a):
        logging.getLogger("tierfs.torch").removeHandler(self)


def epochs_of(root, epochs=2, workers=4):
    ds = tierfs.torch.ImageFolder(root, transform=T.ToTensor())
    sampler = tierfs.torch.Sampler(ds, seed=3)
    loader = tud.DataLoader(ds, batch_size=32, sampler=sampler, num_workers=workers)
    out = []
    for e in range(epochs):
        sampler.set_epoch(e)
        out.append([(x.clone(), y.clone()) for x, y in loader])
    return ds, out


def fail_on_hang(fn, timeout, what):
    """Run fn() on a thread; its result, or AssertionError if it has not
    returned after `timeout` seconds (the thread is left behind)."""
    res = {}

    def run():
        try:
            res["v"] = fn()
        except BaseException as e:  # noqa: BLE001
            res["e"] = e
    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(timeout)
    assert not t.is_alive(), "%s hung for %ds" % (what, timeout)
    if "e" in res:
        raise res["e"]
    return res.get("v")


# ---------------------------------------------------------------- tests

def t_imagefolder_batches_identical(ctx):
    """ImageFolder + tierfs.torch.Sampler + 4-worker DataLoader over the
    mount: every batch (images and labels) of 2 epochs equals the same
    batch over a local copy; the sampler told the mount each order."""
    local = sample_data(ctx)
    upload_tree(ctx.bucket, local, "data")
    m = ctx.mount("ifold").mount()
    try:
        with Warnings() as w:
            ds, got = epochs_of(os.path.join(m.mnt, "data"))
        assert not w.msgs, w.msgs
        assert len(ds) == 400 and len(ds.paths) == 400
        follow = m.stats()["follow"]
        assert follow["order_files"] == 400, follow
        assert follow["position"] > 0, follow
        with Warnings() as w:
            _, want = epochs_of(local)
        assert len(w.msgs) == 1 and "not on a tierfs mount" in w.msgs[0], w.msgs
        assert len(got) == len(want) == 2
        for e in range(2):
            assert len(got[e]) == len(want[e]) == 13, (len(got[e]), len(want[e]))
            for b, ((x1, y1), (x2, y2)) in enumerate(zip(got[e], want[e])):
                assert torch.equal(y1, y2), "epoch %d batch %d: labels differ" % (e, b)
                assert torch.equal(x1, x2), "epoch %d batch %d: images differ" % (e, b)
        assert not torch.equal(got[0][0][1], got[1][0][1]), "two epochs in the same order"
    finally:
        m.umount()


def small_files(ctx, n=300, prefix="small"):
    keys = []
    for i in range(n):
        key = "%s/c%d/f%04d.bin" % (prefix, i % 6, i)
        ctx.bucket.put(key, data_for(key, 5000 + (i * 7919) % 14000))
        keys.append(key)
    return keys


# ORDER_BACKEND: the order tests run on Ceph RGW (--backend rgw), behind
# the same proxy.  On moto a guided epoch is bound by moto itself (about
# 3 ms of CPU per GET in one Python process: 300 GETs take 0.7-1.0 s of
# its CPU), not by the prefetch, and measured 1.6x to 2.2x on this 2-core
# machine; on RGW 2.3x to 3.7x (300 files; the suite reads 400).
def slow_proxy(ctx):
    """The fault proxy in front of moto: 20 ms before every reply's headers."""
    return FaultProxy(ctx.bucket.env["TFS_S3_ENDPOINT"], ctx.work, "latency",
                      ["--rate", "latency=1", "--latency-ms", "20-20",
                       "--latency-where", "headers", "--seed", "1"])


def slow_mount(ctx, proxy, name):
    return ctx.mount(name, {"backend": {"endpoint": proxy.endpoint},
                            "prefetch": {"workers": "32"}}).mount()


def timed_epoch(root, sampler_kind, rank=None, num_replicas=None, seed=5):
    ds = tierfs.torch.FileDataset(root)
    if sampler_kind == "tierfs":
        sampler = tierfs.torch.Sampler(ds, seed=seed, rank=rank, num_replicas=num_replicas)
    elif num_replicas:
        sampler = tud.DistributedSampler(ds, num_replicas=num_replicas, rank=rank, seed=seed)
    else:
        sampler = tud.RandomSampler(ds, generator=torch.Generator().manual_seed(seed))
    loader = tud.DataLoader(ds, batch_size=4, sampler=sampler, num_workers=4,
                            collate_fn=lambda b: sum(len(x) for x in b))
    t0 = time.monotonic()
    n = sum(loader)
    return time.monotonic() - t0, n


def t_sampler_order(ctx):
    """20 ms per request (the fault proxy), 400 small files, a cold mount
    each time: an epoch with tierfs.torch.Sampler reads the same bytes as
    one with torch's RandomSampler, and the daemon followed its order:
    every file is in the order, most were prefetched ahead of the reader
    and opened in order.  The speed-up (2.3x to 3.7x on RGW on a quiet
    2-core machine) is printed, not asserted: a loaded machine measures
    less, and speed goals live in bench/ (bench/prefetch.sh)."""
    if ctx.bucket.kind != "rgw":
        return "skip"  # see ORDER_BACKEND
    keys = small_files(ctx, 400)
    total = sum(len(data_for(k, 5000 + (i * 7919) % 14000)) for i, k in enumerate(keys))
    proxy = slow_proxy(ctx)
    try:
        times = {}
        for kind in ("random", "tierfs"):
            m = slow_mount(ctx, proxy, "order-" + kind)
            try:
                with Warnings() as w:
                    times[kind], n = timed_epoch(os.path.join(m.mnt, "small"), kind)
                assert not w.msgs, w.msgs
                assert n == total, (kind, n, total)
                st = m.stats()
                follow = st["follow"]
                if kind == "tierfs":
                    assert follow["order_files"] == len(keys), follow
                    assert follow["prefetched_files"] > len(keys) // 2, follow
                    assert follow["opened_in_order"] >= len(keys) * 9 // 10, follow
                else:
                    assert follow["order_files"] == 0, follow
            finally:
                m.umount()
        assert proxy.stats()["faults"].get("latency", 0) >= 2 * len(keys)
    finally:
        proxy.stop()
    ratio = times["random"] / times["tierfs"]
    print("     cold epoch, 400 files, 20 ms/request: RandomSampler %.2fs, tierfs.torch.Sampler "
          "%.2fs (%.1fx, not asserted)" % (times["random"], times["tierfs"], ratio))


def rank_epoch(root, kind, rank, start, q):
    try:
        start.wait(60)
        q.put((rank, timed_epoch(root, kind, rank=rank, num_replicas=2)))
    except BaseException as e:  # noqa: BLE001
        q.put((rank, repr(e)))


def two_ranks(root, kind):
    """Two processes (ranks 0 and 1 of 2) read their halves at once."""
    mp = multiprocessing.get_context("fork")
    start = mp.Barrier(2)
    q = mp.Queue()
    ps = [mp.Process(target=rank_epoch, args=(root, kind, r, start, q)) for r in (0, 1)]
    # each process is its own writer of .tierfs-order (one stream each)
    for p in ps:
        p.start()
    res = dict(q.get(timeout=120) for _ in ps)
    for p in ps:
        p.join(30)
    for r in (0, 1):
        assert isinstance(res[r], tuple), "rank %d: %s" % (r, res[r])
    return {r: res[r][0] for r in (0, 1)}, sum(res[r][1] for r in (0, 1))


def t_two_ranks_order(ctx):
    """Two ranks (two processes, DistributedSampler's split, each its own
    order) on one cold mount, 20 ms per request: the daemon follows one
    order per process.  With tierfs.torch.Sampler there are two streams of
    300 files, each prefetched ahead of its rank and opened in its order;
    unguided (torch's DistributedSampler) there is no order.  Both read
    every byte.  The per-rank speed-ups are printed, not asserted (1.3x
    on a loaded machine, 1.6x and more on a quiet one; bench/ holds speed
    goals)."""
    if ctx.bucket.kind != "rgw":
        return "skip"  # see ORDER_BACKEND
    keys = small_files(ctx, 600)
    proxy = slow_proxy(ctx)
    try:
        times = {}
        for kind in ("random", "tierfs"):
            m = slow_mount(ctx, proxy, "ranks-" + kind)
            try:
                times[kind], n = two_ranks(os.path.join(m.mnt, "small"), kind)
                assert n == sum(len(data_for(k, 5000 + (i * 7919) % 14000))
                                for i, k in enumerate(keys)), n
                follow = m.stats()["follow"]
                if kind == "tierfs":
                    streams = follow["streams"]
                    assert len(streams) == 2, follow
                    for s in streams:
                        assert s["files"] == len(keys) // 2, s
                        assert s["prefetched_files"] > len(keys) // 4, s
                        assert s["opened_in_order"] >= len(keys) // 2 * 9 // 10, s
                else:
                    assert follow["order_files"] == 0, follow
            finally:
                m.umount()
    finally:
        proxy.stop()
    ratios = [times["random"][r] / times["tierfs"][r] for r in (0, 1)]
    print("     cold epoch, 2 ranks x 300 files, 20 ms/request: unguided %.2fs/%.2fs, "
          "tierfs.torch.Sampler %.2fs/%.2fs (%.1fx, %.1fx, not asserted)"
          % (times["random"][0], times["random"][1], times["tierfs"][0], times["tierfs"][1],
             ratios[0], ratios[1]))


def kill_daemon(m):
    st = m.stats()
    gen = st["keeper"]["generation"]
    os.kill(st["pid"], signal.SIGKILL)

    def serving():
        try:
            k = m.stats()["keeper"]
        except AssertionError:
            return None
        return k if k["generation"] > gen and k["serving_since_ns"] else None
    return poll(serving, 20, "a new daemon after kill -9")


def t_durable_save_kill9(ctx):
    """save(durable=True) returns once the bucket has the checkpoint (the
    mount delays uploads by 1 s: save(durable=False) returns before),
    then kill -9 of the daemon: the bucket still holds it byte for byte,
    torch.load reads it, and no temporary object is left."""
    m = ctx.mount("durable", {"writeback": {"delay": "1s"}}).mount()
    try:
        os.makedirs(os.path.join(m.mnt, "ckpt"))
        state = {"w": torch.arange(300_000, dtype=torch.float32), "step": 7}
        fast = os.path.join(m.mnt, "ckpt", "fast.pt")
        tierfs.torch.save(state, fast)
        assert os.getxattr(fast, "user.tierfs.upload") == b"pending"
        assert bucket_bytes(ctx.bucket, "ckpt/fast.pt") is None, "durable=False waited"

        path = os.path.join(m.mnt, "ckpt", "model.pt")
        t0 = time.monotonic()
        tierfs.torch.save(state, path, durable=True, timeout=60)
        took = time.monotonic() - t0
        data = read(path)
        assert bucket_bytes(ctx.bucket, "ckpt/model.pt") == data, "not in the bucket at return"
        assert took >= 0.9, "returned in %.2fs, before the 1 s write-back delay" % took
        kill_daemon(m)
        got = bucket_bytes(ctx.bucket, "ckpt/model.pt")
        assert got == data, "the bucket's checkpoint differs after kill -9"
        back = torch.load(io.BytesIO(got))
        assert back["step"] == 7 and torch.equal(back["w"], state["w"])
        assert read(path) == data
        # Overwriting keeps readers whole: the new one replaces the old.
        state["step"] = 8
        tierfs.torch.save(state, path, durable=True, timeout=60)
        assert torch.load(io.BytesIO(bucket_bytes(ctx.bucket, "ckpt/model.pt")))["step"] == 8
        # kill -9 while save(durable=True) waits: it returns once the next
        # daemon has uploaded it.
        other = os.path.join(m.mnt, "ckpt", "during.pt")
        res = {}
        t = threading.Thread(target=lambda: res.update(
            r=tierfs.torch.save(state, other, durable=True, timeout=60)))
        t.start()
        poll(lambda: os.path.exists(other), 20, "the checkpoint to be renamed into place")
        assert t.is_alive() and bucket_bytes(ctx.bucket, "ckpt/during.pt") is None
        kill_daemon(m)
        t.join(60)
        assert not t.is_alive() and "r" in res, "save(durable=True) across kill -9"
        assert bucket_bytes(ctx.bucket, "ckpt/during.pt") == read(other)
        r = subprocess.run([m.tierfs, "flush", m.mnt], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        keys = [k for k in bucket_keys(ctx.bucket, "ckpt/") if not k.endswith("/")]
        assert keys == ["ckpt/during.pt", "ckpt/fast.pt", "ckpt/model.pt"], keys
        assert sorted(os.listdir(os.path.join(m.mnt, "ckpt"))) == ["during.pt", "fast.pt",
                                                                  "model.pt"]
    finally:
        m.umount()


def t_durable_save_uploads_once(ctx):
    """save() renames the checkpoint into place while the file is still
    open: its upload starts at close, so it is made once, under its name.
    Renamed after the close, the upload of the temporary name could start
    first (writeback.delay = 0), to be cancelled or wasted."""
    m = ctx.mount("once").mount()
    real_replace = os.replace
    open_at_rename = []

    def spy(src, dst, *args, **kwargs):
        fds = "/proc/self/fd"
        targets = []
        for fd in os.listdir(fds):
            try:
                targets.append(os.readlink(os.path.join(fds, fd)))
            except OSError:
                pass  # the listing's own fd, closed meanwhile
        open_at_rename.append(os.path.abspath(src) in targets)
        return real_replace(src, dst, *args, **kwargs)
    try:
        os.makedirs(os.path.join(m.mnt, "once"))
        path = os.path.join(m.mnt, "once", "model.pt")
        b0 = m.stats()["backend"]
        os.replace = spy
        try:
            tierfs.torch.save({"w": torch.arange(100_000, dtype=torch.float32)}, path,
                              durable=True, timeout=60)
        finally:
            os.replace = real_replace
        assert open_at_rename == [True], "renamed after the close: %s" % open_at_rename
        b1 = m.stats()["backend"]
        size = os.stat(path).st_size
        assert bucket_bytes(ctx.bucket, "once/model.pt") == read(path)
        assert b1["copy"]["requests"] == b0["copy"]["requests"], "the rename copied in the bucket"
        sent = b1["put"]["payload_bytes"] - b0["put"]["payload_bytes"]
        assert sent == size, "%d bytes sent for a checkpoint of %d" % (sent, size)
        keys = [k for k in bucket_keys(ctx.bucket, "once/") if not k.endswith("/")]
        assert keys == ["once/model.pt"], keys
    finally:
        m.umount()


def t_durable_save_errors(ctx):
    """Uploads that fail (503 for every PUT): save(durable=True, timeout=)
    raises TimeoutError while they are retried, OSError(EIO) with the
    daemon's message once they give up (writeback.max_retries)."""
    if ctx.bucket.kind == "local":
        return "skip"
    proxy = FaultProxy(ctx.bucket.env["TFS_S3_ENDPOINT"], ctx.work, "puts",
                       ["--rate", "503=1", "--methods", "PUT,POST", "--seed", "2"])
    m = ctx.mount("durerr", {"backend": {"endpoint": proxy.endpoint},
                             "writeback": {"max_retries": "3", "retry_base": "500ms",
                                           "retry_max": "500ms"}}).mount()
    try:
        path = os.path.join(m.mnt, "ckpt.pt")
        t0 = time.monotonic()
        try:
            tierfs.torch.save({"a": 1}, path, durable=True, timeout=0.3)
            raise AssertionError("a save whose upload fails returned")
        except TimeoutError as e:
            assert "pending" in str(e) and path in str(e), e
        assert 0.3 <= time.monotonic() - t0 < 10
        try:
            fail_on_hang(lambda: tierfs.torch.wait_uploaded(path), 60, "wait_uploaded")
            raise AssertionError("a failed upload was taken as clean")
        except OSError as e:
            assert e.errno == errno.EIO and "failed" in e.strerror, e
        assert proxy.stats()["faults"].get("503", 0) >= 3
    finally:
        try:
            proxy.off()
            m.umount()
        finally:
            proxy.stop()


def t_errors(ctx):
    """No tierfs mount: the sampler warns once and shuffles; bad paths
    raise at once; a daemon that reports no uploads is a clear error; a
    dead mount (keeper and daemon killed): the sampler warns and goes on,
    save() raises, nothing hangs."""
    local = os.path.join(ctx.work, "plain")
    paths = []
    for i in range(20):
        p = os.path.join(local, "d%d" % (i % 3), "f%02d" % i)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(b"%d" % i)
        paths.append(p)
    with Warnings() as w:
        s = tierfs.torch.Sampler(paths, seed=1)
        e0, e1 = list(s), list(s)
    assert sorted(e0) == list(range(20)) and e0 != e1, (e0, e1)
    assert e0 == torch.randperm(20, generator=torch.Generator().manual_seed(1)).tolist()
    assert len(w.msgs) == 1 and "not on a tierfs mount" in w.msgs[0], w.msgs
    with Warnings() as w:
        ds = tierfs.torch.FileDataset(local)
        assert ds.paths == sorted(paths)
        got = sorted(b for b in tud.DataLoader(ds, batch_size=None, num_workers=2,
                                               sampler=tierfs.torch.Sampler(ds)))
        assert got == sorted(b"%d" % i for i in range(20))
    assert len(w.msgs) == 1, w.msgs
    # durable=True off tierfs: fsynced, no error.
    tierfs.torch.save([1, 2], os.path.join(local, "x.pt"), durable=True)
    assert torch.load(os.path.join(local, "x.pt")) == [1, 2]
    for bad, err in ((os.path.join(local, "missing", "x.pt"), FileNotFoundError),
                     (os.path.join(local, "d0", "f00", "x.pt"), NotADirectoryError)):
        try:
            tierfs.torch.save([1], bad)
            raise AssertionError("save to %s did not raise" % bad)
        except err:
            pass
    assert sorted(os.listdir(local)) == ["d0", "d1", "d2", "x.pt"], os.listdir(local)
    # A daemon that does not report uploads (getxattr gives ENODATA).
    real = os.getxattr
    os.getxattr = lambda p, n: (_ for _ in ()).throw(OSError(errno.ENODATA, "No data", p))
    try:
        tierfs.torch.wait_uploaded(os.path.join(local, "x.pt"))
        raise AssertionError("ENODATA taken as clean")
    except OSError as e:
        assert e.errno == errno.ENOTSUP and "does not report uploads" in e.strerror, e
    finally:
        os.getxattr = real
    # A dataset whose files cannot be named: one warning, still shuffles.
    with Warnings() as w:
        s = tierfs.torch.Sampler(tud.TensorDataset(torch.zeros(3)))
        assert sorted(list(s)) == sorted(list(s)) == [0, 1, 2]
    assert len(w.msgs) == 1 and "cannot tell the file paths" in w.msgs[0], w.msgs

    # A dead mount: keeper and daemon killed.
    ctx.bucket.put("ds/a.bin", b"a")
    ctx.bucket.put("ds/b.bin", b"b")
    m = ctx.mount("dead").mount()
    try:
        ds = tierfs.torch.FileDataset(os.path.join(m.mnt, "ds"))
        s = tierfs.torch.Sampler(ds)
        assert len(list(s)) == 2
        st = m.stats()
        os.kill(st["keeper"]["pid"], signal.SIGKILL)
        os.kill(st["pid"], signal.SIGKILL)
        with Warnings() as w:
            idx = fail_on_hang(lambda: list(s), 20, "the sampler on a dead mount")
        assert sorted(idx) == [0, 1]
        assert len(w.msgs) == 1 and "cannot write the order" in w.msgs[0], w.msgs
        try:
            fail_on_hang(lambda: tierfs.torch.save([1], os.path.join(m.mnt, "x.pt"), durable=True),
                         20, "save on a dead mount")
            raise AssertionError("save on a dead mount returned")
        except OSError as e:
            assert e.errno in (errno.ENOTCONN, errno.ECONNABORTED), e
    finally:
        subprocess.run(["fusermount3", "-uz", m.mnt], capture_output=True)


def t_sampler_semantics(ctx):
    """Sampler yields what torch's DistributedSampler yields (sizes,
    padding, drop_last, shuffle, epochs) and, alone, one randperm of
    seed + epoch; set_epoch() picks the next epoch, iterating moves on.
    Names the manifest parser would read otherwise ('#', '{', spaces) go
    into .tierfs-order as JSON, and the daemon takes every one; a file
    reached through a symlinked directory is named by its real path.
    `import tierfs.torch` does not import torchvision."""
    with Warnings():  # lists of names that are not files: warned, not printed
        for n in (1, 7, 10, 33):
            ds = ["f%d" % i for i in range(n)]
            for reps in (1, 2, 3, 4):
                for drop in (False, True):
                    for shuffle in (True, False):
                        for rank in range(reps):
                            mine = tierfs.torch.Sampler(ds, seed=9, num_replicas=reps, rank=rank,
                                                        drop_last=drop, shuffle=shuffle)
                            ref = tud.DistributedSampler(ds, seed=9, num_replicas=reps, rank=rank,
                                                         drop_last=drop, shuffle=shuffle)
                            assert len(mine) == len(ref), (n, reps, drop)
                            for e in range(3):
                                mine.set_epoch(e)
                                ref.set_epoch(e)
                                assert list(mine) == list(ref), (n, reps, drop, shuffle, rank, e)
        s = tierfs.torch.Sampler(list(range(50)), seed=4)
        perm = [torch.randperm(50, generator=torch.Generator().manual_seed(4 + e)).tolist()
                for e in range(4)]
        assert list(s) == perm[0] and list(s) == perm[1]
        s.set_epoch(3)
        assert list(s) == perm[3] and list(s) == torch.randperm(
            50, generator=torch.Generator().manual_seed(8)).tolist()
        try:
            tierfs.torch.Sampler(list(range(5)), num_replicas=2)
            raise AssertionError("num_replicas without rank accepted")
        except ValueError:
            pass
        try:
            tierfs.torch.Sampler(list(range(5)), num_replicas=2, rank=2)
            raise AssertionError("rank 2 of 2 accepted")
        except ValueError:
            pass

    names = ["#hash.bin", "{brace}.bin", " lead.bin", "trail.bin ", "plain.bin", ".hidden.bin",
             "caf\u00e9.bin"]
    for name in names:
        ctx.bucket.put("odd/" + name, name.encode())
    m = ctx.mount("odd").mount()
    try:
        link = os.path.join(ctx.work, "link")
        os.symlink(os.path.join(m.mnt, "odd"), link)
        ds = tierfs.torch.FileDataset(link)
        assert len(ds) == len(names), ds.paths
        with Warnings() as w:
            got = sorted(tud.DataLoader(ds, batch_size=None, num_workers=2,
                                        sampler=tierfs.torch.Sampler(ds)))
        assert not w.msgs, w.msgs
        assert got == sorted(n.encode() for n in names)
        follow = m.stats()["follow"]
        assert follow["order_files"] == len(names) and follow["bad_lines"] == 0, follow
        assert follow["opened_in_order"] == len(names), follow
    finally:
        m.umount()
    r = subprocess.run([sys.executable, "-c", "import sys, tierfs.torch; "
                        "sys.exit('torchvision' in sys.modules)"], env=py_env())
    assert r.returncode == 0, "import tierfs.torch imported torchvision"


def make_shards(ctx, n_shards=6, per_shard=7):
    d = os.path.join(ctx.work, "shards")
    os.makedirs(d)
    want = {}
    for s in range(n_shards):
        with tarfile.open(os.path.join(d, "train-%03d.tar" % s), "w") as tf:
            for i in range(per_shard):
                key = "s%03d/%06d" % (s, i)
                sample = {"png": data_for(key + "png", 3000 + i), "cls": b"%d" % (i % 3),
                          "meta.json": b'{"i": %d}' % i}
                want[key] = sample
                for ext, data in sample.items():
                    ti = tarfile.TarInfo(key + "." + ext)
                    ti.size = len(data)
                    tf.addfile(ti, io.BytesIO(data))
    return d, want


def t_tar_shards(ctx):
    """TarShards over the mount: every sample once, grouped by key, over 3
    DataLoader workers and over two ranks; each worker tells the mount its
    shards' order."""
    src, want = make_shards(ctx)
    upload_tree(ctx.bucket, src, "shards")
    m = ctx.mount("tar").mount()
    try:
        pattern = os.path.join(m.mnt, "shards", "train-{000..005}.tar")
        ds = tierfs.torch.TarShards(pattern, seed=4)
        with Warnings() as w:
            got = list(tud.DataLoader(ds, batch_size=None, num_workers=3))
        assert not w.msgs, w.msgs
        assert len(got) == len(want), (len(got), len(want))
        assert {k: v for k, v in got} == want
        follow = m.stats()["follow"]
        if "streams" in follow:  # a daemon that follows one order per process
            assert sorted(st["files"] for st in follow["streams"]) == [2, 2, 2], follow
        else:  # one order per mount: the last worker's two shards
            assert follow["order_files"] == 2, follow
        # Two ranks, no workers: a disjoint split that covers everything.
        seen = []
        for rank in (0, 1):
            r = tierfs.torch.TarShards(pattern, seed=4, num_replicas=2, rank=rank)
            r.set_epoch(1)
            seen += [k for k, _ in r]
        assert sorted(seen) == sorted(want)
        # Epochs: a new shard order each iteration.
        ds0 = tierfs.torch.TarShards(pattern, seed=4)
        assert ds0.shards_for(0) != ds0.shards_for(1)
        assert sorted(ds0.shards_for(0)) == sorted(ds0.shards)
    finally:
        m.umount()


def run_example(args, timeout):
    t0 = time.monotonic()
    r = subprocess.run([sys.executable] + args, capture_output=True, text=True, timeout=timeout,
                       env=py_env(), cwd=EXAMPLES)
    took = time.monotonic() - t0
    assert r.returncode == 0, "%s: exit %d\n%s\n%s" % (args[0], r.returncode, r.stdout, r.stderr)
    return r, took


def t_examples_run(ctx):
    """examples/make_sample_data.py into the bucket, then
    train_imagefolder.py (4 workers, 2 epochs, durable checkpoints) and
    train_ddp.py (2 ranks, gloo) on the mount, each within its budget;
    their checkpoints are in the bucket and load."""
    if ctx.bucket.kind == "local":
        return "skip"
    local = sample_data(ctx)
    upload_tree(ctx.bucket, local, "sample")
    m = ctx.mount("examples").mount()
    try:
        data, ckpt = os.path.join(m.mnt, "sample"), os.path.join(m.mnt, "ckpt")
        r, took = run_example(["train_imagefolder.py", "--data", data, "--ckpt", ckpt,
                               "--epochs", "2"], 120)
        assert r.stdout.count("400 images") == 2, r.stdout
        assert "not on a tierfs mount" not in r.stderr, r.stderr
        print("     train_imagefolder.py: %.1fs" % took)
        assert took < 60, took
        for e in range(2):
            b = bucket_bytes(ctx.bucket, "ckpt/epoch-%d.pt" % e)
            assert b is not None and torch.load(io.BytesIO(b))["epoch"] == e
        r, took = run_example(["train_ddp.py", "--data", data, "--ckpt", ckpt + "-ddp",
                               "--epochs", "2"], 180)
        assert r.stdout.count("rank 0 read 200 images") == 2, r.stdout
        print("     train_ddp.py (2 ranks): %.1fs" % took)
        assert took < 90, took
        b = bucket_bytes(ctx.bucket, "ckpt-ddp/epoch-1.pt")
        assert b is not None and "model" in torch.load(io.BytesIO(b))
    finally:
        m.umount()


def t_k8s_job_yaml(ctx):
    """examples/k8s-job.yaml: a CSI Job and a FlexVolume Job, each mounting
    the dataset and the checkpoints and running train_imagefolder.py on
    their mount paths; volume options from docs/kubernetes.md's table."""
    if ctx.bucket.kind != "local":
        return "skip"
    import yaml
    with open(os.path.join(EXAMPLES, "k8s-job.yaml")) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    with open(os.path.join(TOP, "docs", "kubernetes.md")) as f:
        options = set()
        for line in f:
            if line.startswith("| `") and "|" in line[3:]:
                options.add(line.split("`")[1])
    allow = {}
    for drv, d in (("csi.tierfs.io", "csi"), ("tierfs/tierfs", "flexvolume")):
        with open(os.path.join(TOP, d, "deploy", "configmap.yaml")) as f:
            line = [x for x in f if x.strip().startswith("allow =")][0]
        allow[drv] = {o.strip() for o in line.split("=", 1)[1].split(",")}
        assert allow[drv] <= options, (drv, allow[drv] - options)
    jobs = [d for d in docs if d.get("kind") == "Job"]
    drivers = set()
    for job in jobs:
        pod = job["spec"]["template"]["spec"]
        assert pod["restartPolicy"] in ("Never", "OnFailure"), pod["restartPolicy"]
        vols = {v["name"]: v for v in pod["volumes"]}
        c = pod["containers"][0]
        cmd = " ".join(c["command"] + c.get("args", []))
        assert "train_imagefolder.py" in cmd, cmd
        mounts = {vm["name"]: vm["mountPath"] for vm in c["volumeMounts"]}
        for flag in ("--data", "--ckpt"):
            val = cmd.split(flag + " ", 1)[1].split()[0]
            assert any(val == p or val.startswith(p + "/") for p in mounts.values()), (flag, val)
        for name in mounts:
            v = vols[name]
            src = (v.get("csi") or v.get("flexVolume") or v.get("persistentVolumeClaim")
                   or v.get("emptyDir"))
            assert src is not None, v
            if "csi" in v:
                drv = v["csi"]["driver"]
                attrs = v["csi"].get("volumeAttributes", {})
            elif "flexVolume" in v:
                drv = v["flexVolume"]["driver"]
                attrs = v["flexVolume"].get("options", {})
            else:
                continue
            drivers.add(drv)
            for k, val in attrs.items():
                assert k in allow[drv], "volume option %s: not in the shipped [pod] allow" % k
                assert isinstance(val, str), (k, val)
    assert drivers == {"csi.tierfs.io", "tierfs/tierfs"}, drivers
    assert len(jobs) == 2, [d.get("kind") for d in docs]


TESTS = [
    ("imagefolder_batches_identical", t_imagefolder_batches_identical),
    ("sampler_order", t_sampler_order),
    ("two_ranks_order", t_two_ranks_order),
    ("durable_save_kill9", t_durable_save_kill9),
    ("durable_save_uploads_once", t_durable_save_uploads_once),
    ("durable_save_errors", t_durable_save_errors),
    ("sampler_semantics", t_sampler_semantics),
    ("errors", t_errors),
    ("tar_shards", t_tar_shards),
    ("examples_run", t_examples_run),
    ("k8s_job_yaml", t_k8s_job_yaml),
]


def main():
    return run_suite("python", TESTS)


if __name__ == "__main__":
    sys.exit(main())
