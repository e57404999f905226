// The transport and DecideClient over a fake IHttpSender that the test answers by hand: the order of requests
// (after), the session token put in late, gzip, raw policy bytes, failures, and answers applied only in Tick().

using System;
using System.Collections.Generic;
using System.IO;
using System.IO.Compression;
using System.Linq;
using System.Text;
using NpcMind;
using NUnit.Framework;

namespace NpcMind.Tests
{
    /// <summary>An IHttpSender whose calls wait until the test answers them.</summary>
    internal sealed class FakeHttp : IHttpSender
    {
        public readonly List<KeyValuePair<HttpCall, Action<HttpResult>>> Calls = new List<KeyValuePair<HttpCall, Action<HttpResult>>>();
        public int Cancelled;

        public void Send(HttpCall call, Action<HttpResult> done)
        {
            Calls.Add(new KeyValuePair<HttpCall, Action<HttpResult>>(call, done));
        }

        public void CancelAll() { Cancelled++; }

        public HttpCall Find(string pathStart)
        {
            return Calls.Select(c => c.Key).LastOrDefault(c => new Uri(c.Url).PathAndQuery.StartsWith(pathStart, StringComparison.Ordinal));
        }

        public void Answer(string pathStart, int status, string json, Dictionary<string, string> headers = null)
        {
            var call = Calls.Last(c => new Uri(c.Key.Url).PathAndQuery.StartsWith(pathStart, StringComparison.Ordinal));
            Calls.Remove(call);
            call.Value(new HttpResult { Status = status, Body = Encoding.UTF8.GetBytes(json), Headers = headers ?? new Dictionary<string, string>() });
        }

        public static string Text(HttpCall call)
        {
            return call.Body == null ? null : Encoding.UTF8.GetString(call.Body);
        }
    }

    [TestFixture]
    public class TransportTests
    {
        private static OutRequest Req(string reference, string path, string json, params string[] after)
        {
            var headers = new Dictionary<string, string>();
            return new OutRequest(reference, json == null ? "GET" : "POST", path, headers, null, json, after.ToList());
        }

        [Test]
        public void ARequestWaitsForThoseItGoesAfter()
        {
            var http = new FakeHttp();
            var t = new Transport("http://svc:1/", http, () => 1000);
            t.Send(Req("r1", "/v1/telemetry", "{}"));
            t.Send(Req("r2", "/v1/decide", "{}", "r1"));
            Assert.AreEqual(1, http.Calls.Count, "the decide request went before the telemetry it waits for settled");
            Assert.AreEqual("http://svc:1/v1/telemetry", http.Calls[0].Key.Url);
            Assert.AreEqual(2, t.InFlight);
            http.Answer("/v1/telemetry", 200, "{\"ok\":true}");
            Assert.AreEqual("http://svc:1/v1/decide", http.Calls.Single().Key.Url);
            http.Answer("/v1/decide", 200, "{\"epoch\":0,\"decisions\":[]}");
            var settled = t.Drain();
            Assert.AreEqual(new[] { "r1", "r2" }, settled.Select(s => s.Ref).ToArray());
            Assert.AreEqual(0, t.InFlight);
            Assert.IsTrue(t.WaitIdle(0));
            Assert.AreEqual(0, t.Drain().Count, "drained twice");
        }

        [Test]
        public void ARequestMadeWhileItsSessionWasAskedForCarriesTheTokenThatCame()
        {
            var http = new FakeHttp();
            var t = new Transport("http://svc:1", http, () => 1000);
            t.Send(Req("r1", "/v1/session", "{}"));
            var decide = new OutRequest("r2", "POST", "/v1/decide",
                new Dictionary<string, string> { { "authorization", "Bearer @r1" } }, null, "{}", new List<string> { "r1" });
            t.Send(decide);
            http.Answer("/v1/session", 200, "{\"session_token\":\"tok-9\",\"expires_in_s\":60}");
            Assert.AreEqual("Bearer tok-9", http.Find("/v1/decide").Headers["authorization"]);
        }

        [Test]
        public void WithoutASessionTheWaitingRequestIsA401OfTheTransportsOwn()
        {
            var http = new FakeHttp();
            var t = new Transport("http://svc:1", http, () => 1000);
            t.Send(Req("r1", "/v1/session", "{}"));
            t.Send(new OutRequest("r2", "POST", "/v1/decide",
                new Dictionary<string, string> { { "authorization", "Bearer @r1" } }, null, "{}", new List<string> { "r1" }));
            http.Answer("/v1/session", 403, "{\"error\":{\"code\":\"forbidden\",\"message\":\"bad key\"}}");
            Assert.IsNull(http.Find("/v1/decide"), "sent without a token");
            var s = t.Drain().Single(x => x.Ref == "r2");
            Assert.AreEqual(401, s.Status);
            Assert.AreEqual("no session was opened", Errors.ReadError(s.Body).Message);
        }

        [Test]
        public void LargeBodiesGoGzippedSmallOnesAsTheyAre()
        {
            var http = new FakeHttp();
            var t = new Transport("http://svc:1", http, () => 1000);
            string big = Json.Write(new Dictionary<string, object> { { "x", new string('a', Transport.GzipFrom) } });
            t.Send(Req("r1", "/v1/telemetry", big));
            t.Send(Req("r2", "/v1/report", "{}"));
            var first = http.Calls[0].Key;
            Assert.AreEqual("gzip", first.Headers["content-encoding"]);
            Assert.AreEqual("application/json", first.Headers["content-type"]);
            Assert.That(first.Body.Length, Is.LessThan(big.Length / 10));
            using (var gz = new GZipStream(new MemoryStream(first.Body), CompressionMode.Decompress))
            using (var reader = new StreamReader(gz, Encoding.UTF8))
                Assert.AreEqual(big, reader.ReadToEnd());
            Assert.IsFalse(http.Calls[1].Key.Headers.ContainsKey("content-encoding"));
            Assert.AreEqual("{}", FakeHttp.Text(http.Calls[1].Key));
        }

        [Test]
        public void APolicyComesLoadedWithinItsBoundAndOtherAnswersAsJson()
        {
            var http = new FakeHttp();
            var t = new Transport("http://svc:1", http, () => 1000, 1234);
            t.Send(Req("r1", "/v1/policy?client_id=c1", null));
            Assert.AreEqual(1234, http.Calls[0].Key.MaxBytes);
            http.Answer("/v1/policy", 200, "{\"format\":1}");
            t.Send(Req("r2", "/v1/manifest", null));
            Assert.AreEqual(Limits.MaxAnswerBytes, http.Calls[0].Key.MaxBytes);
            http.Answer("/v1/manifest", 502, "<html>bad gateway</html>");
            var s = t.Drain();
            Assert.IsInstanceOf<PolicyException>(s[0].Body, "loaded (here refused) where it was read, not in Tick()");
            Assert.AreEqual("<html>bad gateway</html>", Errors.ReadError(s[1].Body).Message, "a page that is not JSON");
        }

        [Test]
        public void NoAnswerIsATimeoutOrUnreachable()
        {
            var http = new FakeHttp();
            var t = new Transport("http://svc:1", http, () => 2500);
            t.Send(Req("r1", "/v1/decide", "{}"));
            t.Send(Req("r2", "/v1/decide", "{}"));
            Assert.AreEqual(2500, http.Calls[0].Key.TimeoutMs);
            http.Calls[0].Value(HttpResult.Failed(true, "slow"));
            http.Calls[1].Value(HttpResult.Failed(false, "refused"));
            var s = t.Drain();
            Assert.AreEqual(FailKind.Timeout, s[0].Fail);
            Assert.AreEqual(FailKind.Unreachable, s[1].Fail);
        }

        [Test]
        public void CloseCancelsAndDropsWhatWouldCome()
        {
            var http = new FakeHttp();
            var t = new Transport("http://svc:1", http, () => 1000);
            t.Send(Req("r1", "/v1/decide", "{}"));
            t.Close();
            Assert.AreEqual(1, http.Cancelled);
            http.Answer("/v1/decide", 200, "{}");
            Assert.AreEqual(0, t.Drain().Count);
            t.Send(Req("r2", "/v1/decide", "{}"));
            Assert.AreEqual(0, http.Calls.Count);
        }

        // --- DecideClient ------------------------------------------------------------------------------------

        private static DecideClient Client(FakeHttp http, Func<double> clock)
        {
            var options = new DecideClientOptions { Http = http, Clock = clock };
            options.Scheduler.Manifest = Json.AsObject(Json.Parse("{\"types\":{\"bee\":{\"refresh_ms\":4000,\"ttl_ms\":12000}}}"));
            options.Scheduler.TimeoutMs = 5000;
            options.Scheduler.Log = m => { };
            return new DecideClient("http://127.0.0.1:8080", "game-1", options);
        }

        [Test]
        public void DecisionsAreAppliedInTickNotWhenTheyArrive()
        {
            var http = new FakeHttp();
            double now = 0;
            var c = Client(http, () => now);
            c.Track("b1", "bee", new Dictionary<string, object> { { "hp", 1L } }, new List<string> { "chase", "flee" });
            c.Tick();
            http.Answer("/v1/telemetry", 200, "{}");
            var decide = http.Find("/v1/decide");
            Assert.IsNotNull(decide);
            StringAssert.Contains("\"client_id\":\"game-1\"", FakeHttp.Text(decide));
            http.Answer("/v1/decide", 200, "{\"epoch\":0,\"latency_ms\":1,\"decisions\":[{\"id\":\"b1\",\"source\":\"AI\","
                + "\"action\":\"flee\",\"label\":\"flee\",\"ttl_ms\":12000,\"decision_id\":\"d1\",\"cached\":false,\"confidence\":0.9}]}");
            Assert.IsNull(c.Action("b1"), "applied before the game's tick");
            now = 16;
            c.Tick();
            var choice = c.Action("b1");
            Assert.AreEqual("flee", choice.Action);
            Assert.AreEqual(16 + 12000, choice.ExpiresAt);
            Assert.IsNull(c.Action("b1", new List<string> { "chase" }), "not legal now");
            now = 16 + 12000;
            Assert.IsNull(c.Action("b1"), "expired");
            Assert.AreEqual(1, c.Stats.Ai);
        }

        [Test]
        public void AnUnreachableServiceGivesTheNativeAIAndNeverThrows()
        {
            var http = new FakeHttp();
            double now = 0;
            var c = Client(http, () => now);
            c.Track("b1", "bee", new Dictionary<string, object>(), new List<string> { "chase" });
            c.Tick();
            while (http.Calls.Count > 0) // the decide request goes once the telemetry it waits for failed
            {
                var call = http.Calls[0];
                http.Calls.RemoveAt(0);
                call.Value(HttpResult.Failed(false, "connection refused"));
            }
            now = 16;
            Assert.DoesNotThrow(() => c.Tick());
            Assert.IsNull(c.Action("b1"));
            Assert.AreEqual(1, c.Stats.Errors);
        }

        /// <summary>Answer every call still waiting: the decide requests with no decision, the rest with {}.</summary>
        private static void AnswerAll(FakeHttp http)
        {
            while (http.Calls.Count > 0)
            {
                var call = http.Calls[0];
                http.Calls.RemoveAt(0);
                bool decide = new Uri(call.Key.Url).AbsolutePath == "/v1/decide";
                call.Value(new HttpResult { Status = 200, Body = Encoding.UTF8.GetBytes(decide
                    ? "{\"epoch\":0,\"latency_ms\":1,\"decisions\":[]}" : "{}") });
            }
        }

        [Test]
        public void ScopeScopeStateAndThresholdChangeAsTheGameGoes()
        {
            var http = new FakeHttp();
            double now = 0;
            var options = new DecideClientOptions { Http = http, Clock = () => now };
            options.Scheduler.Manifest = Json.AsObject(Json.Parse("{\"types\":{\"bee\":{\"refresh_ms\":4000,\"ttl_ms\":12000}}}"));
            options.Scheduler.TimeoutMs = 5000;
            options.Scheduler.Log = m => { };
            options.Scheduler.Policy = LocalPolicy.Of(entity => new PolicyChoice("flee", 0.5)); // never sure enough at 0.8
            var c = new DecideClient("http://127.0.0.1:8080", "game-1", options);
            Assert.AreEqual(0.8, c.Threshold, "the options' threshold");
            Assert.IsNull(c.Scope);
            var legal = new List<string> { "chase", "flee" };
            c.Track("b1", "bee", new Dictionary<string, object>(), legal);
            c.Track("b2", "bee", new Dictionary<string, object>(), legal);
            c.Tick();
            Assert.IsNull(http.Find("/v1/decide"), "the decide request waits for the telemetry");
            http.Answer("/v1/telemetry", 200, "{}");
            var first = (IDictionary<string, object>)Json.Parse(FakeHttp.Text(http.Find("/v1/decide")));
            Assert.IsFalse(first.ContainsKey("scope") || first.ContainsKey("scope_state"), "no scope yet");
            Assert.AreEqual(0, c.Stats.Local, "0.5 is below 0.8: the service decides");
            AnswerAll(http);

            c.Scope = "boss_fight"; // the boss woke up
            c.ScopeState = new Dictionary<string, object> { { "phase", 2L } };
            now = 100;
            Assert.IsTrue(c.Event("b1", "hit"));
            now = 200;
            c.Tick();
            var boss = (IDictionary<string, object>)Json.Parse(FakeHttp.Text(http.Find("/v1/decide")));
            Assert.AreEqual("boss_fight", boss["scope"]);
            Assert.AreEqual(2L, Json.Get(boss["scope_state"], "phase"));
            AnswerAll(http);

            c.Threshold = 0.4; // the game trusts its own policy more: b2 is decided here from now on
            Assert.AreEqual(0.4, c.Threshold);
            Assert.IsTrue(c.Event("b2", "hit"));
            now = 300;
            c.Tick();
            Assert.AreEqual(ChoiceSource.Local, c.Action("b2").Source, "0.5 is sure enough at 0.4");
            Assert.AreEqual(1, c.Stats.Local);
            Assert.IsNull(http.Find("/v1/decide"), "nothing asked of the service");

            c.Threshold = 0.9;
            c.Scope = null; // the fight is over: its state is no longer sent
            Assert.IsTrue(c.Event("b1", "calm"));
            now = 400;
            c.Tick();
            var after = (IDictionary<string, object>)Json.Parse(FakeHttp.Text(http.Find("/v1/decide")));
            Assert.IsFalse(after.ContainsKey("scope") || after.ContainsKey("scope_state"), "no scope: no scope_state either");
            Assert.AreEqual(1, c.Stats.Local, "0.5 is not sure enough at 0.9");
            var e = Assert.Throws<ArgumentOutOfRangeException>(() => c.Threshold = double.NaN);
            StringAssert.Contains("Threshold", e.Message);
            Assert.AreEqual(0.9, c.Threshold, "a refused value changes nothing");
        }

        [Test]
        public void TheServiceUrlAndClientIdAreChecked()
        {
            Assert.Throws<ArgumentException>(() => new DecideClient("ftp://x", "c1", new DecideClientOptions { Http = new FakeHttp() }));
            Assert.Throws<ArgumentException>(() => new DecideClient("127.0.0.1:8080", "c1", new DecideClientOptions { Http = new FakeHttp() }));
            Assert.Throws<ArgumentException>(() => new DecideClient("http://127.0.0.1:8080", "", new DecideClientOptions { Http = new FakeHttp() }));
        }

        [Test]
        public void TickAfterCloseDoesNothing()
        {
            var http = new FakeHttp();
            var c = Client(http, () => 0);
            c.Track("b1", "bee", new Dictionary<string, object>(), new List<string> { "chase" });
            c.Close();
            c.Tick();
            Assert.AreEqual(0, http.Calls.Count);
        }

        [Test]
        public void LastPromptGivesWhatTheServiceSaysAndNullWhenItCannot()
        {
            var http = new FakeHttp();
            var c = Client(http, () => 0);
            var asked = c.LastPrompt();
            var call = http.Find("/v1/prompt");
            Assert.AreEqual("http://127.0.0.1:8080/v1/prompt?client_id=game-1", call.Url);
            http.Answer("/v1/prompt", 200, "{\"prompt\":\"p\",\"answer\":\"a\"}");
            Assert.AreEqual("p", asked.Result["prompt"]);
            var missing = c.LastPrompt();
            http.Answer("/v1/prompt", 404, "{\"error\":{\"code\":\"not_found\",\"message\":\"none yet\"}}");
            Assert.IsNull(missing.Result);
            var down = c.LastPrompt();
            http.Calls.Single().Value(HttpResult.Failed(false, "refused"));
            Assert.IsNull(down.Result);
        }

        // --- streamed answers --------------------------------------------------------------------------------

        private const string LineB1 = "{\"id\":\"b1\",\"source\":\"AI\",\"action\":\"flee\",\"label\":\"Flee\",\"confidence\":0.9,"
            + "\"ttl_ms\":12000,\"decision_id\":\"d-b1\",\"cached\":false}\n";
        private const string LastLine = "{\"a2g\":\"0.1\",\"epoch\":0,\"latency_ms\":3}\n";

        private static DecideClient Streaming(FakeHttp http, Func<double> clock)
        {
            var c = Client(http, clock);
            c.Track("b1", "bee", new Dictionary<string, object>(), new List<string> { "chase", "flee" });
            c.Track("b2", "bee", new Dictionary<string, object>(), new List<string> { "chase", "flee" });
            c.Tick();
            http.Answer("/v1/telemetry", 200, "{}");
            return c;
        }

        [Test]
        public void AStreamedDecisionIsUsableAtTheTickAfterItsLineCameBeforeTheStreamEnds()
        {
            var http = new FakeHttp();
            double now = 0;
            var c = Streaming(http, () => now);
            var call = http.Calls.Single(k => k.Key.Url.EndsWith("/v1/decide"));
            Assert.AreEqual(Transport.Ndjson, call.Key.Headers["accept"]);
            Assert.IsNotNull(call.Key.OnChunk, "a streamed request the sender cannot stream");
            call.Key.OnChunk(System.Text.Encoding.UTF8.GetBytes(LineB1.Substring(0, 40)));
            now = 10;
            c.Tick();
            Assert.IsNull(c.Action("b1"), "half a line applied");
            call.Key.OnChunk(System.Text.Encoding.UTF8.GetBytes(LineB1.Substring(40)));
            Assert.IsNull(c.Action("b1"), "applied before the game's tick");
            now = 20;
            c.Tick();
            Assert.AreEqual("flee", c.Action("b1").Action);
            Assert.AreEqual(1, c.Stats.StreamedDecisions);
            Assert.AreEqual(20, c.Stats.StreamedMsTotal); // from the tick that sent it (0) to the line (20)
            call.Key.OnChunk(System.Text.Encoding.UTF8.GetBytes(LastLine));
            call.Value(new HttpResult { Status = 200, Streamed = true });
            now = 30;
            c.Tick();
            Assert.AreEqual(0, c.Stats.StreamsCut);
            Assert.AreEqual("flee", c.Action("b1").Action);
            Assert.IsNull(c.Action("b2"));
        }

        [Test]
        public void AStreamThatBreaksOffKeepsItsLinesAndTheRestFallBack()
        {
            var http = new FakeHttp();
            double now = 0;
            var c = Streaming(http, () => now);
            var call = http.Calls.Single(k => k.Key.Url.EndsWith("/v1/decide"));
            call.Key.OnChunk(System.Text.Encoding.UTF8.GetBytes(LineB1));
            call.Value(new HttpResult { Status = 200, Streamed = true, Error = "connection reset" });
            now = 10;
            c.Tick();
            Assert.AreEqual("flee", c.Action("b1").Action);
            Assert.IsNull(c.Action("b2"));
            Assert.AreEqual(1, c.Stats.StreamsCut);
            Assert.AreEqual(1, c.Stats.Fallbacks[FallbackCode.Unavailable]);
        }

        [Test]
        public void ASenderThatReadsAStreamWholeStillGivesItsLines()
        {
            // an engine's HTTP (UnityWebRequest) that ignores OnChunk: the transport splits the whole body itself
            var http = new FakeHttp();
            double now = 0;
            var c = Streaming(http, () => now);
            var call = http.Calls.Single(k => k.Key.Url.EndsWith("/v1/decide"));
            http.Calls.Remove(call);
            call.Value(new HttpResult
            {
                Status = 200, Body = System.Text.Encoding.UTF8.GetBytes(LineB1 + LastLine),
                Headers = new Dictionary<string, string> { { "content-type", "application/x-ndjson; charset=utf-8" } },
            });
            now = 10;
            c.Tick();
            Assert.AreEqual("flee", c.Action("b1").Action);
            Assert.AreEqual(1, c.Stats.StreamedDecisions);
            Assert.AreEqual(0, c.Stats.StreamsCut);
        }
    }
}
