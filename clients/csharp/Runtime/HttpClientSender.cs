// The IHttpSender over System.Net.Http.HttpClient: desktop .NET, mobile, Godot 4 .NET, MonoGame, FNA, Stride.
// Calls run on the thread pool; their results reach the game only through the transport's queue.

using System;
using System.Collections.Generic;
using System.IO;
using System.Net.Http;
using System.Threading;
using System.Threading.Tasks;

namespace NpcMind
{
    /// <summary>HTTP over one shared HttpClient (its connections are reused: one client a game, not one a call).</summary>
    public sealed class HttpClientSender : IHttpSender, IDisposable
    {
        private readonly HttpClient client;
        private readonly bool owned;
        private CancellationTokenSource all = new CancellationTokenSource();

        /// <summary>A sender over the game's own HttpClient (a proxy, a handler of its own), or a new one.</summary>
        public HttpClientSender(HttpClient client = null)
        {
            owned = client == null;
            this.client = client ?? new HttpClient();
            this.client.Timeout = System.Threading.Timeout.InfiniteTimeSpan; // each call has its own
        }

        public void Send(HttpCall call, Action<HttpResult> done)
        {
            var timeout = new CancellationTokenSource(TimeSpan.FromMilliseconds(Math.Max(1, call.TimeoutMs)));
            var both = CancellationTokenSource.CreateLinkedTokenSource(timeout.Token, all.Token, call.CancellationToken);
            // on the pool from the first line: HttpClient's synchronous start (a connection, a name lookup on some
            // runtimes) must not run on the game's thread inside Tick()
            Task.Run(() => Run(call, both.Token)).ContinueWith(t =>
            {
                HttpResult result;
                if (t.Status == TaskStatus.RanToCompletion) result = t.Result;
                else
                {
                    var exc = t.Exception != null ? t.Exception.GetBaseException() : null;
                    bool cancelled = call.CancellationToken.IsCancellationRequested && !timeout.IsCancellationRequested;
                    result = HttpResult.Failed(timeout.IsCancellationRequested && !cancelled,
                        cancelled ? "cancelled by the caller" : exc != null ? exc.Message : "cancelled");
                }
                both.Dispose();
                timeout.Dispose();
                done(result);
            }, TaskScheduler.Default);
        }

        private async Task<HttpResult> Run(HttpCall call, CancellationToken token)
        {
            using (var request = new HttpRequestMessage(new HttpMethod(call.Method), call.Url))
            {
                if (call.Body != null) request.Content = new ByteArrayContent(call.Body);
                foreach (var h in call.Headers)
                {
                    if (h.Key == "content-type" || h.Key == "content-encoding")
                    {
                        if (request.Content != null) request.Content.Headers.TryAddWithoutValidation(h.Key, h.Value);
                    }
                    else request.Headers.TryAddWithoutValidation(h.Key, h.Value);
                }
                using (var response = await client.SendAsync(request, HttpCompletionOption.ResponseHeadersRead, token).ConfigureAwait(false))
                {
                    var result = new HttpResult { Status = (int)response.StatusCode, Headers = new Dictionary<string, string>() };
                    foreach (var h in response.Headers) result.Headers[h.Key.ToLowerInvariant()] = string.Join(", ", h.Value);
                    if (response.Content != null)
                    {
                        foreach (var h in response.Content.Headers) result.Headers[h.Key.ToLowerInvariant()] = string.Join(", ", h.Value);
                        string media = response.Content.Headers.ContentType != null ? response.Content.Headers.ContentType.MediaType : null;
                        using (var stream = await response.Content.ReadAsStreamAsync().ConfigureAwait(false))
                        {
                            if (call.OnChunk != null && result.Status == 200 && media == Transport.Ndjson)
                                return await Chunks(stream, call, result, token).ConfigureAwait(false);
                            int cap = Limits.For(result.Status, call.MaxBytes, call.MaxErrorBytes);
                            result.Body = await Capped(stream, cap, token).ConfigureAwait(false);
                        }
                    }
                    return result;
                }
            }
        }

        /// <summary>A streamed answer's bytes handed on as they arrive, no further than the call's MaxBytes in all;
        /// broken off midway (or by OnChunk throwing: the transport's way to stop it), the result says why (the lines
        /// that came stand).</summary>
        private static async Task<HttpResult> Chunks(Stream stream, HttpCall call, HttpResult result, CancellationToken token)
        {
            result.Streamed = true;
            var buffer = new byte[8192];
            long total = 0, max = call.MaxBytes > 0 ? call.MaxBytes : long.MaxValue;
            try
            {
                int n;
                while ((n = await stream.ReadAsync(buffer, 0, buffer.Length, token).ConfigureAwait(false)) > 0)
                {
                    total += n;
                    if (total > max)
                    {
                        result.Error = "the stream is larger than " + Limits.Bytes(max) + " bytes (MaxBytes), not read past that";
                        result.TooLarge = true;
                        break;
                    }
                    var data = new byte[n];
                    Array.Copy(buffer, data, n);
                    call.OnChunk(data);
                }
            }
            catch (Exception exc)
            {
                result.Error = exc.Message;
                result.TimedOut = exc is OperationCanceledException;
            }
            return result;
        }

        /// <summary>A body read no further than one byte past <paramref name="max"/>: the rest is never downloaded.</summary>
        private static async Task<byte[]> Capped(Stream stream, int max, CancellationToken token)
        {
            var output = new MemoryStream();
            var buffer = new byte[16384];
            long limit = (long)max + 1;
            while (output.Length < limit)
            {
                int want = (int)Math.Min(buffer.Length, limit - output.Length);
                int n = await stream.ReadAsync(buffer, 0, want, token).ConfigureAwait(false);
                if (n <= 0) break;
                output.Write(buffer, 0, n);
            }
            return output.ToArray();
        }

        public void CancelAll()
        {
            var old = Interlocked.Exchange(ref all, new CancellationTokenSource());
            old.Cancel();
        }

        public void Dispose()
        {
            CancelAll();
            if (owned) client.Dispose();
        }
    }
}
