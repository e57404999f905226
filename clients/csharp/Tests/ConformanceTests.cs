// Runs every conformance case of clients/conformance/ against the C# scheduler: the same files the Python and
// TypeScript SDKs run, step by step as clients/typescript/test/conformance.test.ts does, so the three cannot drift.

using System;
using System.Collections.Generic;
using System.IO;
using System.Linq;
using System.Reflection;
using System.Runtime.Serialization;
using NpcMind;
using NUnit.Framework;

namespace NpcMind.Tests
{
    [TestFixture]
    public class ConformanceTests
    {
        /// <summary>Every case of the folder, named after its file and its `name` (the test's id).</summary>
        public static IEnumerable<TestCaseData> All()
        {
            foreach (var path in Directory.GetFiles(Cases.Folder, "*.json").OrderBy(p => Path.GetFileName(p), StringComparer.Ordinal))
            {
                object data = Cases.Read(path);
                var list = data as IList<object> ?? new List<object> { data };
                foreach (var c in list)
                    yield return new TestCaseData(c).SetName("conformance " + Path.GetFileName(path) + ": " + Json.Get(c, "name"));
            }
        }

        [Test]
        public void TheFolderHoldsCases()
        {
            Assert.That(All().Count(), Is.GreaterThan(0), "no case in " + Cases.Folder);
        }

        [TestCaseSource("All")]
        public void Case(object c)
        {
            Run((IDictionary<string, object>)c);
        }

        private static IDictionary<string, object> ErrorAnswers
        {
            get { return (IDictionary<string, object>)Cases.Read(Path.Combine(Path.Combine(Cases.Folder, "errors"), "error-answers.json")); }
        }

        /// <summary>The error-answer vectors (clients/conformance/errors/), named after their `name`.</summary>
        public static IEnumerable<TestCaseData> ErrorVectors()
        {
            foreach (var v in (IList<object>)ErrorAnswers["vectors"])
                yield return new TestCaseData(v).SetName("error answer: " + Json.Get(v, "name"));
        }

        /// <summary>An error answer gives the exception every SDK makes of it: its kind (.NET's ...Exception for
        /// the file's ...Error), status, code and message.</summary>
        [TestCaseSource("ErrorVectors")]
        public void ErrorAnswer(object vector)
        {
            var v = (IDictionary<string, object>)vector;
            int status = (int)Json.ToDouble(v["status"]);
            NpcMindException e = Errors.Refused(status, Json.Get(v, "body"), (string)ErrorAnswers["what"]);
            Assert.AreEqual(((string)v["kind"]).Replace("Error", "Exception"), e.GetType().Name);
            Assert.AreEqual(status, e.Status);
            Assert.AreEqual(Json.Get(v, "code") as string, e.Code);
            Assert.AreEqual((string)v["message"], e.Message);
        }

        /// <summary>A DecideClient over the case's scheduler, for the game's own setters (Scope, ScopeState,
        /// Threshold) in set_scope and set_threshold steps: a setter that did nothing fails the case. Made without its
        /// constructor (no sender, no clock: the setters reach only the scheduler).</summary>
        internal static DecideClient Client(Scheduler s)
        {
            var client = (DecideClient)FormatterServices.GetUninitializedObject(typeof(DecideClient));
            typeof(DecideClient).GetField("core", BindingFlags.NonPublic | BindingFlags.Instance).SetValue(client, s);
            return client;
        }

        /// <summary>The scheduler a case's options describe (snake_case in the files).</summary>
        internal static Scheduler Make(IDictionary<string, object> c)
        {
            var o = Json.Get(c, "options") as IDictionary<string, object> ?? new Dictionary<string, object>();
            Func<string, object> opt = k => Json.Get(o, k);
            var options = new SchedulerOptions
            {
                ClientId = opt("client_id") as string ?? "c1",
                Epoch = opt("epoch") != null ? (int)Json.ToDouble(opt("epoch")) : 0,
                World = opt("world") as IDictionary<string, object>,
                Scope = opt("scope") as string,
                ScopeState = opt("scope_state") as IDictionary<string, object>,
                ApiKey = opt("api_key") as string,
                RefreshMs = opt("refresh_ms") != null ? Json.ToDouble(opt("refresh_ms")) : (double?)null,
                EventWindowMs = opt("event_window_ms") != null ? Json.ToDouble(opt("event_window_ms")) : 50,
                TelemetryMs = opt("telemetry_ms") != null ? Json.ToDouble(opt("telemetry_ms")) : 500,
                Threshold = opt("threshold") != null ? Json.ToDouble(opt("threshold")) : 0.8,
                MaxInFlight = opt("workers") != null ? (int)Json.ToDouble(opt("workers")) : 4,
                TimeoutMs = Json.IsNumber(opt("timeout_s")) ? Json.ToDouble(opt("timeout_s")) * 1000 : (double?)null,
                Manifest = Json.Get(c, "manifest") as IDictionary<string, object>,
                ManifestVersion = Json.Get(c, "manifest_version") as string,
                FetchPolicy = opt("fetch_policy") is bool ? (bool)opt("fetch_policy") : (bool?)null,
                PolicyRefreshMs = opt("policy_refresh_ms") != null ? Json.ToDouble(opt("policy_refresh_ms")) : 60000,
                Policy = Local(c),
                Stream = opt("stream") is bool ? (bool)opt("stream") : true,
                Log = m => { },
            };
            return new Scheduler(options);
        }

        /// <summary>The game's own policy a case gives: a function of the entity's id (`policy`), or a distilled
        /// policy file (`policy_file`, loaded as a Policy).</summary>
        private static LocalPolicy Local(IDictionary<string, object> c)
        {
            if (c.ContainsKey("policy_file")) return LocalPolicy.Of(Policy.Load((IDictionary<string, object>)c["policy_file"]));
            var table = Json.Get(c, "policy") as IDictionary<string, object>;
            if (table == null) return null;
            return LocalPolicy.Of(e =>
            {
                var pair = Json.Get(table, e.Id) as IList<object>;
                return pair == null ? new PolicyChoice("", 0) : new PolicyChoice((string)pair[0], Json.ToDouble(pair[1]));
            });
        }

        /// <summary>A choice as the files name its fields.</summary>
        private static object ChoiceJson(Choice c)
        {
            if (c == null) return null;
            return new Dictionary<string, object>
            {
                { "action", c.Action }, { "source", Wire.Text(c.Source) }, { "confidence", c.Confidence }, { "cached", c.Cached },
                { "decision_id", c.DecisionId }, { "label", c.Label }, { "expires_at_ms", c.ExpiresAt },
            };
        }

        /// <summary>A request as the files write it (its body as sent: the JSON text the transport would send).</summary>
        private static object RequestJson(OutRequest r)
        {
            return new Dictionary<string, object>
            {
                { "ref", r.Ref }, { "method", r.Method }, { "path", r.Path },
                { "headers", r.Headers.ToDictionary(kv => kv.Key, kv => (object)kv.Value) },
                { "after", r.After.Cast<object>().ToList() },
                { "body", r.Json == null ? null : Json.Parse(r.Json) },
                { "stream", r.Stream },
            };
        }

        private static List<string> Strings(object v)
        {
            var list = v as IList<object>;
            return list == null ? null : list.Select(x => (string)x).ToList();
        }

        /// <summary>The counters as the files name them.</summary>
        private static object StatsJson(Stats s)
        {
            return new Dictionary<string, object>
            {
                { "requests", s.Requests }, { "asked", s.Asked }, { "ai", s.Ai }, { "cached", s.Cached },
                { "local", s.Local }, { "fallbacks", s.Fallbacks.ToDictionary(kv => Wire.Text(kv.Key), kv => (object)kv.Value) },
                { "dropped_epoch", s.DroppedEpoch }, { "illegal", s.Illegal }, { "errors", s.Errors },
                { "reports_sent", s.ReportsSent }, { "refused", s.Refused },
                { "streamed_decisions", s.StreamedDecisions }, { "streamed_ms_total", s.StreamedMsTotal },
                { "streams_cut", s.StreamsCut },
            };
        }

        /// <summary>One case, step by step; the first step that differs fails it with what was expected and what came.</summary>
        public static void Run(IDictionary<string, object> c)
        {
            var s = Make(c);
            var emitted = new HashSet<string>();
            var answered = new HashSet<string>();
            var steps = (IList<object>)c["steps"];
            for (int i = 0; i < steps.Count; i++)
            {
                var step = (IDictionary<string, object>)steps[i];
                string at = "step " + i + " (" + Json.Get(step, "do") + " at " + Cases.Show(Json.Get(step, "at_ms")) + " ms)";
                double now = Json.ToDouble(step["at_ms"]);
                var args = Json.Get(step, "args") as IDictionary<string, object> ?? new Dictionary<string, object>();
                Func<string, object> arg = k => Json.Get(args, k);
                Action<object> expect = result =>
                {
                    if (!step.ContainsKey("expect")) return;
                    string d = Cases.Differs(step["expect"], result, "expect");
                    Assert.IsNull(d, at + ": " + d);
                };
                switch ((string)step["do"])
                {
                    case "track":
                        var position = arg("position") as IList<object>;
                        s.Roster.Track((string)arg("id"), (string)arg("type"), (IDictionary<string, object>)arg("observation"),
                            Strings(arg("legal_actions")), new TrackOptions
                            {
                                Position = position == null ? null : position.Select(Json.ToDouble).ToList(),
                                Profile = arg("profile") as string,
                                Parent = arg("parent") as string,
                                State = arg("state") as string,
                            }, now);
                        break;
                    case "observe":
                        var where = arg("position") as IList<object>;
                        s.Observe((string)arg("id"), (string)arg("type"), (IDictionary<string, object>)arg("fields"),
                            where == null ? null : where.Select(Json.ToDouble).ToList());
                        break;
                    case "untrack":
                        s.Untrack((string)arg("id"));
                        break;
                    case "event":
                        expect(s.Roster.Event((string)arg("id"), (string)arg("trigger"), now));
                        break;
                    case "report":
                        expect(s.Report((string)arg("id"), (string)arg("outcome"), arg("detail") as string));
                        break;
                    case "set_epoch":
                        s.Roster.SetEpoch((int)Json.ToDouble(arg("epoch")), now);
                        break;
                    case "set_scene":
                        s.SetScene((string)arg("scene"));
                        break;
                    case "set_scope":
                        var client = Client(s);
                        client.Scope = arg("scope") as string;
                        client.ScopeState = arg("scope_state") as IDictionary<string, object>;
                        break;
                    case "set_threshold":
                        Client(s).Threshold = Json.ToDouble(arg("threshold"));
                        break;
                    case "tick":
                    {
                        var made = s.Tick(now);
                        foreach (var r in made) emitted.Add(r.Ref);
                        var got = made.Select(RequestJson).ToList();
                        if (step.ContainsKey("sent"))
                        {
                            var want = (IList<object>)step["sent"];
                            Assert.AreEqual(want.Count, got.Count, at + ": expected " + want.Count + " requests, got " + Cases.Show(got));
                            for (int j = 0; j < want.Count; j++)
                            {
                                string d = Cases.Differs(want[j], got[j], "sent[" + j + "]");
                                Assert.IsNull(d, at + ": " + d + "; sent " + Cases.Show(got));
                            }
                        }
                        break;
                    }
                    case "answer":
                    case "fail":
                    {
                        string reference = (string)step["ref"];
                        Assert.IsTrue(emitted.Contains(reference) && !answered.Contains(reference),
                            at + ": " + reference + " was not emitted, or was answered already");
                        answered.Add(reference);
                        if ((string)step["do"] == "fail")
                            s.Fail(reference, (string)step["kind"] == "timeout" ? FailKind.Timeout : FailKind.Unreachable, now);
                        else
                        {
                            var headers = (Json.Get(step, "headers") as IDictionary<string, object> ?? new Dictionary<string, object>())
                                .ToDictionary(kv => kv.Key, kv => (string)kv.Value);
                            s.Answer(reference, (int)Json.ToDouble(step["status"]), Json.Get(step, "body"), headers, now);
                        }
                        break;
                    }
                    case "chunk":
                        Assert.IsTrue(emitted.Contains((string)step["ref"]) && !answered.Contains((string)step["ref"]),
                            at + ": " + step["ref"] + " was not emitted, or was answered already");
                        s.Chunk((string)step["ref"], System.Text.Encoding.UTF8.GetBytes((string)step["text"]), now); // bytes, as the transport gives them
                        break;
                    case "end":
                        Assert.IsTrue(emitted.Contains((string)step["ref"]) && answered.Add((string)step["ref"]),
                            at + ": " + step["ref"] + " was not emitted, or was answered already");
                        s.End((string)step["ref"], now);
                        break;
                    case "action":
                        expect(ChoiceJson(s.Roster.Action((string)arg("id"), Strings(arg("legal_now")), now)));
                        break;
                    case "stats":
                        expect(StatsJson(s.Stats));
                        break;
                    case "timeout_s":
                        expect(s.TimeoutMs / 1000);
                        break;
                    default:
                        Assert.Fail(at + ": unknown step " + Cases.Show(step["do"]));
                        break;
                }
            }
        }
    }
}
