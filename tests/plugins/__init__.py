"""Fixtures and helpers shared by several test modules, registered in tests/conftest.py."""
