# test/bench/cdc_part.sh — the bench's CDC rows (issue 16); sourced by
# test/bench/run.sh (its helpers: say, die, put, psu, pso, PY, W, LOG, H,
# OWNER, start_sampler, stop_sampler, worker_pids, proc_cpu, proc_hwm,
# machine_busy, loadavg, sub), never run on its own:
#
#   KS_BENCH_PARTS=cdc make bench       only this part (a few minutes here)
#
# 1. The change topics, produced once (kept for later runs while the source
#    and the topics still match): test/tools/debezium_source.sh starts a
#    source PostgreSQL cluster under the run dir and Debezium's PostgreSQL
#    connector on Kafka Connect standalone (JsonConverter with
#    schemas.enable=true: the JDBC sink needs the schema);
#    test/tools/cdc_workload.py creates cdc.{accounts,products,order_lines}
#    with BENCH_CDC_ROWS rows each (the snapshot, op r), then
#    BENCH_CDC_OPS operations (inserts, updates, deletes, primary-key
#    changes, and in every 20,000 operations one truncate, of each table in
#    turn; both sinks apply truncates) in 1-4 statement transactions.
#    Connect stops when the topics hold every expected event; the source
#    stays up for the comparisons.
# 2. ours: one pipeline, envelope => 'debezium', subscribe_pattern over the
#    three topics, target => 'bench_cdc.{source.table}' (tables: the
#    source's columns + _kafka_source_position numeric),
#    max_offsets_per_batch 50000; timed from create_pipeline until the
#    checkpoint holds every offset (as the orders rows).
# 3. the peer: Kafka Connect + the Debezium JDBC sink on the SAME topics
#    (test/bench/debezium_peer.sh cdc: upsert, delete.enabled,
#    truncate.enabled), into public.bench_cdc_dbz_{table}.
# Both replicas are compared with the source by test/tools/cdc_compare.py;
# the table prints each one's msgs/s, the ratio, and the comparison.
#
# Knobs: BENCH_CDC_ROWS (10000), BENCH_CDC_OPS (40000), BENCH_CDC_SEED (7).

CDC_ROWS="${BENCH_CDC_ROWS:-10000}"
CDC_OPS="${BENCH_CDC_OPS:-40000}"
CDC_SEED="${BENCH_CDC_SEED:-7}"
CDC_SRC="$REPO/test/tools/debezium_source.sh"
CDC_TAG="r${CDC_ROWS}_o${CDC_OPS}_s${CDC_SEED}_t"   # _t: with truncates
export DBZ_DIR="$KS_RUN/cdc_source" DBZ_NAME=bench_cdc DBZ_TOPIC_PREFIX="bench_cdc_$CDC_TAG" \
       DBZ_CONVERTER=json DBZ_DB=cdc_bench DBZ_FLUSH_MS=1000 KS_HARNESS="$H"
CDC_REGEX="bench_cdc_${CDC_TAG}[.]cdc[.].*"

cdc_stop_source() { "$CDC_SRC" stop >> "$LOG" 2>&1 || true; }

# cdc_replica_ddl SCHEMA PREFIX POSITION(0|1): CREATE TABLE statements for
# SCHEMA.PREFIX<table> with the source's columns (and the position column)
cdc_replica_ddl() {
    psql -X -A -t -q -v ON_ERROR_STOP=1 -d "$DBZ_SRC_CONNINFO" -c "
        SELECT format('CREATE TABLE %I.%I (%s%s, PRIMARY KEY (%s));', '$1', '$2' || c.relname,
                      (SELECT string_agg(format('%I %s%s', a.attname, format_type(a.atttypid, a.atttypmod),
                                                CASE WHEN a.attnotnull THEN ' NOT NULL' ELSE '' END), ', ' ORDER BY a.attnum)
                         FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped),
                      CASE WHEN $3 = 1 THEN ', _kafka_source_position numeric' ELSE '' END,
                      (SELECT string_agg(format('%I', a.attname), ', ' ORDER BY array_position(i.indkey::int2[], a.attnum))
                         FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)
                        WHERE i.indrelid = c.oid AND i.indisprimary))
          FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = 'cdc' AND c.relkind = 'r' ORDER BY c.relname"
}
cdc_compare() {  # cdc_compare TARGET_TEMPLATE KEY: cdc_compare.py's verdict into KEY.equal
    local out="$W/$2.compare" rc=0
    python3 "$REPO/test/tools/cdc_compare.py" --source "$DBZ_SRC_CONNINFO" \
        --replica "host=$PGHOST port=$PGPORT dbname=$PGDATABASE user=$PGUSER" --target "$1" \
        > "$out" 2>&1 || rc=$?
    cat "$out" >> "$LOG"
    if [ $rc = 0 ]; then
        put "$2.equal" yes
    else
        put "$2.equal" "no ($(grep -c ': key ' "$out" || true) rows differ)"
    fi
}
cdc_total() {   # messages in the change topics
    "$CDC_SRC" topics 2>/dev/null | awk '{s += $2} END {print s + 0}'
}

cdc_produce() {
    local E="$W/cdc.expect.json" n i per=20000 done_ops=0 seed chunk=0
    local trunc=(order_lines accounts products)
    say "cdc: producing the change topics once: $CDC_ROWS rows per table (snapshot) + $CDC_OPS operations through Debezium"
    "$CDC_SRC" clean >> "$LOG" 2>&1 || true
    rm -f "$E" "$W/cdc.ok"
    "$CDC_SRC" start-source >> "$LOG" 2>&1 || die "cdc: the source cluster did not start (see $LOG)"
    eval "$("$CDC_SRC" env)"
    python3 "$REPO/test/tools/cdc_workload.py" --conninfo "$DBZ_SRC_CONNINFO" --seed "$CDC_SEED" --expect "$E" \
        init --rows "$CDC_ROWS" >> "$LOG" 2>&1 || die "cdc: workload init failed (see $LOG)"
    "$CDC_SRC" start >> "$LOG" 2>&1 || die "cdc: Debezium did not start (see $LOG)"
    seed="$CDC_SEED"
    while [ "$done_ops" -lt "$CDC_OPS" ]; do
        i=$(( CDC_OPS - done_ops < per ? CDC_OPS - done_ops : per ))
        seed=$((seed + 1))
        python3 "$REPO/test/tools/cdc_workload.py" --conninfo "$DBZ_SRC_CONNINFO" --seed "$seed" --expect "$E" \
            run --ops "$i" --truncate "${trunc[chunk % 3]}" >> "$LOG" 2>&1 || die "cdc: workload run failed (see $LOG)"
        done_ops=$((done_ops + i))
        chunk=$((chunk + 1))
    done
    n="$(python3 -c 'import json, sys
e = json.load(open(sys.argv[1]))
print(sum(t.get("snapshot_rows", 0) + sum(t.get(k, 0) for k in ("c", "u", "d", "t", "tombstones")) for t in e.values()))' "$E")"
    local deadline=$((SECONDS + 900))
    while [ "$(cdc_total)" -lt "$n" ]; do
        [ $SECONDS -lt $deadline ] || die "cdc: the topics hold $(cdc_total) messages after 15 min, expected $n"
        sleep 1
    done
    sleep 2
    [ "$(cdc_total)" = "$n" ] || die "cdc: the topics hold $(cdc_total) messages, expected exactly $n"
    "$CDC_SRC" stop-connect >> "$LOG" 2>&1
    "$CDC_SRC" drop-slot >> "$LOG" 2>&1 || true
    echo "$n" > "$W/cdc.ok"
}

cdc_bench() {
    local n name=bench_cdc b0 b1 t0 t1 res pid pids cpu hwm
    at_bench_exit cdc_stop_source
    "$CDC_SRC" start-source >> "$LOG" 2>&1 || die "cdc: the source cluster did not start (see $LOG)"
    eval "$("$CDC_SRC" env)"
    if [ -s "$W/cdc.ok" ] && [ "$(cdc_total)" = "$(cat "$W/cdc.ok")" ]; then
        say "cdc: reusing the change topics $DBZ_TOPIC_PREFIX.cdc.* ($(cat "$W/cdc.ok") messages)"
    else
        cdc_produce
    fi
    n="$(cat "$W/cdc.ok")"
    put cdc.messages "$n"
    put cdc.rows "$CDC_ROWS"; put cdc.ops "$CDC_OPS"
    put cdc.source_rows "$(psql -X -A -t -d "$DBZ_SRC_CONNINFO" -c "SELECT (SELECT count(*) FROM cdc.accounts) + (SELECT count(*) FROM cdc.products) + (SELECT count(*) FROM cdc.order_lines)")"
    put cdc.message_bytes "$(kcat -C -b "$KS_BOOTSTRAP" -t "$DBZ_TOPIC_PREFIX.cdc.accounts" -p 0 -o beginning -c 1000 -e -q -f '%S\n' 2>/dev/null | awk '{s += $1} END {printf "%.0f", NR ? s / NR : 0}')"

    # ---- ours
    say "cdc (ours): envelope => 'debezium', one pipeline into bench_cdc.{source.table}, max_offsets_per_batch 50000"
    psu -c "SET client_min_messages = warning; DROP SCHEMA IF EXISTS bench_cdc CASCADE; CREATE SCHEMA bench_cdc AUTHORIZATION $OWNER" >> "$LOG"
    cdc_replica_ddl bench_cdc '' 1 | pso >> "$LOG"
    psu -c CHECKPOINT > /dev/null
    start_sampler "$W/cdc_ks.samples" \
        "SELECT sum(o.next_offset) FROM kafka_sink.offsets o JOIN kafka_sink.pipeline_definitions p ON p.id = o.pipeline_id WHERE p.name = '$name'" \
        "$n"
    put cdc_ks.load "$(loadavg)"
    b0="$(machine_busy)"
    res="$(pso -F ' ' <<SQL
SELECT 't0', extract(epoch FROM clock_timestamp());
SELECT 'id', kafka_sink.create_pipeline(
    name => '$name', bootstrap_servers => '$KS_BOOTSTRAP', subscribe_pattern => '^$CDC_REGEX',
    target => 'bench_cdc.{source.table}', envelope => 'debezium', starting_offsets => 'earliest',
    max_offsets_per_batch => 50000);
SQL
)" || { stop_sampler; say "cdc (ours): create_pipeline failed (see $LOG); no CDC rows for ours"; res=""; }
    echo "$res" >> "$LOG"
    if [ -n "$res" ]; then
        local deadline=$((SECONDS + 1800))
        while kill -0 "$SAMPLER" 2>/dev/null; do
            [ $SECONDS -lt $deadline ] || die "$name did not catch up within 30 min"
            [ "$(psu -c "SELECT state FROM kafka_sink.pipeline_definitions WHERE name = '$name'")" != failed ] \
                || die "$name failed: $(psu -c "SELECT last_error FROM kafka_sink.status WHERE name = '$name'")"
            sleep 0.2
        done
        stop_sampler
        b1="$(machine_busy)"
        t0="$(echo "$res" | awk '$1 == "t0" {print $2}')"
        t1="$(tail -n 1 "$W/cdc_ks.samples" | cut -d' ' -f1)"
        pids="$(worker_pids "$name")"
        [ "$(pso -c "SELECT kafka_sink.wait('$name', '1 min')")" = t ] || die "$name did not catch up"
        put cdc_ks.t0 "$t0"; put cdc_ks.seconds "$(sub "$t1" "$t0")"
        put cdc_ks.machine_busy_s "$(sub "$b1" "$b0")"
        put cdc_ks.samples "$W/cdc_ks.samples"
        cpu=0; hwm=0
        for pid in $pids; do
            [ -r "/proc/$pid/stat" ] || continue
            cpu="$(awk -v a="$cpu" -v b="$(proc_cpu "$pid")" 'BEGIN {printf "%.2f", a + b}')"
            hwm="$(awk -v a="$hwm" -v b="$(proc_hwm "$pid")" 'BEGIN {print (b > a ? b : a)}')"
        done
        [ "$hwm" = 0 ] || { put cdc_ks.cpu_s "$cpu"; put cdc_ks.rss_kb "$hwm"; }
        psu -F $'\t' -c "SELECT 'cdc_ks.batches', count(*) FROM kafka_sink.batches b JOIN kafka_sink.pipeline_definitions p ON p.id = b.pipeline_id WHERE p.name = '$name' AND b.messages > 0" >> "$RAW"
        psu -F $'\t' -c "SELECT 'cdc_ks.quarantined', count(*) FROM kafka_sink.quarantine q JOIN kafka_sink.pipeline_definitions p ON p.id = q.pipeline_id WHERE p.name = '$name'" >> "$RAW" 2>> "$LOG" || true
        cdc_compare 'bench_cdc.{table}' cdc_ks
        pso -c "SELECT kafka_sink.drop_pipeline('$name')" > /dev/null
    fi

    # ---- the peer: Debezium JDBC sink on the same topics
    say "cdc (peer): Kafka Connect + Debezium JDBC sink on the same change topics"
    local tbl
    for tbl in accounts products order_lines; do psu -c "DROP TABLE IF EXISTS public.bench_cdc_dbz_$tbl" >> "$LOG" 2>&1; done
    cdc_replica_ddl public bench_cdc_dbz_ 0 | psu >> "$LOG"
    for tbl in accounts products order_lines; do psu -c "ALTER TABLE public.bench_cdc_dbz_$tbl OWNER TO $OWNER" >> "$LOG"; done
    psu -c CHECKPOINT > /dev/null
    put cdc_dbz.load "$(loadavg)"
    b0="$(machine_busy)"
    if dbz_env DBZ_PREPARE_ONLY=1 bash "$BENCH_DIR/debezium_peer.sh" cdc "$KS_BOOTSTRAP" "$CDC_REGEX" "$n" \
           'bench_cdc_dbz_${topic}' /dev/null >> "$LOG" 2>&1 \
       && dbz_env DBZ_PROGRESS="$W/cdc_dbz.progress" bash "$BENCH_DIR/debezium_peer.sh" cdc "$KS_BOOTSTRAP" "$CDC_REGEX" \
           "$n" 'bench_cdc_dbz_${topic}' "$W/cdc_dbz.json" >> "$LOG" 2>&1; then
        b1="$(machine_busy)"
        "$PY" -c 'import json, sys
d = json.load(open(sys.argv[1]))
for f in ("seconds", "t0", "startup_seconds", "cpu_s", "rss_kb", "message_bytes"):
    print("%s.%s\t%s" % (sys.argv[2], f, d.get(f)))' "$W/cdc_dbz.json" cdc_dbz >> "$RAW"
        put cdc_dbz.samples "$W/cdc_dbz.progress"
        put cdc_dbz.machine_busy_s "$(sub "$b1" "$b0")"
        cdc_compare 'public.bench_cdc_dbz_{table}' cdc_dbz
    else
        say "cdc (peer): the Debezium JDBC sink failed (see $LOG); left out of the table"
    fi
    cdc_stop_source
}
