/*-------------------------------------------------------------------------
 *
 * format_json.c
 *		The json format: a message value (or key) that is a JSON object,
 *		its fields captured in one pass by the scanner of jsonwalk.c.
 *
 * Owns: the mapping of the scanner's results to quarantine reasons
 * (invalid_json, not_an_object).  Must not: convert values into column
 * types (decode.c does, for every format).  Its one export is the entry
 * of format.c's table, declared in format.h.
 *
 *-------------------------------------------------------------------------
 */
#include "kafka_sink.h"
#include "format.h"

KsReason
ks_format_json_decode(const KsFormatCall *call, const char *data, size_t len,
					  KsSlotValue *out, char **detail)
{
	KsWalkResult r = ks_json_walk(call->walk, data, len, out, detail);

	if (r == KS_WALK_OK)
		return KS_OK;
	return r == KS_WALK_INVALID_JSON ? KS_INVALID_JSON : KS_NOT_AN_OBJECT;
}
