/*-------------------------------------------------------------------------
 *
 * compat.h
 *		API differences across the supported PostgreSQL versions (15 to 18),
 *		in one place (included by kafka_sink.h; see docs/design/catalog.md,
 *		"Version support").
 *
 * Every PG_VERSION_NUM test of the extension is here, as a wrapper that
 * takes the newest signature (timescaledb's _compat style) or a feature
 * macro; the modules call the wrappers.  Only macros: jsontree.c and
 * jsonwalk.c, which test/fuzz builds without the backend (-DFRONTEND),
 * include it too, and a wrapper's dependencies are included where it is
 * used.
 *
 * Owns: the differences between PostgreSQL 15, 16, 17 and 18, as
 * macros named KS_* or Ks* that the modules call.  Must not: hold a
 * module's API, a GUC, state or a function body, or let a PG_VERSION_NUM
 * test live in any other file.
 *
 *-------------------------------------------------------------------------
 */
#ifndef KAFKA_SINK_COMPAT_H
#define KAFKA_SINK_COMPAT_H

/* 16 moved the varlena macros (VARDATA, SET_VARSIZE) out of postgres.h */
#if PG_VERSION_NUM >= 160000
#include "varatt.h"
#endif

/*
 * 18 replaced the suffix pg_attribute_noreturn() by the prefix pg_noreturn;
 * KS_NORETURN goes where pg_noreturn does (static KS_NORETURN void f(...)),
 * which GCC and clang also accept for the attribute of older versions.
 */
#if PG_VERSION_NUM >= 180000
#define KS_NORETURN pg_noreturn
#else
#define KS_NORETURN pg_attribute_noreturn()
#endif

/* 17 made PGPROC numbers a function of the PGPROC */
#if PG_VERSION_NUM >= 170000
#define KS_MY_PROCNO() GetNumberFromPGProc(MyProc)
#else
#define KS_MY_PROCNO() (MyProc->pgprocno)
#endif

/* 17: getIdentitySequence takes the Relation, not its OID */
#if PG_VERSION_NUM >= 170000
#define KS_IDENTITY_SEQUENCE(rel, attnum) getIdentitySequence((rel), (attnum), true)
#else
#define KS_IDENTITY_SEQUENCE(rel, attnum) getIdentitySequence(RelationGetRelid(rel), (attnum), true)
#endif

/*
 * 16 added ExecInsertIndexTuples' onlySummarizing (true only for HOT updates
 * that changed summarizing-index columns; never for an insert).
 */
#if PG_VERSION_NUM >= 160000
#define KS_EXEC_INSERT_INDEX_TUPLES(rri, slot, estate) \
	ExecInsertIndexTuples((rri), (slot), (estate), false, false, NULL, NIL, false)
#else
#define KS_EXEC_INSERT_INDEX_TUPLES(rri, slot, estate) \
	ExecInsertIndexTuples((rri), (slot), (estate), false, false, NULL, NIL)
#endif

/* 18: index_beginscan takes the scan's instrumentation (NULL: none) */
#if PG_VERSION_NUM >= 180000
#define KS_INDEX_BEGINSCAN(rel, index, snapshot, nkeys) \
	index_beginscan((rel), (index), (snapshot), NULL, (nkeys), 0)
#else
#define KS_INDEX_BEGINSCAN(rel, index, snapshot, nkeys) \
	index_beginscan((rel), (index), (snapshot), (nkeys), 0)
#endif

/*
 * 16 made table_tuple_update's "update the indexes" an enum (TU_None,
 * TU_All, TU_Summarizing: only the summarizing indexes, after a HOT
 * update); KS_UPDATE_INDEX_TUPLES adds an updated tuple's index entries
 * when it says so.
 */
#if PG_VERSION_NUM >= 160000
#define KsUpdateIndexes TU_UpdateIndexes /* access/tableam.h, where it is used */
#define KS_UPDATE_INDEX_TUPLES(rri, slot, estate, u) \
	((u) != TU_None ? (void) ExecInsertIndexTuples((rri), (slot), (estate), true, false, NULL, NIL, \
												   (u) == TU_Summarizing) : (void) 0)
#else
#define KsUpdateIndexes bool
#define KS_UPDATE_INDEX_TUPLES(rri, slot, estate, u) \
	((u) ? (void) ExecInsertIndexTuples((rri), (slot), (estate), true, false, NULL, NIL) : (void) 0)
#endif

/*
 * 18: RelationGetPrimaryKeyIndex takes deferrable_ok (false: a deferrable
 * primary key does not count, as before 18, where it was never one)
 */
#if PG_VERSION_NUM >= 180000
#define KS_PRIMARY_KEY_INDEX(rel) RelationGetPrimaryKeyIndex((rel), false)
#else
#define KS_PRIMARY_KEY_INDEX(rel) RelationGetPrimaryKeyIndex(rel)
#endif

/*
 * 16: input functions can report bad input as a soft error into an
 * ErrorSaveContext (InputFunctionCallSafe) instead of throwing; decode.c
 * uses that to quarantine a bad value without a subtransaction.
 */
#if PG_VERSION_NUM >= 160000
#define KS_HAVE_SOFT_INPUT_ERRORS 1
#include "nodes/miscnodes.h"
#endif

/*
 * The JSON lexer (common/jsonapi.h).  17 takes a context to fill (NULL:
 * allocate one) and frees it with freeJsonLexContext; before 17 it always
 * allocated and had no free (the lexer and its string buffer are freed by
 * hand).  KS_JSON_LEXER makes one over len bytes that collects field names
 * and strings (need_escapes).
 */
#if PG_VERSION_NUM >= 170000
#define KS_JSON_LEXER(json, len, enc) makeJsonLexContextCstringLen(NULL, (json), (len), (enc), true)
#define KS_JSON_LEXER_FREE(lex) freeJsonLexContext(lex)
#else
#define KS_JSON_LEXER(json, len, enc) \
	makeJsonLexContextCstringLen((char *) (json), (int) (len), (enc), true)
#define KS_JSON_LEXER_FREE(lex) \
	do { \
		JsonLexContext *ks_lex_ = (lex); \
		if (ks_lex_->strval) \
		{ \
			pfree(ks_lex_->strval->data); \
			pfree(ks_lex_->strval); \
		} \
		pfree(ks_lex_); \
	} while (0)
#endif

/*
 * The return of a JsonSemAction callback: void before 16, JsonParseErrorType
 * since.  Every semantic action of the extension (jsontree.c, jsonwalk.c) is
 * written with these.
 */
#if PG_VERSION_NUM >= 160000
#define KS_JSON_RETURN JsonParseErrorType
#define KS_JSON_OK return JSON_SUCCESS
#else
#define KS_JSON_RETURN void
#define KS_JSON_OK return
#endif

/*
 * 16: DecodeDateTime reports the details of an error in a
 * DateTimeErrorExtra (utils/datetime.h); declare a KsDateTimeErrorExtra and
 * pass its address, which 15 ignores.
 */
#if PG_VERSION_NUM >= 160000
#define KsDateTimeErrorExtra DateTimeErrorExtra
#define KS_DECODE_DATETIME(field, ftype, nf, dtype, tm, fsec, tz, extra) \
	DecodeDateTime((field), (ftype), (nf), (dtype), (tm), (fsec), (tz), (extra))
#else
#define KsDateTimeErrorExtra int
#define KS_DECODE_DATETIME(field, ftype, nf, dtype, tm, fsec, tz, extra) \
	((void) (extra), DecodeDateTime((field), (ftype), (nf), (dtype), (tm), (fsec), (tz)))
#endif

/* 16: one object_aclcheck for every kind of object (catalog/pg_namespace.h) */
#if PG_VERSION_NUM >= 160000
#define KS_NAMESPACE_ACLCHECK(nsp, role, mode) object_aclcheck(NamespaceRelationId, (nsp), (role), (mode))
#else
#define KS_NAMESPACE_ACLCHECK(nsp, role, mode) pg_namespace_aclcheck((nsp), (role), (mode))
#endif
#if PG_VERSION_NUM >= 160000
#define KS_PROC_ACLCHECK(fn, role, mode) object_aclcheck(ProcedureRelationId, (fn), (role), (mode))
#else
#define KS_PROC_ACLCHECK(fn, role, mode) pg_proc_aclcheck((fn), (role), (mode))
#endif

/*
 * 17: named custom wait events (WaitEventExtensionNew, utils/wait_event.h);
 * before 17 every wait of an extension is "Extension".
 */
#if PG_VERSION_NUM >= 170000
#define KS_WAIT_EVENT_EXTENSION_NEW(name) WaitEventExtensionNew(name)
#else
#define KS_WAIT_EVENT_EXTENSION_NEW(name) ((void) (name), (uint32) PG_WAIT_EXTENSION)
#endif


#endif							/* KAFKA_SINK_COMPAT_H */
