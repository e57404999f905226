// An ICortex on any OpenAI-compatible chat server (llama.cpp, Ollama, vLLM, LM Studio, hosted APIs), over the same
// IHttpSender seam as the rest of the SDK (HttpClient by default; UnityWebRequest plugs in: README).

using System;
using System.Collections.Generic;
using System.Text;
using System.Threading;
using System.Threading.Tasks;

namespace NpcMind
{
    /// <summary>Inference failed: the server is down, answered an error, or nothing usable. The message and
    /// <see cref="Url"/> name the address tried, so a wrong port or path shows in the first line.</summary>
    public sealed class CortexException : Exception
    {
        /// <summary>Null when a game's own cortex throws one with a message alone.</summary>
        public readonly string Url;

        public CortexException(string message, string url = null) : base(url == null ? message : message + " (" + url + ")")
        {
            Url = url;
        }
    }

    /// <summary>Chat completions at a base URL (e.g. http://127.0.0.1:11434/v1 for Ollama).</summary>
    public sealed class OpenAICortex : ICortex
    {
        /// <summary>The address every request goes to, named by every CortexException.</summary>
        public readonly string Url;
        public readonly string Model;
        private readonly string apiKey;
        private readonly IHttpSender http;
        private readonly double timeoutMs;

        public OpenAICortex(string baseUrl, string model = "local", string apiKey = null, IHttpSender http = null,
            double timeoutMs = 120000)
        {
            Url = Urls.Http(baseUrl, "baseUrl") + "/chat/completions";
            Model = model;
            this.apiKey = apiKey;
            this.http = http ?? new HttpClientSender();
            this.timeoutMs = timeoutMs;
        }

        /// <summary>One chat completion; the request is aborted when <paramref name="cancellationToken"/> fires.</summary>
        public async Task<string> Complete(string prompt, PromptConstraints constraints,
            CancellationToken cancellationToken = default(CancellationToken))
        {
            var message = new Dictionary<string, object> { { "role", "user" }, { "content", prompt } };
            var body = new Dictionary<string, object> { { "model", Model }, { "messages", new List<object> { message } } };
            constraints = constraints ?? new PromptConstraints();
            if (constraints.MaxTokens.HasValue) body["max_tokens"] = constraints.MaxTokens.Value;
            if (constraints.Temperature.HasValue) body["temperature"] = constraints.Temperature.Value;
            if (constraints.Stop != null && constraints.Stop.Count > 0) body["stop"] = constraints.Stop;
            var headers = new Dictionary<string, string> { { "content-type", "application/json" } };
            if (!string.IsNullOrEmpty(apiKey)) headers["authorization"] = "Bearer " + apiKey;
            var call = new HttpCall
            {
                Method = "POST", Url = Url, Headers = headers, Body = Encoding.UTF8.GetBytes(Json.Write(body)),
                TimeoutMs = timeoutMs, MaxBytes = Limits.MaxCortexBytes,
            };
            var result = await http.Call(call, cancellationToken).ConfigureAwait(false);
            if (result.Status == 0)
                throw new CortexException("cannot reach the cortex: "
                    + (result.TimedOut ? "no answer within " + timeoutMs + " ms" : result.Error), Url);
            var bytes = result.Body ?? new byte[0];
            int cap = Limits.For(result.Status, Limits.MaxCortexBytes, Limits.MaxErrorBytes);
            if (bytes.Length > cap)
                throw new CortexException(Limits.TooLarge("the cortex answered HTTP " + result.Status, cap,
                    Limits.Name(result.Status, Limits.MaxCortexBytes, "Limits.MaxCortexBytes")), Url);
            string text = Encoding.UTF8.GetString(bytes);
            if (result.Status < 200 || result.Status > 299)
                throw new CortexException("the cortex answered HTTP " + result.Status + ": "
                    + (text.Length > 200 ? text.Substring(0, 200) : text), Url);
            IDictionary<string, object> said = null;
            try
            {
                var choices = Json.Get(Json.Parse(text), "choices") as IList<object>;
                if (choices != null && choices.Count > 0) said = Json.Get(choices[0], "message") as IDictionary<string, object>;
            }
            catch (NpcJsonException)
            {
            }
            if (said == null) throw new CortexException("the cortex answered without choices[0].message.content", Url);
            return Errors.Text(Json.Get(said, "content")); // null content (a refusal): no text
        }
    }
}
