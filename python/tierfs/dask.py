"""tierfs.dask - warm a tierfs mount on every node of a Dask cluster.

    from dask.distributed import Client
    import tierfs.dask
    client = Client("scheduler:8786")
    tierfs.dask.warmup(client, ["/mnt/data/train"])

dask.distributed is imported only when warmup() runs, so importing this
module needs nothing but the standard library.
"""
import uuid

import tierfs

__all__ = ["warmup"]


def _warm(mount, paths, kw):
    """Run on a worker: Mount(...).warmup(...) on that worker's node."""
    m = tierfs.Mount(mount if mount is not None else paths[0])
    return m.warmup(paths, **kw)


def _one_worker_per_host(workers):
    """{host: worker address}: the first worker (by address) of each host
    in scheduler_info()["workers"]."""
    hosts = {}
    for addr in sorted(workers):
        info = workers[addr] or {}
        host = info.get("host")
        if not host:
            # "tcp://10.0.0.5:40123" -> "10.0.0.5"
            host = addr.split("://", 1)[-1].rsplit(":", 1)[0]
        hosts.setdefault(host, addr)
    return hosts


def warmup(client, paths, mount=None, **kw):
    """Run tierfs.Mount(mount).warmup(paths, **kw) once on each node of
    the cluster behind `client` (a dask.distributed Client): on one worker
    per host, all hosts at once, so each node's own tierfs mount fills its
    cache before the computation reads it.

    `paths` are absolute paths inside the mount or keys relative to its
    root (as Mount.warmup takes them); `mount` is a path inside the mount
    on the workers, by default the first of `paths` (then absolute).
    `kw` goes to Mount.warmup (jobs, pin, manifest, tier; a `progress`
    callable runs on the workers).

    Returns {host: the warm-up's summary}.  Raises the first worker's
    exception (tierfs.Error, NotTierfsError, DaemonUnavailable) after
    every host has finished."""
    from dask.distributed import wait  # lazy: importing tierfs.dask needs no dask

    paths = [paths] if isinstance(paths, str) else list(paths)
    if mount is None and not paths:
        raise ValueError("tierfs.dask.warmup: give `mount` or at least one absolute path")
    hosts = _one_worker_per_host(client.scheduler_info()["workers"])
    if not hosts:
        raise RuntimeError("tierfs.dask.warmup: the cluster has no workers")
    run = uuid.uuid4().hex
    futures = {
        host: client.submit(_warm, mount, paths, kw, workers=[addr], allow_other_workers=False,
                            pure=False, key="tierfs-warmup-%s-%s" % (run, host))
        for host, addr in hosts.items()
    }
    wait(list(futures.values()))
    errors = [f.exception() for f in futures.values() if f.status == "error"]
    if errors:
        raise errors[0]
    return {host: f.result() for host, f in futures.items()}
