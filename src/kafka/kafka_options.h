/*-------------------------------------------------------------------------
 *
 * kafka_options.h
 *		The allow-lists of the librdkafka properties and the
 *		schema_registry options a pipeline owner may set
 *		(src/kafka/kafka_options.c).
 *
 *		Owns: KsOptionUse, the checks of both allow-lists and which
 *		options are secrets.  Must not: build a client (consumer.c,
 *		producer.c) or read a secret's value (secret_ref.h).
 *
 *-------------------------------------------------------------------------
 */
#ifndef KAFKA_OPTIONS_H
#define KAFKA_OPTIONS_H

#include "postgres.h"

#include "nodes/pg_list.h"

/* which kind of client the options are for */
typedef enum KsOptionUse
{
	KS_USE_CONSUMER = 1 << 0,
	KS_USE_PRODUCER = 1 << 1
} KsOptionUse;

/*
 * Checks options (a list of KsOption) against the allow-list for a client
 * of kind use that runs on behalf of owner.  Raises an ERROR naming the
 * first option that is not allowed, never its value.  Called by the SQL
 * validator and again right before every rd_kafka_conf_t is built: the
 * catalog is data, and data can be written by other paths.
 */
extern void ks_options_check(List *options, Oid owner, KsOptionUse use);

/* True for librdkafka properties whose values must be kept secret. */
extern bool ks_option_is_secret(const char *name);

/*
 * The same rules for schema_registry's options (a list of KsOption): a
 * table of names, secrets stored apart, ssl.ca.location only for owners
 * who may read server files.
 */
extern void ks_registry_options_check(List *options, Oid owner);
extern bool ks_registry_option_is_secret(const char *name);

#endif							/* KAFKA_OPTIONS_H */
