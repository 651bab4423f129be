/*-------------------------------------------------------------------------
 *
 * hosts.c
 *		kafka_sink.allowed_hosts: the hosts a pipeline owner may make the
 *		database server connect to.
 *
 * A pipeline owner names hosts the server then connects to from inside its
 * network: the brokers (bootstrap_servers, and produce()'s), the OAuth
 * token endpoint librdkafka POSTs the client secret to, the schema
 * registry libcurl GETs from.  Unchecked, that is server-side request
 * forgery: cloud metadata endpoints, internal admin ports.  The allow-list
 * is a superuser-only setting (PGC_SUSET), checked where a host enters (the
 * API, for an early and clear error) and again right before the host is
 * handed to librdkafka or libcurl (the catalog is data; a row written
 * behind the API, or a list narrowed since, is refused there).
 *
 * Patterns, comma-separated: "*" (any host), an exact host name, "*.suffix"
 * (any name under suffix, not suffix itself), an IPv4 or IPv6 literal, a
 * CIDR range, each with an optional ":port" (IPv6 in brackets then:
 * "[fd00::/8]:9092").  Names are compared as written, never resolved: an
 * IP range matches IP literals only, and a name under an allowed suffix is
 * trusted to resolve where its DNS says (see docs/design/trust-boundary.md).
 * Anything that does not parse as a plain host (user information, a
 * backslash, a percent sign, odd characters) is refused rather than
 * guessed at: a parser that disagrees with libcurl's is how allow-lists
 * are bypassed.
 *
 * Owns: parsing and matching the list and the hosts.  Must not: connect.
 *
 *-------------------------------------------------------------------------
 */
#include "kafka_sink.h"
#include "hosts.h"

#include <arpa/inet.h>

#include "utils/builtins.h"

char	   *ks_allowed_hosts = NULL;

#define KS_HOST_MAX 255

typedef enum HostPatKind
{
	PAT_ANY,
	PAT_NAME,
	PAT_SUFFIX,					/* name holds ".example.com" */
	PAT_NET						/* an address and a prefix length */
} HostPatKind;

typedef struct HostPat
{
	HostPatKind kind;
	char		name[KS_HOST_MAX + 2];
	int			family;			/* AF_INET, AF_INET6 */
	unsigned char addr[16];
	int			bits;
	int			port;			/* 0: any */
} HostPat;

typedef struct Host
{
	char		name[KS_HOST_MAX + 1];	/* lower case; an IPv6 without brackets */
	int			family;			/* 0: a name */
	unsigned char addr[16];
	int			port;
} Host;

static bool
name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		(c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_';
}

/* A host name as DNS and /etc/hosts know them: letters, digits, . - _ */
static bool
copy_name(char *dst, const char *s, size_t len)
{
	if (len == 0 || len > KS_HOST_MAX)
		return false;
	for (size_t i = 0; i < len; i++)
	{
		if (!name_char(s[i]))
			return false;
		dst[i] = pg_ascii_tolower((unsigned char) s[i]);
	}
	dst[len] = '\0';
	/* "host." and "host" are the same host */
	if (len > 1 && dst[len - 1] == '.')
		dst[len - 1] = '\0';
	return dst[0] != '.';
}

static bool
parse_port(const char *s, size_t len, int *port)
{
	int			v = 0;

	if (len == 0 || len > 5)
		return false;
	for (size_t i = 0; i < len; i++)
	{
		if (s[i] < '0' || s[i] > '9')
			return false;
		v = v * 10 + (s[i] - '0');
	}
	if (v < 1 || v > 65535)
		return false;
	*port = v;
	return true;
}

/* An IP literal of len bytes at s into family/addr; false if it is none. */
static bool
parse_ip(const char *s, size_t len, int *family, unsigned char *addr)
{
	char		buf[64];

	if (len == 0 || len >= sizeof(buf))
		return false;
	memcpy(buf, s, len);
	buf[len] = '\0';
	if (inet_pton(AF_INET, buf, addr) == 1)
	{
		*family = AF_INET;
		return true;
	}
	if (inet_pton(AF_INET6, buf, addr) == 1)
	{
		*family = AF_INET6;
		return true;
	}
	return false;
}

/*
 * Splits "host[:port]", "[v6][:port]" or a bare IPv6 (two colons or more,
 * no port) into the host's bytes and the port's; *port_s NULL: no port.
 */
static bool
split_host_port(const char *s, size_t len, const char **host, size_t *hlen,
				const char **port_s, size_t *plen, bool *bracketed)
{
	const char *colon;
	int			ncolons = 0;

	*port_s = NULL;
	*plen = 0;
	*bracketed = false;
	if (len > 0 && s[0] == '[')
	{
		const char *close = memchr(s, ']', len);

		if (close == NULL)
			return false;
		*host = s + 1;
		*hlen = close - s - 1;
		*bracketed = true;
		if (close + 1 == s + len)
			return true;
		if (close[1] != ':')
			return false;
		*port_s = close + 2;
		*plen = s + len - close - 2;
		return true;
	}
	for (size_t i = 0; i < len; i++)
		if (s[i] == ':')
			ncolons++;
	*host = s;
	*hlen = len;
	if (ncolons != 1)
		return true;
	colon = memchr(s, ':', len);
	*hlen = colon - s;
	*port_s = colon + 1;
	*plen = s + len - colon - 1;
	return true;
}

/* One host as a pipeline names it; default_port when it has none. */
static bool
parse_host(const char *s, size_t len, int default_port, Host *h)
{
	const char *hs;
	const char *ps;
	size_t		hlen;
	size_t		plen;
	bool		bracketed;

	memset(h, 0, sizeof(*h));
	if (!split_host_port(s, len, &hs, &hlen, &ps, &plen, &bracketed))
		return false;
	if (ps)
	{
		if (!parse_port(ps, plen, &h->port))
			return false;
	}
	else
		h->port = default_port;
	if (parse_ip(hs, hlen, &h->family, h->addr))
	{
		if (bracketed != (h->family == AF_INET6))
			return false;
		memcpy(h->name, hs, hlen);
		h->name[hlen] = '\0';
		return true;
	}
	if (bracketed)
		return false;
	return copy_name(h->name, hs, hlen);
}

/* One entry of kafka_sink.allowed_hosts. */
static bool
parse_pattern(const char *s, size_t len, HostPat *p)
{
	const char *hs;
	const char *ps;
	size_t		hlen;
	size_t		plen;
	bool		bracketed;
	const char *slash;

	memset(p, 0, sizeof(*p));
	if (!split_host_port(s, len, &hs, &hlen, &ps, &plen, &bracketed))
		return false;
	if (ps && !parse_port(ps, plen, &p->port))
		return false;
	if (!bracketed && hlen == 1 && hs[0] == '*')
	{
		p->kind = PAT_ANY;
		return true;
	}
	slash = memchr(hs, '/', hlen);
	if (slash)
	{
		int			bits = 0;
		size_t		blen = hs + hlen - slash - 1;

		if (!parse_ip(hs, slash - hs, &p->family, p->addr) || blen == 0 || blen > 3)
			return false;
		for (size_t i = 0; i < blen; i++)
		{
			if (slash[1 + i] < '0' || slash[1 + i] > '9')
				return false;
			bits = bits * 10 + (slash[1 + i] - '0');
		}
		if (bits > (p->family == AF_INET ? 32 : 128))
			return false;
		p->kind = PAT_NET;
		p->bits = bits;
		return true;
	}
	if (parse_ip(hs, hlen, &p->family, p->addr))
	{
		p->kind = PAT_NET;
		p->bits = p->family == AF_INET ? 32 : 128;
		return true;
	}
	if (bracketed)
		return false;
	if (hlen > 2 && hs[0] == '*' && hs[1] == '.')
	{
		p->kind = PAT_SUFFIX;
		p->name[0] = '.';
		return copy_name(p->name + 1, hs + 2, hlen - 2);
	}
	p->kind = PAT_NAME;
	return copy_name(p->name, hs, hlen);
}

static bool
pattern_matches(const HostPat *p, const Host *h)
{
	if (p->port != 0 && p->port != h->port)
		return false;
	switch (p->kind)
	{
		case PAT_ANY:
			return true;
		case PAT_NAME:
			return h->family == 0 && strcmp(p->name, h->name) == 0;
		case PAT_SUFFIX:
			{
				size_t		n = strlen(h->name);
				size_t		sn = strlen(p->name);

				return h->family == 0 && n > sn && strcmp(h->name + n - sn, p->name) == 0;
			}
		case PAT_NET:
			{
				int			full = p->bits / 8;
				int			rest = p->bits % 8;

				if (h->family != p->family)
					return false;
				if (memcmp(p->addr, h->addr, full) != 0)
					return false;
				return rest == 0 ||
					((p->addr[full] ^ h->addr[full]) & (0xff << (8 - rest)) & 0xff) == 0;
			}
	}
	return false;
}

static bool
is_sep(char c)
{
	return c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/*
 * Calls fn for each separated item of list (commas and white space);
 * stops and returns false when fn does.
 */
static bool
for_each_item(const char *list, bool (*fn) (const char *s, size_t len, void *arg), void *arg)
{
	const char *s = list;

	while (*s)
	{
		const char *e;

		if (is_sep(*s))
		{
			s++;
			continue;
		}
		for (e = s; *e && !is_sep(*e); e++)
			;
		if (!fn(s, e - s, arg))
			return false;
		s = e;
	}
	return true;
}

typedef struct MatchArg
{
	const Host *host;
	bool		matched;
	bool		invalid;
} MatchArg;

static bool
match_item(const char *s, size_t len, void *arg)
{
	MatchArg   *m = arg;
	HostPat		p;

	if (!parse_pattern(s, len, &p))
	{
		m->invalid = true;
		return false;
	}
	if (pattern_matches(&p, m->host))
	{
		m->matched = true;
		return false;
	}
	return true;
}

static bool
check_item(const char *s, size_t len, void *arg)
{
	HostPat		p;

	if (parse_pattern(s, len, &p))
		return true;
	*(const char **) arg = pnstrdup(s, len);
	return false;
}

bool
ks_allowed_hosts_check(char **newval, void **extra, GucSource source)
{
	const char *bad = NULL;

	(void) extra;
	(void) source;
	if (*newval == NULL)
		return true;
	if (!for_each_item(*newval, check_item, &bad))
	{
		GUC_check_errdetail("\"%s\" is not a host name, \"*.\" followed by a domain, an IP address, a CIDR range or \"*\", each with an optional \":port\".",
							bad);
		return false;
	}
	return true;
}

static void
refuse(const char *what, const Host *h)
{
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("%s names host \"%s%s%s:%d\", which kafka_sink.allowed_hosts does not allow",
					what, h->family == AF_INET6 ? "[" : "", h->name,
					h->family == AF_INET6 ? "]" : "", h->port),
			 errdetail("A pipeline makes the database server connect only to the hosts a superuser allowed."),
			 errhint("A superuser can add the host to kafka_sink.allowed_hosts (ALTER SYSTEM SET kafka_sink.allowed_hosts = '...'; SELECT pg_reload_conf()).")));
}

static void
check_host(const char *what, const Host *h)
{
	MatchArg	m = {h, false, false};

	for_each_item(ks_allowed_hosts ? ks_allowed_hosts : "", match_item, &m);
	if (m.invalid)				/* the check hook lets no such value in */
		elog(ERROR, "kafka_sink.allowed_hosts does not parse");
	if (!m.matched)
		refuse(what, h);
}

/* s NULL: not shown (a URL's authority may hold a password) */
static void
invalid_host(const char *what, const char *s, size_t len)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 s ? errmsg("%s has an invalid host \"%.*s\"", what, (int) Min(len, 300), s) :
			 errmsg("%s has an invalid host", what),
			 errhint("A host is a name of letters, digits, \".\", \"-\" and \"_\", an IPv4 address or an IPv6 address in brackets, with an optional \":port\".")));
}

typedef struct BrokerArg
{
	const char *what;
	int			n;
} BrokerArg;

static bool
check_broker(const char *s, size_t len, void *arg)
{
	BrokerArg  *b = arg;
	const char *proto = NULL;
	Host		h;

	/* librdkafka takes "SASL_SSL://host:9093" as well as "host:9093" */
	for (size_t i = 0; i + 3 <= len; i++)
		if (memcmp(s + i, "://", 3) == 0)
		{
			proto = s + i;
			break;
		}
	if (proto)
	{
		len -= proto + 3 - s;
		s = proto + 3;
	}
	if (!parse_host(s, len, 9092, &h))
		invalid_host(b->what, s, len);
	check_host(b->what, &h);
	b->n++;
	return true;
}

void
ks_hosts_check_brokers(const char *what, const char *servers)
{
	BrokerArg	b = {what, 0};

	if (servers == NULL)
		return;
	for_each_item(servers, check_broker, &b);
	if (b.n == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s names no broker", what),
				 errhint("Name brokers as host:port, separated by commas.")));
}

void
ks_hosts_check_url(const char *what, const char *url)
{
	const char *a;
	size_t		alen;
	Host		h;
	int			default_port;

	if (pg_strncasecmp(url, "https://", 8) == 0)
	{
		a = url + 8;
		default_port = 443;
	}
	else if (pg_strncasecmp(url, "http://", 7) == 0)
	{
		a = url + 7;
		default_port = 80;
	}
	else
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s is not an http:// or https:// URL", what)));
	alen = strcspn(a, "/?#");
	if (!parse_host(a, alen, default_port, &h))
		invalid_host(what, NULL, 0);
	check_host(what, &h);
}
