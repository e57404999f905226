// A distilled local policy (docs/policy.md): the game decides what the model would, without asking it.
//
// `npcmind distill` writes a portable JSON file of small decision trees over the manifest's named fields; this
// evaluates it exactly as the Python and TypeScript SDKs do (the shared vectors in clients/conformance/policy/
// check all three): the same encodings, rounding half to even to a feature's quantum, the trees' leaves summed in
// tree order, masking to the legal actions, the first action in the file's order on a tie. Loading checks the
// whole file with the same limits and messages, so that Choose cannot fail or run long in the game: every failure
// of Load is a PolicyException naming the place, and Choose never throws.

using System;
using System.Collections.Generic;
using System.Globalization;
using System.Linq;
using System.Text;

namespace NpcMind
{
    /// <summary>A policy file that cannot be used: malformed, of an unknown format, or for another manifest
    /// version (TypeScript's PolicyError).</summary>
    public class PolicyException : NpcMindException
    {
        public PolicyException(string message) : base(message) { }
    }

    /// <summary>A loaded policy file: <see cref="Choose"/> for each entity, or null to ask the service.</summary>
    public sealed class Policy
    {
        public const string Format = "npcmind-policy";
        public const int FormatVersion = 1;
        /// <summary>distill writes ~60 kB a type: room for hundreds of types, not for a memory bomb (UTF-8 bytes).</summary>
        public const int MaxBytes = 16 * 1024 * 1024;
        /// <summary>A policy's JSON nests 7 deep: bounded before parsing.</summary>
        public const int MaxNesting = 32;
        public const int MaxDepth = 64;
        public const int MaxNodes = 1000000;
        public const int MaxTypes = 256;
        public const int MaxTrees = 32;
        public const int MaxActions = 256;
        public const int MaxFeatures = 4096;

        private static readonly string[] Sources = { "observation", "world", "scope_state", "trigger", "profile", "legal" };
        private static readonly string[] Encodings = { "number", "boolean", "enum" };

        private sealed class Feature
        {
            public string Source;
            public string Field;
            public string Encoding;
            public string Value;
            public double? Quantum;
            public double Missing;
        }

        private sealed class Tree
        {
            public int[] Feature;
            public double[] Threshold;
            public int[] Left;
            public int[] Right;
            public double[][] Value;
        }

        private sealed class TypePolicy
        {
            public string[] Actions;
            public Feature[] Features;
            public Tree[] Trees;
            public Dictionary<string, int> Index;
        }

        public readonly string ManifestVersion;
        public readonly string ClientId;
        public readonly string CreatedAt;
        private readonly Dictionary<string, TypePolicy> types = new Dictionary<string, TypePolicy>();

        private Policy(IDictionary<string, object> data)
        {
            ManifestVersion = Text(data, "manifest_version");
            ClientId = Json.Get(data, "client_id") as string;
            CreatedAt = Json.Get(data, "created_at") as string;
            var all = Json.Get(data, "types") as IDictionary<string, object>;
            if (all == null) throw new PolicyException("policy file: `types` must be an object of entity types");
            Count(all);
            foreach (var kv in all) types[kv.Key] = TypeOf(kv.Key, kv.Value);
        }

        /// <summary>A policy from JSON text. With <paramref name="manifestVersion"/> (the game's, from GET
        /// /v1/manifest), a file distilled for another version is refused.</summary>
        public static Policy Load(string source, string manifestVersion = null, int maxBytes = MaxBytes)
        {
            if (source == null) throw new PolicyException("a policy must be a JSON object");
            return FromData(ParseJson(source, "policy JSON", maxBytes), manifestVersion);
        }

        /// <summary>A policy from its UTF-8 bytes (what a transport reads).</summary>
        public static Policy Load(byte[] source, string manifestVersion = null, int maxBytes = MaxBytes)
        {
            if (source == null) throw new PolicyException("a policy must be a JSON object");
            return FromData(ParseJson(Utf8(source, "policy JSON", maxBytes), "policy JSON", maxBytes), manifestVersion);
        }

        /// <summary>A policy from a parsed object (what <see cref="Json.Parse"/> gives).</summary>
        public static Policy Load(IDictionary<string, object> source, string manifestVersion = null)
        {
            return FromData(source, manifestVersion);
        }

        private static Policy FromData(object data, string manifestVersion)
        {
            var o = data as IDictionary<string, object>;
            if (o == null) throw new PolicyException("a policy must be a JSON object");
            object format = Json.Get(o, "format");
            object version = Json.Get(o, "format_version");
            bool versionOk = Json.IsNumber(version) && Json.ToDouble(version) == FormatVersion;
            if (!Format.Equals(format) || !versionOk)
                throw new PolicyException("not a policy file this SDK reads: `format` must be '" + Format
                    + "' and `format_version` " + FormatVersion + " (found " + Found(o, "format") + ", "
                    + Found(o, "format_version") + ")");
            var policy = new Policy(o);
            if (manifestVersion != null) policy.Check(manifestVersion);
            return policy;
        }

        private static string Found(IDictionary<string, object> o, string key)
        {
            if (!o.ContainsKey(key)) return "undefined";
            try { return Json.Write(o[key]); } catch (NpcJsonException) { return "null"; }
        }

        /// <summary>The entity types this policy covers.</summary>
        public List<string> Covers
        {
            get { var l = types.Keys.ToList(); l.Sort(string.CompareOrdinal); return l; }
        }

        /// <summary>Refuse this policy for a game on another manifest version: its fields may mean something else
        /// now.</summary>
        public void Check(string manifestVersion)
        {
            if (manifestVersion != ManifestVersion)
                throw new PolicyException("this policy was distilled for manifest version " + ManifestVersion
                    + ", and the game runs " + manifestVersion
                    + ": a policy for another manifest version is never used (distill again)");
        }

        /// <summary>The most probable legal action and its probability among the legal ones; null for a type this
        /// policy does not cover or when no legal action has any probability. Never throws: a value not of its
        /// feature's kind is that feature's <c>missing</c>; legal actions that are not strings are not legal.</summary>
        public PolicyChoice Choose(object type, object observation, object legalActions, object world = null,
            object scopeState = null, object trigger = null, object profile = null)
        {
            TypePolicy tp;
            var name = type as string; // a type that is not a string is not one this file covers
            if (name == null || !types.TryGetValue(name, out tp)) return null;
            var legal = new HashSet<string>();
            var list = legalActions as System.Collections.IEnumerable;
            if (list != null && !(legalActions is string) && !(legalActions is System.Collections.IDictionary))
                foreach (var a in list)
                {
                    var action = a as string;
                    if (action != null) legal.Add(action);
                }
            var s = new Situation
            {
                Observation = observation as IDictionary<string, object>,
                World = world as IDictionary<string, object>,
                ScopeState = scopeState as IDictionary<string, object>,
                Trigger = trigger,
                Profile = profile,
                Legal = legal,
            };
            return ChooseIn(tp, s);
        }

        private sealed class Situation
        {
            public IDictionary<string, object> Observation;
            public IDictionary<string, object> World;
            public IDictionary<string, object> ScopeState;
            public object Trigger;
            public object Profile;
            public HashSet<string> Legal;
        }

        /// <summary>Python's round() on a float: to the nearest integer, a tie to the even one (the service's cache
        /// key).</summary>
        internal static double RoundHalfEven(double x)
        {
            double floor = Math.Floor(x);
            double diff = x - floor;
            if (diff < 0.5) return floor;
            if (diff > 0.5) return floor + 1;
            return floor % 2 == 0 ? floor : floor + 1;
        }

        private static object Field(IDictionary<string, object> o, string field)
        {
            object v;
            return o != null && o.TryGetValue(field, out v) ? v : null;
        }

        /// <summary>The number the trees compare for this feature (the encoding is the file's contract).</summary>
        private static double Encode(Feature f, Situation s)
        {
            if (f.Source == "legal") return f.Value != null && s.Legal.Contains(f.Value) ? 1 : 0;
            object raw;
            switch (f.Source)
            {
                case "observation": raw = f.Field != null ? Field(s.Observation, f.Field) : (object)s.Observation; break;
                case "world": raw = f.Field != null ? Field(s.World, f.Field) : (object)s.World; break;
                case "scope_state": raw = f.Field != null ? Field(s.ScopeState, f.Field) : (object)s.ScopeState; break;
                case "trigger": raw = f.Field != null ? Field(s.Trigger as IDictionary<string, object>, f.Field) : s.Trigger; break;
                default: raw = f.Field != null ? Field(s.Profile as IDictionary<string, object>, f.Field) : s.Profile; break;
            }
            if (raw == null) return f.Missing;
            if (f.Encoding == "enum") return raw is string && (string)raw == f.Value ? 1 : 0;
            if (f.Encoding == "boolean") return raw is bool ? ((bool)raw ? 1 : 0) : f.Missing;
            if (!Json.IsNumber(raw)) return f.Missing;
            double x = Json.ToDouble(raw);
            if (double.IsNaN(x) || double.IsInfinity(x)) return f.Missing;
            if (!f.Quantum.HasValue) return x;
            double steps = x / f.Quantum.Value; // a huge value over a tiny quantum overflows: not a number to compare
            if (double.IsInfinity(steps) || double.IsNaN(steps)) return f.Missing;
            double q = RoundHalfEven(steps) * f.Quantum.Value; // as the service's cache key rounds it
            return double.IsInfinity(q) || double.IsNaN(q) ? f.Missing : q;
        }

        /// <summary>Legal-action masking over the mean of the trees' leaves, each summed in tree order; a feature is
        /// encoded when a walk first reaches it, at most once.</summary>
        private static PolicyChoice ChooseIn(TypePolicy tp, Situation s)
        {
            var places = new List<int>();
            foreach (var a in s.Legal)
            {
                int i;
                if (tp.Index.TryGetValue(a, out i)) places.Add(i);
            }
            places.Sort();
            var x = new Dictionary<int, double>();
            var sums = new double[places.Count];
            foreach (var t in tp.Trees)
            {
                int node = 0;
                int f;
                while ((f = t.Feature[node]) >= 0)
                {
                    double v;
                    if (!x.TryGetValue(f, out v)) x[f] = v = Encode(tp.Features[f], s);
                    node = v <= t.Threshold[node] ? t.Left[node] : t.Right[node];
                }
                var row = t.Value[node];
                for (int j = 0; j < places.Count; j++) sums[j] = sums[j] + row[places[j]];
            }
            int best = -1;
            double bestP = 0, legal = 0;
            for (int j = 0; j < places.Count; j++)
            {
                double p = sums[j] / tp.Trees.Length;
                legal += p;
                if (p > bestP) { best = places[j]; bestP = p; }
            }
            if (best < 0 || legal <= 0) return null;
            return new PolicyChoice(tp.Actions[best], bestP / legal);
        }

        // --- loading ---------------------------------------------------------------------------------------

        private static string Thousands(long n)
        {
            return n.ToString("#,0", CultureInfo.InvariantCulture);
        }

        /// <summary>The file's size in types, trees and nodes, counted before any tree is built: a huge file fails
        /// fast.</summary>
        private static void Count(IDictionary<string, object> all)
        {
            if (all.Count > MaxTypes)
                throw new PolicyException("policy file: `types` holds " + Thousands(all.Count) + " types: at most " + Thousands(MaxTypes));
            long nodes = 0;
            foreach (var kv in all)
            {
                var trees = Json.Get(kv.Value, "trees") as IList<object> ?? new List<object>();
                if (trees.Count > MaxTrees)
                    throw new PolicyException("policy file: `types." + kv.Key + ".trees` holds " + Thousands(trees.Count)
                        + " trees: at most " + MaxTrees + " a type");
                foreach (var t in trees)
                {
                    var feature = Json.Get(t, "feature") as IList<object>;
                    nodes += feature != null ? feature.Count : 0;
                }
                if (nodes > MaxNodes)
                    throw new PolicyException("policy file: `types." + kv.Key + "` brings the trees past " + Thousands(MaxNodes) + " nodes in all");
            }
        }

        /// <summary>The text of a policy: UTF-8 (as JSON is), within the size bound.</summary>
        private static string Utf8(byte[] bytes, string where, int max)
        {
            if (bytes.Length > max) throw new PolicyException(where + ": larger than " + Thousands(max) + " bytes");
            try
            {
                return new UTF8Encoding(false, true).GetString(bytes);
            }
            catch (ArgumentException)
            {
                throw new PolicyException(where + ": not UTF-8");
            }
        }

        /// <summary>Parsed JSON, its size and nesting bounded before parsing, as the other SDKs bound them.</summary>
        private static object ParseJson(string source, string where, int max)
        {
            bool big = source.Length > max || (3L * source.Length > max && Encoding.UTF8.GetByteCount(source) > max);
            if (big) throw new PolicyException(where + ": larger than " + Thousands(max) + " bytes");
            int at = TooDeep(source);
            if (at >= 0) throw new PolicyException(where + ": nested deeper than " + MaxNesting + " levels (at character " + at + ")");
            try
            {
                return Json.Parse(source);
            }
            catch (NpcJsonException e)
            {
                throw new PolicyException(where + ": not JSON (" + e.Message + ")");
            }
        }

        /// <summary>Where the JSON first nests deeper than MaxNesting (outside strings), or -1, in one pass.</summary>
        internal static int TooDeep(string source)
        {
            int depth = 0;
            bool inString = false;
            for (int i = 0; i < source.Length; i++)
            {
                char c = source[i];
                if (inString)
                {
                    if (c == '\\') i++; // the next character is escaped
                    else if (c == '"') inString = false;
                }
                else if (c == '"') inString = true;
                else if (c == '[' || c == '{')
                {
                    if (++depth > MaxNesting) return i;
                }
                else if (c == ']' || c == '}') depth--;
            }
            return -1;
        }

        private static string Text(IDictionary<string, object> data, string key)
        {
            var v = Json.Get(data, key) as string;
            if (string.IsNullOrEmpty(v)) throw new PolicyException("policy file: `" + key + "` must be a non-empty string");
            return v;
        }

        private static double Num(object v, string path)
        {
            if (!Json.IsNumber(v)) throw new PolicyException("policy file: `" + path + "` must be a finite number");
            double x = Json.ToDouble(v);
            if (double.IsNaN(x) || double.IsInfinity(x)) throw new PolicyException("policy file: `" + path + "` must be a finite number");
            return x;
        }

        /// <summary>An integer, clamped into int's range (every bound it is compared with is far inside it).</summary>
        private static int Int(object v, string path)
        {
            double x = Num(v, path);
            if (Math.Floor(x) != x) throw new PolicyException("policy file: `" + path + "` must be an integer");
            return x > int.MaxValue ? int.MaxValue : x < int.MinValue ? int.MinValue : (int)x;
        }

        /// <summary>A leaf is a distribution: probabilities in [0, 1] (so no sum can overflow) and some probability.</summary>
        private static void CheckLeaf(double[] row, string path, int nActions)
        {
            if (row.Length != nActions) throw new PolicyException("policy file: `" + path + "` must hold one probability an action");
            if (!row.All(p => p >= 0 && p <= 1) || row.Sum() <= 0)
                throw new PolicyException("policy file: `" + path + "` must hold probabilities from 0 to 1, not all 0");
        }

        private static Feature FeatureOf(object spec, string path)
        {
            var o = spec as IDictionary<string, object>;
            if (o == null) throw new PolicyException("policy file: `" + path + "` must be an object");
            var source = Json.Get(o, "source") as string;
            var encoding = Json.Get(o, "encoding") as string;
            if (source == null || Array.IndexOf(Sources, source) < 0)
                throw new PolicyException("policy file: `" + path + ".source` must be one of " + string.Join(", ", Sources));
            if (encoding == null || Array.IndexOf(Encodings, encoding) < 0)
                throw new PolicyException("policy file: `" + path + ".encoding` must be one of " + string.Join(", ", Encodings));
            var field = Json.Get(o, "field") as string;
            if ((source == "observation" || source == "world" || source == "scope_state") && field == null)
                throw new PolicyException("policy file: `" + path + ".field` must name a field of the " + source);
            var value = Json.Get(o, "value") as string;
            if (encoding == "enum" && value == null)
                throw new PolicyException("policy file: `" + path + ".value` must be the enum value this feature tests");
            object quantum = Json.Get(o, "quantum");
            double? q = quantum == null ? (double?)null : Num(quantum, path + ".quantum");
            if (q.HasValue && q.Value <= 0) throw new PolicyException("policy file: `" + path + ".quantum` must be above 0");
            object missing = Json.Get(o, "missing");
            return new Feature
            {
                Source = source,
                Field = field,
                Encoding = encoding,
                Value = value,
                Quantum = q,
                Missing = missing == null ? 0 : Num(missing, path + ".missing"),
            };
        }

        /// <summary>One tree, checked whole: a bad index would loop or crash in the game, not here.</summary>
        private static Tree TreeOf(object spec, string path, int nFeatures, int nActions)
        {
            var o = spec as IDictionary<string, object>;
            if (o == null) throw new PolicyException("policy file: `" + path + "` must be an object");
            var featureList = Json.Get(o, "feature") as IList<object>;
            int n = featureList != null ? featureList.Count : 0;
            var arrays = new Dictionary<string, IList<object>>();
            foreach (var k in new[] { "feature", "threshold", "left", "right", "value" })
            {
                var v = Json.Get(o, k) as IList<object>;
                if (v == null || v.Count != n || n == 0)
                    throw new PolicyException("policy file: `" + path + "." + k + "` must be a list of one item a node ("
                        + (n > 0 ? n.ToString(CultureInfo.InvariantCulture) : "at least 1") + ")");
                arrays[k] = v;
            }
            Func<string, int[]> ints = k => arrays[k].Select((v, i) => Int(v, path + "." + k + "[" + i + "]")).ToArray();
            var t = new Tree
            {
                Feature = ints("feature"),
                Threshold = arrays["threshold"].Select((v, i) => Num(v, path + ".threshold[" + i + "]")).ToArray(),
                Left = ints("left"),
                Right = ints("right"),
                Value = arrays["value"].Select((row, i) =>
                    ((row as IList<object>) ?? new List<object>()).Select(p => Num(p, path + ".value[" + i + "]")).ToArray()).ToArray(),
            };
            var depth = new int[n]; // children come after their parent: one pass sees parents first
            for (int i = 0; i < n; i++)
            {
                int f = t.Feature[i];
                if (f >= nFeatures) throw new PolicyException("policy file: `" + path + ".feature[" + i + "]` is not a feature of the type");
                int l = t.Left[i], r = t.Right[i];
                if (f < 0)
                {
                    t.Feature[i] = -1;
                    CheckLeaf(t.Value[i], path + ".value[" + i + "]", nActions);
                    continue;
                }
                if (!(i < l && l < n && i < r && r < n))
                    throw new PolicyException("policy file: `" + path + "` node " + i + " must point to later nodes of the tree");
                int d = depth[i];
                if (d >= MaxDepth) throw new PolicyException("policy file: `" + path + "` node " + i + " is deeper than " + MaxDepth + " levels");
                depth[l] = Math.Max(depth[l], d + 1);
                depth[r] = Math.Max(depth[r], d + 1);
            }
            return t;
        }

        private static TypePolicy TypeOf(string name, object spec)
        {
            string path = "types." + name;
            var o = spec as IDictionary<string, object>;
            if (o == null) throw new PolicyException("policy file: `" + path + "` must be an object");
            var actions = Json.Get(o, "actions") as IList<object>;
            if (actions == null || actions.Count == 0 || !actions.All(a => a is string))
                throw new PolicyException("policy file: `" + path + ".actions` must be a list of action names");
            if (actions.Count > MaxActions)
                throw new PolicyException("policy file: `" + path + ".actions` names " + Thousands(actions.Count) + " actions: at most " + MaxActions + " a type");
            var names = actions.Cast<string>().ToArray();
            if (new HashSet<string>(names).Count != names.Length)
                throw new PolicyException("policy file: `" + path + ".actions` must not name an action twice");
            var features = Json.Get(o, "features") as IList<object>;
            var trees = Json.Get(o, "trees") as IList<object>;
            if (features == null) throw new PolicyException("policy file: `" + path + ".features` must be a list");
            if (features.Count > MaxFeatures)
                throw new PolicyException("policy file: `" + path + ".features` holds " + Thousands(features.Count) + " features: at most " + Thousands(MaxFeatures) + " a type");
            if (trees == null || trees.Count == 0)
                throw new PolicyException("policy file: `" + path + ".trees` must be a list of at least one tree");
            var feats = features.Select((f, i) => FeatureOf(f, path + ".features[" + i + "]")).ToArray();
            var index = new Dictionary<string, int>();
            for (int i = 0; i < names.Length; i++) index[names[i]] = i;
            return new TypePolicy
            {
                Actions = names,
                Features = feats,
                Trees = trees.Select((t, i) => TreeOf(t, path + ".trees[" + i + "]", feats.Length, names.Length)).ToArray(),
                Index = index,
            };
        }
    }
}
