// Where the shared test data lives, and comparing by the conformance format's subset rule.

using System;
using System.Collections.Generic;
using System.IO;
using System.Linq;
using NpcMind;

namespace NpcMind.Tests
{
    internal static class Cases
    {
        /// <summary>The shared cases (clients/conformance, copied into the package's Tests/Data~/conformance by
        /// `Build~/build.sh data`): NPCMIND_CONFORMANCE (build.sh sets it), else found upward from the working
        /// folder and the test dll, or in Unity's Packages/ folder. Inside the package, so the tests run after a
        /// git-URL install.</summary>
        public static string Folder
        {
            get
            {
                string given = Environment.GetEnvironmentVariable("NPCMIND_CONFORMANCE");
                if (!string.IsNullOrEmpty(given)) return given;
                string inside = Path.Combine(Path.Combine("Tests", "Data~"), "conformance");
                string unity = Path.Combine(Path.Combine("Packages", "com.npcmind.client"), inside);
                if (Directory.Exists(unity)) return Path.GetFullPath(unity);
                foreach (var start in new[] { Directory.GetCurrentDirectory(), AppDomain.CurrentDomain.BaseDirectory })
                {
                    for (var dir = new DirectoryInfo(start); dir != null; dir = dir.Parent)
                    {
                        string candidate = Path.Combine(dir.FullName, inside);
                        if (Directory.Exists(candidate)) return candidate;
                    }
                }
                throw new InvalidOperationException("Tests/Data~/conformance not found: set NPCMIND_CONFORMANCE");
            }
        }

        /// <summary>docs/signature-vectors.json (the service's own vectors of canonical JSON and signed outcomes),
        /// copied beside the cases.</summary>
        public static string SignatureVectors
        {
            get { return Path.Combine(Path.Combine(Folder, ".."), "signature-vectors.json"); }
        }

        public static object Read(string path)
        {
            return Json.Parse(File.ReadAllText(path));
        }

        /// <summary><paramref name="expected"/> as a subset of <paramref name="actual"/>, by the README's rules;
        /// where it differs, or null.</summary>
        public static string Differs(object expected, object actual, string at)
        {
            if (expected == null)
                return actual == null ? null : at + ": expected null, got " + Show(actual);
            var list = expected as IList<object>;
            if (list != null)
            {
                var other = actual as IList<object>;
                if (other == null || other.Count != list.Count)
                    return at + ": expected " + Show(expected) + ", got " + Show(actual);
                for (int i = 0; i < list.Count; i++)
                {
                    string d = Differs(list[i], other[i], at + "[" + i + "]");
                    if (d != null) return d;
                }
                return null;
            }
            var obj = expected as IDictionary<string, object>;
            if (obj != null)
            {
                var other = actual as IDictionary<string, object>;
                if (other == null) return at + ": expected an object, got " + Show(actual);
                foreach (var kv in obj)
                {
                    object value;
                    other.TryGetValue(kv.Key, out value);
                    string d = Differs(kv.Value, value, at + "." + kv.Key);
                    if (d != null) return d;
                }
                return null;
            }
            if (Json.IsNumber(expected) && Json.IsNumber(actual))
                return Json.ToDouble(expected) == Json.ToDouble(actual) ? null : at + ": expected " + Show(expected) + ", got " + Show(actual);
            return Equals(expected, actual) ? null : at + ": expected " + Show(expected) + ", got " + Show(actual);
        }

        public static string Show(object v)
        {
            try { return Json.Write(v); } catch (NpcJsonException) { return v == null ? "null" : v.ToString(); }
        }
    }
}
