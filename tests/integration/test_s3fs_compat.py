#!/usr/bin/env python3
"""test_s3fs_compat.py - tierfs and s3fs read each other's objects.

    test_s3fs_compat.py TIERFS --backend moto [--only NAME]

s3fs_to_tierfs: s3fs (the Debian package, run in the foreground by this
script) writes a set of entries: symlinks, a FIFO, a socket, device nodes,
a sticky directory owned by 123:456, a file owned by 123:456 with mode 0640,
files and a directory with set times, nested directories.  s3fs is
unmounted and mounted again (its view then comes from the objects alone),
its view recorded, then tierfs (fresh cache, -o allow_other) mounts the same
prefix and must show the same view.

tierfs_to_s3fs: the reverse; tierfs writes the set, `tierfs flush` uploads
it, its view is recorded, it unmounts, and s3fs must show the same; the
atime and mtime tierfs shows must also be the ones the set gave (to the
nanosecond, which s3fs's x-amz-meta-[amc]time keep: SEC.NNNNNNNNN).

A view is every entry below the mount root, recursively, from lstat: type,
permission bits, uid, gid, size (files and symlinks), symlink target, rdev
(device nodes), contents (files), mtime (seconds; nanoseconds and atime too
for the entries whose times the test set), never following a symlink.
Directory sizes, nlink and ctime are not compared (s3fs 1.90 shows
directories with size 0, later versions 4096; s3fs sets ctime to the atime
of a utimens call).  s3fs stores no rdev (it shows every device node as 0, 0),
so rdev is compared only in s3fs_to_tierfs.

The tierfs mounts keep the default cache settings (cache.fetch_headers
off): the small objects and the directories of the set are HEADed on
lookup, which is what shows their kinds and attributes.  Needs s3fs on PATH
(scripts/deps.sh test installs it); a run without it or on another backend
prints why and skips.
Prints one line per test and ends with "compat: N passed, N failed".
"""
import hashlib
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys

from test_mount import BUCKET, poll, run_suite

S3FS = shutil.which("s3fs")
TIERFS_CONF = {"writeback": {"delay": "0s", "retry_base": "100ms", "retry_max": "500ms"}}
T_ATIME = 1900000000
T_MTIME = 1800000000
NS_ATIME = 1900000000000000005
NS_MTIME = 1800000000123456789
# Entries whose atime and mtime (to the nanosecond) the set fixes.
TIMED = ("tfile", "tnano", "tsep", "tdir")


class S3fs:
    """An s3fs mount of the test prefix, run with -f so that this script
    owns the process and waits for it to end after the unmount."""

    def __init__(self, bucket, work, name):
        self.bucket = bucket
        self.mnt = os.path.join(work, "s3fs-" + name)
        os.makedirs(self.mnt, exist_ok=True)
        self.passwd = os.path.join(work, "s3fs.passwd")
        fd = os.open(self.passwd, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write("%s:%s\n" % (bucket.env["AWS_ACCESS_KEY_ID"],
                                 bucket.env["AWS_SECRET_ACCESS_KEY"]))
        self.log = os.path.join(work, "s3fs-%s.log" % name)
        self.proc = None

    def mount(self):
        opts = ("url=%s,use_path_request_style,passwd_file=%s,allow_other,"
                "dbglevel=warn,logfile=%s" % (self.bucket.env["TFS_S3_ENDPOINT"],
                                              self.passwd, self.log))
        env = dict(os.environ)
        env.pop("AWS_CA_BUNDLE", None)
        src = "%s:/%s" % (BUCKET, self.bucket.prefix.rstrip("/"))
        self.proc = subprocess.Popen([S3FS, src, self.mnt, "-f", "-o", opts], env=env,
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)

        def up():
            if self.proc.poll() is not None:
                raise AssertionError("s3fs exited (%d) before mounting:\n%s" %
                                     (self.proc.returncode, self.log_tail()))
            return os.path.ismount(self.mnt)
        poll(up, 20, "s3fs to mount")
        return self

    def umount(self):
        if self.proc is None:
            return
        if os.path.ismount(self.mnt):
            r = subprocess.run(["fusermount3", "-u", self.mnt], capture_output=True, text=True)
            if r.returncode != 0:
                subprocess.run(["fusermount3", "-uz", self.mnt], capture_output=True)
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
        self.proc = None

    def log_tail(self):
        try:
            with open(self.log, errors="replace") as f:
                return "".join(f.readlines()[-20:])
        except OSError:
            return "(no s3fs log)"


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)


def make_set(root):
    """Create the entries on a mount.  Returns the steps that failed (a
    list of strings); the later steps run anyway."""
    j = lambda *p: os.path.join(root, *p)  # noqa: E731

    def bind_socket():
        s = socket.socket(socket.AF_UNIX)
        cwd = os.getcwd()
        os.chdir(root)  # a relative name keeps sun_path short
        try:
            s.bind("sock")
        finally:
            os.chdir(cwd)
            s.close()

    def sticky_dir():
        os.mkdir(j("sdir"), 0o755)
        os.chmod(j("sdir"), 0o1777)
        os.chown(j("sdir"), 123, 456)

    def owned_file():
        write(j("ofile"), b"hello\n")
        os.chown(j("ofile"), 123, 456)
        os.chmod(j("ofile"), 0o640)

    def touch_separately():
        write(j("tsep"), b"sep\n")
        # s3fs 1.90 ignores a utimens with one time UTIME_OMIT: this entry
        # then keeps its creation times there, tierfs must set them.
        subprocess.run(["touch", "-a", "-d", "@%d" % T_ATIME, j("tsep")], check=True)
        subprocess.run(["touch", "-m", "-d", "@%d" % T_MTIME, j("tsep")], check=True)

    def nested():
        os.makedirs(j("a", "b", "c"))
        write(j("a", "b", "c", "file"), b"deep\n")
        os.symlink("c/file", j("a", "b", "lnk"))

    def timed_dir():
        os.mkdir(j("tdir"))
        write(j("tdir", "in"), b"in\n")
        os.utime(j("tdir"), (T_ATIME, T_MTIME))

    steps = [
        ("symlink link -> target", lambda: os.symlink("target", j("link"))),
        ("symlink link2 -> ../some/dir/target2",
         lambda: os.symlink("../some/dir/target2", j("link2"))),
        ("lchown link2 123:456", lambda: os.lchown(j("link2"), 123, 456)),
        ("mkfifo fifo 0644", lambda: os.mkfifo(j("fifo"), 0o644)),
        ("bind socket sock", bind_socket),
        ("mknod chr c 1 3", lambda: os.mknod(j("chr"), stat.S_IFCHR | 0o644, os.makedev(1, 3))),
        ("mknod blk b 8 1 0600", lambda: os.mknod(j("blk"), stat.S_IFBLK | 0o600, os.makedev(8, 1))),
        ("mkdir sdir, chmod 1777, chown 123:456", sticky_dir),
        ("ofile: chown 123:456, chmod 640", owned_file),
        ("empty file", lambda: write(j("empty"), b"")),
        ("tfile: utime atime %d mtime %d" % (T_ATIME, T_MTIME),
         lambda: (write(j("tfile"), b"t\n"), os.utime(j("tfile"), (T_ATIME, T_MTIME)))),
        ("tnano: utime ns", lambda: (write(j("tnano"), b"n\n"),
                                     os.utime(j("tnano"), ns=(NS_ATIME, NS_MTIME)))),
        ("tsep: touch -a, then touch -m", touch_separately),
        ("mkdir -p a/b/c, a/b/c/file, a/b/lnk -> c/file", nested),
        ("mkdir tdir, tdir/in, utime tdir", timed_dir),
    ]
    failed = []
    for what, fn in steps:
        try:
            fn()
        except (OSError, subprocess.CalledProcessError) as e:
            failed.append("%s: %s" % (what, e))
    return failed


def view(root, with_rdev=True):
    """{relative path: {field: value}} of every entry below root."""
    out = {}

    def walk(rel):
        d = os.path.join(root, rel)
        for name in sorted(os.listdir(d)):
            r = os.path.join(rel, name) if rel else name
            p = os.path.join(root, r)
            st = os.lstat(p)
            e = {"type": stat.filemode(st.st_mode)[0], "perm": "%04o" % stat.S_IMODE(st.st_mode),
                 "uid": st.st_uid, "gid": st.st_gid}
            if not stat.S_ISDIR(st.st_mode) or name in TIMED:
                e["mtime"] = st.st_mtime_ns // 10**9
            if name in TIMED:
                e["mtime_ns"] = st.st_mtime_ns
                e["atime_ns"] = st.st_atime_ns
            if stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode):
                e["size"] = st.st_size
            if stat.S_ISLNK(st.st_mode):
                e["target"] = os.readlink(p)
            if with_rdev and (stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode)):
                e["rdev"] = "%d,%d" % (os.major(st.st_rdev), os.minor(st.st_rdev))
            out[r] = e
            if stat.S_ISDIR(st.st_mode):
                walk(r)
    walk("")
    # contents after every lstat, so that reading cannot move a time seen
    for r, e in out.items():
        if e["type"] == "-":
            with open(os.path.join(root, r), "rb") as f:
                e["sha256"] = hashlib.sha256(f.read()).hexdigest()[:16]
    return out


def ls(v):
    return "\n".join("  %-16s %s" % (r, " ".join("%s=%s" % kv for kv in sorted(e.items())))
                     for r, e in sorted(v.items()))


def compare(a_name, a, b_name, b):
    """Lines describing every difference between two views."""
    diffs = []
    for r in sorted(set(a) | set(b)):
        if r not in b:
            diffs.append("%s: shown by %s only" % (r, a_name))
        elif r not in a:
            diffs.append("%s: shown by %s only" % (r, b_name))
        else:
            for k in sorted(set(a[r]) | set(b[r])):
                if a[r].get(k) != b[r].get(k):
                    diffs.append("%s: %s: %s=%s %s=%s" % (r, k, a_name, a[r].get(k),
                                                           b_name, b[r].get(k)))
    return diffs


def times_set(name, v):
    """Lines for each TIMED entry of view v whose atime or mtime is not
    what make_set() gave it."""
    want = {"tfile": (T_ATIME * 10**9, T_MTIME * 10**9), "tnano": (NS_ATIME, NS_MTIME),
            "tsep": (T_ATIME * 10**9, T_MTIME * 10**9), "tdir": (T_ATIME * 10**9, T_MTIME * 10**9)}
    out = []
    for r, (at, mt) in sorted(want.items()):
        e = v.get(r)
        if e and (e["atime_ns"], e["mtime_ns"]) != (at, mt):
            out.append("%s: %s shows atime_ns=%d mtime_ns=%d, the set gave %d %d" %
                       (r, name, e["atime_ns"], e["mtime_ns"], at, mt))
    return out


def verdict(failed_steps, writer, diffs, a_name, a, b_name, b):
    if not failed_steps and not diffs:
        return
    msg = []
    if failed_steps:
        msg.append("%s refused %d step(s):" % (writer, len(failed_steps)))
        msg += ["  " + s for s in failed_steps]
    if diffs:
        msg.append("%d difference(s):" % len(diffs))
        msg += ["  " + d for d in diffs]
    msg.append("%s shows:\n%s" % (a_name, ls(a)))
    msg.append("%s shows:\n%s" % (b_name, ls(b)))
    raise AssertionError("\n".join(msg))


def usable(ctx):
    if ctx.bucket.kind != "moto":
        print("s3fs_compat: runs on moto only (--backend moto)", file=sys.stderr)
        return False
    if not S3FS:
        print("s3fs_compat: s3fs is not installed (scripts/deps.sh test installs it)",
              file=sys.stderr)
        return False
    return True


def t_s3fs_to_tierfs(ctx):
    if not usable(ctx):
        return "skip"
    os.umask(0o022)
    s = S3fs(ctx.bucket, ctx.work, "w")
    try:
        s.mount()
        failed = make_set(s.mnt)
        s.umount()
        s.mount()  # a fresh s3fs: its view of the objects alone
        sv = view(s.mnt)
    finally:
        s.umount()
    assert not failed, "s3fs refused steps of the set:\n  " + "\n  ".join(failed)
    m = ctx.mount("t", TIERFS_CONF, opts=["-o", "allow_other"]).mount()
    tv = view(m.mnt)
    m.umount()
    verdict([], "s3fs", compare("s3fs", sv, "tierfs", tv), "s3fs", sv, "tierfs", tv)


def t_tierfs_to_s3fs(ctx):
    if not usable(ctx):
        return "skip"
    os.umask(0o022)
    m = ctx.mount("t", TIERFS_CONF, opts=["-o", "allow_other"]).mount()
    failed = make_set(m.mnt)
    r = subprocess.run([m.tierfs, "flush", m.mnt], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, "tierfs flush failed: %s\n%s" % (r.stderr, m.log_tail())
    tv = view(m.mnt, with_rdev=False)
    m.umount()
    s = S3fs(ctx.bucket, ctx.work, "r")
    try:
        s.mount()
        sv = view(s.mnt, with_rdev=False)
    finally:
        s.umount()
    # s3fs 1.90 drops touch -a/-m alone (tsep), so only the writer's own
    # view is held to the times the set gave.
    diffs = times_set("tierfs", tv) + compare("tierfs", tv, "s3fs", sv)
    verdict(failed, "tierfs", diffs, "tierfs", tv, "s3fs", sv)


TESTS = [
    ("s3fs_to_tierfs", t_s3fs_to_tierfs),
    ("tierfs_to_s3fs", t_tierfs_to_s3fs),
]


def main():
    return run_suite("compat", TESTS)


if __name__ == "__main__":
    sys.exit(main())
