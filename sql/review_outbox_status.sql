-- kafka_sink.outbox_status as the roles it is granted to (adversarial
-- review): it must work for a non-superuser admin (it read a superuser-only
-- setting), show the relay's servers only to roles that may read that
-- setting, and the error of a pending row only to the role that queued it.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS kafka_sink;
DROP ROLE IF EXISTS regress_obs_a;
DROP ROLE IF EXISTS regress_obs_b;
DROP ROLE IF EXISTS regress_obs_settings;
CREATE ROLE regress_obs_a IN ROLE kafka_sink_admin;
CREATE ROLE regress_obs_b IN ROLE kafka_sink_admin;
CREATE ROLE regress_obs_settings IN ROLE kafka_sink_admin, pg_read_all_settings;
RESET client_min_messages;

-- a pending row of each admin, with the relay's error on it (written as a
-- superuser: the guard lets superusers write the catalog)
INSERT INTO kafka_sink.outbox (topic, key, value, created_by, last_error)
VALUES ('regress_obs_topic_a', 'k', 'v', 'regress_obs_a', 'error of a''s row'),
       ('regress_obs_topic_b', 'k', 'v', 'regress_obs_b', 'error of b''s row');

-- a non-superuser admin can read the view; no servers, only its own error
SET ROLE regress_obs_a;
SELECT pending >= 2 AS pending, last_error,
       bootstrap_servers IS NULL AS servers_hidden
  FROM kafka_sink.outbox_status;
RESET ROLE;
SET ROLE regress_obs_b;
SELECT last_error, bootstrap_servers IS NULL AS servers_hidden FROM kafka_sink.outbox_status;
RESET ROLE;

-- pg_read_all_settings and superusers may read the servers ('' when unset)
SET ROLE regress_obs_settings;
SELECT last_error IS DISTINCT FROM 'error of a''s row' AND last_error IS DISTINCT FROM 'error of b''s row'
           AS no_error_of_others,
       bootstrap_servers IS NOT NULL AS servers_shown
  FROM kafka_sink.outbox_status;
RESET ROLE;
SELECT bootstrap_servers IS NOT NULL AS servers_shown FROM kafka_sink.outbox_status;

DELETE FROM kafka_sink.outbox WHERE created_by IN ('regress_obs_a', 'regress_obs_b');
DROP ROLE regress_obs_a;
DROP ROLE regress_obs_b;
DROP ROLE regress_obs_settings;
