// The C# SDK's reads fed one hostile input of size n (bench/amplify/sdk_csharp.py compiles this with the SDK's
// sources into a temp dir and runs it once a size): the read is timed in here, after a small warm-up of the same
// path (the JIT), and one JSON line says what it cost, whether the input was refused or cut at a cap ("capped"),
// and for a stream the longest Tick() of the game loop that read it ("hold").
//   mono Amplify.exe number N        Json.Parse of one number of N digits
//   mono Amplify.exe policy N        Policy.Load of a policy file of about N bytes (one threshold of N digits)
//   mono Amplify.exe error N         HttpClientSender reading a 500 whose body is N bytes
//   mono Amplify.exe stream N        DecideClient ticking over a stream of N lines for ids it never asked
//   mono Amplify.exe confidence N    DecideClient ticking over a stream of 16 lines with N-digit confidences

using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.IO;
using System.Linq;
using System.Net;
using System.Net.Http;
using System.Text;
using System.Threading;
using System.Threading.Tasks;
using NpcMind;

public static class Amplify
{
    private const string PolicyText = @"{""format"": ""npcmind-policy"", ""format_version"": 1, ""manifest_version"": ""v1"",
 ""types"": {""bee"": {""actions"": [""idle"", ""chase""], ""features"": [{""source"": ""observation"", ""field"": ""hp"",
 ""encoding"": ""number"", ""missing"": 0}], ""trees"": [{""feature"": [0, -1, -1], ""threshold"": [THRESHOLD, 0, 0],
 ""left"": [1, -1, -1], ""right"": [2, -1, -1], ""value"": [[], [0.9, 0.1], [0.1, 0.9]]}]}}}";

    private static bool capped; // the input was refused, or reading it stopped at a cap
    private static double hold = -1; // a stream's: the longest Tick() (s), the frame it held

    public static int Main(string[] args)
    {
        string mode = args[0];
        int n = int.Parse(args[1]);
        Func<int, Func<string>> prepare; // the input made, then the read that is timed
        switch (mode)
        {
            case "number": prepare = Number; break;
            case "policy": prepare = LoadPolicy; break;
            case "error": prepare = n2 => () => ErrorBody(n2); break;
            case "stream": prepare = n2 => () => Stream(n2, false); break;
            case "confidence": prepare = n2 => () => Stream(n2, true); break;
            default: Console.Error.WriteLine("unknown mode " + mode); return 2;
        }
        bool stream = mode == "stream" || mode == "confidence"; // its paths past a cap are JIT-compiled by a run of n
        prepare(stream ? n : Math.Min(n, 100))(); // the JIT, on the same path
        capped = false;
        var read = prepare(n);
        var watch = Stopwatch.StartNew();
        string note = read();
        double seconds = watch.Elapsed.TotalSeconds;
        var said = new Dictionary<string, object> { { "seconds", seconds }, { "note", note }, { "capped", capped } };
        if (hold >= 0) said["hold"] = hold;
        Console.WriteLine(Json.Write(said));
        return 0;
    }

    private static string Digits(int n)
    {
        var sb = new StringBuilder(n);
        for (int i = 0; i < n; i++) sb.Append((char)('1' + i % 9));
        return sb.ToString();
    }

    private static Func<string> Number(int n)
    {
        string text = "0." + Digits(n);
        return () => "read " + ((double)Json.Parse(text)).ToString("R");
    }

    private static Func<string> LoadPolicy(int n)
    {
        // made as bytes: the input's own strings would outweigh what the SDK holds of it
        int at = PolicyText.IndexOf("THRESHOLD", StringComparison.Ordinal);
        byte[] head = Encoding.UTF8.GetBytes(PolicyText.Substring(0, at) + "0."), tail = Encoding.UTF8.GetBytes(PolicyText.Substring(at + 9));
        var bytes = new byte[head.Length + n + tail.Length];
        head.CopyTo(bytes, 0);
        for (int i = 0; i < n; i++) bytes[head.Length + i] = (byte)('1' + i % 9);
        tail.CopyTo(bytes, head.Length + n);
        return () =>
        {
            try
            {
                Policy.Load(bytes);
                return "loaded, " + bytes.Length + " bytes";
            }
            catch (PolicyException e)
            {
                capped = true;
                return "refused: " + e.Message;
            }
        };
    }

    /// <summary>A body of a given length, made as it is read (nothing of it is held but what the SDK keeps).</summary>
    private sealed class Body : Stream
    {
        private readonly long length;
        public long Given;

        public Body(long length) { this.length = length; }

        public override int Read(byte[] buffer, int offset, int count)
        {
            int n = (int)Math.Min(count, length - Given);
            for (int i = 0; i < n; i++) buffer[offset + i] = (byte)'x';
            Given += n;
            return n;
        }

        public override bool CanRead { get { return true; } }
        public override bool CanSeek { get { return false; } }
        public override bool CanWrite { get { return false; } }
        public override long Length { get { return length; } }
        public override long Position { get { return Given; } set { throw new NotSupportedException(); } }
        public override void Flush() { }
        public override long Seek(long offset, SeekOrigin origin) { throw new NotSupportedException(); }
        public override void SetLength(long value) { throw new NotSupportedException(); }
        public override void Write(byte[] buffer, int offset, int count) { throw new NotSupportedException(); }
    }

    private sealed class Handler : HttpMessageHandler
    {
        public Body Last;
        private readonly long length;

        public Handler(long length) { this.length = length; }

        protected override Task<HttpResponseMessage> SendAsync(HttpRequestMessage request, CancellationToken token)
        {
            Last = new Body(length);
            var content = new StreamContent(Last);
            content.Headers.TryAddWithoutValidation("content-type", "text/html");
            return Task.FromResult(new HttpResponseMessage(HttpStatusCode.InternalServerError) { Content = content });
        }
    }

    private static string ErrorBody(int n)
    {
        var handler = new Handler(n);
        var sender = new HttpClientSender(new HttpClient(handler));
        var t = new Transport("http://svc:1", sender, () => 60000);
        t.Send(new OutRequest("r1", "POST", "/v1/decide", new Dictionary<string, string>(), null, "{}", new List<string>()));
        t.WaitIdle(60000);
        var s = t.Drain().Single();
        string message = Errors.ReadError(s.Body).Message;
        capped = handler.Last.Given < n;
        return "read " + handler.Last.Given + " of " + n + " bytes: " + (message.Length > 90 ? message.Substring(0, 90) : message);
    }

    /// <summary>A sender that answers a decide request with a stream it feeds in 8 kB chunks, as HttpClientSender
    /// hands them on (it stops when OnChunk throws).</summary>
    private sealed class Streaming : IHttpSender
    {
        private readonly Func<HttpCall, IEnumerable<byte[]>> pieces;

        public Streaming(Func<HttpCall, IEnumerable<byte[]>> pieces) { this.pieces = pieces; }

        public void Send(HttpCall call, Action<HttpResult> done)
        {
            if (call.OnChunk == null) { done(new HttpResult { Status = 200, Body = Encoding.UTF8.GetBytes("{}") }); return; }
            Task.Run(() => Feed(call, done)); // on its own thread, as a network's
        }

        private void Feed(HttpCall call, Action<HttpResult> done)
        {
            var result = new HttpResult { Status = 200, Streamed = true };
            var chunk = new byte[8192]; // handed on 8 kB at a time, as HttpClientSender reads them
            int used = 0;
            try
            {
                foreach (var piece in pieces(call))
                    for (int at = 0; at < piece.Length;)
                    {
                        int n = Math.Min(piece.Length - at, chunk.Length - used);
                        Array.Copy(piece, at, chunk, used, n);
                        at += n;
                        used += n;
                        if (used < chunk.Length) continue;
                        call.OnChunk(chunk);
                        chunk = new byte[8192];
                        used = 0;
                    }
                if (used > 0) call.OnChunk(chunk.Take(used).ToArray());
            }
            catch (Exception e)
            {
                result.Error = e.Message;
            }
            done(result);
        }

        public void CancelAll() { }
    }

    private static string Stream(int n, bool confidence)
    {
        var digits = Encoding.UTF8.GetBytes("0." + Digits(n)); // made once: the sender's garbage is not the SDK's
        Func<string, byte[]> head = id => Encoding.UTF8.GetBytes("{\"id\":\"" + id + "\",\"source\":\"AI\",\"action\":\"chase\","
            + "\"label\":\"Chase\",\"ttl_ms\":60000,\"decision_id\":\"d\",\"cached\":false,\"confidence\":");
        var tail = Encoding.UTF8.GetBytes("}\n");
        var nobody = Encoding.UTF8.GetBytes("0.9");
        Func<HttpCall, IEnumerable<byte[]>> lines = call =>
        {
            var ids = confidence
                ? ((IList<object>)Json.Get(Json.Parse(Encoding.UTF8.GetString(call.Body)), "entities")).Select(e => (string)Json.Get(e, "id"))
                : Enumerable.Range(0, n).Select(i => "nobody-" + i);
            return ids.SelectMany(id => new[] { head(id), confidence ? digits : nobody, tail });
        };
        var options = new DecideClientOptions { Http = new Streaming(lines) };
        options.Scheduler.Manifest = Json.AsObject(Json.Parse("{\"types\":{\"bee\":{\"refresh_ms\":60000,\"ttl_ms\":60000}}}"));
        options.Scheduler.TimeoutMs = 60000;
        options.Scheduler.FetchPolicy = false;
        var said = new List<string>();
        options.Scheduler.Log = m => { lock (said) said.Add(m); };
        double now = 0;
        options.Clock = () => now;
        var client = new DecideClient("http://svc:1", "amplify", options);
        for (int i = 0; i < 16; i++) client.Track("b" + i, "bee", new Dictionary<string, object>(), new List<string> { "idle", "chase" });
        double worst = 0;
        int ticks = 0;
        for (; ticks < 100000 && client.Stats.StreamsCut == 0; ticks++) // no last line comes: every stream ends cut
        {
            var t = Stopwatch.StartNew();
            client.Tick(now);
            worst = Math.Max(worst, t.Elapsed.TotalMilliseconds);
            now += 16;
            Thread.Sleep(1);
        }
        var s = client.Stats;
        hold = worst / 1000;
        lock (said) capped = said.Any(m => m.Contains("(Limits."));
        return "ticks " + ticks + ", longest " + worst.ToString("0.0") + " ms, decisions " + s.StreamedDecisions
            + ", streams cut " + s.StreamsCut + ", errors " + s.Errors;
    }
}
