#!/usr/bin/env bash
# test/e2e/determinism.sh — a merge pipeline's result does not depend on
# where batch boundaries fall (docs/design/guarantee.md, "Partial messages
# fold in order").  For a few random seeds, determinism_model.py generates a
# message sequence (keys, partial messages with random subsets of optional
# fields, explicit nulls, order values with ties and stale ones, absent and
# null order values, tombstones) and computes, one message at a time and
# independently of the extension, the table it must give.  The same topic
# is then ingested into tables that start equal (one row with an order
# value in the middle of the messages' range, one with a NULL order value)
# by pipelines that cut it differently: one batch, one message per batch,
# random max_offsets_per_batch, and one altered mid-way.  Every table must
# equal the model.
# shellcheck source=../lib/common.sh
. "$(dirname "$0")/../lib/common.sh"
setup_owner
W="$KS_RUN/determinism.$SFX"
mkdir -p "$W"
SEEDS="${KS_DETERMINISM_SEEDS:-3}"

table_sql() {
    cat <<SQL
SET ROLE ks_e2e;
CREATE TABLE e2e.$1 (id bigint PRIMARY KEY, v bigint, a text, b text DEFAULT 'dflt', c integer,
                     _kafka_offset bigint);
INSERT INTO e2e.$1 VALUES (1, 50, 'pre1', 'pre1', 1, NULL), (2, NULL, 'pre2', NULL, 2, NULL),
                          (3, 5, NULL, 'pre3', 3, NULL);
SQL
}

pipeline_sql() { # NAME TOPIC MAX_OFFSETS
    cat <<SQL
SET ROLE ks_e2e;
SELECT kafka_sink.create_pipeline(name => '$1', bootstrap_servers => '$KS_BOOTSTRAP',
    subscribe => ARRAY['$2'], target => 'e2e.$1', order_column => 'v',
    key_format => 'string', delete_on_tombstone => true, starting_offsets => 'earliest',
    max_offsets_per_batch => $3, trigger_interval => '0');
SQL
}

done_sql() { # NAME N: true once the pipeline has checkpointed all N messages
    echo "SELECT coalesce((SELECT sum(o.next_offset) FROM kafka_sink.offsets o
                    JOIN kafka_sink.pipeline_definitions p ON p.id = o.pipeline_id
                   WHERE p.name = '$1'), 0) >= $2"
}

for s in $(seq 1 "$SEEDS"); do
    seed=$((RANDOM * 32768 + RANDOM))
    topic="det_${SFX}_$s"
    python3 "$E2E_DIR/determinism_model.py" "$seed" "$W/msgs.$s" "$W/expected.$s"
    n="$(wc -l < "$W/msgs.$s")"
    kcat -P -b "$KS_BOOTSTRAP" -t "$topic" -p 0 -K $'\t' -Z < "$W/msgs.$s"
    r1=$((RANDOM % 6 + 2))
    r2=$((RANDOM % 20 + 2))
    names=("d${SFX}_${s}_one" "d${SFX}_${s}_each" "d${SFX}_${s}_ra$r1" "d${SFX}_${s}_rb$r2" "d${SFX}_${s}_alt")
    maxes=(100000 1 "$r1" "$r2" 1)
    for i in "${!names[@]}"; do
        table_sql "${names[$i]}" | sql
        pipeline_sql "${names[$i]}" "$topic" "${maxes[$i]}" | sql > /dev/null
    done
    # the last one changes its batch size mid-way (an alter restarts it)
    poll "$(done_sql "${names[4]}" $((n / 4)))" 120 || true
    sql -c "SET ROLE ks_e2e; SELECT kafka_sink.alter_pipeline('${names[4]}', max_offsets_per_batch => 7)" > /dev/null
    for i in "${!names[@]}"; do
        name="${names[$i]}"
        if ! poll "$(done_sql "$name" "$n")" 300; then
            check "seed $seed: $name (max_offsets_per_batch ${maxes[$i]}) consumed the topic" "t" "f"
            continue
        fi
        batches="$(sql -c "SELECT count(*) FROM kafka_sink.batches b JOIN kafka_sink.pipeline_definitions p
                            ON p.id = b.pipeline_id WHERE p.name = '$name' AND b.messages > 0")"
        sql -c "COPY (SELECT id, v, a, b, c, _kafka_offset FROM e2e.$name ORDER BY id) TO STDOUT" > "$W/actual.$s.$i"
        if diff -u "$W/expected.$s" "$W/actual.$s.$i" > "$W/diff.$s.$i"; then
            check "seed $seed: $name ($n messages in $batches batches) equals the model" "same" "same"
        else
            check "seed $seed: $name ($n messages in $batches batches) equals the model" "same" "differs"
            cat "$W/diff.$s.$i"
        fi
        if [ "$i" = 1 ]; then
            check "seed $seed: $name applied one message per batch" "$n" "$batches"
        fi
    done
    for name in "${names[@]}"; do
        sql -c "SET ROLE ks_e2e; SELECT kafka_sink.drop_pipeline('$name')" > /dev/null
    done
done
finish
