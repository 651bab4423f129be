/*-------------------------------------------------------------------------
 *
 * envelope_plain.c
 *		The plain envelope: the message value is the row; a tombstone (no
 *		value) deletes the row of its key when delete_on_tombstone is on.
 *
 * Owns: what a plain message means (upsert or insert, delete, or a
 * quarantine reason before any field is read) and the registration of
 * envelopes.  Must not: know a format's bytes (format.h) or convert
 * values (decode.c).  Its exports, ks_envelope_plain and the table's
 * ks_envelope_find, are envelope.h's.
 *
 *-------------------------------------------------------------------------
 */
#include "kafka_sink.h"
#include "pipeline.h"
#include "envelope.h"
#include "format.h"

static void
plain_decode(KsTarget *t, KsPipeline *p, KsRow *row)
{
	KsMessage  *m = row->msg;
	KsSlotValue *slots;
	char	   *detail = NULL;
	KsReason	fr;

	ks_row_init(t, row);
	if (m->value == NULL)
	{
		if (p->contract.delete_on_tombstone)
		{
			ks_decode_key(t, p, row);
			row->is_delete = (row->reason == KS_OK);
			return;
		}
		row->reason = KS_NOT_AN_OBJECT;
		row->detail = pstrdup("the message has no value (a tombstone) and delete_on_tombstone is off");
		return;
	}
	if (ks_row_too_large(row))
		return;
	slots = palloc0(sizeof(KsSlotValue) * Max(t->walk.nslots, 1));
	fr = ks_format_decode(t, p, false, m->value, m->value_len, slots, &detail);
	if (fr != KS_OK)
	{
		row->reason = fr;
		row->detail = detail;
		return;
	}
	ks_decode_fields(t, p, row, slots);
}

const KsEnvelope ks_envelope_plain = {"plain", plain_decode};

/* Registration: one line per envelope; the first is the default. */
static const KsEnvelope *const ks_envelopes[] = {
	&ks_envelope_plain,
	&ks_envelope_debezium,
	NULL
};

const KsEnvelope *
ks_envelope_find(const char *name)
{
	for (int i = 0; ks_envelopes[i] != NULL; i++)
		if (strcmp(ks_envelopes[i]->name, name) == 0)
			return ks_envelopes[i];
	return NULL;
}
