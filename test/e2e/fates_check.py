#!/usr/bin/env python3
"""test/e2e/fates_check.py -- compares the fate of every offset, as
message_fate and message_fates answer, with the fates a model allows.

    fates_check.py EXPECTED ACTUAL

EXPECTED: "partition:offset<TAB>fate|fate..." lines (the fates the model allows for
that offset; the models cannot know where batches begin and end, so a
message that did not become its key's row may be superseded, stale or
overwritten); ACTUAL: "partition:offset<TAB>message_fate's fate<TAB>message_fates'
fate" lines.  Prints the offsets that differ (at most 10) and exits 1 when
any does, or when an offset is missing from either side.
Standard library only.
"""
import sys


def main():
    want = {}
    with open(sys.argv[1]) as f:
        for line in f:
            o, fates = line.rstrip("\n").split("\t")
            want[o] = set(fates.split("|"))
    got = {}
    with open(sys.argv[2]) as f:
        for line in f:
            try:
                o, one, many = line.rstrip("\n").split("\t")
            except ValueError:
                print("#   not a fate: " + line.rstrip("\n"))
                sys.exit(1)
            got[o] = (one, many)
    bad = []
    for o in sorted(set(want) | set(got)):
        if o not in want or o not in got:
            bad.append("offset %s: %s" % (o, "no fate" if o not in got else "not in the model"))
        elif got[o][0] not in want[o] or got[o][1] not in want[o]:
            bad.append("offset %s: the model allows %s, message_fate says %s, message_fates %s"
                       % (o, "|".join(sorted(want[o])), got[o][0], got[o][1]))
    for b in bad[:10]:
        print("#   " + b)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
