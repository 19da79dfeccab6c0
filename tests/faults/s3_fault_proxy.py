#!/usr/bin/env python3
"""s3_fault_proxy.py - a loopback HTTP/1.1 proxy that injects S3 faults.

    s3_fault_proxy.py --upstream http://127.0.0.1:PORT [options]

Sits between a client (tierfs, boto3, curl) and an S3 server (moto_server,
Ceph RGW) on 127.0.0.1.  Requests are forwarded byte for byte -- request
line, every header (Host, Authorization, x-amz-*) and the body, whatever its
framing (Content-Length, chunked, Expect: 100-continue) -- so SigV4
signatures still verify.  Responses are relayed as they come, except that
"Connection: close" is dropped from responses of known length so clients
keep their connections (as real S3 lets them; --no-client-keepalive turns
that off).  A fresh upstream connection is opened whenever the server closed
the last one.

On a fraction of the requests it injects a fault instead (see README.md):

  500        an S3 InternalError reply (XML body), request not forwarded
  503        an S3 SlowDown reply (XML body), request not forwarded
  reset      forwarded; the reply is cut with a TCP RST in its body
  truncate   forwarded; the reply is cut with a clean FIN in its body, so
             the body is shorter than its Content-Length
  latency    forwarded; the reply is delayed before its headers or mid-body
  stall      forwarded; part of the reply is sent, then nothing more

reset, truncate and stall cut a reply without a body (HEAD, most PUT
replies) inside its header block, and any reply there with cut_where.
  blackhole  the request is read, never forwarded, nothing is ever answered

Hostile kinds (a lying server; forwarded, the reply rewritten, see README.md):

  foreign_list  ListObjectsV2 replies gain keys and common prefixes outside
                the prefix asked for
  loop_token    ListObjectsV2 replies say IsTruncated with tokens that loop
  huge_size     sizes beyond 2^63-1 (<Size>, HEAD Content-Length, the total
                of a 206's Content-Range)
  bad_range     a 206's Content-Range names another range than asked for

Faults are decided from --seed, the request (method, target, Range) and the
number of times that request was seen before, so a run is reproducible even
when requests race each other.  Rates can be changed while running through
the control endpoint or by rewriting the --config file.

Only the Python 3 standard library is used.
"""
import argparse
import copy
import hashlib
import json
import os
import random
import re
import select
import signal
import socket
import struct
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

KINDS = ("500", "503", "reset", "truncate", "latency", "stall", "blackhole",
         "foreign_list", "loop_token", "huge_size", "bad_range")
HOSTILE = ("foreign_list", "loop_token", "huge_size", "bad_range")
HUGE = "18446744073709551615"  # 2^64-1: beyond any off_t
CHUNK = 64 * 1024
MAX_HEAD = 64 * 1024
EXPECT_WAIT = 1.0          # seconds to wait for the upstream's 100 Continue
CLIENT_IDLE = 600.0        # an idle client connection is closed after this
UPSTREAM_TIMEOUT = 120.0   # a silent upstream is given up after this

DEFAULTS = {
    "seed": None,                 # None: chosen at start and reported
    "rates": {},                  # kind -> probability; the sum must be <= 1
    "methods": [],                # [] = every method
    "path_regex": "",             # "" = every target (path + query)
    "rules": [],                  # [{methods, path_regex, rates, ...}], first match wins
    "latency_ms": [200, 800],     # a latency fault sleeps uniform(lo, hi) ms
    "latency_where": "any",       # headers | body | any
    "cut_where": "body",          # reset/truncate/stall: body | headers | any
    "stall_s": 300.0,             # stall/blackhole hold the connection at most this long
    "forward_errors": False,      # 500/503: forward the request first, then discard its reply
    "max_faults": 0,              # at most this many faults under this config (0 = no limit)
    "client_keepalive": True,     # drop "Connection: close" from replies of known length
    # realistic mode (not faults: every reply, counted in paced_*):
    "ttfb_ms": 0.0,               # a reply's headers leave no sooner than this after its request
    "bandwidth_mbps": 0.0,        # a reply body flows at most this fast per connection (MB/s); 0: no cap
}
REALISTIC = {"ttfb_ms": 30.0, "bandwidth_mbps": 90.0}  # one AWS S3 GET stream, roughly
RULE_KEYS = ("methods", "path_regex", "rates", "latency_ms", "latency_where", "cut_where", "stall_s",
             "forward_errors", "max_faults")

ERRORS = {
    "500": (500, "Internal Server Error", "InternalError",
            "We encountered an internal error. Please try again."),
    "503": (503, "Slow Down", "SlowDown", "Please reduce your request rate."),
}


class ConfigError(ValueError):
    pass


class ProtocolError(Exception):
    pass


# ---------------------------------------------------------------- config

def _check_rates(rates, where):
    if not isinstance(rates, dict):
        raise ConfigError("%s: rates must be an object" % where)
    out = {}
    for k, v in rates.items():
        k = str(k)
        if k not in KINDS:
            raise ConfigError("%s: unknown fault kind %r (kinds: %s)" % (where, k, ", ".join(KINDS)))
        try:
            v = float(v)
        except (TypeError, ValueError):
            raise ConfigError("%s: rate of %s is not a number" % (where, k)) from None
        if not 0.0 <= v <= 1.0:
            raise ConfigError("%s: rate of %s must be in [0, 1]" % (where, k))
        out[k] = v
    if sum(out.values()) > 1.0 + 1e-9:
        raise ConfigError("%s: the rates add up to more than 1" % where)
    return out


def _check_rule(r, where):
    out = {}
    for k, v in r.items():
        if k not in RULE_KEYS:
            raise ConfigError("%s: unknown key %r" % (where, k))
        if k == "rates":
            v = _check_rates(v, where)
        elif k == "methods":
            if isinstance(v, str):
                v = [m for m in v.split(",") if m]
            if not isinstance(v, list) or not all(isinstance(m, str) for m in v):
                raise ConfigError("%s: methods must be a list of strings" % where)
            v = [m.strip().upper() for m in v]
        elif k == "path_regex":
            if not isinstance(v, str):
                raise ConfigError("%s: path_regex must be a string" % where)
            try:
                re.compile(v)
            except re.error as e:
                raise ConfigError("%s: path_regex: %s" % (where, e)) from None
        elif k == "latency_ms":
            if isinstance(v, (int, float)):
                v = [v, v]
            if (not isinstance(v, list) or len(v) != 2 or
                    not all(isinstance(x, (int, float)) for x in v) or not 0 <= v[0] <= v[1]):
                raise ConfigError("%s: latency_ms must be [lo, hi] with 0 <= lo <= hi" % where)
            v = [float(v[0]), float(v[1])]
        elif k in ("latency_where", "cut_where"):
            if v not in ("headers", "body", "any"):
                raise ConfigError("%s: %s must be headers, body or any" % (where, k))
        elif k == "stall_s":
            if not isinstance(v, (int, float)) or v < 0:
                raise ConfigError("%s: stall_s must be a number >= 0" % where)
            v = float(v)
        elif k == "forward_errors":
            if not isinstance(v, bool):
                raise ConfigError("%s: forward_errors must be true or false" % where)
        elif k == "max_faults":
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise ConfigError("%s: max_faults must be an integer >= 0" % where)
        out[k] = v
    return out


def validate(cfg):
    """Return a checked, normalised copy of a full config dict."""
    if not isinstance(cfg, dict):
        raise ConfigError("the config must be a JSON object")
    out = {}
    for k in cfg:
        if k not in DEFAULTS:
            raise ConfigError("unknown key %r" % k)
    merged = copy.deepcopy(DEFAULTS)
    merged.update(cfg)
    top = _check_rule({k: merged[k] for k in RULE_KEYS}, "config")
    out.update(top)
    if merged["seed"] is not None and not isinstance(merged["seed"], (int, str)):
        raise ConfigError("seed must be an integer or a string")
    out["seed"] = merged["seed"]
    if not isinstance(merged["rules"], list):
        raise ConfigError("rules must be a list")
    out["rules"] = []
    for i, r in enumerate(merged["rules"]):
        if not isinstance(r, dict):
            raise ConfigError("rules[%d] must be an object" % i)
        out["rules"].append(_check_rule(r, "rules[%d]" % i))
    if not isinstance(merged["client_keepalive"], bool):
        raise ConfigError("client_keepalive must be true or false")
    out["client_keepalive"] = merged["client_keepalive"]
    for k in ("ttfb_ms", "bandwidth_mbps"):
        v = merged[k]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v < 1e9:
            raise ConfigError("%s must be a number >= 0" % k)
        out[k] = float(v)
    return out


# ---------------------------------------------------------------- I/O helpers

class Reader:
    """Buffered reads from a socket that keep the raw bytes."""

    def __init__(self, sock):
        self.sock = sock
        self.buf = bytearray()

    def _fill(self):
        data = self.sock.recv(CHUNK)
        if not data:
            raise EOFError
        self.buf += data

    def pending(self):
        return len(self.buf) > 0

    def readline(self, limit=MAX_HEAD):
        while True:
            i = self.buf.find(b"\n")
            if i >= 0:
                line = bytes(self.buf[:i + 1])
                del self.buf[:i + 1]
                return line
            if len(self.buf) > limit:
                raise ProtocolError("line too long")
            self._fill()

    def read_head(self, eof_ok=False):
        """Bytes up to and including the blank line that ends a header block."""
        out = bytearray()
        while True:
            try:
                line = self.readline()
            except EOFError:
                if eof_ok and not out and not self.buf:
                    return None
                raise
            if not out and line in (b"\r\n", b"\n"):
                continue  # stray CRLF between messages (RFC 9112 2.2)
            out += line
            if len(out) > MAX_HEAD:
                raise ProtocolError("header block too large")
            if line in (b"\r\n", b"\n"):
                return bytes(out)

    def read_some(self, n, eof_ok=False):
        if not self.buf:
            try:
                self._fill()
            except EOFError:
                if eof_ok:
                    return b""
                raise
        piece = bytes(self.buf[:n])
        del self.buf[:n]
        return piece


def parse_head(raw):
    lines = raw.split(b"\n")
    start = lines[0].rstrip(b"\r").decode("latin-1")
    headers = []
    for line in lines[1:]:
        line = line.rstrip(b"\r")
        if not line:
            continue
        if b":" not in line:
            raise ProtocolError("malformed header line %r" % line[:80])
        k, v = line.split(b":", 1)
        headers.append((k.strip().decode("latin-1").lower(), v.strip().decode("latin-1")))
    return start, headers


def hget(headers, name, default=None):
    for k, v in headers:
        if k == name:
            return v
    return default


def htokens(headers, name):
    out = set()
    for k, v in headers:
        if k == name:
            out.update(t.strip().lower() for t in v.split(","))
    return out


def body_framing(headers):
    if "chunked" in htokens(headers, "transfer-encoding"):
        return ("chunked", None)
    cl = hget(headers, "content-length")
    if cl is not None:
        try:
            n = int(cl)
        except ValueError:
            raise ProtocolError("bad Content-Length %r" % cl) from None
        if n < 0:
            raise ProtocolError("bad Content-Length %r" % cl)
        return ("length", n)
    return None


def request_framing(headers):
    return body_framing(headers) or ("length", 0)


def response_framing(method, status, headers):
    if method == "HEAD" or 100 <= status < 200 or status in (204, 304):
        return ("length", 0)
    return body_framing(headers) or ("close", None)


def iter_body(rd, framing):
    """Yield the raw bytes of a message body, framing included."""
    kind, n = framing
    if kind == "length":
        left = n
        while left:
            piece = rd.read_some(min(left, CHUNK))
            left -= len(piece)
            yield piece
    elif kind == "chunked":
        while True:
            line = rd.readline()
            yield line
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise ProtocolError("bad chunk size line %r" % line[:80]) from None
            if size == 0:
                while True:  # trailer fields, then the blank line
                    t = rd.readline()
                    yield t
                    if t in (b"\r\n", b"\n"):
                        return
            left = size + 2  # the data and its CRLF
            while left:
                piece = rd.read_some(min(left, CHUNK))
                left -= len(piece)
                yield piece
    else:  # until the connection closes
        while True:
            piece = rd.read_some(CHUNK, eof_ok=True)
            if not piece:
                return
            yield piece


def strip_connection_close(head):
    lines = head.split(b"\n")
    keep = [ln for ln in lines
            if not re.match(rb"(?i)^connection[ \t]*:[ \t]*close[ \t]*\r?$", ln)]
    return b"\n".join(keep)


def reset_close(sock):
    """Close with a TCP RST instead of a FIN."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    try:
        sock.close()
    except OSError:
        pass


def fin_close(sock):
    try:
        sock.shutdown(socket.SHUT_WR)
    except OSError:
        pass
    try:
        sock.close()
    except OSError:
        pass


class Closed(Exception):
    """The client connection was ended on purpose (a fault)."""


# ---------------------------------------------------------------- the proxy

class Fault:
    def __init__(self, kind, rnd, rule):
        self.kind = kind
        self.rnd = rnd
        self.rule = rule

    def latency_s(self):
        lo, hi = self.rule["latency_ms"]
        return self.rnd.uniform(lo, hi) / 1000.0


class Proxy:
    def __init__(self, upstream, base_cfg, config_file=None, stats_file=None, log=None,
                 verbose=False):
        u = urlsplit(upstream)
        if u.scheme != "http" or not u.hostname or (u.path not in ("", "/")):
            raise SystemExit("s3_fault_proxy: --upstream must be http://HOST:PORT")
        self.up_addr = (u.hostname, u.port or 80)
        self.base_cfg = base_cfg          # defaults + command line
        self.lock = threading.Lock()
        self.file_lock = threading.Lock()    # the stats file
        self.reload_lock = threading.Lock()  # the config file
        self.cfg = validate(base_cfg)
        if self.cfg["seed"] is None:
            self.cfg["seed"] = random.SystemRandom().randrange(1 << 31)
            self.base_cfg = dict(base_cfg, seed=self.cfg["seed"])
        self.generation = 0
        self.config_file = config_file
        self.config_sig = None
        self.config_checked = 0.0
        self.stats_file = stats_file
        self.log_fp = log or sys.stderr
        self.verbose = verbose
        self.seen = {}
        self.loop_pages = {}  # prefix -> the last page of a loop_token listing
        self.config_faults = 0  # faults injected under the current config
        self.rule_faults = {}    # ... by each rule (index; len(rules) = the top level)
        self.stopping = threading.Event()
        self.dirty = threading.Event()
        self.t0 = time.monotonic()
        self.reset_stats()
        if config_file:
            self.reload_config_file(force=True)

    # -- config

    def set_config(self, cfg, why):
        cfg = validate(cfg)
        if cfg["seed"] is None:
            cfg["seed"] = self.cfg["seed"]
        with self.lock:
            if cfg["seed"] != self.cfg["seed"]:
                self.seen = {}
            self.cfg = cfg
            self.generation += 1
            self.config_faults = 0
            self.rule_faults = {}
        self.log("config %d (%s): %s" % (self.generation, why, json.dumps(self.describe(cfg))))
        self.dirty.set()
        return cfg

    @staticmethod
    def describe(cfg):
        d = {k: cfg[k] for k in ("seed", "rates", "methods", "path_regex") if cfg.get(k)}
        if cfg.get("rules"):
            d["rules"] = cfg["rules"]
        return d

    def merge_config(self, patch, why):
        with self.lock:
            cur = copy.deepcopy(self.cfg)
        if not isinstance(patch, dict):
            raise ConfigError("the config must be a JSON object")
        cur.update(patch)
        return self.set_config(cur, why)

    def reload_config_file(self, force=False):
        if not self.config_file:
            return
        if not self.reload_lock.acquire(blocking=force):
            return  # another thread is checking it right now
        try:
            self._reload_config_file(force)
        finally:
            self.reload_lock.release()

    def _reload_config_file(self, force):
        now = time.monotonic()
        if not force and now - self.config_checked < 0.05:
            return
        self.config_checked = now
        try:
            st = os.stat(self.config_file)
            sig = (st.st_mtime_ns, st.st_size, st.st_ino)
        except OSError:
            sig = None
        if sig == self.config_sig and not force:
            return
        self.config_sig = sig
        if sig is None:
            if force:
                raise SystemExit("s3_fault_proxy: cannot read --config %s" % self.config_file)
            return
        try:
            with open(self.config_file) as f:
                text = f.read()
            patch = json.loads(text) if text.strip() else {}
            cfg = dict(self.base_cfg)
            if not isinstance(patch, dict):
                raise ConfigError("the config must be a JSON object")
            cfg.update(patch)
            self.set_config(cfg, "file " + self.config_file)
        except (OSError, ValueError) as e:
            if force:
                raise SystemExit("s3_fault_proxy: --config %s: %s" % (self.config_file, e))
            self.log("config file %s ignored: %s (keeping the previous config)" % (self.config_file, e))

    # -- stats

    def reset_stats(self):
        with self.lock:
            self.stats = {
                "requests": 0, "requests_by_method": {}, "forwarded": 0,
                "faults": {k: 0 for k in KINDS}, "faults_total": 0, "faults_by_method": {},
                "connections": 0, "active_connections": 0, "holding": 0,
                "upstream_errors": 0, "client_errors": 0, "paced_ttfb": 0, "recent": [],
            }
        self.dirty.set()

    def count(self, key, n=1):
        with self.lock:
            self.stats[key] += n
        self.dirty.set()

    def count_request(self, method):
        with self.lock:
            self.stats["requests"] += 1
            d = self.stats["requests_by_method"]
            d[method] = d.get(method, 0) + 1
        self.dirty.set()

    def count_fault(self, kind, method, target, note=""):
        with self.lock:
            s = self.stats
            s["faults"][kind] += 1
            s["faults_total"] += 1
            m = s["faults_by_method"].setdefault(method, {})
            m[kind] = m.get(kind, 0) + 1
            s["recent"].append({"t": round(time.monotonic() - self.t0, 3), "kind": kind,
                                "method": method, "target": target[:200], "note": note})
            del s["recent"][:-50]
            n = s["faults"][kind]
        self.dirty.set()
        self.log("fault %s #%d: %s %s%s" % (kind, n, method, target[:200], " (" + note + ")" if note else ""))

    def snapshot(self):
        with self.lock:
            s = copy.deepcopy(self.stats)
            s["config_generation"] = self.generation
            s["seed"] = self.cfg["seed"]
        s["uptime_s"] = round(time.monotonic() - self.t0, 3)
        return s

    def write_stats_file(self):
        if not self.stats_file:
            return
        with self.file_lock:
            tmp = "%s.tmp.%d" % (self.stats_file, os.getpid())
            with open(tmp, "w") as f:
                json.dump(self.snapshot(), f, indent=1, sort_keys=True)
                f.write("\n")
            os.replace(tmp, self.stats_file)

    def stats_writer(self):
        while not self.stopping.is_set():
            if self.dirty.wait(0.5):
                self.dirty.clear()
                try:
                    self.write_stats_file()
                except OSError as e:
                    self.log("stats file: %s" % e)
                self.stopping.wait(0.1)

    def log(self, msg):
        t = time.time()
        line = "s3_fault_proxy %s.%03d %s\n" % (time.strftime("%H:%M:%S", time.localtime(t)),
                                                int(t * 1000) % 1000, msg)
        try:
            self.log_fp.write(line)
            self.log_fp.flush()
        except (OSError, ValueError):
            pass

    # -- the decision

    def decide(self, method, target, headers):
        self.reload_config_file()
        with self.lock:
            cfg = self.cfg
        rule = None
        for ri, r in enumerate(cfg["rules"] + [{k: cfg[k] for k in RULE_KEYS}]):
            ms = r.get("methods") or []
            if ms and method not in ms:
                continue
            pr = r.get("path_regex") or ""
            if pr and not re.search(pr, target):
                continue
            rule = r
            break
        if rule is None:
            return None
        full = {k: rule.get(k, cfg[k]) for k in RULE_KEYS}
        rates = full["rates"]
        if not any(rates.values()):
            return None
        ident = "%s %s %s" % (method, target, hget(headers, "range", ""))
        with self.lock:
            n = self.seen.get(ident, 0)
            self.seen[ident] = n + 1
            budget_left = ((cfg["max_faults"] == 0 or self.config_faults < cfg["max_faults"]) and
                           (rule.get("max_faults", 0) == 0 or
                            self.rule_faults.get(ri, 0) < rule["max_faults"]))
        h = hashlib.blake2b(("%s\0%s\0%d" % (cfg["seed"], ident, n)).encode(), digest_size=16).digest()
        u = int.from_bytes(h[:8], "big") / float(1 << 64)
        acc = 0.0
        for kind in KINDS:
            acc += rates.get(kind, 0.0)
            if u < acc:
                if not budget_left:
                    return None
                with self.lock:
                    self.config_faults += 1
                    self.rule_faults[ri] = self.rule_faults.get(ri, 0) + 1
                return Fault(kind, random.Random(h[8:]), full)
        return None

    # -- serving

    def serve(self, listener):
        threading.Thread(target=self.stats_writer, daemon=True, name="stats").start()
        while not self.stopping.is_set():
            try:
                sock, _ = listener.accept()
            except OSError:
                if self.stopping.is_set():
                    break
                continue
            self.count("connections")
            threading.Thread(target=self.client_thread, args=(sock,), daemon=True).start()

    def client_thread(self, sock):
        with self.lock:
            self.stats["active_connections"] += 1
        try:
            Session(self, sock).run()
        finally:
            with self.lock:
                self.stats["active_connections"] -= 1
            self.dirty.set()


class Upstream:
    def __init__(self, addr):
        self.sock = socket.create_connection(addr, timeout=10)
        self.sock.settimeout(UPSTREAM_TIMEOUT)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.rd = Reader(self.sock)

    def alive(self):
        """False once the server closed this idle connection."""
        if self.rd.pending():
            return False  # unsolicited bytes: do not trust it
        try:
            r, _, _ = select.select([self.sock], [], [], 0)
            if r:
                return False  # EOF (or junk) on an idle connection
        except (OSError, ValueError):
            return False
        return True

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


class Session:
    """One client connection, any number of requests."""

    def __init__(self, proxy, sock):
        self.p = proxy
        self.sock = sock
        self.sock.settimeout(CLIENT_IDLE)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.rd = Reader(sock)
        self.up = None
        self.closed = False
        self.t_request = None  # when the current request reached the upstream
        self.t_body, self.body_sent = time.monotonic(), 0

    def run(self):
        try:
            while not self.p.stopping.is_set():
                if not self.one_request():
                    break
        except Closed:
            pass
        except (OSError, EOFError) as e:
            if self.p.verbose:
                self.p.log("connection ended: %r" % e)
        except ProtocolError as e:
            self.p.count("client_errors")
            self.p.log("bad request from client: %s" % e)
            self.send_plain(400, "Bad Request", str(e))
        finally:
            self.drop_upstream()
            if not self.closed:
                try:
                    self.sock.close()
                except OSError:
                    pass

    # -- helpers

    def drop_upstream(self):
        if self.up:
            self.up.close()
            self.up = None

    def send(self, data):
        self.sock.sendall(data)

    def wait_ttfb(self):
        """Realistic mode: hold the reply's headers until ttfb_ms after the
        request was forwarded (the upstream's own time counts)."""
        ttfb = self.p.cfg["ttfb_ms"] / 1000.0
        if ttfb > 0 and self.t_request is not None:
            d = self.t_request + ttfb - time.monotonic()
            if d > 0:
                self.p.count("paced_ttfb")
                time.sleep(d)
        self.t_body, self.body_sent = time.monotonic(), 0

    def send_body(self, piece):
        """Send a piece of a reply body, no faster than bandwidth_mbps."""
        self.send(piece)
        bw = self.p.cfg["bandwidth_mbps"] * 1e6
        if bw > 0 and piece:
            self.body_sent += len(piece)
            d = self.t_body + self.body_sent / bw - time.monotonic()
            if d > 0:
                time.sleep(d)

    def send_plain(self, code, reason, text):
        body = (text + "\n").encode()
        try:
            self.send(("HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n"
                       "Connection: close\r\n\r\n" % (code, reason, len(body))).encode() + body)
        except OSError:
            pass

    def hold(self, limit):
        """Send nothing; swallow what the client sends until it gives up."""
        with self.p.lock:
            self.p.stats["holding"] += 1
        try:
            deadline = time.monotonic() + limit
            self.sock.settimeout(0.25)
            while not self.p.stopping.is_set() and time.monotonic() < deadline:
                try:
                    if not self.sock.recv(CHUNK):
                        break
                except socket.timeout:
                    continue
                except OSError:
                    break
        finally:
            with self.p.lock:
                self.p.stats["holding"] -= 1
        fin_close(self.sock)
        self.closed = True
        raise Closed

    def graceful_close(self):
        """Close after a final reply without making the kernel send a RST
        for request bytes we never read (which could destroy the reply)."""
        try:
            self.sock.shutdown(socket.SHUT_WR)
            self.sock.settimeout(1.0)
            deadline = time.monotonic() + 2.0
            while time.monotonic() < deadline and self.sock.recv(CHUNK):
                pass
        except OSError:
            pass
        try:
            self.sock.close()
        except OSError:
            pass
        self.closed = True

    def end(self, kind):
        """Apply a terminal fault to the client connection."""
        self.drop_upstream()
        if kind == "reset":
            reset_close(self.sock)
        elif kind == "truncate":
            fin_close(self.sock)
        self.closed = True
        raise Closed

    def error_reply(self, fault, method, target, close):
        code, reason, s3code, msg = ERRORS[fault.kind]
        rid = "FAULT%011X" % fault.rnd.randrange(1 << 44)
        resource = target.split("?", 1)[0]
        body = ('<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>%s</Code><Message>%s</Message>'
                '<Resource>%s</Resource><RequestId>%s</RequestId></Error>' % (
                    s3code, msg, _xml_escape(resource), rid)).encode()
        head = ["HTTP/1.1 %d %s" % (code, reason),
                "x-amz-request-id: " + rid,
                "Date: " + time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime()),
                "Server: AmazonS3",
                "Content-Type: application/xml",
                "Content-Length: %d" % (0 if method == "HEAD" else len(body))]
        if close:
            head.append("Connection: close")
        data = ("\r\n".join(head) + "\r\n\r\n").encode()
        if method != "HEAD":
            data += body
        self.send(data)

    def discard_body(self, framing):
        for _ in iter_body(self.rd, framing):
            pass

    # -- one exchange

    def one_request(self):
        """Serve one request; False when the client connection should end."""
        self.sock.settimeout(CLIENT_IDLE)
        try:
            head = self.rd.read_head(eof_ok=True)
        except socket.timeout:
            return False
        if head is None:
            return False
        start, headers = parse_head(head)
        parts = start.split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            raise ProtocolError("bad request line %r" % start[:100])
        method, target, version = parts
        framing = request_framing(headers)
        has_body = framing != ("length", 0)
        expect = "100-continue" in htokens(headers, "expect")
        conn = htokens(headers, "connection")
        client_close = "close" in conn or (version == "HTTP/1.0" and "keep-alive" not in conn)
        p = self.p
        p.count_request(method)
        if p.verbose:
            p.log("%s %s" % (method, target[:200]))
        fault = p.decide(method, target, headers)
        kind = fault.kind if fault else None

        if kind in ERRORS and not fault.rule["forward_errors"]:
            close = client_close
            if has_body and expect:
                close = True  # the body was never sent: this connection is done
            elif has_body:
                self.discard_body(framing)
            p.count_fault(kind, method, target)
            self.error_reply(fault, method, target, close)
            if close:
                self.graceful_close()
            return not close
        if kind == "loop_token" and _query(target).get("continuation-token", "").startswith("LOOP-"):
            # a token of ours the upstream does not know: answer it here
            self.loop_reply(method, target, client_close)
            return not client_close
        if kind == "blackhole":
            if has_body and not expect:
                self.sock.settimeout(5.0)
                try:
                    self.discard_body(framing)
                except (socket.timeout, OSError, EOFError):
                    pass
            p.count_fault(kind, method, target)
            self.hold(fault.rule["stall_s"])

        # forward the request
        if self.up is not None and not self.up.alive():
            self.drop_upstream()
        if self.up is None:
            try:
                self.up = Upstream(p.up_addr)
            except OSError as e:
                p.count("upstream_errors")
                p.log("upstream %s:%d: %s" % (p.up_addr[0], p.up_addr[1], e))
                self.send_plain(502, "Bad Gateway", "s3_fault_proxy: upstream: %s" % e)
                return False
        up = self.up
        abandon_up = False
        try:
            up.sock.sendall(head)
            resp = None
            if has_body and expect:
                r, _, _ = select.select([up.sock], [], [], 0 if up.rd.pending() else EXPECT_WAIT)
                if r or up.rd.pending():
                    resp = self.read_response_head(method, relay_interim=True, stop_at_100=True)
            if has_body and (resp is None or resp[1] == 100):
                for piece in iter_body(self.rd, framing):
                    up.sock.sendall(piece)
                resp = None
            self.t_request = time.monotonic()
            if resp is None:
                resp = self.read_response_head(method, relay_interim=True)
            elif has_body:
                # a final answer before the body was sent: the client will
                # not send it, so neither connection can carry on
                client_close = True
                abandon_up = True
        except (OSError, EOFError, ProtocolError) as e:
            p.count("upstream_errors")
            p.log("upstream exchange failed for %s %s: %r" % (method, target[:200], e))
            self.drop_upstream()
            self.send_plain(502, "Bad Gateway", "s3_fault_proxy: upstream: %r" % e)
            return False
        p.count("forwarded")
        rhead, status, rheaders = resp
        rframing = response_framing(method, status, rheaders)
        up_close = abandon_up or "close" in htokens(rheaders, "connection") or rframing[0] == "close"

        if kind in ERRORS:  # forward_errors: the upstream did the work, the client hears an error
            for _ in iter_body(up.rd, rframing):
                pass
            if up_close:
                self.drop_upstream()
            p.count_fault(kind, method, target, "after forwarding (upstream said %d)" % status)
            self.error_reply(fault, method, target, client_close)
            return not client_close

        keep = not client_close
        if p.cfg["client_keepalive"] and rframing[0] != "close":
            rhead = strip_connection_close(rhead)
        elif up_close:
            keep = False
        if kind in HOSTILE:
            self.relay_hostile(method, target, rhead, status, rheaders, rframing, fault)
        else:
            self.relay(method, target, rhead, rframing, fault)
        if up_close:
            self.drop_upstream()
        return keep

    def read_response_head(self, method, relay_interim, stop_at_100=False):
        """The next response head from upstream, relaying 1xx heads."""
        rd = self.up.rd
        while True:
            rhead = rd.read_head()
            start, rheaders = parse_head(rhead)
            parts = start.split(" ", 2)
            if len(parts) < 2 or not parts[0].startswith("HTTP/1."):
                raise ProtocolError("bad status line %r" % start[:100])
            try:
                status = int(parts[1])
            except ValueError:
                raise ProtocolError("bad status line %r" % start[:100]) from None
            if 100 <= status < 200 and status != 101:
                if relay_interim:
                    self.send(rhead)
                if status == 100 and stop_at_100:
                    return (rhead, status, rheaders)
                continue
            return (rhead, status, rheaders)

    def relay(self, method, target, rhead, rframing, fault):
        p = self.p
        up = self.up
        kind = fault.kind if fault else None
        self.wait_ttfb()
        if kind is None:
            self.send(rhead)
            for piece in iter_body(up.rd, rframing):
                self.send_body(piece)
            return
        where = None
        if kind == "latency":
            where = fault.rule["latency_where"]
            if where == "any":
                where = fault.rnd.choice(("headers", "body"))
        if kind == "latency" and where == "headers":
            d = fault.latency_s()
            p.count_fault(kind, method, target, "%.0f ms before the headers" % (d * 1000))
            time.sleep(d)
            self.send(rhead)
            for piece in iter_body(up.rd, rframing):
                self.send_body(piece)
            return

        # a fault at a byte position in the body
        if rframing[0] == "length":
            total = rframing[1]
            pieces = iter_body(up.rd, rframing)
        else:
            raw = b"".join(iter_body(up.rd, rframing))
            total = len(raw)
            pieces = iter([raw])
        cut_headers = total == 0
        if kind != "latency" and fault.rule["cut_where"] != "body":
            cut_headers = fault.rule["cut_where"] == "headers" or fault.rnd.random() < 0.5 or total == 0
        if cut_headers:
            if kind == "latency":
                d = fault.latency_s()
                p.count_fault(kind, method, target, "%.0f ms before the headers (no body)" % (d * 1000))
                time.sleep(d)
                self.send(rhead)
                return
            cut = fault.rnd.randrange(0, len(rhead))
            self.send(rhead[:cut])
            self.drop_upstream()
            p.count_fault(kind, method, target, "in the header block after %d of %d bytes" % (
                cut, len(rhead)))
            if kind == "stall":
                self.drop_upstream()
                self.hold(fault.rule["stall_s"])
            self.end(kind)
        cut = fault.rnd.randrange(0, total)  # the first byte not sent (yet)
        self.send(rhead)
        sent = 0
        for piece in pieces:
            n = len(piece)
            if kind is not None and sent <= cut < sent + n:
                k = cut - sent
                if k:
                    self.send(piece[:k])
                if kind != "latency":
                    p.count_fault(kind, method, target, "after %d of %d body bytes" % (cut, total))
                    if kind == "stall":
                        self.drop_upstream()
                        self.hold(fault.rule["stall_s"])
                    self.end(kind)
                d = fault.latency_s()
                p.count_fault(kind, method, target, "%.0f ms after %d of %d body bytes" % (
                    d * 1000, cut, total))
                time.sleep(d)
                kind = None  # done: relay the rest as is
                piece = piece[k:]
            self.send_body(piece)
            sent += n


    def loop_reply(self, method, target, close):
        """The next page of a looping listing, without asking upstream: the
        first page again (as rewritten), with the other token."""
        q = _query(target)
        with self.p.lock:
            body = self.p.loop_pages.get(q.get("prefix", ""))
        if body is None:
            body = (b'<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult>'
                    b'<KeyCount>0</KeyCount></ListBucketResult>')
        _, body, note = hostile_rewrite("loop_token", method, target, 200, [], body)
        head = ["HTTP/1.1 200 OK", "Content-Type: application/xml",
                "Content-Length: %d" % len(body)]
        if close:
            head.append("Connection: close")
        self.send(("\r\n".join(head) + "\r\n\r\n").encode() + body)
        self.p.count_fault("loop_token", method, target, note + " (answered by the proxy)")
        if close:
            self.graceful_close()

    def relay_hostile(self, method, target, rhead, status, rheaders, rframing, fault):
        """Relay the reply whole, rewritten as a lying server would; a reply
        the kind does not apply to is relayed as it is (and not counted)."""
        body = b"".join(iter_body(self.up.rd, rframing))
        start = rhead.split(b"\r\n", 1)[0].decode("latin-1")
        drop = ("content-length", "transfer-encoding") + (
            ("connection",) if self.p.cfg["client_keepalive"] else ())
        headers = [(k, v) for k, v in rheaders if k not in drop]
        new = hostile_rewrite(fault.kind, method, target, status, headers, body)
        note = None
        if new is not None:
            headers, body, note = new
            if fault.kind == "loop_token":
                with self.p.lock:
                    self.p.loop_pages[_query(target).get("prefix", "")] = body
        if method == "HEAD":
            if new is None:
                headers = [(k, v) for k, v in rheaders if k not in drop[2:]]
        else:
            headers = headers + [("content-length", str(len(body)))]
        out = [start] + ["%s: %s" % (k, v) for k, v in headers]
        if note is not None:
            # Counted before the client has the reply, so a client that
            # reads the stats after its call sees the fault counted.
            self.p.count_fault(fault.kind, method, target, note)
        self.send(("\r\n".join(out) + "\r\n\r\n").encode("latin-1") + (b"" if method == "HEAD" else body))


def _query(target):
    q = target.split("?", 1)[1] if "?" in target else ""
    return {k: v[0] for k, v in parse_qs(q, keep_blank_values=True).items()}


def hostile_rewrite(kind, method, target, status, headers, body):
    """(headers, body, note) for a reply rewritten by a hostile kind, or None
    when the kind does not apply to this reply.  headers come without
    Content-Length (added by the caller) except for a HEAD reply."""
    q = _query(target)
    listing = method == "GET" and q.get("list-type") == "2" and status == 200
    if kind == "foreign_list" and listing:
        p = q.get("prefix", "")
        keys, prefixes = ["%ssub/deep" % p], ["%sm/n/" % p, "%sq" % p]
        if len(p) >= 2 and p.endswith("/"):
            # a sibling with a prefix of the same length: its rest would pass
            # for a name of this directory to a client that does not check
            sib = p[:-2] + ("~" if p[-2] != "~" else "}") + "/"
            keys.append(sib + "evil-foreign")
            prefixes.append(sib + "evil-dir/")
            # shorter than the prefix, inside its first segment
            short = p.split("/")[0] + "/z"
            if not short.startswith(p):
                keys.append(short)
        extra = "".join("<Contents><Key>%s</Key><Size>1</Size></Contents>" % _xml_escape(k)
                        for k in keys)
        extra += "".join("<CommonPrefixes><Prefix>%s</Prefix></CommonPrefixes>" % _xml_escape(k)
                         for k in prefixes)
        end = body.rfind(b"</ListBucketResult>")
        if end < 0:
            return None
        body = body[:end] + extra.encode() + body[end:]
        return headers, body, "%d foreign names" % (len(keys) + len(prefixes))
    if kind == "loop_token" and listing:
        tok = "LOOP-B" if q.get("continuation-token") == "LOOP-A" else "LOOP-A"
        body = re.sub(rb"<IsTruncated>[^<]*</IsTruncated>", b"", body)
        body = re.sub(rb"<NextContinuationToken>[^<]*</NextContinuationToken>", b"", body)
        end = body.rfind(b"</ListBucketResult>")
        if end < 0:
            return None
        body = (body[:end] + b"<IsTruncated>true</IsTruncated><NextContinuationToken>" +
                tok.encode() + b"</NextContinuationToken>" + body[end:])
        return headers, body, "token " + tok
    if kind == "huge_size":
        if listing:
            body, n = re.subn(rb"<Size>[^<]*</Size>", b"<Size>" + HUGE.encode() + b"</Size>", body)
            return (headers, body, "%d sizes" % n) if n else None
        if method == "HEAD" and 200 <= status <= 299:
            return headers + [("content-length", HUGE)], body, "Content-Length " + HUGE
        cr = hget(headers, "content-range")
        if method == "GET" and status == 206 and cr:
            m = re.match(r"bytes (\d+)-(\d+)/", cr)
            if m:
                headers = [(k, v) for k, v in headers if k != "content-range"]
                v = "bytes %s-%s/%s" % (m.group(1), m.group(2), HUGE)
                return headers + [("content-range", v)], body, "Content-Range " + v
        return None
    if kind == "bad_range":
        cr = hget(headers, "content-range")
        m = re.match(r"bytes (\d+)-(\d+)/(\d+)", cr or "")
        if method == "GET" and status == 206 and m:
            a, b, t = (int(x) for x in m.groups())
            headers = [(k, v) for k, v in headers if k != "content-range"]
            v = "bytes %d-%d/%d" % (a + 1, b + 1, t + 1)
            return headers + [("content-range", v)], body, "Content-Range " + v
        return None
    return None


def _xml_escape(s):
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


# ---------------------------------------------------------------- control endpoint

def make_control_handler(proxy):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *args):  # noqa: A003 - quiet
            if proxy.verbose:
                proxy.log("control: " + fmt % args)

        def reply(self, code, obj):
            body = (json.dumps(obj, indent=1, sort_keys=True) + "\n").encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def body_json(self):
            n = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(n) if n else b""
            return json.loads(raw) if raw.strip() else {}

        def do_GET(self):  # noqa: N802
            if self.path == "/stats":
                self.reply(200, proxy.snapshot())
            elif self.path == "/config":
                with proxy.lock:
                    self.reply(200, proxy.cfg)
            elif self.path == "/health":
                self.reply(200, {"ok": True, "pid": os.getpid()})
            else:
                self.reply(404, {"error": "GET /stats, /config or /health"})

        def do_POST(self):  # noqa: N802
            try:
                if self.path == "/config":
                    self.reply(200, proxy.merge_config(self.body_json(), "control POST"))
                elif self.path == "/off":
                    self.body_json()
                    self.reply(200, proxy.merge_config({"rates": {}, "rules": []}, "control off"))
                elif self.path == "/stats/reset":
                    self.body_json()
                    proxy.reset_stats()
                    self.reply(200, proxy.snapshot())
                else:
                    self.reply(404, {"error": "POST /config, /off or /stats/reset"})
            except (ConfigError, ValueError) as e:
                self.reply(400, {"error": str(e)})

        def do_PUT(self):  # noqa: N802
            try:
                if self.path == "/config":
                    cfg = dict(proxy.base_cfg)
                    patch = self.body_json()
                    if not isinstance(patch, dict):
                        raise ConfigError("the config must be a JSON object")
                    cfg.update(patch)
                    self.reply(200, proxy.set_config(cfg, "control PUT"))
                else:
                    self.reply(404, {"error": "PUT /config"})
            except (ConfigError, ValueError) as e:
                self.reply(400, {"error": str(e)})

    return Handler


# ---------------------------------------------------------------- main

def parse_args(argv):
    ap = argparse.ArgumentParser(description="loopback S3 fault-injection proxy",
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="fault kinds: " + ", ".join(KINDS))
    ap.add_argument("--upstream", required=True, help="http://127.0.0.1:PORT of the S3 server")
    ap.add_argument("--listen", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    ap.add_argument("--port", type=int, default=0, help="proxy port (default: a free one)")
    ap.add_argument("--control-port", type=int, default=0, help="control port (default: a free one)")
    ap.add_argument("--no-control", action="store_true", help="no control endpoint")
    ap.add_argument("--port-file", help="write the proxy port here once listening")
    ap.add_argument("--info-file", help="write the startup JSON line here once listening")
    ap.add_argument("--stats-file", help="keep the counters (JSON) in this file")
    ap.add_argument("--config", help="JSON config file, re-read whenever it changes")
    ap.add_argument("--log", help="append the log here instead of stderr")
    ap.add_argument("--verbose", action="store_true", help="log every request")
    ap.add_argument("--seed", help="seed for the fault decisions (default: random, reported)")
    ap.add_argument("--rate", action="append", default=[], metavar="KIND=P",
                    help="probability of a fault kind, e.g. --rate 503=0.05 (repeatable)")
    ap.add_argument("--methods", help="only fault these methods, e.g. GET,HEAD")
    ap.add_argument("--path-regex", help="only fault targets (path?query) matching this")
    ap.add_argument("--latency-ms", help="latency spike length, N or LO-HI (default 200-800)")
    ap.add_argument("--latency-where", choices=("headers", "body", "any"))
    ap.add_argument("--cut-where", choices=("headers", "body", "any"),
                    help="where reset/truncate/stall cut a reply that has a body (default body)")
    ap.add_argument("--stall-s", type=float, help="longest time a stall/blackhole holds on (default 300)")
    ap.add_argument("--forward-errors", action="store_true",
                    help="500/503: let the upstream execute the request, then answer the error")
    ap.add_argument("--max-faults", type=int, help="stop after this many faults")
    ap.add_argument("--no-client-keepalive", action="store_true",
                    help="relay the upstream's Connection: close as is")
    ap.add_argument("--ttfb-ms", type=float,
                    help="realistic mode: a reply's headers leave no sooner than this after its request")
    ap.add_argument("--bandwidth-mbps", type=float,
                    help="realistic mode: each connection's reply bodies flow at most this fast (MB/s)")
    ap.add_argument("--realistic", action="store_true",
                    help="behave like one S3 stream: --ttfb-ms %g --bandwidth-mbps %g unless given"
                    % (REALISTIC["ttfb_ms"], REALISTIC["bandwidth_mbps"]))
    return ap.parse_args(argv)


def config_from_args(a):
    cfg = {}
    if a.seed is not None:
        cfg["seed"] = int(a.seed) if re.fullmatch(r"-?\d+", a.seed) else a.seed
    rates = {}
    for r in a.rate:
        if "=" not in r:
            raise ConfigError("--rate wants KIND=P, got %r" % r)
        k, v = r.split("=", 1)
        rates[k.strip()] = v.strip()
    if rates:
        cfg["rates"] = rates
    if a.methods:
        cfg["methods"] = a.methods
    if a.path_regex:
        cfg["path_regex"] = a.path_regex
    if a.latency_ms:
        lo, _, hi = a.latency_ms.partition("-")
        cfg["latency_ms"] = [float(lo), float(hi or lo)]
    if a.latency_where:
        cfg["latency_where"] = a.latency_where
    if a.cut_where:
        cfg["cut_where"] = a.cut_where
    if a.stall_s is not None:
        cfg["stall_s"] = a.stall_s
    if a.forward_errors:
        cfg["forward_errors"] = True
    if a.max_faults is not None:
        cfg["max_faults"] = a.max_faults
    if a.no_client_keepalive:
        cfg["client_keepalive"] = False
    if a.realistic:
        cfg.update(REALISTIC)
    if a.ttfb_ms is not None:
        cfg["ttfb_ms"] = a.ttfb_ms
    if a.bandwidth_mbps is not None:
        cfg["bandwidth_mbps"] = a.bandwidth_mbps
    validate(cfg)
    return cfg


def write_atomic(path, text):
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def main(argv=None):
    a = parse_args(argv)
    try:
        base = config_from_args(a)
    except (ConfigError, ValueError) as e:
        print("s3_fault_proxy: %s" % e, file=sys.stderr)
        return 2
    log = open(a.log, "a") if a.log else None
    proxy = Proxy(a.upstream, base, config_file=a.config, stats_file=a.stats_file, log=log,
                  verbose=a.verbose)

    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((a.listen, a.port))
    listener.listen(256)
    port = listener.getsockname()[1]
    control = None
    cport = None
    if not a.no_control:
        control = ThreadingHTTPServer((a.listen, a.control_port), make_control_handler(proxy))
        control.daemon_threads = True
        cport = control.server_address[1]
        threading.Thread(target=control.serve_forever, daemon=True, name="control").start()

    def stop(signum, frame):
        proxy.stopping.set()
        try:
            listener.close()
        except OSError:
            pass
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    info = {"port": port, "control_port": cport, "pid": os.getpid(),
            "upstream": "http://%s:%d" % proxy.up_addr, "seed": proxy.cfg["seed"]}
    proxy.write_stats_file()
    if a.info_file:
        write_atomic(a.info_file, json.dumps(info) + "\n")
    if a.port_file:
        write_atomic(a.port_file, "%d\n" % port)
    print(json.dumps(info), flush=True)
    proxy.log("listening on %s:%d (control %s), upstream %s, config %s" % (
        a.listen, port, cport, info["upstream"], json.dumps(proxy.describe(proxy.cfg))))
    # accept() in a thread so that the main thread sees signals at once
    t = threading.Thread(target=proxy.serve, args=(listener,), daemon=True, name="accept")
    t.start()
    while not proxy.stopping.wait(0.5):
        pass
    if control:
        control.shutdown()
    try:
        proxy.write_stats_file()
    except OSError:
        pass
    s = proxy.snapshot()
    proxy.log("stopped: %d requests, %d faults %s" % (
        s["requests"], s["faults_total"], json.dumps({k: v for k, v in s["faults"].items() if v})))
    return 0


if __name__ == "__main__":
    sys.exit(main())
