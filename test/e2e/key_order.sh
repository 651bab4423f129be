#!/usr/bin/env bash
# key_order: a batch's winners are applied in their key's btree order, also
# where the key's type sorts through abbreviated keys (text in the "C"
# collation, numeric): a bigserial column shows the insert order, checked
# against the keys sorted by Python (bytes for "C", exact decimals for
# numeric), not by the extension or PostgreSQL.
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
ALTER TABLE e2e.ko_t_$SFX OWNER TO ks_e2e;
ALTER TABLE e2e.ko_n_$SFX OWNER TO ks_e2e;
SET ROLE ks_e2e;
SELECT kafka_sink.create_pipeline(name => 'kot_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$T'], target => 'e2e.ko_t_$SFX', starting_offsets => 'earliest',
       min_offsets_per_batch => 600, max_trigger_delay => '30 s');
SELECT kafka_sink.create_pipeline(name => 'kon_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$T'], target => 'e2e.ko_n_$SFX', starting_offsets => 'earliest',
       min_offsets_per_batch => 600, max_trigger_delay => '30 s');
SQL
check_caught_up "kot_$SFX"
check_caught_up "kon_$SFX"
check "text COLLATE \"C\": one batch" 1 "$(sql -c "SELECT count(*) FROM kafka_sink.batches b JOIN kafka_sink.pipelines p ON p.id = b.pipeline_id WHERE p.name = 'kot_$SFX' AND b.messages > 0")"
check "text COLLATE \"C\": inserted in the keys' byte order" same \
      "$(diff <(sql -c "SELECT t FROM e2e.ko_t_$SFX ORDER BY seq") "$MODEL.text" >/dev/null && echo same || echo differ)"
check "numeric: one batch" 1 "$(sql -c "SELECT count(*) FROM kafka_sink.batches b JOIN kafka_sink.pipelines p ON p.id = b.pipeline_id WHERE p.name = 'kon_$SFX' AND b.messages > 0")"
check "numeric: inserted in the keys' numeric order" same \
      "$(diff <(sql -c "SELECT n::text FROM e2e.ko_n_$SFX ORDER BY seq" | python3 -c 'import sys; from decimal import Decimal; [print(Decimal(l).normalize()) for l in sys.stdin.read().split()]') "$MODEL.num" >/dev/null && echo same || echo differ)"

for n in kot kon; do sql -c "SELECT kafka_sink.drop_pipeline('${n}_$SFX')" >/dev/null; done
finish
