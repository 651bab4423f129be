#!/usr/bin/env python3
"""test/tools/check_layers.py — the layering rule of src/README.md, checked
on the built objects: a module calls only functions of its own stage and of
the stages below it (the Makefile's STAGES, bottom first; src/kafka_sink.c,
the library's entry point, sits above them all).  Reads every src/**/*.o
with nm: each undefined symbol that another object defines is a call (or a
variable use) from one module to another.  Fails on an upward call, naming
the symbol, and on a C file of src/ that was not built (a module left out
of OBJS), and on a statement run through SPI other than by src/infra/spi.c
(which keeps the caller's memory context).  Cycles inside one stage are listed, not refused: a stage is
changed as one piece.  Run after make; exits 1 on an offence."""
import collections, glob, os, re, subprocess, sys

os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..'))
mk = open('Makefile').read()
m = re.search(r'^STAGES\s*=\s*(.*)$', mk, re.M)
if not m:
    sys.exit('check_layers: no STAGES in the Makefile')
stages = m.group(1).split()
bad = []
defs, uses = {}, collections.defaultdict(set)
for c in sorted(glob.glob('src/**/*.c', recursive=True)):
    o = c[:-2] + '.o'
    if not os.path.exists(o):
        bad.append(f'{c}: not built (is it in OBJS?)')
        continue
    mod = os.path.relpath(c, 'src')[:-2]
    out = subprocess.run(['nm', o], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        f = line.split()
        if len(f) == 3 and f[1] in 'TDBRC':
            defs[f[2]] = mod
        elif len(f) == 2 and f[0] == 'U':
            uses[mod].add(f[1])

def stage(mod):
    return mod.split('/')[0] if '/' in mod else 'entry'

def rank(mod):
    s = stage(mod)
    if s == 'entry':
        return len(stages)
    if s not in stages:
        bad.append(f'src/{mod}.c: in folder {s}, which is not a stage of the Makefile ({" ".join(stages)})')
        return -1
    return stages.index(s)

graph = collections.defaultdict(set)
for mod, syms in uses.items():
    for s in syms:
        d = defs.get(s)
        if d is None or d == mod:
            continue
        graph[mod].add(d)
        if rank(d) > rank(mod):
            bad.append(f'src/{mod}.c calls {s} of src/{d}.c: {stage(mod)} may not call up into {stage(d)}')

# SPI's statements only through src/infra/spi.c, which keeps the caller's
# memory context (SPI returns in its own, freed by SPI_finish)
SPI_RUN = {'SPI_execute', 'SPI_execute_with_args', 'SPI_execute_plan',
           'SPI_execute_plan_with_paramlist', 'SPI_execute_extended', 'SPI_execp',
           'SPI_exec', 'SPI_cursor_fetch', 'SPI_cursor_open', 'SPI_cursor_open_with_args'}
for mod, syms in uses.items():
    for s in sorted(syms & SPI_RUN):
        if mod != 'infra/spi':
            bad.append(f'src/{mod}.c calls {s}: run statements through ks_spi_execute (src/infra/spi.c)')

# cycles within a stage (strongly connected components), for information
index, low, stack, on, comps, n = {}, {}, [], set(), [], [0]
def scc(v):
    index[v] = low[v] = n[0]; n[0] += 1; stack.append(v); on.add(v)
    for w in graph[v]:
        if w not in index:
            scc(w); low[v] = min(low[v], low[w])
        elif w in on:
            low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        c = []
        while True:
            w = stack.pop(); on.discard(w); c.append(w)
            if w == v:
                break
        if len(c) > 1:
            comps.append(sorted(c))
sys.setrecursionlimit(10000)
for v in sorted(set(uses) | set(defs.values())):
    if v not in index:
        scc(v)
for c in comps:
    if len({stage(x) for x in c}) > 1:   # impossible without an upward call, which is reported
        bad.append('a cycle across stages: ' + ' -> '.join(c))
    else:
        print(f'check_layers: note: a cycle inside {stage(c[0])}: {", ".join(c)}')
for b in bad:
    print('check_layers: ' + b)
if not bad:
    print(f'check_layers: ok ({len(uses)} modules, stages {" < ".join(stages)} < entry)')
sys.exit(1 if bad else 0)
