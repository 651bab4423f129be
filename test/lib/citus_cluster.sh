# test/lib/citus_cluster.sh — a Citus cluster of a test script's own on
# loopback, for test/e2e/citus*.sh (sourced after common.sh): a
# coordinator preloading citus and kafka_sink and two worker nodes
# preloading citus alone, Citus built and installed by test/tools/citus.sh.
#
#   citus_skip_unless_available   ends the script with a "# skipped" line
#                                 where ../shared/vendor has no Citus source
#   citus_cluster_start           starts the three, CREATE EXTENSION citus on
#                                 each, the worker nodes added; sets COORD,
#                                 W1, W2 (cluster dirs), PC, P1, P2 (ports),
#                                 CITUS_CONF; sqlc runs psql on the coordinator
#   citus_cluster_ready TAG       all of it for a script that does not test
#                                 the setup: the skip, the cluster, CREATE
#                                 EXTENSION kafka_sink and the owner role
#   citus_node_start DIR          one more worker node (not added)
# shellcheck shell=bash

citus_skip_unless_available() {
    if ! bash "$REPO/test/tools/citus.sh" available 2>/dev/null; then
        echo "# skipped: no Citus source in ${KS_VENDOR:-$REPO/../shared/vendor} (test/tools/citus.sh): Citus tests do not run on this machine"
        finish
        exit $?
    fi
    bash "$REPO/test/tools/citus.sh" install "$KS_PGBIN" \
        || { echo "not ok - Citus could not be built or installed"; exit 1; }
}

CITUS_CONF="max_prepared_transactions = 40
citus.node_conninfo = 'sslmode=disable'
citus.recover_2pc_interval = '2s'
wal_level = logical"

citus_node_start() { KS_PRELOAD=citus KS_PG_CONF="$CITUS_CONF" own_cluster_start "$1"; }
citus_coordinator_start() { KS_PRELOAD=citus,kafka_sink KS_PG_CONF="$CITUS_CONF" own_cluster_start "$COORD"; }
sqlc() { sql_at "$PC" "$@"; }

citus_cluster_start() {
    local tag="${1:-citus}" p
    COORD="$KS_RUN/${tag}_c_$SFX"
    W1="$KS_RUN/${tag}_w1_$SFX"
    W2="$KS_RUN/${tag}_w2_$SFX"
    citus_node_start "$W1"
    citus_node_start "$W2"
    citus_coordinator_start
    PC="$(own_port "$COORD")" P1="$(own_port "$W1")" P2="$(own_port "$W2")"
    for p in "$P1" "$P2"; do sql_at "$p" -c "CREATE EXTENSION citus" >/dev/null; done
    sqlc -c "CREATE EXTENSION citus" >/dev/null
    sqlc -c "SELECT citus_set_coordinator_host('127.0.0.1', $PC)" >/dev/null
    sqlc -c "SELECT citus_add_node('127.0.0.1', $P1)" >/dev/null
    sqlc -c "SELECT citus_add_node('127.0.0.1', $P2)" >/dev/null
}

citus_cluster_ready() {
    citus_skip_unless_available
    citus_cluster_start "$1"
    sqlc -c "CREATE EXTENSION kafka_sink" >/dev/null
    PGPORT="$PC" setup_owner >/dev/null
}
