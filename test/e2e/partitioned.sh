#!/usr/bin/env bash
# test/e2e/partitioned.sh — partitioned targets (issue 27), each compared
# with a model of the messages computed here (never with the extension's
# own counts):
#  1. a range-partitioned merge target, one partition itself partitioned
#     by range, with kafka_sink.apply_strategy = sql (the MERGE) and then
#     on_conflict: messages for a range that has no partition are
#     quarantined as no_partition (exactly those), replayed once the
#     partition is created; a partition detached while the pipeline runs
#     (its rows stay in the detached table, the messages for it are
#     no_partition), attached again and replayed; a message whose
#     partition key changes is another key (another row, in another
#     partition); tombstones delete; the final table equals the model;
#  2. routed targets ('<schema>.{topic}'): a list-partitioned table per
#     topic, a value without a partition quarantined and replayed;
#  3. append mode into a range-partitioned log: every message once;
#  4. a bronze table partitioned by the Kafka partition: a message without
#     a partition fails its batch (bronze takes every message: nothing is
#     checkpointed past it) until the partition exists, then all land once;
#  5. pg_partman (where the extension is available: Debian's
#     postgresql-15-partman): create_parent with a premake, messages beyond
#     it no_partition, run_maintenance while the pipeline runs, replay:
#     the table equals the model.
# shellcheck source=../lib/common.sh
. "$(dirname "$0")/../lib/common.sh"
setup_owner
S="pt_$SFX"
W="$KS_RUN/partitioned.$SFX"
mkdir -p "$W"
SEED="${KS_PARTITIONED_SEED:-$((RANDOM * 32768 + RANDOM))}"
MAX=$((RANDOM % 40 + 10))
echo "# seed $SEED, max_offsets_per_batch $MAX"
at_exit "set_apply_strategy RESET"
sql >/dev/null <<SQL
SET client_min_messages = warning;
CREATE SCHEMA $S AUTHORIZATION ks_e2e;
SQL

# ---- the messages and the model ---------------------------------------------
# phase a: keys {"id", "day"} with day 0..39 (30..39: no partition yet);
# phase b: day 0..29 (10..19: detached), tombstones only for day 0..9.
# v (the order column) grows with the offset, so that the model is the
# messages in offset order (a replay lands before any later message of its
# keys); t and c absent, null or set.
python3 - "$SEED" "$W" <<'PY'
import json, random, sys
rnd = random.Random(int(sys.argv[1]))
w = sys.argv[2]
seq = 0
def msg(day_lo, day_hi, tomb):
    global seq
    seq += 1
    k = {"id": rnd.randint(1, 12), "day": rnd.randint(day_lo, day_hi)}
    if tomb and k["day"] < 10 and rnd.random() < 0.12:
        return json.dumps(k), ""
    m = {"v": seq}
    for f, vals in (("t", lambda: f"t{seq}"), ("c", lambda: rnd.randint(0, 99))):
        r = rnd.random()
        if r < 0.1:
            m[f] = None
        elif r < 0.7:
            m[f] = vals()
    return json.dumps(k), json.dumps(m)
for name, n, lo, hi, tomb in (("a", 260, 0, 39, False), ("b", 200, 0, 29, True)):
    with open(f"{w}/{name}", "w") as f:
        for _ in range(n):
            print("\t".join(msg(lo, hi, tomb)), file=f)
PY

# model FILES...: the table (id, day, v, t, c) after the messages in order
model() {
    python3 - "$@" <<'PY'
import json, sys
rows = {}
for path in sys.argv[1:]:
    for line in open(path):
        k, _, v = line.rstrip("\n").partition("\t")
        k = json.loads(k)
        key = (k["id"], k["day"])
        if v == "":
            rows.pop(key, None)
            continue
        m = json.loads(v)
        r = rows.setdefault(key, {"v": None, "t": None, "c": None})
        for f in ("v", "t", "c"):
            if f in m:
                r[f] = m[f]
for (i, d), r in sorted(rows.items()):
    print("\t".join(str(x) for x in (i, d, r["v"], "<null>" if r["t"] is None else r["t"],
                                     "<null>" if r["c"] is None else r["c"])))
PY
}
# offsets FILE BASE LO HI: the offsets (from BASE) of FILE's messages whose day is in LO..HI
offsets() {
    python3 - "$@" <<'PY'
import json, sys
path, base, lo, hi = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
for i, line in enumerate(open(path)):
    if lo <= json.loads(line.split("\t")[0])["day"] <= hi:
        print(base + i)
PY
}
table_rows() { # TABLE
    sql -c "COPY (SELECT id, day, v, coalesce(t, '<null>'), coalesce(c::text, '<null>')
                    FROM $1 ORDER BY id, day) TO STDOUT"
}
unreplayed() { # PIPELINE: "offset reason" of its quarantine rows not replayed
    sql -c "COPY (SELECT q.message_offset, q.reason FROM kafka_sink.quarantine q
                    JOIN kafka_sink.pipeline_definitions p ON p.id = q.pipeline_id
                   WHERE p.name = '$1' AND q.replayed_at IS NULL ORDER BY 1) TO STDOUT"
}
replay() { # PIPELINE
    sql -c "SET ROLE ks_e2e" -c "SELECT count(*) FROM kafka_sink.replay_quarantine('$1', reason => 'no_partition')" >/dev/null
}
produce_file() { kcat -P -b "$KS_BOOTSTRAP" -t "$1" -p 0 -K $'\t' -Z < "$2"; }
na="$(wc -l < "$W/a")"; nb="$(wc -l < "$W/b")"

# ---- 1. a range-partitioned merge target, sql and on_conflict ---------------------
for st in sql on_conflict; do
    set_apply_strategy "$st"
    T="$S.r_$st"; P="pt_r_${st}_$SFX"; topic="pt_r_${st}_$SFX"
    sql >/dev/null <<SQL
SET client_min_messages = warning; SET ROLE ks_e2e;
CREATE TABLE $T (id int, day int, v int, t text, c int, PRIMARY KEY (id, day)) PARTITION BY RANGE (day);
CREATE TABLE ${T}_0 PARTITION OF $T FOR VALUES FROM (0) TO (10);
CREATE TABLE ${T}_1 PARTITION OF $T FOR VALUES FROM (10) TO (20);
CREATE TABLE ${T}_2 PARTITION OF $T FOR VALUES FROM (20) TO (30) PARTITION BY RANGE (id);
CREATE TABLE ${T}_2a PARTITION OF ${T}_2 FOR VALUES FROM (MINVALUE) TO (7);
CREATE TABLE ${T}_2b PARTITION OF ${T}_2 FOR VALUES FROM (7) TO (MAXVALUE);
SELECT kafka_sink.create_pipeline(name => '$P', bootstrap_servers => '$KS_BOOTSTRAP',
    subscribe => ARRAY['$topic'], target => '$T', order_column => 'v', key_format => 'json',
    delete_on_tombstone => true, starting_offsets => 'earliest', max_offsets_per_batch => $MAX,
    trigger_interval => '0');
SQL
    produce_file "$topic" "$W/a"
    poll "$(checkpoint_covers_sql "$P" "$na")" 90 || check "$st: phase a consumed" t f
    check "$st: the messages of days 30..39 (no partition) are quarantined as no_partition, and only they" \
        "$(offsets "$W/a" 0 30 39 | sed 's/$/\tno_partition/')" "$(unreplayed "$P")"
    sql -c "SET ROLE ks_e2e" -c "CREATE TABLE ${T}_3 PARTITION OF $T FOR VALUES FROM (30) TO (40)"
    replay "$P"
    check "$st: after CREATE TABLE ... PARTITION OF, the replay lands every no_partition message" "" "$(unreplayed "$P")"
    check "$st: the table equals the model after phase a and the replay" "$(model "$W/a")" "$(table_rows "$T")"

    # detach a partition while the pipeline runs, then attach it again
    before="$(sql -Atc "SELECT count(*) FROM ${T}_1")"
    sql -c "SET ROLE ks_e2e" -c "ALTER TABLE $T DETACH PARTITION ${T}_1"
    produce_file "$topic" "$W/b"
    poll "$(checkpoint_covers_sql "$P" $((na + nb)))" 90 || check "$st: phase b consumed" t f
    check "$st: with ${T}_1 detached its days' messages are no_partition, and only they" \
        "$(offsets "$W/b" "$na" 10 19 | sed 's/$/\tno_partition/')" "$(unreplayed "$P")"
    check "$st: the detached table keeps its rows, untouched" "$before" "$(sql -Atc "SELECT count(*) FROM ${T}_1")"
    sql -c "SET ROLE ks_e2e" -c "ALTER TABLE $T ATTACH PARTITION ${T}_1 FOR VALUES FROM (10) TO (20)"
    replay "$P"
    check "$st: after ATTACH PARTITION the replay lands them" "" "$(unreplayed "$P")"
    check "$st: the table equals the model of every message ($(model "$W/a" "$W/b" | wc -l) rows)" \
        "$(model "$W/a" "$W/b")" "$(table_rows "$T")"
    check "$st: every row is in the leaf its day (and id) names" 0 \
        "$(sql -Atc "SELECT count(*) FROM $T x WHERE x.tableoid <> (CASE WHEN day < 10 THEN '${T}_0' WHEN day < 20 THEN '${T}_1'
                       WHEN day < 30 AND id < 7 THEN '${T}_2a' WHEN day < 30 THEN '${T}_2b' ELSE '${T}_3' END)::regclass")"
    moved="$(sql -Atc "SELECT count(DISTINCT id) FROM (SELECT id FROM $T GROUP BY id HAVING count(DISTINCT tableoid) > 1) x")"
    check "$st: an id whose day changed is another key, in another partition ($moved ids in several partitions)" t \
        "$([ "$moved" -gt 0 ] && echo t || echo f)"
    tombs="$(grep -c $'\t$' "$W/b" || true)"
    check "$st: the messages held tombstones ($tombs)" t "$([ "$tombs" -gt 0 ] && echo t || echo f)"
    read -r _ s _ <<< "$(applied_rows "$P")"
    oc="$(sql -Atc "SELECT coalesce(sum((b.progress->'sink'->'applyRows'->>'onConflict')::bigint), 0)
                      FROM kafka_sink.batches b JOIN kafka_sink.pipeline_definitions p ON p.id = b.pipeline_id
                     WHERE p.name = '$P'")"
    if [ "$st" = on_conflict ]; then
        check "on_conflict: the batches went through INSERT ... ON CONFLICT ($oc rows)" t "$([ "$oc" -gt 0 ] && echo t || echo f)"
    else
        check "sql: the batches went through the MERGE ($s rows, $oc by ON CONFLICT)" 0 "$oc"
    fi
    sql -c "SET ROLE ks_e2e" -c "SELECT kafka_sink.stop('$P')" >/dev/null
done
set_apply_strategy RESET

# ---- 2. routed targets: a list-partitioned table per topic ------------------------
for r in eu us; do
    "$HARNESS" topic-create "pt_l${r}_$SFX" 1 >/dev/null 2>&1 || true
done
sql >/dev/null <<SQL
SET client_min_messages = warning; SET ROLE ks_e2e;
CREATE TABLE $S.pt_leu_$SFX (id int, region text, v int, PRIMARY KEY (id, region)) PARTITION BY LIST (region);
CREATE TABLE $S.pt_lus_$SFX (LIKE $S.pt_leu_$SFX INCLUDING ALL) PARTITION BY LIST (region);
CREATE TABLE $S.pt_leu_${SFX}_a PARTITION OF $S.pt_leu_$SFX FOR VALUES IN ('a', 'b');
CREATE TABLE $S.pt_lus_${SFX}_a PARTITION OF $S.pt_lus_$SFX FOR VALUES IN ('a');
CREATE TABLE $S.pt_lus_${SFX}_b PARTITION OF $S.pt_lus_$SFX FOR VALUES IN ('b');
SELECT kafka_sink.create_pipeline(name => 'pt_route_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
    subscribe => ARRAY['pt_leu_$SFX', 'pt_lus_$SFX'], target => '$S.{topic}', key_columns => ARRAY['id', 'region'],
    order_column => 'v', starting_offsets => 'earliest', trigger_interval => '0');
SQL
python3 - "$SEED" "$W" <<'PY'
import json, random, sys
rnd = random.Random(int(sys.argv[1]) + 1)
for t in ("eu", "us"):
    with open(f"{sys.argv[2]}/l{t}", "w") as f:
        for i in range(120):
            print(json.dumps({"id": rnd.randint(1, 20), "region": rnd.choice("abc"), "v": i}), file=f)
PY
lmodel() { python3 -c '
import json, sys
rows = {}
for line in open(sys.argv[1]):
    m = json.loads(line); rows[(m["id"], m["region"])] = m["v"]
for (i, r), v in sorted(rows.items()): print(f"{i}\t{r}\t{v}")' "$1"; }
for r in eu us; do kcat -P -b "$KS_BOOTSTRAP" -t "pt_l${r}_$SFX" -p 0 < "$W/l$r"; done
poll "$(checkpoint_covers_sql "pt_route_$SFX" 240)" 90 || check "routed: consumed" t f
check "routed: the messages for region c (no partition in either table) are no_partition, and only they" \
    "$(cat <(grep -c '"c"' "$W/leu") <(grep -c '"c"' "$W/lus") | paste -sd+ | bc)" \
    "$(sql -Atc "SELECT count(*) FILTER (WHERE q.reason = 'no_partition') || '' || CASE WHEN count(*) FILTER (WHERE q.reason <> 'no_partition') > 0 THEN ' and others' ELSE '' END
                   FROM kafka_sink.quarantine q JOIN kafka_sink.pipeline_definitions p ON p.id = q.pipeline_id
                  WHERE p.name = 'pt_route_$SFX'")"
sql -c "SET ROLE ks_e2e" -c "CREATE TABLE $S.pt_leu_${SFX}_c PARTITION OF $S.pt_leu_$SFX FOR VALUES IN ('c')" \
    -c "CREATE TABLE $S.pt_lus_${SFX}_c PARTITION OF $S.pt_lus_$SFX FOR VALUES IN ('c')"
replay "pt_route_$SFX"
check "routed: the replay lands them in both tables" "" "$(unreplayed "pt_route_$SFX")"
for r in eu us; do
    check "routed: $S.pt_l${r}_$SFX equals the model" "$(lmodel "$W/l$r")" \
        "$(sql -c "COPY (SELECT id, region, v FROM $S.pt_l${r}_$SFX ORDER BY 1, 2) TO STDOUT")"
done
sql -c "SET ROLE ks_e2e" -c "SELECT kafka_sink.stop('pt_route_$SFX')" >/dev/null

# ---- 3. append into a range-partitioned log --------------------------------------
topic="pt_app_$SFX"
sql >/dev/null <<SQL
SET client_min_messages = warning; SET ROLE ks_e2e;
CREATE TABLE $S.log (id int, day int, v int, t text, c int) PARTITION BY RANGE (day);
CREATE TABLE $S.log_0 PARTITION OF $S.log FOR VALUES FROM (0) TO (30);
SELECT kafka_sink.create_pipeline(name => '$topic', bootstrap_servers => '$KS_BOOTSTRAP',
    subscribe => ARRAY['$topic'], target => '$S.log', mode => 'append', starting_offsets => 'earliest',
    max_offsets_per_batch => $MAX, trigger_interval => '0');
SQL
# the values carry the key's fields
python3 -c '
import json, sys
for line in open(sys.argv[1]):
    k, _, v = line.rstrip("\n").partition("\t")
    print(json.dumps({**json.loads(k), **json.loads(v)}))' "$W/a" > "$W/app"
kcat -P -b "$KS_BOOTSTRAP" -t "$topic" -p 0 < "$W/app"
poll "$(checkpoint_covers_sql "$topic" "$na")" 90 || check "append: consumed" t f
check "append: days 30..39 are no_partition" "$(offsets "$W/a" 0 30 39 | sed 's/$/\tno_partition/')" "$(unreplayed "$topic")"
sql -c "SET ROLE ks_e2e" -c "CREATE TABLE $S.log_1 PARTITION OF $S.log FOR VALUES FROM (30) TO (40)"
replay "$topic"
check "append: after the replay every message is in the log once" \
    "$(python3 -c '
import json, sys
for l in sorted(open(sys.argv[1]), key=lambda l: json.loads(l)["v"]):
    m = json.loads(l); print(m["id"], m["day"], m["v"])' "$W/app")" \
    "$(sql -Atc "SELECT id || ' ' || day || ' ' || v FROM $S.log ORDER BY v")"
sql -c "SET ROLE ks_e2e" -c "SELECT kafka_sink.stop('$topic')" >/dev/null

# ---- 4. a bronze table partitioned by the Kafka partition -------------------------
topic="pt_bronze_$SFX"
"$HARNESS" topic-create "$topic" 2 >/dev/null 2>&1 || true
sql >/dev/null <<SQL
SET client_min_messages = warning; SET ROLE ks_e2e;
CREATE TABLE $S.raw (topic text COLLATE "C" NOT NULL, partition integer NOT NULL, "offset" bigint NOT NULL,
    ts timestamptz, key bytea, value bytea, headers jsonb, batch_id bigint NOT NULL,
    PRIMARY KEY (partition, "offset", topic)) PARTITION BY LIST (partition);
CREATE TABLE $S.raw_0 PARTITION OF $S.raw FOR VALUES IN (0);
SELECT kafka_sink.create_pipeline(name => '$topic', bootstrap_servers => '$KS_BOOTSTRAP',
    subscribe => ARRAY['$topic'], bronze => '$S.raw', starting_offsets => 'earliest', trigger_interval => '0');
SQL
for i in $(seq 1 30); do echo "k$i|{\"n\": $i}"; done | produce "$topic" -p 0
for i in $(seq 31 50); do echo "k$i|{\"n\": $i}"; done | produce "$topic" -p 1
poll "SELECT count(*) > 0 FROM kafka_sink.errors e JOIN kafka_sink.pipeline_definitions p ON p.id = e.pipeline_id
       WHERE p.name = '$topic' AND e.sqlstate = '23514'" 60 || true
check "bronze: partition 1's messages have no bronze partition, so its batches land nothing and checkpoint nothing" \
    "0|0" "$(sql -Atc "SELECT (SELECT count(*) FROM $S.raw WHERE partition = 1) || '|' ||
                             coalesce((SELECT sum(o.next_offset) FROM kafka_sink.offsets o
                                        JOIN kafka_sink.pipeline_definitions p ON p.id = o.pipeline_id
                                       WHERE p.name = '$topic' AND o.partition = 1), 0)")"
check "bronze: the error says so" t \
    "$(sql -Atc "SELECT count(*) > 0 FROM kafka_sink.errors e JOIN kafka_sink.pipeline_definitions p ON p.id = e.pipeline_id
                  WHERE p.name = '$topic' AND e.message LIKE '%no partition of relation%'")"
poll "SELECT state = 'failed' FROM kafka_sink.status WHERE name = '$topic'" 30 || true
check "bronze: the pipeline stopped as failed (the error is permanent)" failed \
    "$(sql -Atc "SELECT state FROM kafka_sink.status WHERE name = '$topic'")"
sql -c "SET ROLE ks_e2e" -c "CREATE TABLE $S.raw_1 PARTITION OF $S.raw FOR VALUES IN (1)"
sql -c "SET ROLE ks_e2e" -c "SELECT kafka_sink.start('$topic')" >/dev/null
poll "$(checkpoint_covers_sql "$topic" 50)" 90 || check "bronze: consumed after the partition was created" t f
check "bronze: every message landed once" "50|50" \
    "$(sql -Atc "SELECT count(*) || '|' || count(DISTINCT (partition, \"offset\")) FROM $S.raw")"
sql -c "SET ROLE ks_e2e" -c "SELECT kafka_sink.stop('$topic')" >/dev/null

# ---- 5. pg_partman ----------------------------------------------------------------
if [ "$(sql -Atc "SELECT count(*) FROM pg_available_extensions WHERE name = 'pg_partman'")" = 1 ]; then
    topic="pt_pm_$SFX"
    sql >/dev/null <<SQL
SET client_min_messages = warning;
CREATE SCHEMA IF NOT EXISTS partman;
CREATE EXTENSION IF NOT EXISTS pg_partman SCHEMA partman;
CREATE TABLE $S.pm (id int, day int, v int, t text, c int, PRIMARY KEY (id, day)) PARTITION BY RANGE (day);
ALTER TABLE $S.pm OWNER TO ks_e2e;
SELECT partman.create_parent('$S.pm', 'day', 'native', '10', p_premake := 1, p_start_partition := '0');
-- no default partition: a row beyond the premade ones has no partition
DROP TABLE IF EXISTS $S.pm_default;
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA $S TO ks_e2e;
SET ROLE ks_e2e;
SELECT kafka_sink.create_pipeline(name => '$topic', bootstrap_servers => '$KS_BOOTSTRAP',
    subscribe => ARRAY['$topic'], target => '$S.pm', order_column => 'v', key_format => 'json',
    starting_offsets => 'earliest', max_offsets_per_batch => $MAX, trigger_interval => '0');
SQL
    premade="$(sql -Atc "SELECT count(*) FROM pg_partition_tree('$S.pm') WHERE isleaf")"
    produce_file "$topic" "$W/a"
    poll "$(checkpoint_covers_sql "$topic" "$na")" 90 || check "partman: consumed" t f
    hi="$(sql -Atc "SELECT max(day) FROM $S.pm")"
    check "partman: beyond the $premade premade partitions (up to day $hi) the messages are no_partition" \
        "$(offsets "$W/a" 0 $((hi / 10 * 10 + 10)) 39 | sed 's/$/\tno_partition/')" "$(unreplayed "$topic")"
    rounds=0
    while [ -n "$(unreplayed "$topic")" ] && [ $rounds -lt 5 ]; do
        sql -c "SET client_min_messages = warning" -c "CALL partman.run_maintenance_proc()" >/dev/null
        replay "$topic"
        rounds=$((rounds + 1))
    done
    check "partman: run_maintenance while the pipeline runs, then replays, land every message ($rounds rounds, $(sql -Atc "SELECT count(*) FROM pg_partition_tree('$S.pm') WHERE isleaf") partitions)" \
        "" "$(unreplayed "$topic")"
    check "partman: the table equals the model" "$(model "$W/a")" "$(table_rows "$S.pm")"
    sql -c "SET ROLE ks_e2e" -c "SELECT kafka_sink.stop('$topic')" >/dev/null
else
    echo "# pg_partman is not available on this PostgreSQL: its part is skipped"
fi

finish
