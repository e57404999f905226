// Every cap of Limits.cs, asserted by what is read and what is refused (no timing): a number's significant digits
// kept, each body read no further than one byte past its cap (over a real HttpClient too), a policy loaded and
// stream lines read where they are read (never in Tick()), and a stream stopped past its lines or bytes.

using System;
using System.Collections.Generic;
using System.IO;
using System.Linq;
using System.Net;
using System.Net.Http;
using System.Text;
using System.Threading;
using System.Threading.Tasks;
using NpcMind;
using NUnit.Framework;

namespace NpcMind.Tests
{
    /// <summary>A body without end (or of a given length) that counts what was read of it.</summary>
    internal sealed class EndlessStream : Stream
    {
        private readonly byte[] pattern;
        private readonly long length;
        public long Given;

        public EndlessStream(string pattern, long length = long.MaxValue)
        {
            this.pattern = Encoding.UTF8.GetBytes(pattern);
            this.length = length;
        }

        public override int Read(byte[] buffer, int offset, int count)
        {
            int n = (int)Math.Min(count, length - Given);
            for (int i = 0; i < n; i++) buffer[offset + i] = pattern[(Given + i) % pattern.Length];
            Given += n;
            return n;
        }

        public override bool CanRead { get { return true; } }
        public override bool CanSeek { get { return false; } }
        public override bool CanWrite { get { return false; } }
        public override long Length { get { throw new NotSupportedException(); } }
        public override long Position { get { return Given; } set { throw new NotSupportedException(); } }
        public override void Flush() { }
        public override long Seek(long offset, SeekOrigin origin) { throw new NotSupportedException(); }
        public override void SetLength(long value) { throw new NotSupportedException(); }
        public override void Write(byte[] buffer, int offset, int count) { throw new NotSupportedException(); }
    }

    /// <summary>An HttpClient handler answering every request with one status and an EndlessStream.</summary>
    internal sealed class EndlessHandler : HttpMessageHandler
    {
        public readonly EndlessStream Body;
        private readonly HttpStatusCode status;
        private readonly string media;

        public EndlessHandler(HttpStatusCode status, string media, string pattern)
        {
            this.status = status;
            this.media = media;
            Body = new EndlessStream(pattern);
        }

        protected override Task<HttpResponseMessage> SendAsync(HttpRequestMessage request, CancellationToken token)
        {
            var content = new StreamContent(Body);
            content.Headers.TryAddWithoutValidation("content-type", media);
            return Task.FromResult(new HttpResponseMessage(status) { Content = content });
        }
    }

    /// <summary>A service that never answers: the request ends only when HttpClient cancels it.</summary>
    internal sealed class HangingHandler : HttpMessageHandler
    {
        public readonly ManualResetEventSlim Asked = new ManualResetEventSlim();
        public volatile bool Cancelled;

        protected override async Task<HttpResponseMessage> SendAsync(HttpRequestMessage request, CancellationToken token)
        {
            Asked.Set();
            try
            {
                await Task.Delay(Timeout.Infinite, token).ConfigureAwait(false);
            }
            catch (OperationCanceledException)
            {
                Cancelled = true;
                throw;
            }
            return new HttpResponseMessage(HttpStatusCode.OK);
        }
    }

    [TestFixture]
    public class LimitsTests
    {
        private static string Repeat(char c, int n) { return new string(c, n); }

        // --- numbers -----------------------------------------------------------------------------------------

        [Test]
        public void ANumberOf160000DigitsKeepsABoundedSignificandAndIsStillReadExactly()
        {
            int k;
            var digits = Doubles.Digits("1" + Repeat('7', 160000) + ".5e-3", out k);
            Assert.AreEqual(Doubles.KeptDigits + 1, digits.ToString().Length, "the big integer grew with the literal");
            Assert.AreEqual(160001 - Doubles.KeptDigits - 1 - 3, k);
            // 2^53 + 1 is halfway between two doubles: a digit far past the kept ones decides which
            string tie = "9007199254740993." + Repeat('0', 160000);
            Assert.AreEqual(9007199254740992.0, (double)Json.Parse(tie), "a tie goes to the even one");
            Assert.AreEqual(9007199254740994.0, (double)Json.Parse(tie + "1"), "just above the tie: up");
            Assert.AreEqual(9007199254740992.0, (double)Json.Parse("9007199254740992" + Repeat('9', 160000) + "e-160000"));
            Assert.AreEqual(double.PositiveInfinity, (double)Json.Parse(Repeat('9', 160000)));
            Assert.AreEqual(0.0, (double)Json.Parse("0." + Repeat('0', 160000) + "1"));
            Assert.AreEqual(1e-5, (double)Json.Parse("0." + Repeat('0', 160000) + "1e159996"), "the exponent and the zeros");
            Assert.AreEqual(double.PositiveInfinity, (double)Json.Parse("0." + Repeat('0', 160000) + "1e250000"));
            double negZero = (double)Json.Parse("-0." + Repeat('0', 160000) + "1");
            Assert.IsTrue(negZero == 0 && 1 / negZero < 0, "-0 keeps its sign");
        }

        // --- bodies of the decision API ------------------------------------------------------------------------

        private static OutRequest Req(string reference, string path, bool stream = false)
        {
            return new OutRequest(reference, "GET", path, new Dictionary<string, string>(), null, null, new List<string>(), stream);
        }

        [Test]
        public void EveryAnswerIsAskedWithinItsCapAndOnePastItIsAnErrorNamingTheCap()
        {
            var http = new FakeHttp();
            var t = new Transport("http://svc:1", http, () => 1000);
            foreach (var path in new[] { "/v1/decide", "/v1/manifest", "/v1/health", "/v1/session", "/v1/telemetry", "/v1/report" })
            {
                t.Send(Req("r" + path, path));
                var call = http.Find(path);
                Assert.AreEqual(Limits.MaxAnswerBytes, call.MaxBytes, path);
                Assert.AreEqual(Limits.MaxErrorBytes, call.MaxErrorBytes, path);
            }
            // a sender of the game's that read past the cap: refused all the same
            http.Answer("/v1/decide", 200, "[" + Repeat(' ', Limits.MaxAnswerBytes) + "]");
            http.Answer("/v1/manifest", 502, Repeat('x', Limits.MaxErrorBytes + 1));
            http.Answer("/v1/health", 503, Repeat('x', Limits.MaxErrorBytes));
            var s = t.Drain().ToDictionary(x => x.Ref);
            Assert.AreEqual(200, s["r/v1/decide"].Status);
            StringAssert.Contains("larger than 1,048,576 bytes (Limits.MaxAnswerBytes)", Errors.ReadError(s["r/v1/decide"].Body).Message);
            StringAssert.Contains("larger than 65,536 bytes (Limits.MaxErrorBytes)", Errors.ReadError(s["r/v1/manifest"].Body).Message);
            Assert.AreEqual(Repeat('x', 200), Errors.ReadError(s["r/v1/health"].Body).Message, "at the cap: read");
        }

        [Test]
        public void HttpClientSenderStopsReadingABodyOneBytePastItsCap()
        {
            foreach (var status in new[] { HttpStatusCode.OK, HttpStatusCode.InternalServerError })
            {
                var handler = new EndlessHandler(status, "application/json", "[1,");
                var sender = new HttpClientSender(new HttpClient(handler));
                var call = new HttpCall
                {
                    Method = "GET", Url = "http://svc:1/v1/decide", Headers = new Dictionary<string, string>(),
                    TimeoutMs = 60000, MaxBytes = 100000, MaxErrorBytes = 5000,
                };
                var result = sender.Call(call).Result;
                int cap = status == HttpStatusCode.OK ? 100000 : 5000;
                Assert.AreEqual(cap + 1, result.Body.Length, status.ToString());
                Assert.LessOrEqual(handler.Body.Given, cap + 16384, "read on past the cap");
            }
        }

        [Test]
        public void HttpClientSenderAbortsACallWhenItsCancellationTokenFires()
        {
            var handler = new HangingHandler();
            var sender = new HttpClientSender(new HttpClient(handler));
            using (var cancel = new CancellationTokenSource())
            {
                var call = new HttpCall
                {
                    Method = "GET", Url = "http://svc:1/v1/keys", Headers = new Dictionary<string, string>(),
                    TimeoutMs = 600000, MaxBytes = 1000, CancellationToken = cancel.Token, // its own timeout: 10 minutes
                };
                var came = new TaskCompletionSource<HttpResult>();
                sender.Send(call, r => came.TrySetResult(r));
                Assert.IsTrue(handler.Asked.Wait(30000), "the request went out");
                Assert.IsFalse(came.Task.IsCompleted);
                cancel.Cancel();
                Assert.IsTrue(came.Task.Wait(30000), "the call ended when its token fired, not at its 10-minute timeout");
                var result = came.Task.Result;
                Assert.AreEqual(0, result.Status);
                Assert.IsFalse(result.TimedOut, "cancelled, not timed out");
                Assert.AreEqual("cancelled by the caller", result.Error);
                Assert.IsTrue(handler.Cancelled, "HttpClient's request itself was cancelled");
            }
        }

        [Test]
        public void HttpClientSenderStopsAStreamAtItsCapAndSaysSo()
        {
            var handler = new EndlessHandler(HttpStatusCode.OK, Transport.Ndjson, "{\"id\":\"nobody\"}\n");
            var sender = new HttpClientSender(new HttpClient(handler));
            long handed = 0;
            var call = new HttpCall
            {
                Method = "POST", Url = "http://svc:1/v1/decide", Headers = new Dictionary<string, string>(),
                TimeoutMs = 60000, MaxBytes = 200000, OnChunk = data => handed += data.Length,
            };
            var result = sender.Call(call).Result;
            Assert.IsTrue(result.Streamed && result.TooLarge, result.Error);
            Assert.LessOrEqual(handed, 200000);
            Assert.LessOrEqual(handler.Body.Given, 200000 + 8192);
        }

        [Test]
        public void ThePolicyIsLoadedWhereItIsReadNeverInTheGamesTick()
        {
            var http = new FakeHttp();
            var t = new Transport("http://svc:1", http, () => 1000);
            string policy = File.ReadAllText(Path.Combine(Cases.Folder, "policy", "handmade.policy.json"));
            t.Send(Req("r1", "/v1/policy?client_id=c1"));
            http.Answer("/v1/policy", 200, policy);
            string hostile = policy.Replace("\"threshold\": [0.5,", "\"threshold\": [1" + Repeat('0', 100000) + ",");
            Assert.AreNotEqual(policy, hostile);
            t.Send(Req("r2", "/v1/policy?client_id=c1"));
            http.Answer("/v1/policy", 200, hostile);
            var s = t.Drain();
            Assert.IsInstanceOf<Policy>(s[0].Body, "the transport hands Tick() a policy to load");
            Assert.IsInstanceOf<PolicyException>(s[1].Body);
            StringAssert.Contains("must be a finite number", ((Exception)s[1].Body).Message);
        }

        // --- streams -----------------------------------------------------------------------------------------

        private static DecideClient Streaming(FakeHttp http, Func<double> clock, List<string> said)
        {
            var options = new DecideClientOptions { Http = http, Clock = clock };
            options.Scheduler.Manifest = Json.AsObject(Json.Parse("{\"types\":{\"bee\":{\"refresh_ms\":4000,\"ttl_ms\":12000}}}"));
            options.Scheduler.TimeoutMs = 5000;
            options.Scheduler.Log = m => said.Add(m);
            var c = new DecideClient("http://127.0.0.1:8080", "game-1", options);
            c.Track("b1", "bee", new Dictionary<string, object>(), new List<string> { "chase", "flee" });
            c.Tick();
            http.Answer("/v1/telemetry", 200, "{}");
            return c;
        }

        private static byte[] Utf8(string s) { return Encoding.UTF8.GetBytes(s); }

        private const string Nobody = "{\"id\":\"nobody\",\"source\":\"AI\",\"action\":\"flee\",\"label\":\"Flee\","
            + "\"confidence\":0.9,\"ttl_ms\":12000,\"decision_id\":\"d\",\"cached\":false}\n";

        [Test]
        public void AnEndlessStreamOfLinesForIdsNeverAskedIsStoppedAtItsLineCap()
        {
            var http = new FakeHttp();
            double now = 0;
            var said = new List<string>();
            var c = Streaming(http, () => now, said);
            var call = http.Calls.Single(k => k.Key.Url.EndsWith("/v1/decide"));
            int handed = 0;
            var e = Assert.Throws<InvalidDataException>(() => // the sender stops reading at the throw
            {
                for (; handed < 1000; handed++)
                {
                    call.Key.OnChunk(Utf8(string.Concat(Enumerable.Repeat(Nobody, 20))));
                    now += 16;
                    c.Tick();
                }
            });
            Assert.AreEqual(Limits.MaxStreamLines / 20, handed, "read on past the line cap");
            StringAssert.Contains("passed " + Limits.MaxStreamLines + " lines (Limits.MaxStreamLines)", e.Message);
            call.Value(new HttpResult { Status = 200, Streamed = true, Error = e.Message });
            now += 16;
            c.Tick();
            Assert.AreEqual(1, c.Stats.StreamsCut, "the stream was not ended");
            Assert.AreEqual(1, c.Stats.Fallbacks[FallbackCode.Unavailable], "b1, never answered, falls back");
            Assert.IsTrue(said.Any(m => m.Contains("(Limits.MaxStreamLines)")), string.Join("\n", said));
        }

        [Test]
        public void AGamesOwnTransportsBytesAreEndedAtTheLineCapToo()
        {
            var said = new List<string>();
            var s = new Scheduler(new SchedulerOptions
            {
                Manifest = Json.AsObject(Json.Parse("{\"types\":{\"bee\":{\"refresh_ms\":4000,\"ttl_ms\":12000}}}")),
                TimeoutMs = 5000, Log = m => said.Add(m),
            });
            s.Roster.Track("b1", "bee", new Dictionary<string, object>(), new List<string> { "flee" }, null, 0);
            var decide = s.Tick(0).Single(r => r.Path == "/v1/decide");
            s.Chunk(decide.Ref, Utf8(string.Concat(Enumerable.Repeat(Nobody, 1000))), 10);
            Assert.AreEqual(1, s.Stats.StreamsCut);
            Assert.AreEqual(0, s.InFlight, "the stream was not ended");
            Assert.IsTrue(said.Any(m => m.Contains("(Limits.MaxStreamLines)")), string.Join("\n", said));
        }

        [Test]
        public void TheTransportReadsStreamLinesOffTheFrame()
        {
            var http = new FakeHttp();
            var t = new Transport("http://svc:1", http, () => 1000);
            t.Send(Req("r1", "/v1/decide", true));
            var call = http.Calls.Single().Key;
            call.OnChunk(Utf8(Nobody + "not json\n{\"a2g"));
            var s = t.Drain();
            Assert.AreEqual(3, s.Count);
            Assert.IsTrue(s[0].Chunk != null && s[0].Chunk.Length == 0, "the stream began");
            Assert.IsTrue(s[1].IsLine);
            Assert.AreEqual("nobody", ((Decision)s[1].Line).Id, "Tick() gets the line read");
            Assert.IsTrue(s[2].IsLine && s[2].Line == null);
            StringAssert.Contains("not JSON", s[2].Problem);
        }

        [Test]
        public void AStreamIsNotReadPastItsByteCap()
        {
            var http = new FakeHttp();
            var t = new Transport("http://svc:1", http, () => 1000);
            t.Send(Req("r1", "/v1/decide", true));
            var call = http.Calls.Single().Key;
            var piece = Utf8(Repeat(' ', 65536));
            int taken = 0;
            Assert.Throws<InvalidDataException>(() =>
            {
                for (; taken < 100; taken++) call.OnChunk(piece); // a sender stops at the throw
            });
            Assert.AreEqual(Limits.MaxStreamBytes / 65536, taken);
            http.Calls.Single().Value(new HttpResult { Status = 200, Streamed = true, Error = "stopped" });
            var end = t.Drain().Last();
            Assert.IsTrue(end.Ended);
            Assert.AreEqual(FailKind.TooLarge, end.Fail);
            StringAssert.Contains("larger than 1,048,576 bytes (Limits.MaxStreamBytes)", end.Error);
        }

        [Test]
        public void AStreamReadWholeByTheGamesSenderIsCutAtItsCaps()
        {
            var http = new FakeHttp();
            var t = new Transport("http://svc:1", http, () => 1000);
            var ndjson = new Dictionary<string, string> { { "content-type", Transport.Ndjson } };
            t.Send(Req("r1", "/v1/decide", true));
            t.Send(Req("r2", "/v1/decide", true));
            http.Calls[0].Value(new HttpResult { Status = 200, Body = Utf8(Repeat(' ', Limits.MaxStreamBytes + 10)), Headers = ndjson });
            http.Calls[1].Value(new HttpResult { Status = 200, Body = Utf8(string.Concat(Enumerable.Repeat(Nobody, 1000))), Headers = ndjson });
            var s = t.Drain();
            var ends = s.Where(x => x.Ended).ToDictionary(x => x.Ref);
            Assert.AreEqual(FailKind.TooLarge, ends["r1"].Fail);
            StringAssert.Contains("(Limits.MaxStreamBytes)", ends["r1"].Error);
            Assert.AreEqual(FailKind.TooLarge, ends["r2"].Fail);
            StringAssert.Contains("(Limits.MaxStreamLines)", ends["r2"].Error);
            Assert.AreEqual(Limits.MaxStreamLines, s.Count(x => x.Ref == "r2" && x.IsLine));
        }

        // --- dialogue and the cortex -----------------------------------------------------------------------------

        private static DialogueClient Mind(Func<HttpCall, HttpResult> answer, List<HttpCall> calls)
        {
            var npcs = new InMemoryNpcs();
            npcs.Register("mara", "Mara.");
            var http = new AnsweringHttp(call =>
            {
                calls.Add(call);
                return answer(call);
            });
            return new DialogueClient("http://svc:1", new TextCortex("Hm."), npcs,
                new DialogueClientOptions { Http = http, CheckSignatures = false });
        }

        private static HttpResult Bytes(int status, int n)
        {
            return new HttpResult { Status = status, Body = Utf8(Repeat(' ', n)) };
        }

        [Test]
        public void ADialogueStepAndTheKeysAreReadWithinTheirCaps()
        {
            var calls = new List<HttpCall>();
            var e = Assert.Throws<AggregateException>(() =>
                Mind(c => Bytes(200, Limits.MaxStepBytes + 1), calls).Process("mara", "Hello.").Wait());
            Assert.AreEqual(Limits.MaxStepBytes, calls.Single().MaxBytes);
            var tooLarge = (TooLargeException)e.InnerException;
            StringAssert.Contains("larger than 4,194,304 bytes (Limits.MaxStepBytes)", tooLarge.Message);
            Assert.AreEqual(200, tooLarge.Status);
            Assert.AreEqual("answer_too_large", tooLarge.Code, "the code every SDK gives a body past its cap");

            calls.Clear();
            e = Assert.Throws<AggregateException>(() => Mind(c => Bytes(500, Limits.MaxErrorBytes + 1), calls).Process("mara", "Hello.").Wait());
            StringAssert.Contains("(Limits.MaxErrorBytes)", e.InnerException.Message);

            calls.Clear();
            e = Assert.Throws<AggregateException>(() => Mind(c => Bytes(200, Limits.MaxKeysBytes + 1), calls).PublicKeys().Wait());
            Assert.AreEqual(Limits.MaxKeysBytes, calls.Single().MaxBytes);
            StringAssert.Contains("(Limits.MaxKeysBytes)", e.InnerException.Message);
        }

        [Test]
        public void TheCortexAnswerIsReadWithinItsCap()
        {
            var calls = new List<HttpCall>();
            var http = new AnsweringHttp(call =>
            {
                calls.Add(call);
                return Bytes(200, Limits.MaxCortexBytes + 1);
            });
            var cortex = new OpenAICortex("http://model:1/v1", http: http);
            var e = Assert.Throws<AggregateException>(() => cortex.Complete("Hi.", null).Wait());
            Assert.AreEqual(Limits.MaxCortexBytes, calls.Single().MaxBytes);
            var refused = (CortexException)e.InnerException;
            StringAssert.Contains("(Limits.MaxCortexBytes)", refused.Message);
            Assert.AreEqual(200, refused.Status);
            Assert.AreEqual("answer_too_large", refused.Code);
        }
    }
}
