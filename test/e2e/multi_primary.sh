#!/usr/bin/env bash
# multi_primary: two independent PostgreSQL clusters share one topic.
# Each runs a pipeline of the same name with assign => half of a
# 4-partition topic ({"t":[0,1]} and {"t":[2,3]}).  Messages are produced by
# key; together the two targets hold every key exactly once (union = all
# keys, intersection empty), each only from its own partitions, and each
# checkpoint covers only its own partitions, up to the high watermarks.
# The second cluster is stopped and started again in the middle: it resumes
# from its own checkpoint.  The second cluster is this script's own, and is
# stopped at the end.
. "$(dirname "$0")/../lib/common.sh"
setup_owner
T="e2e_mp_$SFX"
P="mp_$SFX"
SECOND="$KS_RUN/multi_primary_$SFX"
# at exit: the pipeline on the shared cluster, then the second cluster
own_cluster_start "$SECOND"
drop_pipeline() { sql -c "SELECT kafka_sink.drop_pipeline('$P', if_exists => true)" >/dev/null 2>&1; }
at_exit drop_pipeline
PORT2="$(own_port "$SECOND")"
sql2() { sql_at "$PORT2" "$@"; }
# the launcher of a new cluster starts once kafka_sink.database exists
PGPORT="$PORT2" poll "SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'kafka_sink launcher'" 30 || true
check "two clusters, each with its own launcher" "1|1|t" \
      "$(sql -c "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'kafka_sink launcher'")|$(sql2 -c "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'kafka_sink launcher'")|$([ "$PORT2" != "$PGPORT" ] && echo t || echo f)"
PGPORT="$PORT2" setup_owner >/dev/null

"$HARNESS" topic-create "$T" 4 >/dev/null 2>&1
produce_keys() {  # FROM TO [ROUND]: key k, value {"k": k, "round": r}
    produce_py "$T" "
for k in range($1, $2 + 1):
    print('k%d|{\"k\":\"k%d\",\"round\":${3:-1}}' % (k, k))"
}
produce_keys 1 1000

create_sql() {  # create_sql PARTITIONS_JSON_ARRAY
    cat <<SQL
CREATE TABLE e2e.mp_$SFX (k text PRIMARY KEY, round int, _kafka_partition int, _kafka_offset bigint);
ALTER TABLE e2e.mp_$SFX OWNER TO ks_e2e;
SET ROLE ks_e2e;
SELECT kafka_sink.create_pipeline(name => '$P', bootstrap_servers => '$KS_BOOTSTRAP',
       assign => '{"$T": $1}', target => 'e2e.mp_$SFX', starting_offsets => 'earliest',
       max_offsets_per_batch => 200);
SQL
}
create_sql "[0, 1]" | sql >/dev/null
create_sql "[2, 3]" | sql2 >/dev/null
check "both caught up" "t|t" \
      "$(sql -c "SELECT kafka_sink.wait('$P', '60 s')")|$(sql2 -c "SELECT kafka_sink.wait('$P', '60 s')")"

keys_of() { "$@" -c "SELECT k FROM e2e.mp_$SFX ORDER BY k"; }
verify() {  # verify LABEL EXPECTED_TOTAL
    local a="$KS_RUN/mp_a_$SFX" b="$KS_RUN/mp_b_$SFX"
    keys_of sql > "$a"
    keys_of sql2 > "$b"
    check "$1: the union is every key produced" "$2" "$(sort -u "$a" "$b" | grep -c .)"
    check "$1: no key is in both clusters" 0 "$(sort "$a" "$b" | uniq -d | grep -c . || true)"
    check "$1: each row once (rows in both == keys)" "$2" "$(( $(grep -c . < "$a") + $(grep -c . < "$b") ))"
    check "$1: each cluster only holds its own partitions" "0,1|2,3" \
          "$(sql -c "SELECT string_agg(DISTINCT _kafka_partition::text, ',' ORDER BY _kafka_partition::text) FROM e2e.mp_$SFX")|$(sql2 -c "SELECT string_agg(DISTINCT _kafka_partition::text, ',' ORDER BY _kafka_partition::text) FROM e2e.mp_$SFX")"
    rm -f "$a" "$b"
}
verify "1000 keys" 1000
check "both clusters got a share of the keys" t \
      "$(sql -c "SELECT count(*) BETWEEN 100 AND 900 FROM e2e.mp_$SFX")"
hw="$(high_watermarks "$T")"
offs() { "$@" -c "SELECT string_agg(o.partition || ':' || o.next_offset, ' ' ORDER BY o.partition) FROM kafka_sink.offsets o JOIN kafka_sink.pipelines p ON p.id = o.pipeline_id WHERE p.name = '$P'"; }
check "the two checkpoints split the partitions and reach the high watermarks" "$hw" "$(offs sql) $(offs sql2)"
check "batch markers count every message of each half" "$(sql -c "SELECT sum(next_offset) FROM kafka_sink.offsets o JOIN kafka_sink.pipelines p ON p.id = o.pipeline_id WHERE p.name = '$P'")|$(sql2 -c "SELECT sum(next_offset) FROM kafka_sink.offsets o JOIN kafka_sink.pipelines p ON p.id = o.pipeline_id WHERE p.name = '$P'")" \
      "$(sql -c "SELECT sum(messages) FROM kafka_sink.batches b JOIN kafka_sink.pipelines p ON p.id = b.pipeline_id WHERE p.name = '$P'")|$(sql2 -c "SELECT sum(messages) FROM kafka_sink.batches b JOIN kafka_sink.pipelines p ON p.id = b.pipeline_id WHERE p.name = '$P'")"

# ---- the second cluster goes away while messages keep coming --------------------------
produce_keys 1 1500 2 &
sleep 0.5
own_cluster_stop "$SECOND"
wait
own_cluster_start "$SECOND"
check "after the second cluster's restart, both catch up" "t|t" \
      "$(sql -c "SELECT kafka_sink.wait('$P', '60 s')")|$(sql2 -c "SELECT kafka_sink.wait('$P', '90 s')")"
verify "1500 keys, second round" 1500
check "every key has its latest value (round 2) in exactly one cluster" 1500 \
      "$(( $(sql -c "SELECT count(*) FROM e2e.mp_$SFX WHERE round = 2") + $(sql2 -c "SELECT count(*) FROM e2e.mp_$SFX WHERE round = 2") ))"
hw="$(high_watermarks "$T")"
check "the checkpoints reach the new high watermarks" "$hw" "$(offs sql) $(offs sql2)"
check "no batch of the second cluster read a range twice" 0 \
      "$(sql2 -c "SELECT count(*) FROM (SELECT r->>'partition' p, (r->>'start')::bigint s, (r->>'end')::bigint e,
                                           lag((r->>'end')::bigint) OVER (PARTITION BY r->>'partition' ORDER BY (r->>'start')::bigint) prev_end
                                      FROM kafka_sink.batches b JOIN kafka_sink.pipelines p ON p.id = b.pipeline_id, jsonb_array_elements(b.ranges) r
                                     WHERE p.name = '$P' AND (r->>'end')::bigint > (r->>'start')::bigint) x
                  WHERE prev_end IS NOT NULL AND prev_end <> s")"

sql2 -c "SELECT kafka_sink.drop_pipeline('$P')" >/dev/null
own_cluster_stop "$SECOND"
check "the second cluster is stopped" f \
      "$(PGPORT="$PORT2" pg_isready -q -h 127.0.0.1 && echo t || echo f)"
finish
