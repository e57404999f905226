"""npcmind.cluster: HAProxy in front of npcmind processes, as `npcmind cluster` and bench/scale_bench.py start it."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import FOREST


def test_haproxy_starts_where_the_open_file_limit_is_below_what_20000_connections_need(tmp_path: Path) -> None:
    """HAProxy takes two open files a connection: `maxconn 20000` made it refuse to start ("Cannot raise FD limit
    to 40028") wherever the hard limit on open files is lower, as in many containers (20,000 on the bench machine).
    Under a hard limit of 4,096 the cluster now starts and answers through HAProxy."""
    if shutil.which("haproxy") is None:
        pytest.skip("no haproxy here (apt-get install haproxy)")
    script = textwrap.dedent(
        f"""
        import resource, httpx
        resource.setrlimit(resource.RLIMIT_NOFILE, (4096, 4096))  # HAProxy inherits it and cannot raise it
        from npcmind.cluster import Cluster
        serve = ["--manifest", {str(FOREST)!r}, "--store", "sqlite:///{tmp_path}/c.db"]
        c = Cluster(serve, 1, workdir={str(tmp_path)!r})
        try:
            c.start()
            print(httpx.get(c.url + "/v1/health", timeout=30).json()["status"])
        finally:
            c.stop()
        """
    )
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok", r.stdout
