/*-------------------------------------------------------------------------
 *
 * target.c
 *		The target as decoding sees it (KsTarget): its columns with their
 *		types and input functions, the key and its index's comparison,
 *		the order column, the lineage columns, and the mappings (which
 *		field path feeds which column, per schema version) compiled into
 *		the slots a format fills.
 *
 * Owns: opening the target and checking it against the definition (a
 * dropped table or column fails with a clear error).  Must not: read
 * messages, or write anything.
 *
 *-------------------------------------------------------------------------
 */
#include "kafka_sink.h"
#include "spi.h"
#include "pipeline.h"
#include "target.h"
#include "catalog.h"
#include "decode.h"
#include "envelope.h"
#include "format.h"
#include "jsonwalk.h"

#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/dependency.h"
#include "access/stratnum.h"
#include "catalog/pg_attribute.h"
#include "catalog/pg_language.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "optimizer/optimizer.h"
#include "rewrite/rewriteHandler.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/syscache.h"
#include "utils/resowner.h"


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

/* Mode history's version columns (docs/history.md), written by history.c. */
static char
history_column(const char *name)
{
	if (strcmp(name, "_valid_from") == 0)
		return 'f';
	if (strcmp(name, "_valid_to") == 0)
		return 't';
	if (strcmp(name, "_deleted") == 0)
		return 'd';
	if (strcmp(name, "_is_current") == 0)
		return 'c';
	if (strcmp(name, "_fields") == 0)
		return 'p';
	if (strcmp(name, "_states") == 0)
		return 's';
	if (strcmp(name, "_valid_from_at") == 0)
		return 'F';
	if (strcmp(name, "_valid_to_at") == 0)
		return 'T';
	return 0;
}

/*
 * A column kafka_sink writes itself in the given mode (lineage, history's
 * version columns): no decoded value, so no transform reads or computes it.
 */
bool
ks_column_written_by_sink(const char *name, KsMode mode)
{
	return lineage_source(name) != NULL || (mode == KS_MODE_HISTORY && history_column(name) != 0);
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
 * Whether a type's input reports bad input softly (PostgreSQL 16+): the
 * built-in input functions do (internal language), and so do arrays of
 * such types; a domain may run a CHECK expression of the user's, and a
 * type of an extension or of the user's may throw, so they do not count.
 */
static bool
soft_input_type(Oid typid)
{
#ifdef KS_HAVE_SOFT_INPUT_ERRORS
	Oid			elem = get_element_type(typid);
	Oid			infunc;
	Oid			ioparam;
	HeapTuple	tup;
	bool		internal;

	if (get_typtype(typid) == TYPTYPE_DOMAIN)
		return false;
	if (OidIsValid(elem) && !soft_input_type(elem))
		return false;
	getTypeInputInfo(typid, &infunc, &ioparam);
	tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(infunc));
	if (!HeapTupleIsValid(tup))
		return false;
	internal = ((Form_pg_proc) GETSTRUCT(tup))->prolang == INTERNALlanguageId;
	ReleaseSysCache(tup);
	return internal;
#else
	(void) typid;
	return false;
#endif
}

/*
 * Whether decoding into t can do without the per-batch subtransaction
 * (decode.c): every column's input is soft and no mapping divides by a
 * scale (that arithmetic throws).
 */
static bool
soft_input_only(KsTarget *t)
{
	for (int c = 0; c < t->ncolumns; c++)
	{
		if (t->columns[c].lineage != NULL)
			continue;
		if (!soft_input_type(t->columns[c].typid))
			return false;
		if (t->scale && t->scale[c] != 0)
			return false;
		for (int v = 0; v < t->nversions; v++)
			if (t->vscale && t->vscale[v][c] != 0)
				return false;
	}
	return true;
}

/*
 * Describes the target for decoding and for the generated statements.
 * Generated columns and GENERATED ALWAYS identity columns are never
 * written, so they are left out.  Must run in a transaction with SPI.
 */
KsTarget *
ks_target_open(KsPipeline *p)
{
	return ks_target_open_rel(p, p->targets.target, p->targets.key_columns);
}

/*
 * The same for a table of a routed pipeline (route.c): relid, keyed on
 * key_columns (the pipeline's, or the table's primary key).
 */
KsTarget *
ks_target_open_rel(KsPipeline *p, Oid relid, List *key_columns)
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
	rel = OidIsValid(relid) ? try_table_open(relid, AccessShareLock) : NULL;
	if (rel == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("target table of pipeline \"%s\" no longer exists", p->name),
				 errdetail("The table with OID %u was dropped after the pipeline was created.", relid),
				 errhint("Drop the pipeline and create it again for the new table.")));
	desc = RelationGetDescr(rel);
	t->relid = relid;
	t->citus = ks_citus_kind(relid);
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
		if (p->targets.mode == KS_MODE_HISTORY)
			c->history = history_column(c->name);
		if (c->history)
			c->lineage = "NULL";	/* not decoded: history.c computes it */
		if (p->targets.mode == KS_MODE_MERGE && p->targets.soft_delete)
		{
			/*
			 * the mark, not decoded: a row written by an upsert is not
			 * deleted (the update's SET runs only past the guard: a revive)
			 */
			if (strcmp(c->name, "_deleted") == 0)
				c->soft = 'd', c->lineage = "false";
			else if (strcmp(c->name, "_deleted_at") == 0)
				c->soft = 'a', c->lineage = "NULL";
		}
		if (c->lineage)
			c->required = false;
		/* a computed column takes its value after decoding (transform.c) */
		foreach(lc, p->targets.computed)
			if (strcmp(((KsOption *) lfirst(lc))->name, c->name) == 0)
				c->required = false;
		if (att->atthasdef)
		{
			Oid			argtypes[2] = {OIDOID, INT2OID};
			Datum		values[2] = {ObjectIdGetDatum(relid), Int16GetDatum(att->attnum)};

			if (ks_spi_execute("SELECT pg_catalog.pg_get_expr(adbin, adrelid)"
									  " FROM pg_catalog.pg_attrdef WHERE adrelid = $1 AND adnum = $2",
									  2, argtypes, values, NULL, true, 1) == SPI_OK_SELECT &&
				SPI_processed == 1)
				c->default_sql = pstrdup(SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1));
			{
				Node	   *d = build_column_default(rel, att->attnum);

				c->default_immutable = d != NULL && !contain_mutable_functions(d);
			}
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

	t->nkeys = list_length(key_columns);
	t->key_index = palloc(sizeof(int) * Max(t->nkeys, 1));
	k = 0;
	foreach(lc, key_columns)
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
	if (p->targets.order_column)
	{
		t->order_index = column_index(t, p->targets.order_column);
		if (t->order_index < 0)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_COLUMN),
					 errmsg("order column \"%s\" of pipeline \"%s\" no longer exists in %s",
							p->targets.order_column, p->name, t->qualified_name),
					 errhint("Drop the pipeline and create it again with an order column of the target.")));
		t->columns[t->order_index].is_order = true;
	}
	t->history = p->targets.mode == KS_MODE_HISTORY;
	if (t->history)
	{
		int			found = 0;

		/*
		 * each version starts at its event's order value: one is needed
		 * (a change event's is its source position, always set)
		 */
		if (t->order_index >= 0 && p->contract.envelope != &ks_envelope_debezium)
			t->columns[t->order_index].required = true;
		for (int i = 0; i < t->ncolumns; i++)
			if (t->columns[i].history == 'f' || t->columns[i].history == 't' ||
				t->columns[i].history == 'd')
				found++;
		if (t->order_index < 0 || found != 3)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_TABLE_DEFINITION),
					 errmsg("history target %s of pipeline \"%s\" lacks its order column or a version column",
							t->qualified_name, p->name),
					 errhint("A history target has _valid_from, _valid_to (the order column's type) and _deleted boolean: see docs/history.md.")));
	}
	t->track = t->history && p->targets.track_history != NIL;
	if (t->track)
	{
		bool		states = false;

		for (int i = 0; i < t->ncolumns; i++)
			states |= t->columns[i].history == 's';
		foreach(lc, p->targets.track_history)
		{
			int			i;

			for (i = 0; i < t->ncolumns; i++)
				if (strcmp(t->columns[i].name, (char *) lfirst(lc)) == 0 &&
					!t->columns[i].is_key && !t->columns[i].history && t->columns[i].lineage == NULL)
					break;
			if (i == t->ncolumns || !states)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_TABLE_DEFINITION),
						 errmsg("history target %s of pipeline \"%s\" lacks _states or tracked column \"%s\"",
								t->qualified_name, p->name, (char *) lfirst(lc)),
						 errhint("A history target with track_history_columns has _states jsonb and each tracked column: see docs/history.md.")));
			t->columns[i].tracked = true;
		}
	}
	/*
	 * The history statement reads the stored versions of the batch's keys
	 * joined with the batch in CTEs with window functions: Citus refuses
	 * that over a distributed table ("complex joins are only supported
	 * when all distributed tables are co-located ...", measured by
	 * test/e2e/citus_cdc.sh before this refusal), so it would fail at the
	 * first batch.
	 */
	if (t->history && t->citus != KS_CITUS_NONE)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("target %s of pipeline \"%s\" is a Citus table, which mode history does not write",
						t->qualified_name, p->name),
				 errdetail("The history statement joins the stored versions with the batch in ways Citus does not execute on a distributed table."),
				 errhint("Write the history to a local table on the coordinator, or use mode merge: see docs/citus.md.")));
	t->write_mode = p->targets.mode == KS_MODE_MERGE ? p->targets.write_mode : KS_WRITE_UPSERT;
	if (t->write_mode != KS_WRITE_UPSERT && t->citus != KS_CITUS_NONE)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("target %s of pipeline \"%s\" is a Citus table, which write_mode insert_only and update_only do not write",
						t->qualified_name, p->name),
				 errhint("Alter the pipeline with write_mode => 'upsert', or write to a local table: see docs/write-modes.md.")));
	t->lineage_partition = t->lineage_offset = -1;
	for (int i = 0; i < t->ncolumns; i++)
	{
		if (t->columns[i].lineage && strcmp(t->columns[i].lineage, "s._ks_partition") == 0)
			t->lineage_partition = i;
		else if (t->columns[i].lineage && strcmp(t->columns[i].lineage, "s._ks_offset") == 0)
			t->lineage_offset = i;
	}
	t->soft = p->targets.mode == KS_MODE_MERGE && p->targets.soft_delete;
	t->soft_deleted = t->soft_deleted_at = -1;
	for (int i = 0; t->soft && i < t->ncolumns; i++)
	{
		if (t->columns[i].soft == 'd' && getBaseType(t->columns[i].typid) == BOOLOID)
			t->soft_deleted = i;
		else if (t->columns[i].soft == 'a' && getBaseType(t->columns[i].typid) == TIMESTAMPTZOID)
			t->soft_deleted_at = i;
	}
	if (t->soft && t->soft_deleted < 0 && t->soft_deleted_at < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TABLE_DEFINITION),
				 errmsg("target %s of pipeline \"%s\" with delete_mode soft lacks _deleted boolean and _deleted_at timestamptz",
						t->qualified_name, p->name),
				 errhint("ALTER TABLE %s ADD COLUMN _deleted boolean NOT NULL DEFAULT false (or _deleted_at timestamptz): see docs/soft-deletes.md.",
						 t->qualified_name)));
	t->cdc = p->contract.envelope == &ks_envelope_debezium;
	if (t->cdc && (t->order_index < 0 || getBaseType(t->columns[t->order_index].typid) != NUMERICOID))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TABLE_DEFINITION),
				 errmsg("pipeline \"%s\" with envelope debezium needs a numeric source position column in %s",
						p->name, t->qualified_name),
				 errdetail("The order column %s keeps each row's source position.",
						   p->targets.order_column ? quote_identifier(p->targets.order_column) : "(none)"),
				 errhint("ALTER TABLE %s ADD COLUMN _kafka_source_position numeric, then create the pipeline again.",
						 t->qualified_name)));
	/*
	 * _valid_from_at and _valid_to_at (docs/history.md, "Reading by
	 * time"): the event's source commit time, which only change events
	 * carry; _valid_to_at is the next version's _valid_from_at
	 */
	t->at_index = -1;
	for (int i = 0; t->history && i < t->ncolumns; i++)
	{
		KsColumn   *c = &t->columns[i];

		if (c->history != 'F' && c->history != 'T')
			continue;
		if (!t->cdc)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_TABLE_DEFINITION),
					 errmsg("history target %s of pipeline \"%s\" has column %s, which only change events fill",
							t->qualified_name, p->name, quote_identifier(c->name)),
					 errhint("_valid_from_at and _valid_to_at keep a change event's commit time (envelope debezium); a plain pipeline with a timestamptz order column reads by time through _valid_from: see docs/history.md.")));
		if (getBaseType(c->typid) != TIMESTAMPTZOID)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_TABLE_DEFINITION),
					 errmsg("column %s of history target %s must be of type timestamptz",
							quote_identifier(c->name), t->qualified_name),
					 errhint("See docs/history.md, \"Reading by time\".")));
		if (c->history == 'F')
			t->at_index = i;
	}
	for (int i = 0; t->history && i < t->ncolumns; i++)
		if (t->columns[i].history == 'T' && t->at_index < 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_TABLE_DEFINITION),
					 errmsg("history target %s of pipeline \"%s\" has _valid_to_at without _valid_from_at",
							t->qualified_name, p->name),
					 errhint("ALTER TABLE %s ADD COLUMN _valid_from_at timestamptz: _valid_to_at is the next version's.",
							 t->qualified_name)));
	build_mappings(t, p);

	/*
	 * The unique index over exactly the key columns: its violations are
	 * recognised, and its operator classes and collations say when two keys
	 * are one (the reduce and the MERGE compare keys as it does).
	 */
	for (int i = 0; i < t->nkeys; i++)
	{
		KsColumn   *c = &t->columns[t->key_index[i]];

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
		values[0] = ObjectIdGetDatum(relid);
		values[1] = PointerGetDatum(construct_array(names, t->nkeys, TEXTOID, -1, false, TYPALIGN_INT));
		if (ks_spi_execute("WITH x AS (SELECT i.indexrelid, i.indrelid, i.indkey, i.indcollation, i.indclass"
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
	 * Partial messages fold per key (reduce.c, ks_reduce()): with an order
	 * column, an optional column carries the order value of the message
	 * that supplied it, for the MERGE to tell whether that message applies.
	 */
	t->nprov = 0;
	for (int i = 0; i < t->ncolumns; i++)
	{
		KsColumn   *c = &t->columns[i];

		c->prov = -1;
		if (p->targets.mode == KS_MODE_MERGE && t->order_index >= 0 && !c->is_key &&
			!c->is_order && !c->required && c->lineage == NULL)
			c->prov = t->nprov++;
	}
	t->soft_only = soft_input_only(t);
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
		KsMeta		meta;

		if (ks_meta_parse(lfirst(lc), &meta) != KS_META_NONE)
		{
			/*
			 * A header or Kafka's metadata (filled from the message, not the
			 * value): one segment, its whole text, so that any header name
			 * is taken; what a format captures there is replaced.
			 */
			walk->paths[i].nsegs = 1;
			walk->paths[i].segs = palloc(sizeof(char *));
			walk->paths[i].segs[0] = pstrdup(lfirst(lc));
			i++;
			continue;
		}
		if (!ks_path_parse(lfirst(lc), &walk->paths[i]))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid JSON path \"%s\"", (char *) lfirst(lc)),
					 errhint("A path names nested fields with dots, such as \"payload.amount\"; \\. is a dot within a field name.")));
		i++;
	}
}

/* A field name as a path of one segment: dots and backslashes escaped. */
char *
ks_path_escape_field(const char *name)
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
	foreach(lc, p->contract.mappings)
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
		t->map[i] = slot_for(&paths, ks_path_escape_field(t->columns[i].name));
		if (strchr(t->columns[i].name, '.') != NULL)
		{
			KsPath		nested;
			KsMeta		meta;

			/* a column called headers.x or kafka.x reads the value's fields */
			if (ks_path_parse(t->columns[i].name, &nested))
				t->alt[i] = slot_for(&paths, ks_meta_parse(t->columns[i].name, &meta) == KS_META_NONE ?
									 t->columns[i].name : psprintf("\\%s", t->columns[i].name));
		}
		else if (p->targets.target_template != NULL || p->targets.target_map != NIL)
		{
			/*
			 * Routing reads a value wrapped as {"schema":..., "payload":...}
			 * (Kafka Connect's JsonConverter) under payload; so does a
			 * routed target's default mapping, when the field is absent
			 * at the top (route.c).
			 */
			t->alt[i] = slot_for(&paths, psprintf("payload.%s", ks_path_escape_field(t->columns[i].name)));
		}
	}

	t->nversions = list_length(p->contract.versions);
	t->version_names = palloc(sizeof(char *) * Max(t->nversions, 1));
	t->vmap = palloc(sizeof(int *) * Max(t->nversions, 1));
	t->vscale = palloc(sizeof(int *) * Max(t->nversions, 1));
	v = 0;
	foreach(lc, p->contract.versions)
	{
		ListCell   *mc;

		t->version_names[v] = lfirst(lc);
		t->vmap[v] = palloc(sizeof(int) * Max(t->ncolumns, 1));
		t->vscale[v] = palloc(sizeof(int) * Max(t->ncolumns, 1));
		memcpy(t->vmap[v], t->map, sizeof(int) * t->ncolumns);
		memcpy(t->vscale[v], t->scale, sizeof(int) * t->ncolumns);
		foreach(mc, p->contract.mappings)
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
	t->version_slot = p->contract.schema_version_field ? slot_for(&paths, p->contract.schema_version_field) : -1;
	t->event_id_slot = p->contract.event_id ? slot_for(&paths, p->contract.event_id) : -1;
	build_walk(&t->walk, paths);
	t->meta = NULL;
	v = 0;
	foreach(lc, paths)
	{
		KsMeta		meta;

		if (ks_meta_parse(lfirst(lc), &meta) == KS_META_INVALID)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("unknown Kafka metadata field \"%s\" in pipeline \"%s\"", (char *) lfirst(lc), p->name),
					 errhint("The Kafka metadata fields are kafka.key, kafka.timestamp, kafka.topic, kafka.partition, kafka.offset and headers.<name>.")));
		if (meta.kind != KS_META_NONE)
		{
			if (t->meta == NULL)
				t->meta = palloc0(sizeof(KsMeta) * t->walk.nslots);
			t->meta[v] = meta;
		}
		v++;
	}

	if (p->contract.key_format == KS_KEY_JSON || p->contract.key_format == KS_KEY_AVRO ||
		p->contract.key_format == KS_KEY_PROTOBUF)
	{
		List	   *kpaths = NIL;

		for (int k = 0; k < t->nkeys; k++)
			(void) slot_for(&kpaths, ks_path_escape_field(t->columns[t->key_index[k]].name));
		t->key_alt = palloc(sizeof(int) * Max(t->nkeys, 1));
		t->key_schema_slot = -1;
		t->key_payload_slot = -1;
		if (p->contract.key_format == KS_KEY_JSON)
		{
			/*
			 * After the key columns' own slots (slot k is key column k):
			 * the same fields under payload, for a key JsonConverter wrapped
			 * with its schema, as the Debezium envelope unwraps its keys.
			 */
			for (int k = 0; k < t->nkeys; k++)
				t->key_alt[k] = slot_for(&kpaths, psprintf("payload.%s", ks_path_escape_field(t->columns[t->key_index[k]].name)));
			t->key_schema_slot = slot_for(&kpaths, "schema");
			t->key_payload_slot = slot_for(&kpaths, "payload");
		}
		else
			for (int k = 0; k < t->nkeys; k++)
				t->key_alt[k] = -1;
		build_walk(&t->key_walk, kpaths);
	}
}

