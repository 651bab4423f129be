-- kafka_sink 0.1.0 -> 0.2.0
--
-- Every change to the catalog, views and SQL API since 0.1.0, in order.
-- The install script of 0.2.0 is built by the Makefile as the 0.1.0 script
-- followed by this one (as pg_cron keeps a base script plus updates), so a
-- fresh install and an upgrade run the same statements; test/e2e/upgrade.sh
-- checks that they end in the same schema.

\echo Use "ALTER EXTENSION kafka_sink UPDATE TO '0.2.0'" to load this file. \quit

-- ---- PostgreSQL 16-18: deterministic messages ----
-- _bronze_table listed the missing columns in whatever order the anti-join
-- produced; on 16+ that is not the array's order.
CREATE OR REPLACE FUNCTION kafka_sink._bronze_table(name text)
RETURNS regclass
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    rel regclass := to_regclass(name);
    parsed text[];
    missing text;
BEGIN
    IF rel IS NULL THEN
        parsed := parse_ident(name);
        IF cardinality(parsed) <> 2 THEN
            RAISE EXCEPTION 'bronze table name "%" must be schema-qualified', name
                USING ERRCODE = 'invalid_name', HINT = 'Pass bronze => ''bronze.orders_raw''.';
        END IF;
        -- The key leads with the integers and compares the topic bytewise:
        -- a text first column makes every btree comparison of the insert
        -- path a collation-aware string comparison (docs/performance.md).
        EXECUTE format('CREATE TABLE %I.%I (
                            topic      text COLLATE "C" NOT NULL,
                            partition  integer NOT NULL,
                            "offset"   bigint NOT NULL,
                            ts         timestamptz,
                            key        bytea,
                            value      bytea,
                            headers    jsonb,
                            batch_id   bigint NOT NULL,
                            landed_at  timestamptz NOT NULL DEFAULT now(),
                            PRIMARY KEY (partition, "offset", topic))', parsed[1], parsed[2]);
        rel := format('%I.%I', parsed[1], parsed[2])::regclass;
    END IF;
    -- in the array's order: the planner may pick a hashed anti-join that
    -- does not keep it (PostgreSQL 16+ does, here)
    SELECT string_agg(c, ', ' ORDER BY n) INTO missing
      FROM unnest(ARRAY['topic', 'partition', 'offset', 'ts', 'key', 'value', 'headers', 'batch_id'])
           WITH ORDINALITY AS u(c, n)
     WHERE NOT EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = rel AND a.attname = c
                          AND a.attnum > 0 AND NOT a.attisdropped);
    IF missing IS NOT NULL THEN
        RAISE EXCEPTION 'bronze table % lacks the columns %', rel, missing
            USING ERRCODE = 'invalid_table_definition',
                  HINT = 'Let create_pipeline create the bronze table, or add the standard columns.';
    END IF;
    IF NOT has_table_privilege(rel, 'INSERT') THEN
        RAISE EXCEPTION 'permission denied for table %', rel
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'The pipeline owner needs INSERT on the bronze table.';
    END IF;
    RETURN rel;
END
$$;
