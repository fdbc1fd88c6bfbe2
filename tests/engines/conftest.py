"""The team-store tests: the loopback servers' fixtures come from tests/support/engine_fixtures.py (loaded by
tests/conftest.py for every test directory, so files elsewhere can be parametrized by engine)."""
