"""What users write: table configs, the YAML loader, run params."""
