"""The command line as a user meets it: settings read once at the edge, a missing extra named, lines in order."""

from __future__ import annotations

import dataclasses
import http.server
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import FOREST, until
from npcmind.cli import SDK_MODULES
from npcmind.config import TUNING, Settings
from npcmind.demo import manifest_path, prepared
from npcmind.http.server import free_port

FLAGS = {  # the Settings fields the command line's flags set; every other field is an NPCMIND_* variable
    "manifest",
    "host",
    "port",
    "profile",
    "store",
    "redis",
    "provider",
    "base_url",
    "model",
    "api_key_env",
    "clients",
    "rulesets",
    "distill_every_h",
    "shadow_provider",
    "shadow_model",
    "shadow_base_url",
    "shadow_api_key_env",
    "shadow_share",
    "shadow_calls",
}


def npcmind(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`npcmind ARGS` in its own process with ``env`` on top of this one's environment."""
    return subprocess.run(
        [sys.executable, "-m", "npcmind.cli", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **env},
    )


def test_settings_built_in_code_ignore_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Settings means what its code says; only from_env, which the command line calls, reads NPCMIND_*."""
    monkeypatch.setenv("NPCMIND_MAX_SESSIONS", "2")
    monkeypatch.setenv("NPCMIND_CORS_ORIGINS", "https://game.example")
    assert Settings().max_sessions == 10_000 and Settings().cors_origins == []
    read = Settings.from_env(port=9000)
    assert (read.max_sessions, read.cors_origins, read.port) == (2, ["https://game.example"], 9000)
    assert Settings.from_env({"NPCMIND_DEADLINE_MS": "5"}).deadline_ms == 5  # an explicit mapping, not os.environ


def test_every_setting_but_the_flags_has_its_variable() -> None:
    fields = {f.name for f in dataclasses.fields(Settings)}
    assert {attribute for _, attribute, _ in TUNING} == fields - FLAGS
    assert all(name == "NPCMIND_" + attribute.upper() for name, attribute, _ in TUNING)
    assert Settings.from_env({}) == Settings()  # the defaults are the same either way


@pytest.mark.parametrize(
    ("args", "name", "value", "says"),
    [
        (
            ["serve"],
            "NPCMIND_LOGPROBS",
            "nope",
            "NPCMIND_LOGPROBS must be 1 or 0 (true/false, yes/no, on/off), not 'nope'",
        ),
        (["demo", "--port", "0"], "NPCMIND_MAX_SESSIONS", "0", "NPCMIND_MAX_SESSIONS must be at least 1, not 0"),
        (
            ["cluster", "--print-config"],
            "NPCMIND_READ_TIMEOUT_S",
            "soon",
            "NPCMIND_READ_TIMEOUT_S must be a number, not 'soon'",
        ),
    ],
)
def test_a_variable_that_is_none_of_its_values_stops_the_command_with_its_line(
    args: list[str], name: str, value: str, says: str
) -> None:
    """As when library code raised SystemExit: the one line on stderr, exit code 1, no traceback."""
    r = npcmind(*args, env={name: value})
    assert (r.returncode, r.stderr, r.stdout) == (1, says + "\n", ""), r


def test_the_demo_gets_its_settings_as_values_and_leaves_the_environment_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env = {"NPCMIND_CORS_ORIGINS": "https://game.example", "NPCMIND_MAX_SESSIONS": "3"}
    settings = Settings.from_env(env, host="0.0.0.0", port=8123, provider="none")
    before = dict(os.environ)
    with prepared(settings, scripted=False, store=None) as demo:
        assert dict(os.environ) == before
        ours = ["http://0.0.0.0:8123", "http://127.0.0.1:8123", "http://localhost:8123"]
        assert demo.cors_origins == ["https://game.example", *ours]
        assert (demo.manifest, demo.profile, demo.max_sessions, demo.provider) == (manifest_path(), "local", 3, "none")
        folder = Path(demo.store.removeprefix("sqlite:///")).parent
        assert folder.is_dir() and folder.name.startswith("npcmind-demo-")
    assert not folder.exists()  # a demo leaves nothing behind
    # and says so after the service's last line ("the store ... holds every decision answered") of a store now gone
    assert "the demo's store was in a temporary folder, now removed" in capsys.readouterr().out
    assert settings.cors_origins == ["https://game.example"]  # the caller's value is not changed either
    with prepared(settings, scripted=False, store=f"sqlite:///{tmp_path}/play.db") as demo:
        assert demo.store == f"sqlite:///{tmp_path}/play.db"
    assert "removed" not in capsys.readouterr().out  # a store the user named is kept, and not said removed


@pytest.mark.fast
@pytest.mark.parametrize(("seconds", "said"), [(15, "15 s"), (600, "10 min"), (3600 * 24, "24 h"), (5400, "90 min")])
def test_a_retraining_period_is_said_in_the_unit_a_person_reads(seconds: float, said: str) -> None:
    """The demo's 15 s was logged as "every 0.00416667 h (--distill-every)", a flag the demo does not have."""
    from npcmind.service import interval

    assert interval(seconds) == said


@pytest.mark.parametrize("module", SDK_MODULES)
def test_chat_without_the_sdk_extra_names_the_extra(module: str, tmp_path: Path) -> None:
    """Without onnxruntime (say) the chat started and died at the first line said, with a ModuleNotFoundError
    traceback. The module is blocked here as a missing one is: its import raises ModuleNotFoundError."""
    code = (
        f"import sys; sys.modules[{module!r}] = None\n"
        "from npcmind.cli import main\n"
        f"sys.exit(main(['chat', 'mara', '--data-dir', {str(tmp_path / 'chat')!r}]))"
    )
    r = subprocess.run([sys.executable, "-c", code], input="Hello\n\n", capture_output=True, text=True, timeout=600)
    said = f"npcmind chat needs the sdk extra ({module} is missing): pip install 'npcmind[sdk]'\n"
    assert (r.returncode, r.stderr, r.stdout) == (2, said, ""), r
    assert not (tmp_path / "chat").exists()  # stopped before it touched anything


class _HeldModels(http.server.BaseHTTPRequestHandler):
    """A model server whose model list answers only when the test says: the start-up check waits on it."""

    asked = threading.Event()
    release = threading.Event()

    def do_GET(self) -> None:
        type(self).asked.set()
        type(self).release.wait(600)  # the bound only stops a hang
        body = json.dumps({"data": [{"id": "llama3.1:8b"}, {"id": "qwen3:4b"}]}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        return None


@pytest.fixture()
def held_models() -> Iterator[type[_HeldModels]]:
    handler = type("Held", (_HeldModels,), {"asked": threading.Event(), "release": threading.Event()})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    handler.url = f"http://127.0.0.1:{server.server_address[1]}/v1"  # type: ignore[attr-defined]
    try:
        yield handler
    finally:
        handler.release.set()
        server.shutdown()
        server.server_close()


def test_the_provider_check_warns_before_the_ready_line(held_models: Any, tmp_path: Path) -> None:
    """The check's warning came after "ready", where a reader of the first lines stopped. Here the model list
    is held until the service answers /v1/health (it listens while it checks), so the check ends well after
    the service could have said ready: the warning must still come first."""
    port = free_port()
    args = ["serve", "--manifest", str(FOREST), "--port", str(port), "--store", f"sqlite:///{tmp_path}/s.db"]
    args += ["--provider", "openai", "--base-url", held_models.url, "--model", "scripted"]
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "npcmind.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    try:
        until(held_models.asked.is_set, "the service did not ask the model list")
        until(lambda: _answers(f"http://127.0.0.1:{port}/v1/health"), "the service did not answer /v1/health")
        held_models.release.set()
        assert proc.stdout is not None
        lines: list[str] = []
        while not any("ready on" in line for line in lines):
            line = proc.stdout.readline()
            assert line, f"serve ended before its ready line: {lines}"
            lines.append(line)
    finally:
        proc.terminate()
        proc.communicate(timeout=120)
    warned = [i for i, line in enumerate(lines) if "provider check at start:" in line]
    assert warned and "does not list the model 'scripted' (it lists llama3.1:8b, qwen3:4b)" in lines[warned[0]], lines
    assert warned[0] < len(lines) - 1 and "ready on" in lines[-1], lines


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=5).status_code == 200
    except httpx.TransportError:
        return False


@pytest.mark.fast
def test_the_scripted_provider_on_a_taken_port_says_what_to_do() -> None:
    """It printed its "listening" line, then uvicorn's error, with no hint: as serve and demo, one line that says
    to choose a free port, exit 3, and no line that claims it listens."""
    import socket

    from conftest import cli

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        r = cli("scripted-provider", "--port", str(port), timeout=60)
    assert r.returncode == 3, r.stdout + r.stderr
    assert r.stderr.strip().splitlines() == [
        f"npcmind scripted-provider: cannot listen on 127.0.0.1:{port} ([Errno 98] Address already in use): if "
        "another program holds the port, choose a free one with --port; --host must be an address of this machine"
    ], r.stderr
    assert r.stdout == "", r.stdout  # no "scripted provider ... on http://..." for a server that never listened


@pytest.mark.fast
@pytest.mark.parametrize("command", ["serve", "distill", "replay", "demo", "keygen", "validate", "chat", "cluster"])
def test_every_commands_help_says_what_it_is_for(command: str) -> None:
    """`keygen --help` and `validate --help` were a usage and a list of flags: what the command is for, not said."""
    from conftest import cli

    r = cli(command, "--help")
    assert r.returncode == 0, r.stderr
    said = r.stdout.split("\n\n")[1]  # after the usage: a description, or straight to the arguments
    assert not said.startswith(("positional arguments:", "options:")) and len(said.split()) >= 6, r.stdout


MISSPELT = [
    (["serve", "--manfest", "x.yaml"], "--manfest", "--manifest"),
    (["replay", "--policy", "--store", "s", "--client", "c", "--smaple", "3"], "--smaple", "--sample"),
    (["keygen", "c", "--manifset", "m"], "--manifset", "--manifest"),
]


@pytest.mark.fast
@pytest.mark.parametrize("argv,wrong,meant", MISSPELT)
def test_a_misspelt_option_is_named_with_the_one_meant(argv: list[str], wrong: str, meant: str) -> None:
    """`serve --manfest` printed the top-level usage and "unrecognized arguments": the command's own usage and
    the option it is closest to."""
    from conftest import cli

    r = cli(*argv)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.startswith(f"usage: npcmind {argv[0]} "), r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert last == f"npcmind {argv[0]}: error: unrecognized argument {wrong}: did you mean {meant}?", r.stderr
