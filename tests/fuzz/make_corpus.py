#!/usr/bin/env python3
"""make_corpus.py - (re)write the seed corpora in tests/fuzz/corpus/.

    python3 tests/fuzz/make_corpus.py

The seeds are committed; this script only says where they come from and
rewrites them the same way:

  s3_xml/      the real moto, AWS and Ceph RGW replies quoted in
               tests/unit/test_s3_xml.c (every `static const char x[] = ...`
               body), plus a few hand-written edge cases;
  conf/        etc/tierfs.conf.example, the example in the man page style,
               and small files with -o overrides (after a "--" line);
  sigv4/       requests in the harness's binary format (see fuzz_sigv4.c):
               the AWS SigV4 test-suite style GET/PUT, ListObjectsV2,
               multipart, a session token, odd paths;
  flexvolume/  options JSON as the kubelet sends it (anchors §5): sorted,
               compact, strings only;
  manifest/    warm-up manifests: paths, JSON lines, s3:// URLs, comments,
               CRLF, lines that must be refused.

Files are named by content (sha1 prefix) so rerunning does not duplicate.
"""
import base64
import hashlib
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.normpath(os.path.join(HERE, "..", ".."))
CORPUS = os.path.join(HERE, "corpus")


def write(harness, name, data):
    if isinstance(data, str):
        data = data.encode()
    d = os.path.join(CORPUS, harness)
    os.makedirs(d, exist_ok=True)
    h = hashlib.sha1(data).hexdigest()[:12]
    path = os.path.join(d, "%s-%s" % (name, h))
    # drop an older seed of the same name with other content
    for f in os.listdir(d):
        if f.startswith(name + "-") and f != os.path.basename(path):
            os.unlink(os.path.join(d, f))
    with open(path, "wb") as f:
        f.write(data)


# ---- s3_xml: the bodies quoted in the unit tests ----

C_ESC = {"n": b"\n", "t": b"\t", "r": b"\r", "\\": b"\\", '"': b'"', "'": b"'"}


def c_string(lit):
    """The bytes of a C string literal's contents (UTF-8 source)."""
    out, i = [], 0
    while i < len(lit):
        c = lit[i]
        if c != "\\":
            out.append(c.encode())
            i += 1
        elif lit[i + 1] == "x":
            m = re.match(r"[0-9a-fA-F]{1,2}", lit[i + 2:])
            out.append(bytes([int(m.group(0), 16)]))
            i += 2 + len(m.group(0))
        elif lit[i + 1] in "01234567":
            m = re.match(r"[0-7]{1,3}", lit[i + 1:])
            out.append(bytes([int(m.group(0), 8)]))
            i += 1 + len(m.group(0))
        else:
            out.append(C_ESC[lit[i + 1]])
            i += 2
    return b"".join(out)


def xml_samples():
    src = open(os.path.join(TOP, "tests", "unit", "test_s3_xml.c"), encoding="utf-8").read()
    macros = {
        "NS": b'xmlns="http://s3.amazonaws.com/doc/2006-03-01/"',
        "XMLDECL": b'<?xml version="1.0" encoding="UTF-8"?>',
        "HELLO_ETAG": b'"5d41402abc4b2a76b9719d911017c592"',
    }
    entry = (b'<Contents><Key>{k}</Key><LastModified>2026-11-21T21:59:38.000Z</LastModified>'
             b'<ETag>"5d41402abc4b2a76b9719d911017c592"</ETag><ChecksumAlgorithm>CRC32'
             b'</ChecksumAlgorithm><Size>5</Size><StorageClass>STANDARD</StorageClass></Contents>')
    tok = re.compile(r'\s+|//[^\n]*|"((?:[^"\\]|\\.)*)"|MOTO_URL_ENTRY\(\s*"((?:[^"\\]|\\.)*)"\s*\)'
                     r'|([A-Z_]+)|(;)')
    samples = {}
    for m in re.finditer(r'static const char (\w+)\[\] *=', src):
        pos, parts = m.end(), []
        while True:
            t = tok.match(src, pos)
            if t is None:
                parts = None
                break
            pos = t.end()
            if t.group(4):
                break
            if t.group(1) is not None:
                parts.append(c_string(t.group(1)))
            elif t.group(2) is not None:
                parts.append(entry.replace(b"{k}", c_string(t.group(2))))
            elif t.group(3):
                if t.group(3) not in macros:
                    parts = None
                    break
                parts.append(macros[t.group(3)])
        if parts:
            name = m.group(1)
            if src[src.rfind("\n", 0, m.start()) + 1] == "\t":
                # a sample inside a test: name it after the test
                t = list(re.finditer(r"Test\((\w+), *(\w+)\)", src[:m.start()]))[-1]
                name = "%s_%s" % (t.group(1), t.group(2))
                if m.group(1) != "body":
                    name += "_" + m.group(1)
            n = 2
            while name in samples:
                name = "%s%d" % (m.group(1), n)
                n += 1
            samples[name] = b"".join(parts)
    return samples


def s3_xml():
    for name, body in xml_samples().items():
        write("s3_xml", name, body)
    extra = {
        "error_min": "<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>",
        "error_utf8": "<Error><Code>X</Code><Message>caf\u00e9 \u65e5\u672c \U0001f600</Message></Error>",
        "copy_result": '<CopyObjectResult><LastModified>2024-01-02T03:04:05.000Z</LastModified>'
                       '<ETag>&quot;9b2cf535f27731c974343645a3985328&quot;</ETag></CopyObjectResult>',
        "copy_part": "<CopyPartResult><ETag>\"e\"</ETag></CopyPartResult>",
        "complete_moto": '<CompleteMultipartUploadResponse><Bucket>b</Bucket><Key>k</Key>'
                         '<ETag>"aa-2"</ETag></CompleteMultipartUploadResponse>',
        "complete_error": "   \n<Error><Code>InternalError</Code><Message>retry</Message></Error>",
        "list_url_strip": '<ListBucketResult><EncodingType>url</EncodingType><Prefix>a%2F</Prefix>'
                          '<Contents><Key>a%2Fb%20c</Key><Size>1</Size></Contents>'
                          '<CommonPrefixes><Prefix>a%2Fd%2F</Prefix></CommonPrefixes>'
                          '<IsTruncated>true</IsTruncated><NextContinuationToken>t%2F'
                          '</NextContinuationToken></ListBucketResult>',
        "list_cdata": "<ListBucketResult><Contents><Key><![CDATA[a<b>&c]]></Key><Size>18446744073709551615"
                      "</Size><LastModified>Tue, 02 Jan 2024 03:04:05 GMT</LastModified></Contents>"
                      "</ListBucketResult>",
        "list_deep": "<ListBucketResult>" + "<a>" * 20 + "<Contents><Key>k</Key></Contents>"
                     + "</a>" * 20 + "<Contents><Key>&#x41;&#66;</Key></Contents></ListBucketResult>",
        "doctype": '<?xml version="1.0"?><!DOCTYPE x [<!ENTITY e "boom">]><Error><Code>&e;</Code></Error>',
        "time_iso": "2024-02-29T23:59:60.999+05:30",
        "time_imf": "Thu, 01 Jan 1970 00:00:00 GMT",
        "time_rfc850": "Sunday, 06-Nov-94 08:49:37 GMT",
        "time_asctime": "Sun Nov  6 08:49:37 1994",
    }
    for name, body in extra.items():
        write("s3_xml", name, body)


# ---- conf ----

def conf():
    write("conf", "example", open(os.path.join(TOP, "etc", "tierfs.conf.example"), "rb").read())
    seeds = {
        "minimal": "[backend]\nendpoint = http://127.0.0.1:9000\nregion = us-west-2\n"
                   "[ssd]\ndir = /var/cache/tierfs\nsize = 50%\n",
        "all_types": "; comment\n# comment\n[Backend]\n  Endpoint: https://[::1]:9000/\n"
                     "path_style = off\nretries = 0\nretry_base = 1.5s\nretry_max = 1h\n"
                     "[ram]\nsize = 1.5G ; inline comment\n[cache]\nblock_size = 4M\n"
                     "policy = LRU\nmetadata_ttl = forever\n[writeback]\nmode = sync\n"
                     "[log]\nlevel = debug\nfile = /var/log/tierfs.log\n",
        "overrides": "[ram]\nsize = 2G\n--\nssd.size=10G\ncache.policy=epoch\n"
                     " backend . region = eu-central-1 \nprefetch.readahead=0\n",
        "only_overrides": "\n--\nram.size=64M\ncache.block_size=16M\nssd.low_watermark=50%\n"
                          "ssd.high_watermark=75\nwriteback.delay=250ms\n",
        "bad_value": "[ssd]\nsize = 12 parsecs\n",
        "bad_cross": "[ssd]\nlow_watermark = 95\nhigh_watermark = 90\n",
        "crlf": "[ram]\r\nsize = 256M\r\n[cache]\r\nblock_size = 64K\r\n",
        "long_paths": "[backend]\ncredentials_file = /var/lib/kubelet/pods/5b4f4a8e-6f0a-4bb8-9d0c-"
                      "2f1f3c0f6a10/volumes/kubernetes.io~secret/tierfs-credentials/credentials\n"
                      "ca_file = /etc/ssl/certs/ca-certificates.crt\n[ssd]\n"
                      "dir = /mnt/nvme0n1/tierfs-cache/imagenet-2012-train\n",
        "override_strings": "\n--\nbackend.profile=ml team\n"
                            "backend.endpoint=https://s3.eu-central-1.amazonaws.com\n"
                            "ssd.size=12.5%\nssd.high_watermark=92.5\n",
        "dup_sections": "[ram]\nsize = 32M\n[ssd]\nsize = 1T\n[ram]\nsize = 64M\n",
    }
    for name, text in seeds.items():
        write("conf", name, text)


# ---- sigv4: flags, max, then NUL-separated fields (see fuzz_sigv4.c) ----

def sigv4_seed(flags, small_max, method, path, payload, region, service, ak, sk, token, date,
               pairs):
    fields = [method, path, payload, region, service, ak, sk, token, date]
    for n, v in pairs:
        fields += [n, v]
    return bytes([flags, small_max]) + b"\0".join(f.encode() for f in fields)


EMPTY_SHA = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


def sigv4():
    ak, sk = "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
    date = "20150830T123600Z"
    seeds = {
        "get_vanilla": (7, 0, "GET", "/", EMPTY_SHA, "us-east-1", "service", ak, sk, "", date,
                        []),
        "get_query": (7, 0, "GET", "/", EMPTY_SHA, "us-east-1", "service", ak, sk, "", date,
                      [("?Param2", "value2"), ("?Param1", "value1")]),
        "list_v2": (7, 0, "GET", "/bucket", "UNSIGNED-PAYLOAD", "eu-west-1", "s3", ak, sk, "",
                    date, [("?list-type", "2"), ("?prefix", "dir/sub dir/"),
                           ("?delimiter", "/"), ("?continuation-token", "1ueGcx+LPRx1Tr/XY="),
                           ("x-amz-content-sha256", "UNSIGNED-PAYLOAD")]),
        "put_object": (3, 0, "PUT", "/bucket/a b/c+d/%41/\u00e9\u65e5", EMPTY_SHA, "us-east-1",
                       "s3", ak, sk, "", date,
                       [("Host", "s3.amazonaws.com"), ("Content-Type", "text/plain"),
                        ("X-Amz-Meta-Name", "  two   spaces\tand tab  "),
                        ("x-amz-meta-name", "second value"), ("x-amz-date", date)]),
        "multipart": (7, 0, "POST", "/bucket/big.bin", EMPTY_SHA, "us-east-1", "s3", ak, sk, "",
                      date, [("?uploads", ""), ("?uploadId", "2~iCw_lDY8VoN"),
                             ("?partNumber", "10000")]),
        "session_token": (7, 0, "HEAD", "/bucket/key", "UNSIGNED-PAYLOAD", "ap-south-1", "s3",
                          "ASIAXAMPLE", sk, "IQoJb3JpZ2luX2VjEJr//////////wEaCXVz", date,
                          [("range", "bytes=0-1048575"), ("if-match", '"5d41402abc"')]),
        "dot_segments": (7, 0, "GET", "//bucket/./a/../b//c", EMPTY_SHA, "us-east-1", "s3", ak,
                         sk, "", date, [("?a", "="), ("?a", "&"), ("?", "")]),
        "small_max": (15, 40, "GET", "/bucket/key", EMPTY_SHA, "us-east-1", "s3", ak, sk, "",
                      date, [("?list-type", "2")]),
        "no_host": (5, 0, "DELETE", "/bucket/key", EMPTY_SHA, "us-east-1", "s3", ak, sk, "tok",
                    date, [("?uploadId", "x")]),
        "bad_header": (7, 0, "GET", "/", EMPTY_SHA, "us-east-1", "s3", ak, sk, "", date,
                       [("x-bad", "a\r\nx-forged: 1"), ("bad name", "v")]),
    }
    for name, args in seeds.items():
        write("sigv4", name, sigv4_seed(*args))


# ---- flexvolume: the kubelet's options JSON ----

def b64(s):
    return base64.b64encode(s.encode()).decode()


def kubelet_json(opts):
    import json
    return json.dumps(opts, sort_keys=True, separators=(",", ":"))


def flexvolume():
    pod = {
        "kubernetes.io/fsType": "",
        "kubernetes.io/pod.name": "trainer-0",
        "kubernetes.io/pod.namespace": "ml",
        "kubernetes.io/pod.uid": "5b4f4a8e-6f0a-4bb8-9d0c-2f1f3c0f6a10",
        "kubernetes.io/pvOrVolumeName": "imagenet",
        "kubernetes.io/readwrite": "rw",
        "kubernetes.io/serviceAccount.name": "default",
    }
    secret = {
        "kubernetes.io/secret/accessKey": b64("AKIAIOSFODNN7EXAMPLE"),
        "kubernetes.io/secret/secretKey": b64("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
    }
    seeds = {
        "inline_source": dict(pod, source="s3://datasets/imagenet/train", **secret),
        "bucket_prefix": dict(pod, bucket="datasets", prefix="imagenet/val/", readOnly="true",
                              policy="lru", metadataTTL="forever", **secret),
        "all_options": dict(pod, source="s3://ds", endpoint="http://minio.minio:9000",
                            region="us-east-1", pathStyle="true", ramSize="512M", ssdSize="20G",
                            blockSize="4M", readahead="64M", policy="epoch", metadataTTL="10m",
                            writeback="async", readOnly="false", **secret),
        "session_token": dict(pod, source="s3://b", **secret, **{
            "kubernetes.io/secret/sessionToken": b64("IQoJb3JpZ2luX2VjEJr//////////wEaCXVz")}),
        "readonly_writeback": dict(pod, **{"kubernetes.io/readwrite": "ro"}, source="s3://b/p",
                                   writeback="sync", **secret),
        "no_secret": dict(pod, prefix="only/prefix"),
        "strict_ok": dict(pod, source="s3://b/train/", ramSize="2G", blockSize="8M",
                          readahead="128M", metadataTTL="30s", writeback="off", **secret),
        "beyond_limits": dict(pod, prefix="p", ramSize="8G", metadataTTL="500ms", **secret),
        "bad_secret": dict(pod, source="s3://b", **{
            "kubernetes.io/secret/accessKey": b64("AKIAIOSFODNN7EXAMPLE"),
            "kubernetes.io/secret/secretKey": b64("has a blank"),
            "kubernetes.io/secret/token": b64("x")}),
        "fsgroup": dict(pod, **{"kubernetes.io/mounterArgs.FsGroup": "2000"}, source="s3://b",
                        ssdSize="50%", **secret),
    }
    for name, opts in seeds.items():
        write("flexvolume", name, kubelet_json(opts))
    write("flexvolume", "not_strings", '{"source":"s3://b","readOnly":true,"ramSize":1073741824,'
          '"kubernetes.io/secret/accessKey":"QUtJQQ==","kubernetes.io/secret/secretKey":null}')
    write("flexvolume", "escapes", '{"source":"s3://b\\u0000x","prefix":"\\u00e9\\n",'
          '"kubernetes.io/secret/accessKey":" QUtJQQ==\\n","kubernetes.io/secret/secretKey":"c2Vj=="}')
    write("flexvolume", "truncated", '{"source":"s3://b"')


# ---- manifest: tierfs warmup --manifest / --follow ----

def manifest():
    seeds = {
        "paths": "train/c01/img_00001.jpg\ntrain/c01/img_00002.jpg\n./val/img_9.jpg\n"
                 "/mnt/data/train/c02/img_7.jpg\n",
        "comments_blank_crlf": "# epoch 3 order\r\n\r\n  train/a b.jpg  \r\n\t# indented comment\n"
                               "train/caf\u00e9/\u65e5\u672c.bin\r\n",
        "jsonl": '{"key": "train/a.jpg", "label": 3}\n{"path": "/mnt/data/val/b.jpg"}\n'
                 '{"url": "s3://datasets/imagenet/train/c.jpg"}\n{"uri": "s3://ckpt/step-100.pt"}\n'
                 '{"key": 7, "path": "x/y"}\n',
        "bad_lines": "../etc/passwd\na/./b\na//b\ndir/\n/etc/shadow\nhttp://example.com/x\n"
                     "s3://other-bucket/imagenet/x\ns3://datasets/imagenetX/y\ns3://datasets\n"
                     '{"key": "../x"}\n{not json\n[1,2]\n{"label": 1}\n.\n./\n',
        "nul_and_long": "ok/1\nbad\0line\n" + "x" * 300 + "\nlast-without-newline",
    }
    for name, text in seeds.items():
        write("manifest", name, text)


def main():
    what = sys.argv[1:] or ["s3_xml", "conf", "sigv4", "flexvolume", "manifest"]
    for w in what:
        globals()[w]()


if __name__ == "__main__":
    main()
