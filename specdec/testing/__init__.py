"""Test doubles and the exact enumeration harness (importable by tests and scripts)."""
