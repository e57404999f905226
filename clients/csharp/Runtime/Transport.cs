// Executes the core's requests: the only I/O of the decision SDK. Answers are not applied here: they wait in a
// queue that the game loop drains inside DecideClient.Tick(), so the network never blocks a frame and never
// throws into it. HTTP itself is behind IHttpSender, one small seam: HttpClientSender (desktop, mobile, Godot,
// MonoGame, Stride) ships here; Unity's players use UnityWebRequestSender, in the NpcMind.Unity assembly
// (Unity/), so that the core stays engine-free.

using System;
using System.Collections.Generic;
using System.IO;
using System.IO.Compression;
using System.Linq;
using System.Text;
using System.Text.RegularExpressions;
using System.Threading;
using System.Threading.Tasks;

namespace NpcMind
{
    /// <summary>One HTTP request for an <see cref="IHttpSender"/> to make.</summary>
    public sealed class HttpCall
    {
        public string Method;
        public string Url;
        /// <summary>Lowercase names; content-type and content-encoding are set when there is a body.</summary>
        public Dictionary<string, string> Headers;
        /// <summary>The bytes to send (UTF-8 JSON, gzip-compressed from 16 KiB on), or null.</summary>
        public byte[] Body;
        /// <summary>Give up after this long (the sender reports it as <see cref="HttpResult.TimedOut"/>).</summary>
        public double TimeoutMs;
        /// <summary>Read the answer's body no further than one byte past this (the rest is never downloaded); a
        /// streamed answer (<see cref="OnChunk"/>) no further than this in all. 0: no cap of the call's own.</summary>
        public int MaxBytes;
        /// <summary>The body of a 4xx or 5xx no further than one byte past this (when below MaxBytes): an error is
        /// read to say what it was.</summary>
        public int MaxErrorBytes = Limits.MaxErrorBytes;
        /// <summary>Set on a decide request whose answer is asked as a stream: a sender that can, hands on the bytes
        /// of a 200 in <c>application/x-ndjson</c> here as they arrive, then calls <c>done</c> with
        /// <see cref="HttpResult.Streamed"/> set (and <see cref="HttpResult.Error"/> when the stream broke off).
        /// A sender that reads whole answers may ignore it: the transport splits a whole NDJSON body itself.</summary>
        public Action<byte[]> OnChunk;
        /// <summary>The caller's cancellation (a game's <c>CancellationToken</c>, passed down from an async call): a
        /// sender aborts the call when it fires and calls <c>done</c> with status 0 (HttpClientSender cancels its
        /// HttpClient request, UnityWebRequestSender aborts its UnityWebRequest). The awaited call ends as cancelled
        /// even for a sender that ignores it.</summary>
        public CancellationToken CancellationToken;
    }

    /// <summary>What came back for an <see cref="HttpCall"/>: a status (any, 4xx and 5xx included), or no answer.</summary>
    public sealed class HttpResult
    {
        /// <summary>0: no answer (see <see cref="Error"/>).</summary>
        public int Status;
        /// <summary>Lowercase names.</summary>
        public Dictionary<string, string> Headers = new Dictionary<string, string>();
        public byte[] Body = new byte[0];
        public bool TimedOut;
        public string Error;
        /// <summary>The body went to <see cref="HttpCall.OnChunk"/> (Status is the 200 it began with); an Error
        /// here means the stream broke off after it began.</summary>
        public bool Streamed;
        /// <summary>The sender stopped reading at the call's MaxBytes (a stream; a whole body is read one byte past
        /// it, which says as much).</summary>
        public bool TooLarge;

        public static HttpResult Failed(bool timedOut, string error)
        {
            return new HttpResult { Status = 0, TimedOut = timedOut, Error = error };
        }
    }

    /// <summary>The seam an engine's HTTP plugs into: make the call on any thread, and call <c>done</c> exactly
    /// once, on any thread, with what came back (never throw from Send).</summary>
    public interface IHttpSender
    {
        void Send(HttpCall call, Action<HttpResult> done);
        /// <summary>Abort every call still running: a game that quits must not hang on a slow service.</summary>
        void CancelAll();
    }

    /// <summary>An <see cref="IHttpSender"/>'s call as a Task (dialogue NPCs and the cortex await theirs).</summary>
    internal static class HttpSenderCalls
    {
        /// <summary>What came back; never faults (a sender that throws gives status 0 and its message). Cancelled
        /// when <paramref name="cancellationToken"/> fires (the sender is given it, to abort the call).</summary>
        public static Task<HttpResult> Call(this IHttpSender http, HttpCall call,
            CancellationToken cancellationToken = default(CancellationToken))
        {
            var done = new TaskCompletionSource<HttpResult>(TaskCreationOptions.RunContinuationsAsynchronously);
            if (cancellationToken.IsCancellationRequested)
            {
                done.TrySetCanceled(cancellationToken);
                return done.Task;
            }
            call.CancellationToken = cancellationToken;
            var registered = cancellationToken.Register(() => done.TrySetCanceled(cancellationToken));
            try
            {
                http.Send(call, r =>
                {
                    registered.Dispose();
                    if (cancellationToken.IsCancellationRequested) done.TrySetCanceled(cancellationToken); // aborted by it
                    else done.TrySetResult(r ?? HttpResult.Failed(false, "no result"));
                });
            }
            catch (Exception exc)
            {
                registered.Dispose();
                done.TrySetResult(HttpResult.Failed(false, exc.Message));
            }
            return done.Task;
        }
    }

    /// <summary>What became of one request: an answer (Status, Body, Headers) or why there was none (Fail); for a
    /// streamed answer, its lines read as they came (Line; an empty Chunk first: the stream began) and then its end
    /// (Ended, with Fail when it broke off or passed a cap).</summary>
    internal sealed class Settled
    {
        /// <summary>Bytes of a streamed answer (the transport gives an empty one when the stream begins; a game's
        /// own transport may give the bytes as they came).</summary>
        public byte[] Chunk;
        /// <summary>One line of a streamed answer, read on the sender's thread: a <see cref="Decision"/>, a
        /// <see cref="StreamEnd"/>, or null with <see cref="Problem"/> (<see cref="Answer.ReadStreamLine"/>).</summary>
        public bool IsLine;
        public object Line;
        public string Problem;
        public bool Ended;
        public string Ref;
        public int Status;
        /// <summary>The parsed JSON; a 200 of GET /v1/policy as the <see cref="Policy"/> loaded from it, or the
        /// <see cref="PolicyException"/> that refused it (loaded on the sender's thread, never in the game's frame).</summary>
        public object Body;
        public Dictionary<string, string> Headers;
        /// <summary>Set when there was no answer.</summary>
        public FailKind? Fail;
        public string Error;
    }

    /// <summary>Sends requests, each after those it waits for, and queues what became of them. Thread-safe: the
    /// sender calls back on its own threads, where every body is read within its cap (<see cref="Limits"/>) and
    /// parsed (a policy loaded), so that the game's Tick() only applies what came.</summary>
    internal sealed class Transport
    {
        /// <summary>Bodies from this size are sent gzip-compressed (a large scene's telemetry).</summary>
        public const int GzipFrom = 16 * 1024;
        /// <summary>The media type of a streamed decide answer.</summary>
        public const string Ndjson = "application/x-ndjson";
        private static readonly Regex Awaited = new Regex(@"^Bearer @(\S+)$");

        private readonly string baseUrl;
        private readonly IHttpSender http;
        private readonly Func<double> timeoutMs;
        private readonly int policyMaxBytes;
        private readonly object gate = new object();
        private readonly HashSet<string> running = new HashSet<string>(); // sent and not settled (waiting ones too)
        private readonly List<OutRequest> waiting = new List<OutRequest>(); // until every ref in After settled
        private List<Settled> queue = new List<Settled>();
        private readonly Dictionary<string, string> tokens = new Dictionary<string, string>(); // session ref -> token
        private readonly List<string> tokenOrder = new List<string>();
        private bool closed;

        public Transport(string baseUrl, IHttpSender http, Func<double> timeoutMs, int policyMaxBytes = Policy.MaxBytes)
        {
            this.baseUrl = baseUrl.TrimEnd('/');
            this.http = http;
            this.timeoutMs = timeoutMs;
            this.policyMaxBytes = policyMaxBytes;
        }

        /// <summary>Start a request (or hold it until those it waits for settled); what becomes of it is queued.</summary>
        public void Send(OutRequest request)
        {
            lock (gate)
            {
                if (closed) return;
                running.Add(request.Ref);
                if (request.After.Any(r => running.Contains(r)))
                {
                    waiting.Add(request);
                    return;
                }
            }
            Execute(request);
        }

        /// <summary>What Drain gives when nothing came (never changed: callers only read it).</summary>
        private static readonly List<Settled> NothingCame = new List<Settled>();

        /// <summary>What came back since the last call, in the order it came (read it, do not change it).</summary>
        public List<Settled> Drain()
        {
            lock (gate)
            {
                if (queue.Count == 0) return NothingCame; // most frames: nothing allocated
                var output = queue;
                queue = new List<Settled>();
                return output;
            }
        }

        /// <summary>Requests still running (or waiting for another).</summary>
        public int InFlight
        {
            get { lock (gate) return running.Count; }
        }

        /// <summary>Block until every request sent so far has settled, or <paramref name="timeoutMs"/> passed; true
        /// when none is left.</summary>
        public bool WaitIdle(double timeoutMs)
        {
            var end = DateTime.UtcNow.AddMilliseconds(timeoutMs);
            lock (gate)
            {
                while (running.Count > 0)
                {
                    var left = end - DateTime.UtcNow;
                    if (left <= TimeSpan.Zero) return false;
                    Monitor.Wait(gate, left);
                }
                return true;
            }
        }

        /// <summary>One request outside the core (a debug view): its status and JSON body.</summary>
        public Task<Settled> Call(string method, string path, Dictionary<string, string> headers,
            CancellationToken cancellationToken = default(CancellationToken))
        {
            var done = new TaskCompletionSource<Settled>(TaskCreationOptions.RunContinuationsAsynchronously);
            if (cancellationToken.IsCancellationRequested)
            {
                done.TrySetCanceled(cancellationToken);
                return done.Task;
            }
            var registered = cancellationToken.Register(() => done.TrySetCanceled(cancellationToken));
            var r = new OutRequest("call", method, path, headers, null, null, new List<string>());
            Start(r, s =>
            {
                registered.Dispose();
                done.TrySetResult(s);
            }, cancellationToken);
            return done.Task;
        }

        /// <summary>Abort what runs and drop what would come.</summary>
        public void Close()
        {
            lock (gate)
            {
                closed = true;
                queue.Clear();
                waiting.Clear();
                running.Clear();
                Monitor.PulseAll(gate);
            }
            http.CancelAll();
        }

        private void Execute(OutRequest r)
        {
            Start(r, Settle);
        }

        /// <summary>A request settled: queued for the game's next tick, and those waiting for it may go.</summary>
        private void Settle(Settled s)
        {
            var ready = new List<OutRequest>();
            lock (gate)
            {
                if (closed) return;
                queue.Add(s);
                running.Remove(s.Ref);
                foreach (var w in waiting.ToList())
                    if (!w.After.Any(a => running.Contains(a)))
                    {
                        waiting.Remove(w);
                        ready.Add(w);
                    }
                Monitor.PulseAll(gate);
            }
            foreach (var w in ready) Execute(w);
        }

        private void Start(OutRequest r, Action<Settled> done, CancellationToken cancellationToken = default(CancellationToken))
        {
            var headers = new Dictionary<string, string>(r.Headers ?? new Dictionary<string, string>());
            string auth;
            if (headers.TryGetValue("authorization", out auth))
            {
                var m = Awaited.Match(auth);
                if (m.Success)
                {
                    // a request made while its session was asked for: the token that answer brought, or a 401 of our own
                    string token;
                    lock (gate) tokens.TryGetValue(m.Groups[1].Value, out token);
                    if (string.IsNullOrEmpty(token))
                    {
                        done(new Settled
                        {
                            Ref = r.Ref, Status = 401, Headers = new Dictionary<string, string>(),
                            Body = Json.Parse("{\"error\":{\"code\":\"unauthorized\",\"message\":\"no session was opened\"}}"),
                        });
                        return;
                    }
                    headers["authorization"] = "Bearer " + token;
                }
            }
            byte[] body = null;
            if (r.Json != null)
            {
                headers["content-type"] = "application/json";
                body = Encoding.UTF8.GetBytes(r.Json);
                if (body.Length >= GzipFrom)
                {
                    body = Gzip(body);
                    headers["content-encoding"] = "gzip";
                }
            }
            bool policy = r.Path.StartsWith("/v1/policy", StringComparison.Ordinal);
            var call = new HttpCall
            {
                Method = r.Method, Url = baseUrl + r.Path, Headers = headers, Body = body,
                TimeoutMs = timeoutMs(), MaxBytes = policy ? policyMaxBytes : Limits.MaxAnswerBytes,
                CancellationToken = cancellationToken,
            };
            var stream = r.Stream ? new StreamRead(r.Ref) : null;
            if (r.Stream)
            {
                headers["accept"] = Ndjson;
                call.MaxBytes = Math.Max(Limits.MaxAnswerBytes, Limits.MaxStreamBytes);
                call.OnChunk = data => ReadStream(stream, data); // past a cap it throws: the sender stops reading
            }
            try
            {
                http.Send(call, result => done(Read(r, policy, result, stream)));
            }
            catch (Exception exc)
            {
                done(new Settled { Ref = r.Ref, Fail = FailKind.Unreachable, Error = exc.Message });
            }
        }

        /// <summary>A streamed answer's bytes: queued for the game's next tick, the request still running.</summary>
        private void Enqueue(Settled s)
        {
            lock (gate) if (!closed) queue.Add(s);
        }

        /// <summary>What is known of one streamed answer as its bytes come: its lines so far, and the cap it passed.</summary>
        private sealed class StreamRead
        {
            public readonly string Ref;
            public readonly Lines Lines = new Lines();
            public long Bytes;
            public int Count;
            public bool Begun;
            /// <summary>Set when the stream passed a cap: what is said, and nothing more is read.</summary>
            public string Over;

            public StreamRead(string reference) { Ref = reference; }
        }

        /// <summary>A streamed answer's bytes, on the sender's thread: each line they complete is read here (never in
        /// the game's frame) and queued for the next tick; past Limits.MaxStreamBytes or Limits.MaxStreamLines
        /// nothing more is queued, and this throws so that the sender stops reading.</summary>
        private void ReadStream(StreamRead st, byte[] data)
        {
            if (data == null) return;
            if (st.Over != null) throw new InvalidDataException(st.Over);
            if (!st.Begun) // the 200 began: the scheduler takes it that the service took every entity of it
            {
                st.Begun = true;
                Enqueue(new Settled { Ref = st.Ref, Chunk = new byte[0] });
            }
            long room = Math.Max(0, Limits.MaxStreamBytes - st.Bytes); // bytes past the cap are not read
            st.Bytes += data.Length;
            if (room < data.Length)
            {
                var part = new byte[room];
                Array.Copy(data, part, (int)room);
                data = part;
            }
            foreach (var line in st.Lines.Feed(data))
            {
                if (++st.Count > Limits.MaxStreamLines)
                {
                    st.Over = "the decision stream passed " + Limits.MaxStreamLines
                        + " lines (Limits.MaxStreamLines): ended there, the rest not read";
                    break;
                }
                string problem;
                var got = Answer.ReadStreamLine(line, out problem);
                Enqueue(new Settled { Ref = st.Ref, IsLine = true, Line = got, Problem = problem });
            }
            if (st.Over == null && st.Bytes > Limits.MaxStreamBytes) st.Over = StreamTooLarge;
            if (st.Over != null) throw new InvalidDataException(st.Over);
        }

        private static readonly string StreamTooLarge = "the decision stream is larger than "
            + Limits.Bytes(Limits.MaxStreamBytes) + " bytes (Limits.MaxStreamBytes), not read past that";

        private Settled Read(OutRequest r, bool policy, HttpResult result, StreamRead stream)
        {
            if (result != null && result.Streamed)
            {
                if ((stream != null && stream.Over != null) || result.TooLarge)
                {
                    string why = stream != null && stream.Over != null ? stream.Over : StreamTooLarge;
                    return new Settled { Ref = r.Ref, Ended = true, Error = why, Fail = FailKind.TooLarge };
                }
                return new Settled
                {
                    Ref = r.Ref, Ended = true, Error = result.Error,
                    Fail = result.Error == null ? (FailKind?)null : result.TimedOut ? FailKind.Timeout : FailKind.Unreachable,
                };
            }
            if (result == null || result.Status == 0)
                return new Settled
                {
                    Ref = r.Ref, Fail = result != null && result.TimedOut ? FailKind.Timeout : FailKind.Unreachable,
                    Error = result != null ? result.Error : "no result",
                };
            var settled = new Settled { Ref = r.Ref, Status = result.Status, Headers = result.Headers ?? new Dictionary<string, string>() };
            var bytes = result.Body ?? new byte[0];
            if (policy && result.Status == 200)
            {
                settled.Body = LoadPolicy(bytes); // here, on the sender's thread: never in the game's frame
                return settled;
            }
            string media;
            if (r.Stream && result.Status == 200 && result.Headers != null && result.Headers.TryGetValue("content-type", out media)
                && media.Split(';')[0].Trim().ToLowerInvariant() == Ndjson)
            {
                // a sender that read the stream whole: its lines (within the stream's caps), then its end
                var whole = stream ?? new StreamRead(r.Ref);
                try
                {
                    ReadStream(whole, bytes);
                }
                catch (InvalidDataException)
                {
                }
                return new Settled
                {
                    Ref = r.Ref, Ended = true, Fail = whole.Over != null ? FailKind.TooLarge : (FailKind?)null, Error = whole.Over,
                };
            }
            int max = policy ? policyMaxBytes : Limits.MaxAnswerBytes, cap = Limits.For(result.Status, max, Limits.MaxErrorBytes);
            if (bytes.Length > cap) // a sender of the game's read past it: refused all the same
            {
                string name = Limits.Name(result.Status, max, policy ? "policyMaxBytes" : "Limits.MaxAnswerBytes");
                settled.Body = TooLarge(Limits.TooLarge(r.Method + " " + r.Path.Split('?')[0] + " answered " + result.Status, cap, name));
                return settled;
            }
            settled.Body = Parse(bytes);
            if (r.Path == "/v1/session")
                lock (gate)
                {
                    tokens[r.Ref] = Session.SessionToken(result.Status, settled.Body);
                    tokenOrder.Add(r.Ref);
                    if (tokenOrder.Count > 8) // old sessions
                    {
                        tokens.Remove(tokenOrder[0]);
                        tokenOrder.RemoveAt(0);
                    }
                }
            return settled;
        }

        /// <summary>GET /v1/policy's 200, loaded (the cascade checks its manifest version), or why it was refused.</summary>
        private object LoadPolicy(byte[] bytes)
        {
            try
            {
                if (bytes.Length > policyMaxBytes)
                    throw new PolicyException("GET /v1/policy: the body is larger than " + Limits.Bytes(policyMaxBytes)
                        + " bytes (policyMaxBytes), not read past that");
                return Policy.Load(bytes, null, policyMaxBytes);
            }
            catch (Exception e)
            {
                return e as PolicyException ?? new PolicyException(e.Message); // a file this SDK cannot read at all
            }
        }

        /// <summary>The error answer of a body past its cap: the game is told which cap, as for any error.</summary>
        internal static Dictionary<string, object> TooLarge(string message)
        {
            var error = new Dictionary<string, object> { { "code", "too_large" }, { "message", message } };
            return new Dictionary<string, object> { { "error", error } };
        }

        /// <summary>An answer's JSON, or its text as an error message when it has none (a proxy's page).</summary>
        internal static object Parse(byte[] bytes)
        {
            string text = Encoding.UTF8.GetString(bytes ?? new byte[0]);
            try
            {
                return Json.Parse(text);
            }
            catch (NpcJsonException e)
            {
                string shown = text.Length > 200 ? text.Substring(0, 200) : text;
                string start = text.TrimStart();
                bool json = start.StartsWith("{", StringComparison.Ordinal) || start.StartsWith("[", StringComparison.Ordinal);
                var error = new Dictionary<string, object> { { "message", json ? "not JSON (" + e.Message + "): " + shown : shown } };
                return new Dictionary<string, object> { { "error", error } };
            }
        }

        private static byte[] Gzip(byte[] raw)
        {
            using (var output = new MemoryStream())
            {
                using (var gz = new GZipStream(output, CompressionMode.Compress)) gz.Write(raw, 0, raw.Length);
                return output.ToArray();
            }
        }
    }
}
