#!/usr/bin/env python3
"""test_proxy.py - the self-test of s3_fault_proxy.py.

    test_proxy.py [unittest options]

Checks that the proxy forwards requests byte for byte (Content-Length,
chunked, Expect: 100-continue, keep-alive) to a recording upstream, that
real S3 traffic passes (boto3 PUT and multipart against moto_server, and
`tierfs backend put` when $TIERFS or build/tierfs exists), that every fault
kind looks on the wire as documented, that filters, --seed, max_faults and
the --config file work, and that a multipart upload under PUT/POST faults
completes and leaves no upload behind.  test_faults.py runs these too.
"""
import hashlib
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import s3_fault_proxy as fp  # noqa: E402
from faultlib import TOP, FaultProxy, Moto, fault_count, poll  # noqa: E402

W = None  # module fixture


# ---------------------------------------------------------------- a recording upstream

class Recorder:
    """An HTTP/1.1 server on 127.0.0.1 that records the raw bytes of every
    request and answers with a deterministic body of the size the request
    asks for in its X-Want header (chunked when X-Chunked is set)."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.endpoint = "http://127.0.0.1:%d" % self.port
        self.lock = threading.Lock()
        self.requests = []
        self.connections = 0
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            with self.lock:
                self.connections += 1
            threading.Thread(target=self.serve, args=(c,), daemon=True).start()

    def serve(self, c):
        rd = fp.Reader(c)
        try:
            while True:
                head = rd.read_head(eof_ok=True)
                if head is None:
                    return
                start, headers = fp.parse_head(head)
                method = start.split(" ")[0]
                raw = bytearray(head)
                framing = fp.request_framing(headers)
                if "100-continue" in fp.htokens(headers, "expect") and framing != ("length", 0):
                    c.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
                for piece in fp.iter_body(rd, framing):
                    raw += piece
                with self.lock:
                    self.requests.append(bytes(raw))
                want = int(fp.hget(headers, "x-want", "0"))
                body = body_for(want)
                if fp.hget(headers, "x-chunked"):
                    h = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                    data = b""
                    for i in range(0, len(body), 7000):
                        part = body[i:i + 7000]
                        data += b"%x;ext=1\r\n%s\r\n" % (len(part), part)
                    data += b"0\r\nX-Trailer: yes\r\n\r\n"
                else:
                    h = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body)
                    data = body
                c.sendall(h + (b"" if method == "HEAD" else data))
        except (OSError, EOFError, fp.ProtocolError):
            pass
        finally:
            c.close()

    def close(self):
        self.sock.close()


def body_for(n):
    out = bytearray()
    i = 0
    while len(out) < n:
        out += hashlib.sha256(b"body%d" % i).digest()
        i += 1
    return bytes(out[:n])


class Client:
    """A raw HTTP/1.1 client connection: sends exact bytes, parses replies."""

    def __init__(self, port, timeout=10):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.rd = fp.Reader(self.sock)

    def send(self, data):
        self.sock.sendall(data)

    def response(self, method="GET"):
        """(status, headers, body) of the next final response; 1xx are skipped."""
        while True:
            head = self.rd.read_head()
            start, headers = fp.parse_head(head)
            status = int(start.split(" ")[1])
            if 100 <= status < 200:
                continue
            body = b"".join(fp.iter_body(self.rd, fp.response_framing(method, status, headers)))
            return status, headers, body

    def close(self):
        self.sock.close()


class Fixture:
    def __init__(self):
        self.work = tempfile.mkdtemp(prefix="tierfs-proxy-")
        self.rec = Recorder()
        self.moto = None
        self.proxies = []
        try:
            self.moto = Moto(self.work)
        except BaseException:
            self.close()
            raise

    def proxy(self, upstream, *args, name=None):
        p = FaultProxy(upstream, self.work, name=name or "proxy%d" % len(self.proxies), args=args)
        self.proxies.append(p)
        return p

    def close(self):
        for p in self.proxies:
            p.stop()
        self.rec.close()
        if self.moto:
            self.moto.stop()
        shutil.rmtree(self.work, ignore_errors=True)


def setUpModule():
    global W
    W = Fixture()


def tearDownModule():
    if W:
        W.close()


def recorded_since(n):
    with W.rec.lock:
        return W.rec.requests[n:]


# ---------------------------------------------------------------- tests

class PassthroughTests(unittest.TestCase):
    def test_raw_bytes_keepalive_chunked_expect(self):
        p = W.proxy(W.rec.endpoint, "--seed", "1")
        n0 = len(W.rec.requests)
        c = Client(p.port)
        body = os.urandom(100_000)
        sent = []
        # 1: a GET with headers as a signer writes them (case, order, repeats, spacing)
        r1 = (b"GET /bucket/key%20with%2Fodd?x-id=GetObject&partNumber=1 HTTP/1.1\r\n"
              b"Host: 127.0.0.1:9999\r\nX-Amz-Date: 20240101T000000Z\r\n"
              b"authorization: AWS4-HMAC-SHA256 Credential=a/b/c/s3/aws4_request, "
              b"SignedHeaders=host;x-amz-date, Signature=abc\r\n"
              b"X-Amz-Meta-A:  spaced  value \r\nx-amz-meta-a: again\r\nX-Want: 5000\r\n\r\n")
        c.send(r1)
        sent.append(r1)
        self.assertEqual(c.response(), (200, [("content-length", "5000")], body_for(5000)))
        # 2: a PUT with Expect: 100-continue; the body only after the 100
        r2h = (b"PUT /bucket/obj HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\n"
               b"Content-Length: %d\r\nX-Want: 3\r\n\r\n" % len(body))
        c.send(r2h)
        head = c.rd.read_head()
        self.assertTrue(head.startswith(b"HTTP/1.1 100"), head)
        c.send(body)
        sent.append(r2h + body)
        self.assertEqual(c.response()[2], body_for(3))
        # 3: a chunked PUT with an extension and a trailer; a chunked reply
        r3 = (b"PUT /bucket/chunked HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n"
              b"X-Want: 20000\r\nX-Chunked: 1\r\n\r\n"
              b"5;chunk-signature=ab\r\nhello\r\n1000\r\n" + b"z" * 0x1000 +
              b"\r\n0\r\nx-amz-checksum-crc32: AAAAAA==\r\n\r\n")
        c.send(r3)
        sent.append(r3)
        st, hd, raw = c.response()
        self.assertEqual(st, 200)
        self.assertIn(b"0\r\nX-Trailer: yes\r\n\r\n", raw)
        # 4: a bodyless POST and a HEAD
        r4 = b"POST /bucket/obj?uploads HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\nX-Want: 10\r\n\r\n"
        r5 = b"HEAD /bucket/obj HTTP/1.1\r\nHost: h\r\nX-Want: 10\r\n\r\n"
        c.send(r4)
        self.assertEqual(c.response()[2], body_for(10))
        c.send(r5)
        self.assertEqual(c.response("HEAD")[2], b"")
        sent += [r4, r5]
        c.close()
        got = poll(lambda: len(recorded_since(n0)) >= 5 and recorded_since(n0), 5, "5 requests")
        self.assertEqual(len(got), len(sent))
        for i, (a, b) in enumerate(zip(got, sent)):
            self.assertEqual(a, b, "request %d was not forwarded byte for byte" % (i + 1))
        st = p.stats()
        self.assertEqual((st["requests"], st["connections"], st["faults_total"]), (5, 1, 0))

    def test_s3_put_and_multipart_through_proxy(self):
        p = W.proxy(W.moto.endpoint)
        s3 = W.moto.client(endpoint=p.endpoint, retries={"max_attempts": 1})
        direct = W.moto.client()
        b = W.moto.bucket
        data = os.urandom(1 << 20)
        s3.put_object(Bucket=b, Key="pt/single", Body=data, Metadata={"k": "v"})
        self.assertEqual(direct.get_object(Bucket=b, Key="pt/single")["Body"].read(), data)
        self.assertEqual(s3.get_object(Bucket=b, Key="pt/single", Range="bytes=100-199")["Body"].read(),
                         data[100:200])
        self.assertEqual(s3.head_object(Bucket=b, Key="pt/single")["Metadata"], {"k": "v"})
        parts = [os.urandom(5 << 20), os.urandom(5 << 20), os.urandom(12345)]
        up = s3.create_multipart_upload(Bucket=b, Key="pt/multi")["UploadId"]
        etags = [s3.upload_part(Bucket=b, Key="pt/multi", UploadId=up, PartNumber=i + 1, Body=d)["ETag"]
                 for i, d in enumerate(parts)]
        s3.complete_multipart_upload(Bucket=b, Key="pt/multi", UploadId=up, MultipartUpload={
            "Parts": [{"ETag": e, "PartNumber": i + 1} for i, e in enumerate(etags)]})
        self.assertEqual(direct.get_object(Bucket=b, Key="pt/multi")["Body"].read(), b"".join(parts))
        up2 = s3.create_multipart_upload(Bucket=b, Key="pt/aborted")["UploadId"]
        s3.upload_part(Bucket=b, Key="pt/aborted", UploadId=up2, PartNumber=1, Body=b"x" * 100)
        s3.abort_multipart_upload(Bucket=b, Key="pt/aborted", UploadId=up2)
        self.assertEqual(direct.list_multipart_uploads(Bucket=b, Prefix="pt/").get("Uploads", []), [])
        keys = [o["Key"] for o in s3.list_objects_v2(Bucket=b, Prefix="pt/")["Contents"]]
        self.assertEqual(keys, ["pt/multi", "pt/single"])
        st = p.stats()
        self.assertEqual(st["faults_total"], 0)
        self.assertGreaterEqual(st["requests_by_method"].get("PUT", 0), 5)

    def test_tierfs_backend_put_multipart_through_proxy(self):
        tierfs = os.environ.get("TIERFS", os.path.join(TOP, "build", "tierfs"))
        if not os.access(tierfs, os.X_OK):
            self.skipTest("no tierfs binary at %s" % tierfs)
        p = W.proxy(W.moto.endpoint)
        src = os.path.join(W.work, "upload.bin")
        data = os.urandom(11 * (1 << 20) + 7)
        with open(src, "wb") as f:
            f.write(data)
        env = dict(os.environ)
        env.update(W.moto.env)
        env.pop("AWS_CA_BUNDLE", None)
        r = subprocess.run([tierfs, "backend", "-o", "backend.endpoint=" + p.endpoint,
                            "-o", "backend.multipart_threshold=5M", "-o", "backend.part_size=5M",
                            "s3://" + W.moto.bucket, "put", src, "pt/tierfs-multi"],
                           env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr + r.stdout)
        got = W.moto.client().get_object(Bucket=W.moto.bucket, Key="pt/tierfs-multi")["Body"].read()
        self.assertEqual(got, data)
        st = p.stats()
        self.assertGreaterEqual(st["requests_by_method"].get("PUT", 0), 3, st["requests_by_method"])
        self.assertGreaterEqual(st["requests_by_method"].get("POST", 0), 2, st["requests_by_method"])


class FaultKindTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.p = W.proxy(W.rec.endpoint, "--seed", "7", "--latency-ms", "300", "--stall-s", "5",
                        name="kinds")

    def setUp(self):
        self.p.set_config({})  # back to the command line's config, faults off
        self.p.reset_stats()

    def get(self, c, size=200_000, method="GET", path="/b/k"):
        c.send(b"%s %s HTTP/1.1\r\nHost: h\r\nX-Want: %d\r\n\r\n" % (method.encode(), path.encode(), size))

    def raw_until_end(self, c, timeout=3):
        """All bytes until EOF; ('reset', bytes) on a RST, ('silent', bytes) on a timeout."""
        c.sock.settimeout(timeout)
        data = bytearray(c.rd.buf)
        try:
            while True:
                b = c.sock.recv(65536)
                if not b:
                    return "eof", bytes(data)
                data += b
        except ConnectionResetError:
            return "reset", bytes(data)
        except socket.timeout:
            return "silent", bytes(data)

    def test_500_and_503_are_s3_errors_and_keep_the_connection(self):
        c = Client(self.p.port)
        for kind, code, s3code in (("500", 500, "InternalError"), ("503", 503, "SlowDown")):
            self.p.config(rates={kind: 1.0})
            self.get(c)
            st, hd, body = c.response()
            self.assertEqual(st, code)
            self.assertEqual(fp.hget(hd, "content-type"), "application/xml")
            self.assertIn(b"<Code>%s</Code>" % s3code.encode(), body)
            self.assertIn(b"<Resource>/b/k</Resource>", body)
        self.p.off()
        self.get(c, 10)
        self.assertEqual(c.response(), (200, [("content-length", "10")], body_for(10)))
        st = self.p.stats()
        self.assertEqual((st["faults"]["500"], st["faults"]["503"], st["connections"]), (1, 1, 1))

    def test_500_on_a_put_with_expect_closes_without_the_body(self):
        self.p.config(rates={"500": 1.0}, methods=["PUT"])
        c = Client(self.p.port)
        c.send(b"PUT /b/k HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 9\r\n\r\n")
        st, hd, body = c.response()
        self.assertEqual((st, fp.hget(hd, "connection")), (500, "close"))
        self.assertEqual(self.raw_until_end(c)[0], "eof")

    def test_truncate_is_short_of_content_length(self):
        self.p.config(rates={"truncate": 1.0})
        for _ in range(3):
            c = Client(self.p.port)
            self.get(c)
            how, raw = self.raw_until_end(c)
            self.assertEqual(how, "eof")
            head, _, body = raw.partition(b"\r\n\r\n")
            self.assertIn(b"Content-Length: 200000", head)
            self.assertLess(len(body), 200_000)
            self.assertEqual(body, body_for(200_000)[:len(body)])
        self.assertEqual(self.p.stats()["faults"]["truncate"], 3)

    def test_truncate_of_a_head_reply_cuts_the_header_block(self):
        self.p.config(rates={"truncate": 1.0})
        c = Client(self.p.port)
        self.get(c, method="HEAD")
        how, raw = self.raw_until_end(c)
        self.assertEqual(how, "eof")
        self.assertNotIn(b"\r\n\r\n", raw)

    def test_reset_mid_body(self):
        self.p.config(rates={"reset": 1.0})
        for _ in range(3):
            c = Client(self.p.port)
            self.get(c, 2_000_000)
            how, raw = self.raw_until_end(c)
            self.assertEqual(how, "reset", "%s after %d bytes" % (how, len(raw)))
        self.assertEqual(self.p.stats()["faults"]["reset"], 3)

    def test_latency_delays_but_delivers(self):
        self.p.config(rates={"latency": 1.0}, latency_ms=[300, 300])
        c = Client(self.p.port)
        for where in ("headers", "body"):
            self.p.config(latency_where=where)
            t0 = time.monotonic()
            self.get(c)
            st, _, body = c.response()
            secs = time.monotonic() - t0
            self.assertEqual((st, body), (200, body_for(200_000)))
            self.assertGreaterEqual(secs, 0.29, where)
        self.assertEqual(self.p.stats()["faults"]["latency"], 2)

    def test_stall_and_blackhole_send_nothing_more(self):
        self.p.config(rates={"stall": 1.0})
        c = Client(self.p.port)
        self.get(c)
        how, raw = self.raw_until_end(c, timeout=0.7)
        self.assertEqual(how, "silent")
        head, _, body = raw.partition(b"\r\n\r\n")
        self.assertLess(len(body), 200_000)
        self.assertEqual(body, body_for(200_000)[:len(body)])
        c.close()
        self.p.config(rates={"blackhole": 1.0})
        c = Client(self.p.port)
        n0 = len(W.rec.requests)
        self.get(c)
        self.assertEqual(self.raw_until_end(c, timeout=0.7), ("silent", b""))
        self.assertEqual(len(W.rec.requests), n0, "a black-holed request was forwarded")
        st = poll(lambda: (lambda s: s["holding"] >= 1 and s)(self.p.stats()), 5, "holding")
        self.assertEqual((st["faults"]["stall"], st["faults"]["blackhole"]), (1, 1))
        c.close()
        poll(lambda: self.p.stats()["holding"] == 0, 5, "the held connections to be let go")

    def test_forward_errors_executes_then_fails(self):
        self.p.config(rates={"503": 1.0}, forward_errors=True, methods=["PUT"])
        n0 = len(W.rec.requests)
        c = Client(self.p.port)
        c.send(b"PUT /b/fwd HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\n\r\nabcd")
        self.assertEqual(c.response()[0], 503)
        self.assertEqual(recorded_since(n0)[-1][-4:], b"abcd")


class ControlTests(unittest.TestCase):
    def statuses(self, p, n=40, path="/b/seeded"):
        c = Client(p.port)
        out = []
        for _ in range(n):
            c.send(b"GET %s HTTP/1.1\r\nHost: h\r\nX-Want: 1\r\n\r\n" % path.encode())
            out.append(c.response()[0])
        c.close()
        return out

    def test_seed_makes_runs_repeat(self):
        args = ("--rate", "500=0.3", "--rate", "503=0.3")
        a = self.statuses(W.proxy(W.rec.endpoint, "--seed", "42", *args))
        b = self.statuses(W.proxy(W.rec.endpoint, "--seed", "42", *args))
        c = self.statuses(W.proxy(W.rec.endpoint, "--seed", "43", *args))
        self.assertEqual(a, b)
        self.assertNotEqual(a, c)
        self.assertTrue({500, 503, 200} <= set(a), a)

    def test_method_and_path_filters_and_budget(self):
        p = W.proxy(W.rec.endpoint, "--rate", "500=1", "--methods", "PUT")
        self.assertEqual(self.statuses(p, 3), [200] * 3)
        c = Client(p.port)
        c.send(b"PUT /b/x HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\nhi")
        self.assertEqual(c.response()[0], 500)
        c.close()
        p.set_config({"rates": {"503": 1.0}, "methods": [], "path_regex": r"^/b/only", "max_faults": 2})
        self.assertEqual(self.statuses(p, 2, "/b/other"), [200, 200])
        self.assertEqual(self.statuses(p, 4, "/b/only-this"), [503, 503, 200, 200])
        p.set_config({"rules": [{"methods": ["GET"], "path_regex": "rule", "rates": {"500": 1.0}}],
                      "rates": {"503": 1.0}, "methods": []})
        self.assertEqual(self.statuses(p, 2, "/b/rule") + self.statuses(p, 2, "/b/x"),
                         [500, 500, 503, 503])
        st = p.stats()
        self.assertEqual(fault_count(st, "500", "GET"), 2)
        self.assertEqual(fault_count(st, "500", "PUT"), 1)
        with self.assertRaises(AssertionError):
            p.config(rates={"nosuch": 1})
        with self.assertRaises(AssertionError):
            p.config(rates={"500": 0.7, "503": 0.7})

    def test_config_file_is_reread(self):
        cfg = os.path.join(W.work, "faults.json")

        def write(obj):
            tmp = cfg + ".tmp"
            with open(tmp, "w") as f:
                f.write(obj if isinstance(obj, str) else json.dumps(obj))
            os.replace(tmp, cfg)
        write({"rates": {"503": 1.0}})
        p = W.proxy(W.rec.endpoint, "--config", cfg)
        self.assertEqual(self.statuses(p, 2), [503, 503])
        write({"rates": {}})
        poll(lambda: self.statuses(p, 1) == [200], 5, "the new config file to apply")
        write("{not json")
        # requests go on under the last good config until the bad file is noticed
        poll(lambda: self.statuses(p, 1) == [200] and "ignored" in p.log_tail(), 5,
             "the broken config file to be ignored")
        self.assertEqual(self.statuses(p, 2), [200, 200])
        write({"rates": {"500": 1.0}})
        poll(lambda: self.statuses(p, 1) == [500], 5, "the next config file to apply")


class RealisticTests(unittest.TestCase):
    def test_realistic_mode_delays_first_bytes_and_caps_bandwidth(self):
        """--realistic: every reply's headers wait ttfb_ms after its request,
        and each connection's bodies flow at most bandwidth_mbps; both can be
        changed at run time and are off by default."""
        p = W.proxy(W.rec.endpoint, "--realistic", name="realistic")
        c = Client(p.port)
        size = 2_000_000
        t0 = time.monotonic()
        c.send(b"GET /b/r HTTP/1.1\r\nHost: h\r\nX-Want: 10\r\n\r\n")
        self.assertEqual(c.response()[::2], (200, body_for(10)))
        self.assertGreaterEqual(time.monotonic() - t0, 0.029, "time to first byte")
        p.set_config({"ttfb_ms": 0, "bandwidth_mbps": 10})
        t0 = time.monotonic()
        c.send(b"GET /b/r HTTP/1.1\r\nHost: h\r\nX-Want: %d\r\n\r\n" % size)
        self.assertEqual(c.response()[::2], (200, body_for(size)))
        self.assertGreaterEqual(time.monotonic() - t0, 0.19, "2 MB at 10 MB/s")
        self.assertGreaterEqual(p.stats()["paced_ttfb"], 1)
        with self.assertRaises(AssertionError):
            p.config(bandwidth_mbps=-1)
        c.close()


class WriteFaultTests(unittest.TestCase):
    def test_multipart_under_put_post_faults_completes(self):
        """The machinery for the write path: boto3 (retrying) against faults."""
        rules = [
            # parts: the upstream stores the part, the client hears a failure
            # (the part ids are random, so budgets, not rates, fix the count)
            {"methods": ["PUT"], "path_regex": "partNumber=", "rates": {"500": 0.5, "reset": 0.5},
             "forward_errors": True, "max_faults": 3},
            {"methods": ["POST"], "rates": {"503": 1.0}, "max_faults": 2},
        ]
        p = W.proxy(W.moto.endpoint, "--seed", "5")
        p.set_config({"rules": rules})
        s3 = W.moto.client(endpoint=p.endpoint, retries={"max_attempts": 12, "mode": "standard"})
        b = W.moto.bucket
        rnd = random.Random(9)
        parts = [rnd.randbytes(5 << 20), rnd.randbytes(5 << 20), rnd.randbytes(777)]
        up = s3.create_multipart_upload(Bucket=b, Key="wf/multi")["UploadId"]
        etags = [s3.upload_part(Bucket=b, Key="wf/multi", UploadId=up, PartNumber=i + 1, Body=d)["ETag"]
                 for i, d in enumerate(parts)]
        s3.complete_multipart_upload(Bucket=b, Key="wf/multi", UploadId=up, MultipartUpload={
            "Parts": [{"ETag": e, "PartNumber": i + 1} for i, e in enumerate(etags)]})
        p.off()
        direct = W.moto.client()
        self.assertEqual(direct.get_object(Bucket=b, Key="wf/multi")["Body"].read(), b"".join(parts))
        self.assertEqual(direct.list_multipart_uploads(Bucket=b, Prefix="wf/").get("Uploads", []), [])
        st = p.stats()
        print("\n    multipart under faults: %s" % json.dumps(st["faults_by_method"]))
        self.assertEqual(fault_count(st, method="PUT"), 3)
        self.assertEqual(fault_count(st, "503", "POST"), 2)


class HostileRewriteTests(unittest.TestCase):
    """The hostile kinds' rewrites (pure functions; test_faults.py runs
    them through a mount)."""
    LIST = ("/b/?list-type=2&prefix=p%2Fd%2F&delimiter=%2F", b"<ListBucketResult><Contents>"
            b"<Key>p/d/a</Key><Size>5</Size></Contents><IsTruncated>false</IsTruncated>"
            b"</ListBucketResult>")

    def test_foreign_list_adds_names_outside_the_prefix(self):
        _, body, note = fp.hostile_rewrite("foreign_list", "GET", self.LIST[0], 200, [], self.LIST[1])
        for k in (b"<Key>p/~/evil-foreign</Key>", b"<Key>p/z</Key>", b"<Key>p/d/sub/deep</Key>",
                  b"<Prefix>p/~/evil-dir/</Prefix>", b"<Prefix>p/d/m/n/</Prefix>",
                  b"<Prefix>p/d/q</Prefix>"):
            self.assertIn(k, body)
        self.assertEqual(note, "6 foreign names")
        self.assertIsNone(fp.hostile_rewrite("foreign_list", "GET", "/b/k", 200, [], b"x"))

    def test_loop_token_alternates(self):
        _, body, _ = fp.hostile_rewrite("loop_token", "GET", self.LIST[0], 200, [], self.LIST[1])
        self.assertIn(b"<IsTruncated>true</IsTruncated><NextContinuationToken>LOOP-A<", body)
        self.assertNotIn(b"false", body)
        _, body, _ = fp.hostile_rewrite("loop_token", "GET", self.LIST[0] + "&continuation-token=LOOP-A",
                                        200, [], self.LIST[1])
        self.assertIn(b"<NextContinuationToken>LOOP-B<", body)

    def test_huge_size_and_bad_range(self):
        _, body, _ = fp.hostile_rewrite("huge_size", "GET", self.LIST[0], 200, [], self.LIST[1])
        self.assertIn(b"<Size>18446744073709551615</Size>", body)
        h, _, _ = fp.hostile_rewrite("huge_size", "HEAD", "/b/k", 200, [("etag", '"e"')], b"")
        self.assertEqual(fp.hget(h, "content-length"), "18446744073709551615")
        cr = [("content-range", "bytes 0-9/100")]
        h, _, _ = fp.hostile_rewrite("huge_size", "GET", "/b/k", 206, cr, b"0123456789")
        self.assertEqual(fp.hget(h, "content-range"), "bytes 0-9/18446744073709551615")
        h, body, _ = fp.hostile_rewrite("bad_range", "GET", "/b/k", 206, cr, b"0123456789")
        self.assertEqual((fp.hget(h, "content-range"), body), ("bytes 1-10/101", b"0123456789"))
        self.assertIsNone(fp.hostile_rewrite("bad_range", "GET", "/b/k", 200, [], b"x"))


if __name__ == "__main__":
    unittest.main(verbosity=2)
