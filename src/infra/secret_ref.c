/*-------------------------------------------------------------------------
 *
 * secret_ref.c
 *		Secrets by reference: a secret option (a SASL password, a key
 *		password, an OAuth client secret, the registry's user:password) given
 *		as {"env": "NAME"} or {"file": "/path"} instead of its value.
 *
 * A literal secret is written in the statement that sets it, so it can
 * reach the server log (a failing statement's text, log_statement), the
 * catalog and a dump.  A reference keeps only the variable's name or the
 * file's path there; the worker reads the value at each client build (the
 * worker's start, a restart after a failure, alter_pipeline), so a changed
 * file takes effect without restarting anything but the pipeline.  The
 * environment of a running postmaster never changes: an env reference
 * changes value only when the server restarts.
 *
 * Who may use which: an env reference names a variable a superuser listed
 * in kafka_sink.secret_env_allowed (PGC_SIGHUP: only the server's own
 * setting counts, the one the worker sees); a file reference needs an
 * owner who may have the server read its files (superuser or
 * pg_read_server_files, the bar of the path options).  Both are checked
 * where the reference is defined and again at every resolution, since the
 * setting and the roles change.  No ERROR here shows a value: they name
 * the option and the variable or the path.
 *
 * Owns: the form of a reference, its checks, reading the value.  Must not:
 * decide which options are secrets (kafka_options.c), hand a value to a
 * client (consumer.c, producer.c, schema_registry.c do).
 *
 *-------------------------------------------------------------------------
 */
#include "kafka_sink.h"
#include "secret_ref.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "access/xact.h"
#include "catalog/pg_authid.h"
#include "miscadmin.h"
#include "port.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

char	   *ks_secret_env_allowed = NULL;

/* the largest secret file read: a PEM key with its chain fits */
#define KS_SECRET_FILE_MAX	(64 * 1024)

/* A portable environment variable name: letters, digits, _, not a digit first. */
static bool
env_name_ok(const char *name)
{
	size_t		len = strlen(name);

	if (len == 0 || len > 255 || (name[0] >= '0' && name[0] <= '9'))
		return false;
	for (const char *c = name; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
			  (*c >= '0' && *c <= '9') || *c == '_'))
			return false;
	return true;
}

/* An absolute path as canonicalize_path leaves it, without "..". */
static bool
path_ok(const char *path)
{
	char	   *canon;
	bool		ok;

	if (path[0] != '/' || strlen(path) >= MAXPGPATH)
		return false;
	canon = pstrdup(path);
	canonicalize_path(canon);
	ok = strcmp(canon, path) == 0 && path_contains_parent_reference(path) == false;
	pfree(canon);
	return ok;
}

bool
ks_secret_env_allowed_check(char **newval, void **extra, GucSource source)
{
	char	   *list = pstrdup(*newval ? *newval : "");
	char	   *save = NULL;

	(void) extra;
	(void) source;
	for (char *tok = strtok_r(list, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save))
		if (!env_name_ok(tok))
		{
			GUC_check_errdetail("\"%s\" is not an environment variable name.", tok);
			GUC_check_errhint("List names of letters, digits and underscores, separated by commas.");
			pfree(list);
			return false;
		}
	pfree(list);
	return true;
}

static bool
env_allowed(const char *name)
{
	char	   *list = pstrdup(ks_secret_env_allowed ? ks_secret_env_allowed : "");
	char	   *save = NULL;
	bool		found = false;

	for (char *tok = strtok_r(list, ", ", &save); tok && !found; tok = strtok_r(NULL, ", ", &save))
		found = strcmp(tok, name) == 0;
	pfree(list);
	return found;
}

static void
malformed(const char *what, const char *option, const char *hint)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid reference for %s \"%s\"", what, option),
			 errdetail("A secret option takes a string, {\"env\": \"NAME\"} or {\"file\": \"/path\"}."),
			 errhint("%s", hint)));
}

void
ks_secret_ref_parse(JsonbContainer *jc, const char *what, const char *option,
					KsSecretRef *ref, char **arg)
{
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	int			npairs = 0;
	char	   *key = NULL;

	*ref = KS_REF_NONE;
	*arg = NULL;
	if (!JsonContainerIsObject(jc))
		malformed(what, option, "Use a JSON object with one key.");
	it = JsonbIteratorInit(jc);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		if (tok == WJB_KEY)
		{
			key = pnstrdup(v.val.string.val, v.val.string.len);
			npairs++;
		}
		else if (tok == WJB_VALUE)
		{
			if (v.type != jbvString)
				malformed(what, option, "The variable name or the path is a JSON string.");
			if (memchr(v.val.string.val, '\0', v.val.string.len) != NULL)
				malformed(what, option, "The variable name or the path contains a NUL character.");
			*arg = pnstrdup(v.val.string.val, v.val.string.len);
			if (strcmp(key, "env") == 0)
				*ref = KS_REF_ENV;
			else if (strcmp(key, "file") == 0)
				*ref = KS_REF_FILE;
			else
				malformed(what, option, "The key is \"env\" or \"file\".");
		}
	}
	if (npairs != 1)
		malformed(what, option, "Use exactly one key, \"env\" or \"file\".");
	if (*ref == KS_REF_ENV && !env_name_ok(*arg))
		malformed(what, option, "An environment variable name has letters, digits and underscores, and does not start with a digit.");
	if (*ref == KS_REF_FILE && !path_ok(*arg))
		malformed(what, option, "A file is given by its absolute path, without \".\", \"..\", \"//\" or a trailing \"/\".");
}

void
ks_secret_ref_parse_text(const char *json, const char *what, const char *option,
						 KsSecretRef *ref, char **arg)
{
	Jsonb	   *jb = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(json)));

	ks_secret_ref_parse(&jb->root, what, option, ref, arg);
}

/*
 * Whether owner is a superuser, or may also have the server read files
 * (files: the same bar as pg_read_file and COPY FROM a file).  Syscache
 * lookups need a transaction; a worker builds its clients outside one.
 */
static bool
owner_check(Oid owner, bool files)
{
	MemoryContext cxt = CurrentMemoryContext;
	bool		started = false;
	bool		result;

	if (!IsTransactionState())
	{
		StartTransactionCommand();
		started = true;
	}
	result = superuser_arg(owner) ||
		(files && has_privs_of_role(owner, ROLE_PG_READ_SERVER_FILES));
	if (started)
		CommitTransactionCommand();
	MemoryContextSwitchTo(cxt);
	return result;
}

bool
ks_owner_reads_server_files(Oid owner)
{
	return owner_check(owner, true);
}

bool
ks_owner_is_superuser(Oid owner)
{
	return owner_check(owner, false);
}

void
ks_secret_ref_check(const char *what, const char *option,
					KsSecretRef ref, const char *arg, Oid owner)
{
	switch (ref)
	{
		case KS_REF_NONE:
			return;
		case KS_REF_ENV:
			if (arg == NULL || !env_name_ok(arg))
				malformed(what, option, "An environment variable name has letters, digits and underscores, and does not start with a digit.");
			if (!env_allowed(arg))
				ereport(ERROR,
						(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
						 errmsg("environment variable \"%s\" of %s \"%s\" is not allowed", arg, what, option),
						 errdetail("Pipelines read only the variables listed in kafka_sink.secret_env_allowed."),
						 errhint("A superuser can add it: ALTER SYSTEM SET kafka_sink.secret_env_allowed = '%s'; SELECT pg_reload_conf();", arg)));
			return;
		case KS_REF_FILE:
			if (arg == NULL || !path_ok(arg))
				malformed(what, option, "A file is given by its absolute path, without \".\", \"..\", \"//\" or a trailing \"/\".");
			if (!ks_owner_reads_server_files(owner))
				ereport(ERROR,
						(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
						 errmsg("%s \"%s\" names a file on the database server", what, option),
						 errdetail("Only superusers and members of pg_read_server_files may have the server read its files for a pipeline."),
						 errhint("Use {\"env\": \"NAME\"}, or ask a superuser to grant pg_read_server_files.")));
			return;
	}
	malformed(what, option, "Use exactly one key, \"env\" or \"file\".");
}

/* The content of a secret file, without one trailing newline. */
static char *
read_secret_file(const char *what, const char *option, const char *path)
{
	int			fd;
	struct stat st = {0};
	char	   *buf;
	ssize_t		n;
	size_t		len = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not open file \"%s\" of %s \"%s\": %m", path, what, option),
				 errhint("The file is read by the database server's operating system user at each start of the pipeline.")));
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > KS_SECRET_FILE_MAX)
	{
		int			save = errno;
		bool		regular = S_ISREG(st.st_mode);

		close(fd);
		errno = save;
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("file \"%s\" of %s \"%s\" is not a regular file of at most %d bytes",
						path, what, option, KS_SECRET_FILE_MAX),
				 regular ? 0 : errdetail("It is a directory, a device or a socket.")));
	}
	buf = palloc(KS_SECRET_FILE_MAX + 2);
	while ((n = read(fd, buf + len, KS_SECRET_FILE_MAX + 1 - len)) > 0)
		len += n;
	if (n < 0)
	{
		int			save = errno;

		close(fd);
		errno = save;
		explicit_bzero(buf, KS_SECRET_FILE_MAX + 2);
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not read file \"%s\" of %s \"%s\": %m", path, what, option)));
	}
	close(fd);
	buf[len] = '\0';
	if (len > KS_SECRET_FILE_MAX || memchr(buf, '\0', len) != NULL)
	{
		explicit_bzero(buf, KS_SECRET_FILE_MAX + 2);
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("file \"%s\" of %s \"%s\" is not a text of at most %d bytes",
						path, what, option, KS_SECRET_FILE_MAX)));
	}
	if (len > 0 && buf[len - 1] == '\n')
		buf[--len] = '\0';
	if (len > 0 && buf[len - 1] == '\r')
		buf[--len] = '\0';
	return buf;
}

char *
ks_secret_resolve(const char *what, const char *option,
				  KsSecretRef ref, const char *arg, Oid owner)
{
	char	   *value;

	ks_secret_ref_check(what, option, ref, arg, owner);
	if (ref == KS_REF_ENV)
	{
		const char *env = getenv(arg);

		if (env == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_OBJECT),
					 errmsg("environment variable \"%s\" of %s \"%s\" is not set", arg, what, option),
					 errdetail("The pipeline reads it from the environment the PostgreSQL server was started with."),
					 errhint("Set it in the server's environment (for example its systemd unit) and restart the server.")));
		value = pstrdup(env);
	}
	else
		value = read_secret_file(what, option, arg);
	if (value[0] == '\0')
	{
		pfree(value);
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 ref == KS_REF_ENV ?
				 errmsg("environment variable \"%s\" of %s \"%s\" is empty", arg, what, option) :
				 errmsg("file \"%s\" of %s \"%s\" is empty", arg, what, option)));
	}
	return value;
}

char *
ks_option_value(const KsOption *o, const char *what, Oid owner)
{
	if (o->ref == KS_REF_NONE)
		return o->value;
	return ks_secret_resolve(what, o->name, o->ref, o->value, owner);
}

char	  **
ks_option_values(List *options, const char *what, Oid owner)
{
	char	  **values = palloc0(sizeof(char *) * (list_length(options) + 1));
	ListCell   *lc;

	foreach(lc, options)
		values[foreach_current_index(lc)] = ks_option_value(lfirst(lc), what, owner);
	return values;
}

void
ks_secret_free(const KsOption *o, char *value)
{
	if (value == NULL || value == o->value)
		return;
	explicit_bzero(value, strlen(value));
	pfree(value);
}
