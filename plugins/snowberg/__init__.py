"""snowberg: move data between Snowflake and Apache Iceberg, exactly once."""

__version__ = "0.1.0"
