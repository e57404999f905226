// An ICortex on any OpenAI-compatible chat server (llama.cpp, Ollama, vLLM, LM Studio, hosted APIs), over the same
// IHttpSender seam as the rest of the SDK (HttpClient by default; UnityWebRequest plugs in: README). A parameter the
// model refuses (OpenAI's reasoning models refuse `temperature`, `stop` and `max_tokens`) is dropped, or the token
// limit renamed, and the call asked again, instead of failing every NPC turn: as the Python and TypeScript SDKs do.

using System;
using System.Collections.Generic;
using System.Linq;
using System.Text;
using System.Text.RegularExpressions;
using System.Threading;
using System.Threading.Tasks;

namespace NpcMind
{
    /// <summary>Inference failed: the server is down, answered an error, or nothing usable. The message and
    /// <see cref="Url"/> name the address tried, so a wrong port or path shows in the first line;
    /// <see cref="NpcMindException.Status"/> and <see cref="NpcMindException.Code"/> are the model server's (its HTTP
    /// status, its error body's <c>code</c> or <c>type</c>).</summary>
    public sealed class CortexException : NpcMindException
    {
        /// <summary>Null when a game's own cortex throws one with a message alone.</summary>
        public readonly string Url;

        public CortexException(string message, string url = null, int? status = null, string code = null)
            : base(url == null ? message : message + " (" + url + ")", status, code)
        {
            Url = url;
        }
    }

    /// <summary>Chat completions at a base URL (e.g. http://127.0.0.1:11434/v1 for Ollama).</summary>
    public sealed class OpenAICortex : ICortex
    {
        /// <summary>What the constraints ask that a model may refuse: dropped (the token limit renamed first) and the
        /// call asked again.</summary>
        internal static readonly string[] Optional = { "temperature", "stop", "max_tokens", "max_completion_tokens" };

        /// <summary>The address every request goes to, named by every CortexException.</summary>
        public readonly string Url;
        public readonly string Model;
        private readonly string apiKey;
        private readonly IHttpSender http;
        private readonly double timeoutMs;
        private readonly NpcMindLog log;
        private readonly HashSet<string> refused = new HashSet<string>(StringComparer.Ordinal);

        /// <summary><paramref name="log"/>: where a parameter the model refused is said (once each); standard error
        /// otherwise.</summary>
        public OpenAICortex(string baseUrl, string model = "local", string apiKey = null, IHttpSender http = null,
            double timeoutMs = 120000, NpcMindLog log = null)
        {
            Url = Urls.Http(baseUrl, "baseUrl") + "/chat/completions";
            Model = model;
            this.apiKey = apiKey;
            this.http = http ?? new HttpClientSender();
            this.timeoutMs = timeoutMs;
            this.log = log ?? (m => Console.Error.WriteLine("npcmind: " + m));
        }

        /// <summary>The parameters this model refused, no longer sent (<c>temperature</c>, <c>stop</c>,
        /// <c>max_tokens</c>, <c>max_completion_tokens</c>): a game can show them, or keep them for its next run.</summary>
        public IList<string> Refused
        {
            get { lock (refused) return Optional.Where(refused.Contains).ToList(); }
        }

        /// <summary>One chat completion, asked again without each parameter the model refuses (at most once per
        /// parameter); the request is aborted when <paramref name="cancellationToken"/> fires.</summary>
        public async Task<string> Complete(string prompt, PromptConstraints constraints,
            CancellationToken cancellationToken = default(CancellationToken))
        {
            constraints = constraints ?? new PromptConstraints();
            for (int tries = 0; ; tries++)
            {
                var body = Body(prompt, constraints);
                var result = await http.Call(Call(body), cancellationToken).ConfigureAwait(false);
                string text = Read(result);
                if (result.Status >= 200 && result.Status <= 299) return Content(text, result.Status);
                object answer = null;
                try { answer = Json.Parse(text); } catch (NpcJsonException) { }
                string name = tries < Optional.Length ? Params.Refused(result.Status, answer, body.Keys, Optional) : null;
                if (name == null)
                    throw new CortexException("the cortex answered HTTP " + result.Status + ": "
                        + (text.Length > 200 ? text.Substring(0, 200) : text), Url, result.Status, Params.Code(answer));
                lock (refused) refused.Add(name);
                log("the cortex model " + Model + " refused " + Errors.Quote(name) + "; it is no longer sent: "
                    + (text.Length > 200 ? text.Substring(0, 200) : text));
            }
        }

        /// <summary>The request's body: the constraints this model has not refused (the token limit under the first
        /// of its two names not refused).</summary>
        private Dictionary<string, object> Body(string prompt, PromptConstraints constraints)
        {
            var message = new Dictionary<string, object> { { "role", "user" }, { "content", prompt } };
            var body = new Dictionary<string, object> { { "model", Model }, { "messages", new List<object> { message } } };
            lock (refused)
            {
                if (constraints.MaxTokens.HasValue)
                {
                    string limit = new[] { "max_tokens", "max_completion_tokens" }.FirstOrDefault(n => !refused.Contains(n));
                    if (limit != null) body[limit] = constraints.MaxTokens.Value;
                }
                if (constraints.Temperature.HasValue && !refused.Contains("temperature"))
                    body["temperature"] = constraints.Temperature.Value;
                if (constraints.Stop != null && constraints.Stop.Count > 0 && !refused.Contains("stop"))
                    body["stop"] = constraints.Stop;
            }
            return body;
        }

        private HttpCall Call(Dictionary<string, object> body)
        {
            var headers = new Dictionary<string, string> { { "content-type", "application/json" } };
            if (!string.IsNullOrEmpty(apiKey)) headers["authorization"] = "Bearer " + apiKey;
            return new HttpCall
            {
                Method = "POST", Url = Url, Headers = headers, Body = Encoding.UTF8.GetBytes(Json.Write(body)),
                TimeoutMs = timeoutMs, MaxBytes = Limits.MaxCortexBytes,
            };
        }

        /// <summary>An answer's text, within its cap; a CortexException when none came or it is past the cap.</summary>
        private string Read(HttpResult result)
        {
            if (result.Status == 0)
                throw new CortexException("cannot reach the cortex: "
                    + (result.TimedOut ? "no answer within " + timeoutMs + " ms" : result.Error), Url);
            var bytes = result.Body ?? new byte[0];
            int cap = Limits.For(result.Status, Limits.MaxCortexBytes, Limits.MaxErrorBytes);
            if (bytes.Length > cap)
                throw new CortexException(Limits.TooLarge("the cortex answered HTTP " + result.Status, cap,
                    Limits.Name(result.Status, Limits.MaxCortexBytes, "Limits.MaxCortexBytes")), Url, result.Status,
                    TooLargeException.TooLargeCode);
            return Encoding.UTF8.GetString(bytes);
        }

        private string Content(string text, int status)
        {
            IDictionary<string, object> said = null;
            try
            {
                var choices = Json.Get(Json.Parse(text), "choices") as IList<object>;
                if (choices != null && choices.Count > 0) said = Json.Get(choices[0], "message") as IDictionary<string, object>;
            }
            catch (NpcJsonException)
            {
            }
            if (said == null) throw new CortexException("the cortex answered without choices[0].message.content", Url, status);
            return Errors.Text(Json.Get(said, "content")); // null content (a refusal): no text
        }
    }

    /// <summary>Parameters an OpenAI-compatible model refuses, found in its error answer (Python's
    /// <c>npcmind_client.params</c>, the same rules).</summary>
    internal static class Params
    {
        private static readonly string[] RefusalWords =
            { "support", "unrecognized", "unknown", "extra", "not permitted", "not allowed", "input should be" };

        /// <summary>The parameter of <paramref name="optional"/> and <paramref name="sent"/> that an error answer says
        /// the model does not take, or null. OpenAI names it in <c>error.param</c> of a 400; other servers (vLLM,
        /// llama.cpp, proxies) only in the message, some with a 422; llama-cpp-python's server answers its request
        /// validation errors with a 500.</summary>
        public static string Refused(int status, object body, ICollection<string> sent, IList<string> optional)
        {
            if ((status != 400 && status != 422 && status != 500) || !(body is IDictionary<string, object>)) return null;
            string text = Json.Write(body);
            if (status == 500 && !text.Contains("validation error")) return null; // the server's own failure
            var candidates = optional.Where(sent.Contains).ToList();
            object param = Json.Get(Json.Get(body, "error"), "param");
            if (param is string) return candidates.Contains((string)param) ? (string)param : null;
            string lower = text.ToLowerInvariant();
            if (!RefusalWords.Any(w => lower.Contains(w))) return null;
            string first = null;
            int at = int.MaxValue;
            foreach (var name in candidates)
            {
                var m = Regex.Match(text, @"(?<!\w)" + Regex.Escape(name) + @"(?!\w)");
                if (m.Success && m.Index < at) { at = m.Index; first = name; }
            }
            return first;
        }

        /// <summary>The error code of an OpenAI-style error answer (<c>error.code</c>, else <c>error.type</c>), or null.</summary>
        public static string Code(object body)
        {
            var error = Json.Get(body, "error");
            var code = Json.Get(error, "code") as string;
            return !string.IsNullOrEmpty(code) ? code : Json.Get(error, "type") as string;
        }
    }
}
