-- A pipeline started in a database that kafka_sink.database does not name
-- (adversarial review, failure visibility): no worker ever runs it, so
-- status.last_error says why and wait() raises instead of timing out.
-- pg_regress's database is never the one the test cluster's launcher serves.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS kafka_sink;
DROP SCHEMA IF EXISTS unserved CASCADE;
DROP ROLE IF EXISTS regress_unserved;
CREATE ROLE regress_unserved LOGIN IN ROLE kafka_sink_admin;
CREATE SCHEMA unserved AUTHORIZATION regress_unserved;
RESET client_min_messages;

SET ROLE regress_unserved;
SELECT kafka_sink._database_served() AS served;
CREATE TABLE unserved.t (id int PRIMARY KEY, v text);
SELECT kafka_sink.create_pipeline('unserved', bootstrap_servers => '127.0.0.1:1',
       subscribe => ARRAY['unserved_topic'], target => 'unserved.t') > 0 AS created;
SELECT state, workers, last_error_at IS NOT NULL AS error_at,
       replace(last_error, current_database(), 'DB') AS last_error
  FROM kafka_sink.status WHERE name = 'unserved';
-- (the database's name differs between runs of the suite)
DO $$ BEGIN
    PERFORM kafka_sink.wait('unserved', '1 s');
    RAISE NOTICE 'wait() returned';
EXCEPTION WHEN object_not_in_prerequisite_state THEN
    RAISE NOTICE 'wait(): %', replace(SQLERRM, current_database(), 'DB');
END $$;
DO $$ DECLARE c boolean; BEGIN
    CALL kafka_sink.wait_for('unserved', '1 s', c);
    RAISE NOTICE 'wait_for() returned';
EXCEPTION WHEN object_not_in_prerequisite_state THEN
    RAISE NOTICE 'wait_for(): %', replace(SQLERRM, current_database(), 'DB');
END $$;
-- stopped, it is just stopped
SELECT kafka_sink.stop('unserved');
SELECT state, last_error FROM kafka_sink.status WHERE name = 'unserved';
SELECT kafka_sink.drop_pipeline('unserved');
RESET ROLE;
DROP SCHEMA unserved CASCADE;
DROP ROLE regress_unserved;
