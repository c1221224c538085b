"""Fixtures of the API's tests (helpers in api_helpers.py)."""
