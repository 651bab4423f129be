#!/usr/bin/env python3
"""split_chunks.py FILE N SEED PREFIX -- cuts FILE into N files PREFIX000,
PREFIX001, ... of random sizes (weights drawn from 1..5, so about 1/3 to
5/3 of the mean size), keeping the line order; every chunk gets at least
one line when FILE has at least N lines."""
import random
import sys

path, n, seed, prefix = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
with open(path, encoding="utf-8") as f:
    lines = f.readlines()
rnd = random.Random(seed)
w = [rnd.uniform(1, 5) for _ in range(n)]
total = sum(w)
cuts = [0]
for i, x in enumerate(w[:-1]):
    left = n - 1 - i                       # chunks still to come after this one
    size = max(1, round(len(lines) * x / total))
    cuts.append(max(cuts[-1], min(len(lines) - left, cuts[-1] + size)))
cuts.append(len(lines))
for i in range(n):
    with open("%s%03d" % (prefix, i), "w", encoding="utf-8") as f:
        f.writelines(lines[cuts[i]:cuts[i + 1]])
