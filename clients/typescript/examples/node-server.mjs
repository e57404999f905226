// A Node game server: it runs the match (20 ticks a second), the bees decide through npcmind, and an
// innkeeper answers the player through NpcMind with the server's own model (any OpenAI-compatible server).
// Run (against the quick start's scripted setup, whose scripted server also answers as the innkeeper's model):
// NPCMIND_URL=http://127.0.0.1:8081 CORTEX_URL=http://127.0.0.1:9100/v1 CORTEX_MODEL=scripted node examples/node-server.mjs
import { DecideClient, InMemoryNpcs, NpcMind, OpenAICortex } from "npcmind";

const service = process.env.NPCMIND_URL ?? "http://127.0.0.1:8080";
const cortex = new OpenAICortex(
  process.env.CORTEX_URL ?? "http://127.0.0.1:8000/v1",
  process.env.CORTEX_MODEL ?? "local",
);

const npc = new DecideClient(service, "match-1", { world: { player_hp_fraction: 0.6, repellent: false } });
const bees = new Map([
  ["b1", { hp: 0.3, distance: 80 }],
  ["b2", { hp: 1.0, distance: 150 }],
]);
const legal = ["idle", "wander", "chase", "flee"];
const decided = new Map();

const loop = setInterval(() => {
  for (const [id, bee] of bees) {
    npc.track(
      id,
      "bee",
      { hp_fraction: bee.hp, distance_to_player: bee.distance, sees_player: true, current_action: "wander" },
      legal,
    );
  }
  npc.tick();
  for (const id of bees.keys()) {
    const choice = npc.action(id); // null: the server's own AI moves the bee this tick
    if (choice && !decided.has(id)) decided.set(id, choice.action);
  }
}, 50);

const npcs = new InMemoryNpcs(); // a real server keeps its NPCs in its own store
npcs.register("mara", "Mara, the innkeeper of the Hollow Oak.");
const mind = new NpcMind(service, cortex, npcs);
const turn = await mind.process("mara", "The player asks for a room for the night."); // signature checked first
console.log(`mara says: ${turn.dialogue} (turns: ${turn.state.turns})`);

const deadline = Date.now() + 30_000;
while (decided.size < bees.size && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
clearInterval(loop);
for (const [id, action] of decided) console.log(`${id}: ${action} (AI)`);
await npc.wait(); // the reports and telemetry still out
npc.close();
