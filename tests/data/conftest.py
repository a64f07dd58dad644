"""Fixtures of the tests of prompt data (``specdec.data``): preparation and prompt files."""
