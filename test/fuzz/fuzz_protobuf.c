/*-------------------------------------------------------------------------
 *
 * fuzz_protobuf.c
 *		libFuzzer target for src/decode/protobuf_parse.c (the .proto parser)
 *		and src/decode/protobuf.c (the decoder of Confluent's Protobuf
 *		payloads), under ASan and UBSan.
 *
 * Input: byte 0 with its top bit set makes the rest a .proto text for the
 * parser (it must not crash; what it accepts, payloads taken from the
 * text's own bytes must decode without crashing); else byte 0 picks a
 * schema of the table below and the rest is a payload (message-index list
 * and message).
 *
 * Checks (abort() on a violation, a crash for libFuzzer):
 *	- every table schema compiles;
 *	- ks_pb_decode and ks_pb_to_json agree on whether a payload is valid;
 *	  on an error every slot is ABSENT and the detail set, on OK every
 *	  slot has a valid kind, a text unless ABSENT or NULL, no NUL inside a
 *	  STRING's length;
 *	- all memory of one input is freed with the input (fuzz_arena.h).
 *
 * The differential check against the official library is
 * test/fuzz/protobuf_diff.py (random schemas and messages); this target
 * is about what no library would write.  Built and run by
 * test/fuzz/run.sh (NAME=fuzz_protobuf).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres_fe.h"

#include <stdint.h>

#include "lib/stringinfo.h"

#include "protobuf.h"

int			LLVMFuzzerTestOneInput(const uint8_t *buf, size_t size);

static void
die(const char *what)
{
	fprintf(stderr, "fuzz_protobuf: invariant violated: %s\n", what);
	abort();
}

#include "fuzz_arena.h"

typedef struct FuzzSchema
{
	const char *main;
	const char *dep;			/* "dep.proto", or NULL */
	const char *paths[8];
} FuzzSchema;

static const FuzzSchema schemas[] = {
	{"syntax = \"proto3\"; package a.b;\n"
		"import \"google/protobuf/timestamp.proto\"; import \"google/protobuf/duration.proto\";\n"
		"import \"google/protobuf/wrappers.proto\"; import \"google/protobuf/struct.proto\";\n"
		"message Order { int64 id = 1; string name = 2; bytes raw = 3; double d = 4; float f = 5;\n"
		" sint32 s32 = 6; sint64 s64 = 7; fixed32 x32 = 8; fixed64 x64 = 9; sfixed32 y32 = 10;\n"
		" sfixed64 y64 = 11; bool ok = 12; uint32 u32 = 13; uint64 u64 = 14; int32 i32 = 15;\n"
		" enum Kind { A = 0; B = 1; C = -5; } Kind kind = 16; repeated Kind kinds = 17;\n"
		" repeated int32 nums = 18; repeated string tags = 19; map<string, Line> lines = 20;\n"
		" message Line { optional int64 qty = 1; Line child = 2; google.protobuf.Timestamp at = 3; }\n"
		" Line line = 21; google.protobuf.Timestamp ts = 22; google.protobuf.Duration dur = 23;\n"
		" google.protobuf.Int64Value disc = 24; google.protobuf.Struct attrs = 25;\n"
		" google.protobuf.Value v = 26; google.protobuf.ListValue lv = 27;\n"
		" oneof pick { string p1 = 28; Line p2 = 29; } map<int32, bool> flags = 30;\n"
		" oneof pick2 { int32 q1 = 31; string q2 = 32; } }\n"
		"message Other { repeated Order orders = 1; }\n",
		NULL,
	{"id", "name", "kind", "nums", "lines.x.qty", "line.child.qty", "ts", "attrs"}},
	{"syntax = \"proto2\";\n"
		"import \"dep.proto\";\n"
		"message P { required int32 id = 1; optional string s = 2; repeated sint64 v = 3 [packed = true];\n"
		" optional E e = 4; enum E { X = 1; Y = 2; } optional dep.D d = 5; extensions 100 to 200; }\n"
		"extend P { optional int32 ext = 100; }\n",
		"syntax = \"proto2\"; package dep; message D { optional D next = 1; optional bytes b = 2; }\n",
	{"id", "s", "v", "e", "d.next.b", "d", NULL}},
};

static void
check_slots(const KsWalkPaths *w, const KsSlotValue *out, bool ok, const char *detail)
{
	for (int i = 0; i < w->nslots; i++)
	{
		const KsSlotValue *v = &out[i];

		if (!ok)
		{
			if (v->kind != KS_SLOT_ABSENT || v->text != NULL)
				die("a slot is set after an error");
			continue;
		}
		if (v->kind > KS_SLOT_COMPOSITE)
			die("a slot has an unknown kind");
		if ((v->kind == KS_SLOT_ABSENT || v->kind == KS_SLOT_NULL) != (v->text == NULL))
			die("a slot's text does not match its kind");
	}
	if (!ok && detail == NULL)
		die("an error without a detail");
}

static void
decode_one(const KsPbSchema *s, const char *const *paths, const char *data, size_t len)
{
	KsWalkPaths w;
	KsSlotValue out[8];
	bool		pg_array[8] = {false, false, false, true, false, false, false, false};
	bool		number[8] = {false, false, true, false, false, false, false, false};
	char	   *detail = NULL;
	char	   *json;
	bool		ok;

	w.nslots = 0;
	w.paths = palloc0(sizeof(KsPath) * 8);
	for (int i = 0; i < 8 && paths[i]; i++)
	{
		char	   *t = pstrdup(paths[i]);

		w.paths[i].segs = palloc(sizeof(char *) * 8);
		for (char *seg = strtok(t, "."); seg; seg = strtok(NULL, "."))
			w.paths[i].segs[w.paths[i].nsegs++] = seg;
		w.nslots++;
	}
	memset(out, 0, sizeof(out));
	ok = ks_pb_decode(s, &w, pg_array, number, data, len, out, &detail);
	check_slots(&w, out, ok, detail);
	json = ks_pb_to_json(s, data, len, &detail);
	if ((json != NULL) != ok)
		die("ks_pb_to_json and ks_pb_decode disagree on a payload");
}

int
LLVMFuzzerTestOneInput(const uint8_t *buf, size_t size)
{
	char	   *err = NULL;

	if (size < 1)
		return 0;
	if (buf[0] & 0x80)
	{
		KsPbFile	f;
		KsPbSchema *s;
		char	   *text = pnstrdup((const char *) buf + 1, size - 1);

		f.name = "fuzz.proto";
		f.text = text;
		f.len = strlen(text);
		s = ks_pb_schema_parse(&f, 1, &err);
		if (s == NULL && err == NULL)
			die("a schema refused without a reason");
		if (s != NULL)
		{
			static const char *const paths[8] = {"a", "b.c", "id", NULL};

			/* the text's own bytes as payloads: arbitrary, cheap */
			decode_one(s, paths, (const char *) buf + 1, Min(size - 1, 64));
			decode_one(s, paths, "\0", 1);
		}
	}
	else
	{
		const FuzzSchema *fs = &schemas[buf[0] % lengthof(schemas)];
		KsPbFile	files[2];
		KsPbSchema *s;

		files[0].name = "main.proto";
		files[0].text = fs->main;
		files[0].len = strlen(fs->main);
		files[1].name = "dep.proto";
		files[1].text = fs->dep ? fs->dep : "";
		files[1].len = fs->dep ? strlen(fs->dep) : 0;
		s = ks_pb_schema_parse(files, fs->dep ? 2 : 1, &err);
		if (s == NULL)
		{
			fprintf(stderr, "%s\n", err);
			die("a table schema does not compile");
		}
		decode_one(s, fs->paths, (const char *) buf + 1, size - 1);
	}
	arena_reset();
	return 0;
}
