#!/usr/bin/env bash
# test/tools/valgrind.sh — runs PostgreSQL under valgrind (memcheck, every
# backend and background worker) through a pipeline's life, and reports
# the errors whose stack passes through kafka_sink.so or librdkafka.
#
#   bash test/tools/valgrind.sh          (KS_RUN defaults to <repo>/.run-valgrind)
#   KS_PG_MAJOR=17 bash test/tools/valgrind.sh   (PostgreSQL 17, see below)
#
# Not part of the test suite (it takes many minutes and PostgreSQL's own
# build reports known false positives under memcheck: WAL and relcache
# init files written with padding bytes, skipped below; a memmove in the
# regex cache, suppressed in test/tools/valgrind.supp).  Debian's PostgreSQL is not built with USE_VALGRIND, so
# memcheck sees malloc blocks, not palloc chunks: it finds reads of
# uninitialised bytes, and overruns of librdkafka's or libc's blocks, not an
# overrun of one palloc chunk into the next.
#
# The extension is installed into a private copy of the PostgreSQL of
# PG_CONFIG under <repo>/.pginst (as test/run_tests.sh does with
# KS_PRIVATE_PG=1), never into the system's; KS_PRIVATE_PG=0 installs into
# PG_CONFIG's own tree (a tree under the repo is installed into directly).
#
# What runs:
#  - the broker-less regress files (sql/*.sql, in the Makefile's order) in
#    their own database, output not compared: every C function called the
#    wrong way, the catalog guard and its LOCK hook, the validators, the
#    offsets parser, lineage views, dead-letter and batching checks, a
#    pipeline in a database the launcher does not serve;
#  - pipeline vgp: merge with bronze, key from the message key, tombstones,
#    bad JSON, bad values and CHECK violations (quarantine, row faults
#    narrowed), replay, produce(), alter_pipeline (workers restart),
#    pause/resume, wait_for(), status, progress, lineage, message_fate,
#    message_fates, pipeline_statements, create_lineage_view;
#  - pipeline vgpart: partial messages of a key folded with an order column
#    (provenance columns), stale and tombstoned ones, a folded row failing
#    its CHECK (re-fold), min_offsets_per_batch, group.id in kafka_options
#    (consumer-group offset mirror), a dead-letter topic (the outbox relay
#    with kafka_sink.outbox_bootstrap_servers), stop, reset_offsets to
#    per-partition JSON and to a timestamp, start; with a bronze table, so
#    message_fates() classifies the folded messages;
#  - pipeline vgci: a key in a non-deterministic ICU collation (when the
#    server has ICU), JSON arrays into int[], text[], jsonb[] and int[][]
#    (good ones and ones quarantined as invalid_value), a trigger rejecting
#    a row (rejected_by_target) and its replay once the trigger is gone;
#  - from SQL: failing API calls caught by exception blocks (the C
#    trampoline), LOCK TABLE on the catalog refused, the catalog trigger
#    refusing a direct UPDATE, _batch_rows()/_batch_messages()/_replay()
#    outside a batch, _check_offsets on bad specs, outbox_send.
# (Soft input errors exist on PostgreSQL 16+ only: run with KS_PG_MAJOR=16
# or later and the bad values of every pipeline go through them; the trees
# of test/tools/pg_binaries.sh have no ICU, vgci's key is then in "C".)  Exit status 1 when an error touches
# our code or librdkafka; 2 when the scenario itself fails.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
export KS_RUN="${KS_RUN:-$REPO/.run-valgrind}"
# the PostgreSQL: PG_CONFIG (default Debian's 15) or KS_PG_MAJOR=16|17|18,
# a tree of test/tools/pg_binaries.sh under the repo (16+ runs the soft
# input errors: bad values quarantined through InputFunctionCallSafe)
if [ -n "${KS_PG_MAJOR:-}" ]; then
    PG_CONFIG="$(bash "$REPO/test/tools/pg_binaries.sh" "$KS_PG_MAJOR")" || { echo "no PostgreSQL $KS_PG_MAJOR" >&2; exit 2; }
fi
export PG_CONFIG="${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}"
H="$REPO/test/harness.sh"
command -v valgrind >/dev/null || apt-get install -y -q valgrind >/dev/null
cd "$REPO"

# build, and install into a private copy of the tree (test/run_tests.sh's
# build_install with KS_PRIVATE_PG=1): PostgreSQL finds its lib and share
# dirs relative to its binaries, so the copy runs the kafka_sink installed
# into it and the system's PostgreSQL is left alone
stamp="$REPO/.ks_build_pg"
if [ "$(cat "$stamp" 2>/dev/null)" != "$PG_CONFIG" ]; then make -s clean >/dev/null 2>&1 || true; fi
echo "$PG_CONFIG" > "$stamp"
make -s -j2 PG_CONFIG="$PG_CONFIG"
bindir="$("$PG_CONFIG" --bindir)"
if [ "${KS_PRIVATE_PG:-1}" = 1 ] && [[ "$bindir" != "$REPO"/* ]]; then
    PGP="${KS_PRIVATE_PG_DIR:-$REPO/.pginst}"
    sysshare="$("$PG_CONFIG" --sharedir)"
    if [ ! -x "$PGP$bindir/postgres" ]; then
        mkdir -p "$PGP$(dirname "$(dirname "$bindir")")" "$PGP$(dirname "$sysshare")"
        cp -a "$(dirname "$bindir")" "$PGP$(dirname "$(dirname "$bindir")")/"
        cp -a "$sysshare" "$PGP$(dirname "$sysshare")/"
        chmod -R o+rX "$PGP"
    fi
    export KS_PGBIN="$PGP$bindir"
    make -s install PG_CONFIG="$PG_CONFIG" DESTDIR="$PGP" >/dev/null
else
    export KS_PGBIN="$bindir"
    make -s install PG_CONFIG="$PG_CONFIG" >/dev/null
fi
export PATH="$KS_PGBIN:$PATH"
pgmajor="$("$PG_CONFIG" --version | sed -E 's/^PostgreSQL ([0-9]+).*/\1/')"

"$H" kafka-start >/dev/null
"$H" pg-wipe >/dev/null         # a new cluster each run (PG_CONFIG may have changed)
"$H" pg-start >/dev/null        # initdb and the harness's configuration
"$H" pg-stop >/dev/null
set -a; . "$KS_RUN/env"; set +a
VG="$KS_RUN/valgrind"
rm -rf "$VG"; mkdir -p "$VG"; chown "$KS_PGOSUSER" "$VG"
trap '"$H" stop-all >/dev/null 2>&1 || true' EXIT
su "$KS_PGOSUSER" -s /bin/bash -c "nohup valgrind --trace-children=yes --num-callers=30 \
    --suppressions=$REPO/test/tools/valgrind.supp \
    --leak-check=full --show-leak-kinds=definite --errors-for-leak-kinds=definite \
    --log-file=$VG/vg.%p.log $KS_PGBIN/postgres -D $KS_PGDATA > $VG/postgres.out 2>&1 &"
for _ in $(seq 1 300); do psql -XAtc "SELECT 1" >/dev/null 2>&1 && break; sleep 1; done

# scenario failures end the run with status 2 (the valgrind verdict is 1)
scenario() { psql -X -q -v ON_ERROR_STOP=1 "$@" || { echo "valgrind.sh: the scenario failed (see above); logs in $VG" >&2; exit 2; }; }

# ---- the broker-less SQL surface: the regress files in their own database
# (no worker starts there: kafka_sink.database names another); their output
# goes to a file and is not compared, only their C paths matter here
psql -XAtc "DROP DATABASE IF EXISTS kafka_sink_regress" >/dev/null
psql -XAtc "CREATE DATABASE kafka_sink_regress" >/dev/null
for f in $(sed -n 's/^REGRESS = //p' Makefile); do
    echo "==== $f" >> "$VG/regress.out"
    psql -X -d kafka_sink_regress -f "sql/$f.sql" >> "$VG/regress.out" 2>&1 || true
done

T="vg.orders.$$"
TP="vg.partial.$$"
TC="vg.ci.$$"
DLQ="vg.dlq.$$"
G="vg-group-$$"
"$H" topic-create "$T" 2 >/dev/null
"$H" topic-create "$TP" 1 >/dev/null
"$H" topic-create "$TC" 1 >/dev/null
"$H" topic-create "$DLQ" 1 >/dev/null
python3 -c "
for i in range(300):
    k = i % 50
    if i % 37 == 5:
        print('%d|{bad json' % k)
    elif i % 41 == 7:
        print('%d|{\"order_id\":%d,\"ts\":\"notatime\",\"amount\":\"1\"}' % (k, k))
    else:
        print('%d|{\"order_id\":%d,\"ts\":\"2026-01-01 00:00:%02d+00\",\"amount\":\"%d.5\",\"nested\":{\"a\":[1,2]}}' % (k, k, i % 60, i))
" | kcat -P -b "$KS_BOOTSTRAP" -t "$T" -K '|'
printf '7|\n' | kcat -P -b "$KS_BOOTSTRAP" -t "$T" -K '|' -Z
# partial messages: random subsets of the optional fields, explicit nulls,
# ties and stale order values, a CHECK violated by some folded rows, bad JSON
python3 -c "
import random, json
random.seed(7)
for i in range(120):
    k = i % 12
    if i % 29 == 11:
        print('%d|{not json' % k); continue
    m = {'id': k}
    if random.random() < 0.9: m['ts'] = random.choice([i, i, i - 20, None])
    for f in ('a', 'b'):
        r = random.random()
        if r < 0.4: m[f] = '%s%d' % (f, i)
        elif r < 0.5: m[f] = None
    if random.random() < 0.3: m['c'] = random.choice([1, 50, 150, 10**12, '7x'])
    print('%d|%s' % (k, json.dumps(m)))
" | kcat -P -b "$KS_BOOTSTRAP" -t "$TP" -K '|'
printf '5|\n' | kcat -P -b "$KS_BOOTSTRAP" -t "$TP" -K '|' -Z
printf '5|{"id":5,"a":"after tombstone","ts":1000}\n' | kcat -P -b "$KS_BOOTSTRAP" -t "$TP" -K '|'
# keys equal under a case-insensitive collation, JSON arrays, a row the
# target's trigger rejects
cat <<'MSGS' | kcat -P -b "$KS_BOOTSTRAP" -t "$TC"
{"k": "ABC", "v": 1, "ia": [1, 2, null, 3], "ta": ["a,b", "q\"uote", "{brace}", "back\\slash", null, "", "NULL"], "ja": [{"a": 1}, [1, 2], "s", 3, null, true], "m": [[1, 2], [3, 4]]}
{"k": "abc", "v": 2, "ia": []}
{"k": "Rej", "v": 13, "ta": ["x"]}
{"k": "rag", "m": [[1], [2, 3]]}
{"k": "obj", "ia": [{"a": 1}]}
{"k": "plain", "v": [1, 2]}
{"k": "mixed", "ia": [1, "x"]}
{"k": "XYZ", "v": 3, "ja": []}
{"k": "xyz", "v": 4, "ja": [{"deep": {"er": [1, {"est": null}]}}]}
MSGS

scenario <<SQL
CREATE EXTENSION IF NOT EXISTS kafka_sink;
ALTER SYSTEM SET kafka_sink.outbox_bootstrap_servers = '$KS_BOOTSTRAP';
SELECT pg_reload_conf();
DO \$\$ BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'ks_vg') THEN CREATE ROLE ks_vg LOGIN; END IF;
END \$\$;
GRANT kafka_sink_admin TO ks_vg;
DROP SCHEMA IF EXISTS vg CASCADE;
CREATE SCHEMA vg AUTHORIZATION ks_vg;
-- expect_error(sql): runs sql, returns its error message; no error is
-- reported (a warning, the run goes on: its point is memcheck's verdict)
CREATE FUNCTION vg.expect_error(q text) RETURNS text LANGUAGE plpgsql AS \$f\$
DECLARE m text;
BEGIN
    BEGIN
        EXECUTE q;
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS m = MESSAGE_TEXT;
        RETURN m;
    END;
    RAISE WARNING 'no error from: %', q;
    RETURN 'NO ERROR';
END \$f\$;
GRANT EXECUTE ON FUNCTION vg.expect_error(text) TO PUBLIC;
SET ROLE ks_vg;
-- a case-insensitive key when the server has ICU, a plain one otherwise
DO \$\$ BEGIN
    CREATE COLLATION vg.ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
EXCEPTION WHEN OTHERS THEN
    RAISE NOTICE 'no ICU collation (%), vgci keys in the default collation', SQLERRM;
    CREATE COLLATION vg.ci FROM "C";
END \$\$;
CREATE TABLE vg.t (order_id bigint PRIMARY KEY, ts timestamptz, amount numeric(10,2) CHECK (amount < 250),
                   nested jsonb, _kafka_topic text, _kafka_partition int, _kafka_offset bigint, _kafka_batch_id bigint);
CREATE TABLE vg.partial (id bigint PRIMARY KEY, ts bigint, a text, b text DEFAULT 'dflt', c int CHECK (c < 100),
                         _kafka_topic text, _kafka_partition int, _kafka_offset bigint, _kafka_batch_id bigint);
CREATE TABLE vg.ci (k text COLLATE vg.ci PRIMARY KEY, v int, ia int[], ta text[], ja jsonb[], m int[][]);
CREATE FUNCTION vg.reject() RETURNS trigger LANGUAGE plpgsql AS \$f\$
BEGIN
    IF NEW.v = 13 THEN
        RAISE EXCEPTION 'row % rejected', NEW.k;
    END IF;
    RETURN NEW;
END \$f\$;
CREATE TRIGGER reject BEFORE INSERT OR UPDATE ON vg.ci FOR EACH ROW EXECUTE FUNCTION vg.reject();
SELECT kafka_sink.create_pipeline(name => 'vgp', bootstrap_servers => '$KS_BOOTSTRAP', subscribe => ARRAY['$T'],
       target => 'vg.t', order_column => 'ts', starting_offsets => 'earliest', bronze => 'vg.raw',
       key_format => 'string', delete_on_tombstone => true, max_offsets_per_batch => 100);
SELECT kafka_sink.create_pipeline(name => 'vgpart', bootstrap_servers => '$KS_BOOTSTRAP', subscribe => ARRAY['$TP'],
       target => 'vg.partial', order_column => 'ts', starting_offsets => 'earliest', bronze => 'vg.partial_raw',
       key_format => 'string', delete_on_tombstone => true, max_offsets_per_batch => 40,
       min_offsets_per_batch => 25, max_trigger_delay => '3 s',
       kafka_options => '{"group.id": "$G"}', dead_letter_topic => '$DLQ');
SELECT kafka_sink.create_pipeline(name => 'vgci', bootstrap_servers => '$KS_BOOTSTRAP', subscribe => ARRAY['$TC'],
       target => 'vg.ci', starting_offsets => '{"$TC": {"0": -2}}', dead_letter_topic => '$DLQ');
SELECT kafka_sink.wait('vgp', '20 min');
SELECT kafka_sink.wait('vgpart', '20 min');
SELECT kafka_sink.wait('vgci', '20 min');
SELECT k COLLATE "C", v, ia, ta, ja, m FROM vg.ci ORDER BY 1;
SELECT q.reason, count(*) FROM kafka_sink.quarantine q JOIN kafka_sink.pipelines p ON p.id = q.pipeline_id
 GROUP BY 1 ORDER BY 1;
-- the trigger's rejection replayed once the trigger is gone
DROP TRIGGER reject ON vg.ci;
SELECT * FROM kafka_sink.replay_quarantine('vgci', reason => 'rejected_by_target');
ALTER TABLE vg.t DROP CONSTRAINT t_amount_check;
SELECT * FROM kafka_sink.replay_quarantine('vgp', reason => 'constraint_violation');
SELECT * FROM kafka_sink.produce('$KS_BOOTSTRAP', '$T', '3', '{"order_id":3,"ts":"2027-01-01 00:00:00+00","amount":"9"}');
SELECT kafka_sink.outbox_send('$DLQ', 'vg', '{"from": "outbox_send"}', '{"h": "1"}') IS NOT NULL;
SELECT kafka_sink.alter_pipeline('vgp', max_offsets_per_batch => 7);
SELECT kafka_sink.pause('vgp');
SELECT pg_sleep(2);
SELECT kafka_sink.resume('vgp');
CALL kafka_sink.wait_for('vgp', '20 min');
-- vgpart read again from an offset and from a time (the offsets parser, the
-- watermarks, the consumer group's offsets moved with the checkpoint)
SELECT kafka_sink.stop('vgpart');
SELECT * FROM kafka_sink.reset_offsets('vgpart', '{"$TP": {"0": 30}}');
SELECT * FROM kafka_sink.reset_offsets('vgpart', '2020-01-01 00:00:00+00');
SELECT kafka_sink.start('vgpart');
SELECT kafka_sink.wait('vgpart', '20 min');
SELECT count(*) FROM kafka_sink.status;
SELECT count(*) FROM kafka_sink.progress;
SELECT kafka_sink.last_progress('vgp') IS NOT NULL;
SELECT count(*) FROM kafka_sink.lineage('vgp', '{"order_id": 3}');
SELECT * FROM kafka_sink.message_fate('vgp', '$T', 0, 1);
SELECT fate, count(*) FROM kafka_sink.message_fates('vgpart') GROUP BY 1 ORDER BY 1;
SELECT fate, count(*) FROM kafka_sink.message_fates('vgp', '$T', 0, 0, 50) GROUP BY 1 ORDER BY 1;
SELECT count(*) > 0 FROM kafka_sink.pipeline_statements('vgpart');
SELECT count(*) > 0 FROM kafka_sink.pipeline_statements('vgp');
SELECT kafka_sink.create_lineage_view('vgp');
SELECT count(*) FROM vg.t_lineage;
SELECT kafka_sink.create_lineage_view('vgpart', view_name => 'partial_fates', raw => false);
-- wrong calls: the API's C trampoline, the catalog guard, internal functions
SELECT vg.expect_error(\$q\$SELECT kafka_sink.pause('vg_no_such_pipeline')\$q\$);
SELECT vg.expect_error(\$q\$SELECT kafka_sink.create_pipeline(name => 'bad name', bootstrap_servers => 'x')\$q\$);
SELECT vg.expect_error(\$q\$SELECT kafka_sink.alter_pipeline('vgp', max_offsets_per_batch => -1)\$q\$);
SELECT vg.expect_error(\$q\$SELECT * FROM kafka_sink.reset_offsets('vgp', '{"t": {"0": "x"}}')\$q\$);
SELECT vg.expect_error(\$q\$SELECT * FROM kafka_sink.replay_quarantine('vg_no_such_pipeline')\$q\$);
SELECT vg.expect_error(\$q\$LOCK TABLE kafka_sink.pipeline_definitions IN ACCESS EXCLUSIVE MODE\$q\$);
SELECT vg.expect_error(\$q\$LOCK TABLE kafka_sink.offsets, kafka_sink.quarantine IN SHARE MODE\$q\$);
SELECT vg.expect_error(\$q\$LOCK TABLE kafka_sink.status IN EXCLUSIVE MODE\$q\$);
SELECT vg.expect_error(\$q\$UPDATE kafka_sink.pipeline_definitions SET max_offsets_per_batch = -1 WHERE name = 'vgp'\$q\$);
SELECT vg.expect_error(\$q\$SELECT * FROM kafka_sink._batch_rows() AS s(order_id bigint)\$q\$);
SELECT vg.expect_error(\$q\$SELECT * FROM kafka_sink._batch_messages() AS m(x text)\$q\$);
SELECT vg.expect_error(\$q\$SELECT * FROM kafka_sink._replay(-1, '{}')\$q\$);
SELECT vg.expect_error(\$q\$SELECT kafka_sink._check_offsets('{"t": {"0": 1, "0": 2}}', 'starting_offsets')\$q\$);
SELECT vg.expect_error(\$q\$SELECT kafka_sink._check_offsets('2026-13-45', 'starting_offsets')\$q\$);
SELECT vg.expect_error(\$q\$SELECT kafka_sink._check_offsets('{"t": {"0": 5}}', 'ending_offsets', '{"t": {"0": 9}}')\$q\$);
SELECT vg.expect_error(\$q\$SELECT kafka_sink._check_offsets('{"t": [1]', 'starting_offsets')\$q\$);
SELECT kafka_sink.drop_pipeline('vgp');
SELECT kafka_sink.drop_pipeline('vgpart');
SELECT kafka_sink.drop_pipeline('vgci');
SQL
# the outbox relay sends what the dead-letter topic and outbox_send queued
for _ in $(seq 1 300); do
    [ "$(psql -XAtc "SELECT count(*) FROM kafka_sink.outbox WHERE delivered_at IS NULL" 2>/dev/null)" = 0 ] && break
    sleep 2
done
su "$KS_PGOSUSER" -s /bin/bash -c "$KS_PGBIN/pg_ctl -D $KS_PGDATA -m fast -w -t 300 stop" >/dev/null

# an error (or a block definitely lost: a librdkafka object never
# destroyed leaks in a long-lived worker) touches us when a frame of its
# stack is in our sources (whatever file the code is in now) or in
# librdkafka; proven false positives of others are in valgrind.supp; writes
# of uninitialised padding to WAL and relcache files are PostgreSQL's own
# (they pass through our commits too) and are skipped
srcs="$(cd src && ls -- *.c | sed 's/\.c$//' | paste -sd'|')"
ours="$(awk -v srcs="$srcs" '
    function flush() { if (blk != "" && hit && !skip) printf "%s\n", blk }
    /^==[0-9]+== ([A-Z]|[0-9,]+ bytes in [0-9,]+ blocks are definitely lost)/ { flush(); blk = $0 "\n"; hit = 0
                          skip = ($0 ~ /Syscall param (p)?write(64)?\(buf\) points to uninitialised/); next }
    /^==[0-9]+==    (at|by) / { blk = blk $0 "\n"
                                if ($0 ~ ("\\((" srcs ")\\.c:") || $0 ~ /kafka_sink\.so|librdkafka/) hit = 1
                                next }
    /^==[0-9]+== *$/ { flush(); blk = "" }
    END { flush() }' "$VG"/vg.*.log)"
total="$(grep -h 'ERROR SUMMARY' "$VG"/vg.*.log | awk '{s += $4} END {print s + 0}')"
echo "valgrind: $(ls "$VG"/vg.*.log | wc -l) processes, $total errors in all (PostgreSQL's known ones included); logs in $VG"
if [ -n "$ours" ]; then
    echo "errors through kafka_sink or librdkafka:"
    echo "$ours"
    exit 1
fi
echo "none through kafka_sink or librdkafka"
