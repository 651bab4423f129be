# test/bench/ab_lib.sh — what the A/B scripts of builds share (sourced by
# text_ab.sh, bronze_ab.sh and cdc_ab.sh after ../lib/common.sh):
#   ab_builds "$@"   SOS=(the kafka_sink.so files given, or "" for the
#                    installed build); exits 2 when one is missing
#   swap SO          installs SO into the harness's PostgreSQL (KS_PGBIN's
#                    lib dir, KS_PRIVATE_PG=1), restarts the cluster and
#                    runs SO.sql if there is one; nothing for ""
#   proc_cpu PID     utime + stime of a process, in seconds
#   thread_cpu PID   "NAME CPU_S" for each of its threads
#   median           the median of the numbers on stdin (spaces or lines)
#   rows_md5 TABLE   one md5 over bench.orders-shaped rows, by order_id
# shellcheck shell=bash
LIB="$(dirname "$KS_PGBIN")/lib"
ab_builds() {
    SOS=("$@")
    [ ${#SOS[@]} -gt 0 ] || SOS=("")
    local so
    for so in "${SOS[@]}"; do [ -z "$so" ] || [ -f "$so" ] || { echo "no build $so"; exit 2; }; done
}
swap() {
    [ -n "$1" ] || return 0
    cp "$1" "$LIB/kafka_sink.so.new" && mv "$LIB/kafka_sink.so.new" "$LIB/kafka_sink.so"
    "$HARNESS" pg-stop >/dev/null 2>&1
    "$HARNESS" pg-start >/dev/null 2>&1
    # a build whose catalog differs brings it: SO.sql, run as superuser
    [ ! -f "$1.sql" ] || sql -f "$1.sql" >/dev/null
}
# thread_cpu PID: "NAME CPU_S" per thread of a process (librdkafka names its own)
thread_cpu() {
    local t
    for t in /proc/"$1"/task/*; do
        sed 's/^[0-9]* (\(.*\)) /\1 /' "$t/stat" | awk -v t="$(getconf CLK_TCK)" '{n = NF - 51; printf "%s %.2f minflt %d\n", $1, ($(13 + n) + $(14 + n)) / t, $(9 + n)}'
    done
}
proc_cpu() { sed 's/^.*) //' "/proc/$1/stat" | awk -v t="$(getconf CLK_TCK)" '{printf "%.2f", ($12 + $13) / t}'; }
median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR] = $1} END {if (NR % 2) print a[(NR + 1) / 2]; else printf "%.2f\n", (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
rows_md5() { sql -c "SELECT md5(string_agg(order_id || ',' || event_ts || ',' || amount || ',' || schema_version, ';' ORDER BY order_id)) FROM $1"; }
