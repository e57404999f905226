// The JSON the protocol needs, in one file: the SDK takes no dependency (Unity ships neither Newtonsoft nor
// System.Text.Json by default, and Godot's .NET flavour should not need a package to talk to npcmind).
//
// Values, read and written: null, bool, string, long (an integer literal that fits), double (any other
// number), List<object> (an array) and Dictionary<string, object> (an object). The writer also takes what a
// game naturally passes: any integral or floating type, decimal, IDictionary with string keys, and any
// IEnumerable. Every failure of Json.Parse and Json.Write is a JsonException: a game loop catches one type.

using System;
using System.Collections;
using System.Collections.Generic;
using System.Globalization;
using System.Text;

namespace NpcMind
{
    /// <summary>Text that is not JSON, or a value that cannot be written as JSON (NaN, a cycle, a type JSON
    /// has no form for). The only exception <see cref="Json"/> throws.</summary>
    public class JsonException : Exception
    {
        public JsonException(string message) : base(message) { }
    }

    /// <summary>A small JSON reader and writer.</summary>
    public static class Json
    {
        /// <summary>Nesting a reader or writer accepts: the reader recurses, and a cycle in a game's objects
        /// must end in a JsonException, never in a stack overflow (which no catch stops).</summary>
        public const int MaxDepth = 512;

        // --- reading -----------------------------------------------------------------------------------

        /// <summary>The value of a whole JSON text (RFC 8259; surrounding whitespace allowed).</summary>
        public static object Parse(string text)
        {
            if (text == null) throw new JsonException("no text (null)");
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

            public JsonException Error(string what)
            {
                return new JsonException(what + " at character " + Pos);
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

        /// <summary>A JSON number's literal as a double: past the range it is an infinity (as in JavaScript and
        /// Python); the .NET Framework and Mono throw OverflowException there instead.</summary>
        private static double ParseDouble(string literal)
        {
            try
            {
                double d = double.Parse(literal, NumberStyles.Float, CultureInfo.InvariantCulture);
                // Mono reads "-0.0" as +0: the sign is put back (the bits of -0, so no compiler folds it away)
                return d == 0 && literal[0] == '-' ? BitConverter.Int64BitsToDouble(long.MinValue) : d;
            }
            catch (OverflowException)
            {
                return literal[0] == '-' ? double.NegativeInfinity : double.PositiveInfinity;
            }
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
            if (depth >= MaxDepth) throw new JsonException("nested deeper than " + MaxDepth + " levels (a cycle?)");
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
                    if (key == null) throw new JsonException("an object key must be a string, not " + kv.Key.GetType().Name);
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
            throw new JsonException("a " + v.GetType().Name + " has no JSON form");
        }

        private static void WriteDouble(StringBuilder sb, double d)
        {
            if (double.IsNaN(d) || double.IsInfinity(d)) throw new JsonException(d + " is not a JSON number");
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
}
