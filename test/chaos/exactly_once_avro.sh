#!/usr/bin/env bash
# test/chaos/exactly_once_avro.sh -- test/chaos/exactly_once.sh with Avro
# values (CHAOS_FORMAT=avro): the same messages, model and checks, produced
# by confluent-kafka in Confluent's wire format and read through the test
# schema registry.  Smaller by default (CHAOS_MESSAGES 30000, CHAOS_KEYS
# 3000, CHAOS_KILLS 8) to keep the suite's time; every knob of
# exactly_once.sh applies.
export CHAOS_FORMAT=avro
export CHAOS_MESSAGES="${CHAOS_MESSAGES:-30000}"
export CHAOS_KEYS="${CHAOS_KEYS:-3000}"
export CHAOS_KILLS="${CHAOS_KILLS:-8}"
exec bash "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/exactly_once.sh" "$@"
