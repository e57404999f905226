"""The README's recording of `npcmind demo --scripted` and its still: Chromium's screenshots of the page playing
itself, made into an animated WebP (docs/demo.webp, under 2 MB) and a PNG at 1280x720 (docs/demo.png).

The command runs in its own process and its page in headless Chromium (tests/cdp.py), untouched: the
autopilot's tour (rest, fight, the model cut and restored) with the policy the demo learns as it plays. A
screenshot is taken every `--every` seconds of wall time until `--seconds` of the game's own time have passed and
every source has been seen (the learned policy comes after a round of learning: later on a loaded machine);
each frame lasts in the animation the game time it covered divided by `--fast`. The still is the frame that
showed the most: every source counted (the plot draws them), the model (or the scripted rules) at work, a fight
at the player, the most sources on the field at once, the most bees. Needs Chromium and Pillow (`pip install -e
'.[docs]'`).

Run: .venv/bin/python bench/demo_record.py [--seconds 56] [--every 0.25] [--fast 2] [--out docs]
"""

from __future__ import annotations

import argparse
import base64
import io
import itertools
import json
import math
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from cdp import CHROMIUM, Browser  # noqa: E402
from test_demo import Demo  # noqa: E402

MAX_BYTES = 2 * 1024 * 1024  # the README's recording: under 2 MB
SIZE = (1280, 720)  # the page's size, as tests/test_demo.py checks its layout
SNAPSHOT = "window.npcmindDemo ? JSON.stringify(window.npcmindDemo.snapshot()) : null"


@dataclass
class Frame:
    """One screenshot (PNG bytes, scaled) and the game time it was taken at."""

    png: bytes
    time: float


def shot(browser: Browser, scale: float) -> bytes:
    """The page now, as a PNG scaled by `scale`."""
    clip = {"x": 0, "y": 0, "width": SIZE[0], "height": SIZE[1], "scale": scale}
    return base64.b64decode(browser.call("Page.captureScreenshot", format="png", clip=clip)["data"])


def showing(s: dict[str, Any]) -> tuple[int, bool, int, int, int]:
    """How much a frame shows: the sources counted so far (the plot draws them), the model's decisions on the
    field now, bees in a fight at the player (up to six), the sources on the field now, the bees."""
    p, chars = s["player"], [*s["bees"], s["queen"]]
    near = sum(b["action"] == "chase" and math.dist((b["x"], b["y"]), (p["x"], p["y"])) < 90 for b in s["bees"])
    now = {c["source"] for c in chars}
    return (len(s["firsts"]), "AI" in now, min(6, near), len(now), len(s["bees"]))


def shown(s: dict[str, Any], after: float = 6) -> bool:
    """Whether every source has been counted, the policy (the last to come, after a round of learning) for
    `after` game seconds: the recording ends with all four seen."""
    return len(s["firsts"]) == 4 and s["time"] >= max(s["firsts"].values()) + after


def record(browser: Browser, seconds: float, every: float, scale: float) -> tuple[list[Frame], bytes, dict[str, Any]]:
    """Frames until `seconds` of game time, the last snapshot, and the full-size still of the frame that showed the
    most (taken when a frame shows more than every one before it)."""
    frames: list[Frame] = []
    still, best = b"", (0, False, 0, 0, 0)
    s: dict[str, Any] = {}
    while not frames or frames[-1].time < seconds or not still or not shown(s):
        started = time.monotonic()
        s = json.loads(browser.js(SNAPSHOT))
        frames.append(Frame(shot(browser, scale), s["time"]))
        if showing(s) > best:
            still, best = shot(browser, 1.0), showing(s)
        if frames[-1].time > 3 * seconds:
            raise TimeoutError(f"not every source counted within {3 * seconds:g} s of game time: {s['firsts']}")
        time.sleep(max(0.0, every - (time.monotonic() - started)))
    return frames, still, s


def webp(frames: list[Frame], fast: float, quality: int) -> bytes:
    """The frames as one looping animated WebP, each shown for the game time it covered, `fast` times faster."""
    from PIL import Image

    images = [Image.open(io.BytesIO(f.png)).convert("RGB") for f in frames]
    times = [f.time for f in frames]
    durations = [max(20, round(1000 * (b - a) / fast)) for a, b in itertools.pairwise(times)]
    durations.append(durations[-1] if durations else 100)
    out = io.BytesIO()
    images[0].save(
        out, "WEBP", save_all=True, append_images=images[1:], duration=durations, loop=0, quality=quality, method=6
    )
    return out.getvalue()


def main() -> None:
    """Record the demo and write the animation and the still."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=56, help="game seconds recorded (the tour: a minute)")
    parser.add_argument("--every", type=float, default=0.25, help="wall seconds between screenshots")
    parser.add_argument("--fast", type=float, default=2, help="the animation this many times faster than the game")
    parser.add_argument("--scale", type=float, default=0.6, help="the animation's size, of the page's 1280x720")
    parser.add_argument("--out", type=Path, default=ROOT / "docs", help="the folder of demo.webp and demo.png")
    args = parser.parse_args()
    if CHROMIUM is None:
        sys.exit("demo_record: no chromium here (apt-get install chromium)")
    demo = Demo("--scripted")
    try:
        # Chromium's helpers may still write its profile as it stops: what is left there is no failure
        with (
            tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as profile,
            Browser(Path(profile), SIZE) as browser,
        ):
            browser.open(f"{demo.url}/demo")
            browser.wait_for("window.npcmindDemo !== undefined")
            frames, still, s = record(browser, args.seconds, args.every, args.scale)
    finally:
        demo.stop()
    for quality in (70, 55, 40, 25):  # the best that keeps under MAX_BYTES
        data = webp(frames, args.fast, quality)
        if len(data) < MAX_BYTES:
            break
    else:
        sys.exit(f"demo_record: {len(data):,} bytes even at quality {quality}: record fewer --seconds or a --scale")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "demo.webp").write_bytes(data)
    (args.out / "demo.png").write_bytes(still)
    firsts = ", ".join(f"{k} {v:.1f} s" for k, v in s["firsts"].items())
    print(
        f"{args.out / 'demo.webp'}: {len(frames)} frames, {s['time']:.0f} s of game time shown in "
        f"{s['time'] / args.fast:.0f} s, {len(data):,} bytes (quality {quality}); {args.out / 'demo.png'}: "
        f"{len(still):,} bytes; first seen (game time): {firsts}"
    )


if __name__ == "__main__":
    main()
