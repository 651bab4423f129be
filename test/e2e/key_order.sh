#!/usr/bin/env bash
# key_order: a batch's winners are applied in key order: their key's btree
# order where the key's type sorts through abbreviated keys (text in the
# "C" collation, numeric), the keys' bytes for text in any other
# deterministic collation (ICU's und-x-icu here: one key column, a
# composite key, char(n)), and a nondeterministic collation's own order, whose
# equal keys ('A', 'a') are one row: a bigserial column shows the insert
# order, checked against the keys sorted by Python (bytes, exact decimals,
# case-folded bytes for the case-insensitive collation), not by the
# extension or PostgreSQL.
. "$(dirname "$0")/../lib/common.sh"
setup_owner
T="e2e_korder_$SFX"
"$HARNESS" topic-create "$T" 1 >/dev/null 2>&1
MODEL="$KS_RUN/korder_$SFX"

# 600 distinct keys: text with a shared prefix longer than 8 bytes (ties of
# the abbreviated keys), mixed case, digits and non-ASCII; numerics with
# signs, scales and long digit strings
python3 - "$MODEL" <<'PY' | produce "$T" -p 0
import json, random, sys
from decimal import Decimal
random.seed(29)
alpha = "aAbBzZ09_~" + "\u00e9\u00df\u4e2d"
texts, nums = set(), set()
while len(texts) < 600:
    p = random.choice(["", "prefix-shared-", "prefix-shared-x", "Z"])
    texts.add(p + "".join(random.choice(alpha) for _ in range(random.randint(0, 12))))
while len(nums) < 600:
    d = Decimal(random.randint(-10**random.randint(1, 30), 10**random.randint(1, 30))).scaleb(-random.randint(0, 12))
    nums.add(d.normalize())
texts, nums = sorted(texts), sorted(nums)
with open(sys.argv[1] + ".text", "w") as f:
    for t in sorted(texts, key=lambda s: s.encode()):
        f.write(t + "\n")
with open(sys.argv[1] + ".num", "w") as f:
    for n in nums:
        f.write(str(n) + "\n")
order = list(range(600))
random.shuffle(order)
for i in order:
    print("%d|%s" % (i, json.dumps({"t": texts[i], "n": str(nums[i]), "i": i})))
PY

sql >/dev/null <<SQL
CREATE TABLE e2e.ko_t_$SFX (t text COLLATE "C" PRIMARY KEY, i int, seq bigserial);
CREATE TABLE e2e.ko_n_$SFX (n numeric PRIMARY KEY, i int, seq bigserial);
CREATE TABLE e2e.ko_u_$SFX (t text COLLATE "und-x-icu" PRIMARY KEY, i int, seq bigserial);
CREATE TABLE e2e.ko_c_$SFX (t text COLLATE "und-x-icu", i int, seq bigserial, PRIMARY KEY (t, i));
CREATE TABLE e2e.ko_b_$SFX (t char(40) COLLATE "und-x-icu" PRIMARY KEY, i int, seq bigserial);
$(for k in t n u c b; do echo "ALTER TABLE e2e.ko_${k}_$SFX OWNER TO ks_e2e;"; done)
SET ROLE ks_e2e;
$(for k in t n u c b; do echo "SELECT kafka_sink.create_pipeline(name => 'ko${k}_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$T'], target => 'e2e.ko_${k}_$SFX', starting_offsets => 'earliest',
       min_offsets_per_batch => 600, max_trigger_delay => '30 s');"; done)
SQL
# one_batch PIPELINE: how many batches of PIPELINE held messages
one_batch() { sql -c "SELECT count(*) FROM kafka_sink.batches b JOIN kafka_sink.pipelines p ON p.id = b.pipeline_id WHERE p.name = '$1' AND b.messages > 0"; }
check_caught_up "kot_$SFX"
check_caught_up "kon_$SFX"
check "text COLLATE \"C\": one batch" 1 "$(one_batch "kot_$SFX")"
check "text COLLATE \"C\": inserted in the keys' byte order" same \
      "$(diff <(sql -c "SELECT t FROM e2e.ko_t_$SFX ORDER BY seq") "$MODEL.text" >/dev/null && echo same || echo differ)"
check "numeric: one batch" 1 "$(one_batch "kon_$SFX")"
check "numeric: inserted in the keys' numeric order" same \
      "$(diff <(sql -c "SELECT n::text FROM e2e.ko_n_$SFX ORDER BY seq" | python3 -c 'import sys; from decimal import Decimal; [print(Decimal(l).normalize()) for l in sys.stdin.read().split()]') "$MODEL.num" >/dev/null && echo same || echo differ)"
for n in kou koc kob; do check_caught_up "${n}_$SFX"; done
for n in kou koc kob; do
    check "$n (und-x-icu): one batch" 1 "$(one_batch "${n}_$SFX")"
done
check "text COLLATE \"und-x-icu\": inserted in the keys' byte order, not ICU's" same \
      "$(diff <(sql -c "SELECT t FROM e2e.ko_u_$SFX ORDER BY seq") "$MODEL.text" >/dev/null && echo same || echo differ)"
check "(text COLLATE \"und-x-icu\", int): inserted in the keys' byte order" same \
      "$(diff <(sql -c "SELECT t FROM e2e.ko_c_$SFX ORDER BY seq") "$MODEL.text" >/dev/null && echo same || echo differ)"
check "char(40) COLLATE \"und-x-icu\": inserted in the keys' byte order" same \
      "$(diff <(sql -c "SELECT rtrim(t) FROM e2e.ko_b_$SFX ORDER BY seq") "$MODEL.text" >/dev/null && echo same || echo differ)"
# the model's two orders differ (else the checks above prove nothing)
check "ICU's order of the keys is not their bytes'" differ \
      "$(diff <(sql -c "SELECT t FROM e2e.ko_u_$SFX ORDER BY t") "$MODEL.text" >/dev/null && echo same || echo differ)"

# a nondeterministic (case-insensitive) collation: 'Ab1' and 'aB1' are one
# key; per key the row has the first message's spelling (the message that
# inserts the row writes the key) and the last message's value (no order
# column), rows inserted in the collation's order, for letters and digits
# the bytes of the lower-cased key
T2="e2e_korder_ci_$SFX"
"$HARNESS" topic-create "$T2" 1 >/dev/null 2>&1
python3 - "$MODEL" <<'PY' | produce "$T2" -p 0
import json, random, sys
random.seed(2929)
alnum = "abcdefghijklmnopqrstuvwxyz0123456789"
bases = set()
while len(bases) < 150:
    bases.add("".join(random.choice(alnum) for _ in range(random.randint(1, 6))))
bases = sorted(bases)
first, last = {}, {}
for v in range(900):
    b = random.choice(bases)
    k = "".join(c.upper() if random.random() < 0.5 else c for c in b)
    first.setdefault(b, k)
    last[b] = v
    print("%d|%s" % (v, json.dumps({"k": k, "v": v})))
with open(sys.argv[1] + ".ci", "w") as f:
    for b in sorted(first, key=lambda s: s.encode()):
        f.write("%s|%d\n" % (first[b], last[b]))
with open(sys.argv[1] + ".ci_bytes", "w") as f:
    for b in sorted(first, key=lambda b: first[b].encode()):
        f.write("%s|%d\n" % (first[b], last[b]))
PY
sql >/dev/null <<SQL
CREATE COLLATION e2e.ko_ci_$SFX (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
CREATE TABLE e2e.ko_ci_$SFX (k text COLLATE e2e.ko_ci_$SFX PRIMARY KEY, v int, seq bigserial);
ALTER TABLE e2e.ko_ci_$SFX OWNER TO ks_e2e;
SET ROLE ks_e2e;
SELECT kafka_sink.create_pipeline(name => 'koci_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$T2'], target => 'e2e.ko_ci_$SFX', starting_offsets => 'earliest',
       min_offsets_per_batch => 900, max_trigger_delay => '30 s');
SQL
check_caught_up "koci_$SFX"
check "case-insensitive key: one batch" 1 "$(one_batch "koci_$SFX")"
check "case-insensitive key: one row per key as the collation groups them" "$(wc -l < "$MODEL.ci")" \
      "$(sql -c "SELECT count(*) FROM e2e.ko_ci_$SFX")"
check "case-insensitive key: the rows (first spelling, last value), inserted in the collation's order" same \
      "$(diff <(sql -c "SELECT k || '|' || v FROM e2e.ko_ci_$SFX ORDER BY seq") "$MODEL.ci" >/dev/null && echo same || echo differ)"
check "the spellings' byte order is not the collation's" differ \
      "$(diff "$MODEL.ci" "$MODEL.ci_bytes" >/dev/null && echo same || echo differ)"

for n in kot kon kou koc kob koci; do sql -c "SELECT kafka_sink.drop_pipeline('${n}_$SFX')" >/dev/null; done
"$HARNESS" topic-delete "$T2" >/dev/null 2>&1 || true
finish
