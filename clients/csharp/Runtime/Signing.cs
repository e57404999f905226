// What an outcome's Ed25519 signature covers, rebuilt exactly as the service signs it, and its check: by the vendored
// Bouncy Castle (Ed25519.cs) on every platform, or by a game server (README). No cryptography is written in this SDK; SHA-256
// (the tape digest) is the base class library's.

using System;
using System.Collections.Generic;
using System.Text;

namespace NpcMind
{
    /// <summary>The signed payload of a Finalize (docs/protocol.md, Signatures).</summary>
    internal static class Signing
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

        /// <summary>Whether <paramref name="signature"/> (<c>kid.base64url</c>) is a valid signature of the canonical
        /// payload by the key of its kid (kid -> base64url, as GET /v1/keys lists them), as the Python and TypeScript
        /// SDKs' <c>verify</c>: one encoding per signature, an unknown kid is false.</summary>
        public static bool Verify(string signature, string payloadCanonical, IDictionary<string, string> keys)
        {
            if (string.IsNullOrEmpty(signature) || payloadCanonical == null || keys == null) return false;
            int dot = signature.IndexOf('.');
            if (dot < 0) return false;
            string kid = signature.Substring(0, dot), sig = signature.Substring(dot + 1), key;
            if (sig.Length == 0 || !keys.TryGetValue(kid, out key) || key == null) return false;
            byte[] sigRaw = Unb64(sig), keyRaw = Unb64(key);
            if (sigRaw == null || keyRaw == null || B64(sigRaw) != sig) return false; // no malleable padding bits
            return Ed25519.Verify(sigRaw, Encoding.UTF8.GetBytes(payloadCanonical), keyRaw);
        }

        /// <summary>Base64url without padding: the form of keys and signatures on the wire.</summary>
        public static string B64(byte[] raw)
        {
            return Convert.ToBase64String(raw).TrimEnd('=').Replace('+', '-').Replace('/', '_');
        }

        /// <summary>The bytes of a base64url text without padding; null when it is not one.</summary>
        public static byte[] Unb64(string text)
        {
            if (text == null || text.IndexOfAny(new[] { '+', '/', '=' }) >= 0 || text.Length % 4 == 1) return null;
            string b = text.Replace('-', '+').Replace('_', '/');
            try
            {
                return Convert.FromBase64String(b + new string('=', (4 - b.Length % 4) % 4));
            }
            catch (FormatException)
            {
                return null;
            }
        }
    }
}
