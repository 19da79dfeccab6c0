#!/usr/bin/python3
"""test_csi.py - the CSI node plugin tierfs-csi, called as the kubelet calls it.

    test_csi.py TIERFS_CSI TIERFS [-k PATTERN]

TIERFS_CSI is the built tierfs-csi, TIERFS the tierfs binary.  Runs under
/usr/bin/python3: Debian's python3-grpcio and python3-grpc-tools generate
and load the stubs of csi/csi.proto (into a temporary directory, at start),
python3-boto3 writes the objects.  Each test starts the plugin as a
subprocess with its own node config (systemd = no, state_dir, cache_root and
log_file in the test's directory, daemon_log beside them) on a unix socket,
waits until Probe answers, and makes the kubelet's calls: NodeStageVolume
on plugins/kubernetes.io/csi/csi.tierfs.io/SHA256(volume)/globalmount and
NodePublishVolume on pods/UID/volumes/kubernetes.io~csi/PV/mount below a
"kubelet root" in the test's directory (the kubelet creates globalmount and
the target's parent; the plugin creates the target).  The buckets live on
a moto_server (tests/harness/moto.sh, through test_mount.py's Bucket); moto
takes any keys.  Needs root and /dev/fuse.

Ends with "csi: N passed, N failed (...)".
"""
import errno
import hashlib
import json
import os
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
from test_mount import BUCKET, Bucket, Mount, data_for, poll  # noqa: E402
from test_flexvolume import own_memory_cgroup, remove_cgroups  # noqa: E402

CSI = None
TIERFS = None
CALL_TIMEOUT = 90
DRIVER = "csi.tierfs.io"
KUBELET_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

M = None  # the module fixture: the moto bucket
CGROUPS = None  # [node] cgroup_dir of every plugin (test_flexvolume.own_memory_cgroup())
STUBS = None  # the directory of the generated stubs
grpc = None
pb = None  # csi_pb2
pb_grpc = None  # csi_pb2_grpc


def gen_stubs():
    """csi_pb2 and csi_pb2_grpc from csi/csi.proto, into a temp dir."""
    global STUBS, grpc, pb, pb_grpc
    try:
        import grpc as g
        import grpc_tools  # noqa: F401
    except ImportError as e:
        raise AssertionError("%s: this suite runs under /usr/bin/python3 with Debian's "
                             "python3-grpcio and python3-grpc-tools (scripts/deps.sh test): %s"
                             % (sys.executable, e))
    STUBS = tempfile.mkdtemp(prefix="tierfs-csi-stubs-")
    r = subprocess.run([sys.executable, "-m", "grpc_tools.protoc", "-I" + os.path.join(TOP, "csi"),
                        "-I/usr/include", "--python_out=" + STUBS, "--grpc_python_out=" + STUBS,
                        os.path.join(TOP, "csi", "csi.proto")], capture_output=True, text=True)
    if r.returncode != 0:
        raise AssertionError("protoc failed: " + r.stderr)
    sys.path.insert(0, STUBS)
    import csi_pb2
    import csi_pb2_grpc
    grpc, pb, pb_grpc = g, csi_pb2, csi_pb2_grpc


def setUpModule():
    global M, CGROUPS
    if os.geteuid() != 0 or not os.path.exists("/dev/fuse"):
        raise unittest.SkipTest("needs root and /dev/fuse")
    for b in (CSI, TIERFS):
        if not b or not os.access(b, os.X_OK):
            raise unittest.SkipTest("no binary at %s" % b)
    gen_stubs()
    work = tempfile.mkdtemp(prefix="tierfs-csi-moto-")
    M = Bucket("moto", work)
    M.work = work
    CGROUPS = os.path.join(own_memory_cgroup(), "tierfs-csi-test-%d" % os.getpid())


def tearDownModule():
    if M:
        M.close()
        shutil.rmtree(M.work, ignore_errors=True)
    if STUBS:
        shutil.rmtree(STUBS, ignore_errors=True)
    remove_cgroups(CGROUPS)


# ---- the node, as the tests see it


def unescape(s):
    """A mountinfo field: octal escapes of space, tab, newline, backslash."""
    for esc, c in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        s = s.replace(esc, c)
    return s


def mounts():
    """Every line of /proc/self/mountinfo as a dict."""
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            sep = fields.index("-")
            out.append({"id": fields[0], "dev": fields[2], "root": unescape(fields[3]),
                        "mp": unescape(fields[4]), "opts": fields[5].split(","),
                        "fstype": fields[sep + 1], "source": unescape(fields[sep + 2]),
                        "super": fields[sep + 3].split(",")})
    return out


def mountinfo(path):
    return [m for m in mounts() if m["mp"] == path]


def under(path, top):
    return path == top or path.startswith(top.rstrip("/") + "/")


def cmdline(pid):
    try:
        with open("/proc/%s/cmdline" % pid, "rb") as f:
            return [a.decode("utf-8", "replace") for a in f.read().split(b"\0")[:-1]]
    except OSError:
        return []


def pid_gone(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def ppid_of(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except OSError:
        return 0


def daemons(*words):
    """pids of the tierfs daemons whose arguments hold one of words: the
    `TIERFS mount ...` processes whose parent is one too (its keeper,
    which holds /dev/fuse and restarts the daemon: src/keeper.h)."""
    procs = tierfs_mounts(*words)
    return [p for p in procs if ppid_of(p) in procs]


def tierfs_mounts(*words):
    """pids of `TIERFS mount ...` processes whose arguments hold one of words."""
    real = os.path.realpath(TIERFS)
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            exe = os.readlink("/proc/%s/exe" % pid)
        except OSError:
            continue
        argv = cmdline(pid)
        if exe.replace(" (deleted)", "") != real and (not argv or argv[0] != TIERFS):
            continue
        if "mount" in argv and any(w in argv for w in words):
            out.append(int(pid))
    return sorted(out)


class Plugin:
    """tierfs-csi on a unix socket, with its own node config."""

    # [node] memory_margin of the tests: room for a sanitized daemon
    # (check.sh runs this suite under ASan), whose memory is not ram.size's.
    MARGIN = 4 << 30

    def __init__(self, work, endpoint, conf_extra=None, node_id="node-a"):
        self.work = work
        # The kubelet root of the tests (CSITests.kubelet), and the
        # parent of the daemons' memory cgroups.
        self.kubelet = os.path.join(work, "kubelet")
        self.cgroups = CGROUPS
        self.node_id = node_id
        os.makedirs(os.path.join(work, "plugin"), exist_ok=True)
        self.sock = os.path.join(work, "plugin", "csi.sock")
        self.state = os.path.join(work, "state")
        self.cache = os.path.join(work, "cache")
        self.log = os.path.join(work, "csi.log")
        self.daemon_log = os.path.join(work, "daemons.log")
        self.stderr = os.path.join(work, "csi.stderr")
        conf = {
            "node": {"tierfs": TIERFS, "cache_root": self.cache, "state_dir": self.state,
                     "log_file": self.log, "daemon_log": self.daemon_log, "log_level": "debug",
                     "mount_timeout": "30s", "unmount_timeout": "30s", "systemd": "no",
                     "kubelet_dir": self.kubelet, "cgroup_dir": self.cgroups,
                     "memory_margin": "%dM" % (self.MARGIN >> 20)},
            "defaults": {"endpoint": endpoint, "ramSize": "64M", "ssdSize": "256M",
                         "metadataTTL": "forever"},
            "limits": {"maxRamSize": "256M", "minMetadataTTL": "1s"},
            "pod": {"allow": "source, bucket, prefix, readOnly, ramSize, ssdSize, policy, "
                             "metadataTTL"},
        }
        for sec, kv in (conf_extra or {}).items():
            conf.setdefault(sec, {}).update(kv)
        self.conf = os.path.join(work, "csi.conf")
        with open(self.conf, "w") as f:
            for sec, kv in conf.items():
                f.write("[%s]\n" % sec)
                for k, v in kv.items():
                    f.write("%s = %s\n" % (k, v))
        self.env = {"PATH": KUBELET_PATH, "HOME": "/root"}
        for k in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS", "TSAN_OPTIONS"):
            if k in os.environ:
                self.env[k] = os.environ[k]
        self.proc = None
        self.channel = None
        self.start()

    def start(self):
        with open(self.stderr, "ab") as err:
            self.proc = subprocess.Popen(
                [CSI, "--endpoint", "unix://" + self.sock, "--node-id", self.node_id,
                 "--config", self.conf], stdin=subprocess.DEVNULL, stdout=err, stderr=err,
                env=self.env, cwd="/")
        # A channel that failed to connect backs off for seconds: make it
        # once the socket accepts connections (a stale one refuses them).
        poll(self.accepts, 30, "tierfs-csi to listen on " + self.sock)
        self.channel = grpc.insecure_channel(
            "unix://" + self.sock, options=[("grpc.initial_reconnect_backoff_ms", 50),
                                            ("grpc.min_reconnect_backoff_ms", 50),
                                            ("grpc.max_reconnect_backoff_ms", 200)])
        self.identity = pb_grpc.IdentityStub(self.channel)
        self.node = pb_grpc.NodeStub(self.channel)
        poll(self.ready, 30, "tierfs-csi to answer Probe")

    def accepts(self):
        if self.proc.poll() is not None:
            raise AssertionError("tierfs-csi exited with %d: %s" % (self.proc.returncode,
                                                                  self.text()[-2000:]))
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            try:
                s.connect(self.sock)
                return True
            except OSError:
                return False

    def ready(self):
        if self.proc.poll() is not None:
            raise AssertionError("tierfs-csi exited with %d: %s" % (self.proc.returncode,
                                                                  self.text()[-2000:]))
        try:
            return self.identity.Probe(pb.ProbeRequest(), timeout=2).ready.value
        except grpc.RpcError:
            return False

    def kill(self):
        """kill -9 and reap it."""
        self.proc.kill()
        self.proc.wait()
        self.channel.close()

    def stop(self):
        """SIGTERM; returns the exit status."""
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError("tierfs-csi did not exit within 20 s of SIGTERM")
        if self.channel:
            self.channel.close()
        return self.proc.returncode

    def call(self, method, **fields):
        """The Node (or Identity) RPC `method` with a request of `fields`;
        raises grpc.RpcError."""
        req = getattr(pb, method + "Request")(**fields)
        stub = self.identity if method in ("GetPluginInfo", "GetPluginCapabilities",
                                           "Probe") else self.node
        return getattr(stub, method)(req, timeout=CALL_TIMEOUT)

    def code(self, method, **fields):
        """(grpc.StatusCode, details) of the call."""
        try:
            self.call(method, **fields)
            return grpc.StatusCode.OK, ""
        except grpc.RpcError as e:
            return e.code(), e.details() or ""

    def text(self):
        out = ""
        for p in (self.log, self.daemon_log, self.stderr):
            try:
                with open(p, errors="replace") as f:
                    out += "==> %s\n%s" % (p, f.read())
            except OSError:
                pass
        return out


def capability(mode="SINGLE_NODE_WRITER", group="", flags=(), fs_type=""):
    return pb.VolumeCapability(
        mount=pb.VolumeCapability.MountVolume(fs_type=fs_type, mount_flags=list(flags),
                                              volume_mount_group=group),
        access_mode=pb.VolumeCapability.AccessMode(
            mode=pb.VolumeCapability.AccessMode.Mode.Value(mode)))


class CSITests(unittest.TestCase):
    def setUp(self):
        self.work = tempfile.mkdtemp(prefix="tierfs-csi-")
        os.chmod(self.work, 0o755)  # a reader of another uid must reach the mounts
        self.kubelet = os.path.join(self.work, "kubelet")
        self.sub = "%s-%s" % (self._testMethodName[5:], secrets.token_hex(3))
        self.source = "%s/%s" % (M.source, self.sub)
        self.secret = {"accessKey": "AKIA" + secrets.token_hex(8).upper(),
                       "secretKey": "sk/" + secrets.token_urlsafe(24)}
        self.p = Plugin(self.work, M.env["TFS_S3_ENDPOINT"])

    def tearDown(self):
        failed = getattr(self, "_outcome", None) and not self._ok()
        if failed:
            print("---- plugin and daemon logs:\n" + self.p.text()[-6000:])
        # SIGKILL: the exit on SIGTERM has tests of its own (identity,
        # survival); here it would only add its latency to every test.
        if self.p.proc.poll() is None:
            self.p.kill()
        # Whatever a failed test left: detach the mounts, stop their daemons.
        for m in sorted(mounts(), key=lambda m: -len(m["mp"])):
            if under(m["mp"], self.work):
                subprocess.run(["umount", "-l", m["mp"]], capture_output=True)
        for pid in tierfs_mounts(self.source, self.work):
            os.kill(pid, signal.SIGKILL)
        shutil.rmtree(self.work, ignore_errors=True)

    def _ok(self):
        res = self._outcome.result
        return not any(t is self for t, _ in res.failures + res.errors)

    # ---- the kubelet's side

    def put(self, name, data):
        M.put(self.sub + "/" + name, data)

    def bucket_get(self, name):
        try:
            return M.s3.get_object(Bucket=BUCKET, Key=M.prefix + self.sub + "/" + name)["Body"].read()
        except M.s3.exceptions.NoSuchKey:
            return None

    def staging(self, volume_id):
        """The kubelet's globalmount of a volume (csi_attacher.go): it
        creates the directory, 0750, before NodeStageVolume."""
        d = os.path.join(self.kubelet, "plugins", "kubernetes.io", "csi", DRIVER,
                         hashlib.sha256(volume_id.encode()).hexdigest(), "globalmount")
        os.makedirs(os.path.dirname(d), exist_ok=True)
        os.mkdir(d, 0o750)
        with open(os.path.join(os.path.dirname(d), "vol_data.json"), "w") as f:
            json.dump({"driverName": DRIVER, "volumeHandle": volume_id}, f)
        return d

    def target(self, pv, pod_uid):
        """A pod's target (csi_mounter.go): the kubelet creates its parent
        and leaves the target itself to the plugin.  The parents are 0755
        here (the kubelet's are 0750): a process of another uid reaches the
        mount through them, where a container gets it bind-mounted."""
        t = os.path.join(self.kubelet, "pods", pod_uid, "volumes", "kubernetes.io~csi", pv,
                         "mount")
        os.makedirs(os.path.dirname(t), exist_ok=True)
        d = os.path.dirname(t)
        while under(d, self.kubelet):
            os.chmod(d, 0o755)
            d = os.path.dirname(d)
        os.chmod(self.work, 0o755)
        with open(os.path.join(os.path.dirname(t), "vol_data.json"), "w") as f:
            json.dump({"driverName": DRIVER, "volumeHandle": pv, "specVolID": pv}, f)
        return t

    def pod_context(self, name, uid, ephemeral=False):
        c = {"csi.storage.k8s.io/pod.name": name, "csi.storage.k8s.io/pod.namespace": "ml",
             "csi.storage.k8s.io/pod.uid": uid,
             "csi.storage.k8s.io/serviceAccount.name": "default"}
        if ephemeral:
            c["csi.storage.k8s.io/ephemeral"] = "true"
        return c

    def twice(self, method, **fields):
        """A call the kubelet may repeat: OK the first and the second time."""
        for n in (1, 2):
            code, msg = self.p.code(method, **fields)
            self.assertEqual(code, grpc.StatusCode.OK, "%s (call %d): %s %s"
                             % (method, n, code, msg))

    def stage(self, volume_id, path, context=None, cap=None, secret=None, twice=True):
        fields = dict(volume_id=volume_id, staging_target_path=path,
                      volume_capability=cap or capability(),
                      secrets=self.secret if secret is None else secret,
                      volume_context=dict({"source": self.source}, **(context or {})))
        if twice:
            self.twice("NodeStageVolume", **fields)
        else:
            return self.p.code("NodeStageVolume", **fields)

    def publish(self, volume_id, staging, target, readonly=False, cap=None, context=None,
                secret=None):
        self.twice("NodePublishVolume", volume_id=volume_id, staging_target_path=staging,
                   target_path=target, volume_capability=cap or capability(),
                   readonly=readonly, secrets=secret or {}, volume_context=context or {})

    def unpublish(self, volume_id, target):
        self.twice("NodeUnpublishVolume", volume_id=volume_id, target_path=target)
        self.assertEqual(mountinfo(target), [], "still mounted: " + target)
        self.assertFalse(os.path.exists(target), "the target directory was not removed")

    def unstage(self, volume_id, path):
        self.twice("NodeUnstageVolume", volume_id=volume_id, staging_target_path=path)
        self.assertEqual(mountinfo(path), [], "still mounted: " + path)

    def read(self, path):
        with open(path, "rb") as f:
            return f.read()

    def assert_nothing_left(self):
        """No mount below the test's directory or of the test's source, no
        daemon serving the source."""
        left = [m["mp"] for m in mounts()
                if under(m["mp"], self.work) or m["source"] == self.source]
        self.assertEqual(left, [], "mounts left")
        poll(lambda: not tierfs_mounts(self.source), 20,
             "the daemons and keepers of %s to exit" % self.source)

    def fuse_mounts(self, source):
        """fuse.tierfs mounts of source: {device: [mount points]} (bind
        mounts share the device of the mount they show)."""
        out = {}
        for m in mounts():
            if m["fstype"] == "fuse.tierfs" and m["source"] == source:
                out.setdefault(m["dev"], []).append(m["mp"])
        return out

    def assert_code(self, got, code, *words):
        self.assertEqual(got[0], code, "details: %r" % got[1])
        for w in words:
            self.assertIn(w, got[1])

    # ---- 1. identity

    def test_identity(self):
        info = self.p.call("GetPluginInfo")
        self.assertEqual(info.name, DRIVER)
        self.assertRegex(info.vendor_version, r"^\d+\.\d+")
        r = subprocess.run([CSI, "--version"], capture_output=True, text=True, timeout=10)
        self.assertEqual(r.stdout.strip(), "tierfs-csi " + info.vendor_version)
        caps = self.p.call("GetPluginCapabilities")
        self.assertEqual(list(caps.capabilities), [], "a node-only plugin has no capability")
        probe = self.p.call("Probe")
        self.assertTrue(probe.HasField("ready"))
        self.assertIs(probe.ready.value, True)
        ncaps = self.p.call("NodeGetCapabilities")
        T = pb.NodeServiceCapability.RPC.Type
        got = sorted(T.Name(c.rpc.type) for c in ncaps.capabilities)
        self.assertEqual(got, ["STAGE_UNSTAGE_VOLUME", "VOLUME_MOUNT_GROUP"])
        ninfo = self.p.call("NodeGetInfo")
        self.assertEqual(ninfo.node_id, "node-a")
        self.assertEqual(ninfo.max_volumes_per_node, 0)
        self.assertFalse(ninfo.HasField("accessible_topology"))
        # The socket: 0600; SIGTERM exits 0.
        self.assertEqual(stat.S_IMODE(os.stat(self.p.sock).st_mode), 0o600)
        self.assertEqual(self.p.stop(), 0, "exit status after SIGTERM")

    # ---- 2. the kubelet's sequence

    def test_stage_publish_two_pods_unpublish_unstage(self):
        files = {"train/a.bin": data_for("a", 300000), "b.txt": b"hello\n"}
        for k, v in files.items():
            self.put(k, v)
        vol = "pv-datasets"
        g = self.staging(vol)
        # A key of the kubelet's namespace that this plugin does not know
        # (a later kubelet's) is accepted, as FlexVolume's kubernetes.io/ keys.
        self.stage(vol, g, context={"csi.storage.k8s.io/a.later.key": "x"})
        [m] = mountinfo(g)
        self.assertEqual(m["fstype"], "fuse.tierfs")
        self.assertEqual(len(daemons(self.source, g)), 1, "one daemon for the volume")
        ta = self.target(vol, "0b5e7c2a-5f07-4a39-a1f6-1a3f6a0c9e11")
        tb = self.target(vol, "7d1c9a40-2b6e-4f5a-9c3e-8e2f1b0a6d22")
        self.publish(vol, g, ta, context=self.pod_context("trainer-0", "0b5e7c2a"))
        self.publish(vol, g, tb, context=self.pod_context("trainer-1", "7d1c9a40"))
        for t in (ta, tb):
            self.assertEqual(len(mountinfo(t)), 1, "%s mounted %d times" % (t, len(mountinfo(t))))
            for flag in ("nosuid", "nodev"):
                self.assertIn(flag, mountinfo(t)[0]["opts"], "%s: %s" % (t, mountinfo(t)))
            for k, v in files.items():
                self.assertEqual(self.read(os.path.join(t, k)), v, "%s through %s" % (k, t))
        # Bind mounts of the staged mount: its device.
        self.assertEqual({mountinfo(t)[0]["dev"] for t in (ta, tb)}, {m["dev"]})
        self.unpublish(vol, ta)
        self.assertEqual(self.read(os.path.join(tb, "b.txt")), b"hello\n")
        self.unpublish(vol, tb)
        self.assertEqual(self.read(os.path.join(g, "b.txt")), b"hello\n")
        self.unstage(vol, g)
        self.assert_nothing_left()
        # What was never published or staged: OK (the kubelet retries
        # after its own restarts).
        self.unpublish("pv-never", self.target("pv-never", "pod-c"))
        self.unstage("pv-never", self.staging("pv-never"))

    # ---- 3. a read-only publish beside a writable one

    def test_readonly_publish(self):
        self.put("x", b"x")
        vol = "pv-rw"
        g = self.staging(vol)
        cap = capability("MULTI_NODE_MULTI_WRITER")
        self.stage(vol, g, {"readOnly": "false"}, cap=cap)
        ta = self.target(vol, "pod-ro")
        tb = self.target(vol, "pod-rw")
        self.publish(vol, g, ta, readonly=True, cap=cap)
        self.publish(vol, g, tb, readonly=False, cap=cap)
        self.assertIn("ro", mountinfo(ta)[0]["opts"], mountinfo(ta))
        self.assertIn("rw", mountinfo(tb)[0]["opts"], mountinfo(tb))
        with self.assertRaises(OSError) as cm:
            open(os.path.join(ta, "nope.bin"), "wb").close()
        self.assertEqual(cm.exception.errno, errno.EROFS)
        body = data_for("ckpt", 200000)
        with open(os.path.join(tb, "ckpt.bin"), "wb") as f:
            f.write(body)
        self.assertEqual(self.read(os.path.join(ta, "ckpt.bin")), body)
        poll(lambda: self.bucket_get("ckpt.bin") == body, 30, "ckpt.bin in the bucket")
        # The same target with the other readonly flag: AlreadyExists.
        code = self.p.code("NodePublishVolume", volume_id=vol, staging_target_path=g,
                           target_path=ta, volume_capability=cap, readonly=False)
        self.assert_code(code, grpc.StatusCode.ALREADY_EXISTS)
        self.assertIn("ro", mountinfo(ta)[0]["opts"])
        # Another staging path for the same target: AlreadyExists.
        g2 = self.staging("pv-other")
        self.stage("pv-other", g2, cap=cap)
        code = self.p.code("NodePublishVolume", volume_id="pv-other", staging_target_path=g2,
                           target_path=tb, volume_capability=cap)
        self.assert_code(code, grpc.StatusCode.ALREADY_EXISTS)
        self.assertEqual(mountinfo(tb)[0]["dev"], mountinfo(g)[0]["dev"])
        self.unstage("pv-other", g2)
        # The mount flag "ro" makes a read-only publish too.
        tc = self.target(vol, "pod-ro-flag")
        self.publish(vol, g, tc, cap=capability("MULTI_NODE_MULTI_WRITER", flags=["ro"]))
        self.assertIn("ro", mountinfo(tc)[0]["opts"], mountinfo(tc))
        with self.assertRaises(OSError) as cm:
            open(os.path.join(tc, "nope.bin"), "wb").close()
        self.assertEqual(cm.exception.errno, errno.EROFS)
        self.unpublish(vol, tc)
        self.unpublish(vol, ta)
        self.unpublish(vol, tb)
        self.unstage(vol, g)
        self.assert_nothing_left()

    def test_readonly_access_mode_stages_read_only(self):
        """A *_READER_ONLY access mode makes the staged daemon read-only."""
        self.put("x", b"x")
        vol = "pv-reader"
        g = self.staging(vol)
        cap = capability("MULTI_NODE_READER_ONLY")
        self.stage(vol, g, cap=cap)
        t = self.target(vol, "pod-a")
        self.publish(vol, g, t, cap=cap)
        self.assertEqual(self.read(os.path.join(t, "x")), b"x")
        with self.assertRaises(OSError) as cm:
            open(os.path.join(g, "nope.bin"), "wb").close()
        self.assertEqual(cm.exception.errno, errno.EROFS, "the staged mount is writable")
        self.assertIn("ro", mountinfo(g)[0]["super"], mountinfo(g))
        with self.assertRaises(OSError) as cm:
            open(os.path.join(t, "nope.bin"), "wb").close()
        self.assertEqual(cm.exception.errno, errno.EROFS, "the target is writable")
        # The pod's bind says so too, though the publish did not ask.
        self.assertIn("ro", mountinfo(t)[0]["opts"], mountinfo(t))
        self.unpublish(vol, t)
        self.unstage(vol, g)
        self.assert_nothing_left()

    def test_unstage_waits_for_uploads(self):
        """With the store unreachable, NodeUnstageVolume answers
        FAILED_PRECONDITION after unmount_timeout and the volume stays
        mounted; once the store is back, the kubelet's retry succeeds and
        the write is in the bucket."""
        self.p.kill()
        self.p = Plugin(os.path.join(self.work, "short"), M.env["TFS_S3_ENDPOINT"],
                        {"node": {"unmount_timeout": "3s", "kubelet_dir": self.kubelet}})
        vol = "pv-drain"
        g = self.staging(vol)
        self.stage(vol, g, {"readOnly": "false"})
        os.listdir(g)  # a complete listing: new names need no lookup while the store is away
        with open(M.server_dir + "/moto.pid") as f:
            moto = int(f.read())
        os.kill(moto, signal.SIGSTOP)
        try:
            with open(os.path.join(g, "late.bin"), "wb") as f:
                f.write(b"must not be lost")
            code = self.p.code("NodeUnstageVolume", volume_id=vol, staging_target_path=g)
            self.assert_code(code, grpc.StatusCode.FAILED_PRECONDITION)
            self.assertEqual(len(mountinfo(g)), 1, "unmounted with writes pending")
        finally:
            os.kill(moto, signal.SIGCONT)
        poll(lambda: self.p.code("NodeUnstageVolume", volume_id=vol,
                                 staging_target_path=g)[0] == grpc.StatusCode.OK,
             60, "the unstage to succeed")
        self.assertEqual(self.bucket_get("late.bin"), b"must not be lost")
        self.assert_nothing_left()

    # ---- 4. the plugin dies, the mounts serve

    def test_mounts_survive_plugin_kill(self):
        files = {"a.bin": data_for("sa", 100000), "b.bin": data_for("sb", 150000)}
        for k, v in files.items():
            self.put(k, v)
        vol = "pv-survive"
        g = self.staging(vol)
        self.stage(vol, g)
        ta, tb = self.target(vol, "pod-a"), self.target(vol, "pod-b")
        self.publish(vol, g, ta)
        self.publish(vol, g, tb)
        [pid] = daemons(self.source, g)
        with open("/proc/%d/stat" % pid) as f:
            ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        self.assertNotEqual(ppid, self.p.proc.pid, "the daemon is the plugin's child")
        self.p.kill()
        self.assertFalse(pid_gone(pid), "the daemon died with the plugin")
        for i in range(3):
            for t in (ta, tb):
                for k, v in files.items():
                    self.assertEqual(self.read(os.path.join(t, k)), v, "while the plugin is down")
        self.p.start()  # the same socket, stale now: replaced
        self.assertEqual(daemons(self.source, g), [pid])
        # SIGTERM: exit 0, every mount left serving.
        self.assertEqual(self.p.stop(), 0, "exit status after SIGTERM")
        self.assertEqual(self.read(os.path.join(ta, "a.bin")), files["a.bin"])
        self.p.start()
        for t in (ta, tb):
            for k, v in files.items():
                self.assertEqual(self.read(os.path.join(t, k)), v, "after the restart")
        # The restarted plugin knows its volumes: repeats are OK, a
        # conflicting stage is refused, nothing is mounted twice.
        self.publish(vol, g, ta)
        self.stage(vol, g)
        code = self.stage(vol, g, {"source": M.source + "/elsewhere"}, twice=False)
        self.assert_code(code, grpc.StatusCode.ALREADY_EXISTS)
        for p in (g, ta, tb):
            self.assertEqual(len(mountinfo(p)), 1, p)
        self.unpublish(vol, ta)
        self.unpublish(vol, tb)
        self.unstage(vol, g)
        self.assertTrue(pid_gone(pid) or poll(lambda: pid_gone(pid), 20, "the daemon to exit"))
        self.assert_nothing_left()

    def test_daemon_kill_heals_without_kubelet(self):
        """kill -9 of the daemon under two published pods: its keeper
        starts a new one on the same connection; both pods read on, through
        files opened before the kill too, with no call to the plugin."""
        files = {"a.bin": data_for("ka", 300000), "b.bin": data_for("kb", 200000)}
        for k, v in files.items():
            self.put(k, v)
        vol = "pv-heal"
        g = self.staging(vol)
        self.stage(vol, g)
        ta, tb = self.target(vol, "pod-a"), self.target(vol, "pod-b")
        self.publish(vol, g, ta)
        self.publish(vol, g, tb)
        [pid] = daemons(self.source, g)
        fa = open(os.path.join(ta, "a.bin"), "rb")
        try:
            head = fa.read(100000)
            os.kill(pid, signal.SIGKILL)
            poll(lambda: daemons(self.source, g) not in ([], [pid]), 20, "a new daemon")
            self.assertEqual(head + fa.read(), files["a.bin"], "a file opened before the kill")
        finally:
            fa.close()
        for t in (ta, tb):
            self.assertFalse(mountinfo(t) == [], t)
            for k, v in files.items():
                self.assertEqual(self.read(os.path.join(t, k)), v, "%s through %s" % (k, t))
        self.unpublish(vol, ta)
        self.unpublish(vol, tb)
        self.unstage(vol, g)
        self.assert_nothing_left()

    # ---- 5. the pod's fsGroup

    def test_volume_mount_group(self):
        self.put("data/x", b"x")
        vol = "pv-group"
        g = self.staging(vol)
        cap = capability("SINGLE_NODE_MULTI_WRITER", group="4242")
        self.stage(vol, g, {"readOnly": "false"}, cap=cap)
        t = self.target(vol, "pod-a")
        self.publish(vol, g, t, cap=cap)
        st = os.stat(t)
        self.assertEqual((st.st_gid, stat.S_IMODE(st.st_mode)), (4242, 0o775))
        st = os.stat(os.path.join(t, "data", "x"))
        self.assertEqual((st.st_gid, stat.S_IMODE(st.st_mode)), (4242, 0o664))
        body = data_for("group-ckpt", 50000)
        ckpt = os.path.join(t, "ckpt", "step-1.pt")
        r = subprocess.run(["setpriv", "--reuid=1234", "--regid=1234", "--groups=4242",
                            "sh", "-c", 'mkdir "$1" && cat > "$2" && cat "$2"', "sh",
                            os.path.dirname(ckpt), ckpt],
                           input=body, capture_output=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, body, "uid 1234 read back other bytes")
        self.assertEqual(self.read(ckpt), body)
        # The same uid without the group may not create.
        probe = ("import errno, os, sys\n"
                 "try:\n"
                 "    os.close(os.open(sys.argv[1], os.O_CREAT | os.O_WRONLY, 0o644))\n"
                 "    print('created')\n"
                 "except OSError as e:\n"
                 "    print(errno.errorcode[e.errno])\n")
        r = subprocess.run(["setpriv", "--reuid=1234", "--regid=1234", "--clear-groups",
                            sys.executable, "-c", probe, os.path.join(t, "other.bin")],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.stdout.strip(), "EACCES", r.stderr)
        self.unpublish(vol, t)
        self.unstage(vol, g)
        self.assertEqual(self.bucket_get("ckpt/step-1.pt"), body, "not uploaded by the unstage")
        self.assert_nothing_left()

    # ---- 6. bad requests, exact codes

    def test_bad_requests_invalid_argument(self):
        vol = "pv-bad"
        g = self.staging(vol)
        t = self.target(vol, "pod-a")
        IA = grpc.StatusCode.INVALID_ARGUMENT
        ok_ctx = {"source": self.source}
        stage = dict(volume_id=vol, staging_target_path=g, volume_capability=capability(),
                     secrets=self.secret, volume_context=ok_ctx)
        publish = dict(volume_id=vol, staging_target_path=g, target_path=t,
                       volume_capability=capability())

        def without(d, k):
            return {a: b for a, b in d.items() if a != k}

        def ctx(**kw):
            return dict(stage, volume_context=dict(ok_ctx, **kw))

        cases = [
            ("stage without volume_id", "NodeStageVolume", without(stage, "volume_id"), ()),
            ("stage without staging_target_path", "NodeStageVolume",
             without(stage, "staging_target_path"), ()),
            ("stage without capability", "NodeStageVolume",
             without(stage, "volume_capability"), ()),
            ("stage of a block volume", "NodeStageVolume",
             dict(stage, volume_capability=pb.VolumeCapability(
                 block=pb.VolumeCapability.BlockVolume(),
                 access_mode=pb.VolumeCapability.AccessMode(mode=1))), ()),
            ("stage with fs_type ext4", "NodeStageVolume",
             dict(stage, volume_capability=capability(fs_type="ext4")), ()),
            ("stage with mount flag noexec", "NodeStageVolume",
             dict(stage, volume_capability=capability(flags=["noexec"])), ("noexec",)),
            ("publish without volume_id", "NodePublishVolume", without(publish, "volume_id"), ()),
            ("publish without target_path", "NodePublishVolume",
             without(publish, "target_path"), ()),
            ("publish without capability", "NodePublishVolume",
             without(publish, "volume_capability"), ()),
            ("unpublish without target_path", "NodeUnpublishVolume", {"volume_id": vol}, ()),
            ("unpublish without volume_id", "NodeUnpublishVolume", {"target_path": t}, ()),
            ("unstage without staging_target_path", "NodeUnstageVolume", {"volume_id": vol}, ()),
            ("unstage without volume_id", "NodeUnstageVolume", {"staging_target_path": g}, ()),
            ("unknown volume_context key", "NodeStageVolume", ctx(frobnicate="1"),
             ("frobnicate",)),
            ("option not in [pod] allow", "NodeStageVolume", ctx(endpoint="http://127.0.0.1:9"),
             ("endpoint",)),
            ("ramSize above maxRamSize", "NodeStageVolume", ctx(ramSize="1G"), ("ramSize",)),
            ("metadataTTL below minMetadataTTL", "NodeStageVolume", ctx(metadataTTL="100ms"),
             ("metadataTTL",)),
            ("a bad readOnly", "NodeStageVolume", ctx(readOnly="maybe"), ("readOnly",)),
            ("secret with an unknown key", "NodeStageVolume",
             dict(stage, secrets=dict(self.secret, bogusKey="v")), ("bogusKey",)),
            ("accessKey without secretKey", "NodeStageVolume",
             dict(stage, secrets={"accessKey": self.secret["accessKey"]}), ("secretKey",)),
            ("secretKey with a blank", "NodeStageVolume",
             dict(stage, secrets=dict(self.secret, secretKey="two words")), ("secretKey",)),
        ]
        bad = []
        for what, method, fields, words in cases:
            code, msg = self.p.code(method, **fields)
            if code == grpc.StatusCode.OK and method == "NodeStageVolume":
                # Staged when it should not be: unstage, for the next cases.
                self.p.code("NodeUnstageVolume", volume_id=vol, staging_target_path=g)
            missing = [w for w in words if w not in msg]
            leaked = [v for v in (self.secret["secretKey"], "two words") if v in msg]
            if code != IA or missing or leaked or not msg:
                bad.append("%s: %s %r%s%s" % (what, code.name, msg,
                                              " (does not name %s)" % missing if missing else "",
                                              " (LEAKS THE SECRET)" if leaked else ""))
        self.assertEqual(bad, [], "\n" + "\n".join(bad))
        self.assertEqual(mountinfo(g), [], "a refused stage mounted")
        self.assertEqual(daemons(self.source), [])

    def test_publish_unstaged_failed_precondition(self):
        vol = "pv-unstaged"
        g = self.staging(vol)
        t = self.target(vol, "pod-a")
        code = self.p.code("NodePublishVolume", volume_id=vol, staging_target_path=g,
                           target_path=t, volume_capability=capability())
        self.assert_code(code, grpc.StatusCode.FAILED_PRECONDITION)
        self.assertEqual(mountinfo(t), [])
        # Not a mount point of ours either: a directory with a tmpfs on it.
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1M", "tmpfs", g], check=True)
        try:
            code = self.p.code("NodePublishVolume", volume_id=vol, staging_target_path=g,
                               target_path=t, volume_capability=capability())
            self.assert_code(code, grpc.StatusCode.FAILED_PRECONDITION)
            self.assertEqual(mountinfo(t), [])
        finally:
            subprocess.run(["umount", g])

    def test_stage_other_source_already_exists(self):
        self.put("x", b"first")
        vol = "pv-conflict"
        g = self.staging(vol)
        os.rmdir(g)  # the plugin creates a missing staging directory
        self.stage(vol, g)
        for what, context in (("another source", {"source": M.source + "/other"}),
                              ("other options", {"ramSize": "128M"})):
            code = self.stage(vol, g, context, twice=False)
            self.assert_code(code, grpc.StatusCode.ALREADY_EXISTS)
        self.assertEqual(len(mountinfo(g)), 1)
        self.assertEqual(self.read(os.path.join(g, "x")), b"first")
        self.unstage(vol, g)
        self.assert_nothing_left()

    def test_bucket_not_found(self):
        vol = "pv-nobucket"
        g = self.staging(vol)
        src = "s3://tierfs-no-such-bucket-%s/data" % secrets.token_hex(4)
        code = self.stage(vol, g, {"source": src}, twice=False)
        self.assert_code(code, grpc.StatusCode.NOT_FOUND)
        self.assertEqual(mountinfo(g), [])
        poll(lambda: not daemons(src), 10, "no daemon for the missing bucket")

    # ---- 7. secrets stay secret

    def test_secret_never_leaks(self):
        sk = "tierfsSecretValue" + secrets.token_hex(16)
        self.secret = {"accessKey": "AKIA" + secrets.token_hex(8).upper(), "secretKey": sk}
        self.put("x", b"secret-test")
        vol = "pv-secret"
        g = self.staging(vol)
        self.stage(vol, g)
        t = self.target(vol, "pod-a")
        self.publish(vol, g, t, secret=self.secret)
        self.assertEqual(self.read(os.path.join(t, "x")), b"secret-test")
        # An ephemeral volume too: its secrets come with the publish.
        te = self.target("inline", "pod-e")
        ve = "csi-" + secrets.token_hex(16)
        self.publish(ve, "", te,
                     context=dict({"source": self.source}, **self.pod_context("e", "pod-e", True)),
                     secret=self.secret)
        self.assertEqual(self.read(os.path.join(te, "x")), b"secret-test")
        needle = sk.encode()
        seen = []
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            for what in ("cmdline", "environ"):
                try:
                    with open("/proc/%s/%s" % (pid, what), "rb") as f:
                        if needle in f.read():
                            seen.append("/proc/%s/%s (%s)" % (pid, what, " ".join(cmdline(pid))))
                except OSError:
                    pass
        for p in (self.p.log, self.p.daemon_log, self.p.stderr):
            if os.path.exists(p):
                with open(p, "rb") as f:
                    if needle in f.read():
                        seen.append(p)
        self.assertTrue(os.path.exists(self.p.log), "no plugin log")
        self.assertEqual(seen, [], "the secret key is in these")
        holders = []
        for d, _, names in os.walk(self.p.state):
            for n in names:
                path = os.path.join(d, n)
                with open(path, "rb") as f:
                    if needle in f.read():
                        holders.append(path)
        self.assertTrue(holders, "no credentials file under state_dir")
        for path in holders:
            st = os.lstat(path)
            self.assertTrue(stat.S_ISREG(st.st_mode), path)
            self.assertEqual((stat.S_IMODE(st.st_mode), st.st_uid), (0o600, 0), path)
        self.unpublish(ve, te)
        self.unpublish(vol, t)
        self.unstage(vol, g)
        self.assert_nothing_left()

    # ---- 8. inline ephemeral volumes share one daemon

    def test_ephemeral_shared_daemon(self):
        files = {"e.bin": data_for("eph", 120000)}
        for k, v in files.items():
            self.put(k, v)
        ta = self.target("data", "pod-a")
        tb = self.target("data", "pod-b")
        # The kubelet's volume ids of inline volumes: csi-HASH per pod.
        va, vb = "csi-" + secrets.token_hex(16), "csi-" + secrets.token_hex(16)
        ca = dict({"source": self.source}, **self.pod_context("a", "pod-a", True))
        cb = dict({"source": self.source}, **self.pod_context("b", "pod-b", True))
        self.publish(va, "", ta, context=ca, secret=self.secret)
        self.publish(vb, "", tb, context=cb, secret=self.secret)
        for t in (ta, tb):
            self.assertEqual(len(mountinfo(t)), 1, t)
            for k, v in files.items():
                self.assertEqual(self.read(os.path.join(t, k)), v)
        fm = self.fuse_mounts(self.source)
        self.assertEqual(len(fm), 1, "FUSE mounts (devices) of the source: %s" % fm)
        [(dev, mps)] = fm.items()
        base = [mp for mp in mps if mp not in (ta, tb)]
        self.assertEqual(len(base), 1, "the daemon's own mount: %s" % mps)
        self.assertTrue(under(base[0], self.p.state), "%s is not under state_dir" % base[0])
        self.assertEqual(sorted(mps), sorted(base + [ta, tb]))
        [pid] = daemons(self.source, base[0])
        self.unpublish(va, ta)
        self.assertFalse(pid_gone(pid), "the daemon stopped with pods left")
        for k, v in files.items():
            self.assertEqual(self.read(os.path.join(tb, k)), v, "the second pod lost its volume")
        self.assertEqual(self.fuse_mounts(self.source), {dev: [base[0], tb]},
                         "the shared mount must stay while a pod uses it")
        self.unpublish(vb, tb)
        poll(lambda: pid_gone(pid), 20, "the shared daemon to stop after the last unpublish")
        self.assert_nothing_left()

    def test_ephemeral_different_options_separate_daemons(self):
        """Pods whose effective options differ get their own daemons."""
        self.put("x", b"x")
        ta = self.target("data", "pod-a")
        tb = self.target("data", "pod-b")
        va, vb = "csi-" + secrets.token_hex(16), "csi-" + secrets.token_hex(16)
        ca = dict({"source": self.source}, **self.pod_context("a", "pod-a", True))
        cb = dict(ca, readOnly="true", **{"csi.storage.k8s.io/pod.uid": "pod-b"})
        self.publish(va, "", ta, context=ca, secret=self.secret)
        self.publish(vb, "", tb, context=cb, secret=self.secret)
        self.assertEqual(len(self.fuse_mounts(self.source)), 2)
        self.assertEqual(len(daemons(self.source)), 2)
        # readOnly makes the daemon read-only: its superblock, whatever
        # the bind's own flag says.
        self.assertIn("ro", mountinfo(tb)[0]["super"], mountinfo(tb))
        self.assertIn("rw", mountinfo(ta)[0]["super"], mountinfo(ta))
        with self.assertRaises(OSError) as cm:
            open(os.path.join(tb, "nope.bin"), "wb").close()
        self.assertEqual(cm.exception.errno, errno.EROFS)
        with open(os.path.join(ta, "yes.bin"), "wb") as f:
            f.write(b"written")
        self.unpublish(va, ta)
        self.assertEqual(self.read(os.path.join(tb, "x")), b"x")
        self.unpublish(vb, tb)
        self.assert_nothing_left()

    def test_ephemeral_other_secret_separate_daemon(self):
        """An access key ID is no secret: a pod that names another pod's
        access key with a secret key of its own must not be bound to the
        daemon that holds the right one."""
        self.put("x", b"x")
        ta = self.target("data", "pod-a")
        tb = self.target("data", "pod-b")
        va, vb = "csi-" + secrets.token_hex(16), "csi-" + secrets.token_hex(16)
        ctx = dict({"source": self.source}, **self.pod_context("a", "pod-a", True))
        other = dict(self.secret, secretKey="guessed-" + secrets.token_hex(8))
        self.publish(va, "", ta, context=ctx, secret=self.secret)
        self.publish(vb, "", tb, context=ctx, secret=other)
        self.assertEqual(len(self.fuse_mounts(self.source)), 2,
                         "a pod with another secret key shares the daemon")
        self.assertNotEqual(mountinfo(ta)[0]["dev"], mountinfo(tb)[0]["dev"])
        self.unpublish(va, ta)
        self.unpublish(vb, tb)
        self.assert_nothing_left()

    # ---- 9. only the plugin's own mounts, only below kubelet_dir

    def test_foreign_tierfs_mount_survives(self):
        """A tierfs mount the plugin did not make (here `tierfs mount` by
        hand) survives NodeUnpublishVolume and NodeUnstageVolume of its
        path: outside kubelet_dir they are INVALID_ARGUMENT, below it
        FAILED_PRECONDITION; it stays mounted, its directory stays, its
        daemon keeps serving.  The plugin's own volumes still publish and
        unpublish."""
        data = data_for("foreign", 200000)
        self.put("f.bin", data)
        outside = Mount(TIERFS, M, os.path.join(self.work, "elsewhere"), "foreign",
                        source=self.source).mount()
        inside = Mount(TIERFS, M, os.path.join(self.kubelet, "pods", "p", "volumes",
                                               "kubernetes.io~csi", "pv-f"), "foreign",
                       source=self.source).mount()
        try:
            for mp, code in ((outside.mnt, grpc.StatusCode.INVALID_ARGUMENT),
                             (inside.mnt, grpc.StatusCode.FAILED_PRECONDITION)):
                for method, field in (("NodeUnpublishVolume", "target_path"),
                                      ("NodeUnstageVolume", "staging_target_path")):
                    got = self.p.code(method, volume_id="pv-f", **{field: mp})
                    self.assert_code(got, code)
                    self.assertIn("not", got[1])
                    self.assertEqual(len(mountinfo(mp)), 1, "%s of %s unmounted it" % (method, mp))
                    self.assertTrue(os.path.isdir(mp), "%s of %s removed it" % (method, mp))
                    self.assertEqual(self.read(os.path.join(mp, "f.bin")), data)
            # A link below kubelet_dir to the mount outside is outside too.
            link = os.path.join(self.kubelet, "link")
            os.makedirs(self.kubelet, exist_ok=True)
            os.symlink(outside.mnt, link)
            self.assert_code(self.p.code("NodeUnpublishVolume", volume_id="pv-f",
                                         target_path=link), grpc.StatusCode.INVALID_ARGUMENT)
            self.assertEqual(len(mountinfo(outside.mnt)), 1)
            # The plugin's own volume, beside them.
            vol = "pv-own"
            g = self.staging(vol)
            self.stage(vol, g)
            t = self.target(vol, "pod-own")
            self.publish(vol, g, t)
            self.assertEqual(self.read(os.path.join(t, "f.bin")), data)
            self.unpublish(vol, t)
            self.unstage(vol, g)
            for mp in (outside.mnt, inside.mnt):
                self.assertEqual(self.read(os.path.join(mp, "f.bin")), data)
        finally:
            outside.umount()
            inside.umount()

    def test_unrecorded_bind_of_a_staged_volume_unpublishes(self):
        """A target published before targets were recorded (no record in
        state_dir/published) is a bind of a staging mount the state
        records: NodeUnpublishVolume still unmounts it, so pods already
        running can go."""
        self.put("x", b"x")
        vol = "pv-old"
        g = self.staging(vol)
        self.stage(vol, g)
        t = self.target(vol, "pod-old")
        self.publish(vol, g, t)
        recs = os.listdir(os.path.join(self.p.state, "published"))
        self.assertEqual(len(recs), 1, recs)
        with open(os.path.join(self.p.state, "published", recs[0])) as f:
            self.assertEqual(json.load(f)["target"], t)
        os.unlink(os.path.join(self.p.state, "published", recs[0]))
        self.unpublish(vol, t)
        self.unstage(vol, g)
        self.assert_nothing_left()

    # ---- 10. the ephemeral fingerprint is keyed

    def test_ephemeral_fingerprint_keyed_and_stable(self):
        """The fingerprint that names an ephemeral volume's shared mount
        is an HMAC under a key in state_dir (0700), in a file of its own
        (0600) made once: a restarted plugin computes the same one, and
        the next pod shares the daemon."""
        self.put("x", b"x")
        ta, tb = self.target("data", "pod-a"), self.target("data", "pod-b")
        va, vb = "csi-" + secrets.token_hex(16), "csi-" + secrets.token_hex(16)
        ctx = dict({"source": self.source}, **self.pod_context("a", "pod-a", True))
        self.publish(va, "", ta, context=ctx, secret=self.secret)
        key = os.path.join(self.p.state, "fingerprint.key")
        st = os.lstat(key)
        self.assertTrue(stat.S_ISREG(st.st_mode))
        self.assertEqual(stat.S_IMODE(st.st_mode), 0o600)
        self.assertEqual(st.st_size, 32)
        self.assertEqual(stat.S_IMODE(os.stat(self.p.state).st_mode), 0o700)
        with open(key, "rb") as f:
            k1 = f.read()
        [fp] = os.listdir(os.path.join(self.p.state, "ephemeral"))
        self.p.kill()
        self.p.start()
        self.publish(vb, "", tb, context=ctx, secret=self.secret)
        self.assertEqual(os.listdir(os.path.join(self.p.state, "ephemeral")), [fp],
                         "another fingerprint after a restart")
        with open(key, "rb") as f:
            self.assertEqual(f.read(), k1, "the key changed")
        self.assertEqual(len(self.fuse_mounts(self.source)), 1)
        self.unpublish(va, ta)
        self.unpublish(vb, tb)
        self.assert_nothing_left()

    # ---- 11. node-wide limits and the daemons' memory limit

    def restart(self, node):
        """The plugin again, with more [node] settings."""
        self.p.kill()
        self.p = Plugin(self.work, M.env["TFS_S3_ENDPOINT"], {"node": node})

    def test_max_daemons_resource_exhausted(self):
        """With max_daemons = 2, a third volume (staged or ephemeral) is
        RESOURCE_EXHAUSTED and nothing of it is left; once one is
        unstaged, it fits."""
        self.restart({"max_daemons": "2"})
        self.put("x", b"x")
        g1, g2, g3 = self.staging("pv-1"), self.staging("pv-2"), self.staging("pv-3")
        self.stage("pv-1", g1)
        self.stage("pv-2", g2, context={"ramSize": "32M"})
        got = self.stage("pv-3", g3, context={"ramSize": "48M"}, twice=False)
        self.assert_code(got, grpc.StatusCode.RESOURCE_EXHAUSTED, "max_daemons = 2",
                         "runs 2 tierfs daemon(s)")
        self.assertEqual(mountinfo(g3), [])
        t = self.target("data", "pod-e")
        ctx = dict({"source": self.source}, **self.pod_context("e", "pod-e", True))
        got = self.p.code("NodePublishVolume", volume_id="csi-" + secrets.token_hex(16),
                          target_path=t, volume_capability=capability(), secrets=self.secret,
                          volume_context=ctx)
        self.assert_code(got, grpc.StatusCode.RESOURCE_EXHAUSTED, "max_daemons")
        self.assertEqual(mountinfo(t), [])
        self.assertEqual(len(self.fuse_mounts(self.source)), 2)
        self.unstage("pv-1", g1)
        self.stage("pv-3", g3, context={"ramSize": "48M"})
        self.unstage("pv-2", g2)
        self.unstage("pv-3", g3)
        self.assert_nothing_left()

    def test_total_ram_and_ssd_resource_exhausted(self):
        """max_total_ram and max_total_ssd bound the sums of the daemons'
        ram.size and ssd.size."""
        self.restart({"max_total_ram": "120M", "max_total_ssd": "600M"})
        self.put("x", b"x")
        g1, g2, g3 = self.staging("pv-1"), self.staging("pv-2"), self.staging("pv-3")
        self.stage("pv-1", g1)  # 64M of RAM, 256M of SSD
        got = self.stage("pv-2", g2, twice=False)
        self.assert_code(got, grpc.StatusCode.RESOURCE_EXHAUSTED, "max_total_ram = 120 MiB",
                         "hold 64 MiB")
        self.assertEqual(mountinfo(g2), [])
        self.stage("pv-2", g2, context={"ramSize": "32M", "ssdSize": "300M"})
        got = self.stage("pv-3", g3, context={"ramSize": "16M", "ssdSize": "64M"}, twice=False)
        self.assert_code(got, grpc.StatusCode.RESOURCE_EXHAUSTED, "max_total_ssd")
        self.assertEqual(mountinfo(g3), [])
        for v, g in (("pv-1", g1), ("pv-2", g2)):
            self.unstage(v, g)
        self.assert_nothing_left()

    def test_daemon_memory_cgroup(self):
        """Without systemd each daemon runs in a memory cgroup of its own
        below cgroup_dir, limited to ram.size + memory_margin; the cgroup
        goes with the volume."""
        self.put("x", b"x")
        g = self.staging("pv-mem")
        self.stage("pv-mem", g, context={"ramSize": "80M"})
        h = hashlib.sha256(os.path.realpath(g).encode()).hexdigest()[:32]
        cg = os.path.join(self.p.cgroups, "csi-" + h)
        self.assertTrue(os.path.isdir(cg), "no cgroup %s" % cg)
        limit = "memory.limit_in_bytes"
        if not os.path.exists(os.path.join(cg, limit)):
            limit = "memory.max"  # cgroup v2
        with open(os.path.join(cg, limit)) as f:
            self.assertEqual(int(f.read()), (80 << 20) + Plugin.MARGIN)
        with open(os.path.join(cg, "cgroup.procs")) as f:
            procs = {int(x) for x in f.read().split()}
        mine = set(tierfs_mounts(self.source))
        self.assertTrue(mine, "no daemon")
        self.assertEqual(mine - procs, set(), "daemon processes outside the cgroup")
        with open(os.path.join(self.p.state, h, "volume.json")) as f:
            self.assertEqual(json.load(f)["cgroup"], cg)
        self.unstage("pv-mem", g)
        self.assert_nothing_left()
        poll(lambda: not os.path.exists(cg), 20, "the cgroup to be removed")


def main():
    global CSI, TIERFS
    args = sys.argv[1:]
    if len(args) < 2 or args[0].startswith("-") or args[1].startswith("-"):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    CSI, TIERFS = os.path.abspath(args[0]), os.path.abspath(args[1])
    args = args[2:]
    os.environ.pop("AWS_CA_BUNDLE", None)
    loader = unittest.TestLoader()
    if "-k" in args:
        loader.testNamePatterns = ["*%s*" % args[args.index("-k") + 1]]
    suite = loader.loadTestsFromModule(sys.modules[__name__])
    r = unittest.TextTestRunner(verbosity=2, stream=sys.stdout).run(suite)
    failed = len(r.failures) + len(r.errors) + len(r.unexpectedSuccesses)
    skipped = len(r.skipped)
    xfail = len(r.expectedFailures)
    passed = max(0, r.testsRun - failed - skipped - xfail)  # a skipped module: no test ran
    print("csi: %d passed, %d failed (%d skipped, %d expected failures)"
          % (passed, failed, skipped, xfail))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
