/*-------------------------------------------------------------------------
 *
 * format.c
 *		The table of message formats, and the one call decoding makes.
 *
 * Owns: the registration of formats (one line each) and the choice of the
 * pipeline's value or key format.  Must not: know any format's bytes
 * (format_<name>.c does) or what happens to the slots afterwards.
 *
 *-------------------------------------------------------------------------
 */
#include "kafka_sink.h"
#include "format.h"

/* Registration: one line per format; the first is the default. */
static const KsFormat ks_formats[] = {
	{"json", ks_format_json_decode},
	{NULL, NULL}
};

const KsFormat *
ks_format_find(const char *name)
{
	for (const KsFormat *f = ks_formats; f->name; f++)
		if (strcmp(f->name, name) == 0)
			return f;
	return NULL;
}

/*
 * Decodes a message value (is_key false) or key into the target's slots
 * with the pipeline's format.  KS_OK, or a quarantine reason and *detail.
 * A format that cannot work at all (a registry out of reach) raises an
 * ERROR the worker retries instead of quarantining.
 */
KsReason
ks_format_decode(KsTarget *t, KsPipeline *p, bool is_key, const char *data, size_t len,
				 KsSlotValue *out, char **detail)
{
	KsFormatCall call;
	const KsFormat *f = is_key ? p->key_fmt : p->value_fmt;

	if (f == NULL)
		f = ks_formats;			/* json */
	call.t = t;
	call.p = p;
	call.is_key = is_key;
	call.walk = is_key ? &t->key_walk : &t->walk;
	call.pg_array = NULL;
	call.whole_slot = -1;
	return f->decode(&call, data, len, out, detail);
}
