// RFC 8785 (JCS) canonical JSON, so the SDK rebuilds the exact bytes an outcome's signature covers (and the
// SHA-256 tape digest inside them) for the game server that checks the signature: this SDK does not
// (README: no kept, audited Ed25519 in .NET Standard 2.0). The same rules as the Python and TypeScript
// SDKs' jcs, checked against docs/signature-vectors.json.

using System;
using System.Collections;
using System.Collections.Generic;
using System.Globalization;
using System.Linq;
using System.Security.Cryptography;
using System.Text;

namespace NpcMind
{
    /// <summary>A value with no canonical form (a number no double holds, a type JSON has none for), and where
    /// it lies (<c>npcState.gold</c>, <c>[0]</c>).</summary>
    internal sealed class NotCanonicalException : Exception
    {
        public readonly string Path;
        public readonly string Problem;

        public NotCanonicalException(string path, string problem)
            : base((string.IsNullOrEmpty(path) ? "value" : path) + ": " + problem)
        {
            Path = path;
            Problem = problem;
        }
    }

    /// <summary>Canonical JSON (RFC 8785): keys sorted by UTF-16 code units, no whitespace, numbers as
    /// ECMAScript writes them, strings escaped as JSON.stringify escapes them, UTF-8.</summary>
    internal static class Jcs
    {
        private const long SafeInteger = 9007199254740992; // 2^53: every integer up to it is one double

        /// <summary>The canonical JSON text of a value (as <see cref="Json.Parse"/> gives, or a game's own).</summary>
        public static string Canonical(object value)
        {
            var sb = new StringBuilder();
            Write(sb, value, "", 0);
            return sb.ToString();
        }

        /// <summary>The canonical form's UTF-8 bytes: what is hashed and signed.</summary>
        public static byte[] CanonicalBytes(object value)
        {
            return new UTF8Encoding(false, true).GetBytes(Canonical(value));
        }

        /// <summary>SHA-256 hex (lowercase) of a value's canonical JSON: the tape digest inside a signed outcome.</summary>
        public static string Digest(object value)
        {
            using (var sha = SHA256.Create())
            {
                var hash = sha.ComputeHash(CanonicalBytes(value));
                var sb = new StringBuilder(64);
                foreach (var b in hash) sb.Append(b.ToString("x2", CultureInfo.InvariantCulture));
                return sb.ToString();
            }
        }

        /// <summary>ECMAScript's Number.prototype.toString of a double (RFC 8785 section 3.2.2.3).</summary>
        public static string Number(double x)
        {
            if (double.IsNaN(x) || double.IsInfinity(x)) throw new NotCanonicalException("", Num(x) + " is not a JSON number");
            if (x == 0) return "0"; // -0 too
            if (x < 0) return "-" + Number(-x);
            int n;
            string digits = Doubles.Shortest(x, out n); // x = 0.digits × 10^n
            int k = digits.Length;
            if (k <= n && n <= 21) return digits + new string('0', n - k);
            if (0 < n && n <= 21) return digits.Substring(0, n) + "." + digits.Substring(n);
            if (-6 < n && n <= 0) return "0." + new string('0', -n) + digits;
            int e = n - 1;
            string mantissa = k == 1 ? digits : digits[0] + "." + digits.Substring(1);
            return mantissa + "e" + (e >= 0 ? "+" : "-") + Math.Abs(e).ToString(CultureInfo.InvariantCulture);
        }

        private static string Num(double x)
        {
            return double.IsNaN(x) ? "NaN" : x > 0 ? "Infinity" : "-Infinity";
        }

        private static void Write(StringBuilder sb, object v, string path, int depth)
        {
            if (depth >= Json.MaxDepth) throw new NotCanonicalException(path, "nested deeper than " + Json.MaxDepth + " levels");
            if (v == null) { sb.Append("null"); return; }
            if (v is string) { String(sb, (string)v); return; }
            if (v is bool) { sb.Append((bool)v ? "true" : "false"); return; }
            if (v is long || v is ulong)
            {
                // an integer beyond 2^53 is the double JSON.parse reads from its digits, as in the other SDKs
                bool exact = v is long ? (long)v >= -SafeInteger && (long)v <= SafeInteger : (ulong)v <= SafeInteger;
                double d = v is long ? (long)v : (double)(ulong)v;
                sb.Append(exact ? Convert.ToString(v, CultureInfo.InvariantCulture) : Number(d));
                return;
            }
            if (Json.IsNumber(v)) { Scalar(sb, v, path); return; }
            var map = v as IDictionary<string, object>;
            if (map != null) { Object(sb, map, path, depth); return; }
            if (v is IDictionary) throw new NotCanonicalException(path, "an object's keys must be strings");
            var list = v as IEnumerable;
            if (list != null)
            {
                sb.Append('[');
                int i = 0;
                foreach (var item in list)
                {
                    if (i > 0) sb.Append(',');
                    Write(sb, item, path + "[" + i + "]", depth + 1);
                    i++;
                }
                sb.Append(']');
                return;
            }
            throw new NotCanonicalException(path, "a " + v.GetType().Name + " is not JSON");
        }

        private static void Scalar(StringBuilder sb, object v, string path)
        {
            try
            {
                sb.Append(Number(Json.ToDouble(v)));
            }
            catch (NotCanonicalException e)
            {
                throw new NotCanonicalException(path, e.Problem);
            }
        }

        private static void Object(StringBuilder sb, IDictionary<string, object> map, string path, int depth)
        {
            var keys = map.Keys.ToList();
            keys.Sort(string.CompareOrdinal); // ordinal: by UTF-16 code units, as RFC 8785 asks
            sb.Append('{');
            for (int i = 0; i < keys.Count; i++)
            {
                if (i > 0) sb.Append(',');
                String(sb, keys[i]);
                sb.Append(':');
                Write(sb, map[keys[i]], path == "" ? keys[i] : path + "." + keys[i], depth + 1);
            }
            sb.Append('}');
        }

        /// <summary>A string as JSON.stringify writes it: <c>\" \\ \b \t \n \f \r</c>, other controls and lone
        /// surrogates as lowercase <c>\u00xx</c>, everything else as it is.</summary>
        private static void String(StringBuilder sb, string s)
        {
            sb.Append('"');
            for (int i = 0; i < s.Length; i++)
            {
                char c = s[i];
                switch (c)
                {
                    case '"': sb.Append("\\\""); continue;
                    case '\\': sb.Append("\\\\"); continue;
                    case '\b': sb.Append("\\b"); continue;
                    case '\t': sb.Append("\\t"); continue;
                    case '\n': sb.Append("\\n"); continue;
                    case '\f': sb.Append("\\f"); continue;
                    case '\r': sb.Append("\\r"); continue;
                }
                bool pair = char.IsHighSurrogate(c) && i + 1 < s.Length && char.IsLowSurrogate(s[i + 1]);
                if (c < 0x20 || (char.IsSurrogate(c) && !pair))
                    sb.Append("\\u").Append(((int)c).ToString("x4", CultureInfo.InvariantCulture));
                else if (pair) sb.Append(c).Append(s[++i]);
                else sb.Append(c);
            }
            sb.Append('"');
        }
    }
}
