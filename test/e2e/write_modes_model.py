#!/usr/bin/env python3
"""test/e2e/write_modes_model.py: events and the expected target for
write_mode insert_only and update_only (docs/write-modes.md), computed
one message at a time and independently of the extension.

  gen insert_only|update_only|update_nodel SEED DIR
      writes DIR/p0 and DIR/p1 (key TAB value lines for partitions 0 and
      1; an empty value is a tombstone) and, for update_only, DIR/seed.sql
      (the rows the target holds before the pipeline starts); update_nodel
      is update_only without tombstones.
  expect insert_only|insert_pos|update_only|update_nodel READBACK DIR OUT
      READBACK is the topic read back (partition TAB offset TAB key TAB
      value); writes OUT (the rows, COPY text format, by id), OUT.stats
      (what the model saw happen, so the test can fail) and OUT.fates
      (the fates message_fate may give each message, "partition:offset TAB
      fate|fate...": see fates()).

insert_only: per key the event with the smallest (v, NULL lowest;
partition; offset) is the row, as its insert writes it (a absent takes
its default 'none', b absent is NULL); insert_pos: the same without an
order column, smallest (partition, offset).  update_only: a message for a
key not in the table does nothing; otherwise it applies iff its v >= the
row's v (NULL lowest), writing the fields it carries; a tombstone
deletes the row.

  expect switch READBACK DIR OUT
      a write_mode changed by alter_pipeline mid-stream, over update_only's
      events and seed rows: DIR/boundary holds (partition TAB offset)
      lines, each partition's checkpoint when the alter committed.  A
      message below its partition's boundary is applied as upsert (as
      update_only, but a key not in the table is inserted: a absent takes
      its default 'none', b absent is NULL), one at or after it as
      update_only.
"""
import json
import random
import sys

KEYS = 7
SEED_ROWS = {1: (0, 'seed1', 'x'), 2: (3, 'seed2', None), 3: (None, 'seed3', 'y'), 4: (5, 'seed4', 'z')}


def gen(mode, seed, out):
    rnd = random.Random(seed)
    lines = {0: [], 1: []}
    sent = []
    for _ in range(rnd.randint(50, 70)):
        if sent and rnd.random() < 0.12:
            part, line = rnd.choice(sent)      # a duplicate: the same message again
            lines[part].append(line)
            continue
        k = rnd.randint(1, KEYS)
        part = k % 2 if mode.startswith('update') else rnd.randint(0, 1)
        if mode == 'update_only' and rnd.random() < 0.06:
            line = '%d\t' % k                   # a tombstone
        else:
            ev = {'id': k}
            if mode == 'insert_only' and rnd.random() < 0.1:
                ev['v'] = None
            else:
                ev['v'] = rnd.randint(1, 6)
            if rnd.random() < 0.75:
                ev['a'] = 'a%d' % rnd.randint(0, 99)
            if rnd.random() < 0.6:
                ev['b'] = 'b%d' % rnd.randint(0, 99)
            line = '%d\t%s' % (k, json.dumps(ev))
        lines[part].append(line)
        sent.append((part, line))
    for part in (0, 1):
        with open('%s/p%d' % (out, part), 'w') as f:
            f.write(''.join(l + '\n' for l in lines[part]))
    with open(out + '/seed.sql', 'w') as f:
        for k, (v, a, b) in sorted(SEED_ROWS.items()):
            f.write("INSERT INTO @T@ (id, v, a, b) VALUES (%d, %s, '%s', %s);\n"
                    % (k, 'NULL' if v is None else v, a, 'NULL' if b is None else "'%s'" % b))


def readback(path):
    msgs = []
    with open(path) as f:
        for line in f:
            p, o, k, v = line.rstrip('\n').split('\t', 3)
            msgs.append((int(p), int(o), int(k), json.loads(v) if v else None))
    return msgs


def cell(x):
    return '\\N' if x is None else str(x)


def expect(mode, rb, out):
    msgs = readback(rb)
    stats = {}
    rows = {}
    if mode in ('insert_only', 'insert_pos'):
        def rank(m):
            p, o, _, ev = m
            if mode == 'insert_pos':
                return (p, o)
            return (0 if ev['v'] is None else 1, ev['v'] or 0, p, o)
        best = {}
        for m in msgs:
            if m[2] not in best or rank(m) < rank(best[m[2]]):
                best[m[2]] = m
        # events that arrive after a later-ranked one of their key stored
        # first in their own partition order: the rule is not arrival order
        stats['late_earlier'] = sum(1 for k, m in best.items()
                                    if any(x[2] == k and x[0] == m[0] and x[1] < m[1] for x in msgs))
        for k, (p, o, _, ev) in best.items():
            rows[k] = (ev['v'], ev.get('a', 'none'), ev.get('b'), p, o)
    else:
        boundary = {}
        if mode == 'switch':
            with open(out.rsplit('/', 1)[0] + '/boundary') as f:
                for line in f:
                    bp, bo = line.split()
                    boundary[int(bp)] = int(bo)
        for k, (v, a, b) in SEED_ROWS.items():
            rows[k] = [v, a, b, None, None]
        skipped = applied = inserted = before = after = 0
        # per key the messages in offset order: a key lives in one partition
        for p, o, k, ev in sorted(msgs, key=lambda m: (m[0], m[1])):
            upsert = mode == 'switch' and o < boundary.get(p, 0)
            if mode == 'switch':
                if upsert:
                    before += 1
                else:
                    after += 1
            if ev is None:
                rows.pop(k, None)
                continue
            r = rows.get(k)
            if r is None and upsert:
                inserted += 1
                rows[k] = [ev['v'], ev.get('a', 'none'), ev.get('b'), p, o]
                continue
            if r is None:
                skipped += 1
                continue
            if r[0] is not None and ev['v'] < r[0]:
                continue
            applied += 1
            r[0] = ev['v']
            if 'a' in ev:
                r[1] = ev['a']
            if 'b' in ev:
                r[2] = ev['b']
            r[3], r[4] = p, o
        stats['skipped'] = skipped
        stats['applied'] = applied
        if mode == 'switch':
            stats['inserted'] = inserted
            stats['before'] = before
            stats['after'] = after
    with open(out, 'w') as f:
        for k in sorted(rows):
            f.write('\t'.join([str(k)] + [cell(x) for x in rows[k]]) + '\n')
    with open(out + '.stats', 'w') as f:
        f.write(' '.join('%s=%d' % kv for kv in sorted(stats.items())) + '\n')
    fates(mode, msgs, rows, out)


OTHER = 'superseded|stale|overwritten'


def fates(mode, msgs, rows, out):
    """The fate of each message, from the rows above: the message a row's
    lineage names is applied; insert_only: every other message of the key
    is superseded (the first event won); update_only: a seeded row no
    message wrote (no lineage) leaves its key's messages stale, a key not
    in the target at the end had its messages skipped (update_nodel: no
    deletes), or skipped or deleted (update_only deletes on tombstones, so
    which is not told: 'deleted or skipped'), its tombstones deleted; any other message did not become its
    key's row: superseded, stale or overwritten, by where the batches fell."""
    with open(out + '.fates', 'w') as f:
        for p, o, k, ev in sorted(msgs, key=lambda m: (m[0], m[1])):
            r = rows.get(k)
            if r is None:
                fate = 'deleted' if ev is None else 'deleted or skipped' if mode == 'update_only' else 'skipped'
            elif (r[-2], r[-1]) == (p, o):
                fate = 'applied'
            elif not mode.startswith('update'):
                fate = 'superseded'
            elif r[-1] is None:
                fate = 'stale'
            else:
                fate = OTHER
            f.write('%d:%d\t%s\n' % (p, o, fate))


if __name__ == '__main__':
    if sys.argv[1] == 'gen':
        gen(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    else:
        expect(sys.argv[2], sys.argv[3], sys.argv[5])
