"""Fixtures of the tests of the entry points and their configs:

CLI output and help, config targets, bad-input errors.
"""
