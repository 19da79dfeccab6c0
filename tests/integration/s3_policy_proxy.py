"""s3_policy_proxy.py - a loopback S3 proxy that plays a bucket policy or
lies about versions, for the near isolation tests (test_near.py).

moto does not enforce bucket policies, so this proxy stands in front of it:

  - deny(method, path, access_key) -> bool: answer 403 AccessDenied instead
    of forwarding (the access key is read from the SigV4 Authorization
    header), as a policy that lets a user LIST but not GET or HEAD would;
  - etags {real: shown}: every ETag the server sends (headers, listings)
    equal to `real` is shown as `shown`, and an If-Match of `shown` is sent
    on as `real`: a hostile far that reports another source's version for
    its own object.

Requests are forwarded one connection each, with their headers and body
(Content-Length framing only: what tierfs sends for the reads these tests
make); replies are read whole and relayed with their length.  Only the
Python 3 standard library is used.
"""
import http.client
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "proxy-connection"}
DENIED = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>AccessDenied</Code>'
          b'<Message>Access Denied</Message></Error>')


def access_key(headers):
    m = re.search(r"Credential=([^/,\s]+)/", headers.get("Authorization", ""))
    return m.group(1) if m else ""


class PolicyProxy:
    def __init__(self, upstream, deny=None, etags=None):
        u = urlsplit(upstream)
        self.host, self.port = u.hostname, u.port
        self.deny = deny or (lambda method, path, key: False)
        self.etags = dict(etags or {})
        self.denied = 0
        self.lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, fmt, *args):  # noqa: A003 - quiet
                pass

            def handle_one(self):
                proxy.forward(self)

            do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = handle_one  # noqa: N815

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.endpoint = "http://127.0.0.1:%d" % self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def _show(self, text):
        for real, shown in self.etags.items():
            text = text.replace(real, shown)
        return text

    def forward(self, h):
        n = int(h.headers.get("Content-Length", "0") or "0")
        body = h.rfile.read(n) if n else None
        path = urlsplit(h.path).path
        if self.deny(h.command, path, access_key(h.headers)):
            with self.lock:
                self.denied += 1
            self.reply(h, 403, [("Content-Type", "application/xml")], DENIED)
            return
        headers = {}
        for k, v in h.headers.items():
            if k.lower() in HOP:
                continue
            if k.lower() == "if-match":
                for real, shown in self.etags.items():
                    v = v.replace(shown, real)
            headers[k] = v
        if body is not None:
            headers["Content-Length"] = str(len(body))
        c = http.client.HTTPConnection(self.host, self.port, timeout=60)
        try:
            c.request(h.command, h.path, body=body, headers=headers)
            r = c.getresponse()
            data = r.read()
            out = [(k, self._show(v) if k.lower() == "etag" else v)
                   for k, v in r.getheaders() if k.lower() not in HOP]
            if b"<ETag>" in data:
                data = self._show(data.decode()).encode()
            length = r.getheader("Content-Length") if h.command == "HEAD" else None
            self.reply(h, r.status, out, data, length)
        finally:
            c.close()

    @staticmethod
    def reply(h, status, headers, data, length=None):
        h.send_response_only(status)
        for k, v in headers:
            h.send_header(k, v)
        h.send_header("Content-Length", length if length is not None else str(len(data)))
        h.end_headers()
        if h.command != "HEAD":
            h.wfile.write(data)
