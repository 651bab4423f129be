/*-------------------------------------------------------------------------
 *
 * spi.h
 *		SPI statements that leave the caller's memory context current
 *		(spi.c).
 *
 *		Owns: running a statement through SPI.  Must not: decide what a
 *		statement says or read its result.
 *
 *-------------------------------------------------------------------------
 */
#ifndef KS_SPI_H
#define KS_SPI_H

#include "kafka_sink.h"

#include "executor/spi.h"

extern int	ks_spi_execute(const char *sql, int nargs, Oid *argtypes, Datum *values,
						   const char *nulls, bool read_only, long tcount);
extern int	ks_spi_execute_plan(SPIPlanPtr plan, Datum *values, const char *nulls,
								bool read_only, long tcount);
extern int	ks_spi_execute_plan_snapshot(SPIPlanPtr plan, Datum *values, const char *nulls,
										 Snapshot snapshot, long tcount);

#endif							/* KS_SPI_H */
