"""What the tests write to on the servers they share with a user: the PostgreSQL database and the Redis database
NPCMIND_TEST_POSTGRES and NPCMIND_TEST_REDIS name (by default database `test` and Redis database 13, which no
program uses by default), never another one on the same server, and the README says which (issue 40, friction 1)."""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.parse
import uuid
from typing import Any

import pytest

import conftest
from conftest import POSTGRES, ROOT
from stores import opened, run


def _defaults() -> dict[str, str]:
    """Each test module's Redis and PostgreSQL URLs, imported with neither variable set."""
    env = {k: v for k, v in os.environ.items() if k not in ("NPCMIND_TEST_REDIS", "NPCMIND_TEST_POSTGRES")}
    env["PYTHONPATH"] = f"{ROOT / 'tests'}{os.pathsep}{ROOT / 'bench'}"  # as pytest's pythonpath has it
    code = (
        "import json, conftest, test_shared, test_scale, test_store_contract; print(json.dumps({"
        "'conftest': conftest.REDIS, 'test_shared': test_shared.REDIS, 'test_scale': test_scale.REDIS, "
        "'test_store_contract': test_store_contract.REDIS, 'postgres': conftest.POSTGRES}))"
    )
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT / "tests", env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    import json

    return dict(json.loads(r.stdout))


@pytest.mark.fast
def test_the_tests_use_a_redis_database_nobody_uses_by_default_and_all_the_same() -> None:
    """Redis database 0 is every program's default: the tests wrote there without saying so."""
    urls = _defaults()
    postgres = urls.pop("postgres")
    assert set(urls.values()) == {"redis://127.0.0.1:6379/13"}, urls
    readme = (ROOT / "README.md").read_text()
    assert "Redis database 13" in readme, "the README's test line says which Redis database the tests use"
    assert f"PostgreSQL database `{urllib.parse.urlsplit(postgres).path.lstrip('/')}`" in readme


def test_the_role_with_few_connections_is_made_on_the_database_of_the_test_url() -> None:
    """The fixture granted CREATE on the database named `test`, whatever NPCMIND_TEST_POSTGRES named: on another
    database the service could not create its schema, and the grant went to a database the user had not given."""
    import asyncpg

    from test_store_contract import limited

    why = conftest._postgres_problem()
    if why:
        pytest.skip(why)
    other = f"npcm_other_{uuid.uuid4().hex[:10]}"
    server = urllib.parse.urlsplit(POSTGRES)

    async def admin(sql: str) -> None:
        db = await asyncpg.connect(POSTGRES)
        try:
            await db.execute(sql)
        finally:
            await db.close()

    run(lambda: admin(f'CREATE DATABASE "{other}"'))
    try:
        url = urllib.parse.urlunsplit(server._replace(path=f"/{other}")) + f"?schema=t_{uuid.uuid4().hex[:12]}"
        with limited(url) as role_url:
            role = urllib.parse.urlsplit(role_url).username

            async def check() -> Any:
                store = await opened(role_url)  # CREATE SCHEMA IF NOT EXISTS, as the role, on the other database
                await store.close()
                db = await asyncpg.connect(POSTGRES)
                try:
                    return await db.fetchval("SELECT has_database_privilege($1, current_database(), 'CREATE')", role)
                finally:
                    await db.close()

            assert run(check) is False  # the database of NPCMIND_TEST_POSTGRES was granted nothing
    finally:
        run(lambda: admin(f'DROP DATABASE "{other}" WITH (FORCE)'))


@pytest.mark.fast
@pytest.mark.parametrize(("name", "value"), [("NPCMIND_TEST_REDIS", "7"), ("NPCMIND_TEST_POSTGRES", "walk_db")])
def test_a_test_server_variable_that_is_no_url_stops_the_run_with_one_line(name: str, value: str) -> None:
    """``NPCMIND_TEST_REDIS=7`` (a database number, not a URL) skipped the Redis tests without a word."""
    env = {**os.environ, name: value}
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_licence.py", "--co"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 4, r.stdout + r.stderr
    assert f"{name}='{value}' is not a URL" in r.stdout + r.stderr
