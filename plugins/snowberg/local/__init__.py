"""The local stack: the fakesnow Snowflake emulator and an embedded Iceberg lake."""
