-- Every object of the extension has a comment (issue 14, "every catalog
-- object has a comment"): tables, views, sequences, types, functions and
-- procedures, whether created by the install script or brought up to date by
-- an update script (test/e2e/upgrade.sh compares the two, comments
-- included).  A new object without COMMENT ON shows up here.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS kafka_sink;
RESET client_min_messages;

-- the extension's members without a comment: none
SELECT pg_describe_object(d.classid, d.objid, d.objsubid) AS without_comment
  FROM pg_depend d
  JOIN pg_extension e ON e.oid = d.refobjid
 WHERE d.deptype = 'e' AND e.extname = 'kafka_sink'
   AND d.classid IN ('pg_class'::regclass, 'pg_proc'::regclass, 'pg_type'::regclass)
   AND coalesce(obj_description(d.objid, d.classid::regclass::name), '') = ''
   -- (PostgreSQL 17+ also records the row types of the tables and views and
   -- every array type as members: they are described by their relation)
   AND NOT EXISTS (SELECT 1 FROM pg_type t LEFT JOIN pg_class c ON c.oid = t.typrelid
                    WHERE d.classid = 'pg_type'::regclass AND t.oid = d.objid
                      AND (t.typcategory = 'A' OR c.relkind IN ('r', 'v', 'm', 'p', 'f')))
 ORDER BY 1;

-- the check sees what it should: tables, views, functions and a procedure
SELECT c.relkind, count(*) AS commented
  FROM pg_depend d
  JOIN pg_extension e ON e.oid = d.refobjid
  JOIN pg_class c ON d.classid = 'pg_class'::regclass AND c.oid = d.objid
 WHERE d.deptype = 'e' AND e.extname = 'kafka_sink'
   AND obj_description(c.oid, 'pg_class') <> ''
 GROUP BY 1 ORDER BY 1;
SELECT p.prokind, count(*) > 50 AS many_commented
  FROM pg_depend d
  JOIN pg_extension e ON e.oid = d.refobjid
  JOIN pg_proc p ON d.classid = 'pg_proc'::regclass AND p.oid = d.objid
 WHERE d.deptype = 'e' AND e.extname = 'kafka_sink'
   AND obj_description(p.oid, 'pg_proc') <> ''
 GROUP BY 1 ORDER BY 1;
