#!/usr/bin/env python3
"""train_ddp.py - train_imagefolder.py with torch.distributed (gloo).

    train_ddp.py --data /mnt/data/sample --ckpt /mnt/data/ckpt [--epochs 2] [--nprocs 2]

Starts --nprocs processes on this node (torch.multiprocessing.spawn), one
rank each.  tierfs.torch.Sampler sees torch.distributed and splits the
dataset as DistributedSampler does; each rank writes its own order, and
the daemon follows each (one stream per process).  Rank 0 saves.
"""
import argparse
import os
import socket
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torchvision.transforms as T
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader

import tierfs.torch
from train_imagefolder import TinyCNN


def run(rank, world, a, port):
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port,
                            rank=rank, world_size=world)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    dataset = tierfs.torch.ImageFolder(a.data, transform=T.ToTensor())
    sampler = tierfs.torch.Sampler(dataset, seed=0)  # tierfs: this rank's share, its order told
    loader = DataLoader(dataset, batch_size=a.batch_size, sampler=sampler, num_workers=a.workers)
    model = DDP(TinyCNN(len(dataset.classes)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    if rank == 0:
        os.makedirs(a.ckpt, exist_ok=True)
    for epoch in range(a.epochs):
        sampler.set_epoch(epoch)
        t0 = time.monotonic()
        total = 0
        loss_sum = 0.0
        for x, y in loader:
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            loss_sum += loss.item() * len(y)
            total += len(y)
        if rank == 0:
            path = os.path.join(a.ckpt, "epoch-%d.pt" % epoch)
            tierfs.torch.save({"epoch": epoch, "model": model.module.state_dict()},  # tierfs
                              path, durable=True)
            print("epoch %d: rank 0 read %d images, loss %.3f, %.1fs; saved %s"
                  % (epoch, total, loss_sum / total, time.monotonic() - t0, path), flush=True)
        dist.barrier()
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--nprocs", type=int, default=2)
    ap.add_argument("--workers", type=int, default=2, help="DataLoader workers per rank")
    ap.add_argument("--batch-size", type=int, default=32)
    a = ap.parse_args()
    mp.spawn(run, args=(a.nprocs, a, free_port()), nprocs=a.nprocs, join=True)


if __name__ == "__main__":
    main()
