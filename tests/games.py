"""A console game (C#, C++) played against a real service through the phases every port's live test shares: the
model answering, the provider failing, recovered, the service stopped. One driver, so the ports are held to one run."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

from conftest import SCRIPTED_SVC, service_settings, serving
from npcmind.testing.scripted import ScriptedServer

ROOT = Path(__file__).resolve().parents[1]
DRONES = (ROOT / "examples" / "drones.yaml").read_text()  # the console games' manifest (their READMEs)
# each phase, 4 s; a game counts an AI choice as late after 2 s of a phase (the decisions' life is 1.5 s). Longer
# phases only for bench/game_bench.py, whose Tick() percentiles want more frames than a test needs
PHASE_S = float(os.environ.get("NPCMIND_GAME_PHASE_S", "4"))


def played(command: list[str], scripted: ScriptedServer, tmp_path: Path) -> str:
    """What the game printed after its four phases (it exited 0), the service's URL appended to ``command``. The
    phases are the game's stated run time, not waits for something: each begins once its fault is in place."""
    manifest = tmp_path / "drones.yaml"
    manifest.write_text(DRONES)
    with serving(service_settings(tmp_path, manifest, base_url=scripted.base_url, **SCRIPTED_SVC)) as running:
        game = subprocess.Popen(
            [*command, running.server.url],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert game.stdin is not None and game.stdout is not None
        assert game.stdout.readline().strip() == "ready", "the game did not run its first frame"

        def phase(name: str) -> None:
            game.stdin.write(f"phase {name}\n")  # type: ignore[union-attr]
            game.stdin.flush()  # type: ignore[union-attr]
            time.sleep(PHASE_S)

        try:
            phase("ai")
            scripted.set(status=500)
            phase("provider-fault")
            scripted.set()
            phase("recovered")
        except BaseException:
            game.kill()
            raise
    phase("service-stopped")
    out, err = game.communicate("end\n", timeout=60)
    assert game.returncode == 0, err[-4000:]
    assert out.strip(), f"the game printed no report:\n{err[-4000:]}"
    return out


PHASES = ["start", "ai", "provider-fault", "recovered", "service-stopped"]


def kept_the_protocol(out: str, *zero: str) -> dict[str, Any]:
    """The game's report (its last line), printed for bench/game_bench.py, once it shows the protocol kept in every
    phase: no illegal action, no decision of an older epoch, none past its expiry (nor any of ``zero``, a port's own
    counters); decisions from the model when it answers, none late while the provider fails or the service is
    stopped, the native AI then, errors counted, the epoch raised, and decisions read from the streamed answer."""
    report: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    print("game report: " + json.dumps(report))  # the Tick() figures: bench/game_bench.py reads this line
    for name in PHASES:
        p = report[name]
        counted = tuple(p[k] for k in ("illegal", "old_epoch", "expired", *zero))
        assert counted == (0,) * len(counted), (name, p)
        assert p["frames"] > 0, (name, p)
    assert report["ai"]["ai"] > 0 and report["recovered"]["ai"] > 0, report
    assert report["provider-fault"]["late_ai"] == 0, report["provider-fault"]
    assert report["service-stopped"]["late_ai"] == 0 and report["service-stopped"]["native"] > 0, report
    assert report["stats"]["errors"] > 0 and report["epoch"] >= 5, report
    assert report["stats"]["streamed_decisions"] > 0, report["stats"]  # NDJSON, line by line
    return report
