// IHttpSender over UnityWebRequest: the HTTP of every Unity player, WebGL's included (it has no sockets, so
// HttpClientSender cannot work there). No thread: Unity calls `completed` on the main thread, in a later frame.
// A call's CancellationToken aborts its request: cancel it on the main thread (Unity's API is main-thread only).
// Compiled here against stand-ins of the Unity types it touches (Examples~/Engines/UnityEngine.cs).
using System;
using System.Collections.Generic;
using NpcMind;
using UnityEngine.Networking;

namespace NpcMind.Unity
{
    /// <summary>Sends the SDK's requests with UnityWebRequest; give it to DecideClientOptions.Http (the runner does).</summary>
    public sealed class UnityWebRequestSender : IHttpSender
    {
        private readonly List<UnityWebRequest> running = new List<UnityWebRequest>();

        public void Send(HttpCall call, Action<HttpResult> done)
        {
            if (call.CancellationToken.IsCancellationRequested)
            {
                done(HttpResult.Failed(false, "cancelled by the caller"));
                return;
            }
            var r = new UnityWebRequest(call.Url, call.Method, new DownloadHandlerBuffer(),
                call.Body != null ? new UploadHandlerRaw(call.Body) : null);
            if (call.Headers != null)
                foreach (var h in call.Headers) r.SetRequestHeader(h.Key, h.Value);
            r.timeout = Math.Max(1, (int)Math.Ceiling(call.TimeoutMs / 1000));
            running.Add(r);
            var abort = call.CancellationToken.Register(r.Abort); // Unity then calls `completed`, as for any end
            r.SendWebRequest().completed += _ =>
            {
                abort.Dispose();
                running.Remove(r);
                HttpResult got;
                try { got = Result(r, call); }
                catch (Exception e) { got = HttpResult.Failed(false, e.Message); }
                r.Dispose();
                done(got);
            };
        }

        /// <summary>Abort every request still running (the runner's OnDestroy, a game that quits).</summary>
        public void CancelAll()
        {
            foreach (var r in running.ToArray()) r.Abort();
        }

        private static HttpResult Result(UnityWebRequest r, HttpCall call)
        {
            if (r.responseCode == 0)
                return HttpResult.Failed(r.error == "Request timeout", r.error ?? "no answer");
            var got = new HttpResult { Status = (int)r.responseCode, Body = r.downloadHandler.data ?? new byte[0] };
            int cap = got.Status >= 400 && call.MaxErrorBytes > 0 && (call.MaxBytes == 0 || call.MaxErrorBytes < call.MaxBytes)
                ? call.MaxErrorBytes : call.MaxBytes;
            if (cap > 0 && got.Body.Length > cap + 1) // the transport refuses it anyway: one byte past says so
                Array.Resize(ref got.Body, cap + 1);
            var headers = r.GetResponseHeaders();
            if (headers != null)
                foreach (var h in headers) got.Headers[h.Key.ToLowerInvariant()] = h.Value;
            return got;
        }
    }
}
