/*-------------------------------------------------------------------------
 *
 * spi.c
 *		Every statement kafka_sink runs through SPI goes through here.
 *
 * SPI_execute and its siblings return with SPI's procedure context
 * current, whatever was current before the call (spi.c's _SPI_end_call).
 * Memory the caller then allocates -- a list, a copied value -- is freed
 * by SPI_finish, although the caller chose a longer-lived context before
 * the statement: the schema prefetch's list of ids to fetch was freed that
 * way at the end of its catalog read and then read again (a crash on 18,
 * where the freed memory was reused sooner).  These wrappers put the
 * caller's context back, so that a statement never changes where the
 * caller's allocations go.  The tuple table stays in SPI's context, as
 * always, until SPI_finish or SPI_freetuptable.
 *
 * Owns: running a statement.  Must not: decide what a statement says,
 * check its result (the callers do), or connect to SPI.
 *
 *-------------------------------------------------------------------------
 */
#include "kafka_sink.h"
#include "spi.h"

#include "utils/memutils.h"

/*
 * SPI_execute (nargs 0) or SPI_execute_with_args; the memory context
 * current at the call is current again when it returns.
 */
int
ks_spi_execute(const char *sql, int nargs, Oid *argtypes, Datum *values,
			   const char *nulls, bool read_only, long tcount)
{
	MemoryContext cxt = CurrentMemoryContext;
	int			rc;

	if (nargs == 0)
		rc = SPI_execute(sql, read_only, tcount);
	else
		rc = SPI_execute_with_args(sql, nargs, argtypes, values, nulls, read_only, tcount);
	MemoryContextSwitchTo(cxt);
	return rc;
}

/* SPI_execute_plan, with the same promise. */
int
ks_spi_execute_plan(SPIPlanPtr plan, Datum *values, const char *nulls,
					bool read_only, long tcount)
{
	MemoryContext cxt = CurrentMemoryContext;
	int			rc = SPI_execute_plan(plan, values, nulls, read_only, tcount);

	MemoryContextSwitchTo(cxt);
	return rc;
}

/*
 * SPI_execute_snapshot: a statement that writes, run with snapshot (and the
 * current command id: it sees this transaction's own earlier writes), so
 * that two statements see the same rows of other transactions.
 */
int
ks_spi_execute_plan_snapshot(SPIPlanPtr plan, Datum *values, const char *nulls,
							 Snapshot snapshot, long tcount)
{
	MemoryContext cxt = CurrentMemoryContext;
	int			rc = SPI_execute_snapshot(plan, values, nulls, snapshot, InvalidSnapshot,
										  false, true, tcount);

	MemoryContextSwitchTo(cxt);
	return rc;
}
