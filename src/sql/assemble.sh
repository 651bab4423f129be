#!/bin/sh
# src/sql/assemble.sh — writes an install or update script of kafka_sink
# from the parts in src/sql/ (the Makefile calls it; see src/sql/README.md).
#
#   assemble.sh install VERSION PRE_INSTALL_PARTS... -- PARTS...
#   assemble.sh update FROM VERSION "CHAIN" -- PARTS...
#
# CHAIN: the versions from the oldest an update starts from to VERSION, in
# order ("0.2.0 0.3.0"); between each two neighbours a and b there is a
# hand-written src/sql/updates/a--b.sql.
#
# install: the pre-install parts (tables, types, roles, policies: what
# exists once) then the parts (every function, procedure, view, trigger,
# grant and comment, each written once as CREATE OR REPLACE).
# update:  the hand-written schema changes of every version step from FROM
# to VERSION (src/sql/updates/<a>--<b>.sql, in order), then the same parts:
# an updated database gets every definition from the same text as a fresh
# install.  Output on standard output.
set -eu
kind="$1"; shift
case "$kind" in
    install) version="$1"; shift; from="" ;;
    update)  from="$1"; version="$2"; chain="$3"; shift 3 ;;
    *) echo "assemble.sh: install or update, not '$kind'" >&2; exit 2 ;;
esac
first=""
if [ "$kind" = install ]; then
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do first="$first $1"; shift; done
else
    # the steps from FROM to VERSION along the chain
    prev="" on=0
    for v in $chain; do
        [ "$v" = "$from" ] && on=1
        if [ $on = 1 ] && [ -n "$prev" ]; then first="$first src/sql/updates/$prev--$v.sql"; fi
        [ $on = 1 ] && prev="$v"
        [ "$v" = "$version" ] && break
    done
    [ $on = 1 ] && [ "$prev" = "$version" ] && [ -n "$first" ] \
        || { echo "assemble.sh: no steps from $from to $version in '$chain'" >&2; exit 1; }
fi
[ "${1:-}" = "--" ] || { echo "assemble.sh: missing -- before the parts" >&2; exit 2; }
shift
if [ "$kind" = install ]; then
    echo "-- kafka_sink $version: install script, built by make from src/sql/ (src/sql/README.md); edit those."
else
    echo "-- kafka_sink $from to $version: update script, built by make from src/sql/updates/ and"
    echo "-- src/sql/ (src/sql/README.md); edit those."
fi
echo
if [ "$kind" = install ]; then
    printf '%s\n' '\echo Use "CREATE EXTENSION kafka_sink" to load this file. \quit'
else
    printf '%s\n' '\echo Use "ALTER EXTENSION kafka_sink UPDATE" to load this file. \quit'
fi
for f in $first "$@"; do
    [ -f "$f" ] || { echo "assemble.sh: no file $f" >&2; exit 1; }
    echo
    echo "-- ---- $f ----"
    echo
    cat "$f"
done
