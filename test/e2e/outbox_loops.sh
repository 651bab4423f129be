#!/usr/bin/env bash
# outbox_loops: a loop through kafka_sink's outbox ends after
# kafka_sink.max_outbox_hops rounds (here 3), whatever the catalog shows.
#  - pipelines A (reads ta, dead letters to tb) and B (reads tb, dead
#    letters to ta): creating B warns of the loop; one message that is not
#    JSON gives exactly max_outbox_hops + 2 quarantine rows (hops 0 to 4),
#    the last dead_letter_loop and dead-lettered no more; every dead letter
#    has as many headers as the first one, its hop count one more;
#  - three pipelines in a cycle, one of them by subscribe_pattern, the loop
#    closed by alter_pipeline (a warning): the same bound;
#  - a batch function that outbox_sends each row back to the topic it
#    reads: its calls end after the same number of rounds, the next round
#    quarantined as dead_letter_loop; produce() from it carries the same
#    hop count, produce() outside a batch none;
#  - outbox_send and produce() refuse headers named kafka_sink.*.
. "$(dirname "$0")/../lib/common.sh"
setup_owner
S="lp_$SFX"
TA="e2e_lpa_$SFX"; TB="e2e_lpb_$SFX"
T1="e2e_lp1_$SFX"; T2="e2e_lp2_$SFX"; T3="e2e_lp3x_$SFX"
TF="e2e_lpf_$SFX"; TP="e2e_lpp_$SFX"
MAX=3
for t in "$TA" "$TB" "$T1" "$T2" "$T3" "$TF" "$TP"; do "$HARNESS" topic-create "$t" 1 >/dev/null 2>&1; done

cleanup() {
    sql -c "ALTER SYSTEM RESET kafka_sink.outbox_bootstrap_servers" -c "ALTER SYSTEM RESET kafka_sink.max_outbox_hops" \
        -c "SELECT pg_reload_conf()" >/dev/null 2>&1 || true
}
trap cleanup EXIT
sql -c "ALTER SYSTEM SET kafka_sink.outbox_bootstrap_servers = '$KS_BOOTSTRAP'" \
    -c "ALTER SYSTEM SET kafka_sink.max_outbox_hops = $MAX" -c "SELECT pg_reload_conf()" >/dev/null
poll "SELECT relay_pid IS NOT NULL FROM kafka_sink.outbox_status" 30 || true

sql >/dev/null <<SQL
CREATE SCHEMA $S AUTHORIZATION ks_e2e;
SET ROLE ks_e2e;
CREATE TABLE $S.t (id bigint PRIMARY KEY, note text);
SQL
create() {  # NAME SOURCE DLT [ARGS]: create_pipeline's messages (warnings)
    sql -c "SET ROLE ks_e2e" -c "SELECT kafka_sink.create_pipeline(name => '$1', bootstrap_servers => '$KS_BOOTSTRAP',
            $2, target => '$S.t', starting_offsets => 'earliest' $3)" 2>&1 >/dev/null
}
rows() {  # quarantine rows of the pipelines whose name matches the regex $1: count|reasons in order
    sql -c "SELECT count(*) || '|' || coalesce(string_agg(q.reason, ',' ORDER BY q.id), '')
              FROM kafka_sink.quarantine q JOIN kafka_sink.pipeline_definitions p ON p.id = q.pipeline_id
             WHERE p.name ~ '$1'"
}
settled() {  # waits until the quarantine rows of $1 stop growing for 3 s
    local prev="" cur
    for _ in $(seq 1 40); do
        cur="$(rows "$1")"
        [ "$cur" = "$prev" ] && [ "$(sql -c "SELECT pending FROM kafka_sink.outbox_status")" = 0 ] && break
        prev="$cur"
        sleep 3
    done
}
LOOPED="invalid_json,invalid_json,invalid_json,invalid_json,dead_letter_loop"

# ---- A <-> B ------------------------------------------------------------------------------
out="$(create "lpa_$SFX" "subscribe => ARRAY['$TA']" ", dead_letter_topic => '$TB'")"
check "A alone: no loop warning" 0 "$(grep -c 'leads back' <<< "$out" || true)"
out="$(create "lpb_$SFX" "subscribe => ARRAY['$TB']" ", dead_letter_topic => '$TA'")"
check "B closes the loop: create_pipeline warns, naming A" "1|1" \
      "$(grep -c "WARNING:  dead_letter_topic \"$TA\" leads back to a topic the pipeline reads" <<< "$out" || true)|$(grep -q "DETAIL:.*\"lpa_$SFX\"" <<< "$out" && echo 1)"
printf 'not json' | kcat -P -b "$KS_BOOTSTRAP" -t "$TA" -k k1 -H src=e2e
settled "^lp[ab]_$SFX\$"
check "A <-> B: max_outbox_hops + 2 quarantine rows, the last a dead_letter_loop" "$((MAX + 2))|$LOOPED" \
      "$(rows "^lp[ab]_$SFX\$")"
check "A <-> B: one dead letter per row but the last" "$((MAX + 1))" \
      "$(sql -c "SELECT count(*) FROM kafka_sink.outbox WHERE topic IN ('$TA', '$TB')")"
# every dead letter: its header count, and its hop count
hdrs() { kcat -C -b "$KS_BOOTSTRAP" -t "$1" -e -q -f '%h\n@@END@@\n' 2>/dev/null | python3 -c "
import re, sys
split = re.compile(r',(?=(?:src|event_id|kafka_sink\.[a-z_]+)=)')
for m in sys.stdin.read().split('\n@@END@@\n')[:-1]:
    h = [x.split('=', 1) for x in split.split(m)] if m else []
    hops = [v for k, v in h if k == 'kafka_sink.hops']
    print(len(h), ','.join(hops) or '-')"; }
check "A <-> B: dead letters in tb keep their header count; hops 1 and 3" "12 1,12 3" \
      "$(hdrs "$TB" | paste -sd,)"
check "A <-> B: the message and its dead letters in ta: hops -, 2, 4" "1 -,12 2,12 4" \
      "$(hdrs "$TA" | paste -sd,)"
check "the last row says why" 1 \
      "$(sql -c "SELECT count(*) FROM kafka_sink.quarantine WHERE reason = 'dead_letter_loop'
                  AND detail LIKE '%came through kafka_sink''s outbox 4 times%max_outbox_hops is $MAX'")"

# ---- a three-pipeline cycle, one by pattern, closed by alter_pipeline -----------------------
out="$(create "lp1_$SFX" "subscribe => ARRAY['$T1']" ", dead_letter_topic => '$T2'")"
out="$out$(create "lp2_$SFX" "subscribe => ARRAY['$T2']" ", dead_letter_topic => '$T3'")"
out="$out$(create "lp3_$SFX" "subscribe_pattern => '^$T3\$'" "")"
check "no loop yet: no warning" 0 "$(grep -c 'leads back' <<< "$out" || true)"
out="$(sql -c "SET ROLE ks_e2e" -c "SELECT kafka_sink.alter_pipeline('lp3_$SFX', dead_letter_topic => '$T1')" 2>&1 >/dev/null)"
check "alter_pipeline closing the cycle warns, naming both others" "1|1|1" \
      "$(grep -c 'leads back to a topic the pipeline reads' <<< "$out" || true)|$(grep -q "DETAIL:.*\"lp1_$SFX\"" <<< "$out" && echo 1)|$(grep -q "DETAIL:.*\"lp2_$SFX\"" <<< "$out" && echo 1)"
sql -c "SET ROLE ks_e2e" -c "SELECT kafka_sink.wait('lp3_$SFX', '30 s')" >/dev/null 2>&1 || true
printf '{"id":' | kcat -P -b "$KS_BOOTSTRAP" -t "$T1" -k k2
settled "^lp[123]_$SFX\$"
check "three-pipeline cycle: max_outbox_hops + 2 quarantine rows, the last a dead_letter_loop" \
      "$((MAX + 2))|$LOOPED" "$(rows "^lp[123]_$SFX\$")"
check "the rows went round: lp1, lp2, lp3, lp1, lp2" "lp1,lp2,lp3,lp1,lp2" \
      "$(sql -c "SELECT string_agg(split_part(p.name, '_', 1), ',' ORDER BY q.id)
                   FROM kafka_sink.quarantine q JOIN kafka_sink.pipeline_definitions p ON p.id = q.pipeline_id
                  WHERE p.name ~ '^lp[123]_$SFX\$'")"

# ---- a batch function feeding its own topic through outbox_send -----------------------------
sql >/dev/null <<SQL
SET ROLE ks_e2e;
CREATE TABLE $S.calls (batch_id bigint, id bigint, hops int);
CREATE TABLE $S.incoming (id bigint, note text);
CREATE FUNCTION $S.echo(batch_id bigint, rows $S.incoming[]) RETURNS void
LANGUAGE plpgsql AS \$fn\$
BEGIN
    INSERT INTO $S.calls SELECT batch_id, r.id, kafka_sink._outbox_hops() FROM unnest(rows) r;
    PERFORM kafka_sink.outbox_send('$TF', r.id::text, json_build_object('id', r.id)::text) FROM unnest(rows) r;
    PERFORM * FROM unnest(rows) r, LATERAL kafka_sink.produce('$KS_BOOTSTRAP', '$TP', r.id::text, 'x') x;
END
\$fn\$;
SELECT kafka_sink.create_pipeline(name => 'lpf_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$TF'], target => '$S.incoming', mode => 'function',
       batch_function => '$S.echo(bigint, $S.incoming[])', starting_offsets => 'earliest');
SQL
printf '7|{"id":7}\n' | produce "$TF"
settled "^lpf_$SFX\$"
check "outbox_send from a batch: applied at hops 0 to $MAX (each send one more), then quarantined" \
      "1,2,3,4|1|dead_letter_loop" \
      "$(sql -c "SELECT string_agg(hops::text, ',' ORDER BY hops) FROM $S.calls")|$(rows "^lpf_$SFX\$")"

check "produce() from a batch: its messages carry the batch's hop count + 1" "1,2,3,4" \
      "$(kcat -C -b "$KS_BOOTSTRAP" -t "$TP" -e -q -f '%h\n' 2>/dev/null | sed -n 's/^kafka_sink.hops=//p' | sort -un | paste -sd,)"
check "produce() outside a batch adds no header" "outside|" \
      "$(sql -c "SELECT 1 FROM kafka_sink.produce('$KS_BOOTSTRAP', '$TP', 'k', 'outside')" >/dev/null
         kcat -C -b "$KS_BOOTSTRAP" -t "$TP" -e -q -f '%s|%h\n' 2>/dev/null | grep '^outside|')"

# ---- kafka_sink's header names are its own --------------------------------------------------
err() { sql -c "SET ROLE ks_e2e" -c "$1" 2>&1 >/dev/null | sed -n 's/^ERROR:  //p'; }
check "outbox_send refuses a kafka_sink.* header" 'header "kafka_sink.hops" is reserved' \
      "$(err "SELECT kafka_sink.outbox_send('$TF', 'k', 'v', '{\"kafka_sink.hops\": \"0\"}')")"
check "produce() refuses a kafka_sink.* header" 'header "kafka_sink.hops" is reserved' \
      "$(err "SELECT * FROM kafka_sink.produce('$KS_BOOTSTRAP', '$TF', 'k', 'v', '{\"kafka_sink.hops\": \"0\"}')")"

for p in lpa lpb lp1 lp2 lp3 lpf; do sql -c "SET ROLE ks_e2e" -c "SELECT kafka_sink.drop_pipeline('${p}_$SFX')" >/dev/null; done
cleanup
finish
