#!/usr/bin/env python3
"""test_keeper.py - the keeper: a daemon that dies or hands over never
breaks the mount.

    test_keeper.py TIERFS --backend local|moto [--only NAME[,NAME...]]

`tierfs mount` leaves a keeper that holds /dev/fuse and runs the daemon as
its child (src/keeper.h).  These tests kill the daemon (kill -9, other
signals, the OOM killer), upgrade it (`tierfs upgrade`), and check that the
mount keeps answering, that the keeper reports restarts and their causes,
backs off on repeated crashes, resends requests a dead daemon had read
(FUSE_NOTIFY_RESEND), and ends with the mount.

The epoch and checkpoint tests (`epoch_kill9`, `epoch_upgrade`,
`checkpoint_kill9`) use what the kernel holds across a restart: node IDs
it looked up before and files it opened before, which the new daemon
resolves from its persisted node table and rebuilds from the request's
node and open flags (vfs/inode.h, src/fs.h).  `--extended` runs 20 kill
rounds instead of 3.
"""
import ctypes
import errno
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_mount import data_for, poll, read, run_suite  # noqa: E402


def keeper_of(m):
    return m.stats()["keeper"]


def alive(pid):
    """Whether process `pid` runs (a zombie counts as gone)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            s = f.read()
    except OSError:
        return False
    return s[s.rindex(")") + 2] != "Z"


def processes_of(mnt):
    """Pids of the tierfs processes whose command line names `mnt`."""
    out = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % p, "rb") as f:
                args = f.read().split(b"\0")
        except OSError:
            continue
        if len(args) > 1 and args[1] == b"mount" and os.path.basename(mnt).encode() in b" ".join(args) \
                and alive(int(p)):
            out.append(int(p))
    return out


def next_generation(m, gen, timeout=20):
    """Wait for a daemon of generation > gen that serves; its keeper stats."""
    def ok():
        try:
            k = keeper_of(m)
        except AssertionError:
            return None
        return k if k["generation"] > gen and k["serving_since_ns"] else None
    return poll(ok, timeout, "generation %d to serve" % (gen + 1))


def kill_daemon(m, sig=signal.SIGKILL):
    st = m.stats()
    k = st["keeper"]
    os.kill(st["pid"], sig)
    return next_generation(m, k["generation"])


class Hammer:
    """Operations that need no node ID or handle from before a restart, in
    a loop on a thread: statfs and stat of the root.  Records every
    error."""

    def __init__(self, mnt):
        self.mnt, self.names = mnt, []
        self.errors, self.count = [], 0
        self.stop = False
        self.t = threading.Thread(target=self.run)

    def run(self):
        while not self.stop:
            try:
                os.statvfs(self.mnt)
                os.stat(self.mnt)
                for n in self.names:
                    os.stat(os.path.join(self.mnt, n))
                self.count += 1
            except OSError as e:
                self.errors.append(e)
                if e.errno == errno.ENOTCONN:
                    return

    def __enter__(self):
        self.t.start()
        return self

    def __exit__(self, *a):
        self.stop = True
        self.t.join()


def populate(bucket, n=12):
    files = {"f%02d.bin" % i: data_for("k%d" % i, 1000 + 70001 * i) for i in range(n)}
    for k, v in files.items():
        bucket.put(k, v)
    return files


# ---------------------------------------------------------------- tests

def t_kill9_mount_keeps_answering(ctx):
    """kill -9 of the daemon: the keeper starts a new one on the same
    connection; statfs, the root, ls of the root and cat of files never
    opened before answer, with no ENOTCONN, during and after the
    restart."""
    files = populate(ctx.bucket)
    m = ctx.mount("kill9").mount()
    try:
        names = sorted(files)
        first = m.stats()
        assert first["keeper"]["generation"] == 0 and first["keeper"]["restarts"] == 0
        with Hammer(m.mnt) as h:
            poll(lambda: h.count > 0, 10, "the hammer to run")
            k = kill_daemon(m)
            c = h.count
            poll(lambda: h.count > c + 2, 10, "statfs after the restart")
        assert not h.errors, h.errors[:3]
        assert k["pid"] == first["keeper"]["pid"], "the keeper changed"
        assert k["generation"] == 1 and k["restarts"] == 1 and k["crashes"] == 1, k
        assert k["last_restart_cause"] == "killed by SIGKILL: the OOM killer or kill -9", k
        assert k["resumed"] is True and k["last_pause_s"] > 0, k
        assert sorted(os.listdir(m.mnt)) == names
        for n in names:
            assert read(os.path.join(m.mnt, n)) == files[n], n
        assert m.stats()["pid"] != first["pid"]
    finally:
        m.umount()


def t_backoff_and_causes(ctx):
    """Repeated crashes: the delays before the next daemon are 0, 100 ms,
    200 ms, 400 ms; each restart's cause is in `tierfs stats`."""
    populate(ctx.bucket, 2)
    m = ctx.mount("backoff").mount()
    try:
        seen = []
        for sig in (signal.SIGKILL, signal.SIGUSR1, signal.SIGKILL, signal.SIGKILL):
            k = kill_daemon(m, sig)
            seen.append((k["backoff_ms"], k["last_restart_cause"]))
            assert os.statvfs(m.mnt).f_bsize > 0
        assert [b for b, _ in seen] == [0, 100, 200, 400], seen
        assert seen[1][1].startswith("killed by signal %d (" % signal.SIGUSR1), seen
        assert k["crashes"] == 4 and k["restarts"] == 4 and k["generation"] == 4, k
        with open(m.logfile) as f:
            log = f.read()
        assert len(re.findall(r"keeper: the daemon \(pid \d+\) of .* ended: killed by", log)) == 4
        assert "starting generation 4 in 400 ms" in log
    finally:
        m.umount()


def t_unmount_ends_keeper_and_daemon(ctx):
    """`tierfs umount` after a restart, SIGTERM to the keeper, SIGTERM to
    the daemon: each ends the mount, and no process is left."""
    populate(ctx.bucket, 2)
    m = ctx.mount("end").mount()
    kill_daemon(m)
    st = m.stats()
    pids = [st["pid"], st["keeper"]["pid"]]
    assert sorted(processes_of(m.mnt)) == sorted(pids), (processes_of(m.mnt), pids)
    m.umount()
    assert not os.path.ismount(m.mnt)
    poll(lambda: not any(alive(p) for p in pids), 10, "the keeper and the daemon to end")
    assert processes_of(m.mnt) == []

    for target in ("keeper", "daemon"):
        m.mount()
        st = m.stats()
        pids = [st["pid"], st["keeper"]["pid"]]
        os.kill(st["keeper"]["pid"] if target == "keeper" else st["pid"], signal.SIGTERM)
        poll(lambda: not os.path.ismount(m.mnt), 10, "SIGTERM to the %s to unmount" % target)
        poll(lambda: not any(alive(p) for p in pids), 10, "the processes to end (%s)" % target)
        assert processes_of(m.mnt) == []


def t_upgrade_while_reading(ctx):
    """`tierfs upgrade` 5 times while a loop stats and statfs the mount and
    files never opened before are read: no error, and each upgrade prints
    its pause."""
    files = populate(ctx.bucket, 16)
    names = sorted(files)
    m = ctx.mount("upgrade").mount()
    try:
        pauses = []
        with Hammer(m.mnt) as h:
            for i in range(5):
                r = subprocess.run([m.tierfs, "upgrade", m.mnt], capture_output=True, text=True,
                                   timeout=90)
                assert r.returncode == 0, r.stderr
                mm = re.search(r"generation %d -> %d\), pause ([0-9.]+) ms" % (i, i + 1), r.stdout)
                assert mm, r.stdout
                pauses.append(float(mm.group(1)))
                n = names[i]
                assert read(os.path.join(m.mnt, n)) == files[n], n
            c = h.count
            poll(lambda: h.count > c, 10, "the loop after the last upgrade")
        assert not h.errors, h.errors[:3]
        k = keeper_of(m)
        assert k["upgrades"] == 5 and k["crashes"] == 0 and k["last_restart_cause"] == "upgrade", k
        assert k["backoff_ms"] == 0
        assert all(0 < p < 5000 for p in pauses), pauses
        print("     upgrade pauses (ms): %s" % ", ".join("%.1f" % p for p in pauses))
        with open(m.logfile) as f:
            assert f.read().count("upgrade: handing") == 5
    finally:
        m.umount()


def moto_pid(ctx):
    with open(os.path.join(ctx.bucket.server_dir, "moto.pid")) as f:
        return int(f.read())


def moto_port(ctx):
    with open(os.path.join(ctx.bucket.server_dir, "moto.port")) as f:
        return int(f.read())


def request_sent_to_moto(ctx):
    """Whether a connection to the stopped moto_server holds unread bytes:
    the daemon has sent it a request (so it had read the FUSE request)."""
    r = subprocess.run(["ss", "-Htn", "state", "established", "( sport = :%d )" % moto_port(ctx)],
                       capture_output=True, text=True)
    return any(int(line.split()[0]) > 0 for line in r.stdout.splitlines() if line.split())


def waiting_in_fuse(pid):
    try:
        with open("/proc/%d/wchan" % pid) as f:
            return f.read().strip() == "request_wait_answer"
    except OSError:
        return False


def in_flight_then_kill(ctx, m, name):
    """Stat `name` (never looked up) in a child process while moto is
    stopped; once the daemon has sent its request on, kill -9 the daemon
    and let moto go.  Returns the child (a Popen)."""
    mp = moto_pid(ctx)
    os.kill(mp, signal.SIGSTOP)
    try:
        child = subprocess.Popen([sys.executable, "-c",
                                  "import os,sys; print(os.stat(sys.argv[1]).st_size)",
                                  os.path.join(m.mnt, name)],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        poll(lambda: waiting_in_fuse(child.pid), 10, "the stat to wait on FUSE")
        poll(lambda: request_sent_to_moto(ctx), 10, "the daemon to ask moto")
        assert child.poll() is None, "the stat did not wait for moto"
        os.kill(m.daemon_pid, signal.SIGKILL)
    finally:
        os.kill(mp, signal.SIGCONT)
    return child


def t_resend_in_flight(ctx):
    """A lookup the daemon had read but not answered when it was killed is
    resent by the kernel (FUSE_NOTIFY_RESEND) to the next daemon, and the
    waiting stat() gets the right answer."""
    if ctx.bucket.kind != "moto":
        return "skip"
    data = data_for("late", 123457)
    ctx.bucket.put("aa.bin", b"first in the listing the mount probes")
    ctx.bucket.put("zz-late.bin", data)
    m = ctx.mount("resend").mount()
    try:
        m.daemon_pid = m.stats()["pid"]
        child = in_flight_then_kill(ctx, m, "zz-late.bin")
        k = next_generation(m, 0)
        out, err = child.communicate(timeout=20)
        assert child.returncode == 0, err
        assert int(out) == len(data), out
        assert k["resend"] is True, k
        assert read(os.path.join(m.mnt, "zz-late.bin")) == data
    finally:
        m.umount()


def abort_connection(mnt):
    """End the FUSE connection of `mnt` through the fusectl filesystem."""
    conns = "/sys/fs/fuse/connections"
    if not os.listdir(conns):
        subprocess.run(["mount", "-t", "fusectl", "none", conns], check=True)
    with open(os.path.join(conns, str(os.minor(os.stat(mnt).st_dev)), "abort"), "w") as f:
        f.write("1")


def require_test_hooks(ctx):
    """The TIERFS_TEST_* hooks exist only in a build configured with
    --enable-test-hooks (check.sh's builds; src/keeper.h)."""
    r = subprocess.run([ctx.tierfs, "--version"], capture_output=True, text=True, timeout=30)
    assert "test hooks: compiled in" in r.stdout, \
        "%s was built without --enable-test-hooks (configure it so, as check.sh does)" % ctx.tierfs


def t_no_resend_waits(ctx):
    """Without FUSE_NOTIFY_RESEND (the test-only TIERFS_TEST_NO_RESEND=1),
    a request the dead daemon had read stays unanswered: the process
    waiting on it stays in the kernel's uninterruptible wait after the
    restart, SIGKILL included, while new requests are served; only the end
    of the connection ends it (docs/architecture.md)."""
    if ctx.bucket.kind != "moto":
        return "skip"
    require_test_hooks(ctx)
    ctx.bucket.put("aa.bin", b"first in the listing the mount probes")
    ctx.bucket.put("zz-late.bin", b"x" * 1000)
    m = ctx.mount("noresend")
    m.extra_env = {"TIERFS_TEST_NO_RESEND": "1"}
    m.mount()
    pids = []
    child = None
    try:
        st = m.stats()
        m.daemon_pid = st["pid"]
        pids = [st["keeper"]["pid"]]
        child = in_flight_then_kill(ctx, m, "zz-late.bin")
        k = next_generation(m, 0)
        pids.append(m.stats()["pid"])
        assert k["resend"] is False, k
        assert os.statvfs(m.mnt).f_bsize > 0 and os.stat(m.mnt).st_ino == 1
        child.kill()
        # Bounded by design: the request must stay unanswered.
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            assert child.poll() is None, \
                "the request ended: %r %r" % (child.poll(), child.communicate())
            time.sleep(0.05)
        # Still in the kernel's wait for the answer (the SIGKILL it got
        # may show another wait point for a moment: look again).
        poll(lambda: child.poll() is None and waiting_in_fuse(child.pid), 5,
             "the killed child to wait for the answer")
        abort_connection(m.mnt)
        child.communicate(timeout=10)
        assert child.returncode == -signal.SIGKILL
        poll(lambda: not any(alive(p) for p in pids), 10, "the keeper to end with the connection")
    finally:
        if child is not None and child.poll() is None and os.path.ismount(m.mnt):
            abort_connection(m.mnt)  # nothing else ends the stuck request
        subprocess.run(["fusermount3", "-uz", m.mnt], capture_output=True)


def t_resume_refused(ctx):
    """A daemon whose reply to the replayed FUSE_INIT differs from the one
    the kernel got (the test-only TIERFS_TEST_RESUME_MISMATCH=1 changes its
    max_write, as a binary that negotiates otherwise would) refuses to
    resume: the keeper logs "resume refused" and retries with backoff; an
    unmount meanwhile ends the keeper."""
    require_test_hooks(ctx)
    populate(ctx.bucket, 2)
    m = ctx.mount("refused")
    m.extra_env = {"TIERFS_TEST_RESUME_MISMATCH": "1"}
    m.mount()  # the first daemon records INIT: nothing to compare
    st = m.stats()
    keeper = st["keeper"]["pid"]
    os.kill(st["pid"], signal.SIGKILL)

    def log():
        with open(m.logfile) as f:
            return f.read()
    poll(lambda: log().count("ended: resume refused") >= 2, 20, "two refusals")
    text = log()
    mm = re.search(r"resume refused: this daemon negotiates other FUSE parameters .* "
                   r"max_write (\d+)/(\d+)", text)
    assert mm and int(mm.group(1)) != int(mm.group(2)), text[-2000:]
    assert "starting generation 2 in 100 ms" in text and "starting generation 3 in 200 ms" in text
    # umount(8) and `tierfs umount` stat the mountpoint first, which would
    # wait for a daemon: the system call alone.
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.umount2(m.mnt.encode(), 0) == 0, os.strerror(ctypes.get_errno())
    poll(lambda: not alive(keeper), 20, "the keeper to end with the mount")
    assert processes_of(m.mnt) == []
    assert "has ended" in log() or "ended after" in log()


def memory_cgroup():
    """A memory cgroup we created (v2, else v1): (path, limit file), or None."""
    v2 = "/sys/fs/cgroup/cgroup.controllers"
    if os.path.exists(v2):
        with open(v2) as f:
            choices = [("/sys/fs/cgroup", "memory.max")] if "memory" in f.read().split() else []
    else:
        choices = [("/sys/fs/cgroup/memory", "memory.limit_in_bytes")]
    for root, limit in choices:
        path = os.path.join(root, "tierfs-test-oom-%d" % os.getpid())
        try:
            os.mkdir(path)
        except OSError:
            continue
        if os.path.exists(os.path.join(path, limit)):
            return path, limit
        os.rmdir(path)
    return None


def t_oom_kill_restarts(ctx):
    """The daemon in a memory cgroup whose limit the RAM tier exceeds: the
    OOM killer kills it, the keeper starts a new one (outside the cgroup),
    and the mount stays usable."""
    cg = memory_cgroup()
    if cg is None:
        return "skip"
    path, limit = cg
    ctx.bucket.put("big.bin", data_for("big", 48 << 20))
    ctx.bucket.put("small.bin", b"small\n")
    other = data_for("other", 3 << 20)
    ctx.bucket.put("other.bin", other)
    m = ctx.mount("oom").mount()
    try:
        pid = m.stats()["pid"]
        with open(os.path.join(path, limit), "w") as f:
            f.write(str(24 << 20))
        with open(os.path.join(path, "cgroup.procs"), "w") as f:
            f.write(str(pid))
        # The warm-up fills the RAM tier through the control socket (no
        # file handle of the kernel is involved).
        subprocess.run([m.tierfs, "warmup", "--tier", "ram", m.mnt, os.path.join(m.mnt, "big.bin")],
                       capture_output=True, timeout=60)
        k = next_generation(m, 0, 30)
        assert k["last_restart_cause"] == "killed by SIGKILL: the OOM killer or kill -9", k
        events = os.path.join(path, "memory.events")
        if os.path.exists(events):
            assert re.search(r"oom_kill [1-9]", open(events).read())
        else:
            assert re.search(r"oom_kill [1-9]", open(os.path.join(path, "memory.oom_control")).read())
        # (big.bin's node ID is from the dead daemon: see the top)
        assert read(os.path.join(m.mnt, "small.bin")) == b"small\n"
        assert read(os.path.join(m.mnt, "other.bin")) == other
    finally:
        m.umount()
        poll(lambda: open(os.path.join(path, "cgroup.procs")).read().strip() == "", 10,
             "the cgroup to empty")
        os.rmdir(path)


def own_binary(ctx, name, dir_mode=0o755, file_mode=0o755):
    """A copy of the tierfs binary in a directory of the work directory
    (root's, 0700, in sticky /tmp) with these modes."""
    d = os.path.join(ctx.work, name)
    os.mkdir(d)
    os.chmod(d, dir_mode)
    b = os.path.join(d, "tierfs")
    shutil.copy(ctx.tierfs, b)
    os.chmod(b, file_mode)
    return b


def mount_with(m, binary, **kw):
    """`tierfs mount` of `m` run from `binary`: the CompletedProcess."""
    cmd = [binary, "mount", "-c", m.conf] + m.opts + [m.source, m.mnt]
    return subprocess.run(cmd, env=m.env(), capture_output=True, text=True, timeout=60, **kw)


def t_binary_others_can_replace(ctx):
    """A mount whose binary another user could replace is refused, with
    the reason: a group-writable directory on its path, a group-writable
    binary.  A sticky world-writable directory (as /tmp) on the path is
    allowed."""
    files = populate(ctx.bucket, 1)
    m = ctx.mount("replaceable")
    for name, dmode, fmode, what in (("gw-dir", 0o775, 0o755, "/gw-dir is writable"),
                                     ("gw-file", 0o755, 0o775, "/gw-file/tierfs is writable")):
        r = mount_with(m, own_binary(ctx, name, dmode, fmode))
        assert r.returncode != 0, "mounted from %s" % name
        assert "refusing to run the daemon" in r.stderr and what in r.stderr \
            and "by its group or others" in r.stderr, r.stderr
        assert not os.path.ismount(m.mnt)
        poll(lambda: processes_of(m.mnt) == [], 10, "no process of the refused mount")
    r = mount_with(m, own_binary(ctx, "sticky", 0o1777, 0o755))
    assert r.returncode == 0, r.stderr
    try:
        poll(lambda: os.path.ismount(m.mnt), 10, "the mount to appear")
        assert read(os.path.join(m.mnt, "f00.bin")) == files["f00.bin"]
    finally:
        m.umount()


def t_restart_runs_original_binary(ctx):
    """The binary on disk is replaced after the mount (a rename over it,
    by a script that leaves a marker file): kill -9 of the daemon restarts
    the binary the mount started with (its /proc/PID/exe is the replaced
    file), never the script; `tierfs upgrade` runs the file now at the
    path (the script, which runs tierfs), and a crash after that restarts
    the upgraded binary.  An upgrade to a file in a directory others can
    write is refused and logged, and the running binary starts again."""
    files = populate(ctx.bucket, 4)
    names = sorted(files)
    binary = own_binary(ctx, "bin")
    marker = os.path.join(ctx.work, "marker")
    m = ctx.mount("orig")
    r = mount_with(m, binary)
    assert r.returncode == 0, r.stderr
    try:
        poll(lambda: os.path.ismount(m.mnt), 10, "the mount to appear")
        tmp = binary + ".new"
        with open(tmp, "w") as f:
            f.write("#!/bin/sh\necho ran >>%s\nexec %s \"$@\"\n" % (marker, ctx.tierfs))
        os.chmod(tmp, 0o755)
        os.rename(tmp, binary)
        k = kill_daemon(m)
        assert k["generation"] == 1, k
        assert not os.path.exists(marker), "a crash restart ran the file now at the path"
        exe = os.readlink("/proc/%d/exe" % m.stats()["pid"])
        assert exe == binary + " (deleted)", exe
        assert read(os.path.join(m.mnt, names[0])) == files[names[0]]

        r = subprocess.run([ctx.tierfs, "upgrade", m.mnt], capture_output=True, text=True,
                           timeout=90)
        assert r.returncode == 0, r.stderr
        k = keeper_of(m)
        assert k["generation"] == 2 and k["last_restart_cause"] == "upgrade", k
        with open(marker) as f:
            assert f.read() == "ran\n", "the upgrade did not run the file at the path"
        assert read(os.path.join(m.mnt, names[1])) == files[names[1]]

        os.unlink(marker)
        kill_daemon(m)
        with open(marker) as f:
            assert f.read() == "ran\n", "a crash after the upgrade ran another binary"
        assert read(os.path.join(m.mnt, names[2])) == files[names[2]]

        # An upgrade to a binary another user could have replaced (its
        # directory group-writable now) is refused: the running one again.
        other = os.path.join(ctx.work, "other-marker")
        with open(tmp, "w") as f:
            f.write("#!/bin/sh\necho ran >>%s\nexec %s \"$@\"\n" % (other, ctx.tierfs))
        os.chmod(tmp, 0o755)
        os.rename(tmp, binary)
        os.chmod(os.path.dirname(binary), 0o775)
        r = subprocess.run([ctx.tierfs, "upgrade", m.mnt], capture_output=True, text=True,
                           timeout=90)
        assert r.returncode == 0, r.stderr
        assert keeper_of(m)["generation"] == 4
        assert not os.path.exists(other), "an upgrade ran a binary others could replace"
        with open(m.logfile) as f:
            assert re.search(r"keeper: upgrade refused: the directory \S+/bin is writable by "
                             r"its group or others", f.read())
        assert read(os.path.join(m.mnt, names[3])) == files[names[3]]
    finally:
        m.umount()


def t_caller_descriptors_closed(ctx):
    """`tierfs mount` started with the write end of a pipe open (as a
    caller that waits for its children's output would): once the mount
    command returns, the pipe's reader sees EOF; neither the keeper nor the
    daemon holds it, nor after a restart."""
    files = populate(ctx.bucket, 1)
    m = ctx.mount("fds")
    rd, wr = os.pipe()
    try:
        r = mount_with(m, ctx.tierfs, pass_fds=(wr,))
        os.close(wr)
        wr = -1
        assert r.returncode == 0, r.stderr
        os.set_blocking(rd, False)
        try:
            data = os.read(rd, 1)
        except BlockingIOError:
            raise AssertionError("the caller's pipe is still open in %s" % processes_of(m.mnt))
        assert data == b""
        st = m.stats()
        for pid in (st["pid"], st["keeper"]["pid"]):
            fds = os.listdir("/proc/%d/fd" % pid)
            assert len(fds) < 200, (pid, len(fds))
        kill_daemon(m)
        assert read(os.path.join(m.mnt, "f00.bin")) == files["f00.bin"]
    finally:
        os.close(rd)
        if wr >= 0:
            os.close(wr)
        m.umount()


def environ_of(pid):
    with open("/proc/%d/environ" % pid, "rb") as f:
        return [e.decode(errors="replace") for e in f.read().split(b"\0") if e]


def t_no_keeper_values_in_environ(ctx):
    """The keeper's values reach its daemon through a memfd named on the
    command line: /proc/PID/environ of the keeper and of the daemon (the
    first and a restarted one) holds no TIERFS_KEEPER_* variable."""
    populate(ctx.bucket, 1)
    m = ctx.mount("environ").mount()
    try:
        def check(pid):
            bad = [e for e in environ_of(pid) if e.startswith("TIERFS_KEEPER")]
            assert not bad, (pid, bad)
        st = m.stats()
        check(st["pid"])
        check(st["keeper"]["pid"])
        kill_daemon(m)
        pid = m.stats()["pid"]
        check(pid)
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            args = f.read().split(b"\0")
        assert args[1] == b"mount" and args[2].startswith(b"--keeper-link="), args
    finally:
        m.umount()


BUCKET = "tierfs-test"


def bucket_bytes(bucket, key):
    if bucket.kind == "local":
        with open(os.path.join(bucket.root, key), "rb") as f:
            return f.read()
    return bucket.s3.get_object(Bucket=BUCKET, Key=bucket.prefix + key)["Body"].read()


class Epoch:
    """Eight readers, each reading every file once in its own shuffled
    order, in 64 KiB reads through one open descriptor per file, with a
    pause of 10 ms between reads so descriptors stay open across restarts
    (an epoch takes about 2 s).  Records every error and every wrong byte;
    EINTR is retried."""

    def __init__(self, mnt, files, readers=8):
        self.mnt, self.files = mnt, files
        self.errors, self.done = [], 0
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self.run, args=(i,)) for i in range(readers)]

    def read_one(self, name):
        want = self.files[name]
        got = bytearray()
        fd = None
        while fd is None:
            try:
                fd = os.open(os.path.join(self.mnt, name), os.O_RDONLY)
            except InterruptedError:
                continue
        try:
            while True:
                try:
                    b = os.read(fd, 65536)
                except InterruptedError:
                    continue
                if not b:
                    break
                got += b
                time.sleep(0.01)
        finally:
            os.close(fd)
        if bytes(got) != want:
            raise AssertionError("%s: %d bytes read, %d expected, first difference at %s"
                                 % (name, len(got), len(want),
                                    next((i for i, (a, b) in enumerate(zip(got, want)) if a != b),
                                         min(len(got), len(want)))))

    def run(self, i):
        names = sorted(self.files)
        random.Random(i).shuffle(names)
        for n in names:
            try:
                self.read_one(n)
            except (OSError, AssertionError) as e:
                with self.lock:
                    self.errors.append("%s: %r" % (n, e))
            with self.lock:
                self.done += 1

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *a):
        for t in self.threads:
            t.join()


def epoch_files(bucket, n=64):
    files = {"e/d%d/f%03d.bin" % (i % 4, i): data_for("e%d" % i, 20000 + 37717 * (i % 9))
             for i in range(n)}
    for k, v in files.items():
        bucket.put(k, v)
    return files


def t_epoch_kill9(ctx):
    """kill -9 of the daemon at random moments while eight readers read a
    shuffled epoch through descriptors opened before the kills: every read
    returns the right bytes (EINTR at most, retried), never ENOTCONN, EIO,
    ESTALE or EBADF, and the epoch completes byte-exact.  3 rounds (20
    with --extended)."""
    files = epoch_files(ctx.bucket)
    rounds = 20 if ctx.extended else 3
    for r in range(rounds):
        m = ctx.mount("epoch%d" % r).mount()
        try:
            rng = random.Random(r)
            with Epoch(m.mnt, files) as ep:
                kills = 0
                while ep.done < 8 * len(files) and kills < 3:
                    time.sleep(rng.uniform(0.05, 0.3))
                    if ep.done >= 8 * len(files):
                        break
                    kill_daemon(m)
                    kills += 1
            assert not ep.errors, "round %d: %s" % (r, ep.errors[:5])
            assert kills > 0, "round %d: the epoch ended before a kill" % r
            k = keeper_of(m)
            assert k["crashes"] == kills, k
        finally:
            m.umount()


def t_epoch_upgrade(ctx):
    """`tierfs upgrade` 10 times while eight readers read a shuffled epoch:
    no error, no wrong byte; prints the longest pause."""
    files = epoch_files(ctx.bucket)
    m = ctx.mount("epochup").mount()
    try:
        pauses = []
        with Epoch(m.mnt, files) as ep:
            for i in range(10):
                r = subprocess.run([m.tierfs, "upgrade", m.mnt], capture_output=True, text=True,
                                   timeout=90)
                assert r.returncode == 0, r.stderr
                mm = re.search(r"pause ([0-9.]+) ms", r.stdout)
                assert mm, r.stdout
                pauses.append(float(mm.group(1)))
            upgraded_during = ep.done < 8 * len(files)
        assert not ep.errors, ep.errors[:5]
        assert upgraded_during, "the epoch ended before the last upgrade"
        assert keeper_of(m)["upgrades"] == 10
        print("     10 upgrades during an epoch: longest pause %.1f ms (all: %s)"
              % (max(pauses), ", ".join("%.0f" % p for p in pauses)))
    finally:
        m.umount()


def t_checkpoint_kill9(ctx):
    """kill -9 of the daemon during a checkpoint written in 1 MiB chunks,
    each fsynced: the writer goes on through the same descriptor, and after
    its close and `tierfs flush` the bucket holds the whole checkpoint."""
    m = ctx.mount("ckpt").mount()
    try:
        data = data_for("ckpt", 12 << 20)
        path = os.path.join(m.mnt, "ckpt", "model.pt")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            for i in range(12):
                chunk = data[i << 20:(i + 1) << 20]
                off = 0
                while off < len(chunk):
                    try:
                        off += os.write(fd, chunk[off:])
                    except InterruptedError:
                        continue
                os.fsync(fd)
                if i in (3, 8):
                    kill_daemon(m)
        finally:
            os.close(fd)
        r = subprocess.run([m.tierfs, "flush", m.mnt], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr + r.stdout
        assert bucket_bytes(ctx.bucket, "ckpt/model.pt") == data, "the checkpoint in the bucket"
        assert read(path) == data
        assert keeper_of(m)["crashes"] == 2
    finally:
        m.umount()


TESTS = [
    ("kill9", t_kill9_mount_keeps_answering),
    ("backoff", t_backoff_and_causes),
    ("unmount", t_unmount_ends_keeper_and_daemon),
    ("upgrade", t_upgrade_while_reading),
    ("resend", t_resend_in_flight),
    ("no_resend", t_no_resend_waits),
    ("resume_refused", t_resume_refused),
    ("oom", t_oom_kill_restarts),
    ("epoch_kill9", t_epoch_kill9),
    ("epoch_upgrade", t_epoch_upgrade),
    ("checkpoint_kill9", t_checkpoint_kill9),
    ("binary_others_can_replace", t_binary_others_can_replace),
    ("restart_runs_original_binary", t_restart_runs_original_binary),
    ("caller_descriptors_closed", t_caller_descriptors_closed),
    ("no_keeper_values_in_environ", t_no_keeper_values_in_environ),
]


def main():
    return run_suite("keeper", TESTS)


if __name__ == "__main__":
    sys.exit(main())
