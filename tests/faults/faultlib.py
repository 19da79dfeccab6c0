"""faultlib.py - helpers for tests that run S3 traffic through s3_fault_proxy.py.

    from faultlib import Moto, FaultProxy, poll

Moto starts a throwaway moto_server with tests/harness/moto.sh; FaultProxy
starts the proxy in front of any upstream on a free 127.0.0.1 port and talks
to its control endpoint.  Only the standard library (and boto3, lazily).
"""
import http.client
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.abspath(os.path.join(HERE, "..", ".."))
HARNESS = os.path.join(TOP, "tests", "harness")
PROXY = os.path.join(HERE, "s3_fault_proxy.py")


def poll(cond, timeout=20.0, what="condition", interval=0.05):
    """Wait until cond() is truthy and return it; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(interval)


class Moto:
    """A moto_server on 127.0.0.1 with the test bucket, via tests/harness/moto.sh."""

    def __init__(self, workdir):
        self.dir = os.path.join(workdir, "moto")
        os.makedirs(self.dir, exist_ok=True)
        subprocess.run([os.path.join(HARNESS, "moto.sh"), "start", self.dir], check=True,
                       stdout=subprocess.DEVNULL)
        env = {}
        with open(os.path.join(self.dir, "env")) as f:
            for line in f:
                line = line.strip()
                if line.startswith("export "):
                    k, v = line[7:].split("=", 1)
                    env[k] = v.strip("'\"")
        self.env = env
        self.endpoint = env["TFS_S3_ENDPOINT"]
        self.bucket = env["TFS_TEST_BUCKET"]

    def client(self, endpoint=None, **config):
        """A boto3 S3 client for moto itself or, with endpoint=, for a proxy."""
        import boto3
        import botocore.config
        os.environ.pop("AWS_CA_BUNDLE", None)
        cfg = botocore.config.Config(**config) if config else None
        return boto3.client("s3", endpoint_url=endpoint or self.endpoint, region_name="us-east-1",
                            aws_access_key_id=self.env["AWS_ACCESS_KEY_ID"],
                            aws_secret_access_key=self.env["AWS_SECRET_ACCESS_KEY"], config=cfg)

    def stop(self):
        subprocess.run([os.path.join(HARNESS, "moto.sh"), "stop", self.dir],
                       stdout=subprocess.DEVNULL)


class FaultProxy:
    """s3_fault_proxy.py in front of `upstream` (http://127.0.0.1:PORT)."""

    def __init__(self, upstream, workdir, name="proxy", args=()):
        self.workdir = workdir
        self.name = name
        self.log_path = os.path.join(workdir, name + ".log")
        self.stats_path = os.path.join(workdir, name + ".stats.json")
        info_path = os.path.join(workdir, name + ".info.json")
        for p in (info_path, self.stats_path):
            if os.path.exists(p):
                os.unlink(p)
        self.proc = subprocess.Popen(
            [sys.executable, PROXY, "--upstream", upstream, "--listen", "127.0.0.1",
             "--info-file", info_path, "--stats-file", self.stats_path, "--log", self.log_path]
            + list(args),
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)

        def ready():
            if self.proc.poll() is not None:
                raise AssertionError("s3_fault_proxy exited with %d: %s" % (
                    self.proc.returncode, self.proc.stderr.read().decode(errors="replace")))
            try:
                with open(info_path) as f:
                    return json.load(f)
            except (OSError, ValueError):
                return None
        self.info = poll(ready, 15, "s3_fault_proxy to listen", interval=0.02)
        self.port = self.info["port"]
        self.control_port = self.info["control_port"]
        self.endpoint = "http://127.0.0.1:%d" % self.port

    def _control(self, method, path, body=None):
        c = http.client.HTTPConnection("127.0.0.1", self.control_port, timeout=10)
        try:
            data = json.dumps(body).encode() if body is not None else None
            c.request(method, path, body=data, headers={"Content-Type": "application/json"})
            r = c.getresponse()
            out = json.loads(r.read() or b"{}")
            if r.status != 200:
                raise AssertionError("proxy %s %s: %d %s" % (method, path, r.status, out))
            return out
        finally:
            c.close()

    def config(self, **patch):
        """Change part of the running config (top-level keys are replaced)."""
        return self._control("POST", "/config", patch)

    def set_config(self, cfg):
        """Replace the running config (over the command-line one)."""
        return self._control("PUT", "/config", cfg)

    def off(self):
        return self._control("POST", "/off", {})

    def stats(self):
        return self._control("GET", "/stats")

    def reset_stats(self):
        return self._control("POST", "/stats/reset", {})

    def log_tail(self, n=30):
        try:
            with open(self.log_path) as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return "(no proxy log)"

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stderr:
            self.proc.stderr.close()


def fault_count(stats, kind=None, method=None):
    """Faults of `kind` (any kind when None) on `method` (any when None)."""
    if method is None:
        return stats["faults_total"] if kind is None else stats["faults"].get(kind, 0)
    m = stats["faults_by_method"].get(method, {})
    return sum(m.values()) if kind is None else m.get(kind, 0)
