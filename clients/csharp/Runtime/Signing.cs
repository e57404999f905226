// What an outcome's Ed25519 signature covers, rebuilt exactly as the service signs it, so that a game server
// checks it (README): this SDK checks no signature itself. The base class library of .NET Standard 2.0 has no
// Ed25519, and no hand-written cryptography goes into this SDK; SHA-256 (the tape digest) is the library's.

using System.Collections.Generic;

namespace NpcMind
{
    /// <summary>The signed payload of a Finalize (docs/protocol.md, Signatures).</summary>
    public static class Signing
    {
        /// <summary>The payload's kind: a ruleset's verdict, never the origin of an inference.</summary>
        public const string Attests = "npcmind/ruleset-verdict/v1";

        /// <summary>Exactly what the signature covers: the Finalize as sent (its <c>signature</c> left out), for
        /// the path's NPC, by the ruleset its <c>ruleAudit.preset</c> names, over the returned tape's digest.
        /// Throws <see cref="NotCanonicalException"/> for a tape with no canonical form.</summary>
        public static Dictionary<string, object> SignedPayload(string npcId, IDictionary<string, object> finalize, object tape)
        {
            var verdict = new Dictionary<string, object>();
            foreach (var kv in finalize)
                if (kv.Key != "signature") verdict[kv.Key] = kv.Value;
            var audit = Json.Get(verdict, "ruleAudit") as IDictionary<string, object>;
            return new Dictionary<string, object>
            {
                { "attests", Attests },
                { "npcId", npcId },
                { "rulesetId", audit != null ? Json.Get(audit, "preset") : null },
                { "tapeDigest", Jcs.Digest(tape) },
                { "rulesetVerdict", verdict },
            };
        }
    }
}
