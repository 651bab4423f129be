#!/usr/bin/env bash
# ha: a streaming replica takes over.
# On a primary of its own (the shared cluster is left alone: a promoted
# replica's old primary cannot come back without pg_rewind), a merge and an
# append pipeline ingest; a replica made with pg_basebackup -R follows it.
#  - on the hot standby no kafka_sink launcher and no worker runs, the
#    catalog and the data are replicated, and changing a pipeline is refused;
#  - the primary is stopped with -m immediate while messages keep coming,
#    the standby is promoted: its launcher starts the pipelines' workers,
#    which resume exactly at the replicated checkpoint (whatever the replica
#    had received): the merge target equals the model, the append target
#    holds every message exactly once (no duplicate, no gap), the batch
#    ranges are contiguous across the failover and the checkpoint reaches
#    the high watermarks.
# Both clusters are this script's own and are stopped at the end.
. "$(dirname "$0")/../lib/common.sh"
PRIM="$KS_RUN/ha_primary_$SFX"
STBY="$KS_RUN/ha_standby_$SFX"
T="e2e_ha_$SFX"
# at exit: the background producer, then the standby, then the primary
own_register "$PRIM"
own_register "$STBY"
stop_producer() { [ -n "${PRODUCER:-}" ] && kill "$PRODUCER" 2>/dev/null && wait "$PRODUCER" 2>/dev/null; }
at_exit stop_producer

# ---- the primary --------------------------------------------------------------------------
KS_PG_CONF="wal_level = replica
max_wal_senders = 5
wal_keep_size = '256MB'" own_cluster_start "$PRIM"
P1="$(own_port "$PRIM")"
s1() { sql_at "$P1" "$@"; }
PGPORT="$P1" setup_owner >/dev/null
PGPORT="$P1" poll "SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'kafka_sink launcher'" 30 || true
check "the primary allows replication connections (pg_hba)" t \
      "$(s1 -c "SELECT count(*) > 0 FROM pg_hba_file_rules WHERE 'replication' = ANY (database) AND address = '127.0.0.1'")"

"$HARNESS" topic-create "$T" 3 >/dev/null 2>&1
# message n (1-based, produced in order): key k = n % 50, {"k": k, "n": n}
NEXT=1
produce_upto() {  # produce_upto LAST
    produce_py "$T" "
for n in range($NEXT, $1 + 1):
    print('%d|{\"k\":%d,\"n\":%d}' % (n % 50, n % 50, n))"
    NEXT=$(($1 + 1))
}
produce_upto 2000
s1 >/dev/null <<SQL
CREATE TABLE e2e.ha_cur_$SFX (k int PRIMARY KEY, n int NOT NULL);
CREATE TABLE e2e.ha_log_$SFX (k int, n int, _kafka_partition int, _kafka_offset bigint);
ALTER TABLE e2e.ha_cur_$SFX OWNER TO ks_e2e;
ALTER TABLE e2e.ha_log_$SFX OWNER TO ks_e2e;
SET ROLE ks_e2e;
SELECT kafka_sink.create_pipeline(name => 'ha_cur', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$T'], target => 'e2e.ha_cur_$SFX', order_column => 'n',
       starting_offsets => 'earliest', max_offsets_per_batch => 150);
SELECT kafka_sink.create_pipeline(name => 'ha_log', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$T'], target => 'e2e.ha_log_$SFX', mode => 'append',
       starting_offsets => 'earliest', max_offsets_per_batch => 100);
SQL
check "primary: both pipelines catch up" "t|t" \
      "$(s1 -c "SELECT kafka_sink.wait('ha_cur', '60 s')")|$(s1 -c "SELECT kafka_sink.wait('ha_log', '60 s')")"

# ---- the standby ----------------------------------------------------------------------------
KS_RUN="$STBY" "$HARNESS" env >/dev/null 2>&1     # chooses its data dir and port
SDATA="$(cat "$STBY/pgroot")/data"
t0=$SECONDS
as_pg "$KS_PGBIN/pg_basebackup" -h 127.0.0.1 -p "$P1" -U "$PGUSER" -D "$SDATA" -R -X stream -c fast \
    > "$STBY/basebackup.log" 2>&1 || cat "$STBY/basebackup.log" >&2
check "pg_basebackup -R from the primary" t "$([ -f "$SDATA/standby.signal" ] && echo t || echo f)"
KS_PG_CONF="hot_standby = on" own_cluster_start "$STBY"
P2="$(own_port "$STBY")"
s2() { sql_at "$P2" "$@"; }
echo "# standby up in $((SECONDS - t0)) s (primary :$P1, standby :$P2)"
check "the standby is in recovery, streaming from the primary" "t|streaming" \
      "$(s2 -c "SELECT pg_is_in_recovery()")|$(s2 -c "SELECT status FROM pg_stat_wal_receiver")"
# ingestion goes on while the standby follows
produce_upto 3000
check "primary: caught up again" "t|t" \
      "$(s1 -c "SELECT kafka_sink.wait('ha_cur', '60 s')")|$(s1 -c "SELECT kafka_sink.wait('ha_log', '60 s')")"
lsn="$(s1 -c "SELECT pg_current_wal_lsn()")"
PGPORT="$P2" poll "SELECT pg_last_wal_replay_lsn() >= '$lsn'" 30 || true
check "standby: the data and the checkpoint are replicated" "$(s1 -c "SELECT count(*) FROM e2e.ha_log_$SFX")|$(s1 -c "SELECT sum(next_offset) FROM kafka_sink.offsets")" \
      "$(s2 -c "SELECT count(*) FROM e2e.ha_log_$SFX")|$(s2 -c "SELECT sum(next_offset) FROM kafka_sink.offsets")"
sleep 2   # the launcher naptime is 1 s: it would have started by now
check "standby: no kafka_sink launcher and no worker runs" "0|0" \
      "$(s2 -c "SELECT count(*) FILTER (WHERE backend_type = 'kafka_sink launcher') || '|' || count(*) FILTER (WHERE backend_type = 'kafka_sink worker') FROM pg_stat_activity")"
check "standby: status is readable and shows no worker" "ha_cur|running||ha_log|running|" \
      "$(s2 -c "SELECT string_agg(name || '|' || state || '|' || coalesce(array_to_string(worker_pids, ','), ''), '|' ORDER BY name) FROM kafka_sink.status")"
check "standby: changing a pipeline is refused (read-only transaction)" 25006 \
      "$(PGPORT="$P2" psql -X -A -t -q -v VERBOSITY=sqlstate -c "SELECT kafka_sink.stop('ha_cur')" 2>&1 | sed -n 's/^ERROR: *\([0-9A-Z]\{5\}\).*/\1/p')"

# ---- failover -------------------------------------------------------------------------------
# messages keep coming while the primary dies: the standby has whatever it
# received, maybe less than the primary committed
# (3000 messages over about 1.5 s)
( python3 -u -c "
import sys, time
for n in range(3001, 6001):
    print('%d|{\"k\":%d,\"n\":%d}' % (n % 50, n % 50, n))
    if n % 100 == 0:
        sys.stdout.flush(); time.sleep(0.05)" | kcat -P -b "$KS_BOOTSTRAP" -t "$T" -K '|' ) &
PRODUCER=$!
sleep 0.7
own_cluster_kill "$PRIM"
wait "$PRODUCER"; PRODUCER=
NEXT=6001
check "the primary is gone" f "$(PGPORT="$P1" pg_isready -q -h 127.0.0.1 && echo t || echo f)"
# what the standby had: its checkpoint and its last batch ids
sleep 1
repl_offsets() { s2 -c "SELECT string_agg(p.name || ':' || o.partition || ':' || o.next_offset, ' ' ORDER BY p.name, o.partition) FROM kafka_sink.offsets o JOIN kafka_sink.pipeline_definitions p ON p.id = o.pipeline_id"; }
C0="$(repl_offsets)"
B0="$(s2 -c "SELECT string_agg(name || ':' || last_batch_id, ' ' ORDER BY name) FROM kafka_sink.pipeline_definitions")"
echo "# replicated checkpoint at failover: $C0 (last batches $B0)"
produce_upto 6500        # more while there is no primary at all
as_pg "$KS_PGBIN/pg_ctl" -D "$SDATA" promote -w > /dev/null
check "the standby is promoted" f "$(s2 -c "SELECT pg_is_in_recovery()")"
PGPORT="$P2" poll "SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'kafka_sink launcher'" 30 || true
check "after promotion the launcher starts" 1 "$(s2 -c "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'kafka_sink launcher'")"
PGPORT="$P2" poll "SELECT count(*) = 2 FROM pg_stat_activity WHERE backend_type = 'kafka_sink worker'" 30 || true
check "and the pipelines' workers" 2 "$(s2 -c "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'kafka_sink worker'")"
produce_upto 7000        # and more after the promotion
check "promoted: both pipelines catch up" "t|t" \
      "$(s2 -c "SELECT kafka_sink.wait('ha_cur', '90 s')")|$(s2 -c "SELECT kafka_sink.wait('ha_log', '90 s')")"

TOTAL=7000
check "append: every message exactly once (no duplicate, no gap)" "$TOTAL|$TOTAL|1|$TOTAL|$TOTAL" \
      "$(s2 -c "SELECT count(*) || '|' || count(DISTINCT n) || '|' || min(n) || '|' || max(n) || '|' || count(DISTINCT (_kafka_partition, _kafka_offset)) FROM e2e.ha_log_$SFX")"
model="$(python3 -c "
last = {}
for n in range(1, $TOTAL + 1):
    last[n % 50] = n
print(','.join('%d:%d' % (k, last[k]) for k in sorted(last)))")"
check "merge: the target equals the model (the latest n of each key)" "$model" \
      "$(s2 -c "SELECT string_agg(k || ':' || n, ',' ORDER BY k) FROM e2e.ha_cur_$SFX")"
hw="$(high_watermarks "$T")"
offs() { s2 -c "SELECT string_agg(o.partition || ':' || o.next_offset, ' ' ORDER BY o.partition) FROM kafka_sink.offsets o JOIN kafka_sink.pipeline_definitions p ON p.id = o.pipeline_id WHERE p.name = '$1'"; }
check "the checkpoints are at the high watermarks" "$hw|$hw" "$(offs ha_cur)|$(offs ha_log)"
# the first batch after the failover starts each partition exactly at the
# replicated checkpoint
first_after="$(s2 -c "SELECT string_agg(x.name || ':' || x.p || ':' || x.s, ' ' ORDER BY x.name, x.p) FROM (
        SELECT p.name, (r->>'partition')::int AS p, min((r->>'start')::bigint) AS s
          FROM kafka_sink.batches b JOIN kafka_sink.pipeline_definitions p ON p.id = b.pipeline_id,
               jsonb_array_elements(b.ranges) r,
               (SELECT split_part(v, ':', 1) AS name, split_part(v, ':', 2)::bigint AS last
                  FROM unnest(string_to_array('$B0', ' ')) v) b0
         WHERE b0.name = p.name AND b.batch_id > b0.last
         GROUP BY 1, 2) x")"
check "after the failover each partition resumed exactly at the replicated checkpoint" "$C0" "$first_after"
check "batch ranges are contiguous from offset 0, across the failover" 0 \
      "$(s2 -c "SELECT count(*) FROM (
            SELECT (r->>'start')::bigint AS s,
                   coalesce(lag((r->>'end')::bigint) OVER (PARTITION BY b.pipeline_id, r->>'partition' ORDER BY b.batch_id), 0) AS prev_end
              FROM kafka_sink.batches b, jsonb_array_elements(b.ranges) r
             WHERE (r->>'end')::bigint > (r->>'start')::bigint) x
          WHERE s <> prev_end")"
check "batch ids have no gap across the failover" "0|0" \
      "$(s2 -c "SELECT max(batch_id) - min(batch_id) + 1 - count(*) FROM kafka_sink.batches GROUP BY pipeline_id ORDER BY pipeline_id" | paste -sd'|')"

own_cluster_stop "$STBY"
check "the promoted cluster is stopped" f "$(PGPORT="$P2" pg_isready -q -h 127.0.0.1 && echo t || echo f)"
finish
