/*-------------------------------------------------------------------------
 *
 * slot_text.h
 *		The texts the binary decoders (avro_binary.c, protobuf.c) write into
 *		slots: a JSON string literal, an element of a PostgreSQL array
 *		literal; a small StringInfo; slots made ABSENT.  Inline: both
 *		are built without the backend for test/fuzz.
 *
 *		Owns: those four inline helpers, for avro_binary.c and protobuf.c
 *		alone.  Must not: need the backend beyond palloc and StringInfo, or
 *		hold state.
 *
 *-------------------------------------------------------------------------
 */
#ifndef KS_SLOT_TEXT_H
#define KS_SLOT_TEXT_H

#include "lib/stringinfo.h"
#include "jsonwalk.h"

/* A JSON string literal of valid UTF-8 text. */
static inline void
append_json_string(StringInfo b, const char *s, int64 n)
{
	appendStringInfoChar(b, '"');
	for (int64 i = 0; i < n; i++)
	{
		unsigned char c = (unsigned char) s[i];

		switch (c)
		{
			case '"':
				appendStringInfoString(b, "\\\"");
				break;
			case '\\':
				appendStringInfoString(b, "\\\\");
				break;
			case '\n':
				appendStringInfoString(b, "\\n");
				break;
			case '\r':
				appendStringInfoString(b, "\\r");
				break;
			case '\t':
				appendStringInfoString(b, "\\t");
				break;
			case '\b':
				appendStringInfoString(b, "\\b");
				break;
			case '\f':
				appendStringInfoString(b, "\\f");
				break;
			default:
				if (c < 0x20)
					appendStringInfo(b, "\\u%04x", c);
				else
					appendStringInfoChar(b, (char) c);
		}
	}
	appendStringInfoChar(b, '"');
}

/* An element of a PostgreSQL array literal, double-quoted. */
static inline void
append_array_element(StringInfo b, const char *s, int len)
{
	appendStringInfoChar(b, '"');
	for (int i = 0; i < len; i++)
	{
		if (s[i] == '"' || s[i] == '\\')
			appendStringInfoChar(b, '\\');
		appendStringInfoChar(b, s[i]);
	}
	appendStringInfoChar(b, '"');
}

/* A StringInfo that starts small: most values are a few bytes. */
static inline void
init_small(StringInfo b)
{
	b->data = palloc(32);
	b->maxlen = 32;
	b->len = 0;
	b->cursor = 0;
	b->data[0] = '\0';
}

/* Every slot ABSENT; free_text: the texts written so far freed first. */
static inline void
slots_absent(KsSlotValue *out, int n, bool free_text)
{
	for (int i = 0; i < n; i++)
	{
		if (free_text && out[i].text)
			pfree(out[i].text);
		out[i].kind = KS_SLOT_ABSENT;
		out[i].text = NULL;
	}
}

#endif							/* KS_SLOT_TEXT_H */
