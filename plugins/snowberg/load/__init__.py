"""Snowflake to Iceberg watermark loads: plan, extract, slices, push-down unload, publish."""
