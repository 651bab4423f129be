/*-------------------------------------------------------------------------
 *
 * protobuf_parse.c
 *		The .proto parser: the text a schema registry stores for a Protobuf
 *		schema (and the texts of its references) compiled into the message
 *		types protobuf.c decodes with.
 *
 * Reads proto2 and proto3 files: syntax, package, imports (resolved by
 * name among the files given, the well-known types built in), messages
 * and enums (nested), fields with labels, oneof, map<K, V>, groups
 * refused, options, reserved ranges, extensions ranges, extend blocks and
 * services skipped (an extension's fields are unknown fields, skipped on
 * the wire), comments.  Type names resolve by protobuf's scoping rules:
 * a leading dot is fully qualified, else the first component is looked up
 * from the innermost scope outwards.  Editions files are refused.
 *
 * Bounds: the text is read once, left to right (time linear in its
 * size); messages nest at most KS_PB_MAX_DEPTH deep (the only recursion),
 * balanced skips count their brackets without recursing.
 *
 * Over 1,000 lines: the lexer, the grammar and the name resolution are one
 * pass over one state (Parse), and the built-in well-known files are read
 * by the same code; they are fuzzed together (fuzz_protobuf).
 *
 * Must not: depend on the backend (test/fuzz builds it with -DFRONTEND),
 * or know the wire format (protobuf.c does).
 *
 *-------------------------------------------------------------------------
 */
#ifdef FRONTEND
#include "postgres_fe.h"
#else
#include "postgres.h"
#endif

#include "common/hashfn.h"
#include "lib/stringinfo.h"

#include "protobuf.h"

/* ---- the well-known types, as their .proto files declare them ---- */

static const KsPbFile builtin_files[] = {
	{"google/protobuf/timestamp.proto",
	"syntax = \"proto3\"; package google.protobuf;"
	"message Timestamp { int64 seconds = 1; int32 nanos = 2; }", 0},
	{"google/protobuf/duration.proto",
	"syntax = \"proto3\"; package google.protobuf;"
	"message Duration { int64 seconds = 1; int32 nanos = 2; }", 0},
	{"google/protobuf/wrappers.proto",
	"syntax = \"proto3\"; package google.protobuf;"
	"message DoubleValue { double value = 1; } message FloatValue { float value = 1; }"
	"message Int64Value { int64 value = 1; } message UInt64Value { uint64 value = 1; }"
	"message Int32Value { int32 value = 1; } message UInt32Value { uint32 value = 1; }"
	"message BoolValue { bool value = 1; } message StringValue { string value = 1; }"
	"message BytesValue { bytes value = 1; }", 0},
	{"google/protobuf/struct.proto",
	"syntax = \"proto3\"; package google.protobuf;"
	"message Struct { map<string, Value> fields = 1; }"
	"message Value { oneof kind { NullValue null_value = 1; double number_value = 2;"
	" string string_value = 3; bool bool_value = 4; Struct struct_value = 5;"
	" ListValue list_value = 6; } }"
	"enum NullValue { NULL_VALUE = 0; }"
	"message ListValue { repeated Value values = 1; }", 0},
	{"google/protobuf/any.proto",
	"syntax = \"proto3\"; package google.protobuf;"
	"message Any { string type_url = 1; bytes value = 2; }", 0},
	{"google/protobuf/empty.proto",
	"syntax = \"proto3\"; package google.protobuf; message Empty { }", 0},
	{"google/protobuf/field_mask.proto",
	"syntax = \"proto3\"; package google.protobuf;"
	"message FieldMask { repeated string paths = 1; }", 0},
};

/* ---- names: fully-qualified name -> message, enum or package ---- */

typedef enum SymKind
{
	SYM_PACKAGE,
	SYM_MESSAGE,
	SYM_ENUM
} SymKind;

typedef struct Sym
{
	const char *name;
	SymKind		kind;
	void	   *val;
} Sym;

typedef struct Syms
{
	int			n;
	int			cap;			/* a power of two */
	Sym		   *tab;
} Syms;

static Sym *
sym_get(const Syms *t, const char *name, size_t len)
{
	uint32		h;

	if (t->cap == 0)
		return NULL;
	h = hash_bytes((const unsigned char *) name, (int) len);
	for (uint32 i = h & (t->cap - 1);; i = (i + 1) & (t->cap - 1))
	{
		Sym		   *s = &t->tab[i];

		if (s->name == NULL)
			return NULL;
		if (strlen(s->name) == len && memcmp(s->name, name, len) == 0)
			return s;
	}
}

/* false when name is there already (as a package both times: fine) */
static bool
sym_add(Syms *t, const char *name, SymKind kind, void *val)
{
	Sym		   *s = sym_get(t, name, strlen(name));
	uint32		h;

	if (s)
		return s->kind == SYM_PACKAGE && kind == SYM_PACKAGE;
	if ((t->n + 1) * 2 > t->cap)
	{
		Syms		bigger;

		bigger.n = 0;
		bigger.cap = t->cap ? t->cap * 2 : 64;
		bigger.tab = palloc0(sizeof(Sym) * bigger.cap);
		for (int i = 0; i < t->cap; i++)
			if (t->tab[i].name)
				sym_add(&bigger, t->tab[i].name, t->tab[i].kind, t->tab[i].val);
		if (t->tab)
			pfree(t->tab);
		*t = bigger;
	}
	h = hash_bytes((const unsigned char *) name, (int) strlen(name));
	for (uint32 i = h & (t->cap - 1);; i = (i + 1) & (t->cap - 1))
		if (t->tab[i].name == NULL)
		{
			t->tab[i].name = name;
			t->tab[i].kind = kind;
			t->tab[i].val = val;
			t->n++;
			return true;
		}
}

/* ---- the lexer ---- */

typedef enum Tok
{
	T_EOF,
	T_IDENT,					/* letters, digits, '_' and '.' */
	T_NUMBER,					/* digits, a sign not included */
	T_STRING,					/* unescaped into str */
	T_SYM						/* one character: ; { } [ ] ( ) < > = , - + : */
} Tok;

typedef struct Parse
{
	const char *p;
	const char *end;
	const char *file;
	int			line;
	Tok			tok;
	StringInfoData str;			/* the token's text */
	char	   *err;
	bool		proto3;
	const char *package;		/* "" or the package */
	Syms		syms;
	PbMsg	  **msgs;			/* every message, to resolve */
	int			nmsgs;
	int			capmsgs;
	PbMsg	  **tops;			/* the top-level messages of the schema's file */
	int			ntops;
	int			captops;
} Parse;

/* clang does not know gnu_printf, which PostgreSQL's gcc build configured */
#ifdef __clang__
static bool perr(Parse *ps, const char *fmt,...) __attribute__((format(printf, 2, 3)));
#else
static bool perr(Parse *ps, const char *fmt,...) pg_attribute_printf(2, 3);
#endif

static bool
perr(Parse *ps, const char *fmt,...)
{
	va_list		ap;
	StringInfoData b;

	if (ps->err)
		return false;
	initStringInfo(&b);
	appendStringInfo(&b, "%s line %d: ", ps->file, ps->line);
	va_start(ap, fmt);
	appendStringInfoVA(&b, fmt, ap);
	va_end(ap);
	ps->err = b.data;
	return false;
}

static bool
is_ident_char(char c, bool first)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '.' ||
		(!first && c >= '0' && c <= '9');
}

/* One string literal (the quote at ps->p), unescaped onto ps->str. */
static bool
lex_string(Parse *ps)
{
	char		q = *ps->p++;

	while (ps->p < ps->end && *ps->p != q)
	{
		char		c = *ps->p++;

		if (c == '\n')
			return perr(ps, "a string literal runs past the end of its line");
		if (c == '\\' && ps->p < ps->end)
		{
			c = *ps->p++;
			switch (c)
			{
				case 'n':
					c = '\n';
					break;
				case 't':
					c = '\t';
					break;
				case 'r':
					c = '\r';
					break;
				case '0':
				case '1':
				case '2':
				case '3':
				case '4':
				case '5':
				case '6':
				case '7':
					{
						int			v = c - '0';

						for (int k = 0; k < 2 && ps->p < ps->end && *ps->p >= '0' && *ps->p <= '7'; k++)
							v = v * 8 + (*ps->p++ - '0');
						c = (char) v;
						break;
					}
				default:
					break;		/* \" \' \\ and the rest: the character */
			}
		}
		appendStringInfoChar(&ps->str, c);
	}
	if (ps->p >= ps->end)
		return perr(ps, "a string literal is not closed");
	ps->p++;
	return true;
}

/* The next token into ps->tok and ps->str; false on a lexical error. */
static bool
next(Parse *ps)
{
	resetStringInfo(&ps->str);
	for (;;)
	{
		while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\r' ||
								   *ps->p == '\n' || *ps->p == '\f' || *ps->p == '\v'))
		{
			if (*ps->p == '\n')
				ps->line++;
			ps->p++;
		}
		if (ps->p + 1 < ps->end && ps->p[0] == '/' && ps->p[1] == '/')
		{
			while (ps->p < ps->end && *ps->p != '\n')
				ps->p++;
			continue;
		}
		if (ps->p + 1 < ps->end && ps->p[0] == '/' && ps->p[1] == '*')
		{
			ps->p += 2;
			while (ps->p + 1 < ps->end && !(ps->p[0] == '*' && ps->p[1] == '/'))
			{
				if (*ps->p == '\n')
					ps->line++;
				ps->p++;
			}
			if (ps->p + 1 >= ps->end)
				return perr(ps, "a comment is not closed");
			ps->p += 2;
			continue;
		}
		break;
	}
	if (ps->p >= ps->end)
	{
		ps->tok = T_EOF;
		return true;
	}
	if (*ps->p == '"' || *ps->p == '\'')
	{
		ps->tok = T_STRING;
		if (!lex_string(ps))
			return false;
		/* adjacent literals are one string */
		for (;;)
		{
			const char *save = ps->p;

			while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
			{
				if (*ps->p == '\n')
					ps->line++;
				ps->p++;
			}
			if (ps->p < ps->end && (*ps->p == '"' || *ps->p == '\''))
			{
				if (!lex_string(ps))
					return false;
				continue;
			}
			ps->p = save;
			return true;
		}
	}
	if (*ps->p >= '0' && *ps->p <= '9')
	{
		ps->tok = T_NUMBER;
		while (ps->p < ps->end && (is_ident_char(*ps->p, false) ||
								   ((*ps->p == '+' || *ps->p == '-') &&
									(ps->p[-1] == 'e' || ps->p[-1] == 'E'))))
			appendStringInfoChar(&ps->str, *ps->p++);
		return true;
	}
	if (is_ident_char(*ps->p, true))
	{
		ps->tok = T_IDENT;
		while (ps->p < ps->end && is_ident_char(*ps->p, false))
			appendStringInfoChar(&ps->str, *ps->p++);
		return true;
	}
	if (strchr(";{}[]()<>=,-+:/", *ps->p) && *ps->p != '\0')
	{
		ps->tok = T_SYM;
		appendStringInfoChar(&ps->str, *ps->p++);
		return true;
	}
	if ((unsigned char) *ps->p >= 0x20 && (unsigned char) *ps->p < 0x7f)
		return perr(ps, "unexpected character \"%c\"", *ps->p);
	return perr(ps, "unexpected byte 0x%02x", (unsigned char) *ps->p);
}

static bool
is_sym(Parse *ps, char c)
{
	return ps->tok == T_SYM && ps->str.data[0] == c;
}

static bool
is_word(Parse *ps, const char *w)
{
	return ps->tok == T_IDENT && strcmp(ps->str.data, w) == 0;
}

static bool
expect_sym(Parse *ps, char c)
{
	if (!is_sym(ps, c))
		return perr(ps, "expected \"%c\", found \"%s\"", c, ps->tok == T_EOF ? "end of file" : ps->str.data);
	return next(ps);
}

/* An identifier token (no leading/trailing/double dots unless dotted_ok) */
static char *
take_ident(Parse *ps, bool dotted_ok)
{
	char	   *s;
	int			n = ps->str.len;

	if (ps->tok != T_IDENT)
	{
		perr(ps, "expected a name, found \"%s\"", ps->tok == T_EOF ? "end of file" : ps->str.data);
		return NULL;
	}
	if (!dotted_ok && strchr(ps->str.data, '.'))
	{
		perr(ps, "\"%s\" is not a simple name", ps->str.data);
		return NULL;
	}
	if (ps->str.data[n - 1] == '.' || strstr(ps->str.data, "..") ||
		(ps->str.data[0] == '.' && !dotted_ok))
	{
		perr(ps, "\"%s\" is not a valid name", ps->str.data);
		return NULL;
	}
	s = pstrdup(ps->str.data);
	if (!next(ps))
		return NULL;
	return s;
}

/*
 * Skips to the end of a statement: past the ';' at bracket depth 0, or
 * past a balanced { } block when one opens first (an option's aggregate
 * value, a service, an extend).
 */
static bool
skip_statement(Parse *ps)
{
	int			depth = 0;

	for (;;)
	{
		if (ps->tok == T_EOF)
			return perr(ps, "unexpected end of file");
		if (ps->tok == T_SYM)
		{
			char		c = ps->str.data[0];

			if (c == '{' || c == '[' || c == '(')
				depth++;
			else if (c == '}' || c == ']' || c == ')')
			{
				if (depth == 0)
					return perr(ps, "unbalanced \"%c\"", c);
				if (--depth == 0 && c == '}')
				{
					if (!next(ps))
						return false;
					if (is_sym(ps, ';'))
						return next(ps);
					return true;
				}
			}
			else if (c == ';' && depth == 0)
				return next(ps);
		}
		if (!next(ps))
			return false;
	}
}

/* A field number: a decimal, hex or octal integer in 1..2^29-1 */
static bool
take_number(Parse *ps, int64 *v, int64 lo, int64 hi)
{
	bool		neg = false;
	char	   *endp;
	long long	x;

	if (is_sym(ps, '-'))
	{
		neg = true;
		if (!next(ps))
			return false;
	}
	if (ps->tok != T_NUMBER)
		return perr(ps, "expected a number, found \"%s\"", ps->tok == T_EOF ? "end of file" : ps->str.data);
	errno = 0;
	x = strtoll(ps->str.data, &endp, 0);
	if (*endp != '\0' || errno != 0)
		return perr(ps, "\"%s\" is not an integer in range", ps->str.data);
	*v = neg ? -x : x;
	if (*v < lo || *v > hi)
		return perr(ps, "%lld is out of range", (long long) *v);
	return next(ps);
}

/* [ name = value, ... ] after a field or an enum value: skipped */
static bool
skip_field_options(Parse *ps)
{
	int			depth = 0;

	if (!is_sym(ps, '['))
		return true;
	for (;;)
	{
		if (ps->tok == T_EOF)
			return perr(ps, "unexpected end of file in field options");
		if (is_sym(ps, '[') || is_sym(ps, '{'))
			depth++;
		else if (is_sym(ps, ']') || is_sym(ps, '}'))
		{
			if (--depth == 0)
				return next(ps);
		}
		if (!next(ps))
			return false;
	}
}

static char *
join_name(const char *scope, const char *name)
{
	return scope[0] ? psprintf("%s.%s", scope, name) : pstrdup(name);
}

static PbType
scalar_type(const char *w)
{
	static const struct
	{
		const char *name;
		PbType		type;
	}			t[] = {
		{"double", PB_DOUBLE}, {"float", PB_FLOAT}, {"int64", PB_INT64}, {"uint64", PB_UINT64},
		{"int32", PB_INT32}, {"fixed64", PB_FIXED64}, {"fixed32", PB_FIXED32}, {"bool", PB_BOOL},
		{"string", PB_STRING}, {"bytes", PB_BYTES}, {"uint32", PB_UINT32}, {"sfixed32", PB_SFIXED32},
		{"sfixed64", PB_SFIXED64}, {"sint32", PB_SINT32}, {"sint64", PB_SINT64}
	};

	for (int i = 0; i < (int) lengthof(t); i++)
		if (strcmp(w, t[i].name) == 0)
			return t[i].type;
	return 0;
}

/* growable arrays of a message being parsed */
typedef struct MsgBuild
{
	PbMsg	   *m;
	int			capfields;
	int			capnested;
} MsgBuild;

static PbField *
add_field(MsgBuild *mb)
{
	PbMsg	   *m = mb->m;

	if (m->nfields == mb->capfields)
	{
		mb->capfields = mb->capfields ? mb->capfields * 2 : 8;
		m->fields = m->fields ? repalloc(m->fields, sizeof(PbField) * mb->capfields) :
			palloc(sizeof(PbField) * mb->capfields);
	}
	memset(&m->fields[m->nfields], 0, sizeof(PbField));
	m->fields[m->nfields].oneof = -1;
	return &m->fields[m->nfields++];
}

static void
add_nested(MsgBuild *mb, PbMsg *n)
{
	PbMsg	   *m = mb->m;

	if (m->nnested == mb->capnested)
	{
		mb->capnested = mb->capnested ? mb->capnested * 2 : 4;
		m->nested = m->nested ? repalloc(m->nested, sizeof(PbMsg *) * mb->capnested) :
			palloc(sizeof(PbMsg *) * mb->capnested);
	}
	m->nested[m->nnested++] = n;
}

static PbMsg *
new_message(Parse *ps, const char *full)
{
	PbMsg	   *m = palloc0(sizeof(PbMsg));

	m->full = (char *) full;
	if (!sym_add(&ps->syms, full, SYM_MESSAGE, m))
	{
		perr(ps, "\"%s\" is defined twice", full);
		return NULL;
	}
	if (ps->nmsgs == ps->capmsgs)
	{
		ps->capmsgs = ps->capmsgs ? ps->capmsgs * 2 : 16;
		ps->msgs = ps->msgs ? repalloc(ps->msgs, sizeof(PbMsg *) * ps->capmsgs) :
			palloc(sizeof(PbMsg *) * ps->capmsgs);
	}
	ps->msgs[ps->nmsgs++] = m;
	return m;
}

/* enum Name { ... }: the keyword already read */
static bool
parse_enum(Parse *ps, const char *scope)
{
	char	   *name = take_ident(ps, false);
	PbEnum	   *e;
	int			cap = 8;

	if (name == NULL)
		return false;
	e = palloc0(sizeof(PbEnum));
	e->full = join_name(scope, name);
	e->closed = !ps->proto3;
	e->names = palloc(sizeof(char *) * cap);
	e->numbers = palloc(sizeof(int32) * cap);
	if (!sym_add(&ps->syms, e->full, SYM_ENUM, e))
		return perr(ps, "\"%s\" is defined twice", e->full);
	if (!expect_sym(ps, '{'))
		return false;
	while (!is_sym(ps, '}'))
	{
		int64		v;

		if (is_sym(ps, ';'))
		{
			if (!next(ps))
				return false;
			continue;
		}
		if (is_word(ps, "option") || is_word(ps, "reserved"))
		{
			if (!skip_statement(ps))
				return false;
			continue;
		}
		if (e->n == cap)
		{
			cap *= 2;
			e->names = repalloc(e->names, sizeof(char *) * cap);
			e->numbers = repalloc(e->numbers, sizeof(int32) * cap);
		}
		if ((e->names[e->n] = take_ident(ps, false)) == NULL)
			return false;
		if (!expect_sym(ps, '=') || !take_number(ps, &v, PG_INT32_MIN, PG_INT32_MAX))
			return false;
		e->numbers[e->n++] = (int32) v;
		if (!skip_field_options(ps) || !expect_sym(ps, ';'))
			return false;
	}
	if (e->n == 0)
		return perr(ps, "enum \"%s\" has no values", e->full);
	if (ps->proto3 && e->numbers[0] != 0)
		return perr(ps, "the first value of proto3 enum \"%s\" must be 0", e->full);
	return next(ps);
}

static bool parse_message(Parse *ps, const char *scope, PbMsg **out, int depth);

/*
 * One field of a message or a oneof (oneof >= 0: no label).  The type
 * token is the current one.
 */
static bool
parse_field(Parse *ps, MsgBuild *mb, int oneof)
{
	PbField    *f;
	bool		repeated = false;
	bool		optional = false;
	bool		required = false;
	int64		number;

	if (oneof < 0)
	{
		if (is_word(ps, "repeated"))
			repeated = true;
		else if (is_word(ps, "optional"))
			optional = true;
		else if (is_word(ps, "required"))
		{
			if (ps->proto3)
				return perr(ps, "required fields are not allowed in proto3");
			required = true;
		}
		if ((repeated || optional || required) && !next(ps))
			return false;
	}
	if (is_word(ps, "group"))
		return perr(ps, "groups are not supported");
	if (is_word(ps, "map") && ps->p < ps->end)
	{
		/* map<K, V> name = n: a repeated nested entry message */
		const char *save_p = ps->p;
		int			save_line = ps->line;

		if (!next(ps))
			return false;
		if (is_sym(ps, '<'))
		{
			char	   *ktype,
					   *vtype,
					   *name,
					   *entry_name;
			PbMsg	   *entry;
			MsgBuild	eb = {0};
			PbField    *kf,
					   *vf;
			PbType		kt;

			if (repeated || optional || required || oneof >= 0)
				return perr(ps, "a map field cannot have a label or be in a oneof");
			if (!next(ps) || (ktype = take_ident(ps, false)) == NULL || !expect_sym(ps, ',') ||
				(vtype = take_ident(ps, true)) == NULL || !expect_sym(ps, '>') ||
				(name = take_ident(ps, false)) == NULL || !expect_sym(ps, '=') ||
				!take_number(ps, &number, 1, 536870911))
				return false;
			kt = scalar_type(ktype);
			if (kt == 0 || kt == PB_DOUBLE || kt == PB_FLOAT || kt == PB_BYTES)
				return perr(ps, "\"%s\" cannot be the key type of a map", ktype);
			/* MapEntry's name: the field's name in CamelCase + "Entry" */
			{
				StringInfoData en;
				bool		up = true;

				initStringInfo(&en);
				for (const char *c = name; *c; c++)
				{
					if (*c == '_')
					{
						up = true;
						continue;
					}
					appendStringInfoChar(&en, up && *c >= 'a' && *c <= 'z' ? *c - 'a' + 'A' : *c);
					up = false;
				}
				appendStringInfoString(&en, "Entry");
				entry_name = en.data;
			}
			entry = new_message(ps, join_name(mb->m->full, entry_name));
			if (entry == NULL)
				return false;
			entry->map_entry = true;
			entry->scope = mb->m->full;
			eb.m = entry;
			kf = add_field(&eb);
			kf->name = "key";
			kf->number = 1;
			kf->type = kt;
			vf = add_field(&eb);
			vf->name = "value";
			vf->number = 2;
			vf->type = scalar_type(vtype);
			if (vf->type == 0)
				vf->type_name = vtype;
			add_nested(mb, entry);
			f = add_field(mb);
			f->name = name;
			f->number = (int32) number;
			f->type = PB_MESSAGE;
			f->msg = entry;
			f->repeated = true;
			f->map = true;
			return skip_field_options(ps) && expect_sym(ps, ';');
		}
		/* a type named map */
		ps->p = save_p;
		ps->line = save_line;
		resetStringInfo(&ps->str);
		appendStringInfoString(&ps->str, "map");
		ps->tok = T_IDENT;
	}
	if (!ps->proto3 && oneof < 0 && !repeated && !optional && !required)
		return perr(ps, "a proto2 field needs a label (optional, required or repeated)");
	f = add_field(mb);
	{
		char	   *type = take_ident(ps, true);

		if (type == NULL)
			return false;
		f->type = scalar_type(type);
		if (f->type == 0)
			f->type_name = type;
	}
	if ((f->name = take_ident(ps, false)) == NULL || !expect_sym(ps, '=') ||
		!take_number(ps, &number, 1, 536870911))
		return false;
	if (number >= 19000 && number <= 19999)
		return perr(ps, "field numbers 19000 to 19999 are reserved by protobuf");
	f->number = (int32) number;
	f->repeated = repeated;
	f->oneof = oneof;
	/* presence: proto2 singular, proto3 optional, oneof members; messages too */
	f->presence = !repeated && (!ps->proto3 || optional || oneof >= 0);
	return skip_field_options(ps) && expect_sym(ps, ';');
}

/* The body of a message, after its '{', through its '}' */
static bool
parse_body(Parse *ps, MsgBuild *mb, int depth)
{
	while (!is_sym(ps, '}'))
	{
		if (ps->tok == T_EOF)
			return perr(ps, "message \"%s\" is not closed", mb->m->full);
		if (is_sym(ps, ';'))
		{
			if (!next(ps))
				return false;
		}
		else if (is_word(ps, "option") || is_word(ps, "reserved") ||
				 is_word(ps, "extensions") || is_word(ps, "extend"))
		{
			if (!skip_statement(ps))
				return false;
		}
		else if (is_word(ps, "message"))
		{
			PbMsg	   *n;

			if (!next(ps) || !parse_message(ps, mb->m->full, &n, depth + 1))
				return false;
			add_nested(mb, n);
		}
		else if (is_word(ps, "enum"))
		{
			if (!next(ps) || !parse_enum(ps, mb->m->full))
				return false;
		}
		else if (is_word(ps, "oneof"))
		{
			int			o = mb->m->noneofs++;

			if (!next(ps) || take_ident(ps, false) == NULL || !expect_sym(ps, '{'))
				return false;
			while (!is_sym(ps, '}'))
			{
				if (is_sym(ps, ';'))
				{
					if (!next(ps))
						return false;
				}
				else if (is_word(ps, "option"))
				{
					if (!skip_statement(ps))
						return false;
				}
				else if (ps->tok == T_EOF)
					return perr(ps, "a oneof is not closed");
				else if (!parse_field(ps, mb, o))
					return false;
			}
			if (!next(ps))
				return false;
		}
		else if (!parse_field(ps, mb, -1))
			return false;
	}
	return next(ps);
}

/* message Name { ... }: the keyword already read */
static bool
parse_message(Parse *ps, const char *scope, PbMsg **out, int depth)
{
	char	   *name;
	MsgBuild	mb = {0};

	if (depth >= KS_PB_MAX_DEPTH)
		return perr(ps, "messages are nested more than %d deep", KS_PB_MAX_DEPTH);
	if ((name = take_ident(ps, false)) == NULL)
		return false;
	mb.m = new_message(ps, join_name(scope, name));
	if (mb.m == NULL)
		return false;
	mb.m->scope = mb.m->full;
	*out = mb.m;
	return expect_sym(ps, '{') && parse_body(ps, &mb, depth);
}

static const KsPbFile *
find_file(const KsPbFile *files, int nfiles, const char *name)
{
	for (int i = 1; i < nfiles; i++)
		if (strcmp(files[i].name, name) == 0)
			return &files[i];
	for (int i = 0; i < (int) lengthof(builtin_files); i++)
		if (strcmp(builtin_files[i].name, name) == 0)
			return &builtin_files[i];
	return NULL;
}

/*
 * One file and, first, the files it imports (each once: done[] by index
 * into files, then the built-ins).  Top-level messages of the first file
 * go into tops.
 */
typedef struct FileSet
{
	const KsPbFile *files;
	int			nfiles;
	bool	   *done;			/* nfiles + built-ins */
} FileSet;

static bool
parse_file(Parse *ps, FileSet *fs, const KsPbFile *f, bool top, int depth)
{
	Parse		save;
	char	  **imports = NULL;
	int			nimports = 0;
	int			capimports = 0;
	char	   *pkg = "";

	if (depth > KS_PB_MAX_DEPTH)
		return perr(ps, "imports nest more than %d deep", KS_PB_MAX_DEPTH);
	save = *ps;
	ps->p = f->text;
	ps->end = f->text + (f->len ? f->len : strlen(f->text));
	ps->file = f->name;
	ps->line = 1;
	ps->proto3 = false;
	ps->package = "";
	if (!next(ps))
		return false;
	if (is_word(ps, "edition"))
		return perr(ps, "protobuf editions are not supported (syntax proto2 or proto3 only)");
	if (is_word(ps, "syntax"))
	{
		if (!next(ps) || !expect_sym(ps, '='))
			return false;
		if (ps->tok != T_STRING)
			return perr(ps, "expected the syntax as a string");
		if (strcmp(ps->str.data, "proto3") == 0)
			ps->proto3 = true;
		else if (strcmp(ps->str.data, "proto2") != 0)
			return perr(ps, "syntax \"%s\" is not supported (proto2 or proto3)", ps->str.data);
		if (!next(ps) || !expect_sym(ps, ';'))
			return false;
	}

	/*
	 * Imports may come after other statements: find them first, so that
	 * the imported names exist before this file's types resolve (they
	 * resolve at the end anyway; this only orders the reading).
	 */
	while (ps->tok != T_EOF)
	{
		if (is_sym(ps, ';'))
		{
			if (!next(ps))
				return false;
		}
		else if (is_word(ps, "import"))
		{
			if (!next(ps))
				return false;
			if (is_word(ps, "public") || is_word(ps, "weak"))
				if (!next(ps))
					return false;
			if (ps->tok != T_STRING)
				return perr(ps, "expected the imported file's name as a string");
			if (nimports == capimports)
			{
				capimports = capimports ? capimports * 2 : 4;
				imports = imports ? repalloc(imports, sizeof(char *) * capimports) :
					palloc(sizeof(char *) * capimports);
			}
			imports[nimports++] = pstrdup(ps->str.data);
			if (!next(ps) || !expect_sym(ps, ';'))
				return false;
		}
		else if (is_word(ps, "package"))
		{
			if (!next(ps) || (pkg = take_ident(ps, true)) == NULL || !expect_sym(ps, ';'))
				return false;
			if (pkg[0] == '.')
				return perr(ps, "a package name cannot start with a dot");
			ps->package = pkg;
			/* every prefix of the package is a name in scope */
			for (char *d = pkg; (d = strchr(d, '.')) != NULL; d++)
				sym_add(&ps->syms, pnstrdup(pkg, d - pkg), SYM_PACKAGE, NULL);
			if (!sym_add(&ps->syms, pkg, SYM_PACKAGE, NULL))
				return perr(ps, "package \"%s\" is also the name of a type", pkg);
		}
		else if (is_word(ps, "option") || is_word(ps, "service") || is_word(ps, "extend"))
		{
			if (!skip_statement(ps))
				return false;
		}
		else if (is_word(ps, "message"))
		{
			PbMsg	   *m;

			if (!next(ps) || !parse_message(ps, ps->package, &m, 0))
				return false;
			if (top)
			{
				if (ps->ntops == ps->captops)
				{
					ps->captops = ps->captops ? ps->captops * 2 : 8;
					ps->tops = ps->tops ? repalloc(ps->tops, sizeof(PbMsg *) * ps->captops) :
						palloc(sizeof(PbMsg *) * ps->captops);
				}
				ps->tops[ps->ntops++] = m;
			}
		}
		else if (is_word(ps, "enum"))
		{
			if (!next(ps) || !parse_enum(ps, ps->package))
				return false;
		}
		else
			return perr(ps, "unexpected \"%s\"", ps->str.data);
	}

	for (int i = 0; i < nimports; i++)
	{
		const char *name = imports[i];
		const KsPbFile *imp = find_file(fs->files, fs->nfiles, name);
		int			k;

		if (imp == NULL)
			return perr(ps, "import \"%s\" is neither a reference of the schema nor a well-known type", name);
		k = imp >= fs->files && imp < fs->files + fs->nfiles ? (int) (imp - fs->files) :
			fs->nfiles + (int) (imp - builtin_files);
		if (fs->done[k])
			continue;
		fs->done[k] = true;
		if (!parse_file(ps, fs, imp, false, depth + 1))
			return false;
	}
	ps->p = save.p;
	ps->end = save.end;
	ps->file = save.file;
	ps->line = save.line;
	ps->proto3 = save.proto3;
	ps->package = save.package;
	return true;
}

/*
 * A type name as written in scope (a message's full name): the message or
 * enum it names by protobuf's rules, or NULL.
 */
static Sym *
resolve(Parse *ps, const char *scope, const char *name)
{
	size_t		first;
	char	   *sc;

	if (name[0] == '.')
	{
		Sym		   *s = sym_get(&ps->syms, name + 1, strlen(name + 1));

		return s && s->kind != SYM_PACKAGE ? s : NULL;
	}
	first = strcspn(name, ".");
	sc = pstrdup(scope);
	for (;;)
	{
		char	   *cand = join_name(sc, name);
		char	   *dot;
		Sym		   *head = sym_get(&ps->syms, cand, strlen(sc) + (sc[0] ? 1 : 0) + first);

		if (head)
		{
			Sym		   *s = sym_get(&ps->syms, cand, strlen(cand));

			/* the first component found: the rest must be inside it */
			if (s && s->kind != SYM_PACKAGE)
				return s;
			if (head->kind != SYM_PACKAGE)
				return NULL;
		}
		if (sc[0] == '\0')
			return NULL;
		dot = strrchr(sc, '.');
		if (dot)
			*dot = '\0';
		else
			sc[0] = '\0';
	}
}

static int
by_number_cmp(const void *a, const void *b, void *arg)
{
	const PbMsg *m = arg;
	int32		x = m->fields[*(const int *) a].number;
	int32		y = m->fields[*(const int *) b].number;

	return x < y ? -1 : x > y;
}

static bool
finish_message(Parse *ps, PbMsg *m)
{
	static const char *const wrappers[] = {
		"DoubleValue", "FloatValue", "Int64Value", "UInt64Value", "Int32Value",
		"UInt32Value", "BoolValue", "StringValue", "BytesValue"
	};

	for (int i = 0; i < m->nfields; i++)
	{
		PbField    *f = &m->fields[i];

		if (f->type_name)
		{
			Sym		   *s = resolve(ps, m->scope, f->type_name);

			if (s == NULL)
				return perr(ps, "type \"%s\" of field \"%s.%s\" is not defined", f->type_name, m->full, f->name);
			if (s->kind == SYM_MESSAGE)
			{
				f->type = PB_MESSAGE;
				f->msg = s->val;
				if (f->msg->map_entry && !f->map)
					return perr(ps, "field \"%s.%s\" names a map entry type", m->full, f->name);
				if (!f->repeated)
					f->presence = true;
			}
			else
			{
				f->type = PB_ENUM;
				f->en = s->val;
			}
		}
		for (int j = 0; j < i; j++)
		{
			if (m->fields[j].number == f->number)
				return perr(ps, "field number %d is used twice in \"%s\"", f->number, m->full);
			if (strcmp(m->fields[j].name, f->name) == 0)
				return perr(ps, "field \"%s\" is declared twice in \"%s\"", f->name, m->full);
		}
	}
	m->by_number = palloc(sizeof(int) * Max(m->nfields, 1));
	for (int i = 0; i < m->nfields; i++)
		m->by_number[i] = i;
	qsort_arg(m->by_number, m->nfields, sizeof(int), by_number_cmp, m);
	if (strncmp(m->full, "google.protobuf.", 16) == 0)
	{
		const char *n = m->full + 16;

		if (strcmp(n, "Timestamp") == 0)
			m->wkt = PB_WKT_TIMESTAMP;
		else if (strcmp(n, "Duration") == 0)
			m->wkt = PB_WKT_DURATION;
		else if (strcmp(n, "Struct") == 0)
			m->wkt = PB_WKT_STRUCT;
		else if (strcmp(n, "Value") == 0)
			m->wkt = PB_WKT_VALUE;
		else if (strcmp(n, "ListValue") == 0)
			m->wkt = PB_WKT_LIST;
		for (int i = 0; i < (int) lengthof(wrappers); i++)
			if (strcmp(n, wrappers[i]) == 0)
				m->wkt = PB_WKT_WRAPPER;
		/* a file of that package's own that declares them otherwise */
		if (m->wkt != PB_WKT_NONE && m->wkt != PB_WKT_STRUCT &&
			(m->nfields < 1 || m->fields[0].number != 1))
			m->wkt = PB_WKT_NONE;
	}
	return true;
}

KsPbSchema *
ks_pb_schema_parse(const KsPbFile *files, int nfiles, char **errmsg)
{
	Parse		ps;
	FileSet		fs;
	KsPbSchema *s;
	size_t		total = 0;
	int			i;

	*errmsg = NULL;
	for (i = 0; i < nfiles; i++)
	{
		total += files[i].len ? files[i].len : strlen(files[i].text);
		if (files[i].len && memchr(files[i].text, '\0', files[i].len) != NULL)
		{
			*errmsg = psprintf("%s contains a NUL byte", files[i].name);
			return NULL;
		}
	}
	if (total > KS_PB_MAX_TEXT)
	{
		*errmsg = psprintf("the schema's files have %zu bytes, more than %d", total, KS_PB_MAX_TEXT);
		return NULL;
	}
	memset(&ps, 0, sizeof(ps));
	initStringInfo(&ps.str);
	fs.files = files;
	fs.nfiles = nfiles;
	fs.done = palloc0(sizeof(bool) * (nfiles + lengthof(builtin_files)));
	fs.done[0] = true;
	if (!parse_file(&ps, &fs, &files[0], true, 0))
	{
		*errmsg = ps.err;
		return NULL;
	}
	for (i = 0; i < ps.nmsgs; i++)
		if (!finish_message(&ps, ps.msgs[i]))
		{
			*errmsg = ps.err;
			return NULL;
		}
	if (ps.ntops == 0)
	{
		*errmsg = psprintf("%s declares no message", files[0].name);
		return NULL;
	}
	s = palloc0(sizeof(KsPbSchema));
	s->nmessages = ps.ntops;
	s->messages = ps.tops;
	s->text_len = total;
	pfree(ps.str.data);
	return s;
}
