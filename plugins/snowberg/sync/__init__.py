"""Lake → Snowflake: sync an Iceberg table into Snowflake, one source snapshot range per run.

* ``snapshots`` decides what changed in the source since the last synced
  snapshot (appends only; overwrite/delete snapshots are refused or trigger a
  full reload, by config).
* ``horizon`` writes into a Snowflake-managed Iceberg table through an Iceberg
  REST catalog (Snowflake Horizon), recording the source snapshot id in the
  target commit's snapshot summary.
* ``native`` loads into a native Snowflake table, recording the source
  snapshot id in a state table in the same transaction as the rows.
* ``visibility`` asks Snowflake afterwards whether the rows are there.
"""
