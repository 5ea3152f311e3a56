"""Fixtures shared by the shell tests: one PostgreSQL server per test run, a fresh schema per test."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import pytest

from shell._secrets import KNOWN_SECRETS
from tests._postgres import REQUIRE_ENV, PostgresUnavailable, postgres_server, with_options
from tests.shell import _harness

_schemas = itertools.count(1)


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """The URL of an empty database on a server started for this test run.

    Skips the test when no PostgreSQL server can be started, unless ``REQUIRE_POSTGRES_TESTS=1``,
    which makes that a failure.
    """
    with ExitStack() as stack:
        try:
            url = stack.enter_context(postgres_server())
        except PostgresUnavailable as error:
            if os.environ.get(REQUIRE_ENV) == "1":
                pytest.fail(f"PostgreSQL is required ({REQUIRE_ENV}=1) but cannot be started: {error}")
            pytest.skip(f"no PostgreSQL server can be started here: {error}")
        yield url


@pytest.fixture(scope="session")
def postgres_admin(postgres_url: str) -> Iterator[Any]:
    """An autocommit connection to the test database, for setting tests up and looking behind the store."""
    import psycopg

    with psycopg.connect(postgres_url, autocommit=True) as connection:
        yield connection


@pytest.fixture
def postgres_schema(postgres_admin: Any) -> str:
    """The name of a new, empty schema in the test database."""
    name = f"t{next(_schemas)}"
    postgres_admin.execute(f'CREATE SCHEMA "{name}"')
    return name


@pytest.fixture
def postgres_store_url(postgres_url: str, postgres_schema: str) -> str:
    """A store URL whose tables go to a schema of their own."""
    return with_options(postgres_url, ("search_path", postgres_schema))


@pytest.fixture(autouse=True)
def _close_harnesses() -> Iterator[None]:
    """Whatever a test does, the harnesses it opened are shut down after it."""
    try:
        yield
    finally:
        for harness in list(_harness.OPEN):
            harness.close()


@pytest.fixture(autouse=True)
def _forget_known_secrets() -> Iterator[None]:
    """Each test starts with no known secret: the process-wide registry does not carry one test's
    credentials, under their names, into the next."""
    KNOWN_SECRETS.clear()
    yield
    KNOWN_SECRETS.clear()
