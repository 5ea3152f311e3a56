"""Tests of the embedded fake provider."""
