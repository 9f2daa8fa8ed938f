"""The operators' tests: a package, so their module names (test_freshness, test_volume ...) may repeat the checks'."""
