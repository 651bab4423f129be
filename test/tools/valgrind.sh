#!/usr/bin/env bash
# test/tools/valgrind.sh — runs PostgreSQL under valgrind (memcheck, every
# backend and background worker) through a pipeline's life, and reports
# the errors whose stack passes through kafka_sink.so or librdkafka.
#
#   bash test/tools/valgrind.sh          (KS_RUN defaults to <repo>/.run-valgrind)
#
# Not part of the test suite (it takes a few minutes and PostgreSQL's own
# build reports known false positives under memcheck: WAL and relcache
# init files written with padding bytes, an overlapping memcpy in the
# regex cache).  The pipeline: merge with bronze, key from the message key,
# tombstones, bad JSON, bad values and CHECK violations (quarantine), replay,
# produce(), alter_pipeline (workers restart), pause/resume, wait_for(),
# status, progress, message_fate.  Exit status 1 when an error touches our
# code or librdkafka.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
export KS_RUN="${KS_RUN:-$REPO/.run-valgrind}"
H="$REPO/test/harness.sh"
command -v valgrind >/dev/null || apt-get install -y -q valgrind >/dev/null
cd "$REPO"
make -s && make -s install >/dev/null
"$H" kafka-start >/dev/null
"$H" pg-start >/dev/null        # initdb and the harness's configuration
"$H" pg-stop >/dev/null
set -a; . "$KS_RUN/env"; set +a
VG="$KS_RUN/valgrind"
rm -rf "$VG"; mkdir -p "$VG"; chown "$KS_PGOSUSER" "$VG"
trap '"$H" stop-all >/dev/null 2>&1 || true' EXIT
su "$KS_PGOSUSER" -s /bin/bash -c "nohup valgrind --trace-children=yes --num-callers=30 \
    --log-file=$VG/vg.%p.log $KS_PGBIN/postgres -D $KS_PGDATA > $VG/postgres.out 2>&1 &"
for _ in $(seq 1 120); do psql -XAtc "SELECT 1" >/dev/null 2>&1 && break; sleep 1; done

T="vg.orders.$$"
"$H" topic-create "$T" 2 >/dev/null
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
psql -X -q -v ON_ERROR_STOP=1 <<SQL
CREATE EXTENSION IF NOT EXISTS kafka_sink;
DO \$\$ BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'ks_vg') THEN CREATE ROLE ks_vg LOGIN; END IF;
END \$\$;
GRANT kafka_sink_admin TO ks_vg;
DROP SCHEMA IF EXISTS vg CASCADE;
CREATE SCHEMA vg AUTHORIZATION ks_vg;
SET ROLE ks_vg;
CREATE TABLE vg.t (order_id bigint PRIMARY KEY, ts timestamptz, amount numeric(10,2) CHECK (amount < 250),
                   nested jsonb, _kafka_topic text, _kafka_partition int, _kafka_offset bigint, _kafka_batch_id bigint);
SELECT kafka_sink.create_pipeline(name => 'vgp', bootstrap_servers => '$KS_BOOTSTRAP', subscribe => ARRAY['$T'],
       target => 'vg.t', order_column => 'ts', starting_offsets => 'earliest', bronze => 'vg.raw',
       key_format => 'string', delete_on_tombstone => true, max_offsets_per_batch => 100);
SELECT kafka_sink.wait('vgp', '10 min');
ALTER TABLE vg.t DROP CONSTRAINT t_amount_check;
SELECT * FROM kafka_sink.replay_quarantine('vgp', reason => 'constraint_violation');
SELECT * FROM kafka_sink.produce('$KS_BOOTSTRAP', '$T', '3', '{"order_id":3,"ts":"2027-01-01 00:00:00+00","amount":"9"}');
SELECT kafka_sink.alter_pipeline('vgp', max_offsets_per_batch => 7);
SELECT kafka_sink.pause('vgp');
SELECT pg_sleep(2);
SELECT kafka_sink.resume('vgp');
CALL kafka_sink.wait_for('vgp', '10 min');
SELECT count(*) FROM kafka_sink.status;
SELECT count(*) FROM kafka_sink.progress;
SELECT kafka_sink.last_progress('vgp') IS NOT NULL;
SELECT count(*) FROM kafka_sink.lineage('vgp', '{"order_id": 3}');
SELECT * FROM kafka_sink.message_fate('vgp', '$T', 0, 1);
SELECT kafka_sink.drop_pipeline('vgp');
SQL
su "$KS_PGOSUSER" -s /bin/bash -c "$KS_PGBIN/pg_ctl -D $KS_PGDATA -m fast -w -t 120 stop" >/dev/null

# an error touches us when a frame of its stack is in our sources or in
# librdkafka; writes of uninitialised padding to WAL and relcache files are
# PostgreSQL's own (they pass through our commits too) and are skipped
ours="$(awk '
    function flush() { if (blk != "" && hit && !skip) printf "%s\n", blk }
    /^==[0-9]+== [A-Z]/ { flush(); blk = $0 "\n"; hit = 0
                          skip = ($0 ~ /Syscall param (p)?write(64)?\(buf\) points to uninitialised/); next }
    /^==[0-9]+==    (at|by) / { blk = blk $0 "\n"
                                if ($0 ~ /\((api|apply|catalog|consumer|decode|guc|jsonwalk|kafka_sink|launcher|outbox|shmem|worker)\.c:|librdkafka/) hit = 1
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
