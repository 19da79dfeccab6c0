#!/usr/bin/python3
"""dataloader.py - the Python side of bench/dataloader.sh (PyTorch under
/usr/bin/python3: Debian's python3-torch and python3-torchvision).

  dataloader.py gen DIR CLASSES PER_CLASS SIZE   the ImageFolder (cached)
  dataloader.py upload DIR PREFIX                put it into $TFS_TEST_BUCKET
  dataloader.py epoch ROOT SAMPLER SEED WORKERS BATCH
                                                 one DataLoader epoch over the
                                                 ImageFolder ROOT; SAMPLER is
                                                 tierfs (tierfs.torch.Sampler)
                                                 or random (RandomSampler)
  dataloader.py report TSV META                  the Markdown report

`epoch` prints one line: "images=N index_s=S epoch_s=S images_per_s=R"
(index_s: ImageFolder's scan of the class directories; epoch_s: from
iter(loader) to the last batch, worker start included).  Each image is
decoded and made a tensor (ToTensor), as a training job would.
"""
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)


def gen(d, classes, per_class, size):
    marker = os.path.join(d, ".complete")
    if os.path.exists(marker):
        return
    subprocess.run([sys.executable, os.path.join(TOP, "examples", "make_sample_data.py"),
                    os.path.join(d, "images"), "--classes", classes, "--per-class", per_class,
                    "--size", size], check=True, stdout=sys.stderr)
    open(marker, "w").close()


def upload(d, prefix):
    from concurrent.futures import ThreadPoolExecutor
    import boto3
    os.environ.pop("AWS_CA_BUNDLE", None)
    s3 = boto3.client("s3", endpoint_url=os.environ["TFS_S3_ENDPOINT"],
                      region_name=os.environ.get("TFS_S3_REGION", "us-east-1"))
    bucket = os.environ.get("TFS_TEST_BUCKET", "tierfs-test")
    root = os.path.join(d, "images")
    files = [os.path.join(a, f) for a, _, fs in os.walk(root) for f in fs]

    def put(p):
        with open(p, "rb") as f:
            s3.put_object(Bucket=bucket, Key=prefix + "/" + os.path.relpath(p, root), Body=f.read())
    t0 = time.time()
    with ThreadPoolExecutor(16) as ex:
        list(ex.map(put, files))
    print("%d images uploaded in %.1f s" % (len(files), time.time() - t0), file=sys.stderr)


def epoch(root, sampler_kind, seed, workers, batch):
    sys.path.insert(0, os.path.join(TOP, "python"))
    import torch
    import torchvision.transforms as T
    from torch.utils.data import DataLoader, RandomSampler
    import tierfs.torch
    torch.set_num_threads(1)
    t0 = time.monotonic()
    ds = tierfs.torch.ImageFolder(root, transform=T.ToTensor())
    t1 = time.monotonic()
    if sampler_kind == "tierfs":
        sampler = tierfs.torch.Sampler(ds, seed=int(seed))
    else:
        sampler = RandomSampler(ds, generator=torch.Generator().manual_seed(int(seed)))
    loader = DataLoader(ds, batch_size=int(batch), sampler=sampler, num_workers=int(workers))
    t2 = time.monotonic()
    n = 0
    for x, _ in loader:
        n += len(x)
    t3 = time.monotonic()
    assert n == len(ds), (n, len(ds))
    print("images=%d index_s=%.3f epoch_s=%.3f images_per_s=%.1f"
          % (n, t1 - t0, t3 - t2, n / (t3 - t2)))


ORDER = ["tierfs-sampler", "tierfs-random", "s3fs", "rclone", "local"]


def report(tsv, meta_tsv):
    rows = {}
    index = {}
    for line in open(tsv):
        peer, phase, rep, images, secs, index_s = line.rstrip("\n").split("\t")
        rows.setdefault((peer, phase), []).append(int(images) / float(secs) if float(secs) else 0)
        if phase == "cold":
            index.setdefault(peer, []).append(float(index_s))
    meta = dict(line.rstrip("\n").split("\t", 1) for line in open(meta_tsv) if "\t" in line)
    med = {k: statistics.median(v) for k, v in rows.items()}
    print("### bench/dataloader.sh: a DataLoader epoch over an ImageFolder")
    print()
    for k in ("date", "command", "commit", "server", "images", "latency", "workers", "reps",
              "machine"):
        if k in meta:
            print("- %s: %s" % (k, meta[k]))
    for k in sorted(meta):
        if k.startswith("peer_"):
            print("- %s: %s" % (k[5:], meta[k]))
    print()
    print("images/s, medians; cold: a fresh mount with an empty cache; warm: the same mount, "
          "page cache dropped, the next epoch's order")
    print()
    local = med.get(("local", "cold"))
    base = med.get(("tierfs-sampler", "cold"))
    print("| reader | cold img/s | warm img/s | cold / local | cold / tierfs+sampler cold "
          "| cold scan s |")
    print("|---|---|---|---|---|---|")
    for peer in ORDER:
        c, w = med.get((peer, "cold")), med.get((peer, "warm"))
        if c is None:
            continue
        print("| %s | %.0f | %s | %s | %s | %.2f |" % (
            peer, c, "%.0f" % w if w is not None else "-",
            "%.2f" % (c / local) if local else "-", "%.2f" % (c / base) if base else "-",
            statistics.median(index[peer])))
    print()
    print("(tierfs-sampler: tierfs.torch.Sampler; the others torch's RandomSampler; local: a "
          "copy on the local disk, page cache dropped before cold; cold scan: ImageFolder's "
          "scan of the class directories on the fresh mount, before the epoch, not in img/s)")


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "gen":
        gen(*args)
    elif cmd == "upload":
        upload(*args)
    elif cmd == "epoch":
        epoch(*args)
    elif cmd == "report":
        report(*args)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
