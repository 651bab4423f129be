/*-------------------------------------------------------------------------
 *
 * decode.c
 *		Message -> typed row of the target, or a quarantine reason.
 *
 * The contract: a message value is a JSON object whose fields are named
 * after the target's columns.  Each value goes through the column type's
 * input function, so numeric(18,2), timestamptz, uuid and domains check
 * their input exactly as an INSERT would.  Unknown fields are ignored;
 * a missing NOT NULL column without a default is missing_required_field.
 *
 * Input functions report bad input with ERROR on PostgreSQL 15.  To stay
 * cheap when errors are rare, a whole batch is converted inside a single
 * subtransaction; only when a value fails is that subtransaction rolled
 * back, the message quarantined, and conversion resumed after it.
 *
 *-------------------------------------------------------------------------
 */
#include "kafka_sink.h"

#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/dependency.h"
#include "catalog/pg_attribute.h"
#include "catalog/pg_type.h"
#include "common/jsonapi.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/resowner.h"

#if PG_VERSION_NUM >= 160000
#define KS_JSON_RETURN JsonParseErrorType
#define KS_JSON_OK return JSON_SUCCESS
#else
#define KS_JSON_RETURN void
#define KS_JSON_OK return
#endif

const char *
ks_reason_name(KsReason r)
{
	switch (r)
	{
		case KS_OK:
			return "ok";
		case KS_INVALID_JSON:
			return "invalid_json";
		case KS_NOT_AN_OBJECT:
			return "not_an_object";
		case KS_MISSING_REQUIRED_FIELD:
			return "missing_required_field";
		case KS_INVALID_VALUE:
			return "invalid_value";
		case KS_UNKNOWN_SCHEMA_VERSION:
			return "unknown_schema_version";
		case KS_NULL_KEY:
			return "null_key";
		case KS_CONSTRAINT_VIOLATION:
			return "constraint_violation";
		case KS_VALUE_TOO_LARGE:
			return "value_too_large";
	}
	return "unknown";
}

static int
column_index(KsTarget *t, const char *name)
{
	for (int i = 0; i < t->ncolumns; i++)
		if (strcmp(t->columns[i].name, name) == 0)
			return i;
	return -1;
}

/*
 * Describes the target for decoding and for the generated statements.
 * Generated columns and GENERATED ALWAYS identity columns are never
 * written, so they are left out.  Must run in a transaction with SPI.
 */
KsTarget *
ks_target_open(KsPipeline *p)
{
	KsTarget   *t = palloc0(sizeof(KsTarget));
	Relation	rel;
	TupleDesc	desc;
	ListCell   *lc;
	int			k;

	rel = table_open(p->target, AccessShareLock);
	desc = RelationGetDescr(rel);
	t->relid = p->target;
	t->rowtype = rel->rd_rel->reltype;
	t->qualified_name = quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
												   RelationGetRelationName(rel));
	t->columns = palloc0(sizeof(KsColumn) * desc->natts);
	t->natts_all = desc->natts;
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);
		KsColumn   *c;
		Oid			infunc;

		if (att->attisdropped || att->attgenerated != '\0' ||
			att->attidentity == ATTRIBUTE_IDENTITY_ALWAYS)
			continue;
		c = &t->columns[t->ncolumns++];
		c->name = pstrdup(NameStr(att->attname));
		c->attnum = att->attnum;
		c->typid = att->atttypid;
		c->typmod = att->atttypmod;
		c->collation = att->attcollation;
		getTypeInputInfo(att->atttypid, &infunc, &c->ioparam);
		fmgr_info(infunc, &c->infunc);
		c->required = att->attnotnull && !att->atthasdef && att->attidentity == '\0';
		c->type_sql = format_type_with_typemod(att->atttypid, att->atttypmod);
		c->is_json = (getBaseType(att->atttypid) == JSONOID ||
					  getBaseType(att->atttypid) == JSONBOID);
		if (att->atthasdef)
		{
			Oid			argtypes[2] = {OIDOID, INT2OID};
			Datum		values[2] = {ObjectIdGetDatum(p->target), Int16GetDatum(att->attnum)};

			if (SPI_execute_with_args("SELECT pg_catalog.pg_get_expr(adbin, adrelid)"
									  " FROM pg_catalog.pg_attrdef WHERE adrelid = $1 AND adnum = $2",
									  2, argtypes, values, NULL, true, 1) == SPI_OK_SELECT &&
				SPI_processed == 1)
				c->default_sql = pstrdup(SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1));
		}
		else if (att->attidentity == ATTRIBUTE_IDENTITY_BY_DEFAULT)
		{
			Oid			seq = getIdentitySequence(p->target, att->attnum, true);

			if (OidIsValid(seq))
				c->default_sql = psprintf("pg_catalog.nextval(%s::pg_catalog.regclass)",
										  quote_literal_cstr(quote_qualified_identifier(get_namespace_name(get_rel_namespace(seq)),
																						get_rel_name(seq))));
		}
	}
	{
		StringInfoData b;
		bool		first = true;

		initStringInfo(&b);
		for (int i = 0; i < desc->natts; i++)
		{
			Form_pg_attribute att = TupleDescAttr(desc, i);
			int			idx;

			if (att->attisdropped)
				continue;
			idx = column_index(t, NameStr(att->attname));
			if (!first)
				appendStringInfoString(&b, ", ");
			first = false;
			if (idx >= 0)
				appendStringInfo(&b, "s.%s", quote_identifier(NameStr(att->attname)));
			else
				appendStringInfoString(&b, "NULL");
		}
		t->row_sql = b.data;
	}
	table_close(rel, AccessShareLock);

	t->nkeys = list_length(p->key_columns);
	t->key_index = palloc(sizeof(int) * Max(t->nkeys, 1));
	k = 0;
	foreach(lc, p->key_columns)
	{
		int			idx = column_index(t, lfirst(lc));

		if (idx < 0)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_COLUMN),
					 errmsg("key column \"%s\" no longer exists in %s", (char *) lfirst(lc), t->qualified_name),
					 errhint("Recreate the pipeline with key columns of the target.")));
		t->key_index[k++] = idx;
		t->columns[idx].is_key = true;
	}
	t->order_index = -1;
	if (p->order_column)
	{
		t->order_index = column_index(t, p->order_column);
		if (t->order_index < 0)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_COLUMN),
					 errmsg("order column \"%s\" no longer exists in %s", p->order_column, t->qualified_name),
					 errhint("Recreate the pipeline with an order column of the target.")));
		t->columns[t->order_index].is_order = true;
	}
	return t;
}

/* ---- the JSON walk ---- */

typedef enum FieldKind
{
	F_ABSENT = 0,
	F_NULL,
	F_STRING,
	F_SCALAR,					/* number, true, false: the token as is */
	F_COMPOSITE					/* object or array: its JSON text */
} FieldKind;

typedef struct Field
{
	FieldKind	kind;
	char	   *text;
} Field;

typedef struct WalkState
{
	KsTarget   *target;
	JsonLexContext *lex;
	Field	   *fields;
	bool		root_object;
	bool		root_seen;
	int			current;		/* column of the current top-level field */
	char	   *composite_start;
} WalkState;

static KS_JSON_RETURN
walk_object_start(void *state)
{
	WalkState  *w = state;

	if (w->lex->lex_level == 0)
	{
		w->root_seen = true;
		w->root_object = true;
	}
	else if (w->lex->lex_level == 1 && w->current >= 0)
		w->composite_start = w->lex->token_start;
	KS_JSON_OK;
}

static KS_JSON_RETURN
walk_array_start(void *state)
{
	WalkState  *w = state;

	if (w->lex->lex_level == 0)
		w->root_seen = true;
	else if (w->lex->lex_level == 1 && w->current >= 0)
		w->composite_start = w->lex->token_start;
	KS_JSON_OK;
}

static KS_JSON_RETURN
walk_composite_end(void *state)
{
	WalkState  *w = state;

	if (w->lex->lex_level == 1 && w->current >= 0 && w->composite_start)
	{
		Field	   *f = &w->fields[w->current];

		f->kind = F_COMPOSITE;
		f->text = pnstrdup(w->composite_start,
						   w->lex->prev_token_terminator - w->composite_start);
		w->composite_start = NULL;
	}
	KS_JSON_OK;
}

static KS_JSON_RETURN
walk_field_start(void *state, char *fname, bool isnull)
{
	WalkState  *w = state;

	(void) isnull;
	if (w->lex->lex_level == 1)
		w->current = column_index(w->target, fname);
	KS_JSON_OK;
}

static KS_JSON_RETURN
walk_scalar(void *state, char *token, JsonTokenType type)
{
	WalkState  *w = state;

	if (w->lex->lex_level == 0)
	{
		w->root_seen = true;
		KS_JSON_OK;
	}
	if (w->lex->lex_level == 1 && w->current >= 0)
	{
		Field	   *f = &w->fields[w->current];

		if (type == JSON_TOKEN_NULL)
		{
			f->kind = F_NULL;
			f->text = NULL;
		}
		else
		{
			f->kind = (type == JSON_TOKEN_STRING) ? F_STRING : F_SCALAR;
			f->text = token;
		}
	}
	KS_JSON_OK;
}

/* Parses the value into fields; returns a reason when it is not an object. */
static KsReason
walk_json(KsTarget *t, const char *data, size_t len, Field *fields, char **detail)
{
	WalkState	w = {0};
	JsonSemAction sem = {0};
	JsonParseErrorType err;
	JsonLexContext *lex;
	char	   *copy;

	if (!pg_verify_mbstr(PG_UTF8, data, len, true))
	{
		*detail = pstrdup("the value is not valid UTF-8");
		return KS_INVALID_JSON;
	}
	copy = pnstrdup(data, len);
	if (GetDatabaseEncoding() != PG_UTF8)
		copy = pg_any_to_server(copy, len, PG_UTF8);
#if PG_VERSION_NUM >= 170000
	lex = makeJsonLexContextCstringLen(NULL, copy, strlen(copy), GetDatabaseEncoding(), true);
#else
	lex = makeJsonLexContextCstringLen(copy, strlen(copy), GetDatabaseEncoding(), true);
#endif
	w.target = t;
	w.lex = lex;
	w.fields = fields;
	w.current = -1;
	sem.semstate = &w;
	sem.object_start = walk_object_start;
	sem.object_end = walk_composite_end;
	sem.array_start = walk_array_start;
	sem.array_end = walk_composite_end;
	sem.object_field_start = walk_field_start;
	sem.scalar = walk_scalar;

	err = pg_parse_json(lex, &sem);
	if (err != JSON_SUCCESS)
	{
		*detail = psprintf("invalid JSON: %s", json_errdetail(err, lex));
		return KS_INVALID_JSON;
	}
	if (!w.root_object)
	{
		*detail = pstrdup("the value is valid JSON but not an object");
		return KS_NOT_AN_OBJECT;
	}
	return KS_OK;
}

/* Which column is being converted, for the error detail; see decode_one. */
static volatile int converting_column = -1;

static bool
is_text_like(Oid typid)
{
	Oid			base = getBaseType(typid);

	return base == TEXTOID || base == VARCHAROID || base == BPCHAROID;
}

/*
 * Decodes one message.  Reasons found without running an input function
 * are set on the row; an input function's ERROR propagates to the caller.
 */
static void
decode_one(KsTarget *t, KsRow *row)
{
	KsMessage  *m = row->msg;
	Field	   *fields = palloc0(sizeof(Field) * Max(t->ncolumns, 1));
	char	   *detail = NULL;
	KsReason	r;

	row->values = palloc0(sizeof(Datum) * Max(t->ncolumns, 1));
	row->nulls = palloc(sizeof(bool) * Max(t->ncolumns, 1));
	row->present = palloc0(sizeof(bool) * Max(t->ncolumns, 1));
	for (int i = 0; i < t->ncolumns; i++)
		row->nulls[i] = true;

	if (m->value == NULL)
	{
		row->reason = KS_NOT_AN_OBJECT;
		row->detail = pstrdup("the message has no value (a tombstone)");
		return;
	}
	if (m->value_len > (size_t) ks_max_message_bytes)
	{
		row->reason = KS_VALUE_TOO_LARGE;
		row->detail = psprintf("the value has %zu bytes; kafka_sink.max_message_bytes is %d",
							   m->value_len, ks_max_message_bytes);
		return;
	}
	r = walk_json(t, m->value, m->value_len, fields, &detail);
	if (r != KS_OK)
	{
		row->reason = r;
		row->detail = detail;
		return;
	}

	for (int i = 0; i < t->ncolumns; i++)
	{
		KsColumn   *c = &t->columns[i];
		Field	   *f = &fields[i];
		char	   *text = f->text;

		switch (f->kind)
		{
			case F_ABSENT:
				if (c->required || c->is_key)
				{
					row->reason = c->is_key ? KS_NULL_KEY : KS_MISSING_REQUIRED_FIELD;
					row->detail = psprintf("required field \"%s\" is missing", c->name);
					return;
				}
				continue;
			case F_NULL:
				if (c->is_key)
				{
					row->reason = KS_NULL_KEY;
					row->detail = psprintf("key field \"%s\" is null", c->name);
					return;
				}
				row->present[i] = true;
				continue;
			case F_STRING:
				if (c->is_json)
				{
					StringInfoData buf;

					initStringInfo(&buf);
					escape_json(&buf, text);
					text = buf.data;
				}
				break;
			case F_SCALAR:
				break;
			case F_COMPOSITE:
				if (!c->is_json && !is_text_like(c->typid))
				{
					row->reason = KS_INVALID_VALUE;
					row->detail = psprintf("field \"%s\": a JSON %s is not a valid %s",
										   c->name, text[0] == '{' ? "object" : "array",
										   c->type_sql);
					return;
				}
				break;
		}
		converting_column = i;
		row->values[i] = InputFunctionCall(&c->infunc, text, c->ioparam, c->typmod);
		row->nulls[i] = false;
		row->present[i] = true;
	}
	converting_column = -1;

	/* explicit nulls in NOT NULL columns would fail the MERGE: catch them now */
	for (int i = 0; i < t->ncolumns; i++)
		if (row->present[i] && row->nulls[i] && t->columns[i].required)
		{
			row->reason = KS_CONSTRAINT_VIOLATION;
			row->detail = psprintf("field \"%s\" is null but the column is NOT NULL",
								   t->columns[i].name);
			return;
		}
	row->reason = KS_OK;
}

static bool
is_row_data_error(int sqlerrcode)
{
	int			cls = ERRCODE_TO_CATEGORY(sqlerrcode);

	return cls == ERRCODE_DATA_EXCEPTION ||
		cls == ERRCODE_INTEGRITY_CONSTRAINT_VIOLATION ||
		sqlerrcode == ERRCODE_INVALID_TEXT_REPRESENTATION ||
		sqlerrcode == ERRCODE_INVALID_BINARY_REPRESENTATION;
}

void
ks_decode_batch(KsTarget *t, KsRow *rows, int nrows)
{
	int			next = 0;

	while (next < nrows)
	{
		MemoryContext cxt = CurrentMemoryContext;
		ResourceOwner owner = CurrentResourceOwner;
		volatile int cur = next;

		BeginInternalSubTransaction(NULL);
		MemoryContextSwitchTo(cxt);
		PG_TRY();
		{
			for (; cur < nrows; cur++)
				decode_one(t, &rows[cur]);
			ReleaseCurrentSubTransaction();
			MemoryContextSwitchTo(cxt);
			CurrentResourceOwner = owner;
			next = nrows;
		}
		PG_CATCH();
		{
			ErrorData  *edata;
			int			col = converting_column;

			MemoryContextSwitchTo(cxt);
			edata = CopyErrorData();
			FlushErrorState();
			RollbackAndReleaseCurrentSubTransaction();
			MemoryContextSwitchTo(cxt);
			CurrentResourceOwner = owner;
			converting_column = -1;
			if (!is_row_data_error(edata->sqlerrcode))
				ReThrowError(edata);
			rows[cur].reason = KS_INVALID_VALUE;
			if (col >= 0)
				rows[cur].detail = psprintf("field \"%s\" is not a valid %s: %s",
											t->columns[col].name, t->columns[col].type_sql,
											edata->message);
			else
				rows[cur].detail = pstrdup(edata->message);
			FreeErrorData(edata);
			next = cur + 1;
		}
		PG_END_TRY();
	}
}
