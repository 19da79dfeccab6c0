#!/usr/bin/env python3
"""test_flexvolume.py - the Kubernetes FlexVolume driver, called as the kubelet calls it.

    test_flexvolume.py DRIVER TIERFS [-k PATTERN]

DRIVER is the built tierfs-flexvolume, TIERFS the tierfs binary.  The
driver is installed as PLUGINDIR/tierfs~tierfs/tierfs and run the way the
kubelet runs it (anchors §5): that path as argv[0], `init`, `mount TARGET
JSON` with the kubelet's sorted, compact JSON of strings (the pod's
options, the kubernetes.io/ keys and the Secret's keys in base64),
`unmount TARGET`, the kubelet's environment and cwd /, after the kubelet's
own steps (it creates TARGET with mode 0750 before mount and removes it
after a successful unmount).  stdout and stderr are read together from one
pipe and must parse as one JSON object; a call that does not finish in
CALL_TIMEOUT seconds fails the test (a daemon that kept the pipe would do
that).  The buckets live on a moto_server (tests/harness/moto.sh, through
test_mount.py's Bucket).  Needs root and /dev/fuse.

Ends with "flexvolume: N passed, N failed (...)".
"""
import base64
import errno
import json
import os
import re
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from test_mount import BUCKET, Bucket, data_for, poll  # noqa: E402

DRIVER = None
TIERFS = None
CALL_TIMEOUT = 90
INIT_REPLY = ('{"status":"Success","capabilities":{"attach":false,"selinuxRelabel":false,'
              '"fsGroup":false,"supportsMetrics":false,"requiresFSResize":false}}')
# What a kubelet started by systemd has, plus the test's node config.
KUBELET_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

M = None  # the module fixture: the moto bucket
# [node] cgroup_dir of every node config of the suite: below this process's
# own memory cgroup, inside whatever limits the machine gives the tests.
CGROUPS = None
MARGIN = 4 << 30  # [node] memory_margin of the suite


def own_memory_cgroup():
    """The directory of this process's cgroup v1 memory cgroup, or of its
    cgroup v2 cgroup."""
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, ctrl, path = line.rstrip("\n").split(":", 2)
            if "memory" in ctrl.split(","):
                return "/sys/fs/cgroup/memory" + path.rstrip("/")
    return "/sys/fs/cgroup" + path.rstrip("/")  # v2: the "0::" line


def remove_cgroups(top):
    """rmdir the cgroups below top, and top, once their processes are gone."""
    if not top or not os.path.isdir(top):
        return
    for d in [os.path.join(top, n) for n in os.listdir(top)]:
        if os.path.isdir(d):
            poll(lambda: not open(os.path.join(d, "cgroup.procs")).read().strip(), 30,
                 "the processes of %s to exit" % d)
            os.rmdir(d)
    os.rmdir(top)


def setUpModule():
    global M, CGROUPS
    if os.geteuid() != 0 or not os.path.exists("/dev/fuse"):
        raise unittest.SkipTest("needs root and /dev/fuse")
    for b in (DRIVER, TIERFS):
        if not b or not os.access(b, os.X_OK):
            raise unittest.SkipTest("no binary at %s" % b)
    work = tempfile.mkdtemp(prefix="tierfs-fv-moto-")
    M = Bucket("moto", work)
    M.work = work
    CGROUPS = os.path.join(own_memory_cgroup(), "tierfs-fv-test-%d" % os.getpid())


def tearDownModule():
    if M:
        M.close()
        shutil.rmtree(M.work, ignore_errors=True)
    remove_cgroups(CGROUPS)


def b64(s):
    return base64.b64encode(s.encode()).decode()


def mountinfo(path):
    """The mountinfo lines (split) whose mount point is path."""
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            mp = fields[4].replace("\\040", " ")
            if mp == path:
                out.append(fields)
    return out


def pid_gone(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def configmap_conf(path):
    """The node config inside configmap.yaml (the block under flexvolume.conf: |)."""
    out, inside = [], False
    with open(path) as f:
        for line in f:
            if line.strip() == "flexvolume.conf: |":
                inside = True
            elif inside and (line.startswith("    ") or not line.strip()):
                out.append(line[4:] if line.strip() else "\n")
            elif inside:
                break
    return "".join(out).rstrip("\n") + "\n"


# A FUSE server, in Python on the raw kernel protocol, that answers INIT
# and then every request with ESTALE: what a mount whose daemon is gone
# looks like when the kernel does not say ENOTCONN (anchors §5: "ENOTCONN
# or ESTALE means still mounted").  It mounts itself as fuse.tierfs on
# argv[1] with source argv[2], prints "ready", prints the opcode of every
# request it answers, and exits when the mount goes (read() gives ENODEV).
ESTALE_FUSE = r"""
import ctypes, errno, os, struct, sys
target, source = sys.argv[1], sys.argv[2]
fd = os.open("/dev/fuse", os.O_RDWR)
libc = ctypes.CDLL(None, use_errno=True)
data = "fd=%d,rootmode=40000,user_id=0,group_id=0,allow_other" % fd
if libc.mount(source.encode(), target.encode(), b"fuse.tierfs", 2 | 4, data.encode()) != 0:
    sys.exit("mount: " + os.strerror(ctypes.get_errno()))
print("ready", flush=True)
while True:
    try:
        req = os.read(fd, 1 << 17)
    except OSError as e:
        if e.errno in (errno.EINTR, errno.ENOENT):
            continue
        break
    length, opcode, unique = struct.unpack_from("<IIQ", req)
    if opcode in (2, 36, 42):  # FORGET, INTERRUPT, BATCH_FORGET: no reply
        continue
    out, err = b"", -errno.ESTALE
    if opcode == 26:  # INIT: fuse_init_out of protocol 7.31, max_write 4096
        out, err = struct.pack("<IIIIHHIIHHI28x", 7, 31, 0, 0, 0, 0, 4096, 1, 0, 0, 0), 0
    elif opcode == 38:  # DESTROY
        err = 0
    print(opcode, flush=True)
    try:
        os.write(fd, struct.pack("<IiQ", 16 + len(out), err, unique) + out)
    except OSError:
        pass
"""


def parse_ini(text):
    """{section: {key: value}} of a tierfs.conf-syntax text (names lower-case)."""
    out, cur = {}, None
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            cur = out.setdefault(line[1:-1].strip().lower(), {})
        elif "=" in line and cur is not None:
            k, v = line.split("=", 1)
            cur[k.strip().lower()] = v.strip()
    return out


def set_ini(text, changes):
    """`text` with {section: {key: value}} replaced in place (comments and
    order kept); keys it lacks are added at the end of their section."""
    todo = {s: dict(kv) for s, kv in changes.items()}
    out, cur = [], None

    def flush():
        for k, v in todo.pop(cur, {}).items():
            out.append("%s = %s" % (k, v))
    for line in text.splitlines():
        st = line.strip()
        if st.startswith("["):
            flush()
            cur = st[1:-1].strip()
        elif "=" in st and st[0] not in "#;" and cur in todo:
            k = st.split("=", 1)[0].strip()
            if k in todo[cur]:
                line = "%s = %s" % (k, todo[cur].pop(k))
        out.append(line)
    flush()
    assert not todo, "sections missing: %s" % todo
    return "\n".join(out) + "\n"


def kubelet_readwrite(pod_volume, pv=None):
    """kubernetes.io/readwrite as the kubelet computes it (pkg/volume/
    flexvolume: util.go getReadOnly, driver-call.go NewOptionsForDriver):
    an inline volume's flexVolume.readOnly; for a PersistentVolume the
    spec's ReadOnly, which is the pod's persistentVolumeClaim.readOnly --
    the PV's own flexVolume.readOnly is never read."""
    if "flexVolume" in pod_volume:
        return "ro" if pod_volume["flexVolume"].get("readOnly", False) else "rw"
    assert pv is not None and "flexVolume" in pv["spec"], pod_volume
    return "ro" if pod_volume["persistentVolumeClaim"].get("readOnly", False) else "rw"


class Kubelet:
    """One node: a plugin dir with the driver, a node config, and calls."""

    def __init__(self, work, endpoint, conf_extra=None):
        self.work = work
        plugdir = os.path.join(work, "plugins", "tierfs~tierfs")
        os.makedirs(plugdir)
        # Installed as the DaemonSet does: copy to a dot-name, rename.
        shutil.copy2(DRIVER, os.path.join(plugdir, ".tierfs"))
        os.rename(os.path.join(plugdir, ".tierfs"), os.path.join(plugdir, "tierfs"))
        self.driver = os.path.join(plugdir, "tierfs")
        self.state = os.path.join(work, "state")
        self.cache = os.path.join(work, "cache")
        self.log = os.path.join(work, "driver.log")
        self.daemon_log = os.path.join(work, "daemons.log")
        conf = {
            "node": {"tierfs": TIERFS, "cache_root": self.cache, "state_dir": self.state,
                     "log_file": self.log, "daemon_log": self.daemon_log, "log_level": "debug",
                     "mount_timeout": "30s", "unmount_timeout": "30s", "cgroup_dir": CGROUPS,
                     # Room for a sanitized daemon (check.sh runs this
                     # suite under ASan and TSan).
                     "memory_margin": "%dM" % (MARGIN >> 20)},
            "defaults": {"endpoint": endpoint, "ramSize": "64M", "ssdSize": "256M",
                         "metadataTTL": "forever"},
            "limits": {"maxRamSize": "256M", "minMetadataTTL": "1s"},
            "pod": {"allow": "source, bucket, prefix, readOnly, ramSize, ssdSize, policy, "
                             "metadataTTL"},
        }
        for sec, kv in (conf_extra or {}).items():
            conf.setdefault(sec, {}).update(kv)
        self.conf = os.path.join(work, "flexvolume.conf")
        with open(self.conf, "w") as f:
            for sec, kv in conf.items():
                f.write("[%s]\n" % sec)
                for k, v in kv.items():
                    f.write("%s = %s\n" % (k, v))
        self.env = {"PATH": KUBELET_PATH, "HOME": "/root", "TIERFS_FLEXVOLUME_CONF": self.conf}
        # tests/harness/sanitize.sh: the reports of a sanitized driver and
        # daemon go to files (the driver passes these on to the daemon).
        for k in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS", "TSAN_OPTIONS"):
            if k in os.environ:
                self.env[k] = os.environ[k]

    def call(self, *args, timeout=CALL_TIMEOUT):
        """Run the driver; return (exit status, reply object, raw output)."""
        p = subprocess.Popen([self.driver] + list(args), stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=self.env,
                             cwd="/", start_new_session=False)
        try:
            raw, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            raise AssertionError("%s %s did not finish within %d s (does a daemon hold the "
                                 "kubelet's pipe?)" % (self.driver, args[0], timeout))
        text = raw.decode("utf-8", "replace")
        try:
            reply = json.loads(text)
        except ValueError:
            raise AssertionError("the driver's stdout+stderr is not one JSON object: %r" % text)
        if not isinstance(reply, dict) or "status" not in reply:
            raise AssertionError("no status in the reply: %r" % text)
        want = 1 if reply["status"] == "Failure" else 0
        if p.returncode != want:
            raise AssertionError("status %s with exit code %d" % (reply["status"], p.returncode))
        return p.returncode, reply, text

    def options(self, opts, secret=None, readwrite="rw", pod="trainer-0", fsgroup=None):
        """The JSON the kubelet passes: sorted keys, strings only (mounter.go
        adds mounterArgs.FsGroup when the pod has an fsGroup)."""
        o = {
            "kubernetes.io/fsType": "",
            "kubernetes.io/readwrite": readwrite,
            "kubernetes.io/pvOrVolumeName": "datasets",
            "kubernetes.io/pod.name": pod,
            "kubernetes.io/pod.namespace": "ml",
            "kubernetes.io/pod.uid": "0b5e7c2a-5f07-4a39-a1f6-1a3f6a0c9e11",
            "kubernetes.io/serviceAccount.name": "default",
        }
        if fsgroup is not None:
            o["kubernetes.io/mounterArgs.FsGroup"] = str(fsgroup)
        for k, v in (secret or {}).items():
            o["kubernetes.io/secret/" + k] = v
        o.update(opts)
        return json.dumps(o, sort_keys=True, separators=(",", ":"))

    def new_target(self, name):
        """What the kubelet does before mount: create the directory, 0750."""
        t = os.path.join(self.work, "pods", name, "volumes", "tierfs~tierfs", "data")
        os.makedirs(os.path.dirname(t), exist_ok=True)
        os.chmod(os.path.join(self.work, "pods"), 0o755)
        for d in (os.path.join(self.work, "pods", name), os.path.dirname(os.path.dirname(t)),
                  os.path.dirname(t)):
            os.chmod(d, 0o755)
        os.mkdir(t, 0o750)
        return t

    def mount(self, target, opts, secret=None, **kw):
        return self.call("mount", target, self.options(opts, secret, **kw))

    def unmount(self, target):
        r = self.call("unmount", target)
        if r[1]["status"] == "Success" and os.path.isdir(target) and not os.path.ismount(target):
            os.rmdir(target)  # the kubelet removes the directory
        return r

    def log_text(self):
        out = ""
        for p in (self.log, self.daemon_log):
            try:
                with open(p) as f:
                    out += f.read()
            except OSError:
                pass
        return out

    def state_dirs(self):
        """The per-volume directories of state_dir (beside them: the
        node's fingerprint.key and limits.lock)."""
        try:
            return sorted(d for d in os.listdir(self.state)
                          if os.path.isdir(os.path.join(self.state, d)))
        except FileNotFoundError:
            return []


def stats(target):
    r = subprocess.run([TIERFS, "stats", "--json", target], capture_output=True, text=True,
                       timeout=30)
    if r.returncode != 0:
        raise AssertionError("stats failed: " + r.stderr)
    return json.loads(r.stdout)


def kill_mount(target):
    """kill -9 of the volume's keeper, then of its daemon: a dead mount
    (a daemon alone is restarted by its keeper on the same mount)."""
    st = stats(target)
    for pid in (st["keeper"]["pid"], st["pid"]):
        os.kill(pid, 9)
        poll(lambda: pid_gone(pid), 10, "the process to die")


class FlexVolumeTests(unittest.TestCase):
    def setUp(self):
        self.work = tempfile.mkdtemp(prefix="tierfs-fv-")
        os.chmod(self.work, 0o755)  # a reader of another uid must reach the mounts
        self.sub = "%s-%s" % (self._testMethodName[5:], secrets.token_hex(3))
        self.source = "%s/%s" % (M.source, self.sub)
        self.secret = {"accessKey": b64("AKIA" + secrets.token_hex(8).upper()),
                       "secretKey": b64("sk/" + secrets.token_urlsafe(24))}
        self.k = Kubelet(self.work, M.env["TFS_S3_ENDPOINT"])
        self.targets = []

    def tearDown(self):
        for t in self.targets:
            if mountinfo(t):
                subprocess.run(["umount", "-l", t], capture_output=True)
        if getattr(self, "_outcome", None) and not self._ok():
            print("---- driver and daemon log:\n" + self.k.log_text()[-4000:])
        shutil.rmtree(self.work, ignore_errors=True)

    def _ok(self):
        res = self._outcome.result
        return not any(t is self for t, _ in res.failures + res.errors)

    def put(self, name, data):
        M.put(self.sub + "/" + name, data)

    def bucket_get(self, name):
        try:
            return M.s3.get_object(Bucket=BUCKET, Key=M.prefix + self.sub + "/" + name)["Body"].read()
        except M.s3.exceptions.NoSuchKey:
            return None

    def target(self, name="pod-a"):
        t = self.k.new_target(name)
        self.targets.append(t)
        return t

    def mount_ok(self, t, opts=None, **kw):
        rc, reply, raw = self.k.mount(t, dict({"source": self.source}, **(opts or {})),
                                      kw.pop("secret", self.secret), **kw)
        self.assertEqual(reply, {"status": "Success"}, raw)
        self.assertEqual(raw, '{"status":"Success"}\n')
        return reply

    def assert_failure(self, reply, *words):
        self.assertEqual(reply["status"], "Failure", reply)
        self.assertTrue(reply.get("message"), reply)
        for w in words:
            self.assertIn(w, reply["message"])

    def assert_nothing_left(self, t):
        self.assertEqual(mountinfo(t), [], "something is mounted on " + t)
        self.assertEqual(self.k.state_dirs(), [], "per-volume state left behind")
        # The node's cache is shared by every volume and stays (one directory
        # per source below it); its per-mount staging must be empty.
        if os.path.isdir(self.k.cache):
            for src in os.listdir(self.k.cache):
                staging = os.path.join(self.k.cache, src, "staging")
                for owner in (os.listdir(staging) if os.path.isdir(staging) else []):
                    self.assertEqual(os.listdir(os.path.join(staging, owner)), [],
                                     "staged files left behind in " + staging)

    # ---- the protocol

    def test_init_exact(self):
        t0 = time.monotonic()
        rc, reply, raw = self.k.call("init")
        self.assertLess(time.monotonic() - t0, 2.0, "init must be instant")
        self.assertEqual(rc, 0)
        self.assertEqual(raw, INIT_REPLY + "\n")
        # init reads no config: it works even with a broken one.
        with open(self.k.conf, "a") as f:
            f.write("this is not ini\n")
        self.assertEqual(self.k.call("init")[2], INIT_REPLY + "\n")

    def test_other_calls_not_supported(self):
        for args in (["getvolumename", "{}"], ["attach", "{}", "node1"], ["isattached", "{}", "n"],
                     ["waitforattach", "/dev/x", "{}"], ["mountdevice", "/x", "/dev/x", "{}"],
                     ["detach", "pv", "node1"], ["expandvolume", "{}", "1", "2"], ["frobnicate"]):
            rc, reply, raw = self.k.call(*args)
            self.assertEqual((rc, raw), (0, '{"status":"Not supported"}\n'), args)

    def test_node_config_error_names_file_and_line(self):
        with open(self.k.conf, "a") as f:
            f.write("[limits]\nmaxRamSize = lots\n")
        t = self.target()
        rc, reply, raw = self.k.mount(t, {"source": self.source}, self.secret)
        n = len(open(self.k.conf).read().splitlines())
        self.assert_failure(reply, "%s:%d: [limits] maxRamSize" % (self.k.conf, n))
        self.assertEqual(mountinfo(t), [])

    # ---- mount and unmount

    def test_mount_live_readable_by_nonroot(self):
        files = {"train/a.bin": data_for("a", 300000), "train/b.txt": b"hello\n"}
        for k, v in files.items():
            self.put(k, v)
        t = self.target()
        self.mount_ok(t)
        mi = mountinfo(t)
        self.assertEqual(len(mi), 1, mi)
        sep = mi[0].index("-")
        self.assertEqual(mi[0][sep + 1], "fuse.tierfs")
        self.assertIn("allow_other", mi[0][sep + 3])
        for k, v in files.items():
            with open(os.path.join(t, k), "rb") as f:
                self.assertEqual(f.read(), v)
            r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                                "cat", os.path.join(t, k)], capture_output=True, timeout=30)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stdout, v, "uid 65534 read different bytes")
        rc, reply, raw = self.k.unmount(t)
        self.assertEqual(reply, {"status": "Success"})

    def test_second_mount_is_idempotent(self):
        self.put("x", b"x")
        t = self.target()
        self.mount_ok(t)
        pid = stats(t)["pid"]
        self.mount_ok(t)
        self.assertEqual(len(mountinfo(t)), 1, "mounted twice")
        self.assertEqual(stats(t)["pid"], pid, "a second daemon")
        # The same target with another source is refused, not remounted.
        rc, reply, raw = self.k.mount(t, {"source": M.source + "/elsewhere"}, self.secret)
        self.assert_failure(reply, "already mounted")
        self.assertEqual(len(mountinfo(t)), 1)
        self.k.unmount(t)

    def test_unmount_leaves_nothing_and_daemon_exits(self):
        self.put("x", b"x" * 5000)
        t = self.target()
        self.mount_ok(t)
        with open(os.path.join(t, "x"), "rb") as f:
            self.assertEqual(len(f.read()), 5000)
        pid = stats(t)["pid"]
        self.assertEqual(len(self.k.state_dirs()), 1)
        rc, reply, raw = self.k.unmount(t)
        self.assertEqual((rc, raw), (0, '{"status":"Success"}\n'))
        self.assertTrue(pid_gone(pid), "daemon %d still running" % pid)
        self.assertFalse(os.path.exists(t), "the kubelet could not remove the target")
        self.assert_nothing_left(t)
        # unmount again (a kubelet retry after a restart): still Success.
        os.mkdir(t)
        self.assertEqual(self.k.unmount(t)[1], {"status": "Success"})

    def test_unmount_busy_is_lazy(self):
        """A read-only volume (nothing to upload) that a process still uses."""
        self.put("x", b"busy")
        t = self.target()
        self.mount_ok(t, readwrite="ro")
        pid = stats(t)["pid"]
        f = open(os.path.join(t, "x"), "rb")
        try:
            os.chdir(t)  # EBUSY for a plain umount
            rc, reply, raw = self.k.call("unmount", t)
            self.assertEqual(reply, {"status": "Success"}, raw)
            self.assertEqual(mountinfo(t), [], "still mounted after unmount")
            self.assertFalse(pid_gone(pid), "the daemon should serve the open file")
            self.assertEqual(f.read(), b"busy")
            self.assertIn("lazy", self.k.log_text())
        finally:
            os.chdir("/")
            f.close()
        poll(lambda: pid_gone(pid), 20, "the daemon to exit once its last file is closed")
        # The next call sweeps what the lazy unmount had to leave.
        other = self.target("pod-b")
        self.assertEqual(self.k.unmount(other)[1], {"status": "Success"})
        self.assertEqual(self.k.state_dirs(), [])

    def test_killed_daemon_volume_keeps_working(self):
        """kill -9 of a published volume's daemon: its keeper starts a new
        one on the same mount, the pod's mount keeps answering with no
        driver call, and the unmount leaves nothing."""
        self.put("a.bin", b"A" * 5000)
        self.put("b.bin", b"B" * 7000)
        t = self.target()
        self.mount_ok(t)
        st = stats(t)
        os.kill(st["pid"], 9)
        def generation():
            try:
                return stats(t)["keeper"]["generation"]
            except AssertionError:  # no daemon answers for a moment
                return None
        poll(lambda: generation() == 1, 20, "the next daemon")
        self.assertEqual(sorted(os.listdir(t)), ["a.bin", "b.bin"])
        with open(os.path.join(t, "b.bin"), "rb") as f:
            self.assertEqual(f.read(), b"B" * 7000)
        k = stats(t)["keeper"]
        self.assertEqual((k["pid"], k["restarts"]), (st["keeper"]["pid"], 1))
        self.assertEqual(self.k.unmount(t)[1], {"status": "Success"})
        poll(lambda: pid_gone(st["keeper"]["pid"]), 10, "the keeper to end")
        self.assert_nothing_left(t)

    def test_unmount_dead_mount(self):
        """ENOTCONN is still mounted: unmount must unmount it.  A writable
        volume's cache may hold writes the dead daemon did not upload: it
        is kept, and the next mount of the target uploads them."""
        self.put("x", b"x")
        t = self.target()
        self.mount_ok(t, {"readOnly": "false"})
        kill_mount(t)
        with self.assertRaises(OSError):
            os.statvfs(t)
        self.assertEqual(len(mountinfo(t)), 1)
        rc, reply, raw = self.k.unmount(t)
        self.assertEqual(reply, {"status": "Success"}, raw)
        self.assertEqual(mountinfo(t), [])
        [h] = self.k.state_dirs()
        with open(os.path.join(self.k.state, h, "volume.json")) as f:
            self.assertEqual(json.load(f)["phase"], "kept")
        self.assertEqual(sorted(os.listdir(os.path.join(self.k.state, h))),
                         ["tierfs.conf", "volume.json"], "the credentials outlive the mount")
        self.assertIn("kept the cache", self.k.log_text())
        # Other calls leave it alone; a new mount of the target takes it over.
        self.assertEqual(self.k.unmount(self.target("pod-b"))[1], {"status": "Success"})
        self.assertEqual(self.k.state_dirs(), [h])
        os.makedirs(t, exist_ok=True)
        self.mount_ok(t)
        self.assertEqual(self.k.unmount(t)[1], {"status": "Success"})
        self.assert_nothing_left(t)

    def stale_mount(self, t):
        """Kill the volume's daemon, detach its corpse and put an ESTALE
        answering FUSE mount of the same type and source in its place."""
        kill_mount(t)
        self.assertEqual(subprocess.run(["umount", "-l", t]).returncode, 0)
        fake = subprocess.Popen([sys.executable, "-c", ESTALE_FUSE, t, self.source],
                                stdout=subprocess.PIPE, text=True)
        self.addCleanup(lambda: fake.poll() is None and (fake.kill(), fake.wait()))
        self.assertEqual(fake.stdout.readline(), "ready\n")
        with self.assertRaises(OSError) as cm:
            os.statvfs(t)
        self.assertEqual(cm.exception.errno, errno.ESTALE)
        [mi] = mountinfo(t)
        self.assertEqual(mi[mi.index("-") + 1], "fuse.tierfs")
        return fake

    def test_unmount_stale_mount(self):
        """ESTALE is still mounted, as ENOTCONN is (test_unmount_dead_mount):
        unmount unmounts it and keeps the writable volume's cache."""
        self.put("x", b"x")
        t = self.target()
        self.mount_ok(t, {"readOnly": "false"})
        fake = self.stale_mount(t)
        rc, reply, raw = self.k.unmount(t)
        self.assertEqual(reply, {"status": "Success"}, raw)
        self.assertEqual(mountinfo(t), [])
        self.assertEqual(fake.wait(timeout=30), 0, "the stale mount's server is still serving")
        # statfs (opcode 17): ours in stale_mount(), then tierfs umount's.
        self.assertGreaterEqual(fake.stdout.read().split().count("17"), 2,
                                "the unmount never met the ESTALE")
        [h] = self.k.state_dirs()
        with open(os.path.join(self.k.state, h, "volume.json")) as f:
            self.assertEqual(json.load(f)["phase"], "kept")
        self.assertIn("kept the cache", self.k.log_text())
        os.makedirs(t, exist_ok=True)
        self.mount_ok(t)
        self.assertEqual(self.k.unmount(t)[1], {"status": "Success"})
        self.assert_nothing_left(t)

    def test_stale_mount_is_mounted_again(self):
        """A mount answering ESTALE is detached and mounted again, as a
        dead one answering ENOTCONN is (test_dead_mount_is_mounted_again)."""
        self.put("x", b"again")
        t = self.target()
        self.mount_ok(t)
        fake = self.stale_mount(t)
        self.mount_ok(t)
        self.assertIn("the mount is dead (%s); mounting again" % os.strerror(errno.ESTALE),
                      self.k.log_text())
        self.assertEqual(fake.wait(timeout=30), 0, "the stale mount's server is still serving")
        with open(os.path.join(t, "x"), "rb") as f:
            self.assertEqual(f.read(), b"again")
        self.assertEqual(len(mountinfo(t)), 1)
        self.assertEqual(self.k.unmount(t)[1], {"status": "Success"})
        self.assert_nothing_left(t)

    def test_unmount_drains_writeback(self):
        """What a pod wrote is in the bucket when unmount succeeds."""
        t = self.target()
        self.mount_ok(t, {"readOnly": "false"})
        data = data_for("ckpt", 3 * 1000 * 1000)
        with open(os.path.join(t, "ckpt.pt"), "wb") as f:
            f.write(data)
        self.assertEqual(self.k.unmount(t)[1], {"status": "Success"})
        self.assertEqual(self.bucket_get("ckpt.pt"), data)
        self.assert_nothing_left(t)

    def test_unmount_waits_for_uploads(self):
        """With the store unreachable, unmount fails with a report and the
        volume stays mounted; once the store is back, it succeeds."""
        self.k = Kubelet(os.path.join(self.work, "short"), M.env["TFS_S3_ENDPOINT"],
                         {"node": {"unmount_timeout": "3s"}})
        t = self.target()
        self.mount_ok(t, {"readOnly": "false"})
        os.listdir(t)  # a complete listing: new names need no lookup while the store is away
        with open(M.server_dir + "/moto.pid") as f:
            moto = int(f.read())
        os.kill(moto, signal.SIGSTOP)
        try:
            with open(os.path.join(t, "late.bin"), "wb") as f:
                f.write(b"must not be lost")
            rc, reply, raw = self.k.unmount(t)
            self.assert_failure(reply, "not uploaded yet", "stays mounted")
            self.assertEqual(len(mountinfo(t)), 1, "unmounted with writes pending")
        finally:
            os.kill(moto, signal.SIGCONT)
        poll(lambda: self.k.unmount(t)[1]["status"] == "Success", 60, "the unmount to succeed")
        self.assertEqual(self.bucket_get("late.bin"), b"must not be lost")
        self.assert_nothing_left(t)

    def test_dead_mount_is_mounted_again(self):
        self.put("x", b"again")
        t = self.target()
        self.mount_ok(t)
        kill_mount(t)
        # What the pod sees from now on, and what the kubelet's
        # prepareForMount() gets once the root's cached attributes expire
        # (until then it takes the target for mounted); either way the
        # kubelet never calls the driver on a dead mount, only a direct
        # call gets here (docs/kubernetes.md, "When a daemon dies").
        # ENOTCONN, or ECONNABORTED for a request the kernel had queued
        # when the last descriptor of the connection went (the keeper's and
        # the daemon's are two now).
        with self.assertRaises(OSError) as cm:
            os.listdir(t)
        self.assertIn(cm.exception.errno, (errno.ENOTCONN, errno.ECONNABORTED))
        self.mount_ok(t)
        with open(os.path.join(t, "x"), "rb") as f:
            self.assertEqual(f.read(), b"again")
        self.assertEqual(len(mountinfo(t)), 1)
        self.k.unmount(t)

    def test_mount_survives_driver_exit(self):
        self.put("x", b"still here")
        t = self.target()
        self.mount_ok(t)  # the driver has exited when this returns
        pid = stats(t)["pid"]
        time.sleep(1)
        with open(os.path.join(t, "x"), "rb") as f:
            self.assertEqual(f.read(), b"still here")
        # Detached: its own session, stdio on /dev/null, not our child.
        self.assertNotEqual(os.getsid(pid), os.getsid(0))
        for fd in (0, 1, 2):
            self.assertEqual(os.readlink("/proc/%d/fd/%d" % (pid, fd)), "/dev/null")
        with open("/proc/%d/stat" % pid) as f:
            ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        self.assertNotEqual(ppid, os.getpid())
        self.k.unmount(t)

    def test_read_only(self):
        self.put("x", b"x")
        t = self.target()
        self.mount_ok(t, readwrite="ro")
        self.assertTrue(mountinfo(t)[0][5].startswith("ro"), mountinfo(t))
        self.k.unmount(t)
        t = self.target("pod-b")
        self.mount_ok(t, {"readOnly": "true"})
        self.assertTrue(mountinfo(t)[0][5].startswith("ro"), mountinfo(t))
        self.k.unmount(t)

    def test_fsgroup_nonroot_writes_checkpoint(self):
        """The pod's fsGroup becomes the mount's group with group-writable
        modes: a uid of the pod, in that group only, writes a checkpoint."""
        self.put("data/x", b"x")
        uid, fsgroup = 1234, 2345
        t = self.target("pod-a")
        self.mount_ok(t, fsgroup=fsgroup)
        st = os.stat(t)
        self.assertEqual((st.st_gid, stat.S_IMODE(st.st_mode)), (fsgroup, 0o775))
        st = os.stat(os.path.join(t, "data", "x"))
        self.assertEqual((st.st_gid, stat.S_IMODE(st.st_mode)), (fsgroup, 0o664))
        ckpt = os.path.join(t, "ckpt", "step-100.pt")
        body = data_for("ckpt", 50000)
        r = subprocess.run(["setpriv", "--reuid=%d" % uid, "--regid=%d" % uid,
                            "--groups=%d" % fsgroup, "sh", "-c",
                            'mkdir "$1" && cat > "$2"', "sh", os.path.dirname(ckpt), ckpt],
                           input=body, capture_output=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(ckpt, "rb") as f:
            self.assertEqual(f.read(), body)
        self.assertEqual(self.k.unmount(t)[1], {"status": "Success"})
        self.assertEqual(self.bucket_get("ckpt/step-100.pt"), body)
        # Without an fsGroup the same uid may not write: root's 0755.
        t = self.target("pod-b")
        self.mount_ok(t)
        self.assertEqual(stat.S_IMODE(os.stat(t).st_mode), 0o755)
        r = subprocess.run(["setpriv", "--reuid=%d" % uid, "--regid=%d" % uid,
                            "--groups=%d" % fsgroup, "mkdir", os.path.join(t, "ckpt2")],
                           capture_output=True, timeout=30)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn(b"Permission denied", r.stderr)
        self.k.unmount(t)

    def test_fsgroup_off_and_modes_from_node(self):
        """[node] fsgroup = no ignores the pod's fsGroup; the modes are the
        node's."""
        self.put("x", b"x")
        self.k = Kubelet(os.path.join(self.work, "n2"), M.env["TFS_S3_ENDPOINT"],
                         {"node": {"fsgroup_dir_mode": "0770", "fsgroup_file_mode": "0640"}})
        t = self.target("pod-a")
        self.mount_ok(t, fsgroup=3456)
        st = os.stat(t)
        self.assertEqual((st.st_gid, stat.S_IMODE(st.st_mode)), (3456, 0o770))
        self.assertEqual(stat.S_IMODE(os.stat(os.path.join(t, "x")).st_mode), 0o640)
        self.k.unmount(t)
        self.k = Kubelet(os.path.join(self.work, "n3"), M.env["TFS_S3_ENDPOINT"],
                         {"node": {"fsgroup": "no"}})
        t = self.target("pod-b")
        self.mount_ok(t, fsgroup=3456)
        st = os.stat(t)
        self.assertEqual((st.st_gid, stat.S_IMODE(st.st_mode)), (0, 0o755))
        self.k.unmount(t)

    def test_bucket_and_prefix(self):
        self.put("p/q.txt", b"via bucket+prefix")
        t = self.target()
        bucket, prefix = self.source[len("s3://"):].split("/", 1)
        rc, reply, raw = self.k.mount(t, {"bucket": bucket, "prefix": prefix + "/p"}, self.secret)
        self.assertEqual(reply, {"status": "Success"}, raw)
        with open(os.path.join(t, "q.txt"), "rb") as f:
            self.assertEqual(f.read(), b"via bucket+prefix")
        self.k.unmount(t)

    def test_comma_prefix_and_setid_object(self):
        """A prefix with commas cannot add mount options, and an object whose
        x-amz-meta-mode is setuid root (0104755, uid 0) shows as 0755: a
        volume is mounted nosuid,nodev and never trusted, even when the
        node's tierfs_conf says [mount] trusted = true."""
        base = os.path.join(self.work, "base.conf")
        with open(base, "w") as f:
            f.write("[mount]\ntrusted = true\n")
        self.k = Kubelet(os.path.join(self.work, "node"), M.env["TFS_S3_ENDPOINT"],
                         {"node": {"tierfs_conf": base}})
        M.s3.put_object(Bucket=BUCKET, Key=M.prefix + self.sub + "/x,suid,dev/tool",
                        Body=b"#!/bin/sh\n", Metadata={"mode": "35309", "uid": "0", "gid": "0"})
        bucket, prefix = self.source[len("s3://"):].split("/", 1)
        for pod, opts in (("pod-a", {"bucket": bucket, "prefix": prefix + "/x,suid,dev"}),
                          ("pod-b", {"source": self.source + "/x,suid,dev"})):
            t = self.target(pod)
            rc, reply, raw = self.k.mount(t, opts, self.secret)
            self.assertEqual(reply, {"status": "Success"}, raw)
            [mi] = mountinfo(t)
            sep = mi.index("-")
            self.assertEqual(mi[sep + 2], self.source + "/x,suid,dev", mi)
            self.assertIn("nosuid", mi[5].split(","), mi)
            self.assertIn("nodev", mi[5].split(","), mi)
            st = os.stat(os.path.join(t, "tool"))
            self.assertEqual((stat.S_IMODE(st.st_mode), st.st_uid), (0o755, 0), oct(st.st_mode))
            self.k.unmount(t)

    def test_systemd_scope(self):
        """With systemd, the daemon starts under systemd-run --scope (here a
        stand-in that records its arguments and runs the command)."""
        fake = os.path.join(self.work, "systemd-run")
        record = os.path.join(self.work, "systemd-run.args")
        with open(fake, "w") as f:
            f.write('#!/bin/sh\nprintf "%%s\\n" "$@" > %s\n'
                    'while [ "$1" != "--" ]; do shift; done\nshift\nexec "$@"\n' % record)
        os.chmod(fake, 0o755)
        self.k = Kubelet(os.path.join(self.work, "sd"), M.env["TFS_S3_ENDPOINT"],
                         {"node": {"systemd": "yes", "systemd_run": fake}})
        self.put("x", b"scoped")
        t = self.target()
        self.mount_ok(t)
        with open(record) as f:
            args = f.read().split("\n")
        self.assertIn("--scope", args)
        self.assertIn("--collect", args)
        self.assertTrue(any(a.startswith("--unit=tierfs-fv-") for a in args), args)
        # The daemon's memory limit: ram.size (64M) + memory_margin.
        self.assertIn("--property=MemoryMax=%d" % ((64 << 20) + MARGIN), args)
        self.assertEqual(args[args.index("--") + 1:args.index("--") + 3], [TIERFS, "mount"])
        with open(os.path.join(t, "x"), "rb") as f:
            self.assertEqual(f.read(), b"scoped")
        self.k.unmount(t)

    # ---- refusals: a message, and nothing left

    def test_node_limits(self):
        """[node] max_daemons and max_total_ram: a mount beyond them is a
        Failure that names the limit, and leaves nothing behind."""
        self.k = Kubelet(os.path.join(self.work, "lim"), M.env["TFS_S3_ENDPOINT"],
                         {"node": {"max_daemons": "1", "max_total_ram": "100M"}})
        self.put("x", b"x")
        t1, t2 = self.target("pod-a"), self.target("pod-b")
        self.mount_ok(t1)
        rc, reply, raw = self.k.mount(t2, {"source": self.source}, self.secret)
        self.assert_failure(reply, "node limit reached", "max_daemons = 1")
        self.assertEqual(mountinfo(t2), [])
        self.k.unmount(t1)
        os.mkdir(t1)  # the kubelet's, for the next pod
        self.mount_ok(t1)
        self.k.unmount(t1)
        os.mkdir(t1)
        self.k = Kubelet(os.path.join(self.work, "lim2"), M.env["TFS_S3_ENDPOINT"],
                         {"node": {"max_total_ram": "100M"}})
        self.mount_ok(t1)
        rc, reply, raw = self.k.mount(t2, {"source": self.source}, self.secret)
        self.assert_failure(reply, "node limit reached", "max_total_ram = 100 MiB")
        self.assertEqual(mountinfo(t2), [])
        self.k.unmount(t1)
        self.assert_nothing_left(t1)
        self.assert_nothing_left(t2)

    def test_bad_json(self):
        t = self.target()
        for bad in ("{not json", "[1,2]", ""):
            rc, reply, raw = self.k.call("mount", t, bad)
            self.assert_failure(reply, "JSON")
        self.assert_nothing_left(t)

    def test_missing_bucket(self):
        t = self.target()
        rc, reply, raw = self.k.mount(t, {"prefix": "x"}, self.secret)
        self.assert_failure(reply, "missing bucket")
        self.assert_nothing_left(t)

    def test_bad_secret(self):
        t = self.target()
        bad = dict(self.secret, secretKey="!!not-base64!!")
        rc, reply, raw = self.k.mount(t, {"source": self.source}, bad)
        self.assert_failure(reply, "secret secretKey", "base64")
        self.assertNotIn("not-base64", reply["message"])
        half = {"accessKey": self.secret["accessKey"]}
        rc, reply, raw = self.k.mount(t, {"source": self.source}, half)
        self.assert_failure(reply, "secretKey")
        rc, reply, raw = self.k.mount(t, {"source": self.source},
                                      dict(self.secret, password=b64("x")))
        self.assert_failure(reply, "unknown key 'password' in the volume's Secret")
        rc, reply, raw = self.k.mount(t, {"source": self.source}, None)
        self.assert_failure(reply, "no credentials")
        self.assert_nothing_left(t)

    def test_bad_options(self):
        t = self.target()
        cases = [
            ({"source": self.source, "ramsize": "1G"}, ["unknown option 'ramsize'"]),
            ({"source": self.source, "endpoint": "http://10.0.0.1"},
             ["option endpoint: not allowed on this node", self.k.conf]),
            ({"source": self.source, "ramSize": "1G"}, ["option ramSize", "maxRamSize = 256M"]),
            ({"source": self.source, "ramSize": "lots"}, ["option ramSize", "'lots'"]),
            ({"source": self.source, "ssdSize": "50%"}, ["option ssdSize", "absolute"]),
            ({"source": self.source, "metadataTTL": "10ms"}, ["option metadataTTL",
                                                              "minMetadataTTL"]),
            ({"source": self.source, "policy": "fifo"}, ["option policy", "lru, epoch"]),
            ({"source": "/etc"}, ["option source", "s3://"]),
            ({"source": self.source, "bucket": "b"}, ["source and bucket"]),
            ({"bucket": "a/b"}, ["option bucket", "not a bucket name"]),
            ({"source": self.source, "readOnly": "maybe"}, ["option readOnly", "boolean"]),
        ]
        for opts, words in cases:
            rc, reply, raw = self.k.mount(t, opts, self.secret)
            self.assert_failure(reply, *words)
        rc, reply, raw = self.k.mount(t, {"source": self.source}, self.secret, readwrite="rx")
        self.assert_failure(reply, "kubernetes.io/readwrite")
        self.assert_nothing_left(t)

    def test_daemon_error_is_the_reply(self):
        """A mount the daemon refuses: its own message, nothing left."""
        t = self.target()
        rc, reply, raw = self.k.mount(t, {"source": "s3://no-such-bucket-%s" % self.sub},
                                      self.secret)
        self.assert_failure(reply, "the bucket does not exist")
        self.assert_nothing_left(t)
        self.assertEqual(subprocess.run(["pgrep", "-f", self.k.state], capture_output=True)
                         .returncode, 1, "a daemon is left running")

    # ---- secrets

    def test_secrets_stay_secret(self):
        token = "tok" + secrets.token_urlsafe(900)  # an STS-sized token
        secret = dict(self.secret, sessionToken=b64(token))
        plain = [base64.b64decode(v).decode() for v in secret.values()]
        needles = [s.encode() for s in plain] + [v.encode() for v in secret.values()]
        self.put("x", b"x")
        t = self.target()
        self.mount_ok(t, secret=secret)
        with open(os.path.join(t, "x"), "rb") as f:
            self.assertEqual(f.read(), b"x")
        # The credentials file holds them (the positive control), 0600.
        [h] = self.k.state_dirs()
        creds = os.path.join(self.k.state, h, "credentials")
        self.assertEqual(stat.S_IMODE(os.stat(creds).st_mode), 0o600)
        self.assertEqual(stat.S_IMODE(os.stat(os.path.join(self.k.state, h)).st_mode), 0o700)
        with open(creds, "rb") as f:
            text = f.read()
        for s in plain:
            self.assertIn(s.encode(), text)
        # ... and nothing else does: command lines, environments, logs, config.
        seen = []
        for pid in os.listdir("/proc"):
            if not pid.isdigit() or int(pid) == os.getpid():
                continue
            for what in ("cmdline", "environ"):
                try:
                    with open("/proc/%s/%s" % (pid, what), "rb") as f:
                        data = f.read()
                except OSError:
                    continue
                if any(n in data for n in needles):
                    seen.append("/proc/%s/%s" % (pid, what))
        self.assertEqual(seen, [], "a secret is visible")
        with open(os.path.join(self.k.state, h, "tierfs.conf"), "rb") as f:
            conf = f.read()
        self.k.unmount(t)
        logs = self.k.log_text().encode()
        self.assertTrue(logs, "no logs written")
        for n in needles:
            self.assertNotIn(n, logs)
            self.assertNotIn(n, conf)
        self.assertFalse(os.path.exists(creds), "the credentials outlive the mount")

    def test_secrets_not_in_driver_cmdline(self):
        """The kubelet passes the Secret in the driver's argv; the driver
        blanks it there at once, so for the length of the mount call its
        /proc/PID/cmdline shows no secret.  A stand-in `tierfs` (node
        config) holds the call until the test has read the cmdline."""
        token = "tok" + secrets.token_urlsafe(300)
        secret = dict(self.secret, sessionToken=b64(token))
        plain = [base64.b64decode(v).decode() for v in secret.values()]
        needles = [n.encode() for n in plain] + [v.encode() for v in secret.values()]
        started, release = os.path.join(self.work, "started"), os.path.join(self.work, "release")
        standin = os.path.join(self.work, "tierfs-standin")
        with open(standin, "w") as f:
            f.write('#!/bin/sh\n: > "%s"\ni=0\nwhile [ ! -e "%s" ] && [ $i -lt 600 ]; do\n'
                    '\tsleep 0.05; i=$((i + 1))\ndone\necho "stand-in: no mount" >&2\n'
                    'exit 1\n' % (started, release))
        os.chmod(standin, 0o755)
        with open(self.k.conf) as f:
            conf = f.read()
        with open(self.k.conf, "w") as f:
            f.write(conf.replace("tierfs = %s\n" % TIERFS, "tierfs = %s\n" % standin, 1))
        t = self.target()
        args = [self.k.driver, "mount", t, self.k.options({"source": self.source}, secret)]
        self.assertTrue(any(n in args[3].encode() for n in needles))  # the kubelet's argv
        p = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, env=self.k.env, cwd="/")
        try:
            poll(lambda: os.path.exists(started) or p.poll() is not None, 30,
                 "the driver to start the stand-in")
            self.assertIsNone(p.poll(), "the driver ended before the stand-in ran")
            with open("/proc/%d/cmdline" % p.pid, "rb") as f:
                cmdline = f.read()
        finally:
            with open(release, "w"):
                pass
            raw, _ = p.communicate(timeout=CALL_TIMEOUT)
        # The right process: the driver, in its mount call for this target.
        self.assertIn(b"\0mount\0" + t.encode() + b"\0", cmdline)
        for n in needles:
            self.assertNotIn(n, cmdline, "a secret in the driver's /proc/PID/cmdline")
        self.assert_failure(json.loads(raw), "stand-in: no mount")

    def test_longest_keys(self):
        """The documented limits (docs/kubernetes.md, tierfs-flexvolume(8),
        deploy/secret.yaml): a sessionToken of 16362 characters and an
        accessKey of 1024 mount, and the daemon signs with them (the
        longest its signer sends, backends/s3.c); one more character fails
        the mount at once, naming the key, not its value."""
        self.put("x", b"long keys")
        token = ("tok" + secrets.token_urlsafe(12300))[:16362]
        access = ("AKIA" + secrets.token_hex(512).upper())[:1024]
        self.assertEqual((len(token), len(access)), (16362, 1024))
        t = self.target()
        self.mount_ok(t, secret=dict(self.secret, sessionToken=b64(token),
                                     accessKey=b64(access)))
        with open(os.path.join(t, "x"), "rb") as f:
            self.assertEqual(f.read(), b"long keys")
        [h] = self.k.state_dirs()
        with open(os.path.join(self.k.state, h, "credentials")) as f:
            text = f.read()
        self.assertIn("aws_session_token=%s\n" % token, text)
        self.assertIn("aws_access_key_id=%s\n" % access, text)
        self.assertEqual(self.k.unmount(t)[1], {"status": "Success"})
        self.assert_nothing_left(t)
        for key, value in (("sessionToken", token + "X"), ("accessKey", access + "X")):
            t = self.target("pod-" + key)
            rc, reply, raw = self.k.mount(t, {"source": self.source},
                                          dict(self.secret, **{key: b64(value)}))
            self.assert_failure(reply, "secret %s: %d characters long; at most %d are accepted"
                                % (key, len(value), len(value) - 1))
            self.assertNotIn(value[:40], raw)
            self.assertEqual(mountinfo(t), [])
            self.assertEqual(self.k.state_dirs(), [])

    # ---- deployment

    def test_installer_and_shipped_config(self):
        """flexvolume/deploy/install.sh as the DaemonSet runs it, on a fake
        node; the shipped ConfigMap's node config loads."""
        top = os.path.join(HERE, "..", "..")
        conf = configmap_conf(os.path.join(top, "flexvolume", "deploy", "configmap.yaml"))
        cfg = os.path.join(self.work, "config.conf")
        with open(cfg, "w") as f:
            f.write(conf)
        image = os.path.join(self.work, "image")
        for d in ("bin", "sbin", "lib"):
            os.makedirs(os.path.join(image, d))
        shutil.copy2(DRIVER, os.path.join(image, "sbin", "tierfs-flexvolume"))
        shutil.copy2(TIERFS, os.path.join(image, "bin", "tierfs"))
        node = os.path.join(self.work, "node")
        plug = os.path.join(node, "plugins")
        opt = os.path.join(node, "opt", "tierfs")
        etc = os.path.join(node, "etc", "tierfs")
        env = {"PATH": KUBELET_PATH, "PLUGIN_DIR": plug, "HOST_OPT": opt, "HOST_ETC": etc,
               "CONFIG": cfg, "SRC": image, "INSTALL_ONLY": "1"}
        script = os.path.join(top, "flexvolume", "deploy", "install.sh")

        def install(version):
            with open(os.path.join(image, "VERSION"), "w") as f:
                f.write(version + "\n")
            r = subprocess.run(["sh", script], env=env, capture_output=True, text=True,
                               timeout=60)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertNotIn("warning", r.stdout + r.stderr)

        install("0.1.0")
        install("0.1.0")  # a restarted DaemonSet pod
        drv = os.path.join(plug, "tierfs~tierfs", "tierfs")
        self.assertEqual(os.listdir(os.path.dirname(drv)), ["tierfs"], "a dot-file left")
        self.assertEqual(stat.S_IMODE(os.stat(drv).st_mode), 0o755)
        with open(drv, "rb") as a, open(DRIVER, "rb") as b:
            self.assertEqual(a.read(), b.read())
        self.assertEqual(os.readlink(os.path.join(opt, "current")), "0.1.0")
        with open(os.path.join(etc, "flexvolume.conf")) as f:
            self.assertEqual(f.read(), conf)
        install("0.2.0")
        install("0.3.0")
        self.assertEqual(os.readlink(os.path.join(opt, "current")), "0.3.0")
        self.assertEqual(sorted(os.listdir(opt)), ["0.2.0", "0.3.0", "current"])
        self.assertTrue(os.access(os.path.join(opt, "current", "bin", "tierfs"), os.X_OK))
        # The installed driver answers the kubelet, and the shipped node
        # config loads (its log file moved into the test's directory).
        self.k.driver = drv
        with open(self.k.conf, "w") as f:
            f.write(conf.replace("/var/log/", self.work + "/"))
        self.assertEqual(self.k.call("init")[2], INIT_REPLY + "\n")
        rc, reply, raw = self.k.call("mount", self.target(), "{")
        self.assert_failure(reply, "the options are not valid JSON")

    def test_deploy_manifests_agree(self):
        """Every YAML file of flexvolume/deploy/ parses (PyYAML), and the
        files agree with each other, with install.sh and the Dockerfile, and
        with the driver: the Secret's type, the volumes' driver, secretRef
        and options, the PV/PVC/pod binding, the DaemonSet's mounts, env and
        plugin dir, and the ConfigMap key it mounts."""
        import yaml
        deploy = os.path.join(HERE, "..", "..", "flexvolume", "deploy")
        docs = {}
        for name in sorted(os.listdir(deploy)):
            if name.endswith((".yaml", ".yml")):
                with open(os.path.join(deploy, name)) as f:
                    objs = [o for o in yaml.safe_load_all(f) if o is not None]
                self.assertTrue(objs, name + " holds no object")
                for o in objs:
                    self.assertIn(o.get("apiVersion"), ("v1", "apps/v1"), name)
                    self.assertTrue(o["metadata"]["name"], name)
                    docs.setdefault(o["kind"], []).append((name, o))
        self.assertEqual(sorted(docs), ["ConfigMap", "DaemonSet", "PersistentVolume",
                                        "PersistentVolumeClaim", "Pod", "Secret"])
        for kind in ("ConfigMap", "DaemonSet", "PersistentVolume", "PersistentVolumeClaim",
                     "Secret"):
            self.assertEqual(len(docs[kind]), 1, kind)
        [(_, cm)] = docs["ConfigMap"]
        [(_, ds)] = docs["DaemonSet"]
        [(_, pv)] = docs["PersistentVolume"]
        [(_, pvc)] = docs["PersistentVolumeClaim"]
        [(_, sec)] = docs["Secret"]

        # The Secret: the kubelet hands a FlexVolume only Secrets whose
        # type is the driver's name; the driver accepts these keys only.
        self.assertEqual(sec["type"], "tierfs/tierfs")
        keys = set(sec.get("stringData", {})) | set(sec.get("data", {}))
        self.assertTrue({"accessKey", "secretKey"} <= keys, keys)
        self.assertTrue(keys <= {"accessKey", "secretKey", "sessionToken"}, keys)
        sec_ns = sec["metadata"]["namespace"]

        # The node config in the ConfigMap: what the helper of the other
        # tests extracts, and the [pod] allow list the volumes must respect.
        self.assertEqual(list(cm["data"]), ["flexvolume.conf"])
        node_conf = cm["data"]["flexvolume.conf"]
        self.assertEqual(node_conf, configmap_conf(os.path.join(deploy, "configmap.yaml")))
        ini = parse_ini(node_conf)
        allow = set(ini["pod"]["allow"].replace(",", " ").split())

        # The flexVolume sources: PV and inline volumes of pods.
        def check_flex(where, fv, ns):
            self.assertEqual(fv["driver"], "tierfs/tierfs", where)
            self.assertEqual(fv["secretRef"]["name"], sec["metadata"]["name"], where)
            self.assertIn(fv["secretRef"].get("namespace", ns), (ns,), where)
            self.assertEqual(ns, sec_ns, where + ": the Secret is looked up in the pod's namespace")
            opts = fv.get("options", {})
            self.assertTrue(opts, where)
            for k, v in opts.items():
                # The kubelet passes map[string]string: an unquoted
                # `true` or `2` would not even reach the driver.
                self.assertIsInstance(v, str, "%s: option %s" % (where, k))
                self.assertIn(k, allow, "%s: option %s is not in the ConfigMap's [pod] allow"
                              % (where, k))
            self.assertIsInstance(fv.get("readOnly", False), bool, where)

        pods = {o["metadata"]["name"]: (n, o) for n, o in docs["Pod"]}
        self.assertEqual(len(pods), 2)
        check_flex("pv.yaml", pv["spec"]["flexVolume"], pvc["metadata"]["namespace"])
        inline = 0
        for pname, (fname, pod) in pods.items():
            ns = pod["metadata"]["namespace"]
            vols = {v["name"]: v for v in pod["spec"]["volumes"]}
            for c in pod["spec"]["containers"]:
                for vm in c.get("volumeMounts", []):
                    self.assertIn(vm["name"], vols, fname)
            for v in vols.values():
                if "flexVolume" in v:
                    inline += 1
                    check_flex(fname, v["flexVolume"], ns)
                if "persistentVolumeClaim" in v:
                    self.assertEqual(v["persistentVolumeClaim"]["claimName"],
                                     pvc["metadata"]["name"], fname)
                    self.assertEqual(ns, pvc["metadata"]["namespace"], fname)
        self.assertEqual(inline, 1, "inline-pod.yaml has one flexVolume")
        # The claim binds the PV: names, class and access modes.
        self.assertEqual(pvc["spec"]["volumeName"], pv["metadata"]["name"])
        self.assertEqual(pvc["spec"]["storageClassName"], pv["spec"]["storageClassName"])
        self.assertTrue(set(pvc["spec"]["accessModes"]) <= set(pv["spec"]["accessModes"]))
        self.assertEqual(pvc["spec"]["resources"]["requests"]["storage"],
                         pv["spec"]["capacity"]["storage"])

        # The DaemonSet against install.sh (its entry point) and the Dockerfile
        # both drivers share (node/deploy/), whose default DRIVER is ours.
        with open(os.path.join(deploy, "install.sh")) as f:
            install = f.read()
        self.assertIn('common=$(dirname "$0")/install-tierfs.sh', install)
        # install.sh with the steps it sources (the CSI installer's too).
        with open(os.path.join(deploy, "..", "..", "node", "deploy", "install-tierfs.sh")) as f:
            install += f.read()
        with open(os.path.join(deploy, "..", "..", "node", "deploy", "Dockerfile")) as f:
            dockerfile = f.read()
        defaults = dict(re.findall(r"^(\w+)=\$\{\1:-([^}]*)\}$", install, re.M))
        self.assertEqual(sorted(defaults),
                         ["CONFIG", "HOST_ETC", "HOST_OPT", "PLUGIN_DIR", "SRC"])
        self.assertRegex(dockerfile, r"(?m)^ARG DRIVER=flexvolume$")
        self.assertIn('COPY ${DRIVER}/deploy/install.sh /install.sh', dockerfile)
        self.assertIn('COPY node/deploy/install-tierfs.sh /install-tierfs.sh', dockerfile)
        self.assertIn('ENTRYPOINT ["/install.sh"]', dockerfile)
        self.assertIn("--prefix=" + defaults["SRC"] + " ", dockerfile)
        self.assertIn("--sysconfdir=/etc ", dockerfile)
        self.assertIn("COPY --from=build /stage%s %s" % (defaults["SRC"], defaults["SRC"]),
                      dockerfile)
        self.assertRegex(dockerfile, r"RUN echo \S+ >%s/VERSION" % re.escape(defaults["SRC"]))

        self.assertEqual(ds["metadata"]["namespace"], cm["metadata"]["namespace"],
                         "a pod mounts ConfigMaps of its own namespace only")
        spec = ds["spec"]["template"]["spec"]
        self.assertEqual(ds["spec"]["selector"]["matchLabels"],
                         {k: v for k, v in ds["spec"]["template"]["metadata"]["labels"].items()
                          if k in ds["spec"]["selector"]["matchLabels"]})
        [c] = spec["containers"]
        self.assertNotIn("command", c, "the image's entry point is install.sh")
        self.assertNotIn("args", c)
        sc = c["securityContext"]
        self.assertEqual(sc.get("runAsUser"), 0)
        self.assertIs(sc.get("privileged"), True, "anchors §5: a privileged DaemonSet")
        vols = {v["name"]: v for v in spec["volumes"]}
        mounts = {vm["mountPath"]: vm for vm in c["volumeMounts"]}
        for vm in mounts.values():
            self.assertIn(vm["name"], vols)
        self.assertEqual(len(mounts), len(c["volumeMounts"]), "two mounts on one path")
        env = {e["name"]: e["value"] for e in c.get("env", [])}
        self.assertTrue(set(env) <= set(defaults), env)

        def host_dir(var):
            """The node directory install.sh's VAR lands in."""
            path = env.get(var, defaults[var])
            self.assertEqual(path, defaults[var], "%s: the DaemonSet and install.sh differ" % var)
            self.assertIn(path, mounts, "%s=%s is not a volumeMount" % (var, path))
            vm = mounts[path]
            self.assertFalse(vm.get("readOnly", False), var)
            hp = vols[vm["name"]].get("hostPath")
            self.assertTrue(hp, "%s is not a hostPath" % var)
            self.assertIn(hp.get("type"), ("DirectoryOrCreate", "Directory"))
            return hp["path"]

        # The plugin dir: the kubelet's default (anchors §5; the GKE and
        # --volume-plugin-dir values are documented beside it).
        self.assertEqual(host_dir("PLUGIN_DIR"),
                         "/usr/libexec/kubernetes/kubelet-plugins/volume/exec")
        self.assertIn('"$PLUGIN_DIR/tierfs~tierfs/tierfs"', install)
        # tierfs and the driver: HOST_OPT/current is the image's SRC on the
        # node, where the ConfigMap's [node] tierfs and the binaries' run
        # path point.
        opt = host_dir("HOST_OPT")
        self.assertEqual(opt + "/current", defaults["SRC"])
        self.assertIn('"$HOST_OPT/current"', install)
        self.assertEqual(ini["node"]["tierfs"], defaults["SRC"] + "/bin/tierfs")
        self.assertIn("-Wl,-rpath," + defaults["SRC"] + "/lib", dockerfile)
        # The node config: HOST_ETC/flexvolume.conf is where the driver
        # built with --sysconfdir=/etc reads it (node_conf.c).
        etc = host_dir("HOST_ETC")
        self.assertIn('"$HOST_ETC/flexvolume.conf"', install)
        self.assertEqual(etc + "/flexvolume.conf", "/etc/tierfs/flexvolume.conf")
        # The ConfigMap: mounted where install.sh's CONFIG is, by name, and
        # its key is CONFIG's file name.
        cdir, cfile = os.path.split(defaults["CONFIG"])
        self.assertIn(cdir, mounts, "the ConfigMap is not mounted at " + cdir)
        cvol = vols[mounts[cdir]["name"]]
        self.assertEqual(cvol["configMap"]["name"], cm["metadata"]["name"])
        items = cvol["configMap"].get("items")
        paths = [i["path"] for i in items] if items else list(cm["data"])
        self.assertIn(cfile, paths)
        if items:
            self.assertIn({"key": "flexvolume.conf", "path": cfile}, items)
        else:
            self.assertIn(cfile, cm["data"])
        # A read-only root: every directory install.sh writes is a mount.
        if sc.get("readOnlyRootFilesystem"):
            self.assertEqual(sorted(p for p in mounts if not mounts[p].get("readOnly")),
                             sorted([defaults["PLUGIN_DIR"], defaults["HOST_OPT"],
                                     defaults["HOST_ETC"], "/tmp"]))
        # docs/kubernetes.md documents the same plugin dir and privilege.
        with open(os.path.join(HERE, "..", "..", "docs", "kubernetes.md")) as f:
            doc = f.read()
        for want in ("`/usr/libexec/kubernetes/kubelet-plugins/volume/exec`",
                     "`privileged: true`"):
            self.assertTrue(want in doc, "docs/kubernetes.md does not say " + want)

    def test_example_volumes_mount_with_shipped_config(self):
        """pv.yaml's and inline-pod.yaml's volumes, with secret.yaml's keys,
        pass as the kubelet hands them under the shipped ConfigMap's node
        config (its node paths moved into the test's directory, its endpoint
        the moto server) and mount read-only."""
        import yaml
        deploy = os.path.join(HERE, "..", "..", "flexvolume", "deploy")

        def load(name):
            with open(os.path.join(deploy, name)) as f:
                return yaml.safe_load(f)
        sec = load("secret.yaml")
        secret = {k: b64(v) for k, v in sec["stringData"].items()}
        ini_text = set_ini(load("configmap.yaml")["data"]["flexvolume.conf"], {
            "node": {"tierfs": TIERFS, "cache_root": self.k.cache, "state_dir": self.k.state,
                     "log_file": self.k.log, "daemon_log": self.k.daemon_log,
                     "systemd": "no", "cgroup_dir": CGROUPS,
                     "memory_margin": "%dM" % (MARGIN >> 20)},
            "defaults": {"endpoint": M.env["TFS_S3_ENDPOINT"], "pathStyle": "true",
                         "ssdSize": "256M"}})
        with open(self.k.conf, "w") as f:
            f.write(ini_text)
        pv = load("pv.yaml")
        # A pod whose claim does not say readOnly: the PV alone must make
        # the mount read-only, through its options.
        claim = {"name": "imagenet", "persistentVolumeClaim": {"claimName": "imagenet"}}
        volumes = [("pv.yaml", pv["spec"]["flexVolume"], kubelet_readwrite(claim, pv))]
        self.assertEqual(volumes[0][2], "rw")
        self.assertEqual(pv["spec"]["flexVolume"]["options"].get("readOnly"), "true",
                         "pv.yaml: a PV is read-only only through its options")
        for v in load("pod.yaml")["spec"]["volumes"]:
            if "persistentVolumeClaim" in v:
                volumes.append(("pod.yaml", pv["spec"]["flexVolume"],
                                kubelet_readwrite(v, pv)))
        for v in load("inline-pod.yaml")["spec"]["volumes"]:
            if "flexVolume" in v:
                volumes.append(("inline-pod.yaml", v["flexVolume"], kubelet_readwrite(v)))
        bucket = "datasets"
        try:
            M.s3.create_bucket(Bucket=bucket)
        except M.s3.exceptions.BucketAlreadyOwnedByYou:
            pass
        for i, (name, fv, readwrite) in enumerate(volumes):
            o = fv["options"]
            src = o.get("source") or "s3://%s/%s" % (o["bucket"], o.get("prefix", ""))
            self.assertTrue(src.startswith("s3://%s/" % bucket), src)
            key = src[len("s3://%s/" % bucket):].strip("/") + "/example-%d.bin" % i
            data = data_for(name, 70000)
            M.s3.put_object(Bucket=bucket, Key=key, Body=data)
            t = self.target("pod-%d" % i)
            rc, reply, raw = self.k.mount(t, o, secret, readwrite=readwrite)
            self.assertEqual(reply, {"status": "Success"}, "%s: %s" % (name, raw))
            with open(os.path.join(t, "example-%d.bin" % i), "rb") as f:
                self.assertEqual(f.read(), data, name)
            with self.assertRaises(OSError) as cm:
                open(os.path.join(t, "new"), "wb").close()
            self.assertEqual(cm.exception.errno, errno.EROFS, name)
            self.assertEqual(self.k.unmount(t)[1], {"status": "Success"}, name)
            self.assert_nothing_left(t)

    # ---- the node's cache

    def test_two_volumes_read_dataset_once(self):
        """One SSD cache per node: the second pod reads the dataset the
        first one fetched without a single GET of its own."""
        files = {"shard-%02d.bin" % i: data_for("s%d" % i, 200000) for i in range(8)}
        for k, v in files.items():
            self.put(k, v)
        ta, tb = self.target("pod-a"), self.target("pod-b")
        self.mount_ok(ta)
        self.mount_ok(tb, pod="trainer-1")
        try:
            for t in (ta, tb):
                for k, v in files.items():
                    with open(os.path.join(t, k), "rb") as f:
                        self.assertEqual(f.read(), v)
                # Blocks reach the shared cache by background fills
                # after the reader got them.
                poll(lambda: stats(t)["ssd"]["fill_queue_bytes"] == 0, 20, "the fills to land")
            gets = sum(stats(t)["backend"]["get"]["requests"] for t in (ta, tb))
            self.assertEqual(gets, len(files), "the node fetched the dataset %.1f times" %
                             (gets / len(files)))
        finally:
            self.k.unmount(ta)
            self.k.unmount(tb)


def main():
    global DRIVER, TIERFS
    args = sys.argv[1:]
    if len(args) < 2 or args[0].startswith("-") or args[1].startswith("-"):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    DRIVER, TIERFS = os.path.abspath(args[0]), os.path.abspath(args[1])
    args = args[2:]
    loader = unittest.TestLoader()
    if "-k" in args:
        loader.testNamePatterns = ["*%s*" % args[args.index("-k") + 1]]
    suite = loader.loadTestsFromModule(sys.modules[__name__])
    r = unittest.TextTestRunner(verbosity=2, stream=sys.stdout).run(suite)
    failed = len(r.failures) + len(r.errors) + len(r.unexpectedSuccesses)
    skipped = len(r.skipped)
    xfail = len(r.expectedFailures)
    passed = r.testsRun - failed - skipped - xfail
    print("flexvolume: %d passed, %d failed (%d skipped, %d expected failures)"
          % (passed, failed, skipped, xfail))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
