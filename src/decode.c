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
#include "format.h"

#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/dependency.h"
#include "access/stratnum.h"
#include "catalog/pg_attribute.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/resowner.h"


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
		case KS_REJECTED_BY_TARGET:
			return "rejected_by_target";
		case KS_UNKNOWN_SCHEMA_ID:
			return "unknown_schema_id";
		case KS_NOT_WIRE_FORMAT:
			return "not_wire_format";
		case KS_INVALID_AVRO:
			return "invalid_avro";
	}
	return "unknown";
}

static void build_mappings(KsTarget *t, KsPipeline *p);

/*
 * Optional lineage columns of the target, filled from the message's
 * coordinates rather than its value: the expression over the batch source
 * (s) and the batch id ($1) that feeds them.
 */
static const char *
lineage_source(const char *name)
{
	if (strcmp(name, "_kafka_topic") == 0)
		return "s._ks_topic";
	if (strcmp(name, "_kafka_partition") == 0)
		return "s._ks_partition";
	if (strcmp(name, "_kafka_offset") == 0)
		return "s._ks_offset";
	if (strcmp(name, "_kafka_timestamp") == 0)
		return "s._ks_ts";
	if (strcmp(name, "_kafka_batch_id") == 0)
		return "$1";
	return NULL;
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
 * A key column as the key index compares it: the index's collation and its
 * operator class's equality and order.  The reduce hashes keys with the
 * hash function of that equality, so the equality must be hashable.
 */
static void
key_index_column(KsTarget *t, KsColumn *c, Oid coll, Oid opclass, const char *opcname,
				 const char *amname)
{
	Oid			family = get_opclass_family(opclass);
	Oid			intype = get_opclass_input_type(opclass);
	RegProcedure lhs,
				rhs;

	c->key_collation = coll;
	if (strcmp(amname, "btree") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("the unique index \"%s\" on %s is not a btree index", t->key_index_name,
						t->qualified_name),
				 errhint("Key the pipeline on columns covered by a btree unique index.")));
	c->key_eq_opr = get_opfamily_member(family, intype, intype, BTEqualStrategyNumber);
	c->key_lt_opr = get_opfamily_member(family, intype, intype, BTLessStrategyNumber);
	if (!OidIsValid(c->key_eq_opr) || !get_op_hash_functions(c->key_eq_opr, &lhs, &rhs) ||
		lhs != rhs)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("the equality of operator class \"%s\" of the unique index \"%s\" cannot be hashed",
						opcname, t->key_index_name),
				 errdetail("Key column \"%s\" is compared as the key index compares it, and kafka_sink reduces a batch by hashing its keys.",
						   c->name),
				 errhint("Key the pipeline on a unique index whose operator classes have hash support, such as the default ones.")));
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

	/*
	 * target is a regclass, not a dependency: the table may have been
	 * dropped since the pipeline was created.  Say so, rather than "could
	 * not open relation with OID".  try_table_open also sees a drop that
	 * commits while it waits for the lock.
	 */
	rel = OidIsValid(p->target) ? try_table_open(p->target, AccessShareLock) : NULL;
	if (rel == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("target table of pipeline \"%s\" no longer exists", p->name),
				 errdetail("The table with OID %u was dropped after the pipeline was created.", p->target),
				 errhint("Drop the pipeline and create it again for the new table.")));
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
		c->is_numeric = getBaseType(att->atttypid) == NUMERICOID;
		{
			Oid			elem = get_element_type(getBaseType(att->atttypid));

			c->is_array = OidIsValid(elem);
			c->elem_is_json = c->is_array &&
				(getBaseType(elem) == JSONOID || getBaseType(elem) == JSONBOID);
		}
		c->lineage = lineage_source(c->name);
		if (c->lineage)
			c->required = false;
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
			Oid			seq = KS_IDENTITY_SEQUENCE(rel, att->attnum);

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
			if (idx >= 0 && t->columns[idx].lineage)
				appendStringInfoString(&b, t->columns[idx].lineage);
			else if (idx >= 0)
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
					 errmsg("key column \"%s\" of pipeline \"%s\" no longer exists in %s",
							(char *) lfirst(lc), p->name, t->qualified_name),
					 errhint("Drop the pipeline and create it again with key columns of the target.")));
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
					 errmsg("order column \"%s\" of pipeline \"%s\" no longer exists in %s",
							p->order_column, p->name, t->qualified_name),
					 errhint("Drop the pipeline and create it again with an order column of the target.")));
		t->columns[t->order_index].is_order = true;
	}
	build_mappings(t, p);

	/*
	 * The unique index over exactly the key columns: its violations are
	 * recognised, and its operator classes and collations say when two keys
	 * are one (the reduce and the MERGE compare keys as it does).
	 */
	for (int k = 0; k < t->nkeys; k++)
	{
		KsColumn   *c = &t->columns[t->key_index[k]];

		c->key_collation = c->collation;
		c->key_eq_opr = InvalidOid;
		c->key_lt_opr = InvalidOid;
	}
	if (t->nkeys > 0)
	{
		Oid			argtypes[2] = {OIDOID, TEXTARRAYOID};
		Datum		values[2];
		Datum	   *names = palloc(sizeof(Datum) * t->nkeys);

		for (int i = 0; i < t->nkeys; i++)
			names[i] = CStringGetTextDatum(t->columns[t->key_index[i]].name);
		values[0] = ObjectIdGetDatum(p->target);
		values[1] = PointerGetDatum(construct_array(names, t->nkeys, TEXTOID, -1, false, TYPALIGN_INT));
		if (SPI_execute_with_args("WITH x AS (SELECT i.indexrelid, i.indrelid, i.indkey, i.indcollation, i.indclass"
								  " FROM pg_catalog.pg_index i"
								  " WHERE i.indrelid = $1 AND i.indisunique AND i.indpred IS NULL"
								  " AND i.indexprs IS NULL"
								  " AND (SELECT array_agg(a.attname::text ORDER BY a.attname::text COLLATE \"C\")"
								  "      FROM pg_catalog.pg_attribute a"
								  "      WHERE a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey))"
								  "     = (SELECT array_agg(x ORDER BY x COLLATE \"C\") FROM unnest($2::text[]) x)"
								  " ORDER BY i.indisprimary DESC, i.indisvalid DESC, i.indexrelid LIMIT 1)"
								  " SELECT c.relname::text, a.attname::text, u.coll, u.cls, oc.opcname::text, am.amname::text"
								  " FROM x JOIN pg_catalog.pg_class c ON c.oid = x.indexrelid"
								  " CROSS JOIN LATERAL unnest(x.indkey::pg_catalog.int2[], x.indcollation::pg_catalog.oid[],"
								  "                           x.indclass::pg_catalog.oid[]) AS u(attnum, coll, cls)"
								  " JOIN pg_catalog.pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = u.attnum"
								  " JOIN pg_catalog.pg_opclass oc ON oc.oid = u.cls"
								  " JOIN pg_catalog.pg_am am ON am.oid = oc.opcmethod",
								  2, argtypes, values, NULL, true, 0) == SPI_OK_SELECT && SPI_processed > 0)
		{
			SPITupleTable *tt = SPI_tuptable;

			t->key_index_name = pstrdup(SPI_getvalue(tt->vals[0], tt->tupdesc, 1));
			for (uint64 r = 0; r < SPI_processed; r++)
			{
				char	   *att = SPI_getvalue(tt->vals[r], tt->tupdesc, 2);
				bool		isnull;
				Oid			coll = DatumGetObjectId(SPI_getbinval(tt->vals[r], tt->tupdesc, 3, &isnull));
				Oid			cls = DatumGetObjectId(SPI_getbinval(tt->vals[r], tt->tupdesc, 4, &isnull));
				int			idx = column_index(t, att);

				if (idx >= 0)
					key_index_column(t, &t->columns[idx], coll, cls,
									 SPI_getvalue(tt->vals[r], tt->tupdesc, 5),
									 SPI_getvalue(tt->vals[r], tt->tupdesc, 6));
			}
		}
	}

	/*
	 * Partial messages fold per key (apply.c, reduce()): with an order
	 * column, an optional column carries the order value of the message
	 * that supplied it, for the MERGE to tell whether that message applies.
	 */
	t->nprov = 0;
	for (int i = 0; i < t->ncolumns; i++)
	{
		KsColumn   *c = &t->columns[i];

		c->prov = -1;
		if (p->mode == KS_MODE_MERGE && t->order_index >= 0 && !c->is_key &&
			!c->is_order && !c->required && c->lineage == NULL)
			c->prov = t->nprov++;
	}
	return t;
}

/* ---- mappings: which JSON path feeds which column ---- */

static int
slot_for(List **paths, const char *path_text)
{
	ListCell   *lc;
	int			i = 0;

	foreach(lc, *paths)
	{
		if (strcmp((char *) lfirst(lc), path_text) == 0)
			return i;
		i++;
	}
	*paths = lappend(*paths, pstrdup(path_text));
	return i;
}

static void
build_walk(KsWalkPaths *walk, List *paths)
{
	ListCell   *lc;
	int			i = 0;

	walk->nslots = list_length(paths);
	walk->paths = palloc0(sizeof(KsPath) * Max(walk->nslots, 1));
	foreach(lc, paths)
	{
		if (!ks_path_parse(lfirst(lc), &walk->paths[i]))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid JSON path \"%s\"", (char *) lfirst(lc)),
					 errhint("A path names nested fields with dots, such as \"payload.amount\"; \\. is a dot within a field name.")));
		i++;
	}
}

/* A field name as a path of one segment: dots and backslashes escaped. */
static char *
escaped_field(const char *name)
{
	StringInfoData b;

	initStringInfo(&b);
	for (const char *p = name; *p; p++)
	{
		if (*p == '.' || *p == '\\')
			appendStringInfoChar(&b, '\\');
		appendStringInfoChar(&b, *p);
	}
	return b.data;
}

/*
 * The slots to capture and, for the default mapping and each schema
 * version, the slot of every column.  A column not named in a mapping is
 * read from the top-level field of its own name; a name with dots, when
 * that field is absent, from the nested path its dots spell (as before
 * paths had an escape), through t->alt.
 */
static void
build_mappings(KsTarget *t, KsPipeline *p)
{
	List	   *paths = NIL;
	ListCell   *lc;
	int			v;

	t->map = palloc(sizeof(int) * Max(t->ncolumns, 1));
	t->scale = palloc0(sizeof(int) * Max(t->ncolumns, 1));
	for (int i = 0; i < t->ncolumns; i++)
		t->map[i] = -2;			/* not yet mapped */
	foreach(lc, p->mappings)
	{
		KsMapping  *m = lfirst(lc);
		int			c = column_index(t, m->column);

		if (m->version != NULL)
			continue;
		if (c < 0)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_COLUMN),
					 errmsg("mapped column \"%s\" of pipeline \"%s\" no longer exists in %s",
							m->column, p->name, t->qualified_name),
					 errhint("The keys of columns => name columns of the target: drop the pipeline and create it again with the current columns.")));
		t->map[c] = slot_for(&paths, m->path);
		t->scale[c] = m->scale;
	}
	t->alt = palloc(sizeof(int) * Max(t->ncolumns, 1));
	for (int i = 0; i < t->ncolumns; i++)
	{
		t->alt[i] = -1;
		if (t->map[i] != -2)
			continue;
		t->map[i] = slot_for(&paths, escaped_field(t->columns[i].name));
		if (strchr(t->columns[i].name, '.') != NULL)
		{
			KsPath		nested;

			if (ks_path_parse(t->columns[i].name, &nested))
				t->alt[i] = slot_for(&paths, t->columns[i].name);
		}
	}

	t->nversions = list_length(p->versions);
	t->version_names = palloc(sizeof(char *) * Max(t->nversions, 1));
	t->vmap = palloc(sizeof(int *) * Max(t->nversions, 1));
	t->vscale = palloc(sizeof(int *) * Max(t->nversions, 1));
	v = 0;
	foreach(lc, p->versions)
	{
		ListCell   *mc;

		t->version_names[v] = lfirst(lc);
		t->vmap[v] = palloc(sizeof(int) * Max(t->ncolumns, 1));
		t->vscale[v] = palloc(sizeof(int) * Max(t->ncolumns, 1));
		memcpy(t->vmap[v], t->map, sizeof(int) * t->ncolumns);
		memcpy(t->vscale[v], t->scale, sizeof(int) * t->ncolumns);
		foreach(mc, p->mappings)
		{
			KsMapping  *m = lfirst(mc);
			int			c;

			if (m->version == NULL || strcmp(m->version, t->version_names[v]) != 0)
				continue;
			c = column_index(t, m->column);
			if (c < 0)
				ereport(ERROR,
						(errcode(ERRCODE_UNDEFINED_COLUMN),
						 errmsg("column \"%s\" of schema version \"%s\" does not exist in %s",
								m->column, m->version, t->qualified_name),
						 errhint("The mappings of schema_versions name columns of the target.")));
			t->vmap[v][c] = slot_for(&paths, m->path);
			t->vscale[v][c] = m->scale;
		}
		v++;
	}
	t->version_slot = p->schema_version_field ? slot_for(&paths, p->schema_version_field) : -1;
	t->event_id_slot = p->event_id ? slot_for(&paths, p->event_id) : -1;
	build_walk(&t->walk, paths);

	if (p->key_format == KS_KEY_JSON || p->key_format == KS_KEY_AVRO)
	{
		List	   *kpaths = NIL;

		for (int k = 0; k < t->nkeys; k++)
			(void) slot_for(&kpaths, escaped_field(t->columns[t->key_index[k]].name));
		build_walk(&t->key_walk, kpaths);
	}
}

/* Which column is being converted, for the error detail; see decode_one. */
static volatile int converting_column = -1;

static bool is_row_data_error(int sqlerrcode);

/* the detail of a value its type's input function rejects (both paths) */
static char *
invalid_value_detail(KsColumn *col, const char *message)
{
	return psprintf("field \"%s\" is not a valid %s: %s", col->name, col->type_sql, message);
}

static bool
is_text_like(Oid typid)
{
	Oid			base = getBaseType(typid);

	return base == TEXTOID || base == VARCHAROID || base == BPCHAROID;
}

/* Appends s as a double-quoted element of an array literal. */
static void
append_array_element(StringInfo out, const char *s, int len)
{
	appendStringInfoChar(out, '"');
	for (int i = 0; i < len; i++)
	{
		if (s[i] == '"' || s[i] == '\\')
			appendStringInfoChar(out, '\\');
		appendStringInfoChar(out, s[i]);
	}
	appendStringInfoChar(out, '"');
}

/*
 * A JSON array as the text of a PostgreSQL array literal, for the column
 * type's own input function (array_in checks the elements as their type's
 * input does, and nested arrays as dimensions).  JSON null is a NULL
 * element; strings keep commas, quotes and braces (every element is
 * quoted).  For json[]/jsonb[], each element is one JSON value, objects
 * and arrays included.  Returns false, with *what set, for an object where
 * the element type is not JSON.
 */
static bool
json_array_literal(StringInfo out, JsonbContainer *c, bool elem_json, const char **what)
{
	JsonbIterator *it = JsonbIteratorInit(c);
	JsonbValue	v;
	JsonbIteratorToken tok;
	bool		first = true;

	appendStringInfoChar(out, '{');
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		char	   *s;

		if (tok != WJB_ELEM)
			continue;
		if (!first)
			appendStringInfoChar(out, ',');
		first = false;
		switch (v.type)
		{
			case jbvNull:
				appendStringInfoString(out, "NULL");
				break;
			case jbvString:
				if (elem_json)
				{
					StringInfoData j;

					initStringInfo(&j);
					escape_json(&j, pnstrdup(v.val.string.val, v.val.string.len));
					append_array_element(out, j.data, j.len);
				}
				else
					append_array_element(out, v.val.string.val, v.val.string.len);
				break;
			case jbvNumeric:
				s = DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(v.val.numeric)));
				append_array_element(out, s, strlen(s));
				break;
			case jbvBool:
				appendStringInfoString(out, v.val.boolean ? "true" : "false");
				break;
			case jbvBinary:
				if (elem_json)
				{
					s = JsonbToCString(NULL, v.val.binary.data, v.val.binary.len);
					append_array_element(out, s, strlen(s));
				}
				else if (JsonContainerIsArray(v.val.binary.data))
				{
					if (!json_array_literal(out, v.val.binary.data, elem_json, what))
						return false;
				}
				else
				{
					*what = "a JSON object inside an array";
					return false;
				}
				break;
			default:
				*what = "an unexpected JSON value";
				return false;
		}
	}
	appendStringInfoChar(out, '}');
	return true;
}

/* Converts one captured value into column c of the row. */
static void
convert_value(KsTarget *t, KsRow *row, int c, KsSlotValue *f, int scale)
{
	KsColumn   *col = &t->columns[c];
	char	   *text = f->text;
	bool		in_server_encoding = false;

	switch (f->kind)
	{
		case KS_SLOT_ABSENT:
			return;
		case KS_SLOT_NULL:
			row->present[c] = true;
			row->nulls[c] = true;
			return;
		case KS_SLOT_STRING:
			if (col->is_json)
			{
				StringInfoData buf;

				initStringInfo(&buf);
				escape_json(&buf, text);
				text = buf.data;
			}
			break;
		case KS_SLOT_SCALAR:
			break;
		case KS_SLOT_COMPOSITE:
			if (col->is_array && text[0] == '[')
			{
				Jsonb	   *jb;
				StringInfoData lit;
				const char *what = NULL;

				/* jsonb_in may raise on odd input: a data error of this field */
				converting_column = c;
				if (GetDatabaseEncoding() != PG_UTF8)
					text = pg_any_to_server(text, strlen(text), PG_UTF8);
				in_server_encoding = true;
				jb = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(text)));
				initStringInfo(&lit);
				if (!json_array_literal(&lit, &jb->root, col->elem_is_json, &what))
				{
					converting_column = -1;
					row->reason = KS_INVALID_VALUE;
					row->detail = psprintf("field \"%s\": %s is not a valid %s",
										   col->name, what, col->type_sql);
					return;
				}
				text = lit.data;
				break;
			}
			if (!col->is_json && !is_text_like(col->typid))
			{
				row->reason = KS_INVALID_VALUE;
				row->detail = psprintf("field \"%s\": a JSON %s is not a valid %s",
									   col->name, text[0] == '{' ? "object" : "array",
									   col->type_sql);
				return;
			}
			break;
	}
	if (GetDatabaseEncoding() != PG_UTF8 && !in_server_encoding)
		text = pg_any_to_server(text, strlen(text), PG_UTF8);
	converting_column = c;
	if (scale != 0 && col->is_numeric)
	{
		Datum		n = DirectFunctionCall3(numeric_in, CStringGetDatum(text),
										   ObjectIdGetDatum(InvalidOid), Int32GetDatum(-1));
		Datum		div = DirectFunctionCall2(numeric_power,
											 DirectFunctionCall1(int4_numeric, Int32GetDatum(10)),
											 DirectFunctionCall1(int4_numeric, Int32GetDatum(scale)));

		n = DirectFunctionCall2(numeric_div, n, div);
		text = DatumGetCString(DirectFunctionCall1(numeric_out, n));
	}
#ifdef KS_HAVE_SOFT_INPUT_ERRORS
	{
		/*
		 * 16+: the input functions that support it report bad input here,
		 * and the row is quarantined without rolling back the batch's
		 * subtransaction; those that do not (a user-defined type, a domain
		 * whose check throws) still throw, and ks_decode_batch() catches
		 * that as before.
		 */
		ErrorSaveContext escontext = {.type = T_ErrorSaveContext, .details_wanted = true};

		if (!InputFunctionCallSafe(&col->infunc, text, col->ioparam, col->typmod,
								   (Node *) &escontext, &row->values[c]))
		{
			ErrorData  *edata = escontext.error_data;

			converting_column = -1;
			if (!is_row_data_error(edata->sqlerrcode))
				ThrowErrorData(edata);
			row->reason = KS_INVALID_VALUE;
			row->detail = invalid_value_detail(col, edata->message);
			FreeErrorData(edata);
			return;
		}
	}
#else
	row->values[c] = InputFunctionCall(&col->infunc, text, col->ioparam, col->typmod);
#endif
	row->nulls[c] = false;
	row->present[c] = true;
	converting_column = -1;
}

/* key_format string or json: the key columns come from the message key. */
static void
decode_key(KsTarget *t, KsPipeline *p, KsRow *row)
{
	KsMessage  *m = row->msg;

	if (m->key == NULL)
	{
		row->reason = KS_NULL_KEY;
		row->detail = pstrdup("the message has no key");
		return;
	}
	if (p->key_format == KS_KEY_STRING)
	{
		KsSlotValue f;

		if (pg_encoding_verifymbstr(PG_UTF8, m->key, (int) m->key_len) != (int) m->key_len ||
			memchr(m->key, '\0', m->key_len) != NULL)
		{
			row->reason = KS_INVALID_VALUE;
			row->detail = pstrdup("the message key is not valid UTF-8 text");
			return;
		}
		f.kind = KS_SLOT_STRING;
		f.text = pnstrdup(m->key, m->key_len);
		convert_value(t, row, t->key_index[0], &f, 0);
	}
	else
	{
		KsSlotValue *kv = palloc0(sizeof(KsSlotValue) * Max(t->key_walk.nslots, 1));
		char	   *detail;
		KsReason	r = ks_format_decode(t, p, true, m->key, m->key_len, kv, &detail);

		if (r != KS_OK)
		{
			row->reason = r;
			row->detail = psprintf("message key: %s", detail);
			return;
		}
		for (int k = 0; k < t->nkeys && row->reason == KS_OK; k++)
			convert_value(t, row, t->key_index[k], &kv[k], 0);
	}
	for (int k = 0; k < t->nkeys && row->reason == KS_OK; k++)
		if (!row->present[t->key_index[k]] || row->nulls[t->key_index[k]])
		{
			row->reason = KS_NULL_KEY;
			row->detail = psprintf("key field \"%s\" is missing or null in the message key",
								   t->columns[t->key_index[k]].name);
		}
}

/*
 * Decodes one message.  Reasons found without running an input function
 * are set on the row; an input function's ERROR propagates to the caller.
 */
static void
decode_one(KsTarget *t, KsPipeline *p, KsRow *row)
{
	KsMessage  *m = row->msg;
	int			n = Max(t->ncolumns, 1);
	KsSlotValue *slots;
	int		   *map = t->map;
	int		   *scale = t->scale;
	char	   *detail = NULL;
	KsReason	fr;

	row->values = palloc0(sizeof(Datum) * n);
	row->nulls = palloc(sizeof(bool) * n);
	row->present = palloc0(sizeof(bool) * n);
	for (int i = 0; i < t->ncolumns; i++)
		row->nulls[i] = true;
	row->reason = KS_OK;

	if (m->value == NULL)
	{
		if (p->delete_on_tombstone)
		{
			decode_key(t, p, row);
			row->is_delete = (row->reason == KS_OK);
			return;
		}
		row->reason = KS_NOT_AN_OBJECT;
		row->detail = pstrdup("the message has no value (a tombstone) and delete_on_tombstone is off");
		return;
	}
	if (m->value_len > (size_t) ks_max_message_bytes)
	{
		row->reason = KS_VALUE_TOO_LARGE;
		row->detail = psprintf("the value has %zu bytes; kafka_sink.max_message_bytes is %d",
							   m->value_len, ks_max_message_bytes);
		return;
	}
	slots = palloc0(sizeof(KsSlotValue) * Max(t->walk.nslots, 1));
	fr = ks_format_decode(t, p, false, m->value, m->value_len, slots, &detail);
	if (fr != KS_OK)
	{
		row->reason = fr;
		row->detail = detail;
		return;
	}

	if (t->version_slot >= 0)
	{
		KsSlotValue *vs = &slots[t->version_slot];
		int			v = -1;

		if (vs->kind == KS_SLOT_STRING || vs->kind == KS_SLOT_SCALAR)
			for (int i = 0; i < t->nversions; i++)
				if (strcmp(t->version_names[i], vs->text) == 0)
					v = i;
		if (v < 0)
		{
			row->reason = KS_UNKNOWN_SCHEMA_VERSION;
			row->detail = vs->kind == KS_SLOT_STRING || vs->kind == KS_SLOT_SCALAR ?
				psprintf("schema version \"%s\" is not one of the pipeline's schema_versions", vs->text) :
				psprintf("the schema version field \"%s\" is missing or not a scalar", p->schema_version_field);
			return;
		}
		map = t->vmap[v];
		scale = t->vscale[v];
	}
	if (t->event_id_slot >= 0)
	{
		KsSlotValue *es = &slots[t->event_id_slot];

		if (es->kind == KS_SLOT_STRING || es->kind == KS_SLOT_SCALAR)
			row->event_id = es->text;
	}

	for (int i = 0; i < t->ncolumns && row->reason == KS_OK; i++)
	{
		if ((p->key_format != KS_KEY_NONE && t->columns[i].is_key) || t->columns[i].lineage)
			continue;
		if (t->alt[i] >= 0 && map[i] == t->map[i] && slots[map[i]].kind == KS_SLOT_ABSENT)
			convert_value(t, row, i, &slots[t->alt[i]], scale[i]);
		else
			convert_value(t, row, i, &slots[map[i]], scale[i]);
	}
	if (row->reason != KS_OK)
		return;
	if (p->key_format != KS_KEY_NONE)
	{
		decode_key(t, p, row);
		if (row->reason != KS_OK)
			return;
	}

	for (int i = 0; i < t->ncolumns; i++)
	{
		KsColumn   *c = &t->columns[i];

		if (c->is_key && (!row->present[i] || row->nulls[i]))
		{
			row->reason = KS_NULL_KEY;
			row->detail = psprintf(row->present[i] ? "key field \"%s\" is null" :
								   "required field \"%s\" is missing", c->name);
			return;
		}
		if (c->required && !row->present[i])
		{
			row->reason = KS_MISSING_REQUIRED_FIELD;
			row->detail = psprintf("required field \"%s\" is missing", c->name);
			return;
		}
		/* explicit nulls in NOT NULL columns would fail the MERGE: catch them now */
		if (c->required && row->nulls[i])
		{
			row->reason = KS_CONSTRAINT_VIOLATION;
			row->detail = psprintf("field \"%s\" is null but the column is NOT NULL", c->name);
			return;
		}
	}
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

typedef struct DecodeCall
{
	KsTarget   *t;
	KsPipeline *p;
	KsRow	   *rows;
	int			nrows;
	int			cur;			/* the row being decoded */
} DecodeCall;

static void
decode_from(void *arg)
{
	DecodeCall *c = arg;

	for (; c->cur < c->nrows; c->cur++)
		decode_one(c->t, c->p, &c->rows[c->cur]);
}

static void
decode_batch(KsTarget *t, KsPipeline *p, KsRow *rows, int nrows)
{
	DecodeCall	call = {t, p, rows, nrows, 0};

	while (call.cur < nrows)
	{
		ErrorData  *edata = ks_try_subxact(decode_from, &call);
		int			col = converting_column;

		if (edata == NULL)
			break;
		converting_column = -1;
		if (!is_row_data_error(edata->sqlerrcode))
			ReThrowError(edata);
		rows[call.cur].reason = KS_INVALID_VALUE;
		if (col >= 0)
			rows[call.cur].detail = invalid_value_detail(&t->columns[col], edata->message);
		else
			rows[call.cur].detail = pstrdup(edata->message);
		FreeErrorData(edata);
		call.cur++;
	}
}

/*
 * Decodes rows into the target's types.  A domain's CHECK constraint can
 * call a function of the user's: it runs with catalog writes suspended.
 */
void
ks_decode_batch(KsTarget *t, KsPipeline *p, KsRow *rows, int nrows)
{
	int			catalog_writes = ks_catalog_writes_suspend();

	PG_TRY();
	{
		decode_batch(t, p, rows, nrows);
	}
	PG_FINALLY();
	{
		ks_catalog_writes_restore(catalog_writes);
	}
	PG_END_TRY();
}

/*
 * kafka_sink._json_path_valid(path): whether path is a valid mapping path,
 * by the parser decoding uses, so that the validator and the decoder
 * agree.  NULL for NULL.
 */
PG_FUNCTION_INFO_V1(kafka_sink_json_path_valid);
Datum
kafka_sink_json_path_valid(PG_FUNCTION_ARGS)
{
	KsPath		path;

	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	PG_RETURN_BOOL(ks_path_parse(text_to_cstring(PG_GETARG_TEXT_PP(0)), &path));
}
