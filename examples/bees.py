"""A game loop that lets npcmind decide for five bees, with the reference SDK (npcmind.sdk.DecideClient).

Run the service first (see the README), then: python examples/bees.py [--url http://127.0.0.1:8080]
Every frame the game updates what its bees see and asks `action()`; None means "use the native AI".
"""

from __future__ import annotations

import argparse
import logging
import time

from npcmind.sdk import DecideClient, DecideOptions

LEGAL = ["idle", "wander", "chase", "flee"]


def native_ai(hp: float) -> str:
    """The game's own rule, used whenever npcmind has no live decision."""
    return "flee" if hp < 0.3 else "chase"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("--seconds", type=float, default=3.0)
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    world = {"player_hp_fraction": 0.8, "repellent": False}
    options = DecideOptions(world=world, scope="forest_boss", scope_state={"boss_phase": 1}, epoch=1)
    with DecideClient(args.url, "example-game", options=options) as npc:
        hp = {f"bee-{i}": 1.0 - 0.2 * i for i in range(5)}
        start = time.monotonic()
        frame = 0
        while time.monotonic() - start < args.seconds:
            for bee, h in hp.items():
                obs = {"hp_fraction": h, "distance_to_player": 120.0, "sees_player": True, "current_action": "chase"}
                npc.track(bee, "bee", obs, LEGAL, position=[float(len(bee)), 0.0])
            npc.observe("hero", "player", {"hp_fraction": world["player_hp_fraction"]}, position=[0.0, 0.0])
            if frame == 30:
                npc.event("bee-1", "hit")  # something happened: asked at once
            npc.tick()
            if frame % 30 == 0:
                line = []
                for bee, h in hp.items():
                    c = npc.action(bee)
                    line.append(f"{bee}={c.action} ({c.source}{', cached' if c.cached else ''})" if c else
                                f"{bee}={native_ai(h)} (native)")  # fmt: skip
                print(f"frame {frame:3}: " + "  ".join(line))
            frame += 1
            time.sleep(1 / 30)
        npc.wait(timeout_ms=2000)  # the answers still on their way, so the counts add up
        print(f"requests {npc.stats.requests}, entities asked {npc.stats.asked}, AI {npc.stats.ai} "
              f"(cached {npc.stats.cached}), fallbacks {npc.stats.fallbacks or 'none'}")  # fmt: skip


if __name__ == "__main__":
    main()
