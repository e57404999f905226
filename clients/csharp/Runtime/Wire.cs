// The SDK's enums and their words on the wire, in one place: the API has enums (a game switches on them), the
// protocol has strings (unchanged). Reading a word that is not one of the protocol's is an error naming the field:
// the service's schema closes each of these sets (spec a2g.md section 3 and 6, npc-process.md, the seed's
// MemoryStoreInstructionType), so a new word is a new protocol version, never a value to guess at.

using System;

namespace NpcMind
{
    internal static class Wire
    {
        private static readonly string[] Outcomes = { "done", "failed", "interrupted", "rejected" };
        private static readonly string[] Sources = { "AI", "local" };
        private static readonly string[] Codes = { "budget", "busy", "invalid_choice", "refused", "unavailable" };
        private static readonly string[] Steps = { "IdentifyActor", "QueryVector", "ExecuteInference", "Finalize" };
        private static readonly string[] Memories = { "observation", "experience", "knowledge", "emotion", "dialogue" };

        /// <summary>The words of each enum, in its order (the messages list them).</summary>
        internal static string Words(Type e)
        {
            return string.Join(", ", Table(e));
        }

        internal static string Text(ReportOutcome v) { return Word(Outcomes, (int)v, typeof(ReportOutcome)); }
        internal static string Text(ChoiceSource v) { return Word(Sources, (int)v, typeof(ChoiceSource)); }
        internal static string Text(FallbackCode v) { return Word(Codes, (int)v, typeof(FallbackCode)); }
        internal static string Text(NpcStep v) { return Word(Steps, (int)v, typeof(NpcStep)); }
        internal static string Text(MemoryKind v) { return Word(Memories, (int)v, typeof(MemoryKind)); }

        internal static bool TryRead(string word, out ReportOutcome v) { int i = Find(Outcomes, word); v = (ReportOutcome)i; return i >= 0; }
        internal static bool TryRead(string word, out FallbackCode v) { int i = Find(Codes, word); v = (FallbackCode)i; return i >= 0; }
        internal static bool TryRead(string word, out NpcStep v) { int i = Find(Steps, word); v = (NpcStep)i; return i >= 0; }
        internal static bool TryRead(string word, out MemoryKind v) { int i = Find(Memories, word); v = (MemoryKind)i; return i >= 0; }

        /// <summary>Whether an enum value is one of its members (a cast int may be none).</summary>
        internal static bool Defined(ReportOutcome v) { return (int)v >= 0 && (int)v < Outcomes.Length; }

        private static string[] Table(Type e)
        {
            if (e == typeof(ReportOutcome)) return Outcomes;
            if (e == typeof(ChoiceSource)) return Sources;
            if (e == typeof(FallbackCode)) return Codes;
            if (e == typeof(NpcStep)) return Steps;
            if (e == typeof(MemoryKind)) return Memories;
            throw new ArgumentException("no wire words for " + e.Name);
        }

        private static string Word(string[] words, int i, Type e)
        {
            if (i < 0 || i >= words.Length)
                throw new ArgumentOutOfRangeException(e.Name, i, e.Name + ": " + i + " is none of " + string.Join(", ", words));
            return words[i];
        }

        private static int Find(string[] words, string word)
        {
            return word == null ? -1 : Array.IndexOf(words, word);
        }
    }
}
