"""tierfs - talk to the daemon of a tierfs mount from Python.

    import tierfs
    m = tierfs.Mount("/mnt/data")          # any path inside the mount
    m.warmup(["train"], progress=print)    # keys relative to the mount root
    print(m.stats()["ram"])
    m.flush()                              # every closed file is uploaded

Mount speaks the daemon's control socket protocol directly
(docs/control.md); nothing is run.  Errors raise tierfs.Error (an
OSError: errno and the daemon's message), NotTierfsError (the path is not
in a tierfs mount) or DaemonUnavailable (nothing answers on the socket).
The package imports only the standard library; tierfs.torch and
tierfs.dask import their libraries themselves.  docs/python.md is the
guide.
"""
import errno
import os
import time

from ._control import (DEFAULT_TIMEOUT, SOCKET_ENV, DaemonUnavailable, Error, NotTierfsError,
                       call, check_rundir, key_of, socket_path)
from ._control import mount_root as _mount_root

__all__ = ["Mount", "Error", "NotTierfsError", "DaemonUnavailable", "mount_root", "relpath"]
__version__ = "0.1.0"

# Failures named in a warm-up error's message (all are in Error.result).
_MAX_NAMED = 5
# Times flush() asks again when the daemon ends during its wait, and how
# long it waits each time for the next daemon to listen.
_FLUSH_RECONNECTS = 3
_RESTART_WAIT = 10.0


def mount_root(path):
    """The root of the tierfs mount holding `path` (which need not exist):
    the longest fuse.tierfs mount point in /proc/self/mountinfo containing
    its real path.  Raises NotTierfsError."""
    return _mount_root(path)


def relpath(path):
    """`path` relative to the root of its tierfs mount, as the daemon,
    manifests and `.tierfs-order` name files: "" for the root itself,
    "a/b.jpg" for ROOT/a/b.jpg.  Relative paths are taken from the current
    directory.  Raises NotTierfsError."""
    real = os.path.realpath(os.fspath(path))
    return key_of(mount_root(real), real)


def _paths(paths):
    if paths is None:
        return []
    if isinstance(paths, (str, bytes, os.PathLike)):
        return [paths]
    return list(paths)


class Mount:
    """A tierfs mount, found from any path inside it.

    `socket` names the daemon's control socket; by default it is the
    environment variable TIERFS_CONTROL_SOCKET, or else the socket the
    daemon of the mount root uses (RUNDIR/HASH.sock, docs/control.md).
    `timeout` (seconds) bounds connecting and each wait for the daemon's
    next line; long commands send progress lines, so it does not bound
    them as a whole.

    Paths given to the methods are absolute paths inside the mount, or keys
    relative to the mount's root ("train/cat/1.jpg"; "" is the root), not
    to the current directory.

    Each call opens its own connection: a Mount may be shared by threads.
    Before each call the computed socket's directory is checked (it must
    be the user's own and not writable by others: Error(EPERM) or
    ENOTDIR otherwise).  Raises NotTierfsError if `path` is not inside a
    tierfs mount."""

    def __init__(self, path, socket=None, timeout=DEFAULT_TIMEOUT):
        self.path = os.fspath(path)
        self.root = mount_root(self.path)
        if socket is None:
            socket = os.environ.get(SOCKET_ENV) or None
        # A socket named by the caller is the caller's choice; the computed
        # one is trusted only in a directory no one else controls.
        self._check_dir = socket is None
        self.socket = os.fspath(socket) if socket is not None else socket_path(self.root)
        if timeout is None or timeout <= 0:
            raise ValueError("timeout must be a positive number of seconds")
        self.timeout = float(timeout)

    def __repr__(self):
        return "tierfs.Mount(%r, socket=%r)" % (self.root, self.socket)

    def key(self, path):
        """The key of `path` in this mount (see the class)."""
        return key_of(self.root, path)

    def _call(self, request, progress=None, deadline=None):
        if self._check_dir:
            check_rundir(os.path.dirname(self.socket))
        return call(self.socket, request, self.timeout, progress, deadline)

    # ---- commands ----

    def stats(self):
        """The daemon's counters and state, as `tierfs stats --json` shows
        them (docs/metrics.md)."""
        return self._call({"cmd": "stats"})

    def _files(self, cmd, paths, progress=None, **args):
        keys = [self.key(p) for p in _paths(paths)]
        req = {"cmd": cmd}
        req.update(args)
        req["paths"] = keys
        res = self._call(req, progress)
        failed = res.get("failed_files", 0) if isinstance(res, dict) else 0
        if failed:
            fl = res.get("failures") or []
            named = "; ".join("%s: %s" % (f.get("path"), f.get("error")) for f in fl[:_MAX_NAMED])
            more = failed - min(len(fl), _MAX_NAMED)
            missing = fl and all(f.get("error") == "no such file or directory" for f in fl)
            raise Error(errno.ENOENT if missing and len(fl) == failed else errno.EIO,
                        "%s in %s: %d file(s) failed: %s%s" % (
                            cmd, self.root, failed, named,
                            " (and %d more)" % more if more > 0 else ""),
                        result=res)
        return res

    def warmup(self, paths=None, progress=None, jobs=None, pin=False, manifest=None,
               tier="ssd"):
        """Fill the cache with the named files and directories (recursively)
        and the files `manifest` (a file of keys or JSON lines, read by the
        daemon) lists; with paths None and no manifest, the whole mount
        (an empty list warms nothing).
        `jobs`: parallel fetches (1 to 256; default the mount's
        prefetch.workers); `pin`: pin them in the SSD tier; `tier`: "ssd"
        or "ram".  `progress(dict)` gets each progress report (about two a
        second: files_done, files_total, bytes_done, bytes_total,
        fetched_files, ..., listing_done, seconds).

        Returns the daemon's summary (fetched_files, cached_files,
        skipped_files, failed_files, seconds, ...).  Raises Error if a file
        failed (ENOENT when every failure is a missing path; its `result`
        holds the summary and the failures with the daemon's reasons)."""
        args = {"tier": tier}
        if jobs is not None:
            args["jobs"] = int(jobs)
        if pin:
            args["pin"] = True
        if manifest is not None:
            args["manifest"] = os.path.realpath(os.fspath(manifest))
        elif paths is None:
            paths = [""]
        return self._files("warmup", paths, progress, **args)

    def pin(self, paths, progress=None):
        """Warm the files into the SSD tier and pin them: eviction leaves
        them until unpin().  Returns the summary as warmup()."""
        return self._files("pin", paths, progress)

    def unpin(self, paths, progress=None):
        """Unpin the files (their data stays cached until evicted)."""
        return self._files("unpin", paths, progress)

    def evict(self, paths, progress=None):
        """Drop the files' clean cached data from RAM and SSD.  Files
        written through the mount and not uploaded yet are left alone
        (skipped_files)."""
        return self._files("evict", paths, progress)

    def flush(self, timeout=None, progress=None):
        """Wait until every file closed on the mount is uploaded (the
        control socket's drain with wait, as `tierfs flush`).
        `progress(dict)` gets {"files": N, "bytes": N} left, once a
        second.  Returns {"files": 0, "bytes": 0}.

        If the daemon ends during the wait (its keeper starts the next one
        on the same mount), flush() asks the next daemon (up to 3 times,
        waiting up to 10 s each time for it to listen).
        Raises Error(EIO) when uploads gave up (writeback.max_retries:
        the files stay staged, `tierfs stats` lists them),
        Error(ETIMEDOUT) when `timeout` seconds pass first (the uploads go
        on), and DaemonUnavailable when no daemon answers."""
        deadline = time.monotonic() + timeout if timeout is not None else None
        resets, wait_until = 0, None
        while True:
            try:
                res = self._call({"cmd": "drain", "wait": True}, progress, deadline)
                break
            except DaemonUnavailable as e:
                # The daemon ended during the wait (kill -9, an OOM kill,
                # `tierfs upgrade`): under a keeper the next one serves in
                # a moment, with the same pending uploads; ask it.
                now = time.monotonic()
                if e.errno == errno.ECONNRESET and resets < _FLUSH_RECONNECTS:
                    resets += 1
                    wait_until = now + _RESTART_WAIT
                    continue
                if wait_until is not None and now < wait_until and \
                        e.errno in (errno.ECONNREFUSED, errno.ENOENT) and \
                        (deadline is None or now < deadline):
                    time.sleep(0.1)
                    continue
                raise
        files = res.get("files", 0) if isinstance(res, dict) else 0
        if files:
            raise Error(errno.EIO, "flush of %s: %d file(s) (%d bytes) could not be uploaded "
                        "(their uploads gave up); see `tierfs stats %s` and the daemon's log"
                        % (self.root, files, res.get("bytes", 0), self.root), result=res)
        return res

    def reload(self):
        """Re-read the mount's configuration file and apply what can change
        live.  Returns {"config": path, "applied": [keys],
        "needs_remount": [keys]}; an invalid file raises Error(EINVAL)
        with the daemon's message (the configuration in force stays)."""
        return self._call({"cmd": "reload"})
