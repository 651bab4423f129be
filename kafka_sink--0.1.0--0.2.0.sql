-- kafka_sink 0.1.0 -> 0.2.0
--
-- Every change to the catalog, views and SQL API since 0.1.0, in order.
-- The install script of 0.2.0 is built by the Makefile as the 0.1.0 script
-- followed by this one (as pg_cron keeps a base script plus updates), so a
-- fresh install and an upgrade run the same statements; test/e2e/upgrade.sh
-- checks that they end in the same schema.

\echo Use "ALTER EXTENSION kafka_sink UPDATE TO '0.2.0'" to load this file. \quit
