// A small INpcMemory kept in the game's process: enough to start with. A real game keeps its NPCs in its own save
// data and recalls with its own embeddings; recall here is word overlap, not meaning.

using System;
using System.Collections.Generic;
using System.Linq;
using System.Text.RegularExpressions;

namespace NpcMind
{
    /// <summary>NPCs and their memories in memory (lost when the game ends). Thread-safe.</summary>
    public sealed class InMemoryNpcs : INpcMemory
    {
        private static readonly Regex Word = new Regex(@"[\p{L}\p{N}]+");
        private readonly object gate = new object();
        private readonly Dictionary<string, NpcRecord> npcs = new Dictionary<string, NpcRecord>();
        private readonly Dictionary<string, List<NewMemory>> memories = new Dictionary<string, List<NewMemory>>();

        /// <summary>Add an NPC (or replace who it is); its state starts empty unless given.</summary>
        public void Register(string npcId, string persona, IDictionary<string, object> data = null,
            IDictionary<string, object> state = null)
        {
            if (string.IsNullOrEmpty(npcId) || npcId.Contains("/"))
                throw new ArgumentException("npcId: " + Errors.Quote(npcId ?? "null") + " must be non-empty text without '/'",
                    "npcId");
            if (persona == null) throw new ArgumentException("persona: must be text (who the NPC is), not null", "persona");
            var rec = new NpcRecord
            {
                NpcId = npcId, Persona = persona, Data = data ?? new Dictionary<string, object>(),
                State = state ?? new Dictionary<string, object>(),
            };
            lock (gate) npcs[npcId] = rec;
        }

        public NpcRecord Get(string npcId)
        {
            NpcRecord rec;
            lock (gate) return npcs.TryGetValue(npcId, out rec) ? rec : null;
        }

        /// <summary>Memories sharing words with the query (Jaccard similarity), most similar first.</summary>
        public IList<RecalledMemory> Recall(string npcId, string query, int limit, double threshold)
        {
            var q = Words(query);
            return Remembered(npcId).Select(m =>
            {
                var w = Words(m.Text);
                int shared = w.Count(q.Contains);
                return new RecalledMemory
                {
                    Text = m.Text, Type = m.Type, Importance = m.Importance,
                    Similarity = (double)shared / Math.Max(1, w.Union(q).Count()),
                };
            }).Where(m => m.Similarity >= threshold).OrderByDescending(m => m.Similarity).Take(Math.Max(0, limit)).ToList();
        }

        public IDictionary<string, object> Apply(string npcId, IList<NewMemory> kept, IDictionary<string, object> stateTransform)
        {
            lock (gate)
            {
                NpcRecord rec;
                if (!npcs.TryGetValue(npcId, out rec)) throw new ArgumentException("unknown NPC " + Errors.Quote(npcId), "npcId");
                var patch = stateTransform ?? new Dictionary<string, object>();
                rec.State = (IDictionary<string, object>)DialogueClient.MergePatch(rec.State, patch);
                List<NewMemory> list;
                if (!memories.TryGetValue(npcId, out list)) memories[npcId] = list = new List<NewMemory>();
                list.AddRange(kept ?? new List<NewMemory>());
                return rec.State;
            }
        }

        /// <summary>Everything an NPC remembers, oldest first.</summary>
        public IList<NewMemory> Remembered(string npcId)
        {
            List<NewMemory> list;
            lock (gate) return memories.TryGetValue(npcId, out list) ? list.ToList() : new List<NewMemory>();
        }

        private static HashSet<string> Words(string text)
        {
            return new HashSet<string>(Word.Matches((text ?? "").ToLowerInvariant()).Cast<Match>().Select(m => m.Value));
        }
    }
}
