// The JSON the protocol needs, in one file: the SDK takes no dependency (Unity ships neither Newtonsoft nor
// System.Text.Json by default, and Godot's .NET flavour should not need a package to talk to npcmind).
//
// Values, read and written: null, bool, string, long (an integer literal that fits), double (any other
// number), List<object> (an array) and Dictionary<string, object> (an object). The writer also takes what a
// game naturally passes: any integral or floating type, decimal, IDictionary with string keys, and any
// IEnumerable. Every failure of Json.Parse and Json.Write is a NpcJsonException: a game loop catches one type.
// A number literal is read as the double nearest it, exactly (Doubles, at the end of this file; Jcs writes the
// canonical form with it), not by the runtime's double.Parse, which on Mono misses by a unit now and then. Its work
// is linear in the literal's length: past Doubles.KeptDigits significant digits the rest only say whether one of
// them is not 0 (the reading stays exact), so no big integer grows with a hostile number.

using System;
using System.Collections;
using System.Collections.Generic;
using System.Globalization;
using System.Numerics;
using System.Text;

namespace NpcMind
{
    /// <summary>Text that is not JSON, or a value that cannot be written as JSON (NaN, a cycle, a type JSON
    /// has no form for). The only exception <see cref="Json"/> throws.</summary>
    internal class NpcJsonException : Exception
    {
        public NpcJsonException(string message) : base(message) { }
    }

    /// <summary>A small JSON reader and writer.</summary>
    internal static class Json
    {
        /// <summary>Nesting a reader or writer accepts: the reader recurses, and a cycle in a game's objects
        /// must end in a NpcJsonException, never in a stack overflow (which no catch stops).</summary>
        public const int MaxDepth = 512;

        // --- reading -----------------------------------------------------------------------------------

        /// <summary>The value of a whole JSON text (RFC 8259; surrounding whitespace allowed).</summary>
        public static object Parse(string text)
        {
            if (text == null) throw new NpcJsonException("no text (null)");
            var r = new Reader(text);
            r.Space();
            object value = r.Value(0);
            r.Space();
            if (r.Pos < text.Length) throw r.Error("text after the value");
            return value;
        }

        private sealed class Reader
        {
            private readonly string s;
            public int Pos;

            public Reader(string text) { s = text; }

            public NpcJsonException Error(string what)
            {
                return new NpcJsonException(what + " at character " + Pos);
            }

            public void Space()
            {
                while (Pos < s.Length)
                {
                    char c = s[Pos];
                    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') Pos++;
                    else break;
                }
            }

            public object Value(int depth)
            {
                if (depth >= MaxDepth) throw Error("nested deeper than " + MaxDepth + " levels");
                if (Pos >= s.Length) throw Error("a value expected, the text ended");
                char c = s[Pos];
                switch (c)
                {
                    case '{': return Object(depth);
                    case '[': return Array(depth);
                    case '"': return String();
                    case 't': Word("true"); return true;
                    case 'f': Word("false"); return false;
                    case 'n': Word("null"); return null;
                    default:
                        if (c == '-' || (c >= '0' && c <= '9')) return Number();
                        throw Error("unexpected '" + c + "'");
                }
            }

            private void Word(string word)
            {
                if (string.CompareOrdinal(s, Pos, word, 0, word.Length) != 0) throw Error("not a value");
                Pos += word.Length;
            }

            private Dictionary<string, object> Object(int depth)
            {
                var o = new Dictionary<string, object>();
                Pos++;
                Space();
                if (Pos < s.Length && s[Pos] == '}') { Pos++; return o; }
                while (true)
                {
                    Space();
                    if (Pos >= s.Length || s[Pos] != '"') throw Error("a key (a string) expected");
                    string key = String();
                    Space();
                    if (Pos >= s.Length || s[Pos] != ':') throw Error("':' expected");
                    Pos++;
                    Space();
                    o[key] = Value(depth + 1); // a key given twice: the last wins, as in JavaScript and Python
                    Space();
                    if (Pos >= s.Length) throw Error("the object is not closed");
                    if (s[Pos] == ',') { Pos++; continue; }
                    if (s[Pos] == '}') { Pos++; return o; }
                    throw Error("',' or '}' expected");
                }
            }

            private List<object> Array(int depth)
            {
                var a = new List<object>();
                Pos++;
                Space();
                if (Pos < s.Length && s[Pos] == ']') { Pos++; return a; }
                while (true)
                {
                    Space();
                    a.Add(Value(depth + 1));
                    Space();
                    if (Pos >= s.Length) throw Error("the array is not closed");
                    if (s[Pos] == ',') { Pos++; continue; }
                    if (s[Pos] == ']') { Pos++; return a; }
                    throw Error("',' or ']' expected");
                }
            }

            private string String()
            {
                Pos++; // the opening quote
                StringBuilder sb = null;
                int run = Pos; // the start of characters copied as they are
                while (true)
                {
                    if (Pos >= s.Length) throw Error("the string is not closed");
                    char c = s[Pos];
                    if (c == '"')
                    {
                        string plain = s.Substring(run, Pos - run);
                        Pos++;
                        return sb == null ? plain : sb.Append(plain).ToString();
                    }
                    if (c < 0x20) throw Error("a control character in a string");
                    if (c != '\\') { Pos++; continue; }
                    if (sb == null) sb = new StringBuilder();
                    sb.Append(s, run, Pos - run);
                    Pos++;
                    if (Pos >= s.Length) throw Error("the string is not closed");
                    char e = s[Pos++];
                    switch (e)
                    {
                        case '"': sb.Append('"'); break;
                        case '\\': sb.Append('\\'); break;
                        case '/': sb.Append('/'); break;
                        case 'b': sb.Append('\b'); break;
                        case 'f': sb.Append('\f'); break;
                        case 'n': sb.Append('\n'); break;
                        case 'r': sb.Append('\r'); break;
                        case 't': sb.Append('\t'); break;
                        case 'u': sb.Append(Hex4()); break; // a pair's halves come as two escapes, kept as two chars
                        default: Pos--; throw Error("an unknown escape '\\" + e + "'");
                    }
                    run = Pos;
                }
            }

            private char Hex4()
            {
                if (Pos + 4 > s.Length) throw Error("\\u needs four hex digits");
                int v = 0;
                for (int i = 0; i < 4; i++)
                {
                    char h = s[Pos + i];
                    int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
                    if (d < 0) throw Error("\\u needs four hex digits");
                    v = v * 16 + d;
                }
                Pos += 4;
                return (char)v;
            }

            private object Number()
            {
                int start = Pos;
                bool integral = true;
                if (s[Pos] == '-') Pos++;
                if (Pos >= s.Length) throw Error("a digit expected");
                if (s[Pos] == '0') Pos++;
                else if (s[Pos] >= '1' && s[Pos] <= '9') Digits();
                else throw Error("a digit expected");
                if (Pos < s.Length && s[Pos] == '.')
                {
                    integral = false;
                    Pos++;
                    if (Pos >= s.Length || s[Pos] < '0' || s[Pos] > '9') throw Error("a digit expected after '.'");
                    Digits();
                }
                if (Pos < s.Length && (s[Pos] == 'e' || s[Pos] == 'E'))
                {
                    integral = false;
                    Pos++;
                    if (Pos < s.Length && (s[Pos] == '+' || s[Pos] == '-')) Pos++;
                    if (Pos >= s.Length || s[Pos] < '0' || s[Pos] > '9') throw Error("a digit expected in the exponent");
                    Digits();
                }
                string literal = s.Substring(start, Pos - start);
                long l;
                if (integral && long.TryParse(literal, NumberStyles.AllowLeadingSign, CultureInfo.InvariantCulture, out l))
                {
                    if (!(l == 0 && literal[0] == '-')) return l; // -0 stays a double: its sign is part of it
                }
                return ParseDouble(literal);
            }

            private void Digits()
            {
                while (Pos < s.Length && s[Pos] >= '0' && s[Pos] <= '9') Pos++;
            }
        }

        /// <summary>A JSON number's literal as the nearest double, as JavaScript and Python read it: past the range
        /// an infinity. Not the runtime's double.Parse: Mono's misses by a unit now and then, throws past the range,
        /// and reads "-0.0" as +0.</summary>
        private static double ParseDouble(string literal)
        {
            return Doubles.Read(literal);
        }

        // --- writing -----------------------------------------------------------------------------------

        /// <summary>The value as compact JSON text.</summary>
        public static string Write(object value)
        {
            var sb = new StringBuilder();
            WriteValue(sb, value, 0);
            return sb.ToString();
        }

        private static void WriteValue(StringBuilder sb, object v, int depth)
        {
            if (depth >= MaxDepth) throw new NpcJsonException("nested deeper than " + MaxDepth + " levels (a cycle?)");
            if (v == null) { sb.Append("null"); return; }
            string text = v as string;
            if (text != null) { WriteString(sb, text); return; }
            if (v is bool) { sb.Append((bool)v ? "true" : "false"); return; }
            // the shapes the SDK itself builds, without the non-generic interfaces' boxing (a frame's requests)
            if (v is double) { WriteDouble(sb, (double)v); return; }
            if (v is long) { sb.Append((long)v); return; }
            if (v is int) { sb.Append((int)v); return; }
            var generic = v as IDictionary<string, object>;
            if (generic != null)
            {
                sb.Append('{');
                bool first = true;
                foreach (var kv in generic)
                {
                    if (!first) sb.Append(',');
                    first = false;
                    WriteString(sb, kv.Key);
                    sb.Append(':');
                    WriteValue(sb, kv.Value, depth + 1);
                }
                sb.Append('}');
                return;
            }
            var strings = v as IList<string>;
            if (strings != null)
            {
                sb.Append('[');
                for (int i = 0; i < strings.Count; i++)
                {
                    if (i > 0) sb.Append(',');
                    if (strings[i] == null) sb.Append("null");
                    else WriteString(sb, strings[i]);
                }
                sb.Append(']');
                return;
            }
            var objects = v as IList<object>;
            if (objects != null)
            {
                sb.Append('[');
                for (int i = 0; i < objects.Count; i++)
                {
                    if (i > 0) sb.Append(',');
                    WriteValue(sb, objects[i], depth + 1);
                }
                sb.Append(']');
                return;
            }
            if (v is long || v is int || v is short || v is sbyte || v is byte || v is ushort || v is uint || v is ulong)
            {
                sb.Append(Convert.ToString(v, CultureInfo.InvariantCulture));
                return;
            }
            if (v is double || v is float) { WriteDouble(sb, Convert.ToDouble(v, CultureInfo.InvariantCulture)); return; }
            if (v is decimal) { sb.Append(((decimal)v).ToString(CultureInfo.InvariantCulture)); return; }
            if (v is char) { WriteString(sb, v.ToString()); return; }
            var map = v as IDictionary;
            if (map != null)
            {
                sb.Append('{');
                bool first = true;
                foreach (DictionaryEntry kv in map)
                {
                    string key = kv.Key as string;
                    if (key == null) throw new NpcJsonException("an object key must be a string, not " + kv.Key.GetType().Name);
                    if (!first) sb.Append(',');
                    first = false;
                    WriteString(sb, key);
                    sb.Append(':');
                    WriteValue(sb, kv.Value, depth + 1);
                }
                sb.Append('}');
                return;
            }
            var list = v as IEnumerable;
            if (list != null)
            {
                sb.Append('[');
                bool first = true;
                foreach (object item in list)
                {
                    if (!first) sb.Append(',');
                    first = false;
                    WriteValue(sb, item, depth + 1);
                }
                sb.Append(']');
                return;
            }
            throw new NpcJsonException("a " + v.GetType().Name + " has no JSON form");
        }

        private static void WriteDouble(StringBuilder sb, double d)
        {
            if (double.IsNaN(d) || double.IsInfinity(d)) throw new NpcJsonException(d + " is not a JSON number");
            // "R": the shortest text that reads back as the same double; .NET writes "1E+20", which JSON reads
            if (d == Math.Floor(d) && Math.Abs(d) < 1e15 && !(d == 0 && 1 / d < 0))
            {
                sb.Append((long)d); // an integral value: its digits ("R" is slow, and writes the same)
                return;
            }
            string r = d.ToString("R", CultureInfo.InvariantCulture);
            if (d == 0) r = "-0.0"; // only -0 gets here
            sb.Append(r);
        }

        private static void WriteString(StringBuilder sb, string s)
        {
            sb.Append('"');
            int run = 0; // plain characters are copied a run at a time
            for (int i = 0; i < s.Length; i++)
            {
                char c = s[i];
                if (c >= 0x20 && c != '"' && c != '\\' && (c < 0xD800 || c > 0xDFFF)) continue;
                sb.Append(s, run, i - run);
                run = i + 1;
                switch (c)
                {
                    case '"': sb.Append("\\\""); break;
                    case '\\': sb.Append("\\\\"); break;
                    case '\n': sb.Append("\\n"); break;
                    case '\r': sb.Append("\\r"); break;
                    case '\t': sb.Append("\\t"); break;
                    case '\b': sb.Append("\\b"); break;
                    case '\f': sb.Append("\\f"); break;
                    default:
                        if (c < 0x20) Escape(sb, c);
                        else if (char.IsHighSurrogate(c) && i + 1 < s.Length && char.IsLowSurrogate(s[i + 1]))
                        {
                            sb.Append(c).Append(s[i + 1]); // a pair: one character, as it is
                            i++;
                            run = i + 1;
                        }
                        else Escape(sb, c); // a surrogate alone: escaped, so the text stays UTF-8
                        break;
                }
            }
            sb.Append(s, run, s.Length - run);
            sb.Append('"');
        }

        private static void Escape(StringBuilder sb, char c)
        {
            sb.Append("\\u").Append(((int)c).ToString("x4", CultureInfo.InvariantCulture));
        }

        // --- reading values a parse gave (what every reader of an answer needs) --------------------------

        /// <summary>Whether a value is a JSON number (any numeric type; a bool is not one).</summary>
        public static bool IsNumber(object v)
        {
            return v is long || v is double || v is int || v is float || v is short || v is sbyte || v is byte
                || v is ushort || v is uint || v is ulong || v is decimal;
        }

        /// <summary>A number as a double (call after <see cref="IsNumber"/>).</summary>
        public static double ToDouble(object v)
        {
            return Convert.ToDouble(v, CultureInfo.InvariantCulture);
        }

        /// <summary>A JSON object as a dictionary, or null when it is none.</summary>
        public static IDictionary<string, object> AsObject(object v)
        {
            return v as IDictionary<string, object>;
        }

        /// <summary>The value under <paramref name="key"/> of an object, or null (no object, no key).</summary>
        public static object Get(object v, string key)
        {
            var o = v as IDictionary<string, object>;
            object found;
            return o != null && o.TryGetValue(key, out found) ? found : null;
        }
    }

    // Decimal text and doubles, exactly: the shortest digits of a double (the canonical JSON a signature covers)
    // and the double nearest a decimal literal (a tape read back as the service wrote it). Mono's own conversions
    // miss both now and then by one unit in the last place ("E16" rounds twice past 17 digits; double.Parse
    // misreads about one literal in 5,000, e.g. 0.1588785046728972, and a fifth of the subnormals), and one unit
    // is enough to change a tape the service signs.
    /// <summary>Exact conversions between doubles and decimal digits, in integer arithmetic.</summary>
    internal static class Doubles
    {
        /// <summary>Significant digits read exactly: a halfway point between two doubles has at most 767, so past
        /// 800 the other digits only count as "one of them is not 0" (a sticky digit). The reading stays the nearest
        /// double, and its big integers stay of a bounded size however long the literal (linear time).</summary>
        public const int KeptDigits = 800;

        private const double SmallestNormal = 2.2250738585072014E-308;
        private static readonly double[] ExactTens =
        {
            1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18,
            1e19, 1e20, 1e21, 1e22,
        };

        /// <summary>The fewest significant digits that read back as <paramref name="x"/> (positive, finite), the
        /// closest of them, without trailing zeros; <paramref name="n"/> with x = 0.digits × 10^n.</summary>
        public static string Shortest(double x, out int n)
        {
            BigInteger exactValue;
            int e2;
            long m = Parts(x, out e2);
            exactValue = e2 >= 0 ? new BigInteger(m) << e2 : new BigInteger(m) * BigInteger.Pow(5, -e2);
            string exact = exactValue.ToString(CultureInfo.InvariantCulture); // x = exact × 10^-shift
            int point = exact.Length - (e2 >= 0 ? 0 : -e2);
            // a normal double's 15 digits always read back when a shorter form does (DBL_DIG): its trailing zeros
            // go; a subnormal holds fewer digits, so every length is tried (5e-324 is "5e-324")
            for (int p = x < SmallestNormal ? 1 : 15; ; p++)
            {
                int carry;
                string digits = Round(exact, p, out carry).TrimEnd('0');
                n = point + carry;
                var candidate = BigInteger.Parse(digits, CultureInfo.InvariantCulture);
                if (p >= 17 || Place(candidate, n - digits.Length, x) == 0) return digits;
            }
        }

        /// <summary>The double nearest a JSON number's literal (ties to the even one), as JavaScript and Python
        /// read it: past the range an infinity, below half the least double a zero of its sign.</summary>
        public static double Read(string literal)
        {
            bool negative = literal[0] == '-';
            double x = Fast(literal, negative ? 1 : 0);
            if (double.IsNaN(x))
            {
                int k;
                BigInteger digits = Digits(negative ? literal.Substring(1) : literal, out k);
                string text = digits.ToString(CultureInfo.InvariantCulture);
                if (digits.IsZero || text.Length + k < -324) x = 0; // below 1e-324, under half the least double
                else if (text.Length + k > 310) x = double.PositiveInfinity; // from 1e309 up
                else x = Corrected(digits, k, Guess(text, k));
            }
            if (!negative) return x;
            return x == 0 ? BitConverter.Int64BitsToDouble(long.MinValue) : -x; // -0 by its bits: no folding
        }

        /// <summary>The common case without a big integer: at most 15 digits and a power of ten up to 22 are exact
        /// doubles, and one IEEE operation on them rounds right. NaN when the literal is not that case.</summary>
        private static double Fast(string literal, int from)
        {
            long digits = 0;
            int count = 0, k = 0, i = from;
            bool point = false;
            for (; i < literal.Length; i++)
            {
                char c = literal[i];
                if (c == '.') { point = true; continue; }
                if (c < '0' || c > '9') break;
                if (digits == 0 && c == '0') { if (point) k--; continue; } // leading zeros
                if (++count > 15) return double.NaN;
                digits = digits * 10 + (c - '0');
                if (point) k--;
            }
            if (i < literal.Length) // the exponent
            {
                int e;
                string exponent = literal.Substring(i + 1);
                if (!int.TryParse(exponent, NumberStyles.AllowLeadingSign, CultureInfo.InvariantCulture, out e)
                    || Math.Abs(e) > 400) return double.NaN;
                k += e;
            }
            if (digits == 0) return 0;
            if (k < -22 || k > 22) return double.NaN;
            return k >= 0 ? digits * ExactTens[k] : digits / ExactTens[-k];
        }

        /// <summary>The runtime's reading of the first 19 digits: a unit or two from the nearest double.</summary>
        private static double Guess(string digits, int k)
        {
            string head = digits.Length > 19 ? digits.Substring(0, 19) : digits;
            string literal = head[0] + "." + head.Substring(1) + "E"
                + (digits.Length - 1 + k).ToString(CultureInfo.InvariantCulture);
            try
            {
                return double.Parse(literal, NumberStyles.Float, CultureInfo.InvariantCulture);
            }
            catch (OverflowException)
            {
                return double.MaxValue; // Mono throws past the range: the correction steps on from the largest
            }
        }

        /// <summary>From <paramref name="x"/>, double by double, to the one whose rounding interval holds
        /// digits × 10^k (or infinity past the largest).</summary>
        private static double Corrected(BigInteger digits, int k, double x)
        {
            for (int step = 0; step < 64; step++) // a unit or two, in practice
            {
                int where = Place(digits, k, x);
                if (where == 0) return x;
                long bits = BitConverter.DoubleToInt64Bits(x) + where;
                if (bits < 0) return 0;
                x = BitConverter.Int64BitsToDouble(bits);
                if (double.IsInfinity(x)) return x;
            }
            return x;
        }

        private static readonly object[] Tens = new object[2048]; // 10^k, boxed: a reference is published whole

        /// <summary>10^k, each computed once (every number read past 15 digits needs one or two).</summary>
        private static BigInteger Ten(int k)
        {
            if (k >= Tens.Length) return BigInteger.Pow(10, k);
            object known = Tens[k];
            if (known == null) Tens[k] = known = BigInteger.Pow(10, k);
            return (BigInteger)known;
        }

        /// <summary>A double's bits as m × 2^e2 (m below 2^53; x positive or 0).</summary>
        private static long Parts(double x, out int e2)
        {
            long bits = BitConverter.DoubleToInt64Bits(x);
            int biased = (int)((bits >> 52) & 0x7FF);
            long m = bits & 0xFFFFFFFFFFFFFL;
            if (biased == 0) biased = 1; // subnormal
            else m |= 1L << 52;
            e2 = biased - 1075;
            return m;
        }

        /// <summary>Where digits × 10^k lies from the doubles' rounding interval around <paramref name="x"/>
        /// (positive or 0): -1 below it, 0 inside (it reads as x), 1 above.</summary>
        private static int Place(BigInteger digits, int k, double x)
        {
            int e2;
            long m = Parts(x, out e2);
            // in quarters of 2^e2: x is 4m, the next double up 4m+4, the next down 4m-4 (4m-2 at a power of two,
            // where the unit below is half); a decimal reads as x strictly inside the halfway points, or on one
            // when m is even (a tie goes to the even mantissa)
            bool narrowBelow = m == 1L << 52 && e2 > -1074;
            var high = new BigInteger(4 * m + 2);
            var low = new BigInteger(4 * m - (narrowBelow ? 1 : 2));
            int twos = 2 - e2; // digits × 10^k × 2^(2 - e2), as num / den
            BigInteger num = (digits * Ten(Math.Max(k, 0))) << Math.Max(twos, 0);
            BigInteger den = Ten(Math.Max(-k, 0)) << Math.Max(-twos, 0);
            int above = num.CompareTo(low * den), below = num.CompareTo(high * den);
            bool even = m % 2 == 0;
            if (even ? above < 0 : above <= 0) return -1;
            if (even ? below > 0 : below >= 0) return 1;
            return 0;
        }

        /// <summary>A JSON number's significant digits as an integer (at most KeptDigits and a sticky one), and
        /// <paramref name="k"/> with value = digits × 10^k: exact for rounding to a double, in one pass.</summary>
        internal static BigInteger Digits(string unsigned, out int k)
        {
            int e = unsigned.IndexOfAny(new[] { 'e', 'E' });
            int end = e < 0 ? unsigned.Length : e;
            long exponent = 0;
            if (e >= 0)
            {
                string text = unsigned.Substring(e + 1).TrimStart('+');
                // an exponent past long's range: clamped (the value is 0 or infinite long before)
                long big;
                if (!long.TryParse(text, NumberStyles.AllowLeadingSign, CultureInfo.InvariantCulture, out big))
                    big = text.StartsWith("-", StringComparison.Ordinal) ? long.MinValue : long.MaxValue;
                exponent = Math.Max(-(1L << 53), Math.Min(1L << 53, big)); // far past any literal's length
            }
            var kept = new StringBuilder();
            long fraction = 0, dropped = 0; // digits after the point; significant digits past KeptDigits
            bool point = false, sticky = false;
            for (int i = 0; i < end; i++)
            {
                char c = unsigned[i];
                if (c == '.') { point = true; continue; }
                if (point) fraction++;
                if (kept.Length == 0 && c == '0') continue; // a leading zero
                if (kept.Length < KeptDigits) kept.Append(c);
                else
                {
                    dropped++;
                    if (c != '0') sticky = true;
                }
            }
            long scale = exponent - fraction + dropped;
            if (sticky) // some digit past those kept is not 0: a 1 one place further stands for them all
            {
                kept.Append('1');
                scale--;
            }
            k = (int)Math.Max(-1000000, Math.Min(1000000, scale)); // 0 or infinite long before either bound
            return FromDigits(kept);
        }

        /// <summary>Decimal digits as an integer, 18 at a time (a few multiplications: BigInteger.Parse costs more
        /// on Mono than the rest of a reading together).</summary>
        private static BigInteger FromDigits(StringBuilder digits)
        {
            BigInteger value = BigInteger.Zero;
            for (int start = 0; start < digits.Length; start += 18)
            {
                int length = Math.Min(18, digits.Length - start);
                long chunk = 0;
                for (int i = start; i < start + length; i++) chunk = chunk * 10 + (digits[i] - '0');
                value = start == 0 ? new BigInteger(chunk) : value * Ten(length) + chunk;
            }
            return value;
        }

        /// <summary>Decimal digits rounded to <paramref name="p"/> of them, to the closest (a tie to the even
        /// one); <paramref name="carry"/> is 1 when 99.. rounded up to 100...</summary>
        private static string Round(string digits, int p, out int carry)
        {
            carry = 0;
            if (digits.Length <= p) return digits;
            var kept = digits.Substring(0, p).ToCharArray();
            string rest = digits.Substring(p);
            bool half = rest[0] == '5' && rest.Substring(1).TrimEnd('0').Length == 0;
            bool up = rest[0] > '5' || (rest[0] == '5' && !half) || (half && (kept[p - 1] - '0') % 2 == 1);
            if (!up) return new string(kept);
            for (int i = p - 1; i >= 0; i--)
            {
                if (kept[i] != '9') { kept[i]++; return new string(kept); }
                kept[i] = '0';
            }
            carry = 1;
            return "1" + new string(kept);
        }
    }
}
