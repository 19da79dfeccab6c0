#!/usr/bin/env python3
"""test_pyapi.py - the tierfs Python package's core (python/tierfs:
Mount, its errors, tierfs.dask) against real mounts and against fake
control sockets.

    /usr/bin/python3 test_pyapi.py TIERFS --backend local|moto [--only NAME]

Runs under Debian's /usr/bin/python3 (the Dask test needs python3-dask and
python3-distributed) with the tree's python/ first on sys.path.  Uses the
harness of test_mount.py (Bucket, Mount).  Ends with
"pyapi: N passed, N failed".
"""
import errno
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(TOP, "python"))

import tierfs  # noqa: E402
from test_mount import data_for, poll, read, run_suite  # noqa: E402

MIB = 1 << 20


def dataset(bucket, n=40, size=(1000, 100_000), prefix="ds"):
    files = {}
    for i in range(n):
        key = "%s/c%d/f%03d.bin" % (prefix, i % 4, i)
        files[key] = data_for(key, size[0] + (i * 7919) % (size[1] - size[0]))
        bucket.put(key, files[key])
    return files


def in_bucket(bucket, key):
    """The object's bytes, read behind tierfs's back."""
    if bucket.kind == "local":
        with open(os.path.join(bucket.root, key), "rb") as f:
            return f.read()
    from test_mount import BUCKET
    return bucket.s3.get_object(Bucket=BUCKET, Key=bucket.prefix + key)["Body"].read()


def raises(exc, fn, *args, **kw):
    """fn(*args, **kw) raises `exc`; returns the exception."""
    try:
        fn(*args, **kw)
    except exc as e:
        return e
    raise AssertionError("%s did not raise %s" % (getattr(fn, "__name__", fn), exc.__name__))


def t_stats_and_warmup_with_progress(ctx):
    files = dataset(ctx.bucket)
    m = ctx.mount("warm").mount()
    try:
        t = tierfs.Mount(m.mnt)
        assert t.root == m.mnt, (t.root, m.mnt)
        st = t.stats()
        assert st["pid"] == m.stats()["pid"], "stats() is not the daemon's"
        assert st["ssd"]["objects"] == 0, st["ssd"]
        seen = []
        res = t.warmup(["ds"], progress=seen.append, jobs=4)
        assert res["fetched_files"] == len(files) and res["failed_files"] == 0, res
        assert res["fetched_bytes"] == sum(map(len, files.values())), res
        assert seen, "no progress reports"
        assert all("files_done" in p and "bytes_total" in p for p in seen), seen[:3]
        assert seen[-1]["files_done"] == len(files) and seen[-1]["listing_done"], seen[-1]
        # Cached now: an epoch makes no backend GET, a second warm-up fetches nothing.
        before = m.gets()
        for k, v in files.items():
            assert read(os.path.join(m.mnt, k)) == v, k
        assert m.gets() == before, "reads after the warm-up went to the backend"
        res = t.warmup(os.path.join(m.mnt, "ds", "c1"))  # one absolute path, no list
        assert res["fetched_files"] == 0 and res["cached_files"] == len(files) // 4, res
        assert t.warmup()["cached_files"] == len(files)  # no paths: the whole mount
        assert t.warmup([])["files_total"] == 0  # an empty list: nothing
        # An exception in the progress callback ends the call and propagates.
        class Stop(Exception):
            pass

        def stop(p):
            raise Stop()
        raises(Stop, t.warmup, ["ds"], progress=stop)
        assert t.stats()["pid"] == st["pid"]  # the connection is closed; the daemon serves on
    finally:
        m.umount()


def t_pin_unpin_evict(ctx):
    files = dataset(ctx.bucket, n=12, size=(100_000, 300_000))
    keep = sorted(k for k in files if "/c0/" in k)
    m = ctx.mount("pin").mount()
    try:
        t = tierfs.Mount(os.path.join(m.mnt, "ds"))
        res = t.pin([os.path.join(m.mnt, k) for k in keep])
        assert res["fetched_files"] == len(keep), res
        assert t.stats()["ssd"]["pinned_bytes"] == sum(len(files[k]) for k in keep)
        t.unpin(["ds/c0"])  # a key relative to the mount root
        assert t.stats()["ssd"]["pinned_bytes"] == 0
        for k, v in files.items():
            assert read(os.path.join(m.mnt, k)) == v
        n = m.gets()
        res = t.evict(["ds"])
        assert res["files_done"] == len(files) and res["failed_files"] == 0, res
        os.system("sync; echo 3 > /proc/sys/vm/drop_caches")
        for k, v in files.items():
            assert read(os.path.join(m.mnt, k)) == v
        assert m.gets() == 2 * n, "evicted data was served from the cache"
    finally:
        m.umount()


def t_flush_after_writes(ctx):
    # Nothing uploads by itself for a minute: only flush() sends it now.
    m = ctx.mount("flush", {"writeback": {"delay": "60s"}}).mount()
    try:
        t = tierfs.Mount(m.mnt)
        data = {"ckpt/%d.pt" % i: data_for("w%d" % i, 300_000 + i) for i in range(5)}
        os.makedirs(os.path.join(m.mnt, "ckpt"))
        for k, v in data.items():
            with open(os.path.join(m.mnt, k), "wb") as f:
                f.write(v)
        pending = t.stats()["writeback"]["pending_files"]
        assert pending >= len(data), pending  # and the directory
        seen = []
        t0 = time.monotonic()
        res = t.flush(progress=seen.append)
        assert res == {"files": 0, "bytes": 0}, res
        assert time.monotonic() - t0 < 30
        assert t.stats()["writeback"]["pending_files"] == 0
        for k, v in data.items():
            assert in_bucket(ctx.bucket, k) == v, "%s is not in the bucket byte-exact" % k
        assert t.flush(timeout=5) == {"files": 0, "bytes": 0}  # nothing left: at once
    finally:
        m.umount()


def t_flush_across_daemon_restart(ctx):
    """kill -9 of the daemon while flush() waits: the keeper starts the
    next daemon on the same mount, flush() asks it, and returns once the
    file is in the bucket."""
    if ctx.bucket.kind != "local":
        return "skip"
    m = ctx.mount("flushkill", {"writeback": {"delay": "60s", "retry_base": "50ms",
                                              "retry_max": "200ms", "max_retries": "1000"}}).mount()
    try:
        t = tierfs.Mount(m.mnt)
        data = data_for("ckpt", 200_000)
        with open(os.path.join(m.mnt, "ckpt.pt"), "wb") as f:
            f.write(data)
        # A directory where the file goes in the bucket, behind the mount's
        # back: the upload flush() starts fails (and is retried) until it goes.
        block = os.path.join(ctx.bucket.root, "ckpt.pt")
        os.makedirs(os.path.join(block, "in-the-way"))
        result = {}

        def flusher():
            try:
                result["res"] = t.flush(timeout=60)
            except Exception as e:  # noqa: BLE001
                result["err"] = e
        th = threading.Thread(target=flusher)
        th.start()
        poll(lambda: t.stats()["writeback"]["attempt_failures"] > 0, 20, "an upload to fail")
        assert th.is_alive(), result  # flush() waits on the daemon
        st = t.stats()
        os.kill(st["pid"], signal.SIGKILL)
        poll(lambda: dead(st["pid"]), 10, "the daemon to die")

        def generation():
            try:
                return t.stats()["keeper"]["generation"]
            except OSError:  # between the two daemons: no one answers yet
                return None
        # the next daemon serves; then the way is cleared
        poll(lambda: generation() == st["keeper"]["generation"] + 1, 20, "the next daemon")
        os.rmdir(os.path.join(block, "in-the-way"))
        os.rmdir(block)
        th.join(60)
        assert not th.is_alive(), "flush() did not return"
        assert result.get("res") == {"files": 0, "bytes": 0}, result
        assert in_bucket(ctx.bucket, "ckpt.pt") == data
    finally:
        m.umount()


def t_reload(ctx):
    m = ctx.mount("reload").mount()
    try:
        t = tierfs.Mount(m.mnt)
        with open(m.conf) as f:
            conf = f.read()
        with open(m.conf, "w") as f:
            f.write(conf.replace("level = info", "level = debug"))
        res = t.reload()
        assert res["config"] == m.conf, res
        assert any(a.startswith("log.level") for a in res["applied"]), res
        assert t.stats()["log"]["level"] == "debug"
        with open(m.conf, "w") as f:
            f.write(conf.replace("size = 64M", "size = 12Q"))
        e = raises(tierfs.Error, t.reload)
        assert e.errno == errno.EINVAL, e
        assert "invalid size '12Q'" in str(e) and m.conf in str(e), str(e)
        assert t.stats()["reload"] == {"ok": 1, "failed": 1}
    finally:
        m.umount()


def t_mount_found_from_any_path(ctx):
    ctx.bucket.put("a/b/c.bin", b"abc")
    m = ctx.mount("with space").mount()  # mountinfo shows it as with\040space
    try:
        sub = os.path.join(m.mnt, "a", "b")
        t = tierfs.Mount(sub)
        assert t.root == m.mnt, (t.root, m.mnt)
        assert tierfs.mount_root(os.path.join(sub, "c.bin")) == m.mnt
        assert tierfs.mount_root(os.path.join(sub, "not-yet")) == m.mnt  # need not exist
        assert tierfs.relpath(os.path.join(sub, "c.bin")) == "a/b/c.bin"
        assert tierfs.relpath(m.mnt) == ""
        cwd = os.getcwd()
        os.chdir(sub)
        try:
            assert tierfs.relpath("c.bin") == "a/b/c.bin"  # from the current directory
        finally:
            os.chdir(cwd)
        # a symbolic link into the mount from outside
        link = os.path.join(ctx.work, "link")
        os.symlink(sub, link)
        assert tierfs.relpath(os.path.join(link, "c.bin")) == "a/b/c.bin"
        assert t.key(os.path.join(link, "c.bin")) == "a/b/c.bin"
        assert t.key("a/./b/../b/c.bin") == "a/b/c.bin" and t.key("") == ""
        assert t.stats()["pid"] == m.stats()["pid"]
        assert t.warmup([os.path.join(link, "c.bin")])["fetched_files"] == 1
        # TIERFS_CONTROL_SOCKET names the socket outright (a pod, another namespace)
        os.environ["TIERFS_CONTROL_SOCKET"] = os.path.join(ctx.work, "elsewhere.sock")
        try:
            assert tierfs.Mount(m.mnt).socket == os.environ["TIERFS_CONTROL_SOCKET"]
            raises(tierfs.DaemonUnavailable, tierfs.Mount(m.mnt).stats)
        finally:
            del os.environ["TIERFS_CONTROL_SOCKET"]
        assert tierfs.Mount(m.mnt, socket=t.socket).stats()["pid"] == m.stats()["pid"]
    finally:
        m.umount()


def t_not_tierfs(ctx):
    for p in (ctx.work, "/", "/proc/self", os.path.join(ctx.work, "missing", "x")):
        e = raises(tierfs.NotTierfsError, tierfs.Mount, p)
        assert isinstance(e, tierfs.Error) and isinstance(e, OSError), type(e)
        assert e.errno == errno.ENODEV and "not inside a tierfs mount" in str(e), str(e)
        raises(tierfs.NotTierfsError, tierfs.relpath, p)
    # A path outside the mount given to a mount's method.
    m = ctx.mount("outside").mount()
    try:
        t = tierfs.Mount(m.mnt)
        e = raises(tierfs.Error, t.warmup, [ctx.work])
        assert e.errno == errno.EXDEV and "not inside the tierfs mount" in str(e), str(e)
        e = raises(tierfs.Error, t.evict, ["../x"])
        assert e.errno == errno.EXDEV, e
    finally:
        m.umount()


def t_bad_paths_raise_daemon_message(ctx):
    files = dataset(ctx.bucket, n=4)
    m = ctx.mount("badpath").mount()
    try:
        t = tierfs.Mount(m.mnt)
        e = raises(tierfs.Error, t.warmup, ["ds", "ds/missing.bin", os.path.join(m.mnt, "nope")])
        assert e.errno == errno.ENOENT, e
        msg = str(e)
        assert "2 file(s) failed" in msg, msg
        assert "ds/missing.bin: no such file or directory" in msg, msg
        assert "nope: no such file or directory" in msg, msg
        assert e.result["fetched_files"] == len(files), e.result  # the good ones are warm
        assert len(e.result["failures"]) == 2, e.result
        e = raises(tierfs.Error, t.warmup, manifest=os.path.join(ctx.work, "no-manifest"))
        assert e.errno == errno.ENOENT and "manifest" in str(e), str(e)
        e = raises(tierfs.Error, t.warmup, ["ds"], jobs=1000)
        assert e.errno == errno.EINVAL and "-j must be 1 to" in str(e), str(e)
        e = raises(tierfs.Error, t.warmup, ["ds"], pin=True, tier="ram")
        assert e.errno == errno.EINVAL and "SSD tier" in str(e), str(e)
    finally:
        m.umount()


def dead(pid):
    try:
        return (open("/proc/%d/stat" % pid).read().split()[2] == "Z" and
                len(os.listdir("/proc/%d/task" % pid)) <= 1)
    except FileNotFoundError:
        return True


def t_dead_daemon(ctx):
    dataset(ctx.bucket, n=2)
    m = ctx.mount("dead").mount()
    t = tierfs.Mount(m.mnt)
    st = t.stats()
    pid, keeper = st["pid"], st.get("keeper", {}).get("pid")
    try:
        # kill -9 of the keeper (which would start a new daemon) and the daemon
        if keeper:
            os.kill(keeper, signal.SIGKILL)
            poll(lambda: dead(keeper), 10, "the keeper to die")
        os.kill(pid, signal.SIGKILL)
        poll(lambda: dead(pid), 10, "the daemon to die")
        # The dead mount is still in mountinfo: the Mount is found...
        t0 = time.monotonic()
        t = tierfs.Mount(os.path.join(m.mnt, "ds"))
        for call in (t.stats, lambda: t.warmup(["ds"]), t.flush, t.reload):
            t1 = time.monotonic()
            e = raises(tierfs.DaemonUnavailable, call)
            assert time.monotonic() - t1 < 3, "%.1f s to notice" % (time.monotonic() - t1)
            assert t.socket in str(e) and e.errno in (errno.ECONNREFUSED, errno.ENOENT), str(e)
            assert "died" in str(e) or "no tierfs daemon" in str(e), str(e)
        assert time.monotonic() - t0 < 10
    finally:
        subprocess.run(["fusermount3", "-uz", m.mnt], capture_output=True)


def t_unsafe_socket_dir(ctx):
    """The computed socket is trusted only in a directory that is the
    user's own and that no one else may write (as the C client's
    tfs_ctl_socket_path()): a planted /tmp/tierfs-UID could answer for the
    daemon."""
    from tierfs import _control
    m = ctx.mount("unsafe").mount()
    try:
        good = os.path.join(ctx.work, "rundir")
        os.mkdir(good, 0o700)
        _control.check_rundir(good)
        _control.check_rundir(os.path.join(ctx.work, "missing"))  # connect says ENOENT
        os.chmod(good, 0o777)
        e = raises(tierfs.Error, _control.check_rundir, good)
        assert e.errno == errno.EPERM and "mode 0777" in str(e), str(e)
        os.chmod(good, 0o700)
        os.chown(good, 65534, 65534)
        e = raises(tierfs.Error, _control.check_rundir, good)
        assert e.errno == errno.EPERM and "owned by uid 65534" in str(e), str(e)
        link = os.path.join(ctx.work, "link")
        os.symlink(good, link)
        e = raises(tierfs.Error, _control.check_rundir, link)
        assert e.errno == errno.ENOTDIR, e
        # A Mount whose runtime directory is unsafe refuses to call (a
        # directory of this test stands for RUNDIR: /run/tierfs is shared).
        planted = os.path.join(ctx.work, "planted")
        os.mkdir(planted)
        os.chmod(planted, 0o733)
        real_rundir = _control.runtime_dir
        _control.runtime_dir = lambda: planted
        try:
            t = tierfs.Mount(m.mnt)
            assert os.path.dirname(t.socket) == planted, t.socket
            e = raises(tierfs.Error, t.stats)
            assert e.errno == errno.EPERM and planted in str(e), str(e)
            os.chmod(planted, 0o700)
            e = raises(tierfs.DaemonUnavailable, t.stats)  # safe, but no daemon there
            assert e.errno == errno.ENOENT, e
        finally:
            _control.runtime_dir = real_rundir
        t = tierfs.Mount(m.mnt)
        assert t.stats()["pid"] == m.stats()["pid"]
    finally:
        m.umount()


class FakeDaemon:
    """A control socket that answers each request with `reply(req)` (bytes
    to send; None: send nothing and keep the connection open)."""

    def __init__(self, path, reply, listen=True):
        self.path = path
        self.reply = reply
        self.requests = []
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.bind(path)
        self.s.listen(1)
        self.stop = False
        self.conns = []
        if listen:
            threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        self.s.settimeout(0.2)
        while not self.stop:
            try:
                c, _ = self.s.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            self.conns.append(c)
            buf = b""
            while b"\n" not in buf:
                chunk = c.recv(65536)
                if not chunk:
                    break
                buf += chunk
            req = json.loads(buf.split(b"\n")[0])
            self.requests.append(req)
            out = self.reply(req)
            if out is not None:
                try:
                    c.sendall(out)
                except OSError:
                    pass
                if out == b"" or not out.endswith(b"\n") or b'"ok"' in out:
                    c.close()

    def close(self):
        self.stop = True
        self.s.close()
        for c in self.conns:
            c.close()


def t_protocol_errors_never_hang(ctx):
    m = ctx.mount("fake").mount()
    fakes = []

    def fake(name, reply, listen=True):
        f = FakeDaemon(os.path.join(ctx.work, name + ".sock"), reply, listen)
        fakes.append(f)
        return tierfs.Mount(m.mnt, socket=f.path, timeout=0.5)

    def timed(exc, fn, limit=2.0):
        t0 = time.monotonic()
        e = raises(exc, fn)
        assert time.monotonic() - t0 < limit, "%s took %.1f s" % (fn, time.monotonic() - t0)
        return e

    try:
        # It accepts and never answers: the inactivity timeout.
        e = timed(tierfs.DaemonUnavailable, fake("mute", lambda r: None).stats)
        assert e.errno == errno.ETIMEDOUT and "within 0.5 s" in str(e), str(e)
        # It never accepts (a full backlog): the connect or read times out.
        e = timed(tierfs.DaemonUnavailable, fake("deaf", None, listen=False).stats)
        assert e.errno == errno.ETIMEDOUT, e
        # It hangs up without a reply.
        e = timed(tierfs.DaemonUnavailable, fake("hangup", lambda r: b"").stats)
        assert e.errno == errno.ECONNRESET and "without replying" in str(e), str(e)
        # A daemon error: its errno and message.
        t = fake("err", lambda r: b'{"ok":false,"errno":22,"error":"unknown command \'x\'"}\n')
        e = timed(tierfs.Error, t.stats)
        assert e.errno == 22 and e.strerror == "unknown command 'x'", (e.errno, e.strerror)
        assert not isinstance(e, tierfs.DaemonUnavailable)
        # Not the protocol.
        e = timed(tierfs.Error, fake("junk", lambda r: b"HTTP/1.1 400\n").stats)
        assert e.errno == errno.EPROTO, e
        # A reply line past 16 MiB: refused, not read forever.
        big = b'{"progress":"' + b"x" * (17 * MIB)
        e = timed(tierfs.Error, fake("big", lambda r: big).stats, 10)
        assert e.errno == errno.EMSGSIZE, e
        # Progress lines keep a long command alive past the timeout; the
        # callback sees each; then the reply.
        def slow(r):
            return b"".join(b'{"progress":{"files":%d,"bytes":1}}\n' % i for i in (3, 2, 1)) + \
                b'{"ok":true,"result":{"files":1,"bytes":5}}\n'
        t = fake("drain", slow)
        seen = []
        e = timed(tierfs.Error, lambda: t.flush(progress=seen.append))
        assert e.errno == errno.EIO and "1 file(s) (5 bytes) could not be uploaded" in str(e), str(e)
        assert [p["files"] for p in seen] == [3, 2, 1], seen
        assert fakes[-1].requests[-1] == {"cmd": "drain", "wait": True}, fakes[-1].requests
        # flush(timeout=): a drain that does not end is given up at the deadline.
        def endless(r):
            return b'{"progress":{"files":1,"bytes":1}}\n'
        fakes.append(FakeDaemon(os.path.join(ctx.work, "endless.sock"), endless))
        t = tierfs.Mount(m.mnt, socket=fakes[-1].path, timeout=5)
        t0 = time.monotonic()
        e = raises(tierfs.Error, t.flush, timeout=0.3)
        assert e.errno == errno.ETIMEDOUT and time.monotonic() - t0 < 2, (e, time.monotonic() - t0)
        # What is sent, as the CLI sends it.
        t = fake("echo", lambda r: b'{"ok":true,"result":{"failed_files":0}}\n')
        t.warmup(["ds", os.path.join(m.mnt, "x/y")], jobs=3, pin=True)
        t.pin(["a"])
        t.unpin(["a"])
        t.evict([os.path.join(m.mnt, "a")])
        t.warmup()
        assert fakes[-1].requests == [
            {"cmd": "warmup", "tier": "ssd", "jobs": 3, "pin": True, "paths": ["ds", "x/y"]},
            {"cmd": "pin", "paths": ["a"]}, {"cmd": "unpin", "paths": ["a"]},
            {"cmd": "evict", "paths": ["a"]},
            {"cmd": "warmup", "tier": "ssd", "paths": [""]}], fakes[-1].requests
    finally:
        for f in fakes:
            f.close()
        m.umount()


def t_dask_warmup(ctx):
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError:
        raise AssertionError("dask.distributed is missing: run under /usr/bin/python3 "
                             "(scripts/deps.sh test installs python3-distributed)")
    import tierfs.dask
    files = {}
    for i in range(30):
        key = "csv/part-%02d.csv" % i
        files[key] = "".join("%d,%d,%d\n" % (i, j, i * j) for j in range(200 + i)).encode()
        ctx.bucket.put(key, files[key])
    m = ctx.mount("dask").mount()
    try:
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                          dashboard_address=None) as cluster, Client(cluster) as client:
            res = tierfs.dask.warmup(client, [os.path.join(m.mnt, "csv")])
            assert len(res) == 1, "two workers on one host warm it once: %s" % res
            (host, r), = res.items()
            assert r["fetched_files"] == len(files) and r["failed_files"] == 0, r
            res = tierfs.dask.warmup(client, ["csv"], mount=m.mnt, jobs=2)
            assert list(res.values())[0]["cached_files"] == len(files), res
            try:
                tierfs.dask.warmup(client, ["csv/nope"], mount=m.mnt)
                raise AssertionError("a bad path did not raise")
            except tierfs.Error as e:
                assert "csv/nope: no such file or directory" in str(e), str(e)
        # The example: a dask.bag pipeline after the warm-up (2 processes).
        env = dict(os.environ, PYTHONPATH=os.path.join(TOP, "python"))
        before = m.gets()
        r = subprocess.run([sys.executable, os.path.join(TOP, "examples", "dask_read.py"),
                            os.path.join(m.mnt, "csv"), "--workers", "2", "--processes"],
                           capture_output=True, text=True, timeout=120, env=env)
        assert r.returncode == 0, r.stdout + r.stderr
        out = json.loads(r.stdout.strip().splitlines()[-1])
        assert out["files"] == len(files), out
        assert out["bytes"] == sum(map(len, files.values())), out
        assert out["lines"] == sum(v.count(b"\n") for v in files.values()), out
        assert "0 fetched, %d already cached" % len(files) in r.stderr, r.stderr
        assert m.gets() == before, "the pipeline read from the backend after the warm-up"
    finally:
        m.umount()


TESTS = [
    ("stats_and_warmup_with_progress", t_stats_and_warmup_with_progress),
    ("pin_unpin_evict", t_pin_unpin_evict),
    ("flush_after_writes", t_flush_after_writes),
    ("flush_across_daemon_restart", t_flush_across_daemon_restart),
    ("reload", t_reload),
    ("mount_found_from_any_path", t_mount_found_from_any_path),
    ("not_tierfs", t_not_tierfs),
    ("bad_paths_raise_daemon_message", t_bad_paths_raise_daemon_message),
    ("dead_daemon", t_dead_daemon),
    ("protocol_errors_never_hang", t_protocol_errors_never_hang),
    ("unsafe_socket_dir", t_unsafe_socket_dir),
    ("dask_warmup", t_dask_warmup),
]


def main():
    return run_suite("pyapi", TESTS)


if __name__ == "__main__":
    sys.exit(main())
