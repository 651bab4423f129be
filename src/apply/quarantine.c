/*-------------------------------------------------------------------------
 *
 * quarantine.c
 *		Quarantine rows: every message of a batch that did not apply gets
 *		a row in kafka_sink.quarantine with its reason, and, when the
 *		pipeline has a dead_letter_topic, a dead-letter outbox row written
 *		with it (the relay publishes it only if the batch commits); none
 *		for a message quarantined as dead_letter_loop.
 *
 * Owns: the content of a quarantine row and of its dead-letter message
 * (headers, the detail cut to a size).  Must not: decide whether a row is
 * quarantined (decode.c, dedupe.c and apply_sql.c set the reasons).
 *
 *-------------------------------------------------------------------------
 */
#include "kafka_sink.h"
#include "pipeline.h"
#include "quarantine.h"
#include "catalog.h"
#include "consumer.h"
#include "decode.h"
#include "hops.h"
#include "apply.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"

/*
 * Dead-letter messages carry the quarantine's detail in a header, cut to
 * this many bytes (a detail can quote a long value; the full text stays in
 * kafka_sink.quarantine).
 */
#define KS_DLQ_DETAIL_MAX 1024

typedef struct HeaderArrays
{
	int			n;
	int			cap;
	Datum	   *names;
	Datum	   *values;
	bool	   *nulls;
} HeaderArrays;

static void
add_header(HeaderArrays *h, const char *name, const char *value, size_t len)
{
	int			nlen = strlen(name);

	if (h->n == h->cap)
	{
		h->cap = h->cap ? h->cap * 2 : 16;
		h->names = h->names ? repalloc(h->names, sizeof(Datum) * h->cap) : palloc(sizeof(Datum) * h->cap);
		h->values = h->values ? repalloc(h->values, sizeof(Datum) * h->cap) : palloc(sizeof(Datum) * h->cap);
		h->nulls = h->nulls ? repalloc(h->nulls, sizeof(bool) * h->cap) : palloc(sizeof(bool) * h->cap);
	}
	/*
	 * A header name is text; one that is not valid in the database encoding
	 * (Kafka's clients send UTF-8, but librdkafka takes any bytes) is kept
	 * as \x and its bytes in hex, as kafka_sink.quarantine.headers does.
	 */
	if (pg_verify_mbstr(GetDatabaseEncoding(), name, nlen, true))
		h->names[h->n] = CStringGetTextDatum(name);
	else
	{
		StringInfoData b;

		initStringInfo(&b);
		appendStringInfoString(&b, "\\x");
		for (int i = 0; i < nlen; i++)
			appendStringInfo(&b, "%02x", (unsigned char) name[i]);
		h->names[h->n] = CStringGetTextDatum(b.data);
	}
	h->nulls[h->n] = value == NULL;
	h->values[h->n] = value ? ks_bytea_datum(value, len) : (Datum) 0;
	h->n++;
}

static void
add_header_str(HeaderArrays *h, const char *name, const char *value)
{
	add_header(h, name, value, strlen(value));
}


/*
 * Queues the dead-letter message of a quarantined message in the outbox,
 * in the batch's transaction: the relay publishes it only if the batch
 * commits, once per quarantine write (at least once, with a stable event
 * id).  Key and value are the message's bytes, unchanged; its headers
 * come first, in their order, then kafka_sink.*, then (added by the
 * relay) kafka_sink.hops, one more than the message's, and event_id, so
 * that a consumer that reads the last header of a name gets kafka_sink's.
 */
static void
write_dead_letter(KsBatch *batch, KsRow *r, int64 quarantine_id)
{
	KsPipeline *p = batch->pipeline;
	KsMessage  *m = r->msg;
	HeaderArrays h = {0};
	ListCell   *lc;
	const char *detail = r->detail ? r->detail : "";
	size_t		dlen = strlen(detail);
	int			dims[1];
	int			lbs[1] = {1};
	Datum		names;
	Datum		values;
	char	   *created_by;
	Oid			owner = ks_catalog_extension_owner();
	Oid			save_userid;
	int			save_sec;
	int			hops = ks_message_hops(m);

	/*
	 * Cut a long detail, on a UTF-8 character boundary (the detail can quote
	 * bytes of the message, so it is not trusted to be valid: no
	 * pg_mbcliplen, which could step over the end of a bad sequence).
	 */
	if (dlen > KS_DLQ_DETAIL_MAX)
	{
		dlen = KS_DLQ_DETAIL_MAX;
		while (dlen > 0 && ((unsigned char) detail[dlen] & 0xC0) == 0x80)
			dlen--;
	}

	/*
	 * Not kafka_sink's own headers of a message that came through the
	 * outbox (its kafka_sink.*, and the relay's event_id): this dead letter
	 * gets its own, so that a message going round a loop keeps as many
	 * headers as it had (hops.c ends the loop).
	 */
	foreach(lc, ks_message_headers(m))
	{
		KsHeader   *x = lfirst(lc);

		if (ks_header_name_reserved(x->name) || (hops > 0 && strcmp(x->name, "event_id") == 0))
			continue;
		add_header(&h, x->name, x->value, x->value_len);
	}
	add_header_str(&h, "kafka_sink.pipeline", p->name);
	add_header_str(&h, "kafka_sink.topic", m->topic);
	add_header_str(&h, "kafka_sink.partition", psprintf("%d", m->partition));
	add_header_str(&h, "kafka_sink.offset", psprintf(INT64_FORMAT, m->offset));
	if (m->timestamp_ms >= 0)
		add_header_str(&h, "kafka_sink.timestamp", psprintf(INT64_FORMAT, m->timestamp_ms));
	add_header_str(&h, "kafka_sink.reason", ks_reason_name(r->reason));
	add_header(&h, "kafka_sink.detail", detail, dlen);
	add_header_str(&h, "kafka_sink.batch_id", psprintf(INT64_FORMAT, batch->batch_id));
	add_header_str(&h, "kafka_sink.quarantine_id", psprintf(INT64_FORMAT, quarantine_id));

	dims[0] = h.n;
	names = PointerGetDatum(construct_md_array(h.names, NULL, 1, dims, lbs, TEXTOID, -1, false, TYPALIGN_INT));
	values = PointerGetDatum(construct_md_array(h.values, h.nulls, 1, dims, lbs, BYTEAOID, -1, false, TYPALIGN_INT));
	created_by = GetUserNameFromId(GetUserId(), false);

	GetUserIdAndSecContext(&save_userid, &save_sec);
	SetUserIdAndSecContext(owner, save_sec | SECURITY_LOCAL_USERID_CHANGE | SECURITY_RESTRICTED_OPERATION);
	PG_TRY();
	{
		ks_catalog_insert_dead_letter(p->targets.dead_letter_topic, m, names, values, created_by, quarantine_id,
									  hops + 1);
	}
	PG_FINALLY();
	{
		SetUserIdAndSecContext(save_userid, save_sec);
	}
	PG_END_TRY();
}

static void
write_quarantine(KsBatch *batch, KsRow *r)
{
	int64		qid = ks_catalog_insert_quarantine(batch->pipeline->id, batch->batch_id, r->msg,
												   ks_message_headers_json(r->msg),
												   ks_reason_name(r->reason), r->detail ? r->detail : "",
												   r->target_name ? r->target_name :
												   batch->target ? batch->target->qualified_name : NULL);

	/* a message that went round a loop goes round no more (hops.c) */
	if (batch->pipeline->targets.dead_letter_topic && r->reason != KS_DEAD_LETTER_LOOP)
		write_dead_letter(batch, r, qid);
}


/* Writes the quarantine row of every message of the batch that did not apply. */
void
ks_quarantine_rows(KsBatch *batch)
{
	for (int i = 0; i < batch->nmsgs; i++)
	{
		KsRow	   *r = &batch->rows[i];

		if (r->reason != KS_OK)
		{
			write_quarantine(batch, r);
			batch->stats.quarantined++;
		}
	}
}
