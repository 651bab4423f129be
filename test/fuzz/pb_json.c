/*-------------------------------------------------------------------------
 *
 * pb_json.c
 *		A command-line driver of src/decode/protobuf*.c for
 *		test/fuzz/protobuf_diff.py: compiles a .proto file set and prints
 *		each payload's message as JSON (ks_pb_to_json) and the slots of
 *		some paths (ks_pb_decode), one line each.
 *
 *	pb_json DIR PAYLOADS [PATH ...]
 *
 * DIR holds schema.proto and the files it imports (by their relative
 * names, listed in DIR/imports, one a line).  PAYLOADS is a file of
 * payloads, each a 4-byte big-endian length then the bytes (what follows
 * the magic byte and the schema id).  Output per payload: "OK <json>" or
 * "ERR <detail>", then one line per PATH: "<kind> <text>".  A schema that
 * does not compile: "SCHEMA <error>" and exit 2.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres_fe.h"

#include "lib/stringinfo.h"

#include "protobuf.h"

static char *
slurp(const char *path, size_t *len)
{
	FILE	   *f = fopen(path, "rb");
	StringInfoData b;
	char		buf[65536];
	size_t		n;

	if (f == NULL)
	{
		fprintf(stderr, "pb_json: cannot open %s\n", path);
		exit(1);
	}
	initStringInfo(&b);
	while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
		appendBinaryStringInfo(&b, buf, (int) n);
	fclose(f);
	*len = b.len;
	return b.data;
}

int
main(int argc, char **argv)
{
	KsPbFile	files[64];
	int			nfiles = 1;
	size_t		len,
				plen;
	char	   *err;
	KsPbSchema *s;
	char	   *payloads;
	KsWalkPaths w;
	static const char *const kinds[] = {"ABSENT", "NULL", "STRING", "SCALAR", "COMPOSITE", "DATUM"};

	if (argc < 3)
	{
		fprintf(stderr, "usage: pb_json DIR PAYLOADS [PATH ...]\n");
		return 1;
	}
	files[0].name = "schema.proto";
	files[0].text = slurp(psprintf("%s/schema.proto", argv[1]), &len);
	files[0].len = len;
	{
		FILE	   *f = fopen(psprintf("%s/imports", argv[1]), "r");
		char		line[1024];

		while (f && fgets(line, sizeof(line), f) && nfiles < 64)
		{
			line[strcspn(line, "\n")] = '\0';
			if (line[0] == '\0')
				continue;
			files[nfiles].name = pstrdup(line);
			files[nfiles].text = slurp(psprintf("%s/%s", argv[1], line), &len);
			files[nfiles].len = len;
			nfiles++;
		}
		if (f)
			fclose(f);
	}
	s = ks_pb_schema_parse(files, nfiles, &err);
	if (s == NULL)
	{
		printf("SCHEMA %s\n", err);
		return 2;
	}
	w.nslots = argc - 3;
	w.paths = palloc0(sizeof(KsPath) * Max(w.nslots, 1));
	for (int i = 0; i < w.nslots; i++)
	{
		/* dot-separated segments (jsonwalk.c's parser, without escapes) */
		char	   *t = pstrdup(argv[3 + i]);

		w.paths[i].segs = palloc(sizeof(char *) * (strlen(t) + 1));
		for (char *seg = strtok(t, "."); seg; seg = strtok(NULL, "."))
			w.paths[i].segs[w.paths[i].nsegs++] = seg;
	}
	payloads = slurp(argv[2], &plen);
	for (size_t off = 0; off + 4 <= plen;)
	{
		const unsigned char *h = (const unsigned char *) payloads + off;
		size_t		n = ((size_t) h[0] << 24) | (h[1] << 16) | (h[2] << 8) | h[3];
		char	   *json;
		KsSlotValue *out = palloc0(sizeof(KsSlotValue) * Max(w.nslots, 1));

		off += 4;
		if (off + n > plen)
		{
			fprintf(stderr, "pb_json: payload file cut off\n");
			return 1;
		}
		json = ks_pb_to_json(s, payloads + off, n, &err);
		if (json)
			printf("OK %s\n", json);
		else
			printf("ERR %s\n", err);
		if (!ks_pb_decode(s, &w, NULL, NULL, payloads + off, n, out, &err))
		{
			if (json)
			{
				fprintf(stderr, "pb_json: ks_pb_decode refused what ks_pb_to_json read: %s\n", err);
				return 1;
			}
		}
		for (int i = 0; i < w.nslots; i++)
			printf("%s %s\n", kinds[out[i].kind], out[i].text ? out[i].text : "");
		off += n;
	}
	return 0;
}
