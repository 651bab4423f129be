/*-------------------------------------------------------------------------
 *
 * reduce.c
 *		The per-key reduce of a batch: one winner per key by the ordering
 *		rule (greatest order column, NULL lowest, then the later offset),
 *		the fold of partial messages, tombstones (delete_mode soft: the
 *		segment rounds; write_mode insert_only: the earliest event), and
 *		key order.
 *
 * Owns: KsKeyHash (hash, equality and sort support of the key index, the
 * order column's comparison) and the reduce rule that makes the MERGE
 * deterministic.  Must not: run statements or touch the catalog; it only
 * reads rows and marks winners.
 *
 *-------------------------------------------------------------------------
 */
#include "kafka_sink.h"
#include "reduce.h"
#include "decode.h"
#include "apply.h"

#include "catalog/pg_collation.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/sortsupport.h"
#include "utils/typcache.h"

/* ---- reduce ---- */

struct KsKeyHash
{
	FmgrInfo   *hash;			/* per key column */
	FmgrInfo   *eq;
	SortSupportData *ssup;		/* btree order, to apply in key order */
	SortSupportData abbrev;		/* one key column: its abbreviated keys */
	bool		has_abbrev;		/* the key's type has them (text in "C" or
								 * ICU, numeric, uuid, ...) */
	bool		sortable;
	Oid		   *coll;
	FmgrInfo	order_cmp;
	Oid			order_coll;
	bool		has_order;
};

/*
 * The collation a key column is sorted in.  The sort orders the winners
 * (one per key: the reduce found them by hash and equality) in an order
 * of the keys that every worker takes the same, so that they lock shared
 * keys in the same order.  In a deterministic collation two texts are
 * equal iff their bytes are, so text (and varchar, bpchar) keys sort in
 * "C", by their bytes, with abbreviated keys and memcmp where the
 * collation has strcoll and no abbreviated keys (libc's other than "C").
 * In a nondeterministic one, equal keys have other bytes ('A', 'a'): the
 * bytes' order is not an order of the keys (two workers could lock 'A'
 * before 'B' and 'B' before 'a'), so it keeps its own.
 */
static Oid
ks_sort_collation(Oid lt_opr, Oid collation)
{
	RegProcedure lt = get_opcode(lt_opr);

	if ((lt == F_TEXT_LT || lt == F_BPCHARLT) && OidIsValid(collation) &&
		get_collation_isdeterministic(collation))
		return C_COLLATION_OID;
	return collation;
}

KsKeyHash *
ks_keyhash_create(KsTarget *t)
{
	KsKeyHash    *kh = palloc0(sizeof(KsKeyHash));

	kh->hash = palloc0(sizeof(FmgrInfo) * t->nkeys);
	kh->eq = palloc0(sizeof(FmgrInfo) * t->nkeys);
	kh->ssup = palloc0(sizeof(SortSupportData) * t->nkeys);
	kh->sortable = true;
	kh->coll = palloc0(sizeof(Oid) * t->nkeys);
	for (int k = 0; k < t->nkeys; k++)
	{
		KsColumn   *c = &t->columns[t->key_index[k]];
		TypeCacheEntry *tc = lookup_type_cache(c->typid,
											   TYPECACHE_HASH_PROC_FINFO | TYPECACHE_EQ_OPR_FINFO);
		Oid			lt_opr;

		if (OidIsValid(c->key_eq_opr))
		{
			/* the key index's equality (decode.c checked that it hashes) */
			RegProcedure lhs,
						rhs;

			if (!get_op_hash_functions(c->key_eq_opr, &lhs, &rhs))
				elog(ERROR, "kafka_sink: the key index's equality cannot be hashed");
			fmgr_info(lhs, &kh->hash[k]);
			fmgr_info(get_opcode(c->key_eq_opr), &kh->eq[k]);
			lt_opr = c->key_lt_opr;
		}
		else
		{
			if (!OidIsValid(tc->hash_proc) || !OidIsValid(tc->eq_opr))
				ereport(ERROR,
						(errcode(ERRCODE_UNDEFINED_FUNCTION),
						 errmsg("key column \"%s\" has a type without hashing and equality", c->name),
						 errhint("Use key columns of types such as bigint, text or uuid.")));
			fmgr_info_copy(&kh->hash[k], &tc->hash_proc_finfo, CurrentMemoryContext);
			fmgr_info_copy(&kh->eq[k], &tc->eq_opr_finfo, CurrentMemoryContext);
			lt_opr = lookup_type_cache(c->typid, TYPECACHE_LT_OPR)->lt_opr;
		}
		/* keys are one when the key index says so: its collation */
		kh->coll[k] = c->key_collation;
		if (OidIsValid(lt_opr))
		{
			Oid			sort_coll = ks_sort_collation(lt_opr, c->key_collation);

			/* sort support: int8 keys compare without a function call */
			kh->ssup[k].ssup_cxt = CurrentMemoryContext;
			kh->ssup[k].ssup_collation = sort_coll;
			kh->ssup[k].ssup_nulls_first = false;
			PrepareSortSupportFromOrderingOp(lt_opr, &kh->ssup[k]);
			if (t->nkeys == 1)
			{
				/* as tuplesort does: the same order, most comparisons inline */
				kh->abbrev.ssup_cxt = CurrentMemoryContext;
				kh->abbrev.ssup_collation = sort_coll;
				kh->abbrev.ssup_nulls_first = false;
				kh->abbrev.abbreviate = true;
				PrepareSortSupportFromOrderingOp(lt_opr, &kh->abbrev);
				kh->has_abbrev = (kh->abbrev.abbrev_converter != NULL);
			}
		}
		else
			kh->sortable = false;
	}
	if (t->order_index >= 0)
	{
		KsColumn   *c = &t->columns[t->order_index];
		TypeCacheEntry *tc = lookup_type_cache(c->typid, TYPECACHE_CMP_PROC_FINFO);

		if (!OidIsValid(tc->cmp_proc))
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_FUNCTION),
					 errmsg("order column \"%s\" has a type with no ordering", c->name)));
		fmgr_info_copy(&kh->order_cmp, &tc->cmp_proc_finfo, CurrentMemoryContext);
		kh->order_coll = c->collation;
		kh->has_order = true;
	}
	return kh;
}

static uint32
row_hash(KsTarget *t, KsKeyHash *kh, KsRow *r)
{
	uint32		h = 0;

	for (int k = 0; k < t->nkeys; k++)
	{
		int			i = t->key_index[k];
		uint32		v = DatumGetUInt32(FunctionCall1Coll(&kh->hash[k], kh->coll[k], r->values[i]));

		h = (h << 1 | h >> 31) ^ v;
	}
	return h;
}

static bool
row_key_equal(KsTarget *t, KsKeyHash *kh, KsRow *a, KsRow *b)
{
	if (a->hash != b->hash)
		return false;
	for (int k = 0; k < t->nkeys; k++)
	{
		int			i = t->key_index[k];

		if (!DatumGetBool(FunctionCall2Coll(&kh->eq[k], kh->coll[k], a->values[i], b->values[i])))
			return false;
	}
	return true;
}

/* True when later row b beats the current winner a. */
static bool
row_beats(KsTarget *t, KsKeyHash *kh, KsRow *a, KsRow *b)
{
	int			o = t->order_index;

	if (!kh->has_order)
		return true;
	if (b->nulls[o])
		return a->nulls[o];
	if (a->nulls[o])
		return true;
	return DatumGetInt32(FunctionCall2Coll(&kh->order_cmp, kh->order_coll,
										   b->values[o], a->values[o])) >= 0;
}

/*
 * write_mode insert_only: true when row b is earlier than the current
 * winner a, the ordering rule reversed: the smaller order value (NULL
 * lowest), then the smaller (partition, offset), so that the first event
 * of a key is the same whatever the batch split and redelivery.
 */
static bool
row_earlier(KsTarget *t, KsKeyHash *kh, KsRow *a, KsRow *b)
{
	int			o = t->order_index;

	if (kh->has_order && a->nulls[o] != b->nulls[o])
		return b->nulls[o];
	if (kh->has_order && !a->nulls[o])
	{
		int			c = DatumGetInt32(FunctionCall2Coll(&kh->order_cmp, kh->order_coll,
														b->values[o], a->values[o]));

		if (c != 0)
			return c < 0;
	}
	if (b->msg->partition != a->msg->partition)
		return b->msg->partition < a->msg->partition;
	return b->msg->offset < a->msg->offset;
}

/*
 * True when row b's order value is strictly greater than row a's, both
 * set (change events' positions: a delete and an upsert of one key never
 * share a position).
 */
static bool
row_newer(KsTarget *t, KsKeyHash *kh, KsRow *a, KsRow *b)
{
	int			o = t->order_index;

	return DatumGetInt32(FunctionCall2Coll(&kh->order_cmp, kh->order_coll,
										   b->values[o], a->values[o])) > 0;
}

/* a delete carrying its position (envelope debezium): it competes by order */
static bool
positioned(KsTarget *t, KsKeyHash *kh, KsRow *r)
{
	return kh->has_order && t->cdc && !r->nulls[t->order_index];
}

/*
 * Folds the rows that are OK into one row per key, in batch order, so
 * that the MERGE of a batch gives what applying its messages one at a time
 * gives, wherever the batch boundaries fall (docs/design/guarantee.md,
 * "Partial messages fold in order").  Applying one at a time, a message
 * applies iff its order value is >= the row's (NULL lowest); so within a
 * batch it can only apply if it is >= every earlier message of its key: a
 * candidate.  The candidates' order values only grow, so the ones that
 * apply are those >= the target row's order T, a suffix of them.  Each
 * column ends with the value of the last applying message in which the
 * field is present: the last candidate presenting it if that candidate
 * is >= T, else none.  The winner is the last candidate (it carries the
 * greatest order, ties to the later offset, and the lineage); fold_src
 * names, per column, the last candidate presenting it, whose order value
 * the MERGE compares with T (ks_merge_sql()).  Key columns keep the first
 * candidate's value: the message that inserts the row writes the key.
 * A tombstone (is_delete) ends the fold of its key: it is recorded in
 * deletes (the last one per key), and only messages after it fold.
 * Fills winners and deletes (indexes into rows) and returns the number of
 * winners; *ndeletes gets the number of deletes.
 *
 * write_mode insert_only (no deletes): the winner is the key's earliest
 * event (row_earlier), without a fold.
 *
 * delete_mode soft (t->soft): a marked row keeps what came before its
 * delete, so a delete cannot drop the key's earlier messages.  The batch
 * is applied in segment rounds instead (apply.c): a round takes, per key,
 * the messages not applied yet (soft_done) up to and including its first
 * delete, and no message after the first truncate not applied yet; the
 * winners apply first, then the deletes, then the truncate (its index in
 * *truncate, else -1) once no message before it waits for a later round.  Each round is a batch without a delete
 * inside a key's messages, which applies as one at a time would; *more
 * says that messages were left for a later round.  soft_seen marks the
 * rows of the round.
 */
int
ks_reduce(KsBatch *batch, KsKeyHash *kh, int *winners, int *deletes, int *ndeletes,
		  bool *more, int *truncate)
{
	KsTarget   *t = batch->target;
	int			size = 16;
	int		   *table;			/* key -> index into keys */
	int		   *win;			/* per key: winning row or -1 */
	int		   *del;			/* per key: last tombstone row or -1 */
	int		   *first;			/* per key: a row carrying the key */
	int		  **src;			/* per key: its fold, NULL while one candidate */
	bool	   *cut;			/* soft: per key, its round ended at a delete */
	bool		deferred = false;	/* soft: a message before cut_at waits */
	int			cut_at = batch->nmsgs;	/* soft: the round's truncate */
	int			nkeys = 0;
	int			nwin = 0;

	*more = false;
	*truncate = -1;
	for (int i = 0; t->soft && i < batch->nmsgs; i++)
	{
		KsRow	   *r = &batch->rows[i];

		if (r->reason == KS_OK && r->is_truncate && !r->skipped && !r->soft_done)
		{
			cut_at = i;
			break;
		}
	}

	while (size < batch->nmsgs * 2)
		size <<= 1;
	table = palloc(sizeof(int) * size);
	memset(table, -1, sizeof(int) * size);
	win = palloc(sizeof(int) * Max(batch->nmsgs, 1));
	del = palloc(sizeof(int) * Max(batch->nmsgs, 1));
	first = palloc(sizeof(int) * Max(batch->nmsgs, 1));
	src = palloc(sizeof(int *) * Max(batch->nmsgs, 1));
	cut = palloc0(sizeof(bool) * Max(batch->nmsgs, 1));

	for (int i = 0; i < batch->nmsgs; i++)
	{
		KsRow	   *r = &batch->rows[i];
		uint32		pos;
		int			k = -1;

		if (t->soft)
		{
			r->soft_seen = false;
			if (r->soft_done)
				continue;		/* applied in an earlier round: keeps winner */
			if (i > cut_at)
			{
				*more = true;
				continue;
			}
		}
		r->winner = false;
		r->fold_src = NULL;
		if (r->reason != KS_OK || r->duplicate || r->skipped || r->is_truncate)
			continue;
		r->hash = row_hash(t, kh, r);
		for (pos = r->hash & (size - 1);; pos = (pos + 1) & (size - 1))
		{
			if (table[pos] < 0)
			{
				k = nkeys++;
				table[pos] = k;
				win[k] = -1;
				del[k] = -1;
				first[k] = i;
				src[k] = NULL;
				break;
			}
			if (row_key_equal(t, kh, &batch->rows[first[table[pos]]], r))
			{
				k = table[pos];
				break;
			}
		}
		if (t->soft)
		{
			/*
			 * the key's messages after its delete: a later round, and so
			 * is the truncate after them
			 */
			if (cut[k])
			{
				*more = true;
				deferred = true;
				continue;
			}
			r->soft_seen = true;
			if (r->is_delete)
			{
				/* applied after the winner, which it then marks */
				del[k] = i;
				cut[k] = true;
				continue;
			}
		}
		if (r->is_delete && positioned(t, kh, r) && win[k] >= 0 &&
			row_newer(t, kh, r, &batch->rows[win[k]]))
		{
			/*
			 * A change event's delete older than the key's winner (a re-sent
			 * range): the winner stays; the delete still runs (guarded) and
			 * is recorded, if it is the key's newest.
			 */
			if (del[k] < 0 || row_newer(t, kh, &batch->rows[del[k]], r))
				del[k] = i;
		}
		else if (r->is_delete)
		{
			if (del[k] < 0 || !positioned(t, kh, r) || !positioned(t, kh, &batch->rows[del[k]]) ||
				!row_newer(t, kh, r, &batch->rows[del[k]]))
				del[k] = i;
			win[k] = -1;		/* whatever came before is deleted */
			src[k] = NULL;
		}
		else if (del[k] >= 0 && positioned(t, kh, &batch->rows[del[k]]) && !r->nulls[t->order_index] &&
				 !row_newer(t, kh, &batch->rows[del[k]], r))
			continue;			/* older than the key's delete: stale */
		else if (win[k] < 0)
			win[k] = i;
		else if (t->write_mode == KS_WRITE_INSERT_ONLY)
		{
			/* no fold: the earliest event is the row, as its insert writes it */
			if (row_earlier(t, kh, &batch->rows[win[k]], r))
				win[k] = i;
		}
		else if (row_beats(t, kh, &batch->rows[win[k]], r))
		{
			/* a second candidate: from now on the key's columns are a fold */
			if (src[k] == NULL)
			{
				KsRow	   *w = &batch->rows[win[k]];

				src[k] = palloc(sizeof(int) * Max(t->ncolumns, 1));
				for (int c = 0; c < t->ncolumns; c++)
					src[k][c] = w->present[c] ? win[k] : -1;
			}
			for (int c = 0; c < t->ncolumns; c++)
				if (r->present[c] && !(t->columns[c].is_key && src[k][c] >= 0))
					src[k][c] = i;
			win[k] = i;
		}
	}
	if (cut_at < batch->nmsgs && !deferred)
		*truncate = cut_at;
	*ndeletes = 0;
	for (int k = 0; k < nkeys; k++)
	{
		if (win[k] >= 0)
		{
			batch->rows[win[k]].winner = true;
			batch->rows[win[k]].fold_src = src[k];
			winners[nwin++] = win[k];
		}
		if (del[k] >= 0)
			deletes[(*ndeletes)++] = del[k];
	}
	pfree(table);
	pfree(win);
	pfree(del);
	pfree(first);
	pfree(src);
	pfree(cut);
	return nwin;
}

/*
 * Orders rows by key.  The MERGE then probes the target's unique index in
 * index order, which touches each index page once instead of at random
 * (measured: 36-50% less time for the same MERGE), and two pipelines whose
 * batches share keys lock them in the same order, so they cannot deadlock.
 * Text keys in a deterministic collation sort by their bytes instead
 * (ks_sort_collation()): the index's order where the collation orders by
 * code point ("C", C.UTF-8), another total order elsewhere.
 */
typedef struct SortArg
{
	KsBatch    *batch;
	KsKeyHash    *kh;
} SortArg;

static int
cmp_rows_by_key(const void *a, const void *b, void *arg)
{
	SortArg    *sa = arg;
	KsTarget   *t = sa->batch->target;
	KsRow	   *x = &sa->batch->rows[*(const int *) a];
	KsRow	   *y = &sa->batch->rows[*(const int *) b];

	for (int k = 0; k < t->nkeys; k++)
	{
		int			i = t->key_index[k];
		int			r = ApplySortComparator(x->values[i], x->nulls[i], y->values[i], y->nulls[i],
											&sa->kh->ssup[k]);

		if (r != 0)
			return r;
	}
	return 0;
}

/*
 * A single key column: its value next to the row, so sorting reads no row,
 * and its abbreviated key where the type has them, so that most
 * comparisons read neither: comparing text keys through their pointers was
 * one cache miss per comparison (16 % of a text-key worker in the
 * comparator's detoast of the key's header).  Ties of the abbreviated keys
 * are decided by the full comparator: the order is the one of ssup.
 */
typedef struct KeyedRow
{
	Datum		key;
	Datum		abbrev;
	int			row;
} KeyedRow;

static int
cmp_abbrev_keyed_rows(const void *a, const void *b, void *arg)
{
	const KeyedRow *x = a;
	const KeyedRow *y = b;
	SortSupport ssup = arg;
	int			r = ApplySortComparator(x->abbrev, false, y->abbrev, false, ssup);

	if (r != 0)
		return r;
	return ApplySortAbbrevFullComparator(x->key, false, y->key, false, ssup);
}

static int
cmp_keyed_rows(const void *a, const void *b, void *arg)
{
	const KeyedRow *x = a;
	const KeyedRow *y = b;

	return ApplySortComparator(x->key, false, y->key, false, (SortSupport) arg);
}

void
ks_sort_by_key(KsBatch *batch, KsKeyHash *kh, int *rows, int nrows)
{
	SortArg		sa = {batch, kh};
	KsTarget   *t = batch->target;

	if (!kh->sortable || nrows < 2)
		return;
	if (t->nkeys == 1)
	{
		int			k = t->key_index[0];
		KeyedRow   *keyed = palloc(sizeof(KeyedRow) * nrows);

		/* key columns are never NULL in a row that applies */
		for (int i = 0; i < nrows; i++)
		{
			keyed[i].key = batch->rows[rows[i]].values[k];
			keyed[i].row = rows[i];
		}
		if (kh->has_abbrev)
		{
			for (int i = 0; i < nrows; i++)
				keyed[i].abbrev = kh->abbrev.abbrev_converter(keyed[i].key, &kh->abbrev);
			qsort_arg(keyed, nrows, sizeof(KeyedRow), cmp_abbrev_keyed_rows, &kh->abbrev);
		}
		else
			qsort_arg(keyed, nrows, sizeof(KeyedRow), cmp_keyed_rows, &kh->ssup[0]);
		for (int i = 0; i < nrows; i++)
			rows[i] = keyed[i].row;
		pfree(keyed);
	}
	else
		qsort_arg(rows, nrows, sizeof(int), cmp_rows_by_key, &sa);
}

