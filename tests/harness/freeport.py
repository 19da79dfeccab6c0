#!/usr/bin/env python3
"""Print N distinct free TCP ports on 127.0.0.1, one per line (default N=1).

All sockets are held open until every port has been picked, so the ports
printed are distinct.  There is an unavoidable race between closing them and
the server binding; callers retry on a bind failure.
"""
import socket
import sys

n = int(sys.argv[1]) if len(sys.argv) > 1 else 1
socks = []
try:
    for _ in range(n):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    for s in socks:
        print(s.getsockname()[1])
finally:
    for s in socks:
        s.close()
