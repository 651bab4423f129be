/*-------------------------------------------------------------------------
 *
 * offsets.c
 *		The one parser of offsets specs (starting_offsets, ending_offsets
 *		and reset_offsets' "to").
 *
 * The create-time validator (kafka_sink._check_offsets, called by
 * create_pipeline, alter_pipeline and reset_offsets) and the worker that
 * resolves the spec use this same function, so that a value passes
 * validation exactly when the worker can use it: ' earliest', 'infinity',
 * 'now' or '2026-13-45' are refused at the API, never discovered by a
 * worker in a restart loop.
 *
 * A spec is one of:
 *	 earliest | latest
 *	 a timestamp with a finite, fixed value (not now/today/infinity)
 *	 per-partition JSON {"topic": {"0": 42, "1": -2}} (-2 earliest, -1 latest)
 * written exactly, with no surrounding blanks.
 *
 * Owns: the grammar of starting_offsets and ending_offsets.  Must not:
 * resolve offsets against Kafka (assignment.c does).
 *
 *-------------------------------------------------------------------------
 */
#include "kafka_sink.h"
#include "offsets.h"

#include <ctype.h>

#include "common/jsonapi.h"
#include "datatype/timestamp.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"

PG_FUNCTION_INFO_V1(kafka_sink_check_offsets);

#define JSON_HINT "Per-partition offsets look like {\"orders.v1\": {\"0\": 42, \"1\": -2}}, where -2 means earliest and -1 latest."
#define SPEC_HINT "Use 'earliest', 'latest', a timestamp such as '2026-01-01 00:00:00+00', or per-partition JSON."

/* Words timestamptz_in accepts whose value depends on when it is read. */
static bool
has_relative_word(const char *s)
{
	static const char *const words[] = {"now", "today", "tomorrow", "yesterday", "infinity", NULL};

	while (*s)
	{
		char		w[16];
		int			n = 0;

		if (!isalpha((unsigned char) *s))
		{
			s++;
			continue;
		}
		while (isalpha((unsigned char) *s))
		{
			if (n < (int) sizeof(w) - 1)
				w[n++] = pg_tolower((unsigned char) *s);
			s++;
		}
		w[n] = '\0';
		for (int i = 0; words[i]; i++)
			if (strcmp(w, words[i]) == 0)
				return true;
	}
	return false;
}

static void
invalid_spec(const char *what, const char *spec, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid %s \"%s\"", what, spec),
			 detail ? errdetail("%s", detail) : 0,
			 errhint("%s", SPEC_HINT)));
}

/* A timestamp spec as Unix milliseconds; errors when it is not usable. */
static int64
parse_timestamp(const char *what, const char *spec)
{
	char		workbuf[MAXDATELEN + MAXDATEFIELDS];
	char	   *field[MAXDATEFIELDS];
	int			ftype[MAXDATEFIELDS];
	int			nf;
	int			dtype;
	int			tz;
	struct pg_tm tt,
			   *tm = &tt;
	fsec_t		fsec;
	TimestampTz ts;
	int			dterr;

	if (strlen(spec) >= MAXDATELEN)
		invalid_spec(what, spec, "It is too long to be a timestamp.");
	dterr = ParseDateTime(spec, workbuf, sizeof(workbuf), field, ftype, MAXDATEFIELDS, &nf);
	if (dterr == 0)
	{
		KsDateTimeErrorExtra extra;

		dterr = KS_DECODE_DATETIME(field, ftype, nf, &dtype, tm, &fsec, &tz, &extra);
	}
	if (dterr != 0)
		invalid_spec(what, spec, "It is neither earliest, latest, per-partition JSON nor a valid timestamp.");
	if (has_relative_word(spec))
		invalid_spec(what, spec, "A timestamp must have a fixed, finite value: not now, today, tomorrow, yesterday or infinity.");
	if (dtype == DTK_EPOCH)
		return 0;
	if (dtype != DTK_DATE)
		invalid_spec(what, spec, "A timestamp must have a fixed, finite value.");
	if (tm2timestamp(tm, fsec, &tz, &ts) != 0 || !IS_VALID_TIMESTAMP(ts))
		invalid_spec(what, spec, "The timestamp is out of range.");
	return ks_timestamptz_to_epoch_ms(ts);
}

static bool
all_digits(const char *s, int maxlen)
{
	int			n = 0;

	for (; *s; s++, n++)
		if (!isdigit((unsigned char) *s))
			return false;
	return n >= 1 && n <= maxlen;
}

/* Per-partition JSON into a list of KsPartition (committed = the offset). */
static List *
parse_json(const char *what, const char *spec)
{
	JsonLexContext *lex;
	JsonParseErrorType jerr;
	Jsonb	   *jb;
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	List	   *result = NIL;
	char	   *topic = NULL;
	int			depth = 0;
	char	   *pkey = NULL;

	/* check the syntax first, without raising: our message, not jsonb_in's */
	lex = KS_JSON_LEXER(spec, strlen(spec), GetDatabaseEncoding());
	jerr = pg_parse_json(lex, &nullSemAction);
	if (jerr != JSON_SUCCESS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid %s: malformed JSON", what),
				 errdetail("%s", json_errdetail(jerr, lex)),
				 errhint("%s", JSON_HINT)));

	jb = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(spec)));
	if (!JB_ROOT_IS_OBJECT(jb) || JB_ROOT_IS_SCALAR(jb))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid %s: per-partition offsets must be a JSON object", what),
				 errhint("%s", JSON_HINT)));
	if (JB_ROOT_COUNT(jb) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid %s: no topic given", what),
				 errhint("%s", JSON_HINT)));

	it = JsonbIteratorInit(&jb->root);
	while ((tok = JsonbIteratorNext(&it, &v, false)) != WJB_DONE)
	{
		switch (tok)
		{
			case WJB_BEGIN_OBJECT:
				if (++depth > 2)
					ereport(ERROR,
							(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							 errmsg("invalid %s for topic \"%s\"", what, topic ? topic : ""),
							 errdetail("Each topic maps partition numbers to offsets."),
							 errhint("%s", JSON_HINT)));
				break;
			case WJB_END_OBJECT:
				depth--;
				break;
			case WJB_KEY:
				if (depth == 1)
				{
					topic = pnstrdup(v.val.string.val, v.val.string.len);
					if (topic[0] == '\0')
						ereport(ERROR,
								(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
								 errmsg("invalid %s: empty topic name", what),
								 errhint("%s", JSON_HINT)));
				}
				else
				{
					pkey = pnstrdup(v.val.string.val, v.val.string.len);
					if (!all_digits(pkey, 9))
						ereport(ERROR,
								(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
								 errmsg("invalid %s for topic \"%s\": \"%s\" is not a partition number", what, topic, pkey),
								 errhint("%s", JSON_HINT)));
				}
				break;
			case WJB_VALUE:
			case WJB_BEGIN_ARRAY:
			case WJB_ELEM:
			case WJB_END_ARRAY:
				if (depth != 2 || tok != WJB_VALUE || v.type != jbvNumeric)
					ereport(ERROR,
							(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							 errmsg("invalid %s for topic \"%s\"", what, topic ? topic : ""),
							 errdetail("Each topic maps partition numbers to offsets."),
							 errhint("%s", JSON_HINT)));
				{
					char	   *num = DatumGetCString(DirectFunctionCall1(numeric_out,
																		  NumericGetDatum(v.val.numeric)));
					KsPartition *sp;

					if (!(strcmp(num, "-1") == 0 || strcmp(num, "-2") == 0 || all_digits(num, 18)))
						ereport(ERROR,
								(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
								 errmsg("invalid %s for topic \"%s\" partition %s: offset %s", what, topic, pkey, num),
								 errdetail("An offset is a whole number from 0, or -2 (earliest) or -1 (latest)."),
								 errhint("%s", JSON_HINT)));
					sp = palloc0(sizeof(KsPartition));
					sp->topic = topic;
					sp->partition = (int32) strtol(pkey, NULL, 10);
					sp->committed = strtoll(num, NULL, 10);
					sp->end_offset = -1;
					result = lappend(result, sp);
				}
				break;
			default:
				break;
		}
	}
	return result;
}

/*
 * Parses an offsets spec named "what" (for messages).  Raises an error
 * naming it when it is not usable; else sets *per_partition (per-partition
 * JSON) or *ts_ms (a timestamp) and returns the kind.
 */
KsSpecKind
ks_parse_offsets_spec(const char *spec, const char *what, List **per_partition, int64 *ts_ms)
{
	if (per_partition)
		*per_partition = NIL;
	if (ts_ms)
		*ts_ms = 0;
	if (spec == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s cannot be null", what),
				 errhint("%s", SPEC_HINT)));
	if (strcmp(spec, "earliest") == 0)
		return KS_SPEC_EARLIEST;
	if (strcmp(spec, "latest") == 0)
		return KS_SPEC_LATEST;
	if (spec[0] == '\0' || isspace((unsigned char) spec[0]) ||
		isspace((unsigned char) spec[strlen(spec) - 1]))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid %s \"%s\"", what, spec),
				 errdetail("It is empty or has leading or trailing blanks."),
				 errhint("%s", SPEC_HINT)));
	if (spec[0] == '{')
	{
		List	   *l = parse_json(what, spec);

		if (per_partition)
			*per_partition = l;
		return KS_SPEC_PARTITIONS;
	}
	{
		int64		ms = parse_timestamp(what, spec);

		if (ts_ms)
			*ts_ms = ms;
	}
	return KS_SPEC_TIMESTAMP;
}

/*
 * kafka_sink._check_offsets(spec text, what text, start text DEFAULT NULL)
 * The validator: errors unless spec is usable.  With start (the pipeline's
 * starting_offsets) it checks an ending_offsets against it: an end before
 * its start, when both are timestamps or both name the same partition, is
 * a backfill with nothing to read.
 */
Datum
kafka_sink_check_offsets(PG_FUNCTION_ARGS)
{
	char	   *what;
	char	   *spec;
	List	   *end_list;
	int64		end_ms;
	KsSpecKind	kind;

	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("the name of the offsets spec cannot be null")));
	what = text_to_cstring(PG_GETARG_TEXT_PP(1));
	if (strcmp(what, "starting_offsets") != 0 && strcmp(what, "ending_offsets") != 0 &&
		strcmp(what, "reset_offsets") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown offsets spec \"%s\"", what),
				 errhint("Pass starting_offsets, ending_offsets or reset_offsets.")));
	spec = PG_ARGISNULL(0) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(0));
	kind = ks_parse_offsets_spec(spec, what, &end_list, &end_ms);

	if (strcmp(what, "ending_offsets") == 0)
	{
		if (kind == KS_SPEC_EARLIEST)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("ending_offsets cannot be earliest"),
					 errhint("A backfill ends at 'latest' (the high watermarks when it starts), a timestamp, or per-partition JSON.")));
		if (PG_NARGS() > 2 && !PG_ARGISNULL(2))
		{
			char	   *start = text_to_cstring(PG_GETARG_TEXT_PP(2));
			List	   *start_list;
			int64		start_ms;
			KsSpecKind	skind = ks_parse_offsets_spec(start, "starting_offsets", &start_list, &start_ms);
			ListCell   *lc,
					   *lc2;

			if (skind == KS_SPEC_TIMESTAMP && kind == KS_SPEC_TIMESTAMP && end_ms < start_ms)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("ending_offsets \"%s\" is before starting_offsets \"%s\"", spec, start),
						 errhint("A backfill reads from its start up to its end: pass an end after the start.")));
			if (skind == KS_SPEC_PARTITIONS && kind == KS_SPEC_PARTITIONS)
				foreach(lc, end_list)
				{
					KsPartition *e = lfirst(lc);

					foreach(lc2, start_list)
					{
						KsPartition *s = lfirst(lc2);

						if (s->partition == e->partition && strcmp(s->topic, e->topic) == 0 &&
							s->committed >= 0 && e->committed >= 0 && e->committed < s->committed)
							ereport(ERROR,
									(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
									 errmsg("ending_offsets for topic \"%s\" partition %d is %lld, before its starting offset %lld",
											e->topic, e->partition, (long long) e->committed, (long long) s->committed),
									 errhint("A backfill reads from its start up to its end: pass an end after the start.")));
					}
				}
		}
	}
	PG_RETURN_VOID();
}
