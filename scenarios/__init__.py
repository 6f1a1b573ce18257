"""Scenario data files (one TOML per scenario), shipped inside the wheel."""
