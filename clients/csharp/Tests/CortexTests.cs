// OpenAICortex asks a model again without the parameters it refused (Python's npcmind_client.params rules): OpenAI
// names one in `error.param` of a 400, other servers in the message (a 422, llama-cpp-python's validation 500); the
// token limit is renamed before it is dropped; anything else is a CortexException with the server's status and code.
// The same against a real chat-completions server: tests/test_csharp.py (the project's scripted provider).

using System;
using System.Collections.Generic;
using System.Linq;
using NpcMind;
using NUnit.Framework;

namespace NpcMind.Tests
{
    [TestFixture]
    public class CortexTests
    {
        private static readonly HttpResult Said = AnsweringHttp.Ok(Json.Parse("{\"choices\": [{\"message\": {\"content\": \"Well met.\"}}]}"));

        private static PromptConstraints Asked()
        {
            return new PromptConstraints { MaxTokens = 50, Temperature = 0.7, Stop = new List<string> { "\n\n" } };
        }

        private static HttpResult Error(int status, string json)
        {
            return AnsweringHttp.Ok(Json.Parse(json), status);
        }

        private static string[] Keys(HttpCall call)
        {
            return AnsweringHttp.Sent(call).Keys.Where(k => k != "model" && k != "messages").OrderBy(k => k, StringComparer.Ordinal).ToArray();
        }

        [Test]
        public void ARefusedParameterIsDroppedTheLimitRenamedAndTheCallAskedAgain()
        {
            var said = new List<string>();
            var http = new AnsweringHttp(call =>
            {
                var sent = AnsweringHttp.Sent(call);
                if (sent.ContainsKey("temperature")) // OpenAI's reasoning models: the parameter named in error.param
                    return Error(400, @"{""error"": {""message"": ""Unsupported value: 'temperature' does not support 0.7 with this model."",
                        ""type"": ""invalid_request_error"", ""param"": ""temperature"", ""code"": ""unsupported_value""}}");
                if (sent.ContainsKey("max_tokens")) // a server naming it in its message alone
                    return Error(400, @"{""error"": {""message"": ""Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead."",
                        ""type"": ""invalid_request_error""}}");
                return Said;
            });
            var cortex = new OpenAICortex("http://llm:9/v1", "o4-mini", null, http, log: m => said.Add(m));
            Assert.AreEqual("Well met.", cortex.Complete("Say hi.", Asked()).Result);
            Assert.AreEqual(3, http.Calls.Count);
            Assert.AreEqual(new[] { "max_tokens", "stop", "temperature" }, Keys(http.Calls[0]));
            Assert.AreEqual(new[] { "max_tokens", "stop" }, Keys(http.Calls[1]));
            Assert.AreEqual(new[] { "max_completion_tokens", "stop" }, Keys(http.Calls[2]), "the limit under its other name");
            Assert.AreEqual(50.0, Json.ToDouble(AnsweringHttp.Sent(http.Calls[2])["max_completion_tokens"]));
            Assert.AreEqual(new[] { "temperature", "max_tokens" }, cortex.Refused.ToArray());
            Assert.AreEqual(2, said.Count, string.Join(" | ", said));
            StringAssert.Contains("o4-mini refused \"temperature\"", said[0]);

            Assert.AreEqual("Well met.", cortex.Complete("Again.", Asked()).Result);
            Assert.AreEqual(4, http.Calls.Count, "what it refused is no longer sent: one call");
            Assert.AreEqual(new[] { "max_completion_tokens", "stop" }, Keys(http.Calls[3]));
        }

        [Test]
        public void ARefusalInAMessageIsFoundIn422sAndInAValidation500()
        {
            var answers = new Queue<HttpResult>(new[]
            {
                Error(422, @"{""detail"": [{""loc"": [""body"", ""stop""], ""msg"": ""Extra inputs are not permitted""}]}"),
                Error(500, @"{""error"": {""message"": ""1 validation error for Request: temperature: input should be less than 0.5""}}"),
                Said,
            });
            var http = new AnsweringHttp(call => answers.Dequeue());
            var cortex = new OpenAICortex("http://llm:9/v1", "m", null, http, log: m => { });
            Assert.AreEqual("Well met.", cortex.Complete("p", Asked()).Result);
            Assert.AreEqual(new[] { "temperature", "stop" }, cortex.Refused.ToArray(), "in the order of Optional");
            Assert.AreEqual(new[] { "max_tokens" }, Keys(http.Calls[2]));
        }

        private static CortexException Fails(Func<HttpCall, HttpResult> answer, out AnsweringHttp http)
        {
            http = new AnsweringHttp(answer);
            var cortex = new OpenAICortex("http://llm:9/v1", "m", null, http, log: m => { });
            var e = Assert.Throws<AggregateException>(() => cortex.Complete("p", Asked()).Wait());
            Assert.IsInstanceOf<CortexException>(e.InnerException);
            CollectionAssert.IsEmpty(cortex.Refused);
            return (CortexException)e.InnerException;
        }

        [Test]
        public void AnErrorThatRefusesNoParameterSentFailsAtOnceWithTheServersStatusAndCode()
        {
            AnsweringHttp http;
            var e = Fails(c => Error(400, @"{""error"": {""message"": ""messages: too long"", ""type"": ""invalid_request_error"", ""param"": ""messages""}}"), out http);
            Assert.AreEqual(1, http.Calls.Count, "messages cannot be left out");
            Assert.AreEqual(400, e.Status);
            Assert.AreEqual("invalid_request_error", e.Code, "error.type when there is no error.code");
            e = Fails(c => Error(400, @"{""error"": {""message"": ""unsupported: logprobs"", ""code"": ""bad_param""}}"), out http);
            Assert.AreEqual(1, http.Calls.Count, "not a parameter this cortex sends");
            Assert.AreEqual("bad_param", e.Code);
            e = Fails(c => Error(500, @"{""error"": {""message"": ""temperature sampler crashed: unknown error""}}"), out http);
            Assert.AreEqual(1, http.Calls.Count, "a 500 that is no validation error is the server's own failure");
            Assert.AreEqual(500, e.Status);
            e = Fails(c => Error(503, @"{""error"": {""message"": ""stop is not supported""}}"), out http);
            Assert.AreEqual(1, http.Calls.Count, "only 400, 422 and a validation 500 refuse a parameter");
            e = Fails(c => new HttpResult { Status = 400, Body = System.Text.Encoding.UTF8.GetBytes("unsupported parameter: temperature") }, out http);
            Assert.AreEqual(1, http.Calls.Count, "a body that is no JSON object says nothing of parameters");
            Assert.IsNull(e.Code);
        }

        [Test]
        public void AModelRefusingEverythingIsAskedOncePerParameterAtMost()
        {
            var http = new AnsweringHttp(call =>
            {
                var left = OpenAICortex.Optional.Where(AnsweringHttp.Sent(call).ContainsKey).ToList();
                string named = left.Count > 0 ? left[0] : "messages";
                return Error(400, "{\"error\": {\"message\": \"unknown parameter " + named + "\"}}");
            });
            var cortex = new OpenAICortex("http://llm:9/v1", "m", null, http, log: m => { });
            var e = Assert.Throws<AggregateException>(() => cortex.Complete("p", Asked()).Wait()).InnerException;
            Assert.IsInstanceOf<CortexException>(e);
            StringAssert.Contains("unknown parameter messages", e.Message);
            Assert.AreEqual(5, http.Calls.Count, "temperature, stop, max_tokens, max_completion_tokens, then the error");
            Assert.AreEqual(new[] { "temperature", "stop", "max_tokens", "max_completion_tokens" }, cortex.Refused.ToArray());
            CollectionAssert.IsEmpty(Keys(http.Calls[4]));
        }
    }
}
