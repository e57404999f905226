// Saying a problem once: a game loop would repeat it every frame.

using System.Collections.Generic;

namespace NpcMind
{
    /// <summary>Says a line once per key: a game loop would repeat it every frame.</summary>
    internal sealed class SayOnce
    {
        private readonly HashSet<string> said = new HashSet<string>();
        private readonly NpcMindLog log;

        public SayOnce(NpcMindLog log) { this.log = log; }

        /// <summary>Say <paramref name="message"/> unless <paramref name="key"/> was said (at most 1,000 kinds,
        /// then it starts over); <paramref name="native"/>: it leaves entities to the game's own AI, and it says
        /// so.</summary>
        public void Say(string key, string message, bool native = true)
        {
            if (said.Contains(key)) return;
            if (said.Count >= 1000) said.Clear();
            said.Add(key);
            log(native ? message + " (the entities concerned use their native AI)" : message);
        }
    }
}
