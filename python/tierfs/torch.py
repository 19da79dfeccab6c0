"""tierfs.torch - PyTorch on a tierfs mount.

Two lines change in a training script::

    sampler = tierfs.torch.Sampler(dataset)            # instead of shuffle=True
    loader = DataLoader(dataset, batch_size=64, sampler=sampler, num_workers=4)
    ...
    tierfs.torch.save(model.state_dict(), "/mnt/ckpt/epoch3.pt", durable=True)

- `Sampler` shuffles like RandomSampler, or like DistributedSampler, and
  before each epoch tells the mount the order this process will read the
  files in (the control file `.tierfs-order`, docs/prefetch.md), so the
  daemon fetches ahead of the reader.
- `FileDataset`, `ImageFolder` (torchvision's, with `.paths`) and
  `TarShards` (WebDataset-style tar shards, streamed sequentially) are
  datasets whose files the sampler (or the shard reader itself) can name.
- `save()` writes a checkpoint atomically (a temporary name, fsync, rename)
  and with durable=True returns only once the bucket has it.

Prefetch is an optimization: when the paths are not on a tierfs mount, or
the order cannot be written, one warning is logged (logger "tierfs.torch")
and training goes on unguided.
"""
import errno
import json
import logging
import math
import os
import re
import tarfile
import time

import torch
import torch.utils.data

from . import _control

__all__ = ["Sampler", "FileDataset", "ImageFolder", "TarShards", "save", "ORDER_FILE",
           "UPLOAD_XATTR"]

log = logging.getLogger("tierfs.torch")

ORDER_FILE = ".tierfs-order"
UPLOAD_XATTR = "user.tierfs.upload"

# ------------------------------------------------------------ mount roots
# The mount root of a path: the longest mount point of fstype fuse.tierfs
# in /proc/self/mountinfo that contains the path's realpath (as
# src/cmd_warmup.c finds it); paths in .tierfs-order are relative to it.


def _tierfs_mountpoints():
    """Mount points of fstype fuse.tierfs in this mount namespace."""
    try:
        return _control.tierfs_mounts()
    except OSError:
        return []


def _root_of(real, mountpoints):
    """The longest of `mountpoints` that holds the real path `real`, or None."""
    best = None
    for mp in mountpoints:
        if _control._inside(real, mp) and (best is None or len(mp) > len(best)):
            best = mp
    return best


def _mount_root(path):
    """The tierfs mount root holding `path` (tierfs.mount_root()), or None:
    training goes on without prefetch outside tierfs."""
    try:
        return _control.mount_root(path)
    except (_control.NotTierfsError, OSError):
        return None


def _relpaths(paths, root=None):
    """(root, [path relative to root or None]) for `paths`; `root` is the
    mount root of the first path that has one unless given.  realpath()
    runs once per directory, not once per file."""
    mps = None
    real_dirs = {}
    out = []
    for p in paths:
        p = os.fspath(p)
        d, base = os.path.split(os.path.abspath(p))
        rd = real_dirs.get(d)
        if rd is None:
            rd = real_dirs[d] = os.path.realpath(d)
        real = os.path.join(rd, base)
        if root is None:
            if mps is None:
                mps = _tierfs_mountpoints()
            root = _root_of(real, mps)
        if root is not None and real.startswith(root.rstrip("/") + "/"):
            out.append(real[len(root.rstrip("/")) + 1:])
        else:
            out.append(None)
    return root, out


def _paths_of(data_source):
    """File paths of a dataset, by index: `.paths` (tierfs datasets),
    `.samples` / `.imgs` (torchvision's ImageFolder and DatasetFolder), a
    Subset of one of those, or a sequence of paths.  None when unknown."""
    paths = getattr(data_source, "paths", None)
    if paths is not None:
        return list(paths)
    samples = getattr(data_source, "samples", None)
    if samples is None:
        samples = getattr(data_source, "imgs", None)
    if samples is not None:
        return [s[0] if isinstance(s, (tuple, list)) else s for s in samples]
    if isinstance(data_source, torch.utils.data.Subset):
        inner = _paths_of(data_source.dataset)
        return None if inner is None else [inner[i] for i in data_source.indices]
    if isinstance(data_source, (list, tuple)) and all(
            isinstance(p, (str, bytes, os.PathLike)) for p in data_source):
        return [os.fsdecode(p) for p in data_source]
    return None


def _order_line(rel):
    """One line of .tierfs-order for `rel` (bytes), or None if it cannot be
    named there.  Plain paths unless the manifest parser would read them
    otherwise (vfs/manifest.h): then a JSON object."""
    b = os.fsencode(rel)
    if b"://" in b or b"\0" in b:
        return None
    plain = (b"\n" not in b and b.strip(b" \t\r") == b and b[:1] not in (b"#", b"{", b"/")
             and not b.startswith(b"./"))
    if plain:
        return b
    try:
        return json.dumps({"path": b.decode("utf-8")}).encode()
    except UnicodeDecodeError:
        return None


class _OrderWriter:
    """Writes orders into <root>/.tierfs-order; warns once, never raises."""

    def __init__(self, what):
        self.what = what
        self.warned = False

    def warn(self, msg, *args):
        if not self.warned:
            self.warned = True
            log.warning("%s: " + msg + "; training goes on without prefetch in its order",
                        self.what, *args)

    def write(self, root, rels):
        if root is None:
            self.warn("the files are not on a tierfs mount")
            return False
        seen = set()
        lines = []
        for r in rels:
            if r is None or r in seen:
                continue
            seen.add(r)
            line = _order_line(r)
            if line is not None:
                lines.append(line)
        if not lines:
            self.warn("no file of the order is under the tierfs mount %s", root)
            return False
        ctl = os.path.join(root, ORDER_FILE)
        try:
            with open(ctl, "wb") as f:  # closing sets the order
                f.write(b"\n".join(lines) + b"\n")
        except OSError as e:
            self.warn("cannot write the order to %s: %s", ctl, e.strerror or e)
            return False
        return True


# ------------------------------------------------------------ the sampler

def _dist_world():
    """(num_replicas, rank) of an initialized torch.distributed, or None."""
    d = torch.distributed
    if d.is_available() and d.is_initialized():
        return d.get_world_size(), d.get_rank()
    return None


class Sampler(torch.utils.data.Sampler):
    """Shuffles like torch's RandomSampler (one permutation per epoch, from
    seed + epoch), or like DistributedSampler when `num_replicas`/`rank` are
    given or torch.distributed is initialized (the same indices, padding and
    drop_last).  Each iteration first writes the files this process will
    read, in that order, into `<mount root>/.tierfs-order`.

    `data_source`: a tierfs dataset (`.paths`), a torchvision
    ImageFolder/DatasetFolder (`.samples`), a Subset of one, or a list of
    paths.  `root`: the directory holding `.tierfs-order` (default: the
    tierfs mount root of the files).

    The epoch: `set_epoch(e)` sets the one the next iteration uses; each
    iteration then moves to the next, so a loop that never calls
    set_epoch() still gets a new order each epoch."""

    def __init__(self, data_source, root=None, shuffle=True, seed=0, num_replicas=None, rank=None,
                 drop_last=False):
        self.data_source = data_source
        self.root = os.fspath(root) if root is not None else None
        self.shuffle = shuffle
        self.seed = int(seed)
        self.drop_last = drop_last
        if num_replicas is None and rank is None:
            w = _dist_world()
            if w:
                num_replicas, rank = w
        elif num_replicas is None or rank is None:
            w = _dist_world()
            if w is None:
                raise ValueError("give both num_replicas and rank (torch.distributed is not "
                                 "initialized)")
            num_replicas = w[0] if num_replicas is None else num_replicas
            rank = w[1] if rank is None else rank
        if num_replicas is not None:
            if num_replicas < 1 or not 0 <= rank < num_replicas:
                raise ValueError("invalid rank %r for num_replicas %r" % (rank, num_replicas))
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self._writer = _OrderWriter("tierfs.torch.Sampler")
        self._rels = None
        self._order_root = None

    # DistributedSampler's sizes
    def _sizes(self):
        n = len(self.data_source)
        r = self.num_replicas
        if self.drop_last and n % r != 0:
            num = math.ceil((n - r) / r)
        else:
            num = math.ceil(n / r)
        return num, num * r

    def __len__(self):
        if self.num_replicas is None:
            return len(self.data_source)
        return self._sizes()[0]

    def set_epoch(self, epoch):
        self.epoch = int(epoch)

    def indices(self, epoch):
        """The indexes this process reads in `epoch` (what __iter__ yields)."""
        n = len(self.data_source)
        if self.shuffle:
            g = torch.Generator()
            g.manual_seed(self.seed + epoch)
            idx = torch.randperm(n, generator=g).tolist()
        else:
            idx = list(range(n))
        if self.num_replicas is None:
            return idx
        num, total = self._sizes()
        if not self.drop_last:
            pad = total - len(idx)
            if pad <= len(idx):
                idx += idx[:pad]
            else:
                idx += (idx * math.ceil(pad / len(idx)))[:pad]
        else:
            idx = idx[:total]
        return idx[self.rank:total:self.num_replicas]

    def _relative(self):
        if self._rels is None:
            paths = _paths_of(self.data_source)
            if paths is None:
                self._rels = []
                self._writer.warn("cannot tell the file paths of a %s (give a tierfs dataset, "
                                  "an ImageFolder or a list of paths)",
                                  type(self.data_source).__name__)
                return None, []
            if self.root is not None:
                root = _mount_root(self.root) or os.path.realpath(self.root)
            else:
                root = None
            self._order_root, self._rels = _relpaths(paths, root)
        return self._order_root, self._rels

    def __iter__(self):
        epoch = self.epoch
        self.epoch += 1
        idx = self.indices(epoch)
        root, rels = self._relative()
        if rels:
            self._writer.write(root, (rels[i] for i in idx))
        return iter(idx)


# ------------------------------------------------------------ datasets

class FileDataset(torch.utils.data.Dataset):
    """The files under `root` (sorted by path), or `paths` (relative to
    root, or absolute) in the order given.  Item i is the file's bytes, or
    loader(path); then transform(item) when given.  `.paths` holds the
    absolute paths (what Sampler reads)."""

    def __init__(self, root, paths=None, transform=None, loader=None):
        self.root = os.path.abspath(os.fspath(root))
        if paths is None:
            found = []
            for d, dirs, files in os.walk(self.root):
                dirs.sort()
                for name in files:
                    found.append(os.path.join(d, name))
            found.sort()
            self.paths = found
        else:
            self.paths = [os.path.join(self.root, os.fspath(p)) for p in paths]
        self.transform = transform
        self.loader = loader

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        p = self.paths[i]
        if self.loader is not None:
            x = self.loader(p)
        else:
            with open(p, "rb") as f:
                x = f.read()
        return self.transform(x) if self.transform is not None else x


_image_folder = None


def _make_image_folder():
    import torchvision.datasets

    class ImageFolder(torchvision.datasets.ImageFolder):
        """torchvision.datasets.ImageFolder with `.paths` (the image paths
        by index), so tierfs.torch.Sampler can tell the mount the order."""

        @property
        def paths(self):
            return [s[0] for s in self.samples]

    ImageFolder.__module__ = __name__
    ImageFolder.__qualname__ = "ImageFolder"
    return ImageFolder


def __getattr__(name):
    # ImageFolder subclasses torchvision's, imported on first use.
    global _image_folder
    if name == "ImageFolder":
        if _image_folder is None:
            _image_folder = _make_image_folder()
        return _image_folder
    raise AttributeError("module %r has no attribute %r" % (__name__, name))


def _expand_braces(s):
    """shard-{000..009}.tar and {a,b} alternatives, as WebDataset takes."""
    m = re.search(r"\{([^{}]*)\}", s)
    if not m:
        return [s]
    body = m.group(1)
    r = re.fullmatch(r"(\d+)\.\.(\d+)", body)
    if r:
        lo, hi = r.group(1), r.group(2)
        width = len(lo) if lo.startswith("0") else 0
        items = ["%0*d" % (width, i) for i in range(int(lo), int(hi) + 1)]
    else:
        items = body.split(",")
    out = []
    for it in items:
        out.extend(_expand_braces(s[:m.start()] + it + s[m.end():]))
    return out


def _key_ext(name):
    """WebDataset's split of a member name: the key is the name up to the
    first dot of its last component, the extension (lower-cased) the rest."""
    d, base = os.path.split(name)
    if "." not in base or base.startswith("."):
        return None, None
    stem, ext = base.split(".", 1)
    return (d + "/" + stem if d else stem), ext.lower()


class TarShards(torch.utils.data.IterableDataset):
    """Samples of tar shards (WebDataset layout: the members of one sample
    share a key, e.g. 000123.jpg and 000123.cls), read sequentially with
    tarfile's stream mode.  Yields (key, {ext: bytes}).

    `urls_or_paths`: a list of shard paths, or one string with brace
    ranges (`/mnt/ds/train-{0000..0099}.tar`); `file://` is stripped.
    Each epoch the shards are shuffled (seed + epoch, the same in every
    process), split across distributed ranks (`num_replicas`/`rank`, or
    torch.distributed when initialized), then across the DataLoader's
    workers; each worker writes the shards it will read, in order, to the
    mount's `.tierfs-order`.  Call set_epoch(e) each epoch when the
    DataLoader's workers are not persistent (each epoch's workers get a
    copy of this object; without workers, or with persistent ones, each
    iteration moves to the next epoch by itself)."""

    def __init__(self, urls_or_paths, shuffle_shards=True, seed=0, num_replicas=None, rank=None):
        super().__init__()
        if isinstance(urls_or_paths, (str, bytes, os.PathLike)):
            shards = _expand_braces(os.fsdecode(urls_or_paths))
        else:
            shards = [os.fsdecode(p) for p in urls_or_paths]
        self.shards = [s[7:] if s.startswith("file://") else s for s in shards]
        if not self.shards:
            raise ValueError("TarShards: no shards")
        for s in self.shards:
            if re.match(r"^[a-z][a-z0-9+.-]*://", s):
                raise ValueError("TarShards reads files (a path on the mount), not %s" % s)
        self.shuffle_shards = shuffle_shards
        self.seed = int(seed)
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self._writer = _OrderWriter("tierfs.torch.TarShards")

    def set_epoch(self, epoch):
        self.epoch = int(epoch)

    def shards_for(self, epoch, rank=0, num_replicas=1, worker=0, num_workers=1):
        """The shards one reader reads in `epoch`, in order."""
        order = list(self.shards)
        if self.shuffle_shards:
            g = torch.Generator()
            g.manual_seed(self.seed + epoch)
            order = [order[i] for i in torch.randperm(len(order), generator=g).tolist()]
        return order[rank::num_replicas][worker::num_workers]

    def _readers(self):
        world, rank = self.num_replicas, self.rank
        if world is None or rank is None:
            w = _dist_world() or (1, 0)
            world = w[0] if world is None else world
            rank = w[1] if rank is None else rank
        info = torch.utils.data.get_worker_info()
        wid, nw = (info.id, info.num_workers) if info is not None else (0, 1)
        return rank, world, wid, nw

    def __iter__(self):
        epoch = self.epoch
        self.epoch += 1
        rank, world, wid, nw = self._readers()
        if len(self.shards) < world * nw and wid == 0 and rank == 0:
            log.warning("tierfs.torch.TarShards: %d shards for %d readers (ranks x workers): "
                        "some read nothing", len(self.shards), world * nw)
        mine = self.shards_for(epoch, rank, world, wid, nw)
        if mine:
            root, rels = _relpaths(mine)
            self._writer.write(root, rels)
        for path in mine:
            yield from self._samples(path)

    @staticmethod
    def _samples(path):
        key, sample = None, None
        with open(path, "rb", buffering=1 << 20) as f:
            with tarfile.open(fileobj=f, mode="r|") as tf:
                for m in tf:
                    if not m.isfile():
                        continue
                    k, ext = _key_ext(m.name)
                    if k is None:
                        continue
                    data = tf.extractfile(m).read()
                    if k != key:
                        if sample:
                            yield key, sample
                        key, sample = k, {}
                    sample[ext] = data
        if sample:
            yield key, sample


# ------------------------------------------------------------ checkpoints

def _fsync_dir(d):
    try:
        fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # not every filesystem syncs directories
    finally:
        os.close(fd)


def _tmp_name(path):
    d, base = os.path.split(path)
    suffix = ".%d.%s.tmp" % (os.getpid(), os.urandom(4).hex())
    return os.path.join(d, "." + base[:255 - 1 - len(suffix)] + suffix)


def wait_uploaded(path, timeout=None):
    """Wait until the bucket has what was closed under `path`, a file on a
    tierfs mount: poll getxattr(path, "user.tierfs.upload") (1 ms, doubling
    to 50 ms) until it is "clean".  Raises OSError(EIO) when the upload
    gave up ("failed: ..."), TimeoutError after `timeout` seconds, and
    OSError(ENOTSUP) when the daemon does not report uploads."""
    deadline = None if timeout is None else time.monotonic() + timeout
    delay = 0.001
    while True:
        try:
            v = os.getxattr(path, UPLOAD_XATTR)
        except OSError as e:
            if e.errno in (errno.ENODATA, errno.ENOTSUP, getattr(errno, "ENOATTR", errno.ENODATA)):
                raise OSError(errno.ENOTSUP,
                              "the tierfs daemon does not report uploads (%s): it is older than "
                              "this package; upgrade it, or wait with `tierfs flush`"
                              % UPLOAD_XATTR, path) from e
            raise
        if v == b"clean":
            return
        if v.startswith(b"failed"):
            msg = v.decode("utf-8", "replace")
            raise OSError(errno.EIO, "tierfs gave up uploading it (%s); the next mount retries"
                          % msg, path)
        now = time.monotonic()
        if deadline is not None and now >= deadline:
            raise TimeoutError("%s: not in the bucket after %gs (%s)"
                               % (path, timeout, v.decode("utf-8", "replace")))
        time.sleep(delay if deadline is None else min(delay, max(0.0, deadline - now)))
        delay = min(delay * 2, 0.05)


def save(obj, path, durable=False, timeout=None, **torch_save_kwargs):
    """torch.save(obj) to `path` atomically for readers: into a temporary
    name in the same directory, fsync, then os.replace() before the file is
    closed (on a tierfs mount its upload starts at close, so it is made
    once, under `path`; renamed after the close, the upload of the
    temporary name could start first, to be cancelled and wasted).  With
    durable=True, on a tierfs mount, return only once the bucket has it
    (wait_uploaded(); `timeout` in seconds, None waits as long as the
    upload is retried); on another filesystem durable=True also fsyncs the
    directory.  Errors raise; the temporary file is removed."""
    path = os.fspath(path)
    d = os.path.dirname(os.path.abspath(path))
    tmp = _tmp_name(os.path.abspath(path))
    try:
        with open(tmp, "xb") as f:
            torch.save(obj, f, **torch_save_kwargs)
            f.flush()
            os.fsync(f.fileno())
            os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    if not durable:
        return
    if _mount_root(path) is None:
        _fsync_dir(d)
        return
    wait_uploaded(path, timeout)
