"""Change capture from Snowflake Streams into Iceberg, exactly once.

A run is three steps, each safe to repeat:

1. consume (``staging.consume``): one Snowflake transaction copies the
   stream's changes into a staging table, tagged with a new batch id. The
   stream's offset moves only when that transaction commits, so a change is
   either in staging or still in the stream, never lost and never in both.
2. load (``apply.load_batches``): every staged batch newer than the batch id
   recorded in the Iceberg table is applied in one Iceberg commit (deletes by
   primary key, copy-on-write, then one append) whose snapshot summary
   carries ``snowberg.stream-batch-id``.
3. cleanup (``staging.cleanup``): staged rows are deleted only up to the
   batch id read back from the table.

Nothing here imports pyiceberg, pyarrow or the Snowflake connector at module
level; DAG files may import ``snowberg.config.stream_settings`` freely.
"""
