// The distilled policy on the shared vectors (clients/conformance/policy/): every SDK gives the same choice for
// every case, and refuses the same malformed files with the same message.

using System;
using System.Collections.Generic;
using System.IO;
using System.Linq;
using System.Text;
using NpcMind;
using NUnit.Framework;

namespace NpcMind.Tests
{
    [TestFixture]
    public class PolicyTests
    {
        private static string Folder { get { return Path.Combine(Cases.Folder, "policy"); } }

        private static IList<object> Blocks()
        {
            return (IList<object>)Cases.Read(Path.Combine(Folder, "cases.json"));
        }

        /// <summary>Every case of cases.json, named after its policy file and its name.</summary>
        public static IEnumerable<TestCaseData> Vectors()
        {
            foreach (var block in Blocks())
                foreach (var c in (IList<object>)Json.Get(block, "cases"))
                    yield return new TestCaseData(Json.Get(block, "policy"), Json.Get(block, "manifest_version"), c)
                        .SetName("policy vector " + Json.Get(block, "policy") + ": " + Json.Get(c, "name"));
        }

        private static readonly Dictionary<string, Policy> Loaded = new Dictionary<string, Policy>();

        private static Policy File(string name, string version)
        {
            Policy p;
            if (!Loaded.TryGetValue(name, out p))
                Loaded[name] = p = Policy.Load(System.IO.File.ReadAllText(Path.Combine(Folder, name)), version);
            return p;
        }

        [TestCaseSource("Vectors")]
        public void Vector(string file, string version, object c)
        {
            var policy = File(file, version);
            var o = (IDictionary<string, object>)c;
            Func<string, object> given = k => o.ContainsKey(k) ? o[k] : null; // absent: not passed (null)
            var got = policy.Choose(o["type"], o["observation"], o["legal_actions"], given("world"),
                given("scope_state"), given("trigger"), given("profile"));
            var expect = o["expect"];
            if (expect == null)
            {
                Assert.IsNull(got, "expected no choice, got " + (got == null ? "" : got.Action + " " + got.Confidence));
                return;
            }
            Assert.IsNotNull(got, "expected " + Cases.Show(expect) + ", got no choice");
            Assert.AreEqual(Json.Get(expect, "action"), got.Action);
            Assert.AreEqual(Json.ToDouble(Json.Get(expect, "confidence")), got.Confidence, 1e-12);
        }

        [Test]
        public void TheVectorsAreRead()
        {
            Assert.That(Vectors().Count(), Is.GreaterThan(20));
            Assert.That(Blocks().Count, Is.EqualTo(3));
        }

        [Test]
        public void EveryFileIsLoadedTheSameFromTextBytesAndObject()
        {
            foreach (var block in Blocks())
            {
                string text = System.IO.File.ReadAllText(Path.Combine(Folder, (string)Json.Get(block, "policy")));
                var version = (string)Json.Get(block, "manifest_version");
                var fromText = Policy.Load(text, version);
                var fromBytes = Policy.Load(Encoding.UTF8.GetBytes(text), version);
                var fromObject = Policy.Load((IDictionary<string, object>)Json.Parse(text), version);
                foreach (var c in ((IList<object>)Json.Get(block, "cases")).Cast<IDictionary<string, object>>())
                {
                    Func<Policy, string> choose = p =>
                    {
                        var got = p.Choose(c["type"], c["observation"], c["legal_actions"], Json.Get(c, "world"),
                            Json.Get(c, "scope_state"), Json.Get(c, "trigger"), Json.Get(c, "profile"));
                        return got == null ? "none" : got.Action + " " + got.Confidence.ToString("R");
                    };
                    Assert.AreEqual(choose(fromText), choose(fromBytes));
                    Assert.AreEqual(choose(fromText), choose(fromObject));
                }
            }
        }

        [Test]
        public void AFileForAnotherManifestVersionIsRefusedNamingItsOwn()
        {
            foreach (var block in Blocks())
            {
                string text = System.IO.File.ReadAllText(Path.Combine(Folder, (string)Json.Get(block, "policy")));
                var own = (string)Json.Get(block, "manifest_version");
                var e = Assert.Throws<PolicyException>(() => Policy.Load(text, "sha256:another"));
                StringAssert.Contains(own, e.Message);
                StringAssert.Contains("sha256:another", e.Message);
                Assert.AreEqual(own, Policy.Load(text).ManifestVersion);
            }
        }

        // --- refused.json -----------------------------------------------------------------------------------

        public static IEnumerable<TestCaseData> RefusedVectors()
        {
            foreach (var v in (IList<object>)Cases.Read(Path.Combine(Folder, "refused.json")))
                yield return new TestCaseData(v).SetName("refused vector: " + Json.Get(v, "name"));
        }

        /// <summary>A vector's input in every form Load takes it: the object and its JSON text; a text and its
        /// UTF-8 bytes; bytes.</summary>
        private static IEnumerable<KeyValuePair<string, Func<Policy>>> Inputs(IDictionary<string, object> v)
        {
            if (v.ContainsKey("policy"))
            {
                var policy = (IDictionary<string, object>)v["policy"];
                yield return new KeyValuePair<string, Func<Policy>>("object", () => Policy.Load(policy));
                string text = WriteWithInfinity(policy);
                yield return new KeyValuePair<string, Func<Policy>>("text", () => Policy.Load(text));
            }
            if (v.ContainsKey("text"))
            {
                var sb = new StringBuilder();
                foreach (var part in (IList<object>)v["text"])
                {
                    var repeat = part as IList<object>;
                    if (repeat == null) sb.Append((string)part);
                    else sb.Insert(sb.Length, (string)repeat[0], (int)Json.ToDouble(repeat[1]));
                }
                string text = sb.ToString();
                yield return new KeyValuePair<string, Func<Policy>>("text", () => Policy.Load(text));
                yield return new KeyValuePair<string, Func<Policy>>("bytes", () => Policy.Load(Encoding.UTF8.GetBytes(text)));
            }
            if (v.ContainsKey("bytes_hex"))
            {
                string hex = (string)v["bytes_hex"];
                var bytes = Enumerable.Range(0, hex.Length / 2).Select(i => Convert.ToByte(hex.Substring(2 * i, 2), 16)).ToArray();
                yield return new KeyValuePair<string, Func<Policy>>("bytes", () => Policy.Load(bytes));
            }
        }

        /// <summary>JSON text of a vector's object: an integer past the float range was read as an infinity, and is
        /// written back as 1e999 (a number past the range again), as the README says.</summary>
        private static string WriteWithInfinity(object v)
        {
            const string mark = "\u0001inf";
            Func<object, object> swap = null;
            swap = x =>
            {
                if (x is double && double.IsInfinity((double)x)) return (double)x > 0 ? mark : "-" + mark;
                var list = x as IList<object>;
                if (list != null) return list.Select(swap).ToList();
                var map = x as IDictionary<string, object>;
                if (map != null) return map.ToDictionary(kv => kv.Key, kv => swap(kv.Value));
                return x;
            };
            return Json.Write(swap(v)).Replace("\"-\\u0001inf\"", "-1e999").Replace("\"\\u0001inf\"", "1e999");
        }

        [TestCaseSource("RefusedVectors")]
        public void Refused(object vector)
        {
            var v = (IDictionary<string, object>)vector;
            string says = (string)v["says"];
            int forms = 0;
            foreach (var input in Inputs(v))
            {
                forms++;
                try
                {
                    input.Value();
                    Assert.Fail("loaded from its " + input.Key + ", expected a PolicyException saying " + says);
                }
                catch (PolicyException e)
                {
                    StringAssert.Contains(says, e.Message, "from its " + input.Key);
                }
            }
            Assert.That(forms, Is.GreaterThan(0), "a vector with no input");
        }

        // --- choose never throws ------------------------------------------------------------------------------

        [Test]
        public void ChooseNeverThrowsWhateverTheGameGives()
        {
            string text = System.IO.File.ReadAllText(Path.Combine(Folder, "handmade.policy.json"));
            var p = Policy.Load(text);
            var odd = new object[]
            {
                null, true, 0L, -1L, 1.5, double.NaN, double.PositiveInfinity, "x", new List<object>(),
                new Dictionary<string, object>(), new List<object> { 1L }, double.Epsilon, 1e308, new object(),
            };
            foreach (var type in p.Covers.Concat(new[] { "nope", "" }))
                foreach (var value in odd)
                {
                    var obs = new Dictionary<string, object>
                    {
                        { "hp_fraction", value }, { "distance_to_player", value }, { "sees_player", value },
                        { "current_action", value },
                    };
                    foreach (var legal in new object[] { new[] { "idle", "flee" }, value, new List<object> { "chase", 1L } })
                        Assert.DoesNotThrow(() => p.Choose(type, obs, legal, value, value, value, value));
                }
        }

        [Test]
        public void RoundingToAQuantumIsHalfToEven()
        {
            // the function itself, beside the shared vectors' ties (edge.policy.json, type half): the service's
            // cache key rounds so
            Assert.AreEqual(0.0, Policy.RoundHalfEven(0.5));
            Assert.AreEqual(2.0, Policy.RoundHalfEven(1.5));
            Assert.AreEqual(2.0, Policy.RoundHalfEven(2.5));
            Assert.AreEqual(-2.0, Policy.RoundHalfEven(-2.5));
            Assert.AreEqual(-2.0, Policy.RoundHalfEven(-1.5));
            Assert.AreEqual(3.0, Policy.RoundHalfEven(2.5000000000000004));
        }
    }
}
