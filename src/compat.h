/*-------------------------------------------------------------------------
 *
 * compat.h
 *		API differences across the supported PostgreSQL versions (15 to 18),
 *		in one place (included by kafka_sink.h; see docs/design-notes.md,
 *		"Version support").
 *
 * jsonwalk.c keeps its own guard for the JSON parser callbacks' return type
 * (16+), as it is also built without the backend headers for test/fuzz.
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
 * What the workers' waits report in pg_stat_activity.wait_event: 17 has
 * named custom wait events (WaitEventExtensionNew), before that they all
 * are "Extension".  ks_wait_event() (kafka_sink.c) registers each name once
 * per process.
 */
typedef enum KsWaitEvent
{
	KS_WAIT_LAUNCHER_NAP,		/* KafkaSinkLauncherNap */
	KS_WAIT_MESSAGES,			/* KafkaSinkWaitForMessages */
	KS_WAIT_RELAY_NAP,			/* KafkaSinkRelayNap */
	KS_WAIT_NUM
} KsWaitEvent;

extern uint32 ks_wait_event(KsWaitEvent which);

#endif							/* KAFKA_SINK_COMPAT_H */
