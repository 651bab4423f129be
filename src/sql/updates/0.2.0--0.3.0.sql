-- kafka_sink 0.2.0 -> 0.3.0: the schema changes of this step (src/sql/README.md).
-- Every function, procedure, view, trigger, grant and comment comes after
-- this file from the parts in src/sql/, as in a fresh install.

-- evolve's check takes the key and order columns and the column cap
-- (schema-driven DDL that cannot be turned against the table)
DROP FUNCTION kafka_sink._evolve_target(regclass, text, boolean);
