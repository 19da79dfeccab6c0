#!/usr/bin/env python3
"""test_ops.py - what an admin operates: the Prometheus endpoint, live
configuration reload (tierfs reload and SIGHUP) and logging.

    test_ops.py TIERFS --backend local|moto [--only NAME]

Uses the harness of test_mount.py (a local-directory bucket, or a bucket on
a throwaway moto_server).  Prints one line per test and ends with
"ops: N passed, N failed".
"""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from test_mount import data_for, poll, read, run_suite  # noqa: E402

DOC = os.path.join(HERE, "..", "..", "docs", "metrics.md")
MIB = 1 << 20


# ---------------------------------------------------------------- helpers

def set_conf(m, changes):
    """Rewrite the mount's config file with {section: {key: value}} changes
    (a value None removes the key)."""
    sections, order = {}, []
    cur = None
    with open(m.conf) as f:
        for line in f:
            line = line.strip()
            if line.startswith("["):
                cur = line[1:-1]
                if cur not in sections:
                    sections[cur] = {}
                    order.append(cur)
            elif "=" in line and cur:
                k, v = line.split("=", 1)
                sections[cur][k.strip()] = v.strip()
    for sec, kv in changes.items():
        if sec not in sections:
            sections[sec] = {}
            order.append(sec)
        for k, v in kv.items():
            if v is None:
                sections[sec].pop(k, None)
            else:
                sections[sec][k] = v
    with open(m.conf, "w") as f:
        for sec in order:
            f.write("[%s]\n" % sec)
            for k, v in sections[sec].items():
                f.write("%s = %s\n" % (k, v))


def conf_line(m, section, key):
    """The line number of `key` in [section] of the mount's config file."""
    cur = None
    with open(m.conf) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if line.startswith("["):
                cur = line[1:-1]
            elif cur == section and line.split("=", 1)[0].strip() == key:
                return n
    raise AssertionError("no %s.%s in %s" % (section, key, m.conf))


def reload_cmd(m):
    return subprocess.run([m.tierfs, "reload", m.mnt], capture_output=True, text=True, timeout=60)


def log_text(m):
    try:
        with open(m.logfile) as f:
            return f.read()
    except OSError:
        return ""


def scrape(m, path="/metrics"):
    addr = m.stats()["metrics"]["listen"]
    with urllib.request.urlopen("http://%s%s" % (addr, path), timeout=10) as r:
        assert r.status == 200, r.status
        ctype = r.headers.get("Content-Type", "")
        assert ctype.startswith("text/plain; version=0.0.4"), ctype
        return r.read().decode()


SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(,|$)')


def parse(text):
    """The exposition as ({family: type}, {(name, frozenset(labels)): value}),
    checking the syntax of every line on the way."""
    types, samples = {}, {}
    for line in text.splitlines():
        if line.startswith("# HELP "):
            continue
        if line.startswith("# TYPE "):
            _, _, name, typ = line.split(" ", 3)
            assert name not in types, "family %s twice" % name
            assert typ in ("counter", "gauge", "histogram"), line
            types[name] = typ
            continue
        mt = SAMPLE.match(line)
        assert mt, "not a sample line: %r" % line
        name, _, labels, value = mt.groups()
        lab = {}
        pos = 0
        while labels and pos < len(labels):
            ml = LABEL.match(labels, pos)
            assert ml, "bad labels in %r" % line
            lab[ml.group(1)] = ml.group(2)
            pos = ml.end()
        assert "mount" in lab, "no mount label: %r" % line
        v = float(value.replace("+Inf", "inf"))
        key = (name, frozenset(lab.items()))
        assert key not in samples, "duplicate series %r" % line
        samples[key] = v
    return types, samples


def value(samples, name, **labels):
    """Sum of the samples of `name` whose labels include `labels`."""
    tot, found = 0.0, False
    for (n, lab), v in samples.items():
        d = dict(lab)
        if n == name and all(d.get(k) == str(x) for k, x in labels.items()):
            tot += v
            found = True
    assert found, "no sample %s%r" % (name, labels)
    return tot


def documented():
    """Metric names listed in docs/metrics.md's tables."""
    names = set()
    with open(DOC) as f:
        for line in f:
            mt = re.match(r"^\| `(tierfs_[a-z0-9_]+)` \| (counter|gauge|histogram) \|", line)
            if mt:
                names.add(mt.group(1))
    assert len(names) > 40, "docs/metrics.md lists only %d metrics" % len(names)
    return names


def documented_members():
    """{metric: [stats member paths]} from docs/metrics.md's last column
    (which tests/unit/test_stats_schema.c checks against the rows that
    define both)."""
    out = {}
    with open(DOC) as f:
        for line in f:
            mt = re.match(r"^\| `(tierfs_[a-z0-9_]+)` \|.*\| `([^|]*)` \|\s*$", line)
            if mt:
                out[mt.group(1)] = [p.strip() for p in mt.group(2).split(",")]
    return out


def member(st, path):
    for part in path.split("."):
        if not isinstance(st, dict) or part not in st:
            return None
        st = st[part]
    return st


def ops_mount(ctx, name, extra=None, opts=None):
    conf = {"metrics": {"listen": "127.0.0.1:0"}, "writeback": {"delay": "0s"}}
    for sec, kv in (extra or {}).items():
        conf.setdefault(sec, {}).update(kv)
    return ctx.mount(name, conf, opts).mount()


# ---------------------------------------------------------------- tests

def t_scrape_covers_every_documented_metric(ctx):
    ctx.bucket.put("data/a.bin", data_for("a", 3 * MIB + 5))
    m = ops_mount(ctx, "scrape")
    try:
        # touch every path once so that every family has samples
        os.listdir(os.path.join(m.mnt, "data"))
        read(os.path.join(m.mnt, "data/a.bin"))
        types, samples = parse(scrape(m))
        # the near copy's families exist only with [near] (test_near.py)
        docs = {n for n in documented() if not n.startswith("tierfs_near_")}
        missing = sorted(docs - set(types))
        extra = sorted(set(types) - docs)
        assert not missing, "documented but not scraped: %s" % missing
        assert not extra, "scraped but not documented: %s" % extra
        # histograms are complete: buckets ascending to +Inf, then _sum/_count
        for fam, typ in types.items():
            if typ != "histogram":
                continue
            for op in ("read", "lookup") if "fuse" in fam else ("get", "list"):
                inf = value(samples, fam + "_bucket", op=op, le="+Inf")
                assert inf == value(samples, fam + "_count", op=op), (fam, op)
                buckets = sorted((float(dict(lab)["le"].replace("+Inf", "inf")), v)
                                 for (n, lab), v in samples.items()
                                 if n == fam + "_bucket" and dict(lab).get("op") == op)
                assert len(buckets) == 20, (fam, op, len(buckets))
                counts = [v for _, v in buckets]
                assert counts == sorted(counts), "%s %s: not cumulative" % (fam, op)
        assert value(samples, "tierfs_info", source=ctx.bucket.source) == 1
        assert all(dict(lab)["mount"] == m.mnt for _, lab in samples)
        # other paths and methods
        try:
            scrape(m, "/nothing")
            raise AssertionError("/nothing answered 200")
        except urllib.error.HTTPError as e:
            assert e.code == 404, e.code
    finally:
        m.umount()


def t_every_metric_reads_its_stats_member(ctx):
    """Each family's samples add up to its members in `tierfs stats --json`
    (per-operation families and tierfs_info aside), and a family whose
    members are all absent has no sample."""
    ctx.bucket.put("d/a.bin", data_for("a", 2 * MIB + 7))
    m = ops_mount(ctx, "members")
    try:
        assert read(os.path.join(m.mnt, "d/a.bin")) == data_for("a", 2 * MIB + 7)
        fams = {k: v for k, v in documented_members().items()
                if k != "tierfs_info" and not any("*" in p for p in v)}
        assert len(fams) > 80, len(fams)

        def mismatches():
            st = m.stats()
            types, samples = parse(scrape(m))
            bad = []
            for fam, paths in sorted(fams.items()):
                vals = [member(st, p) for p in paths]
                vals = [v for v in vals if v is not None]
                if not vals:
                    if fam in types:
                        bad.append("%s scraped without its members %s" % (fam, paths))
                    continue
                if fam.endswith("_seconds") and paths[0].endswith("_ms"):
                    vals = [float("inf") if v == 2**64 - 1 else v / 1000 for v in vals]
                want = sum(float(v) for v in vals)
                got = value(samples, fam)
                if got != want:
                    bad.append("%s = %r, stats %s = %r" % (fam, got, paths, want))
            return bad

        last = []

        def agree():
            last[:] = mismatches()
            return not last

        # counters move while the read's fills finish: poll until quiet
        poll(agree, 30, "the metrics to agree with tierfs stats")
    except AssertionError:
        print("mismatches: %s" % last)
        raise
    finally:
        m.umount()


def t_values_follow_reads_and_writes(ctx):
    size = 5 * MIB + 123
    ctx.bucket.put("d/big.bin", data_for("big", size))
    m = ops_mount(ctx, "values", {"prefetch": {"workers": "0"}})
    try:
        _, s0 = parse(scrape(m))
        assert read(os.path.join(m.mnt, "d/big.bin")) == data_for("big", size)
        # the SSD tier's fills are written after the read returns
        poll(lambda: value(parse(scrape(m))[1], "tierfs_ssd_fill_queue_bytes") == 0,
             what="the fill queue to drain")
        _, s1 = parse(scrape(m))

        def delta(name, **lab):
            return value(s1, name, **lab) - value(s0, name, **lab)

        assert delta("tierfs_fuse_read_bytes_total") == size
        assert delta("tierfs_fuse_requests_total", op="read") >= size // MIB
        assert delta("tierfs_fuse_request_duration_seconds_count", op="read") >= size // MIB
        assert delta("tierfs_fuse_request_duration_seconds_sum", op="read") > 0
        assert delta("tierfs_backend_requests_total", op="get") >= 1
        assert delta("tierfs_backend_bytes_total", op="get") == size
        assert delta("tierfs_backend_request_duration_seconds_count", op="get") == \
            delta("tierfs_backend_requests_total", op="get")
        assert delta("tierfs_cache_fill_bytes_total", tier="ssd") == size
        # every block by outcome, as `tierfs stats` counts it (issue 32)
        assert delta("tierfs_ssd_fills_total", outcome="written") == 6
        for o in ("refused_policy", "refused_capacity", "failed", "superseded"):
            assert delta("tierfs_ssd_fills_total", outcome=o) == 0, o
        assert not [k for k in s1 if k[0] == "tierfs_ssd_fills_total" and
                    dict(k[1]).get("outcome") == "dropped"], "dropped without fill_when_full = drop"
        st = json.loads(subprocess.run([m.tierfs, "stats", "--json", m.mnt], capture_output=True,
                                       text=True, check=True, timeout=30).stdout)
        assert st["ssd"]["fill_written"] == value(s1, "tierfs_ssd_fills_total", outcome="written")
        assert value(s1, "tierfs_cache_used_bytes", tier="ssd") >= size
        assert delta("tierfs_cache_misses_total", tier="ram") == 6

        # read again, past the kernel's page cache: RAM hits, no backend traffic
        fd = os.open(os.path.join(m.mnt, "d/big.bin"), os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            assert os.pread(fd, size, 0) == data_for("big", size)
        finally:
            os.close(fd)
        _, s2 = parse(scrape(m))
        assert value(s2, "tierfs_backend_requests_total", op="get") == \
            value(s1, "tierfs_backend_requests_total", op="get")
        assert value(s2, "tierfs_cache_hits_total", tier="ram") > \
            value(s1, "tierfs_cache_hits_total", tier="ram")

        # a write: FUSE write bytes, then an upload once flushed
        payload = data_for("ckpt", 2 * MIB + 1)
        with open(os.path.join(m.mnt, "d/ckpt.pt"), "wb") as f:
            f.write(payload)
        _, s3 = parse(scrape(m))
        assert value(s3, "tierfs_fuse_write_bytes_total") - value(s2, "tierfs_fuse_write_bytes_total") \
            == len(payload)
        assert value(s3, "tierfs_fuse_requests_total", op="create") >= 1
        r = subprocess.run([m.tierfs, "flush", m.mnt], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        _, s4 = parse(scrape(m))
        assert value(s4, "tierfs_writeback_uploads_total") >= value(s2, "tierfs_writeback_uploads_total") + 1
        assert value(s4, "tierfs_writeback_upload_bytes_total") - \
            value(s2, "tierfs_writeback_upload_bytes_total") >= len(payload)
        assert value(s4, "tierfs_writeback_pending_files") == 0
        assert value(s4, "tierfs_writeback_dirty_bytes") == 0
        assert value(s4, "tierfs_backend_requests_total", op="put") > \
            value(s2, "tierfs_backend_requests_total", op="put")
        assert value(s4, "tierfs_backend_request_duration_seconds_count", op="put") >= 1
        # the metrics agree with tierfs stats
        st = m.stats()
        _, s5 = parse(scrape(m))
        assert value(s5, "tierfs_fuse_read_bytes_total") == st["fuse"]["read_bytes"]
        assert value(s5, "tierfs_cache_capacity_bytes", tier="ram") == st["ram"]["capacity_bytes"]
    finally:
        m.umount()


def t_reload_applies_tunables(ctx):
    ctx.bucket.put("f.bin", data_for("f", MIB))
    m = ops_mount(ctx, "reload", {"cache": {"metadata_ttl": "5m"}})
    try:
        st0 = m.stats()
        assert st0["ram"]["capacity_bytes"] == 64 * MIB
        set_conf(m, {"ram": {"size": "96M"}, "ssd": {"size": "512M", "high_watermark": "70",
                                                     "low_watermark": "60"},
                     "cache": {"metadata_ttl": "forever", "policy": "lru"},
                     "prefetch": {"workers": "2"}, "writeback": {"uploaders": "3"},
                     "log": {"level": "debug"}})
        r = reload_cmd(m)
        assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
        assert "ram.size=96M" in r.stdout, r.stdout
        assert "needs a remount" in r.stderr and "cache.policy" in r.stderr, r.stderr
        st = m.stats()
        assert st["ram"]["capacity_bytes"] == 96 * MIB, st["ram"]
        assert st["ssd"]["capacity_bytes"] == 512 * MIB, st["ssd"]
        assert st["ssd"]["high_watermark_bytes"] == int(512 * MIB * 0.7), st["ssd"]
        assert st["metadata"]["ttl_ms"] == 2**64 - 1, st["metadata"]
        assert st["prefetch"]["workers"] == 2
        assert st["writeback"]["uploaders"] == 3
        assert st["log"]["level"] == "debug"
        assert st["ram"]["policy"] == st0["ram"]["policy"], "cache.policy needs a remount"
        assert st["reload"] == {"ok": 1, "failed": 0}, st["reload"]
        _, s = parse(scrape(m))
        assert value(s, "tierfs_cache_capacity_bytes", tier="ram") == 96 * MIB
        assert value(s, "tierfs_cache_capacity_bytes", tier="ssd") == 512 * MIB
        assert value(s, "tierfs_metadata_ttl_seconds") == float("inf")
        assert value(s, "tierfs_prefetch_workers") == 2
        assert value(s, "tierfs_writeback_uploaders") == 3
        assert value(s, "tierfs_config_reloads_total", result="ok") == 1
        assert "reload (tierfs reload): applied" in log_text(m)
        # the mount still works with the new workers and uploaders
        assert read(os.path.join(m.mnt, "f.bin")) == data_for("f", MIB)
        with open(os.path.join(m.mnt, "new.bin"), "wb") as f:
            f.write(b"x" * 1000)
        r = subprocess.run([m.tierfs, "flush", m.mnt], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        # nothing changed: nothing to apply; the policy is still reported
        r = reload_cmd(m)
        assert r.returncode == 0 and "nothing to apply" in r.stdout, (r.stdout, r.stderr)
    finally:
        m.umount()


def t_reload_invalid_changes_nothing(ctx):
    m = ops_mount(ctx, "badreload")
    try:
        st0 = m.stats()
        set_conf(m, {"prefetch": {"workers": "1"}, "ram": {"size": "12Q"}})
        line = conf_line(m, "ram", "size")
        r = reload_cmd(m)
        assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
        want = "%s:%d: [ram] size: invalid size '12Q'" % (m.conf, line)
        assert want in r.stderr, r.stderr
        st = m.stats()
        for sec, key in (("ram", "capacity_bytes"), ("prefetch", "workers"),
                         ("ssd", "capacity_bytes"), ("metadata", "ttl_ms")):
            assert st[sec][key] == st0[sec][key], (sec, key, st[sec][key], st0[sec][key])
        assert st["reload"] == {"ok": 0, "failed": 1}, st["reload"]
        assert want in log_text(m), log_text(m)[-2000:]
        # a rule between keys: low_watermark above high_watermark
        set_conf(m, {"ram": {"size": "96M"}, "ssd": {"high_watermark": "50", "low_watermark": "60"}})
        r = reload_cmd(m)
        assert r.returncode == 2 and "must be below high_watermark" in r.stderr, r.stderr
        assert m.stats()["ram"]["capacity_bytes"] == st0["ram"]["capacity_bytes"]
        # the file gone: the error names it
        os.rename(m.conf, m.conf + ".away")
        r = reload_cmd(m)
        assert r.returncode == 2 and m.conf in r.stderr and "cannot open" in r.stderr, r.stderr
        os.rename(m.conf + ".away", m.conf)
        _, s = parse(scrape(m))
        assert value(s, "tierfs_config_reloads_total", result="failed") == 3
        assert value(s, "tierfs_config_reloads_total", result="ok") == 0
        # no daemon: exit 1
        r = subprocess.run([m.tierfs, "reload", ctx.work], capture_output=True, text=True, timeout=30)
        assert r.returncode == 1, (r.returncode, r.stderr)
    finally:
        m.umount()


def t_sighup_reloads(ctx):
    ctx.bucket.put("g.bin", data_for("g", 2 * MIB))
    m = ops_mount(ctx, "hup")
    try:
        pid = m.pid()
        set_conf(m, {"ram": {"size": "80M"}, "prefetch": {"workers": "3"}})
        os.kill(pid, signal.SIGHUP)
        poll(lambda: m.stats()["ram"]["capacity_bytes"] == 80 * MIB, 10, "SIGHUP to apply ram.size")
        st = m.stats()
        assert st["prefetch"]["workers"] == 3 and st["reload"]["ok"] == 1, st
        assert "reload (SIGHUP): applied ram.size=80M, prefetch.workers=3" in log_text(m)
        # an invalid file: logged with file:line, nothing changes, still mounted
        set_conf(m, {"ram": {"size": "1M"}, "prefetch": {"workers": "5"}})
        line = conf_line(m, "ram", "size")
        os.kill(pid, signal.SIGHUP)
        want = "%s:%d: [ram] size: '1M' is out of range" % (m.conf, line)
        poll(lambda: want in log_text(m), 10, "the SIGHUP error in the log")
        st = m.stats()
        assert st["ram"]["capacity_bytes"] == 80 * MIB and st["prefetch"]["workers"] == 3, st
        assert st["reload"]["failed"] == 1 and st["pid"] == pid
        # several signals in a row: the daemon stays up and serves
        set_conf(m, {"ram": {"size": "72M"}})
        for _ in range(5):
            os.kill(pid, signal.SIGHUP)
        poll(lambda: m.stats()["ram"]["capacity_bytes"] == 72 * MIB, 10, "the last SIGHUP")
        assert os.path.ismount(m.mnt)
        assert read(os.path.join(m.mnt, "g.bin")) == data_for("g", 2 * MIB)
    finally:
        m.umount()


def t_ssd_shrink_evicts_in_background(ctx):
    n = 24
    for i in range(n):
        ctx.bucket.put("s/f%02d" % i, data_for("s%d" % i, 2 * MIB))
    m = ops_mount(ctx, "shrink", {"cache": {"policy": "epoch"}})
    try:
        for i in range(n):
            read(os.path.join(m.mnt, "s/f%02d" % i))
        # The SSD tier writes a reader's blocks in the background.
        used = poll(lambda: m.stats()["ssd"]["used_bytes"] >= n * 2 * MIB and
                    m.stats()["ssd"]["used_bytes"], 20, "the fills to land")
        assert used >= n * 2 * MIB, used
        set_conf(m, {"ssd": {"size": "16M"}, "ram": {"size": "16M"}})
        t0 = time.monotonic()
        r = reload_cmd(m)
        assert r.returncode == 0, r.stderr
        assert time.monotonic() - t0 < 10, "the reload waited for the eviction"
        poll(lambda: m.stats()["ssd"]["used_bytes"] <= 16 * MIB, 30, "the SSD tier to shrink")
        st = m.stats()
        assert st["ssd"]["capacity_bytes"] == 16 * MIB and st["ssd"]["evictions"] > 0, st["ssd"]
        assert st["ram"]["cached_bytes"] <= 16 * MIB, st["ram"]
        for i in range(n):  # everything still reads right
            assert read(os.path.join(m.mnt, "s/f%02d" % i)) == data_for("s%d" % i, 2 * MIB)
    finally:
        m.umount()


def t_repeated_errors_are_rate_limited(ctx):
    size = 40 * 65536
    ctx.bucket.put("gone.bin", data_for("gone", size))
    m = ops_mount(ctx, "ratelimit", {"cache": {"block_size": "64K", "metadata_ttl": "forever"},
                                     "prefetch": {"workers": "0"}})
    try:
        path = os.path.join(m.mnt, "gone.bin")
        fd = os.open(path, os.O_RDONLY)
        try:
            ctx.bucket.delete("gone.bin")  # behind tierfs's back
            failures = 0
            for i in range(40):
                try:
                    os.pread(fd, 100, i * 65536)
                except OSError:
                    failures += 1
            assert failures >= 30, failures
        finally:
            os.close(fd)
        text = log_text(m)
        lines = [ln for ln in text.splitlines() if "read 'gone.bin' at" in ln]
        assert 1 <= len(lines) <= 5, "%d lines:\n%s" % (len(lines), "\n".join(lines))
        st = m.stats()
        assert st["log"]["suppressed"] >= failures - 5, st["log"]
        _, s = parse(scrape(m))
        assert value(s, "tierfs_log_suppressed_total") == st["log"]["suppressed"]
        # after the interval the count is logged
        poll(lambda: re.search(r"\d+ similar messages suppressed", log_text(m)), 30,
             "the count of suppressed lines")
    finally:
        m.umount()


def t_logs_name_keys_not_secrets(ctx):
    """Debug logging through reads, writes and errors: lines about objects
    name their key; the secret key and session token never appear."""
    if ctx.bucket.kind != "moto":
        return "skip"
    secret = "SeCrEt%08d" % (os.getpid() * 7919 % 10**8)
    token = "ToKeN%08d" % (os.getpid() * 104729 % 10**8)
    creds = os.path.join(ctx.work, "creds")
    with open(creds, "w") as f:
        f.write("[default]\naws_access_key_id = %s\naws_secret_access_key = %s\n"
                "aws_session_token = %s\n" % (ctx.bucket.env["AWS_ACCESS_KEY_ID"], secret, token))
    os.chmod(creds, 0o600)
    ctx.bucket.put("k/obj one.bin", data_for("o", 3 * MIB))
    ctx.bucket.put("k/gone.bin", data_for("g", MIB))
    m = ops_mount(ctx, "secrets", {"log": {"level": "debug"},
                                   "cache": {"metadata_ttl": "forever"},
                                   "backend": {"credentials_file": creds, "retries": "0"}})
    try:
        assert read(os.path.join(m.mnt, "k/obj one.bin")) == data_for("o", 3 * MIB)
        assert not os.path.exists(os.path.join(m.mnt, "k/missing"))
        with open(os.path.join(m.mnt, "k/new.bin"), "wb") as f:
            f.write(b"y" * (MIB + 3))
        subprocess.run([m.tierfs, "flush", m.mnt], capture_output=True, timeout=60)
        os.unlink(os.path.join(m.mnt, "k/new.bin"))
        subprocess.run([m.tierfs, "flush", m.mnt], capture_output=True, timeout=60)
        fd = os.open(os.path.join(m.mnt, "k/gone.bin"), os.O_RDONLY)
        try:
            ctx.bucket.delete("k/gone.bin")  # behind tierfs's back: a read error
            try:
                os.pread(fd, 10, 0)
                raise AssertionError("read of a deleted object succeeded")
            except OSError:
                pass
        finally:
            os.close(fd)
        r = reload_cmd(m)
        assert r.returncode == 0, r.stderr
    finally:
        m.umount()
    text = log_text(m)
    assert secret not in text and token not in text, "a secret in the log"
    assert "Authorization" not in text and "x-amz-security-token" not in text.lower()
    errs = [ln for ln in text.splitlines() if "[error]" in ln or "[warn]" in ln]
    assert any("k/gone.bin" in ln for ln in errs), "the read error does not name the key:\n" + \
        "\n".join(errs)
    for ln in text.splitlines():
        if re.search(r"s3: (GET|PUT|HEAD|DELETE|COPY) ", ln):
            assert "s3://%s/" % ctx.bucket.source.split("/")[2] in ln, "no key in: " + ln


# ---------------------------------------------------------------- log sinks

STAMP = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"
LOG_DAEMON = 3  # <syslog.h> facility, as lib/log.c's openlog() passes it
SYSLOG_LINE = re.compile(r"<(\d+)>([A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d) tierfs\[(\d+)\]: (.*)",
                         re.S)


def no_file_log(ctx, name):
    """A mount (not mounted yet) whose config has no [log] file (the
    harness sets one)."""
    m = ctx.mount(name, {"prefetch": {"workers": "1"}})
    set_conf(m, {"log": {"file": None, "level": "info"}})
    return m


def t_foreground_logs_to_stderr(ctx):
    """tierfs mount -f without log.file: the log lines go to stderr, in
    the stamped format, and no log file is written."""
    ctx.bucket.put("fg/a.bin", data_for("fga", 70000))
    m = no_file_log(ctx, "fg")
    err = []
    p = subprocess.Popen([m.tierfs, "mount", "-f", "-c", m.conf, ctx.bucket.source, m.mnt],
                         env=m.env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    reader = threading.Thread(target=lambda: err.extend(p.stderr), daemon=True)
    reader.start()
    try:
        poll(lambda: os.path.ismount(m.mnt) or p.poll() is not None, 30, "the mount")
        assert p.poll() is None, "tierfs mount -f exited (%s): %s" % (p.returncode, "".join(err))
        # the foreground process is the keeper; the daemon is its child
        st = m.stats()
        assert st["keeper"]["pid"] == p.pid, "-f must not fork the keeper away"
        with open("/proc/%d/stat" % st["pid"]) as f:
            assert int(f.read().rsplit(")", 1)[1].split()[1]) == p.pid, "the daemon's parent"
        poll(lambda: any("mounted %s on %s" % (ctx.bucket.source, m.mnt) in ln for ln in err),
             10, "the 'mounted' line on stderr")
        assert read(os.path.join(m.mnt, "fg/a.bin")) == data_for("fga", 70000)
        set_conf(m, {"prefetch": {"workers": "2"}})
        r = reload_cmd(m)
        assert r.returncode == 0, r.stderr
        poll(lambda: any("reload (tierfs reload): applied" in ln for ln in err), 10,
             "the reload line on stderr")
        m.umount()
        assert p.wait(timeout=60) == 0, "".join(err)
    finally:
        if p.poll() is None:
            p.terminate()
            p.wait(timeout=30)
    reader.join(timeout=10)
    out = p.stdout.read()
    assert out == "", "log lines on stdout: %r" % out
    lines = "".join(err).splitlines()
    logged = [ln for ln in lines if re.match(STAMP + r" tierfs\[(error|warn|info|debug)\]: ", ln)]
    assert len(logged) >= 3, lines
    assert any(ln.endswith("tierfs[info]: unmounted %s" % m.mnt) for ln in logged), lines
    assert not os.path.exists(m.logfile), "a log file without log.file"


def t_daemon_logs_to_syslog(ctx):
    """A daemonized mount without log.file logs to syslog: datagrams on
    /dev/log, facility daemon, ident tierfs, the daemon's pid, one per
    line.  This machine has no syslog socket, and glibc's syslog() always
    uses /dev/log: the daemon runs in a private mount namespace (unshare
    -m) whose /dev is a directory of the test's with the device nodes it
    needs bound in and the test's own datagram socket as log.  Nothing
    changes outside that namespace; its FUSE mount is reached with
    nsenter."""
    for tool in ("unshare", "nsenter", "mount"):
        if shutil.which(tool) is None:
            raise AssertionError("%s is missing (util-linux)" % tool)
    if os.geteuid() != 0:
        return "skip"
    ctx.bucket.put("sys/a.bin", data_for("sysa", 90000))
    m = no_file_log(ctx, "syslog")
    dev = os.path.join(ctx.work, "dev")
    os.mkdir(dev)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(os.path.join(dev, "log"))
    os.chmod(os.path.join(dev, "log"), 0o666)
    sock.setblocking(False)
    got = []

    def drain():
        while True:
            try:
                got.append(sock.recv(65536).decode("utf-8", "replace"))
            except BlockingIOError:
                return got

    def lines_with(text):
        return [g for g in drain() if text in g]

    setup = r'''set -e
d=$1; shift
for n in null zero full random urandom tty fuse; do
	[ -e "/dev/$n" ] || continue
	: >"$d/$n"
	mount --bind "/dev/$n" "$d/$n"
done
for n in pts shm; do
	[ -d "/dev/$n" ] || continue
	mkdir -p "$d/$n"
	mount --rbind "/dev/$n" "$d/$n"
done
ln -sfn /proc/self/fd "$d/fd"
ln -sfn /proc/self/fd/0 "$d/stdin"
ln -sfn /proc/self/fd/1 "$d/stdout"
ln -sfn /proc/self/fd/2 "$d/stderr"
mount --rbind "$d" /dev
test -S /dev/log
exec "$@"
'''
    pid = None
    try:
        r = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", setup, "sh",
                            dev, m.tierfs, "mount", "-c", m.conf, ctx.bucket.source, m.mnt],
                           env=m.env(), capture_output=True, text=True, timeout=90)
        assert r.returncode == 0, "mount in the namespace failed (%d): %s %s" % (
            r.returncode, r.stdout, r.stderr)
        assert r.stderr == "", r.stderr
        want = "mounted %s on %s" % (ctx.bucket.source, m.mnt)
        [dg] = poll(lambda: lines_with(want), 10, "the 'mounted' datagram")
        mt = SYSLOG_LINE.fullmatch(dg)
        assert mt, "not a syslog datagram: %r" % dg
        pri, pid = int(mt.group(1)), int(mt.group(3))
        assert pri >> 3 == LOG_DAEMON and pri & 7 == 6, "priority %d: not daemon.info" % pri
        assert mt.group(4) == want, dg
        assert not os.path.ismount(m.mnt), "the namespace's mount leaked out"
        assert os.readlink("/proc/%d/ns/mnt" % pid) != os.readlink("/proc/self/ns/mnt")

        def inside(*cmd):
            return subprocess.run(["nsenter", "--mount=/proc/%d/ns/mnt" % pid, "--"] + list(cmd),
                                  env=m.env(), capture_output=True, timeout=60)
        r = inside("cat", os.path.join(m.mnt, "sys/a.bin"))
        assert r.returncode == 0 and r.stdout == data_for("sysa", 90000), r.stderr
        r = inside(m.tierfs, "stats", "--json", m.mnt)
        assert r.returncode == 0 and json.loads(r.stdout)["pid"] == pid, r.stderr
        # A line of another level: an error about an object names its key
        # (listed, then deleted behind tierfs's back, then read).
        ctx.bucket.put("sys/gone.bin", data_for("gone", 70000))
        r = inside("stat", os.path.join(m.mnt, "sys/gone.bin"))
        assert r.returncode == 0, r.stderr
        ctx.bucket.delete("sys/gone.bin")
        r = inside("cat", os.path.join(m.mnt, "sys/gone.bin"))
        assert r.returncode != 0, "a read of a deleted object succeeded"
        errs = poll(lambda: [g for g in lines_with("sys/gone.bin")
                             if SYSLOG_LINE.fullmatch(g) and
                             int(SYSLOG_LINE.fullmatch(g).group(1)) & 7 in (3, 4)],
                    10, "an error or warning naming the key")
        assert all(int(SYSLOG_LINE.fullmatch(g).group(3)) == pid for g in errs), errs
        r = inside(m.tierfs, "umount", m.mnt)
        assert r.returncode == 0, r.stderr
        poll(lambda: lines_with("unmounted %s" % m.mnt), 30, "the 'unmounted' datagram")
        poll(lambda: not os.path.exists("/proc/%d" % pid), 30, "the daemon to exit")
        pid = None
        for g in got:
            assert SYSLOG_LINE.fullmatch(g) and "\n" not in SYSLOG_LINE.fullmatch(g).group(4), g
        assert not os.path.exists(m.logfile), "a log file without log.file"
    finally:
        if pid and os.path.exists("/proc/%d" % pid):
            subprocess.run(["nsenter", "--mount=/proc/%d/ns/mnt" % pid, "--", "umount", "-l",
                            m.mnt], capture_output=True)
            os.kill(pid, signal.SIGKILL)
        sock.close()


TESTS = [
    ("scrape_covers_every_documented_metric", t_scrape_covers_every_documented_metric),
    ("every_metric_reads_its_stats_member", t_every_metric_reads_its_stats_member),
    ("values_follow_reads_and_writes", t_values_follow_reads_and_writes),
    ("reload_applies_tunables", t_reload_applies_tunables),
    ("reload_invalid_changes_nothing", t_reload_invalid_changes_nothing),
    ("sighup_reloads", t_sighup_reloads),
    ("ssd_shrink_evicts_in_background", t_ssd_shrink_evicts_in_background),
    ("repeated_errors_are_rate_limited", t_repeated_errors_are_rate_limited),
    ("logs_name_keys_not_secrets", t_logs_name_keys_not_secrets),
    ("foreground_logs_to_stderr", t_foreground_logs_to_stderr),
    ("daemon_logs_to_syslog", t_daemon_logs_to_syslog),
]


if __name__ == "__main__":
    sys.exit(run_suite("ops", TESTS))
