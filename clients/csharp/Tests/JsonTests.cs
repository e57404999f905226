// The JSON reader and writer: what the protocol sends, and a fuzz of random values and malformed texts (fixed
// seed): every value written reads back equal, and no text makes the reader throw anything but NpcJsonException.

using System;
using System.Collections.Generic;
using System.Linq;
using System.Text;
using NpcMind;
using NUnit.Framework;

namespace NpcMind.Tests
{
    [TestFixture]
    public class JsonTests
    {
        [Test]
        public void ReadsEveryKindOfValue()
        {
            var v = (IDictionary<string, object>)Json.Parse(
                " {\"a\": [1, -2.5, 1e3, true, false, null, \"x\"], \"b\": {}, \"c\": [], \"big\": 12345678901234567890} ");
            var a = (IList<object>)v["a"];
            Assert.AreEqual(1L, a[0]);
            Assert.AreEqual(-2.5, a[1]);
            Assert.AreEqual(1000.0, a[2]);
            Assert.AreEqual(true, a[3]);
            Assert.AreEqual(false, a[4]);
            Assert.IsNull(a[5]);
            Assert.AreEqual("x", a[6]);
            Assert.AreEqual(0, ((IDictionary<string, object>)v["b"]).Count);
            Assert.AreEqual(0, ((IList<object>)v["c"]).Count);
            Assert.AreEqual(1.2345678901234567e19, v["big"]); // past long: a double
        }

        [Test]
        public void ReadsEscapesAndSurrogatePairs()
        {
            var s = (string)Json.Parse("\"q\\\" b\\\\ s\\/ \\b\\f\\n\\r\\t \\u00e9 \\ud83d\\ude00 \u00e9\"");
            Assert.AreEqual("q\" b\\ s/ \b\f\n\r\t \u00e9 \ud83d\ude00 \u00e9", s);
            Assert.AreEqual("\U0001F600", (string)Json.Parse("\"\\uD83D\\uDE00\""));
        }

        [Test]
        public void NumbersPastTheDoubleRangeAreInfinities()
        {
            // as JavaScript and Python read them; Mono's double.Parse throws OverflowException there
            Assert.AreEqual(double.PositiveInfinity, Json.Parse("1e999"));
            Assert.AreEqual(double.NegativeInfinity, Json.Parse("-1e999"));
            Assert.AreEqual(double.PositiveInfinity, Json.Parse("1" + new string('0', 400)));
            Assert.AreEqual(0.0, Json.Parse("1e-999"));
        }

        [Test]
        public void WritesWhatTheProtocolSends()
        {
            var body = new Dictionary<string, object>
            {
                { "client_id", "c1" }, { "epoch", 3 }, { "x", 0.1 }, { "ok", true }, { "none", null },
                { "list", new List<string> { "a", "b" } }, { "arr", new[] { 1.5, 2 } }, { "s", "\"\\\n\u0001\ud800" },
            };
            Assert.AreEqual("{\"client_id\":\"c1\",\"epoch\":3,\"x\":0.1,\"ok\":true,\"none\":null,\"list\":[\"a\",\"b\"],"
                + "\"arr\":[1.5,2],\"s\":\"\\\"\\\\\\n\\u0001\\ud800\"}", Json.Write(body));
        }

        [Test]
        public void WhatJsonCannotCarryIsAJsonException()
        {
            Assert.Throws<NpcJsonException>(() => Json.Write(double.NaN));
            Assert.Throws<NpcJsonException>(() => Json.Write(double.PositiveInfinity));
            Assert.Throws<NpcJsonException>(() => Json.Write(new object()));
            var cycle = new Dictionary<string, object>();
            cycle["me"] = cycle;
            Assert.Throws<NpcJsonException>(() => Json.Write(cycle));
            Assert.Throws<NpcJsonException>(() => Json.Write(new Dictionary<int, int> { { 1, 2 } }));
        }

        [Test]
        public void DeepNestingIsAJsonExceptionNotAStackOverflow()
        {
            Assert.Throws<NpcJsonException>(() => Json.Parse(new string('[', 100000)));
            Assert.Throws<NpcJsonException>(() => Json.Parse(string.Concat(Enumerable.Repeat("{\"a\":", 100000))));
            Assert.AreEqual(1L, Unwrap(Json.Parse(new string('[', 100) + "1" + new string(']', 100)), 100));
        }

        private static object Unwrap(object v, int times)
        {
            for (int i = 0; i < times; i++) v = ((IList<object>)v)[0];
            return v;
        }

        [TestCase("")]
        [TestCase(" ")]
        [TestCase("{")]
        [TestCase("[1,]")]
        [TestCase("{\"a\":1,}")]
        [TestCase("{\"a\" 1}")]
        [TestCase("{a:1}")]
        [TestCase("01")]
        [TestCase("1.")]
        [TestCase(".5")]
        [TestCase("-")]
        [TestCase("1e")]
        [TestCase("+1")]
        [TestCase("NaN")]
        [TestCase("Infinity")]
        [TestCase("tru")]
        [TestCase("nul")]
        [TestCase("\"abc")]
        [TestCase("\"\\x\"")]
        [TestCase("\"\\u12\"")]
        [TestCase("\"\\u12G4\"")]
        [TestCase("\"a\nb\"")]
        [TestCase("[1] [2]")]
        [TestCase("'a'")]
        public void MalformedTextIsRefused(string text)
        {
            Assert.Throws<NpcJsonException>(() => Json.Parse(text));
        }

        // --- the fuzz --------------------------------------------------------------------------------------

        private static object RandomValue(Random rng, int depth)
        {
            int kind = rng.Next(depth > 4 ? 6 : 8);
            switch (kind)
            {
                case 0: return null;
                case 1: return rng.Next(2) == 0;
                case 2:
                    // integers across long's range, its edges included
                    switch (rng.Next(4))
                    {
                        case 0: return long.MaxValue;
                        case 1: return long.MinValue;
                        case 2: return (long)rng.Next(-1000, 1000);
                        default: return (long)(rng.NextDouble() * 2e18 - 1e18);
                    }
                case 3:
                    switch (rng.Next(5))
                    {
                        case 0:
                            // any bit pattern: subnormals, huge exponents, every mantissa
                            double d = BitConverter.Int64BitsToDouble(((long)rng.Next() << 33) ^ ((long)rng.Next() << 2) ^ rng.Next(4));
                            return double.IsNaN(d) || double.IsInfinity(d) ? 0.5 : d;
                        case 1: return double.Epsilon;
                        case 2: return double.MaxValue;
                        case 3: return -0.0;
                        default: return (rng.NextDouble() - 0.5) * Math.Pow(10, rng.Next(-30, 30));
                    }
                case 4:
                case 5: return RandomString(rng);
                case 6:
                {
                    var list = new List<object>();
                    int n = rng.Next(6);
                    for (int i = 0; i < n; i++) list.Add(RandomValue(rng, depth + 1));
                    return list;
                }
                default:
                {
                    var map = new Dictionary<string, object>();
                    int n = rng.Next(6);
                    for (int i = 0; i < n; i++) map[RandomString(rng)] = RandomValue(rng, depth + 1);
                    return map;
                }
            }
        }

        private static string RandomString(Random rng)
        {
            var sb = new StringBuilder();
            int n = rng.Next(12);
            for (int i = 0; i < n; i++)
            {
                switch (rng.Next(6))
                {
                    case 0: sb.Append((char)rng.Next(0, 0x20)); break; // control characters: escaped
                    case 1: sb.Append("\"\\/"[rng.Next(3)]); break;
                    case 2: sb.Append(char.ConvertFromUtf32(rng.Next(0x10000, 0x10FFFF))); break; // a surrogate pair
                    case 3: sb.Append((char)rng.Next(0xD800, 0xE000)); break; // a lone surrogate
                    case 4: sb.Append((char)rng.Next(0x80, 0xD800)); break;
                    default: sb.Append((char)rng.Next(0x20, 0x7F)); break;
                }
            }
            return sb.ToString();
        }

        /// <summary>Equal as JSON: numbers by value (a double written "1" reads back a long), -0 keeps its sign.</summary>
        private static bool Same(object a, object b)
        {
            if (a == null || b == null) return a == null && b == null;
            if (Json.IsNumber(a) && Json.IsNumber(b))
            {
                if (a is long && b is long) return (long)a == (long)b;
                double x = Json.ToDouble(a), y = Json.ToDouble(b);
                return x == y && (x != 0 || 1 / x == 1 / y);
            }
            var la = a as IList<object>;
            if (la != null)
            {
                var lb = b as IList<object>;
                return lb != null && la.Count == lb.Count && la.Zip(lb, Same).All(t => t);
            }
            var ma = a as IDictionary<string, object>;
            if (ma != null)
            {
                var mb = b as IDictionary<string, object>;
                return mb != null && ma.Count == mb.Count && ma.All(kv => mb.ContainsKey(kv.Key) && Same(kv.Value, mb[kv.Key]));
            }
            return a.Equals(b);
        }

        [Test]
        public void FuzzEveryValueWrittenReadsBackTheSame()
        {
            var rng = new Random(20261203);
            for (int i = 0; i < 20000; i++)
            {
                object v = RandomValue(rng, 0);
                string text = Json.Write(v);
                object back = Json.Parse(text);
                Assert.IsTrue(Same(v, back), "value " + i + " did not read back: " + text + " -> " + Json.Write(back));
                Assert.AreEqual(text, Json.Write(back), "value " + i + " was not written the same twice");
                // the text is UTF-8 clean: a lone surrogate is escaped, never written raw
                Assert.AreEqual(text, Encoding.UTF8.GetString(new UTF8Encoding(false, true).GetBytes(text)));
            }
        }

        [Test]
        public void FuzzMalformedTextNeverThrowsAnythingButJsonException()
        {
            var rng = new Random(32);
            const string alphabet = "{}[]\",:\\ -+.eE0123456789tfnrulasu\u00e9\ud83d\n";
            int refused = 0, read = 0;
            for (int i = 0; i < 20000; i++)
            {
                string text;
                if (rng.Next(2) == 0)
                {
                    // a valid text, damaged: a character dropped, changed or repeated
                    var chars = Json.Write(RandomValue(rng, 0)).ToCharArray().ToList();
                    int edits = 1 + rng.Next(3);
                    for (int k = 0; k < edits && chars.Count > 0; k++)
                    {
                        int at = rng.Next(chars.Count);
                        switch (rng.Next(3))
                        {
                            case 0: chars.RemoveAt(at); break;
                            case 1: chars[at] = alphabet[rng.Next(alphabet.Length)]; break;
                            default: chars.Insert(at, chars[at]); break;
                        }
                    }
                    text = new string(chars.ToArray());
                }
                else
                {
                    var sb = new StringBuilder();
                    int n = rng.Next(40);
                    for (int k = 0; k < n; k++) sb.Append(alphabet[rng.Next(alphabet.Length)]);
                    text = sb.ToString();
                }
                try
                {
                    Json.Parse(text);
                    read++;
                }
                catch (NpcJsonException)
                {
                    refused++;
                }
                catch (Exception e)
                {
                    Assert.Fail("text " + i + " " + Cases.Show(text) + " threw " + e.GetType().Name + ": " + e.Message);
                }
            }
            Assert.That(refused, Is.GreaterThan(1000), "the fuzz made too few malformed texts to mean anything");
            Assert.That(read, Is.GreaterThan(100), "the fuzz made too few valid texts to mean anything");
        }
    }
}
