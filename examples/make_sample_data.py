#!/usr/bin/env python3
"""make_sample_data.py - a small ImageFolder for the examples and tests.

    make_sample_data.py DIR [--classes 10] [--per-class 40] [--size 32]

Writes DIR/class_CC/img_NNNN.png: each class a colour and a stripe
direction with noise, so a tiny CNN learns it in two epochs.  The same
arguments always give the same bytes (PIL, a seeded generator).
"""
import argparse
import os
import random

from PIL import Image


def image(cls, i, size, classes):
    rnd = random.Random(cls * 100003 + i)
    hue = (cls * 255 // classes, 255 - cls * 255 // classes, (cls * 97) % 256)
    img = Image.new("RGB", (size, size))
    px = img.load()
    for y in range(size):
        for x in range(size):
            stripe = ((x if cls % 2 else y) + cls) % 4 < 2
            n = rnd.randrange(-40, 41)
            px[x, y] = tuple(max(0, min(255, (c if stripe else c // 3) + n)) for c in hue)
    return img


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--per-class", type=int, default=40)
    ap.add_argument("--size", type=int, default=32)
    a = ap.parse_args()
    for c in range(a.classes):
        d = os.path.join(a.dir, "class_%02d" % c)
        os.makedirs(d, exist_ok=True)
        for i in range(a.per_class):
            image(c, i, a.size, a.classes).save(os.path.join(d, "img_%04d.png" % i), optimize=False)
    print("%d images in %d classes under %s" % (a.classes * a.per_class, a.classes, a.dir))


if __name__ == "__main__":
    main()
