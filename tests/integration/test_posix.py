#!/usr/bin/env python3
"""test_posix.py - POSIX behaviour beyond files and directories, through a
real FUSE mount.

    test_posix.py TIERFS --backend local|moto [--only NAME]

Symlinks, FIFOs, sockets and device nodes; modes, owners and times of
directories after a remount on an empty cache; atime; the sticky rule for
every kind of file; st_ino across rename and remount; ENAMETOOLONG at every
call; hard links refused.  Each test checks the mount, and where it matters
what reached the bucket (moto: the s3fs object format) and what a second
mount on an empty cache shows.  The mounts use -o allow_other, so the
kernel enforces permissions (default_permissions), as in pjdfstest's runs
(tests/posix/pjdfstest.sh).  Prints one line per test and ends with
"posix: N passed, N failed".
"""
import errno
import hashlib
import mmap
import os
import socket
import stat
import subprocess
import sys
import threading

from test_mount import BUCKET, data_for, read, run_suite
from test_write import kill9

NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
OTHER = ["setpriv", "--reuid=4242", "--regid=4242", "--clear-groups"]


def mount(ctx, name="m"):
    """A mount with -o allow_other (permissions enforced by the kernel)."""
    os.chmod(ctx.work, 0o755)  # mkdtemp's 0700 would stop other users
    m = ctx.mount(name, opts=["-o", "allow_other"])
    m.mount()
    return m


def remount_fresh(ctx, m, name):
    """Unmount `m` (write-back drains) and mount the bucket again on a new,
    empty cache."""
    m.umount()
    return mount(ctx, name)


def head_meta(ctx, key):
    """x-amz-meta-* of `key` in the bucket (moto), or None."""
    b = ctx.bucket
    try:
        return b.s3.head_object(Bucket=BUCKET, Key=b.prefix + key)["Metadata"]
    except b.s3.exceptions.ClientError:
        return None


def body(ctx, key):
    b = ctx.bucket
    return b.s3.get_object(Bucket=BUCKET, Key=b.prefix + key)["Body"].read()


def as_user(cmd, user=NOBODY):
    return subprocess.run(user + cmd, capture_output=True, text=True, timeout=30)


def kinds_in(mnt):
    return {n: stat.S_IFMT(os.lstat(os.path.join(mnt, n)).st_mode) for n in os.listdir(mnt)}


# ---------------------------------------------------------------- tests

def t_symlink(ctx):
    """ln -s, readlink, lstat, lchown and utime without following; the
    object is s3fs's (body = target, mode with S_IFLNK); a mount on an
    empty cache shows the same link, listed (ls -l) and looked up."""
    m = mount(ctx)
    link = os.path.join(m.mnt, "latest")
    os.mkdir(os.path.join(m.mnt, "step-1000"))
    with open(os.path.join(m.mnt, "step-1000", "w.bin"), "wb") as f:
        f.write(b"weights")
    os.symlink("step-1000", link)
    st = os.lstat(link)
    assert stat.S_ISLNK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o777, oct(st.st_mode)
    assert st.st_size == len("step-1000"), st.st_size
    assert os.readlink(link) == "step-1000"
    assert read(os.path.join(link, "w.bin")) == b"weights"  # the kernel follows it
    os.lchown(link, 123, 456)
    os.utime(link, (1700000000, 1600000000), follow_symlinks=False)
    st = os.lstat(link)
    assert (st.st_uid, st.st_gid, int(st.st_mtime), int(st.st_atime)) == \
        (123, 456, 1600000000, 1700000000), st
    try:
        os.symlink("x", link)
        raise AssertionError("symlink over an existing name succeeded")
    except FileExistsError:
        pass
    os.symlink("/" + "a" * 200 + "/b", os.path.join(m.mnt, "abs"))
    m2 = remount_fresh(ctx, m, "m2")
    if ctx.bucket.kind == "moto":
        meta = head_meta(ctx, "latest")
        assert stat.S_ISLNK(int(meta["mode"])), meta
        assert body(ctx, "latest") == b"step-1000"
        assert (meta["uid"], meta["gid"], meta["mtime"]) == ("123", "456", "1600000000"), meta
    else:
        assert os.readlink(os.path.join(ctx.bucket.root, "latest")) == "step-1000"
    # Listed first (ls -l), then looked up.
    assert kinds_in(m2.mnt)["latest"] == stat.S_IFLNK, kinds_in(m2.mnt)
    link2 = os.path.join(m2.mnt, "latest")
    st = os.lstat(link2)
    assert stat.S_ISLNK(st.st_mode) and os.readlink(link2) == "step-1000"
    assert os.readlink(os.path.join(m2.mnt, "abs")) == "/" + "a" * 200 + "/b"
    assert read(os.path.join(link2, "w.bin")) == b"weights"
    if ctx.bucket.kind == "moto":
        assert (st.st_uid, st.st_gid, int(st.st_mtime)) == (123, 456, 1600000000), st
    # Replace the link (ln -sfn): rename of a new link over it.
    os.symlink("step-2000", link2 + ".tmp")
    os.rename(link2 + ".tmp", link2)
    assert os.readlink(link2) == "step-2000"
    os.unlink(link2)
    assert not os.path.lexists(link2)


def t_special_files(ctx):
    """mkfifo, a bound socket and mknod (as root) make metadata-only
    objects (mode with the type bits, rdev); the kernel opens the FIFO
    itself; all of them survive a remount on an empty cache."""
    m = mount(ctx)
    fifo = os.path.join(m.mnt, "fifo")
    os.mkfifo(fifo, 0o640)
    sock = os.path.join(m.mnt, "sock")
    s = socket.socket(socket.AF_UNIX)
    s.bind(sock)
    s.close()
    dev = os.path.join(m.mnt, "null")
    os.mknod(dev, 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    blk = os.path.join(m.mnt, "blk")
    os.mknod(blk, 0o600 | stat.S_IFBLK, os.makedev(7, 0))

    def check(mnt):
        k = kinds_in(mnt)
        assert (k["fifo"], k["sock"], k["null"], k["blk"]) == \
            (stat.S_IFIFO, stat.S_IFSOCK, stat.S_IFCHR, stat.S_IFBLK), k
        st = os.lstat(os.path.join(mnt, "fifo"))
        assert stat.S_IMODE(st.st_mode) == 0o640 & ~0o022 or stat.S_IMODE(st.st_mode) == 0o640
        st = os.lstat(os.path.join(mnt, "null"))
        assert (os.major(st.st_rdev), os.minor(st.st_rdev)) == (1, 3), st.st_rdev
        st = os.lstat(os.path.join(mnt, "blk"))
        assert (os.major(st.st_rdev), os.minor(st.st_rdev)) == (7, 0), st.st_rdev
        # The FIFO works: the kernel pipes between a writer and a reader.
        got = []
        path = os.path.join(mnt, "fifo")
        t = threading.Thread(target=lambda: got.append(read(path)))
        t.start()
        with open(path, "wb") as f:
            f.write(b"through the pipe")
        t.join(10)
        assert got == [b"through the pipe"], got

    check(m.mnt)
    m2 = remount_fresh(ctx, m, "m2")
    check(m2.mnt)
    if ctx.bucket.kind == "moto":
        assert stat.S_ISFIFO(int(head_meta(ctx, "fifo")["mode"]))
        assert stat.S_ISSOCK(int(head_meta(ctx, "sock")["mode"]))
        meta = head_meta(ctx, "null")
        assert stat.S_ISCHR(int(meta["mode"])) and int(meta["rdev"]) == os.makedev(1, 3), meta
        assert body(ctx, "fifo") == b""
    # Only root makes device nodes (the kernel's CAP_MKNOD check).
    r = as_user(["python3", "-c", "import os,stat;os.mknod(%r, stat.S_IFCHR|0o666, os.makedev(1,3))"
                 % os.path.join(m2.mnt, "evil")])
    assert r.returncode != 0 and "PermissionError" in r.stderr, r
    assert not os.path.lexists(os.path.join(m2.mnt, "evil"))
    for n in ("fifo", "sock", "null", "blk"):
        os.unlink(os.path.join(m2.mnt, n))
    assert os.listdir(m2.mnt) == []


def t_directory_attrs(ctx):
    """chown and chmod of a directory are kept in its marker and read back
    on a mount with an empty cache, including the sticky bit."""
    m = mount(ctx)
    d = os.path.join(m.mnt, "d")
    os.mkdir(d)
    os.chown(d, 123, 456)
    os.chmod(d, 0o1777)
    os.makedirs(os.path.join(m.mnt, "a", "b"))
    os.chmod(os.path.join(m.mnt, "a", "b"), 0o700)
    os.utime(os.path.join(m.mnt, "a"), (1500000000, 1500000000))
    m2 = remount_fresh(ctx, m, "m2")
    st = os.stat(os.path.join(m2.mnt, "d"))
    assert (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid) == (0o1777, 123, 456), \
        (oct(st.st_mode), st.st_uid, st.st_gid)
    st = os.stat(os.path.join(m2.mnt, "a", "b"))
    assert stat.S_IMODE(st.st_mode) == 0o700, oct(st.st_mode)
    assert int(os.stat(os.path.join(m2.mnt, "a")).st_mtime) == 1500000000
    # Listed first (readdir of the root), then stat: the same answer.
    m3 = remount_fresh(ctx, m2, "m3")
    names = sorted(os.listdir(m3.mnt))
    assert names == ["a", "d"], names
    st = os.stat(os.path.join(m3.mnt, "d"))
    assert (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid) == (0o1777, 123, 456)


def t_atime(ctx):
    """atime set by utimensat is kept (x-amz-meta-atime); reads do not
    change it (noatime)."""
    m = mount(ctx)
    f = os.path.join(m.mnt, "f")
    data = data_for("atime", 10000)  # unique at every offset
    with open(f, "wb") as fh:
        fh.write(data)
    os.utime(f, (1900000000, 1800000000))
    assert read(f) == data
    st = os.stat(f)
    assert (int(st.st_atime), int(st.st_mtime)) == (1900000000, 1800000000), st
    m2 = remount_fresh(ctx, m, "m2")
    f2 = os.path.join(m2.mnt, "f")
    read(f2)
    st = os.stat(f2)
    assert (int(st.st_atime), int(st.st_mtime)) == (1900000000, 1800000000), st
    if ctx.bucket.kind == "moto":
        meta = head_meta(ctx, "f")
        assert (meta["atime"], meta["mtime"]) == ("1900000000", "1800000000"), meta


def t_ctime(ctx):
    """chmod, chown and writes move ctime forward."""
    m = mount(ctx)
    f = os.path.join(m.mnt, "f")
    with open(f, "wb") as fh:
        fh.write(b"x")
    os.utime(f, (1000000000, 1000000000))
    c0 = os.stat(f).st_ctime
    os.chmod(f, 0o600)
    assert os.stat(f).st_ctime >= c0
    os.utime(f, (1000000000, 1000000000))
    st = os.stat(f)
    assert st.st_ctime > 1000000000 and int(st.st_mtime) == 1000000000, st


def sticky_kinds(d):
    """One entry of each kind in `d` (made by the caller's user)."""
    with open(os.path.join(d, "file"), "wb") as f:
        f.write(b"x")
    os.mkfifo(os.path.join(d, "fifo"))
    os.symlink("file", os.path.join(d, "link"))
    s = socket.socket(socket.AF_UNIX)
    s.bind(os.path.join(d, "sock"))
    s.close()
    os.mkdir(os.path.join(d, "dir"))


def t_sticky(ctx):
    """In a sticky directory, a user who owns neither the directory nor
    the entry can neither unlink nor rename it, for every kind; its owner
    can.  The rule holds on a mount with an empty cache too."""
    m = mount(ctx)
    d = os.path.join(m.mnt, "tmp")
    os.mkdir(d)
    os.chmod(d, 0o1777)
    mk = ("import os,socket\n"
          "d=%r\n"
          "open(os.path.join(d,'file'),'wb').write(b'x')\n"
          "os.mkfifo(os.path.join(d,'fifo'))\n"
          "os.symlink('file',os.path.join(d,'link'))\n"
          "s=socket.socket(socket.AF_UNIX);s.bind(os.path.join(d,'sock'));s.close()\n"
          "os.mkdir(os.path.join(d,'dir'))\n" % d)
    r = as_user(["python3", "-c", mk], OTHER)
    assert r.returncode == 0, r
    kinds = ["file", "fifo", "link", "sock", "dir"]

    def check(d):
        for n in kinds:
            p = os.path.join(d, n)
            rm = "os.rmdir" if n == "dir" else "os.unlink"
            r = as_user(["python3", "-c", "import os;%s(%r)" % (rm, p)])
            assert r.returncode != 0 and "PermissionError" in r.stderr, (n, r)
            r = as_user(["python3", "-c", "import os;os.rename(%r,%r)" % (p, p + ".x")])
            assert r.returncode != 0 and "PermissionError" in r.stderr, (n, r)
            assert os.path.lexists(p), n

    check(d)
    m2 = remount_fresh(ctx, m, "m2")
    d2 = os.path.join(m2.mnt, "tmp")
    assert stat.S_IMODE(os.stat(d2).st_mode) == 0o1777
    check(d2)
    # The owner of the entries may.
    for n in kinds:
        p = os.path.join(d2, n)
        rm = "os.rmdir" if n == "dir" else "os.unlink"
        r = as_user(["python3", "-c", "import os;os.rename(%r,%r);%s(%r)" % (p, p + ".x", rm,
                                                                        p + ".x")], OTHER)
        assert r.returncode == 0, (n, r)
    assert os.listdir(d2) == []


def t_inode_numbers(ctx):
    """st_ino stays with a file across rename (files, symlinks, and
    directories with what is in them) and across a remount on the same
    cache, and no two live entries share one."""
    m = mount(ctx)
    mnt = m.mnt
    with open(os.path.join(mnt, "f"), "wb") as fh:
        fh.write(b"data")
    os.symlink("f", os.path.join(mnt, "l"))
    os.makedirs(os.path.join(mnt, "d", "sub"))
    with open(os.path.join(mnt, "d", "sub", "g"), "wb") as fh:
        fh.write(b"g")
    ino = {n: os.lstat(os.path.join(mnt, n)).st_ino for n in ("f", "l", "d", "d/sub", "d/sub/g")}
    assert len(set(ino.values())) == len(ino), ino
    os.rename(os.path.join(mnt, "f"), os.path.join(mnt, "f2"))
    os.rename(os.path.join(mnt, "l"), os.path.join(mnt, "l2"))
    os.rename(os.path.join(mnt, "d"), os.path.join(mnt, "d2"))
    now = {"f": "f2", "l": "l2", "d": "d2", "d/sub": "d2/sub", "d/sub/g": "d2/sub/g"}
    for old, new in now.items():
        assert os.lstat(os.path.join(mnt, new)).st_ino == ino[old], (old, new)
    # A new file of an old name gets a new number.
    with open(os.path.join(mnt, "f"), "wb") as fh:
        fh.write(b"new")
    assert os.stat(os.path.join(mnt, "f")).st_ino not in ino.values()
    m.umount()
    m.mount()  # the same cache directory
    for old, new in now.items():
        assert os.lstat(os.path.join(mnt, new)).st_ino == ino[old], (old, new)
    # Written back and listed again: still the same.
    os.listdir(os.path.join(mnt, "d2", "sub"))
    assert os.lstat(os.path.join(mnt, "d2/sub/g")).st_ino == ino["d/sub/g"]


def t_name_too_long(ctx):
    """A name over 255 bytes is ENAMETOOLONG at every call that takes one;
    on S3 so is a key over 1,024 bytes."""
    m = mount(ctx)
    mnt = m.mnt
    long = os.path.join(mnt, "n" * 256)
    with open(os.path.join(mnt, "ok"), "wb") as fh:
        fh.write(b"x")
    calls = [
        ("open(O_CREAT)", lambda: open(long, "wb")),
        ("mkdir", lambda: os.mkdir(long)),
        ("mkfifo", lambda: os.mkfifo(long)),
        ("symlink", lambda: os.symlink("x", long)),
        ("rename", lambda: os.rename(os.path.join(mnt, "ok"), long)),
        ("stat", lambda: os.stat(long)),
        ("unlink", lambda: os.unlink(long)),
        ("link", lambda: os.link(os.path.join(mnt, "ok"), long)),
    ]
    for what, fn in calls:
        try:
            fn()
            raise AssertionError("%s of a 256-byte name succeeded" % what)
        except OSError as e:
            assert e.errno == errno.ENAMETOOLONG, (what, e)
    if ctx.bucket.kind != "moto":
        return
    # Five levels of 250 bytes: every name is fine, the key is too long.
    d = mnt
    for i in range(4):
        d = os.path.join(d, chr(ord("a") + i) * 250)
        os.mkdir(d)
    for what, fn in [("create", lambda p: open(p, "wb")), ("mkdir", os.mkdir),
                     ("symlink", lambda p: os.symlink("x", p)), ("mkfifo", os.mkfifo),
                     ("stat", os.stat), ("rename", lambda p: os.rename(os.path.join(mnt, "ok"), p))]:
        try:
            fn(os.path.join(d, "e" * 250))
            raise AssertionError("%s of a 1,254-byte key succeeded" % what)
        except OSError as e:
            assert e.errno == errno.ENAMETOOLONG, (what, e)


def t_hard_link(ctx):
    """Hard links stay EPERM (an object store has no links)."""
    m = mount(ctx)
    with open(os.path.join(m.mnt, "f"), "wb") as fh:
        fh.write(b"x")
    try:
        os.link(os.path.join(m.mnt, "f"), os.path.join(m.mnt, "g"))
        raise AssertionError("link succeeded")
    except PermissionError:
        pass


def t_symlink_crash_safe(ctx):
    """A symlink made just before kill -9 is journalled: the next mount
    uploads it."""
    m = mount(ctx)
    os.symlink("target-path", os.path.join(m.mnt, "l"))
    os.mkfifo(os.path.join(m.mnt, "p"))
    kill9(m)
    m.mount()
    m.umount()  # drains write-back
    m2 = mount(ctx, "m2")
    assert os.readlink(os.path.join(m2.mnt, "l")) == "target-path"
    assert stat.S_ISFIFO(os.lstat(os.path.join(m2.mnt, "p")).st_mode)


def t_directory_times_follow_entries(ctx):
    """Making or removing an entry moves its directory's mtime and ctime
    (kept in the cache); O_TRUNC moves a file's; an unlinked open file
    shows nlink 0; a size beyond 5 TiB is EFBIG."""
    m = mount(ctx)
    d = os.path.join(m.mnt, "d")
    os.mkdir(d)
    old = 1000000000
    for make in (lambda: open(os.path.join(d, "f"), "wb").close(),
                 lambda: os.mkdir(os.path.join(d, "sub")),
                 lambda: os.symlink("x", os.path.join(d, "l")),
                 lambda: os.rename(os.path.join(d, "f"), os.path.join(d, "g")),
                 lambda: os.unlink(os.path.join(d, "g")),
                 lambda: os.rmdir(os.path.join(d, "sub"))):
        os.utime(d, (old, old))
        make()
        st = os.stat(d)
        assert st.st_mtime > old and st.st_ctime > old, (st.st_mtime, st.st_ctime)
    f = os.path.join(m.mnt, "f")
    with open(f, "wb") as fh:
        fh.write(b"data")
    os.utime(f, (old, old))
    fd = os.open(f, os.O_WRONLY | os.O_TRUNC)
    os.close(fd)
    st = os.stat(f)
    assert st.st_size == 0 and st.st_mtime > old and st.st_ctime > old, st
    fd = os.open(f, os.O_RDONLY)
    try:
        os.unlink(f)
        assert os.fstat(fd).st_nlink == 0
    finally:
        os.close(fd)
    with open(os.path.join(m.mnt, "big"), "wb") as fh:
        fh.write(b"x")
    try:
        os.truncate(os.path.join(m.mnt, "big"), 10 ** 15)
        raise AssertionError("a truncate to 10^15 bytes succeeded")
    except OSError as e:
        assert e.errno == errno.EFBIG, e


def t_setid_cleared_by_write(ctx):
    """On a trusted mount (setid bits kept), a write by a user other than
    root clears the set-user-ID bit, and the set-group-ID bit of a
    group-executable file, as on a local filesystem."""
    os.chmod(ctx.work, 0o755)
    m = ctx.mount("trusted", {"mount": {"trusted": "true"}}, opts=["-o", "allow_other"])
    m.mount()
    for name, mode, want in (("u", 0o4777, 0o777), ("g", 0o2777, 0o777), ("gnx", 0o2767, 0o2767)):
        p = os.path.join(m.mnt, name)
        with open(p, "wb") as fh:
            fh.write(b"x")
        os.chmod(p, mode)
        assert stat.S_IMODE(os.stat(p).st_mode) == mode
        r = as_user(["python3", "-c", "import os;fd=os.open(%r, os.O_WRONLY);os.write(fd,b'y');"
                     "print(oct(os.fstat(fd).st_mode));os.close(fd)" % p])
        assert r.returncode == 0, r
        assert stat.S_IMODE(os.stat(p).st_mode) == want, (name, oct(os.stat(p).st_mode))


def t_mmap(ctx):
    """Memory-mapped files, as safetensors, numpy.memmap and Arrow (Hugging
    Face datasets) use them: a mapping of an object reads its bytes across
    blocks; a shared writable mapping's stores reach the file, the bucket
    and a fresh cache; a private one's never do."""
    n = 3 * 2**20 + 4321  # beyond three 1 MiB blocks
    data = bytes((i * 7 + i // 4096) & 0xFF for i in range(n))
    ctx.bucket.put("mm/data.bin", data)
    m = mount(ctx)
    try:
        p = os.path.join(m.mnt, "mm/data.bin")
        with open(p, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            assert len(mm) == n
            for off in (0, 2**20 - 3, 2 * 2**20 + 17, n - 100):
                assert mm[off:off + 100] == data[off:off + 100], "mapped bytes at %d" % off
            assert hashlib.sha256(mm).digest() == hashlib.sha256(data).digest()
        w = os.path.join(m.mnt, "mm/w.bin")
        want = bytearray(b"\0" * (2 * 2**20 + 123))
        with open(w, "wb") as f:
            f.write(want)
        with open(w, "r+b") as f, mmap.mmap(f.fileno(), 0) as mm:
            for off in (5, 2**20 - 4, 2 * 2**20 + 100):  # one store across a block boundary
                mm[off:off + 8] = b"MAPPED!!"
                want[off:off + 8] = b"MAPPED!!"
            mm.flush()
        with open(w, "r+b") as f, mmap.mmap(f.fileno(), 0, flags=mmap.MAP_PRIVATE) as mm:
            mm[0:4] = b"PRIV"
        assert read(w) == bytes(want)
        m = remount_fresh(ctx, m, "m2")
        assert read(os.path.join(m.mnt, "mm/w.bin")) == bytes(want), "lost after write-back"
        if ctx.bucket.kind != "local":
            assert body(ctx, "mm/w.bin") == bytes(want)
    finally:
        m.umount()


def t_small_objects_headed(ctx):
    """Listed objects under 4 KiB are HEADed once on their first lookup
    (cache.fetch_headers = small, the default): a symlink another client
    wrote shows as one even when its directory was listed first.  Larger
    objects and the second lookup cost no HEAD.  With fetch_headers = false
    nothing is HEADed and the small object shows as a regular file."""
    if ctx.bucket.kind != "moto":
        return "skip"
    ctx.bucket.put_meta("d/link", b"target", {"mode": str(stat.S_IFLNK | 0o777)})
    ctx.bucket.put("d/big", b"b" * 5000)
    ctx.bucket.put("d/small", b"s" * 100)
    for name, conf, want in (("small", {}, stat.S_IFLNK), ("none", {"fetch_headers": "false"},
                                                           stat.S_IFREG)):
        m = ctx.mount(name, {"cache": conf})
        m.mount()

        def heads():
            return m.stats()["backend"]["head"]["requests"]

        assert sorted(os.listdir(os.path.join(m.mnt, "d"))) == ["big", "link", "small"]
        h0 = heads()
        assert stat.S_IFMT(os.lstat(os.path.join(m.mnt, "d", "link")).st_mode) == want, name
        os.lstat(os.path.join(m.mnt, "d", "big"))
        os.lstat(os.path.join(m.mnt, "d", "small"))
        expect = 2 if want == stat.S_IFLNK else 0
        assert heads() - h0 == expect, (name, heads() - h0)
        if want == stat.S_IFLNK:
            assert os.readlink(os.path.join(m.mnt, "d", "link")) == "target"
        m.umount()


TESTS = [
    ("symlink", t_symlink),
    ("special_files", t_special_files),
    ("directory_attrs", t_directory_attrs),
    ("atime", t_atime),
    ("ctime", t_ctime),
    ("sticky", t_sticky),
    ("inode_numbers", t_inode_numbers),
    ("name_too_long", t_name_too_long),
    ("hard_link", t_hard_link),
    ("symlink_crash_safe", t_symlink_crash_safe),
    ("small_objects_headed", t_small_objects_headed),
    ("directory_times_follow_entries", t_directory_times_follow_entries),
    ("setid_cleared_by_write", t_setid_cleared_by_write),
    ("mmap", t_mmap),
]


def main():
    return run_suite("posix", TESTS)


if __name__ == "__main__":
    sys.exit(main())
