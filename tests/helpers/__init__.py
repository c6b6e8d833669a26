"""Tests of the credential helpers."""
