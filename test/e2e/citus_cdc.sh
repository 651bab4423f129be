#!/usr/bin/env bash
# citus_cdc: deletes and change events against Citus distributed tables,
# and a shard move and a node added while the pipelines run.  One cluster
# of the script's own (test/lib/citus_cluster.sh: a coordinator and two
# worker nodes); softdel_model.py generates plain events (partial upserts,
# ties, tombstones, re-sent ranges) and Debezium change events (c/u/d with
# their tombstones, truncates, re-sent ranges from an older source
# position) and computes, independently of the extension, the hard target
# and the soft one (delete_mode 'soft').  Four distributed tables (plain
# and cdc, hard and soft) take them in three parts, one pipeline each
# cutting small batches: before the second part's batches end, one shard
# group moves to the other worker node (citus_move_shard_placement,
# logical replication); during the third part a third worker node is added
# and the shards rebalanced onto it.  Every table equals the model, every
# offset is checkpointed once (offsets and batches' message counts), and
# no prepared transaction or Citus transaction record is left.  Then mode
# history against a distributed table: refused at create time.  Skipped
# (with a line saying so) where ../shared/vendor has no Citus source.
. "$(dirname "$0")/../lib/common.sh"
set -E; trap 'echo "# citus_cdc.sh: line $LINENO: exit $? from: $BASH_COMMAND" >&2' ERR
. "$REPO/test/lib/citus_cluster.sh"
citus_cluster_ready citus_cdc
W="$KS_RUN/citus_cdc.$SFX"
mkdir -p "$W"
seed=$((RANDOM * 32768 + RANDOM))
[ -z "${KS_CITUS_CDC_SEED:-}" ] || seed="$KS_CITUS_CDC_SEED"
echo "# seed $seed (KS_CITUS_CDC_SEED=$seed replays it)"

# the tables: plain|cdc x hard|soft, distributed by id
table_sql() { # KIND NAME MODE
    local marks=""
    [ "$3" = soft ] && marks=", _deleted boolean NOT NULL DEFAULT false, _deleted_at timestamptz"
    if [ "$1" = plain ]; then
        echo "CREATE TABLE e2e.$2 (id bigint PRIMARY KEY, v bigint, a text, b text, c integer $marks, _kafka_offset bigint);"
    else
        echo "CREATE TABLE e2e.$2 (id int PRIMARY KEY, name text, qty int, _kafka_source_position numeric $marks, _kafka_offset bigint);"
    fi
    echo "ALTER TABLE e2e.$2 OWNER TO ks_e2e;
          SELECT create_distributed_table('e2e.$2', 'id', shard_count => 4, colocate_with => 'none');"
}
copy_sql() { # KIND NAME MODE
    local mark=""
    [ "$3" = soft ] && mark="_deleted, (extract(epoch FROM _deleted_at) * 1000)::bigint,"
    if [ "$1" = plain ]; then
        echo "COPY (SELECT id, v, a, b, c, $mark _kafka_offset FROM e2e.$2 ORDER BY id) TO STDOUT"
    else
        echo "COPY (SELECT id, name, qty, _kafka_source_position, $mark _kafka_offset FROM e2e.$2 ORDER BY id) TO STDOUT"
    fi
}
names=() kinds=() modes=() topics=()
for kind in plain cdc; do
    topic="ccdc_${kind}_$SFX"
    "$HARNESS" topic-create "$topic" 1 >/dev/null 2>&1 || true
    python3 "$E2E_DIR/softdel_model.py" gen "$kind" "$seed" "$W/msgs.$kind"
    opts="key_format => 'string', order_column => 'v', delete_on_tombstone => true"
    [ "$kind" = cdc ] && opts="envelope => 'debezium', on_truncate => 'apply'"
    for mode in hard soft; do
        maxo=3
        [ "$mode" = hard ] && maxo=1
        name="cc_${kind:0:1}${mode:0:1}_$SFX"
        names+=("$name") kinds+=("$kind") modes+=("$mode") topics+=("$topic")
        table_sql "$kind" "$name" "$mode" | sqlc >/dev/null
        sqlc >/dev/null <<SQL
SET ROLE ks_e2e;
SELECT kafka_sink.create_pipeline(name => '$name', bootstrap_servers => '$KS_BOOTSTRAP',
    subscribe => ARRAY['$topic'], target => 'e2e.$name', $opts, delete_mode => '$mode',
    starting_offsets => 'earliest', max_offsets_per_batch => $maxo, trigger_interval => '0');
SQL
    done
    seed=$((seed + 1))
done
drop_all() { local n; for n in "${names[@]}"; do sqlc -c "SELECT kafka_sink.drop_pipeline('$n', if_exists => true)" >/dev/null 2>&1; done; }
at_exit drop_all

# part PART: produce the PART-th third of each topic's messages
part() {
    local kind n from to
    for kind in plain cdc; do
        n="$(wc -l < "$W/msgs.$kind")"
        from=$(( (n * ($1 - 1)) / 3 + 1 )) to=$(( (n * $1) / 3 ))
        sed -n "${from},${to}p" "$W/msgs.$kind" | kcat -P -b "$KS_BOOTSTRAP" -t "ccdc_${kind}_$SFX" -p 0 -K $'\t' -Z
    done
}
consumed() { # PART: every pipeline consumed the first PART thirds
    local i kind n
    for i in "${!names[@]}"; do
        kind="${kinds[$i]}"
        n="$(wc -l < "$W/msgs.$kind")"
        [ "$(sqlc -c "$(done_sql "${names[$i]}" $(( (n * $1) / 3 )))")" = t ] || return 1
    done
}
placements() { sqlc -c "SELECT string_agg(nodeport::text, ',' ORDER BY shardid) FROM citus_shards WHERE table_name = 'e2e.$1'::regclass"; }

part 1
check "part 1 consumed" 0 "$(wait_for 120 consumed 1; echo $?)"
# part 2: the first shard of the plain hard table moves while its
# one-message batches run
part 2
t0="${names[0]}"
sid="$(sqlc -c "SELECT shardid FROM citus_shards WHERE table_name = 'e2e.$t0'::regclass AND nodeport = $P1 ORDER BY shardid LIMIT 1")"
before="$(placements "$t0")"
sqlc -c "SELECT citus_move_shard_placement($sid, '127.0.0.1', $P1, '127.0.0.1', $P2, shard_transfer_mode => 'force_logical')" >/dev/null
check "the shard moved while the pipeline ran (not yet caught up)" "moved|f" \
      "$([ "$(placements "$t0")" != "$before" ] && echo moved)|$(sqlc -c "$(done_sql "$t0" "$(wc -l < "$W/msgs.plain")")")"
check "part 2 consumed" 0 "$(wait_for 120 consumed 2; echo $?)"
# part 3: a third worker node added, the shards rebalanced onto it
W3="$KS_RUN/citus_cdc_w3_$SFX"
citus_node_start "$W3"
P3="$(own_port "$W3")"
sql_at "$P3" -c "CREATE EXTENSION citus" >/dev/null
sqlc -c "SELECT citus_add_node('127.0.0.1', $P3)" >/dev/null
part 3
sqlc -c "SET client_min_messages = warning" -c "SELECT citus_rebalance_start(shard_transfer_mode => 'force_logical')" >/dev/null
sqlc -c "SELECT citus_rebalance_wait()" >/dev/null
check "the rebalance put shards on the new node" t \
      "$(sqlc -c "SELECT count(*) > 0 FROM citus_shards WHERE nodeport = $P3 AND table_name::text LIKE 'e2e.cc_%'")"
check "part 3 consumed" 0 "$(wait_for 180 consumed 3; echo $?)"

# the tables equal the model
for kind in plain cdc; do
    topic="ccdc_${kind}_$SFX"
    kcat -C -b "$KS_BOOTSTRAP" -t "$topic" -p 0 -o beginning -e -q -f '%o\t%T\n' > "$W/ts.$kind"
    python3 "$E2E_DIR/softdel_model.py" expect "$kind" "$W/msgs.$kind" "$W/ts.$kind" "$W/soft.$kind" "$W/hard.$kind"
done
for i in "${!names[@]}"; do
    name="${names[$i]}" kind="${kinds[$i]}" mode="${modes[$i]}"
    n="$(wc -l < "$W/msgs.$kind")"
    sqlc -c "$(copy_sql "$kind" "$name" "$mode")" > "$W/actual.$name"
    check_model "$name ($kind, $mode) equals the model ($n messages)" "$W/$mode.$kind" "$W/actual.$name"
    check "$name: every offset checkpointed once, in batches holding every message once, nothing quarantined" "$n|$n|0" \
          "$(sqlc -c "SELECT (SELECT sum(o.next_offset) FROM kafka_sink.offsets o WHERE o.pipeline_id = p.id) || '|' ||
                             (SELECT sum(b.messages) FROM kafka_sink.batches b WHERE b.pipeline_id = p.id) || '|' ||
                             (SELECT count(*) FROM kafka_sink.quarantine q WHERE q.pipeline_id = p.id)
                        FROM kafka_sink.pipeline_definitions p WHERE p.name = '$name'")"
    # soft: the upserts that brought a marked row back, once per mark (the
    # model's revivals, whatever the batch split), recorded as many
    [ "$mode" = soft ] && check "$name: batches.revived and revived_offsets count the model's revivals" \
          "$(cat "$W/soft.$kind.revivals")|$(cat "$W/soft.$kind.revivals")" \
          "$(sqlc -c "SELECT (SELECT coalesce(sum(b.revived), 0) FROM kafka_sink.batches b WHERE b.pipeline_id = p.id) || '|' ||
                             (SELECT count(*) FROM kafka_sink.revived_offsets ro, unnest(ro.offsets) WHERE ro.pipeline_id = p.id)
                        FROM kafka_sink.pipeline_definitions p WHERE p.name = '$name'")"
done
check "the model marked rows and deleted rows (the test can fail)" t \
      "$([ "$(cat "$W/soft.plain.marks")" -gt 0 ] && [ "$(cat "$W/soft.cdc.marks")" -gt 0 ] && echo t || echo f)"
check "the coordinator's shell tables hold nothing" 0 \
      "$(sqlc -c "SELECT sum(pg_relation_size(('e2e.' || n)::regclass)) FROM unnest(ARRAY['$(IFS=,; echo "${names[*]}" | sed "s/,/','/g")']) n")"
sqlc -c "SELECT recover_prepared_transactions()" >/dev/null
check "no prepared transaction on any node" "0|0|0|0" \
      "$(sql_at "$P1" -c "SELECT count(*) FROM pg_prepared_xacts")|$(sql_at "$P2" -c "SELECT count(*) FROM pg_prepared_xacts")|$(sql_at "$P3" -c "SELECT count(*) FROM pg_prepared_xacts")|$(sqlc -c "SELECT count(*) FROM pg_prepared_xacts")"
check "no pending Citus transaction record" 0 "$(sqlc -c "SELECT count(*) FROM pg_dist_transaction")"
check "the pipelines run" "running" \
      "$(sqlc -c "SELECT string_agg(DISTINCT state, '|') FROM kafka_sink.status WHERE name LIKE 'cc\_%\_$SFX'")"

# mode history into a distributed table
sqlc >/dev/null <<SQL
CREATE TABLE e2e.cch_$SFX (id bigint NOT NULL, ts timestamptz NOT NULL, a text,
                           _valid_from timestamptz NOT NULL, _valid_to timestamptz,
                           _deleted boolean NOT NULL DEFAULT false, _is_current boolean,
                           PRIMARY KEY (id, _valid_from));
ALTER TABLE e2e.cch_$SFX OWNER TO ks_e2e;
SELECT create_distributed_table('e2e.cch_$SFX', 'id');
SQL
check "mode history into a distributed table: refused at create time" \
      "ERROR:  target e2e.cch_$SFX is a Citus table, which mode history does not write" \
      "$(sqlc -c "SET ROLE ks_e2e" -c "SELECT kafka_sink.create_pipeline(name => 'cch_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
           subscribe => ARRAY['x'], target => 'e2e.cch_$SFX', mode => 'history', order_column => 'ts',
           key_format => 'string', start => false)" 2>&1 | head -1 || true)"
check "and no pipeline created" 0 "$(sqlc -c "SELECT count(*) FROM kafka_sink.pipeline_definitions WHERE name = 'cch_$SFX'")"
# a history pipeline whose local table is distributed afterwards: the
# worker refuses it with the same reason (not Citus's error at a batch)
"$HARNESS" topic-create "cch2_$SFX" 1 >/dev/null 2>&1 || true
printf '1\t{"id": 1, "ts": "2026-01-01T00:00:00Z", "a": "x"}\n' | kcat -P -b "$KS_BOOTSTRAP" -t "cch2_$SFX" -p 0 -K $'\t'
sqlc >/dev/null <<SQL
CREATE TABLE e2e.cch2_$SFX (LIKE e2e.cch_$SFX INCLUDING ALL);
ALTER TABLE e2e.cch2_$SFX OWNER TO ks_e2e;
SET ROLE ks_e2e;
SELECT kafka_sink.create_pipeline(name => 'cch2_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
    subscribe => ARRAY['cch2_$SFX'], target => 'e2e.cch2_$SFX', mode => 'history', order_column => 'ts',
    key_format => 'string', starting_offsets => 'earliest', start => false);
RESET ROLE;
SELECT create_distributed_table('e2e.cch2_$SFX', 'id');
SET ROLE ks_e2e;
SELECT kafka_sink.start('cch2_$SFX');
SQL
names+=("cch2_$SFX")
PGPORT="$PC" poll "SELECT state = 'failed' FROM kafka_sink.status WHERE name = 'cch2_$SFX'" 60 || true
check "distributed after create: the worker refuses mode history with the reason" \
      "failed|target e2e.cch2_$SFX of pipeline \"cch2_$SFX\" is a Citus table, which mode history does not write|0" \
      "$(sqlc -c "SELECT state || '|' || last_error FROM kafka_sink.status WHERE name = 'cch2_$SFX'")|$(sqlc -c "SELECT count(*) FROM e2e.cch2_$SFX")"
finish
