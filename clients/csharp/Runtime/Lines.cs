// The lines of a streamed decide answer (NDJSON, docs/streaming.md), assembled from the bytes as they arrive.
//
// Bytes become text a whole line at a time: a newline byte never falls inside a UTF-8 character, so a chunk that
// splits one (the network cuts anywhere) is never decoded half; a line is only read once it is complete, and a
// partial line left when the stream ends is discarded (Python: lines.py Lines, the same).

using System.Collections.Generic;
using System.Text;

namespace NpcMind
{
    /// <summary>The complete lines of one stream so far, and the part of a line still coming.</summary>
    internal sealed class Lines
    {
        /// <summary>A decision line is a few hundred bytes; past this it is not npcmind's: dropped.</summary>
        public const int MaxLine = 64 * 1024;

        private List<byte> rest = new List<byte>();
        private bool skipping; // inside a line past MaxLine: dropped up to its newline
        /// <summary>Lines dropped for being past MaxLine (for the scheduler to say).</summary>
        public int Overlong;

        /// <summary>The lines this chunk completes (without their newline; a blank line is skipped), in order; a
        /// line that is not UTF-8 comes out with U+FFFD in it, which its JSON reader then refuses.</summary>
        public List<string> Feed(byte[] data)
        {
            var output = new List<string>();
            foreach (byte b in data ?? new byte[0])
            {
                if (b != (byte)'\n')
                {
                    if (skipping) continue;
                    rest.Add(b);
                    if (rest.Count > MaxLine) // no newline coming soon: keep none of it
                    {
                        Overlong++;
                        skipping = true;
                        rest = new List<byte>();
                    }
                    continue;
                }
                if (skipping) // the end of the line too long to keep
                {
                    skipping = false;
                    continue;
                }
                string line = Encoding.UTF8.GetString(rest.ToArray()).Trim();
                rest.Clear();
                if (line.Length > 0) output.Add(line);
            }
            return output;
        }

        /// <summary>The lines of a chunk given as text (its UTF-8).</summary>
        public List<string> Feed(string data)
        {
            return Feed(Encoding.UTF8.GetBytes(data ?? ""));
        }

        /// <summary>Whether a line was left incomplete (the stream cut mid-line).</summary>
        public bool Partial { get { return rest.Count > 0 || skipping; } }
    }
}
