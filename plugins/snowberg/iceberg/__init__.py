"""The lake side: catalogs, tables, schema evolution, the watermark state."""
