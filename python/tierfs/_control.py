"""tierfs._control - finding a mount and its daemon's control socket, and
the socket's JSON protocol (docs/control.md).  Standard library only.

Nothing here keeps state between calls: each request opens its own
connection, so a Mount may be used from several threads at once.
"""
import errno
import hashlib
import json
import os
import re
import socket
import stat
import time

# Longest reply or progress line accepted, as the C client
# (TFS_CTL_MAX_REPLY in src/ctl_client.h).
MAX_REPLY = 16 << 20
# The default timeout, in seconds, of a connect and of each wait for the
# next byte from the daemon (TFS_CTL_TIMEOUT_MS in src/ctl_client.h).
DEFAULT_TIMEOUT = 30.0
# A socket that refuses connections may belong to a daemon its keeper is
# restarting (docs/architecture.md, the keeper): try again this long.
REFUSED_RETRY = 1.0
# Size of sockaddr_un.sun_path (TFS_CTL_SOCK_PATH_MAX in src/ctl_path.h).
SOCK_PATH_MAX = 108
# The environment variable that names the control socket outright.
SOCKET_ENV = "TIERFS_CONTROL_SOCKET"
FSTYPE = "fuse.tierfs"


class Error(OSError):
    """A tierfs operation failed: errno and the daemon's (or the client's)
    message.  `result` holds the daemon's result when there is one (a
    warm-up with failed files)."""

    def __init__(self, err, message, result=None):
        super().__init__(err, message)
        self.result = result


class NotTierfsError(Error):
    """The path is not inside a tierfs mount."""


class DaemonUnavailable(Error):
    """No tierfs daemon answers on the mount's control socket: the socket
    is missing or refuses connections (the daemon is not running, died, or
    runs in another mount namespace), or the daemon did not answer in
    time."""


def _unescape(field):
    """A mountinfo field with its \\ooo escapes (space, tab, newline,
    backslash) decoded."""
    raw = field.encode("utf-8", "surrogateescape")
    out = re.sub(rb"\\([0-7]{3})", lambda m: bytes([int(m.group(1), 8) & 0xFF]), raw)
    return out.decode("utf-8", "surrogateescape")


def tierfs_mounts(mountinfo="/proc/self/mountinfo"):
    """The mount points of the fuse.tierfs filesystems this process sees."""
    points = []
    with open(mountinfo, encoding="utf-8", errors="surrogateescape") as f:
        for line in f:
            left, sep, right = line.partition(" - ")
            fields = left.split()
            if not sep or len(fields) < 5 or not right.split():
                continue
            if right.split()[0] == FSTYPE:
                points.append(_unescape(fields[4]))
    return points


def _inside(path, root):
    return path == root or root == "/" or path.startswith(root + "/")


def mount_root(path):
    """The root of the tierfs mount holding `path`: the longest fuse.tierfs
    mount point in /proc/self/mountinfo that contains the path's real path.
    The path need not exist.  Raises NotTierfsError."""
    real = os.path.realpath(os.fspath(path))
    best = None
    for point in tierfs_mounts():
        if _inside(real, point) and (best is None or len(point) > len(best)):
            best = point
    if best is None:
        raise NotTierfsError(errno.ENODEV, "%s is not inside a tierfs mount (no %s mount "
                             "in /proc/self/mountinfo holds %s)" % (path, FSTYPE, real))
    return best


def key_of(root, path):
    """The key of `path` in the mount at `root` ("" for the root): an
    absolute path is resolved (symbolic links followed) and must lie in the
    mount; a relative path is a key already (relative to the root).
    Raises Error(EXDEV) for a path outside the mount or a key that climbs
    out of it."""
    p = os.fspath(path)
    if isinstance(p, bytes):
        p = os.fsdecode(p)
    if os.path.isabs(p):
        real = os.path.realpath(p)
        if not _inside(real, root):
            raise Error(errno.EXDEV, "%s is not inside the tierfs mount at %s" % (p, root))
        return "" if real == root else real[len(root.rstrip("/")) + 1:]
    key = os.path.normpath(p) if p else "."
    if key == ".":
        return ""
    if key == ".." or key.startswith("../"):
        raise Error(errno.EXDEV, "%r climbs out of the tierfs mount at %s" % (p, root))
    return key


def canonical_path(mountpoint):
    """The canonical form of a mountpoint, as tfs_ctl_canonical_path()
    (src/ctl_path.h) computes it: absolute, the parent resolved, a
    symbolic link as the last component followed; the mountpoint itself
    is never stat()ed."""
    p = os.path.abspath(os.fspath(mountpoint))
    for _ in range(40):
        parent, name = os.path.split(p)
        if not name:
            return parent
        parent = os.path.realpath(parent)
        cand = os.path.join(parent, name)
        try:
            target = os.readlink(cand)
        except OSError:
            return cand
        p = os.path.normpath(os.path.join(parent, target))
    raise Error(errno.ELOOP, "%s: too many levels of symbolic links" % mountpoint)


def runtime_dir():
    """Where the daemons of this effective user put their sockets."""
    uid = os.geteuid()
    if uid == 0:
        return "/run/tierfs"
    x = os.environ.get("XDG_RUNTIME_DIR", "")
    if x.startswith("/"):
        return x.rstrip("/") + "/tierfs"
    return "/tmp/tierfs-%d" % uid


def socket_path(mountpoint):
    """The control socket of the daemon serving `mountpoint` (ctl_path.h):
    RUNDIR/<first 16 hex digits of SHA-256(canonical path)>.sock."""
    canon = canonical_path(mountpoint)
    digest = hashlib.sha256(canon.encode("utf-8", "surrogateescape")).hexdigest()[:16]
    return os.path.join(runtime_dir(), digest + ".sock")


def check_rundir(path):
    """Refuse a control socket directory another user could have made:
    it must be a real directory (not a symbolic link) owned by the
    effective uid that neither group nor others may write, as
    tfs_ctl_socket_path() requires of RUNDIR (there, with the directories
    above it too).  Otherwise a user who planted /tmp/tierfs-UID could
    answer for the daemon (a flush that says everything is uploaded).  A
    missing directory is left to connect() (ENOENT).  Raises Error
    (ENOTDIR, EPERM)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as e:
        raise Error(e.errno or errno.EIO, "control socket directory %s: %s" % (
            path, e.strerror)) from None
    if not stat.S_ISDIR(st.st_mode):
        raise Error(errno.ENOTDIR, "control socket directory %s is not a directory (a "
                    "symbolic link?): refusing to talk to a socket in it" % path)
    if st.st_uid != os.geteuid() or st.st_mode & 0o022:
        raise Error(errno.EPERM, "control socket directory %s is owned by uid %d with mode "
                    "%04o: another user could have planted a socket there; it must be "
                    "yours and not writable by group or others" % (
                        path, st.st_uid, stat.S_IMODE(st.st_mode)))


def _unavailable(err, sock, what):
    hints = {
        errno.ENOENT: "the socket does not exist: no tierfs daemon serves this mount "
                      "(it is not running, or it runs in another mount namespace; "
                      "set %s to its socket)" % SOCKET_ENV,
        errno.ECONNREFUSED: "nothing listens on the socket: the daemon died (a dead "
                            "mount: remount it) or is being restarted",
        errno.EACCES: "permission denied: is the daemon run by another user?",
        errno.ETIMEDOUT: "the daemon did not answer in time: it is overloaded or hung",
        errno.ECONNRESET: "the daemon closed the connection without replying: it may "
                          "have died",
    }
    return DaemonUnavailable(err, "%s (socket %s): %s" % (
        what, sock, hints.get(err, os.strerror(err))))


def _connect(sock_path, timeout):
    """A connected socket, or DaemonUnavailable."""
    if len(sock_path.encode()) >= SOCK_PATH_MAX:
        raise Error(errno.ENAMETOOLONG, "socket path too long: %s" % sock_path)
    deadline = time.monotonic() + min(timeout, REFUSED_RETRY)
    delay = 0.01
    while True:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        try:
            s.connect(sock_path)
            return s
        except socket.timeout:
            s.close()
            raise _unavailable(errno.ETIMEDOUT, sock_path,
                               "cannot connect to the tierfs daemon") from None
        except OSError as e:
            s.close()
            err = e.errno or errno.EIO
            if err == errno.EPERM:
                err = errno.EACCES
            if err == errno.ECONNREFUSED and time.monotonic() + delay < deadline:
                time.sleep(delay)
                delay = min(delay * 2, 0.2)
                continue
            if err in (errno.ENOENT, errno.ECONNREFUSED, errno.EACCES, errno.EAGAIN):
                raise _unavailable(err, sock_path,
                                   "cannot connect to the tierfs daemon") from None
            raise Error(err, "cannot connect to %s: %s" % (sock_path, os.strerror(err))) from None


def _check_errno(v):
    return isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 4095


def _line(raw, progress, sock):
    """Handle one line: (True, result) for a reply; (False, None) to read
    on.  Raises Error for a failure reply or bad protocol."""
    if not raw.strip():
        return False, None
    try:
        msg = json.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise Error(errno.EPROTO, "malformed reply from the daemon (socket %s): %s" % (sock, e)) \
            from None
    if not isinstance(msg, dict):
        raise Error(errno.EPROTO, "malformed reply from the daemon: not a JSON object")
    if "ok" in msg:
        ok = msg["ok"]
        if not isinstance(ok, bool):
            raise Error(errno.EPROTO, 'malformed reply from the daemon: "ok" is not a boolean')
        if ok:
            return True, msg.get("result", {})
        err = msg.get("errno")
        err = err if _check_errno(err) else errno.EIO
        text = msg.get("error")
        raise Error(err, text if isinstance(text, str) else os.strerror(err))
    if "progress" in msg:
        if progress is not None:
            progress(msg["progress"])
        return False, None
    raise Error(errno.EPROTO, 'malformed reply from the daemon: neither "ok" nor "progress"')


def call(sock_path, request, timeout=DEFAULT_TIMEOUT, progress=None, deadline=None):
    """Send `request` (a dict with "cmd") to the daemon at `sock_path` and
    return the "result" of its reply.

    `timeout` (seconds) bounds the connect, the send and each wait for the
    next byte (an inactivity timeout: long commands send progress lines).
    `progress(dict)` is called for each progress line; an exception it
    raises closes the connection (the daemon stops the command) and
    propagates.  `deadline` (time.monotonic() value, or None) bounds the
    whole call: past it the connection is closed and Error(ETIMEDOUT)
    raised.

    Raises DaemonUnavailable (no daemon listens, no answer within
    `timeout`, the connection closed without a reply), Error with the
    daemon's errno and message for a failure reply, Error(EMSGSIZE) for a
    line longer than MAX_REPLY, Error(EPROTO) for anything but the
    protocol."""
    line = json.dumps(request, separators=(",", ":")).encode() + b"\n"
    s = _connect(sock_path, timeout)
    try:
        try:
            s.sendall(line)
        except socket.timeout:
            raise _unavailable(errno.ETIMEDOUT, sock_path,
                               "the daemon did not take the request") from None
        except OSError:
            pass  # the daemon may have explained why it hung up: read on
        buf = bytearray()
        while True:
            nl = buf.find(b"\n")
            while nl >= 0:
                done, result = _line(bytes(buf[:nl]), progress, sock_path)
                if done:
                    return result
                del buf[:nl + 1]
                nl = buf.find(b"\n")
            if len(buf) > MAX_REPLY:
                raise Error(errno.EMSGSIZE, "reply from the daemon larger than %d bytes"
                            % MAX_REPLY)
            wait = timeout
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise Error(errno.ETIMEDOUT, "%s: no reply from the daemon before the "
                                "deadline" % request.get("cmd"))
                wait = min(wait, left)
            s.settimeout(wait)
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                if deadline is not None and time.monotonic() >= deadline:
                    continue  # raises the deadline's error above
                raise _unavailable(errno.ETIMEDOUT, sock_path,
                                   "no reply from the daemon within %g s" % timeout) from None
            except OSError as e:
                if e.errno in (errno.ECONNRESET, errno.EPIPE):
                    chunk = b""
                else:
                    raise Error(e.errno or errno.EIO, "reading from %s: %s" % (
                        sock_path, e.strerror)) from None
            if not chunk:
                if buf.strip():
                    # a last line without a newline
                    done, result = _line(bytes(buf), progress, sock_path)
                    if done:
                        return result
                raise _unavailable(errno.ECONNRESET, sock_path, "no reply to %r"
                                   % request.get("cmd"))
            buf += chunk
    finally:
        s.close()
