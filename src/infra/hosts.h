/*-------------------------------------------------------------------------
 *
 * hosts.h
 *		Which hosts a pipeline may make the server connect to
 *		(kafka_sink.allowed_hosts, src/infra/hosts.c).
 *
 *		Owns: kafka_sink.allowed_hosts's variable and check hook, and the
 *		checks of brokers and URLs against it.  Must not: connect (the
 *		clients do, after asking here).
 *
 *-------------------------------------------------------------------------
 */
#ifndef KS_HOSTS_H
#define KS_HOSTS_H

#include "postgres.h"

#include "utils/guc.h"

extern char *ks_allowed_hosts;

/* the GUC's check hook: the list must parse */
extern bool ks_allowed_hosts_check(char **newval, void **extra, GucSource source);

/*
 * Raise an ERROR unless every broker of servers (librdkafka's
 * bootstrap.servers syntax: [proto://]host[:port], comma-separated) is
 * allowed.  what names the setting in the message, e.g. "bootstrap_servers".
 */
extern void ks_hosts_check_brokers(const char *what, const char *servers);

/* The same for the host and port of an http(s) URL. */
extern void ks_hosts_check_url(const char *what, const char *url);

#endif							/* KS_HOSTS_H */
