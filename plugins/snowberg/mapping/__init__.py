"""Snowflake types to Iceberg types, from Snowflake's own column metadata."""
