// The SDK's public surface as a Unity user reads it: what a game uses is public, every helper internal (the tests
// see them through InternalsVisibleTo), outcomes are enums whose words on the wire are the protocol's.

using System;
using System.Collections.Generic;
using System.Linq;
using NpcMind;
using NUnit.Framework;

namespace NpcMind.Tests
{
    [TestFixture]
    public class SurfaceTests
    {
        /// <summary>Every public type of NpcMind.Runtime: a type added here is a choice (README: The public surface).</summary>
        private static readonly string[] Public =
        {
            "ChoiceSource", "Choice", "CortexException", "DecideClient", "DecideClientOptions", "DialogueClient",
            "DialogueClientOptions", "FallbackCode", "HttpCall", "HttpClientSender", "HttpResult", "ICortex",
            "IHttpSender", "INpcMemory", "InMemoryNpcs", "InvalidInputException", "Limits", "LocalPolicy", "MemoryKind",
            "NewMemory", "NpcEntity", "NpcMindException", "NpcMindLog", "NpcOutcome", "NpcRecord", "NpcStep",
            "OpenAICortex", "Policy", "PolicyChoice", "PolicyException", "PolicyFunction", "PromptConstraints",
            "ProtocolException", "RecalledMemory", "ReportOutcome", "SchedulerOptions", "ServiceException",
            "SignatureException", "Stats", "TooLargeException", "TrackOptions", "UnreachableException",
        };

        [Test]
        public void OnlyWhatAGameUsesIsPublic()
        {
            var exported = typeof(DecideClient).Assembly.GetExportedTypes().Select(t => t.Name).OrderBy(n => n, StringComparer.Ordinal);
            Assert.AreEqual(Public.OrderBy(n => n, StringComparer.Ordinal).ToArray(), exported.ToArray());
            foreach (var helper in new[] { typeof(Scheduler), typeof(Transport), typeof(Json), typeof(Roster), typeof(Jcs) })
                Assert.IsFalse(helper.IsPublic, helper.Name);
        }

        [Test]
        public void EveryErrorHasOneRootWithStatusAndCodeAndABadSignatureIsNoRefusalOfTheService()
        {
            var errors = typeof(DecideClient).Assembly.GetExportedTypes().Where(t => typeof(Exception).IsAssignableFrom(t)).ToList();
            Assert.AreEqual(9, errors.Count, string.Join(", ", errors.Select(t => t.Name).ToArray()));
            foreach (var t in errors) Assert.IsTrue(typeof(NpcMindException).IsAssignableFrom(t), t.Name + " is no NpcMindException");
            foreach (var t in errors.Where(t => t != typeof(NpcMindException)))
                Assert.AreEqual(typeof(NpcMindException), t.BaseType, t.Name + ": one level under the root");
            Assert.IsFalse(typeof(ServiceException).IsAssignableFrom(typeof(SignatureException)));
            var own = new NpcMindException("a game's own cortex failed");
            Assert.IsNull(own.Status, "no answer: no status");
            Assert.IsNull(own.Code);
            Assert.IsNull(new ServiceException("x", 502, "").Code, "an empty code is none");
            Assert.AreEqual("answer_too_large", new TooLargeException("x", 200).Code);
            var cortex = new CortexException("the model is down", "http://llm:9/v1/chat/completions", 503, "overloaded");
            Assert.AreEqual(503, cortex.Status);
            Assert.AreEqual("overloaded", cortex.Code);
            Assert.AreEqual("the model is down (http://llm:9/v1/chat/completions)", cortex.Message);
        }

        [Test]
        public void NoPublicTypeNamesWhatUnityProjectsHaveInScope()
        {
            var taken = new[] { "Logger", "JsonException", "Entity", "Debug", "Random", "Object", "Time", "Session" };
            var clash = typeof(DecideClient).Assembly.GetExportedTypes().Select(t => t.Name).Intersect(taken).ToList();
            Assert.IsEmpty(clash);
        }

        private static void RoundTrips<T>(string[] words, Func<T, string> text, TryRead<T> read) where T : struct
        {
            var members = (T[])Enum.GetValues(typeof(T));
            Assert.AreEqual(words, members.Select(text).ToArray(), typeof(T).Name + "'s words on the wire, in order");
            foreach (var m in members)
            {
                T back;
                Assert.IsTrue(read(text(m), out back), text(m));
                Assert.AreEqual(m, back);
            }
            T none;
            Assert.IsFalse(read("Done", out none), "the wire's words are matched exactly");
            Assert.IsFalse(read(null, out none));
            Assert.Throws<ArgumentOutOfRangeException>(() => text((T)(object)members.Length));
        }

        private delegate bool TryRead<T>(string word, out T value);

        [Test]
        public void EveryEnumMapsToTheProtocolsWordsAndBack()
        {
            RoundTrips<ReportOutcome>(new[] { "done", "failed", "interrupted", "rejected" }, Wire.Text, Wire.TryRead);
            RoundTrips<FallbackCode>(new[] { "budget", "busy", "invalid_choice", "refused", "unavailable" }, Wire.Text, Wire.TryRead);
            RoundTrips<NpcStep>(new[] { "IdentifyActor", "QueryVector", "ExecuteInference", "Finalize" }, Wire.Text, Wire.TryRead);
            RoundTrips<MemoryKind>(new[] { "observation", "experience", "knowledge", "emotion", "dialogue" }, Wire.Text, Wire.TryRead);
            Assert.AreEqual("AI", Wire.Text(ChoiceSource.AI));
            Assert.AreEqual("local", Wire.Text(ChoiceSource.Local));
        }

        [Test]
        public void AReportGoesOutAsTheProtocolsWordAndAnOutcomeOfNoMemberIsSaidOnceNotSent()
        {
            var said = new List<string>();
            var http = new AnsweringHttp(call => AnsweringHttp.Ok(new Dictionary<string, object>()));
            var options = new DecideClientOptions { Http = http, Clock = () => 0 };
            options.Scheduler.Log = m => said.Add(m);
            var c = new DecideClient("http://svc:1", "game", options);
            Assert.IsFalse(c.Report("b1", (ReportOutcome)9), "no member: not sent");
            Assert.IsFalse(c.Report("b1", (ReportOutcome)9));
            Assert.AreEqual(1, said.Count(m => m.Contains("ReportOutcome(9)") && m.Contains("done, failed, interrupted, rejected")),
                string.Join(" | ", said));
            Assert.IsFalse(c.Report("b1", ReportOutcome.Done), "b1 has no decision to report");
            Assert.IsEmpty(said.Where(m => m.Contains("Done")));
        }
    }
}
