#!/usr/bin/env python3
"""train_imagefolder.py - a PyTorch training loop on a tierfs mount.

    train_imagefolder.py --data /mnt/data/sample --ckpt /mnt/data/ckpt [--epochs 2]

An ImageFolder read by a 4-worker DataLoader, a tiny CNN on the CPU, and
a checkpoint each epoch.  The two tierfs lines are marked "tierfs:": the
sampler tells the mount the order of each epoch (the daemon prefetches in
it), and save(durable=True) returns once the checkpoint is in the bucket.
"""
import argparse
import os
import time

import torch
import torch.nn as nn
import torchvision.transforms as T
from torch.utils.data import DataLoader

import tierfs.torch


class TinyCNN(nn.Module):
    def __init__(self, classes):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(4))
        self.head = nn.Linear(32 * 4 * 4, classes)

    def forward(self, x):
        return self.head(self.features(x).flatten(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True, help="an ImageFolder (class directories)")
    ap.add_argument("--ckpt", required=True, help="directory of the checkpoints")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=32)
    a = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)

    dataset = tierfs.torch.ImageFolder(a.data, transform=T.ToTensor())
    sampler = tierfs.torch.Sampler(dataset, seed=0)  # tierfs: shuffles, and tells the mount the order
    loader = DataLoader(dataset, batch_size=a.batch_size, sampler=sampler, num_workers=a.workers)

    model = TinyCNN(len(dataset.classes))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    os.makedirs(a.ckpt, exist_ok=True)
    for epoch in range(a.epochs):
        sampler.set_epoch(epoch)
        t0 = time.monotonic()
        total = correct = 0
        loss_sum = 0.0
        for x, y in loader:
            opt.zero_grad()
            out = model(x)
            loss = loss_fn(out, y)
            loss.backward()
            opt.step()
            loss_sum += loss.item() * len(y)
            correct += (out.argmax(1) == y).sum().item()
            total += len(y)
        path = os.path.join(a.ckpt, "epoch-%d.pt" % epoch)
        tierfs.torch.save({"epoch": epoch, "model": model.state_dict(),  # tierfs: in the bucket
                           "optimizer": opt.state_dict()}, path, durable=True)
        print("epoch %d: %d images, loss %.3f, accuracy %.2f, %.1fs; saved %s"
              % (epoch, total, loss_sum / total, correct / total, time.monotonic() - t0, path),
              flush=True)


if __name__ == "__main__":
    main()
