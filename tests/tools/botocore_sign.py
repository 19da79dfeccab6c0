#!/usr/bin/env python3
# botocore_sign.py - reference SigV4 signer for the tierfs differential test.
"""Sign requests with botocore's S3SigV4Auth, as the AWS CLI / boto3 do.

tests/unit/test_sigv4.c runs this once with every randomized request and
compares botocore's canonical request and Authorization value with
tfs_sigv4_sign() byte for byte.

Input (stdin): JSON Lines, one request per line:

  {"method": "PUT", "host": "bucket.s3.amazonaws.com",
   "path": "/raw key/not encoded",
   "query": [["name", "value or null"], ...],         raw, not encoded
   "headers": [["Name", "value"], ...],               every header signed
   "payload_hash": "<hex sha256>" | "UNSIGNED-PAYLOAD",
   "body_hex": "<the body, hex>",                     when the hash is real
   "date": "20150830T123600Z", "region": "us-east-1", "service": "s3",
   "access_key": "...", "secret_key": "...", "session_token": "..." | null}

Output (stdout): one line per request, in order:

  ok <hex of the canonical request> <hex of the Authorization value>
  error <message>

The request is built the way botocore's own S3 client builds it, so that
the comparison is honest:

  * The key is percent-encoded once with botocore.utils.percent_encode(
    path, safe='/~'), exactly what the rest-xml serializer does for the
    greedy {Key+} label, and placed in the URL.  S3SigV4Auth signs the URL
    path as it is (no normalisation, no second encoding).
  * The query string is encoded with botocore.utils.percent_encode_sequence
    and appended to the URL, as botocore.awsrequest.prepare_request_dict
    does; the signer then re-splits and sorts it.
  * The payload hash comes from botocore itself: it hashes body_hex, or
    emits UNSIGNED-PAYLOAD when payload signing is disabled in the client
    config.  The script checks that botocore's value equals payload_hash.
  * The clock is pinned to "date"; botocore then sets X-Amz-Date,
    X-Amz-Content-SHA256 and (with a token) X-Amz-Security-Token itself,
    replacing the copies in "headers", which the C side also signs.

Exit status: 0 when every line was processed (even with per-request
errors), 2 when botocore cannot be imported or the input is unreadable.
"""

import datetime
import json
import sys


def fail(msg):
    sys.stderr.write(f"botocore_sign.py: {msg}\n")
    sys.exit(2)


try:
    import botocore
    import botocore.auth
    from botocore.awsrequest import AWSRequest
    from botocore.config import Config
    from botocore.credentials import Credentials
    from botocore.utils import percent_encode, percent_encode_sequence
except ImportError as exc:  # CI installs botocore; a missing one must fail
    fail(f"cannot import botocore: {exc}")

# Headers botocore never signs; the generator must not produce them.
UNSIGNABLE = {h.lower() for h in botocore.auth.SIGNED_HEADERS_BLACKLIST}
# Headers botocore replaces with its own values; they must agree with ours.
OWNED = {"x-amz-date", "x-amz-content-sha256", "x-amz-security-token", "authorization"}


class RecordingS3SigV4Auth(botocore.auth.S3SigV4Auth):
    """S3SigV4Auth that remembers the canonical request it signed."""

    canonical = None

    def canonical_request(self, request):
        self.canonical = super().canonical_request(request)
        return self.canonical


def sign_one(r):
    date = datetime.datetime.strptime(r["date"], botocore.auth.SIGV4_TIMESTAMP)
    unsigned = r["payload_hash"] == "UNSIGNED-PAYLOAD"

    url = "https://" + r["host"] + percent_encode(r["path"], safe="/~")
    query = [(k, "" if v is None else v) for k, v in r["query"]]
    if query:
        url += "?" + percent_encode_sequence(query)

    body = b"" if unsigned else bytes.fromhex(r.get("body_hex", ""))
    req = AWSRequest(method=r["method"], url=url, data=body)
    own = {}
    for name, value in r["headers"]:
        lname = name.lower()
        if lname in UNSIGNABLE:
            raise ValueError(f"botocore never signs header {name!r}")
        if lname == "date":
            raise ValueError("botocore replaces a Date header; do not send one")
        if lname in OWNED:
            own.setdefault(lname, []).append(value)
        req.headers[name] = value  # HTTPHeaders appends duplicates in order

    req.context["client_config"] = Config(s3={"payload_signing_enabled": not unsigned})
    creds = Credentials(r["access_key"], r["secret_key"], r.get("session_token") or None)
    auth = RecordingS3SigV4Auth(creds, r["service"], r["region"])

    saved = botocore.auth.get_current_datetime
    botocore.auth.get_current_datetime = lambda *a, **k: date
    try:
        auth.add_auth(req)
    finally:
        botocore.auth.get_current_datetime = saved

    # botocore overwrote the headers it owns; make sure the request the C
    # side signed carried the same values, or the comparison means nothing.
    final = {k.lower(): v for k, v in req.headers.items()}
    for lname, values in own.items():
        if lname == "authorization":
            raise ValueError("Authorization must not be among the signed headers")
        if values != [final.get(lname)]:
            raise ValueError(f"{lname}: request had {values}, botocore sent {final.get(lname)!r}")
    if final.get("x-amz-content-sha256") != r["payload_hash"]:
        raise ValueError(f"botocore hashed the payload to {final.get('x-amz-content-sha256')}")
    return auth.canonical, req.headers["Authorization"]


def main():
    try:
        data = sys.stdin.buffer.read().decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        fail(f"cannot read stdin: {exc}")
    out = []
    for lineno, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        try:
            creq, authz = sign_one(json.loads(line))
            out.append(f"ok {creq.encode('utf-8').hex()} {authz.encode('utf-8').hex()}")
        except Exception as exc:  # report per request, keep going
            msg = f"line {lineno}: {type(exc).__name__}: {exc}"
            out.append("error " + msg.replace("\n", " "))
    sys.stdout.write("\n".join(out) + ("\n" if out else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
