-- Reserved: version 5 belongs to the child workflows of issue 16, written on another
-- branch. This empty file keeps the numbering gap-free on the callbacks branch; when the
-- two branches meet, the real 0005 replaces it (two files numbered 0005 fail
-- all_migrations, so the merge cannot keep both by accident).
SELECT 1;
