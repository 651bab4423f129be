/*-------------------------------------------------------------------------
 *
 * secret_ref.h
 *		Secrets by reference: {"env": "NAME"} and {"file": "/path"} in place
 *		of a secret option's value (src/infra/secret_ref.c).
 *
 *		Owns: KsOption, KsSecretRef, kafka_sink.secret_env_allowed and
 *		reading a value.  Must not: decide which options are secrets
 *		(kafka_options.h) or hand a value to a client (consumer.c,
 *		producer.c and schema_registry.c do).
 *
 *-------------------------------------------------------------------------
 */
#ifndef KS_SECRET_REF_H
#define KS_SECRET_REF_H

#include "postgres.h"

#include "utils/guc.h"
#include "utils/jsonb.h"

/*
 * How a secret option is given (src/infra/secret_ref.c): the value itself,
 * or a reference to where the server reads it at each client build.
 */
typedef enum KsSecretRef
{
	KS_REF_NONE = 0,			/* value is the secret */
	KS_REF_ENV,					/* value names a variable of the server's environment */
	KS_REF_FILE					/* value is the absolute path of a file holding it */
} KsSecretRef;

/* an option: a librdkafka or registry setting, or a secret (pipeline.h) */
typedef struct KsOption
{
	char	   *name;
	char	   *value;			/* the value, or the variable or path of ref */
	KsSecretRef ref;
} KsOption;

/* kafka_sink.secret_env_allowed: the variables a reference may name */
extern char *ks_secret_env_allowed;
extern bool ks_secret_env_allowed_check(char **newval, void **extra, GucSource source);

/*
 * Parses a reference (a JSON object) given for option, the name of a
 * secret option of what ("Kafka option", "schema registry option"): one
 * key, "env" or "file", with a string value that is a variable name or an
 * absolute, normalized path.  Sets *ref and *arg (the name or the path), or
 * raises an ERROR naming the option, never a value.
 */
extern void ks_secret_ref_parse(JsonbContainer *jc, const char *what, const char *option,
								KsSecretRef *ref, char **arg);

/* The same from the text of a stored reference (the catalog). */
extern void ks_secret_ref_parse_text(const char *json, const char *what, const char *option,
									 KsSecretRef *ref, char **arg);

/*
 * Raises unless owner may use the reference now: an env reference names a
 * variable of kafka_sink.secret_env_allowed; a file reference needs an
 * owner who may have the server read its files.  Called where a reference
 * is defined and again at every resolution: the setting and the roles
 * change.
 */
extern void ks_secret_ref_check(const char *what, const char *option,
								KsSecretRef ref, const char *arg, Oid owner);

/*
 * The secret a reference stands for, read now (palloc'd; free it with
 * ks_secret_free): the variable of the server's environment, or the file's
 * content without one trailing newline.  Every ERROR names the option and
 * the variable or path, never the content.
 */
extern char *ks_secret_resolve(const char *what, const char *option,
							   KsSecretRef ref, const char *arg, Oid owner);

/* The value to give a client for option o: the literal, or the reference resolved. */
extern char *ks_option_value(const KsOption *o, const char *what, Oid owner);

/*
 * ks_option_value of each option of a list, in its order: read before a
 * client's configuration is made, so that a failed read leaks none.
 */
extern char **ks_option_values(List *options, const char *what, Oid owner);

/* Zeroes and frees what ks_option_value or ks_secret_resolve returned (a literal is left alone). */
extern void ks_secret_free(const KsOption *o, char *value);

/* May owner have the server read files on its behalf (pg_read_server_files)? */
extern bool ks_owner_reads_server_files(Oid owner);

/* Is owner a superuser?  (Inside or outside a transaction, as the above.) */
extern bool ks_owner_is_superuser(Oid owner);

#endif							/* KS_SECRET_REF_H */
