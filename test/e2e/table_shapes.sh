#!/usr/bin/env bash
# test/e2e/table_shapes.sh — ordinary table shapes under every way of
# writing (docs/targets.md): the same random messages (ties of the order
# value, partial messages, tombstones) into a plain table and into tables
# of other shapes, for merge mode, history mode, delete_mode soft,
# write_mode insert_only and update_only, and the same for Debezium change
# events (merge, history, soft; creates, updates, deletes with their
# tombstones, re-sent and late copies, a truncate).  Each shape's table must hold
# what the plain one holds (the plain shape is the one the model-based
# tests check against their models: history.sh, softdel.sh,
# write_modes.sh, determinism.sh), quarantine the same messages, and its
# pipeline must keep running.  The shapes: a stored generated column, an
# identity column, a NOT NULL column with a default the messages never
# carry, dropped columns before and between the key and the order column,
# the columns in another order, a hash-partitioned table, a partitioned
# table with a partition of another column order and a dropped column
# attached, a row trigger that rewrites a value, forced row level security
# with a policy for the owner, an unlogged table, a text key, a numeric
# key, a domain with a check, quoted names (a space, upper case, reserved
# words) through a columns map.
# shellcheck source=../lib/common.sh
. "$(dirname "$0")/../lib/common.sh"
setup_owner
W="$KS_RUN/table_shapes.$SFX"
mkdir -p "$W"
seed="${KS_TABLE_SHAPES_SEED:-$((RANDOM * 32768 + RANDOM))}"
echo "# seed $seed (KS_TABLE_SHAPES_SEED to replay)"
T="shapes_$SFX"
"$HARNESS" topic-create "$T" 2 >/dev/null 2>&1 || true

# 400 messages over 24 keys in two partitions (a key stays in its
# partition): order values with ties, a fifth without name, a tenth
# tombstones, names with quotes, backslashes and non-ASCII
python3 - "$seed" "$W" <<'PY'
import json, random, sys
rnd = random.Random(int(sys.argv[1]))
out = {0: [], 1: []}
names = ["a", "O'Brien", "back\\slash", "zoë", "多", "tab\there", "", "x" * 300]
for _ in range(400):
    k = rnd.randrange(1, 25)
    if rnd.random() < 0.1:
        out[k % 2].append(f"{k}\t")
        continue
    m = {"id": k, "ts": rnd.randrange(1, 40), "qty": rnd.randrange(0, 1000)}
    if rnd.random() >= 0.2:
        m["name"] = rnd.choice(names) + str(rnd.randrange(10))
    out[k % 2].append(f"{k}\t{json.dumps(m, ensure_ascii=False)}")
for p in (0, 1):
    with open(f"{sys.argv[2]}/p{p}", "w") as f:
        f.write("\n".join(out[p]) + "\n")
PY
kcat -P -b "$KS_BOOTSTRAP" -t "$T" -p 0 -K $'\t' -Z < "$W/p0"
kcat -P -b "$KS_BOOTSTRAP" -t "$T" -p 1 -K $'\t' -Z < "$W/p1"

# KS_TABLE_SHAPES_SHAPES, KS_TABLE_SHAPES_MODES: a subset (plain first)
read -r -a shapes <<< "${KS_TABLE_SHAPES_SHAPES:-plain gen ident dflt dropped reorder part partx trig rls unlogged idtext idnum domain quoted}"

# the columns a mode needs beside id, ts, name, qty, and its key
mode_cols() {
    # change events: every row keeps its last change's source position
    [ "${1#cdc_}" = "$1" ] || printf '%s' ", _kafka_source_position numeric"
    case "${1#cdc_}" in
        # _fields: partial messages fold along time whatever the batch split
        # (without it the result depends on arrival order: docs/history.md)
        history) echo ", _valid_from $VT NOT NULL, _valid_to $VT, _deleted boolean NOT NULL, _fields text[]" ;;
        soft) echo ", _deleted_at timestamptz" ;;
    esac
}
mode_pk() { if [ "${1#cdc_}" = history ]; then echo "id, _valid_from"; else echo "id"; fi; }

# CREATE statements of table $2 of shape $1 for mode $3
create_shape() {
    local shape="$1" t="$2" mode="$3" idt=bigint qtyt=int extra pre="" post="" pk
    extra="$(mode_cols "$mode")"
    pk="$(mode_pk "$mode")"
    case "$shape" in
        idtext) idt=text ;;
        idnum) idt=numeric ;;
        domain) qtyt="e2e.shapes_qty_$SFX" ;;
    esac
    case "$shape" in
        plain|idtext|idnum|domain|trig|rls)
            echo "CREATE TABLE $t (id $idt, ts bigint, name text, qty $qtyt$extra, PRIMARY KEY ($pk));" ;;
        gen)
            echo "CREATE TABLE $t (id bigint, ts bigint, name text, qty int,
                  name_len int GENERATED ALWAYS AS (length(name)) STORED$extra, PRIMARY KEY ($pk));" ;;
        ident)
            echo "CREATE TABLE $t (seq bigint GENERATED ALWAYS AS IDENTITY, id bigint, ts bigint, name text, qty int$extra,
                  PRIMARY KEY ($pk));" ;;
        dflt)
            echo "CREATE TABLE $t (id bigint, note text NOT NULL DEFAULT 'n', ts bigint, name text, qty int$extra,
                  PRIMARY KEY ($pk));" ;;
        dropped)
            echo "CREATE TABLE $t (junk1 int, id bigint, junk2 text, ts bigint, junk3 jsonb, name text, qty int$extra,
                  PRIMARY KEY ($pk));
                  ALTER TABLE $t DROP COLUMN junk1, DROP COLUMN junk2, DROP COLUMN junk3;" ;;
        reorder)
            echo "CREATE TABLE $t (qty int, name text${extra}, ts bigint, id bigint, PRIMARY KEY ($pk));" ;;
        quoted)
            echo "CREATE TABLE $t (\"Id\" bigint, \"order\" bigint, \"Na me\" text, \"select\" int$extra,
                  PRIMARY KEY (${pk/id/\"Id\"}));" ;;
        unlogged)
            echo "CREATE UNLOGGED TABLE $t (id bigint, ts bigint, name text, qty int$extra, PRIMARY KEY ($pk));" ;;
        part)
            echo "CREATE TABLE $t (id bigint, ts bigint, name text, qty int$extra, PRIMARY KEY ($pk)) PARTITION BY HASH (id);
                  CREATE TABLE ${t}_0 PARTITION OF $t FOR VALUES WITH (MODULUS 3, REMAINDER 0);
                  CREATE TABLE ${t}_1 PARTITION OF $t FOR VALUES WITH (MODULUS 3, REMAINDER 1);
                  CREATE TABLE ${t}_2 PARTITION OF $t FOR VALUES WITH (MODULUS 3, REMAINDER 2);" ;;
        partx)
            echo "CREATE TABLE $t (id bigint, ts bigint, name text, qty int$extra, PRIMARY KEY ($pk)) PARTITION BY RANGE (id);
                  CREATE TABLE ${t}_lo PARTITION OF $t FOR VALUES FROM (MINVALUE) TO (13);
                  CREATE TABLE ${t}_hi (junk int, qty int${extra}, name text, ts bigint, id bigint NOT NULL);
                  ALTER TABLE ${t}_hi DROP COLUMN junk;
                  ALTER TABLE $t ATTACH PARTITION ${t}_hi FOR VALUES FROM (13) TO (MAXVALUE);" ;;
    esac
    case "$shape" in
        trig)
            echo "CREATE FUNCTION ${t}_f() RETURNS trigger LANGUAGE plpgsql AS
                  \$\$ BEGIN NEW.name := NEW.name; RETURN NEW; END \$\$;
                  CREATE TRIGGER ${t##*.}_t BEFORE INSERT OR UPDATE ON $t FOR EACH ROW EXECUTE FUNCTION ${t}_f();" ;;
        rls)
            echo "ALTER TABLE $t ENABLE ROW LEVEL SECURITY; ALTER TABLE $t FORCE ROW LEVEL SECURITY;
                  CREATE POLICY ${t##*.}_p ON $t USING (true) WITH CHECK (true);" ;;
    esac
}

# the columns id, ts, name, qty of shape $1
shape_cols() {
    if [ "$1" = quoted ]; then echo '"Id" AS id, "order" AS ts, "Na me" AS name, "select" AS qty'
    else echo "id, ts, name, qty"; fi
}

# what the comparison reads of table $3 of shape $2 in mode $1
read_sql() {
    local mode="$1" cols extra="" by=""
    cols="$(shape_cols "$2")"
    case "${mode#cdc_}" in
        history) extra=", _valid_from, _valid_to, _deleted"; by=", _valid_from" ;;
        soft) extra=", _deleted_at IS NOT NULL" ;;
    esac
    echo "SELECT * FROM (SELECT $cols$extra FROM $3) AS s ORDER BY id::text COLLATE \"C\"$by"
}

# change events over 16 keys (a key stays in its partition): creates,
# updates, deletes with their tombstones, re-sent copies and late ones
# (an older position after a newer), and a truncate; qty never negative
cdc_events() {
    python3 - "$1" "$KS_LIB_DIR" <<'PY'
import json, random, sys
sys.path.insert(0, sys.argv[2])
from cdc_event import source_block
rnd = random.Random(int(sys.argv[1]) + 1)
alive, out, lsn = set(), [], 1000
def event(op, k, lsn, row=None):
    src, _ = source_block("lsn=%d" % lsn, "t")
    v = {"before": None, "after": row, "source": src, "op": op, "ts_ms": src["ts_ms"] + 1}
    if op == "d":
        v["before"], v["after"] = {"id": k, "name": None, "qty": None}, None
    return json.dumps({"id": k}) + "|" + json.dumps(v, ensure_ascii=False)
for i in range(300):
    lsn += 10
    if i == 150:
        src, _ = source_block("lsn=%d" % lsn, "t")
        out.append("|" + json.dumps({"before": None, "after": None, "source": src, "op": "t", "ts_ms": 1}))
        alive.clear()
        continue
    k = rnd.randrange(1, 17)
    if k not in alive:
        op = "c"
    else:
        op = "d" if rnd.random() < 0.15 else "u"
    row = {"id": k, "name": rnd.choice(["a", "O'Brien", "zoë", "多", ""]) + str(i), "qty": rnd.randrange(0, 100)}
    line = event(op, k, lsn, None if op == "d" else row)
    out.append(line)
    if op == "d":
        alive.discard(k)
        out.append(json.dumps({"id": k}) + "|")
    else:
        alive.add(k)
    r = rnd.random()
    if r < 0.08:
        out.insert(rnd.randrange(max(0, len(out) - 20), len(out) + 1), line)   # a re-sent copy, around here
    elif r < 0.12 and len(out) > 2:
        out[-1], out[-2] = out[-2], out[-1]                                    # late by one
print("\n".join(out))
PY
}

sql -c "CREATE DOMAIN e2e.shapes_qty_$SFX AS int CHECK (VALUE >= 0)" >/dev/null
sql -c "ALTER DOMAIN e2e.shapes_qty_$SFX OWNER TO ks_e2e" >/dev/null

# plain messages (T, order column ts) or Debezium change events (CT, the
# source position): the modes each takes
VT=bigint
kind=plain
for mode in ${KS_TABLE_SHAPES_MODES:-merge history soft insert_only update_only cdc_merge cdc_history cdc_soft}; do
    if [ "${mode#cdc_}" != "$mode" ] && [ "$kind" = plain ]; then
        kind=cdc VT=numeric T="shapes_cdc_$SFX"
        "$HARNESS" topic-create "$T" 2 >/dev/null 2>&1 || true
        cdc_events "$seed" | produce "$T" -Z
        # the shapes without a name the events could fill (quoted needs a map of the after image)
        read -r -a shapes <<< "$(printf '%s\n' "${shapes[@]}" | grep -vx quoted | tr '\n' ' ')"
    fi
    opts="order_column => 'ts', key_format => 'string', delete_on_tombstone => true"
    case "$mode" in
        history) opts="$opts, mode => 'history'" ;;
        soft) opts="$opts, delete_mode => 'soft'" ;;
        insert_only) opts="order_column => 'ts', key_format => 'string', write_mode => '$mode'" ;;
        # without deletes: a deleted key would stay away for good, and the
        # seeded keys all go in some seeds
        update_only) opts="order_column => 'ts', key_format => 'string', write_mode => '$mode'" ;;
        cdc_merge) opts="envelope => 'debezium'" ;;
        cdc_history) opts="envelope => 'debezium', mode => 'history'" ;;
        cdc_soft) opts="envelope => 'debezium', delete_mode => 'soft'" ;;
    esac
    batch=$((RANDOM % 40 + 7))
    for shape in "${shapes[@]}"; do
        t="e2e.sh_${mode}_${shape}_$SFX"
        p="sh_${mode:0:4}_${shape}_$SFX"
        {
            echo "SET ROLE ks_e2e;"
            create_shape "$shape" "$t" "$mode"
            # update_only: the even keys are there before
            [ "$mode" != update_only ] ||
                echo "INSERT INTO $t ($(shape_cols "$shape" | sed 's/ AS [a-z]*//g')) SELECT g, 0, 'seed', 0 FROM generate_series(2, 24, 2) g;"
            sopts="$opts"
            [ "$shape" != quoted ] ||
                sopts="${opts/order_column => \'ts\'/order_column => \'order\'}, columns => '{\"Id\": \"id\", \"order\": \"ts\", \"Na me\": \"name\", \"select\": \"qty\"}'"
            echo "SELECT kafka_sink.create_pipeline(name => '$p', bootstrap_servers => '$KS_BOOTSTRAP',
                  subscribe => ARRAY['$T'], target => '$t', starting_offsets => 'earliest',
                  max_offsets_per_batch => $batch, trigger_interval => '0', $sopts);"
        } > "$W/create.$mode.$shape.sql"
        out="$(sql -f "$W/create.$mode.$shape.sql" 2>&1 >/dev/null || true)"
        check "$mode/$shape: the table and its pipeline are created" "" "$out"
    done
    for shape in "${shapes[@]}"; do
        check "$mode/$shape (max_offsets_per_batch $batch): caught up" t \
              "$(sql -c "SELECT kafka_sink.wait('sh_${mode:0:4}_${shape}_$SFX', '90 s')" 2>&1)"
    done
    ref="e2e.sh_${mode}_plain_$SFX"
    sql -c "$(read_sql "$mode" plain "$ref")" > "$W/rows.$mode.plain"
    qsql() {
        sql -c "SELECT coalesce(string_agg(q.partition || ':' || q.message_offset || ':' || q.reason, ' '
                                           ORDER BY q.partition, q.message_offset), '')
                  FROM kafka_sink.quarantine q JOIN kafka_sink.pipeline_definitions d ON d.id = q.pipeline_id
                 WHERE d.name = '$1'"
    }
    qsql "sh_${mode:0:4}_plain_$SFX" > "$W/quar.$mode.plain"
    # not a vacuous comparison (update_only: the 12 seeded keys)
    least=12
    [ "$kind" = cdc ] && least=3
    check "$mode/plain: rows written ($(wc -l < "$W/rows.$mode.plain"))" t \
          "$([ "$(wc -l < "$W/rows.$mode.plain")" -ge $least ] && echo t || echo f)"
    for shape in "${shapes[@]}"; do
        [ "$shape" = plain ] && continue
        t="e2e.sh_${mode}_${shape}_$SFX"
        p="sh_${mode:0:4}_${shape}_$SFX"
        sql -c "$(read_sql "$mode" "$shape" "$t")" > "$W/rows.$mode.$shape" 2>&1
        check "$mode/$shape: the same rows as the plain table" same \
              "$(cmp -s "$W/rows.$mode.plain" "$W/rows.$mode.$shape" && echo same || diff "$W/rows.$mode.plain" "$W/rows.$mode.$shape" | head -5)"
        check "$mode/$shape: the same messages quarantined" "$(cat "$W/quar.$mode.plain")" "$(qsql "$p")"
        check "$mode/$shape: the pipeline is running" running \
              "$(sql -c "SELECT state FROM kafka_sink.status WHERE name = '$p'")"
        case "$shape" in
            gen) check "$mode/gen: the generated column follows name" 0 \
                       "$(sql -c "SELECT count(*) FROM $t WHERE name_len IS DISTINCT FROM length(name)")" ;;
            dflt) check "$mode/dflt: the default fills the column the messages lack" 0 \
                        "$(sql -c "SELECT count(*) FROM $t WHERE note IS DISTINCT FROM 'n'")" ;;
            ident) check "$mode/ident: every row has its identity" 0 \
                         "$(sql -c "SELECT count(*) FROM $t WHERE seq IS NULL")" ;;
        esac
    done
    [ -z "${KS_TABLE_SHAPES_KEEP:-}" ] || continue
    for shape in "${shapes[@]}"; do
        sql -c "SET ROLE ks_e2e; SELECT kafka_sink.drop_pipeline('sh_${mode:0:4}_${shape}_$SFX')" >/dev/null
    done
done
finish
