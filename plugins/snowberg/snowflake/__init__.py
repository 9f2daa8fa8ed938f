"""Reading from Snowflake: the hook, session pinning, cursor values, queries."""
