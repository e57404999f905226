// Every cap on what the SDK reads from the network, in one place (README: Limits). A hostile or broken server must
// not make a game buffer an unbounded body, parse a number in superlinear time, or hold a frame: each body is read
// no further than one byte past its cap, and the error said names the cap.

using System.Globalization;

namespace NpcMind
{
    /// <summary>The SDK's caps on what it reads (bytes, characters, lines): the README's Limits.</summary>
    public static class Limits
    {
        /// <summary>An answer of the decision API (decide, manifest, health, session, telemetry, report, prompt).</summary>
        public const int MaxAnswerBytes = 1024 * 1024;
        /// <summary>An error body (4xx, 5xx): what is read of it to say what it was.</summary>
        public const int MaxErrorBytes = 64 * 1024;
        /// <summary>One streamed decide answer in all (its 16 lines are a few kB).</summary>
        public const int MaxStreamBytes = 1024 * 1024;
        /// <summary>Lines of one streamed decide answer: 16 decisions and the last line, four times over; past it the
        /// stream is ended as cut (an endless stream of lines for ids never asked).</summary>
        public const int MaxStreamLines = 4 * Scheduler.Batch + 1;
        /// <summary>One answer of the dialogue loop (POST /npcs/{id}/process: the tape comes back whole).</summary>
        public const int MaxStepBytes = 4 * 1024 * 1024;
        /// <summary>GET /v1/keys: a few public keys.</summary>
        public const int MaxKeysBytes = 64 * 1024;
        /// <summary>The answer of an OpenAI-compatible cortex (as the service reads its provider's).</summary>
        public const int MaxCortexBytes = 8 * 1024 * 1024;

        /// <summary>The cap that applies to a body of this status: the call's own, or the error cap below it.</summary>
        internal static int For(int status, int maxBytes, int maxErrorBytes)
        {
            if (maxBytes <= 0) maxBytes = int.MaxValue;
            if (maxErrorBytes <= 0) maxErrorBytes = MaxErrorBytes;
            return status >= 400 && maxErrorBytes < maxBytes ? maxErrorBytes : maxBytes;
        }

        /// <summary>What is said of a body past its cap: where, the cap in bytes, and its name.</summary>
        internal static string TooLarge(string where, int cap, string name)
        {
            return where + ": the body is larger than " + Bytes(cap) + " bytes (" + name + "), not read past that";
        }

        /// <summary>The name of the cap that applies: an error body's, or the call's.</summary>
        internal static string Name(int status, int maxBytes, string callCap)
        {
            return status >= 400 && MaxErrorBytes < maxBytes ? "Limits.MaxErrorBytes" : callCap;
        }

        /// <summary>A count with thousands separators (as every message of the SDK writes a cap).</summary>
        internal static string Bytes(long n)
        {
            return n.ToString("#,0", CultureInfo.InvariantCulture);
        }
    }
}
