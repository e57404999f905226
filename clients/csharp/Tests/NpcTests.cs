// Dialogue NPCs: the canonical JSON and signed payload against the service's own vectors
// (docs/signature-vectors.json), and DialogueClient's step loop over a sender that plays the service: the tape
// sent back as received, what each instruction is answered with, nothing applied until the game applies it,
// and every failure an NpcMindException of its kind (with the status and the service's code) that says what went wrong.

using System;
using System.Collections.Generic;
using System.Globalization;
using System.Linq;
using System.Reflection;
using System.Text;
using System.Threading;
using System.Threading.Tasks;
using NpcMind;
using NUnit.Framework;

namespace NpcMind.Tests
{
    /// <summary>An IHttpSender answering each call at once with what <c>answer</c> gives (a service in a test).</summary>
    internal sealed class AnsweringHttp : IHttpSender
    {
        public readonly List<HttpCall> Calls = new List<HttpCall>();
        private readonly Func<HttpCall, HttpResult> answer;

        public AnsweringHttp(Func<HttpCall, HttpResult> answer) { this.answer = answer; }

        public void Send(HttpCall call, Action<HttpResult> done)
        {
            lock (Calls) Calls.Add(call);
            done(answer(call));
        }

        public void CancelAll() { }

        public static HttpResult Ok(object json, int status = 200)
        {
            return new HttpResult { Status = status, Body = Encoding.UTF8.GetBytes(Json.Write(json)) };
        }

        public static IDictionary<string, object> Sent(HttpCall call)
        {
            return (IDictionary<string, object>)Json.Parse(Encoding.UTF8.GetString(call.Body));
        }
    }

    /// <summary>A cortex that answers one text and keeps the prompts it was given.</summary>
    internal sealed class TextCortex : ICortex
    {
        public readonly List<string> Prompts = new List<string>();
        public PromptConstraints Last;
        public CancellationToken Token;
        /// <summary>Run when asked, before answering (a test that cancels the turn there).</summary>
        public Action OnAsked;
        private readonly string text;

        public TextCortex(string text) { this.text = text; }

        public Task<string> Complete(string prompt, PromptConstraints constraints,
            CancellationToken cancellationToken = default(CancellationToken))
        {
            Prompts.Add(prompt);
            Last = constraints;
            Token = cancellationToken;
            if (OnAsked != null) OnAsked();
            return Task.FromResult(text);
        }
    }

    [TestFixture]
    public class NpcTests
    {
        private static IDictionary<string, object> Vectors()
        {
            return (IDictionary<string, object>)Cases.Read(Cases.SignatureVectors);
        }

        public static IEnumerable<TestCaseData> CanonicalVectors()
        {
            foreach (var v in (IList<object>)Vectors()["canonical"])
                yield return new TestCaseData(v).SetName("jcs vector: " + Json.Get(v, "name"));
        }

        [TestCaseSource("CanonicalVectors")]
        public void CanonicalFormAndDigestAsTheServiceMakesThem(object v)
        {
            var value = Json.Parse((string)Json.Get(v, "json"));
            Assert.AreEqual(Json.Get(v, "canonical"), Jcs.Canonical(value));
            Assert.AreEqual(Json.Get(v, "sha256"), Jcs.Digest(value));
        }

        [Test]
        public void EveryNumberOfRfc8785AppendixBIsWrittenAsEcmaScriptWritesIt()
        {
            var numbers = (IList<object>)Vectors()["numbers"];
            Assert.That(numbers.Count, Is.GreaterThan(20));
            foreach (var n in numbers)
            {
                double x = BitConverter.Int64BitsToDouble(Convert.ToInt64((string)Json.Get(n, "ieee754"), 16));
                Assert.AreEqual(Json.Get(n, "canonical"), Jcs.Number(x), "ieee754 " + Json.Get(n, "ieee754"));
            }
        }

        [Test]
        public void ANumberNoDoubleHoldsHasNoCanonicalFormAndItsPathIsSaid()
        {
            foreach (var v in (IList<object>)Vectors()["refused"])
            {
                var e = Assert.Throws<NotCanonicalException>(() => Jcs.Canonical(Json.Parse((string)Json.Get(v, "json"))));
                Assert.AreEqual(Json.Get(v, "path"), e.Path, e.Message);
            }
            var nested = new Dictionary<string, object> { { "npcState", new Dictionary<string, object> { { "gold", double.NaN } } } };
            Assert.AreEqual("npcState.gold", Assert.Throws<NotCanonicalException>(() => Jcs.Canonical(nested)).Path);
            Assert.Throws<NotCanonicalException>(() => Jcs.Canonical(new object()));
        }

        [Test]
        public void TheSignedPayloadIsTheBytesTheServiceSigned()
        {
            var s = (IDictionary<string, object>)((IList<object>)Vectors()["signatures"])[0];
            var tape = Json.Parse((string)s["tapeJson"]);
            Assert.AreEqual(s["tapeDigest"], Jcs.Digest(tape));
            var payload = Signing.SignedPayload((string)s["npcId"], (IDictionary<string, object>)s["finalize"], tape);
            Assert.AreEqual(s["payloadCanonical"], Jcs.Canonical(payload));
            Assert.IsFalse(Jcs.Canonical(payload).Contains("\"signature\""), "the signature signs itself");
        }

        // --- the signature, checked by the vendored Bouncy Castle ------------------------------------------------

        [Test]
        public void SignaturesAreCheckedByManagedCodeAloneNoNativeLibrary()
        {
            // every platform verifies the same way: no method of the SDK is a P/Invoke (libsodium was one, and no
            // Unity player ships it), and the verifier is the vendored, strong-named Bouncy Castle
            var sdk = typeof(Ed25519).Assembly;
            var native = sdk.GetTypes().SelectMany(t => t.GetMethods(BindingFlags.Public | BindingFlags.NonPublic
                | BindingFlags.Static | BindingFlags.Instance | BindingFlags.DeclaredOnly))
                .Where(m => (m.Attributes & MethodAttributes.PinvokeImpl) != 0).Select(m => m.DeclaringType + "." + m.Name).ToList();
            CollectionAssert.IsEmpty(native);
            var bc = typeof(Org.BouncyCastle.Math.EC.Rfc8032.Ed25519).Assembly.GetName();
            Assert.AreEqual("BouncyCastle.Crypto", bc.Name);
            Assert.AreEqual("0e99375e54769942", BitConverter.ToString(bc.GetPublicKeyToken()).Replace("-", "").ToLowerInvariant());
            Assert.IsTrue(sdk.GetReferencedAssemblies().Any(r => r.Name == "BouncyCastle.Crypto"));
        }

        [Test]
        public void NoPublicTypeCollidesWithANameAUnityProjectHasInScope()
        {
            // Unity projects have UnityEngine.Logger, Newtonsoft's JsonException and ECS's Entity in scope: a public
            // type of the same name makes every `using NpcMind;` file ambiguous
            var names = typeof(DecideClient).Assembly.GetExportedTypes().Select(t => t.Name).ToList();
            Assert.That(names.Count, Is.GreaterThan(20));
            CollectionAssert.IsEmpty(names.Intersect(new[] { "Logger", "JsonException", "Entity", "Object", "Debug", "Random", "Time" }));
        }

        [Test]
        public void ASignedOutcomeVerifiesAndAnyChangedByteFails()
        {
            var vectors = (IList<object>)Vectors()["signatures"];
            Assert.That(vectors.Count, Is.GreaterThan(0));
            foreach (IDictionary<string, object> v in vectors)
            {
                var keys = new Dictionary<string, string> { { (string)v["kid"], (string)v["publicKey"] } };
                var fin = (IDictionary<string, object>)v["finalize"];
                var tape = Json.Parse((string)v["tapeJson"]);
                string sig = (string)fin["signature"], name = (string)v["name"];
                Func<string, IDictionary<string, object>, object, string> payload = (npc, f, t) => Jcs.Canonical(Signing.SignedPayload(npc, f, t));
                Assert.IsTrue(Signing.Verify(sig, payload((string)v["npcId"], fin, tape), keys), name);
                var forged = new Dictionary<string, object>(fin) { ["dialogue"] = "Something else." };
                Assert.IsFalse(Signing.Verify(sig, payload((string)v["npcId"], forged, tape), keys), name + ": another line");
                Assert.IsFalse(Signing.Verify(sig, payload("other", fin, tape), keys), name + ": another NPC");
                var richer = (IDictionary<string, object>)Json.Parse((string)v["tapeJson"]);
                richer["observation"] = "Hi.";
                Assert.IsFalse(Signing.Verify(sig, payload((string)v["npcId"], fin, richer), keys), name + ": another tape");
                Assert.IsFalse(Signing.Verify(sig, payload((string)v["npcId"], fin, tape),
                    new Dictionary<string, string> { { "other-kid", (string)v["publicKey"] } }), name + ": an unknown kid");
                // the last character with its lowest bit flipped: the same 64 bytes (a padding bit), another text
                const string Alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
                char last = Alphabet[Alphabet.IndexOf(sig[sig.Length - 1]) ^ 1];
                string padded = sig.Substring(0, sig.Length - 1) + last;
                Assert.AreEqual(Signing.Unb64(sig.Split('.')[1]), Signing.Unb64(padded.Split('.')[1]), "the same bytes");
                Assert.IsFalse(Signing.Verify(padded, payload((string)v["npcId"], fin, tape), keys), name + ": one encoding a signature");
                foreach (var odd in new[] { "", ".", sig.Split('.')[0], sig + "=", sig.Replace('-', '+'), sig + " " })
                    Assert.IsFalse(Signing.Verify(odd, payload((string)v["npcId"], fin, tape), keys), "odd signature \"" + odd + "\"");
            }
        }

        [Test]
        public void Base64UrlIsReadStrictly()
        {
            Assert.AreEqual(new byte[] { 0xfb, 0xff }, Signing.Unb64("-_8"));
            Assert.AreEqual("-_8", Signing.B64(new byte[] { 0xfb, 0xff }));
            foreach (var odd in new[] { "+/8", "-_8=", "a", "ab$d", null })
                Assert.IsNull(Signing.Unb64(odd), odd ?? "null");
            Assert.IsFalse(Ed25519.Verify(new byte[63], new byte[0], new byte[32]), "a signature of 63 bytes");
            Assert.IsFalse(Ed25519.Verify(new byte[64], new byte[0], new byte[31]), "a key of 31 bytes");
        }

        /// <summary>A service whose first step is the signature vector's Finalize over its tape, and whose keys are
        /// <paramref name="keys"/> (a list of answers: the next one at each GET /v1/keys).</summary>
        private static AnsweringHttp Signed(IDictionary<string, object> v, params string[] keys)
        {
            int asked = 0;
            return new AnsweringHttp(call =>
            {
                if (call.Url.EndsWith("/v1/keys", StringComparison.Ordinal))
                {
                    string key = keys[Math.Min(asked++, keys.Length - 1)];
                    return AnsweringHttp.Ok(Json.Parse("{\"keys\": [{\"kid\": \"" + v["kid"] + "\", \"alg\": \"Ed25519\", \"public_key\": \"" + key + "\"}]}"));
                }
                return AnsweringHttp.Ok(new Dictionary<string, object> { { "instruction", v["finalize"] }, { "tape", Json.Parse((string)v["tapeJson"]) } });
            });
        }

        [Test]
        public void ProcessVerifiesTheOutcomeAndRefusesOneThatDoesNotVerify()
        {
            var v = (IDictionary<string, object>)((IList<object>)Vectors()["signatures"])[0];
            string right = (string)v["publicKey"], wrong = Signing.B64(new byte[32]);
            Func<AnsweringHttp, DialogueClient> mind = http =>
            {
                var npcs = new InMemoryNpcs();
                npcs.Register((string)v["npcId"], "Mara.");
                return new DialogueClient("http://svc:1", new TextCortex("Hm."), npcs, new DialogueClientOptions { Http = http });
            };
            var good = Signed(v, right);
            var checking = mind(good);
            Assert.IsTrue(checking.ChecksSignatures, "checked by default, on every platform");
            var outcome = checking.Process((string)v["npcId"], "A traveller asks for a room.").Result;
            Assert.IsTrue(outcome.Valid && outcome.Verified && outcome.Applied);
            checking.Process((string)v["npcId"], "Again.").Wait();
            Assert.AreEqual(1, good.Calls.Count(c => c.Url.EndsWith("/v1/keys", StringComparison.Ordinal)), "the keys are kept");

            var rotated = Signed(v, wrong, right); // the keys it got do not verify: asked again once (a key rotated)
            Assert.IsTrue(mind(rotated).Process((string)v["npcId"], "Hello.").Result.Verified);
            Assert.AreEqual(2, rotated.Calls.Count(c => c.Url.EndsWith("/v1/keys", StringComparison.Ordinal)));

            var forged = Signed(v, wrong);
            var e = Assert.Throws<AggregateException>(() => mind(forged).Process((string)v["npcId"], "Hello.").Wait());
            Assert.AreEqual(2, forged.Calls.Count(c => c.Url.EndsWith("/v1/keys", StringComparison.Ordinal)), "asked again once");
            Assert.IsInstanceOf<SignatureException>(e.InnerException, "a signature that does not verify is no refusal of the service");
            Assert.IsNotInstanceOf<ServiceException>(e.InnerException);
            Assert.That(e.InnerException.Message, Is.StringContaining("does not verify").And.StringContaining("nothing was applied"));
        }

        [Test]
        public void AVerifiedOutcomeIsAppliedByTheSdkAndAForgedOneAppliesNothing()
        {
            // one rule in the three SDKs: Process verifies the outcome, then keeps its memories and merges its state
            var v = (IDictionary<string, object>)((IList<object>)Vectors()["signatures"])[0];
            string npc = (string)v["npcId"], right = (string)v["publicKey"], wrong = Signing.B64(new byte[32]);
            Func<InMemoryNpcs> fresh = () =>
            {
                var made = new InMemoryNpcs();
                made.Register(npc, "Mara.", null, new Dictionary<string, object> { { "turns", 4L }, { "mood", "calm" } });
                return made;
            };
            var npcs = fresh();
            var outcome = new DialogueClient("http://svc:1", new TextCortex("Hm."), npcs, new DialogueClientOptions { Http = Signed(v, right) })
                .Process(npc, "A traveller asks for a room.").Result;
            Assert.IsTrue(outcome.Verified && outcome.Applied, "verified, then applied");
            Assert.AreEqual(1, outcome.Remembered);
            Assert.AreEqual("A traveller asks for a room.", npcs.Remembered(npc).Single().Text, "the memory kept");
            Assert.AreEqual(MemoryKind.Observation, npcs.Remembered(npc).Single().Type);
            var state = npcs.Get(npc).State;
            Assert.AreEqual(5L, state["turns"], "the state transform merged");
            Assert.AreEqual("Welcome back!", state["lastDialogue"]);
            Assert.AreEqual("calm", state["mood"], "what the patch does not name is kept");
            Assert.IsFalse(state.ContainsKey("lastAction"), "a null in the patch removes the key");
            Assert.AreSame(state, outcome.State, "the outcome's state is the memory's merged one");
            Assert.AreEqual(1, outcome.Memories.Count, "what was applied, for the game to see");
            Assert.AreEqual(5L, outcome.StateTransform["turns"]);

            foreach (var keys in new[] { new[] { wrong }, new[] { wrong, wrong } }) // forged, and still forged once asked again
            {
                var untouched = fresh();
                var forged = new DialogueClient("http://svc:1", new TextCortex("Hm."), untouched, new DialogueClientOptions { Http = Signed(v, keys) });
                var e = Assert.Throws<AggregateException>(() => forged.Process(npc, "A traveller asks for a room.").Wait()).InnerException;
                Assert.IsInstanceOf<SignatureException>(e);
                CollectionAssert.IsEmpty(untouched.Remembered(npc), "no memory kept");
                Assert.AreEqual(4L, untouched.Get(npc).State["turns"], "the state as it was");
                Assert.AreEqual(2, untouched.Get(npc).State.Count);
            }

            var pinnedWrong = fresh(); // a pinned key that is not the signer's: refused the same way
            var pinned = new DialogueClient("http://svc:1", new TextCortex("Hm."), pinnedWrong, new DialogueClientOptions
            {
                Http = Signed(v, right), Keys = new Dictionary<string, string> { { (string)v["kid"], wrong } },
            });
            Assert.IsInstanceOf<SignatureException>(Assert.Throws<AggregateException>(() => pinned.Process(npc, "Hi.").Wait()).InnerException);
            CollectionAssert.IsEmpty(pinnedWrong.Remembered(npc));
        }

        [Test]
        public void PinnedKeysAloneAreTrustedAndNoneIsFetched()
        {
            var v = (IDictionary<string, object>)((IList<object>)Vectors()["signatures"])[0];
            string kid = (string)v["kid"], right = (string)v["publicKey"], wrong = Signing.B64(new byte[32]);
            Func<string, AnsweringHttp, DialogueClient> mind = (pinned, http) =>
            {
                var npcs = new InMemoryNpcs();
                npcs.Register((string)v["npcId"], "Mara.");
                var keys = new Dictionary<string, string> { { kid, pinned } };
                return new DialogueClient("http://svc:1", new TextCortex("Hm."), npcs, new DialogueClientOptions { Http = http, Keys = keys });
            };
            var good = Signed(v, wrong); // the service's /v1/keys would lie: never asked
            Assert.IsTrue(mind(right, good).Process((string)v["npcId"], "Hello.").Result.Verified);
            var bad = Signed(v, right); // a proxy's key pinned by mistake: refused, the service's not asked either
            var e = Assert.Throws<AggregateException>(() => mind(wrong, bad).Process((string)v["npcId"], "Hello.").Wait());
            Assert.That(e.InnerException.Message, Is.StringContaining("does not verify"));
            foreach (var http in new[] { good, bad })
                Assert.AreEqual(0, http.Calls.Count(c => c.Url.EndsWith("/v1/keys", StringComparison.Ordinal)));
        }

        [Test]
        public void AKidListedTwiceIsItsLastKeyAsInTheOtherSdks()
        {
            var keys = Mind(c => AnsweringHttp.Ok(Json.Parse(@"{""keys"": [{""kid"": ""k1"", ""public_key"": ""AAA""},
                {""kid"": ""k1"", ""public_key"": ""BBB""}]}"))).PublicKeys().Result;
            Assert.AreEqual("BBB", keys["k1"]);
        }

        // --- the step loop ---------------------------------------------------------------------------------

        private const string Sig = "kid1.c2lnbmVk";

        /// <summary>The service's four steps: each answer's tape is the tape sent plus a step token, and the
        /// Finalize carries <paramref name="finalize"/>.</summary>
        private static AnsweringHttp Service(IDictionary<string, object> finalize)
        {
            return new AnsweringHttp(call =>
            {
                var body = AnsweringHttp.Sent(call);
                var tape = new Dictionary<string, object>((IDictionary<string, object>)body["tape"]);
                var last = body["lastResult"] as IDictionary<string, object>;
                string kind = last == null ? "IdentifyActor" : (string)last["type"] == "IdentifyActorResult" ? "QueryVector"
                    : (string)last["type"] == "QueryVectorResult" ? "ExecuteInference" : "Finalize";
                tape["stepToken"] = "token-" + kind;
                var instruction = new Dictionary<string, object> { { "type", kind } };
                if (kind == "QueryVector")
                {
                    instruction["query"] = tape["observation"];
                    instruction["limit"] = 5L;
                    instruction["threshold"] = 0.1;
                }
                if (kind == "ExecuteInference")
                {
                    instruction["prompt"] = "You are Mara. " + tape["observation"];
                    instruction["constraints"] = Json.Parse("{\"maxTokens\": 200, \"temperature\": 0.7, \"stop\": [\"\\n\\n\"]}");
                }
                if (kind == "Finalize") foreach (var kv in finalize) instruction[kv.Key] = kv.Value;
                return AnsweringHttp.Ok(new Dictionary<string, object> { { "instruction", instruction }, { "tape", tape } });
            });
        }

        private static IDictionary<string, object> Valid()
        {
            return (IDictionary<string, object>)Json.Parse(@"{""valid"": true, ""dialogue"": ""Rooms are two silver."",
                ""action"": {""type"": ""TALK"", ""target"": null, ""reason"": null, ""confidence"": null},
                ""memoryStore"": [{""text"": ""A traveller asks for a room."", ""type"": ""observation"", ""importance"": 0.4}],
                ""stateTransform"": {""turns"": 1, ""lastDialogue"": ""Rooms are two silver."", ""mood"": null},
                ""ruleAudit"": {""preset"": ""default"", ""appliedRules"": []}, ""signature"": """ + Sig + @"""}");
        }

        private static InMemoryNpcs Mara()
        {
            var npcs = new InMemoryNpcs();
            npcs.Register("mara", "Mara, the innkeeper.", new Dictionary<string, object> { { "town", "Hollow" } },
                new Dictionary<string, object> { { "mood", "calm" } });
            npcs.Apply("mara", new List<NewMemory> { new NewMemory { Text = "A traveller asked for a room last spring.", Type = MemoryKind.Experience, Importance = 0.5 } },
                new Dictionary<string, object>());
            return npcs;
        }

        [Test]
        public void ATurnCancelledStopsWhereItIsTheTokenReachingTheSenderAndTheCortexAndNothingMoreIsSent()
        {
            var http = Service(Valid());
            var cortex = new TextCortex("Two silver.");
            var mind = new DialogueClient("http://svc:1/", cortex, Mara(), new DialogueClientOptions { Http = http, CheckSignatures = false });
            using (var cancel = new CancellationTokenSource())
            {
                cortex.OnAsked = cancel.Cancel; // the player walked away while the model was thinking
                var turn = mind.Process("mara", "A room, please.", null, null, cancel.Token);
                var e = Assert.Throws<AggregateException>(() => turn.Wait()).InnerException;
                Assert.IsInstanceOf<OperationCanceledException>(e);
                Assert.IsTrue(turn.IsCanceled, turn.Status.ToString());
                Assert.AreEqual(cancel.Token, cortex.Token, "the cortex was given the token");
                Assert.AreEqual(3, http.Calls.Count, "the inference's result was not sent");
                Assert.IsTrue(http.Calls.All(c => c.CancellationToken == cancel.Token), "every call carried the token");
            }
            using (var gone = new CancellationTokenSource())
            {
                gone.Cancel();
                var turn = mind.Process("mara", "Hello?", null, null, gone.Token);
                Assert.IsTrue(turn.IsCanceled, "cancelled before it began");
                Assert.AreEqual(3, http.Calls.Count, "nothing sent");
            }
        }

        /// <summary>A sender that never answers on its own: only its call's token ends it (a slow service).</summary>
        private sealed class SilentHttp : IHttpSender
        {
            public readonly List<HttpCall> Calls = new List<HttpCall>();

            public void Send(HttpCall call, Action<HttpResult> done)
            {
                Calls.Add(call);
                call.CancellationToken.Register(() => done(HttpResult.Failed(false, "aborted")));
            }

            public void CancelAll() { }
        }

        [Test]
        public void AwaitedCallsOnASilentServiceEndAsCancelledWhenTheirTokenFires()
        {
            var http = new SilentHttp();
            var mind = new DialogueClient("http://svc:1/", new TextCortex("x"), Mara(), new DialogueClientOptions { Http = http });
            var cortex = new OpenAICortex("http://llm:9/v1", "m", null, http);
            var decide = new DecideClient("http://svc:1", "game", new DecideClientOptions { Http = http, Clock = () => 0 });
            using (var cancel = new CancellationTokenSource())
            {
                var turn = mind.Process("mara", "Hello?", null, null, cancel.Token);
                var keys = mind.PublicKeys(cancel.Token);
                var line = cortex.Complete("Say hi.", null, cancel.Token);
                var prompt = decide.LastPrompt(cancel.Token);
                Assert.AreEqual(4, http.Calls.Count);
                Assert.IsFalse(turn.IsCompleted || keys.IsCompleted || line.IsCompleted || prompt.IsCompleted, "the service is silent");
                cancel.Cancel();
                foreach (var task in new Task[] { turn, keys, line, prompt })
                {
                    Assert.IsTrue(SpinWait.SpinUntil(() => task.IsCompleted, 30000), "a cancelled call ended");
                    Assert.IsTrue(task.IsCanceled, task.Status.ToString());
                }
                Assert.IsTrue(http.Calls.All(c => c.CancellationToken == cancel.Token), "the sender was given the token");
            }
        }

        [Test]
        public void AMemoryTypeIsAnEnumInTheApiAndItsWordOnTheWire()
        {
            var http = Service(Valid());
            var mind = new DialogueClient("http://svc:1/", new TextCortex("Two silver."), Mara(),
                new DialogueClientOptions { Http = http, CheckSignatures = false });
            var outcome = mind.Process("mara", "A traveller asked for a room.").Result;
            Assert.AreEqual(MemoryKind.Observation, outcome.Memories.Single().Type, "memoryStore's observation");
            var recalled = (IList<object>)Json.Get(AnsweringHttp.Sent(http.Calls[2])["lastResult"], "memories");
            Assert.AreEqual("experience", Json.Get(recalled[0], "type"), "MemoryKind.Experience goes out as its word");
        }

        [Test]
        public void AMemoryTypeTheProtocolHasNotIsRefusedByItsPathAndNothingIsApplied()
        {
            var fin = Valid();
            fin["memoryStore"] = Json.Parse(@"[{""text"": ""a"", ""type"": ""knowledge"", ""importance"": 0.4},
                {""text"": ""b"", ""type"": ""rumour"", ""importance"": 0.4}]");
            var npcs = Mara();
            var mind = new DialogueClient("http://svc:1/", new TextCortex("Two silver."), npcs,
                new DialogueClientOptions { Http = Service(fin), CheckSignatures = false });
            var e = Assert.Throws<AggregateException>(() => mind.Process("mara", "Any rumours?").Wait()).InnerException;
            Assert.IsInstanceOf<ProtocolException>(e);
            Assert.AreEqual(200, ((NpcMindException)e).Status);
            StringAssert.Contains("memoryStore[1].type: \"rumour\" is not a memory type", e.Message);
            StringAssert.Contains("observation, experience, knowledge, emotion, dialogue", e.Message);
            Assert.AreEqual(1, npcs.Remembered("mara").Count, "nothing was kept");
        }

        [Test]
        public void ATurnNothingVerifiedHereRunsTheStepsAndHandsBackWhatAServerChecksWithNothingApplied()
        {
            var http = Service(Valid());
            var npcs = Mara();
            var cortex = new TextCortex("{\"dialogue\": \"Rooms are two silver.\"}");
            var options = new DialogueClientOptions { Http = http, Token = "tok", CheckSignatures = false }; // a game server checks
            var mind = new DialogueClient("http://svc:1/", cortex, npcs, options);
            var outcome = mind.Process("mara", "A traveller asks for a room.", new Dictionary<string, object> { { "hour", 21 } }).Result;

            Assert.AreEqual(new[] { NpcStep.IdentifyActor, NpcStep.QueryVector, NpcStep.ExecuteInference, NpcStep.Finalize }, outcome.Steps.ToArray());
            Assert.AreEqual(4, http.Calls.Count);
            Assert.AreEqual("http://svc:1/npcs/mara/process", http.Calls[0].Url);
            Assert.AreEqual("Bearer tok", http.Calls[0].Headers["authorization"]);
            var first = AnsweringHttp.Sent(http.Calls[0]);
            Assert.IsNull(Cases.Differs(Json.Parse(@"{""tape"": {""observation"": ""A traveller asks for a room."",
                ""npcState"": {""mood"": ""calm""}, ""memories"": [], ""context"": {""hour"": 21}}, ""lastResult"": null}"), first, "first"));
            Assert.IsFalse(((IDictionary<string, object>)first["tape"]).ContainsKey("rulesetId"));
            for (int i = 1; i < 4; i++) // the tape goes back as it came, the step token with it
                Assert.AreEqual("token-" + outcome.Steps[i - 1], Json.Get(AnsweringHttp.Sent(http.Calls[i])["tape"], "stepToken"));
            Assert.IsNull(Cases.Differs(Json.Parse(@"{""type"": ""IdentifyActorResult"", ""actor"": {""npcId"": ""mara"",
                ""persona"": ""Mara, the innkeeper."", ""data"": {""town"": ""Hollow""}}}"), AnsweringHttp.Sent(http.Calls[1])["lastResult"], "identify"));
            var recalled = (IList<object>)Json.Get(AnsweringHttp.Sent(http.Calls[2])["lastResult"], "memories");
            Assert.AreEqual(1, recalled.Count, "the memory sharing 'a traveller asked for a room' is recalled");
            Assert.AreEqual("experience", Json.Get(recalled[0], "type"));
            Assert.That(Json.ToDouble(Json.Get(recalled[0], "similarity")), Is.GreaterThanOrEqualTo(0.1));
            Assert.AreEqual("{\"dialogue\": \"Rooms are two silver.\"}", Json.Get(AnsweringHttp.Sent(http.Calls[3])["lastResult"], "generatedOutput"));
            Assert.AreEqual("You are Mara. A traveller asks for a room.", cortex.Prompts.Single());
            Assert.AreEqual(200, cortex.Last.MaxTokens);
            Assert.AreEqual(0.7, cortex.Last.Temperature);
            Assert.AreEqual(new[] { "\n\n" }, cortex.Last.Stop.ToArray());

            Assert.IsTrue(outcome.Valid);
            Assert.IsFalse(outcome.Verified, "CheckSignatures = false: nothing checked it here");
            Assert.IsFalse(mind.ChecksSignatures);
            Assert.IsFalse(outcome.Applied);
            Assert.AreEqual("Rooms are two silver.", outcome.Dialogue);
            Assert.AreEqual("TALK", outcome.Action["type"]);
            Assert.AreEqual(Sig, outcome.Signature);
            Assert.AreEqual(Jcs.Canonical(Signing.SignedPayload("mara", outcome.Finalize, outcome.Tape)), outcome.SignedPayload);
            Assert.That(outcome.SignedPayload, Is.StringContaining("\"tapeDigest\":\"" + Jcs.Digest(outcome.Tape) + "\""));
            var forServer = (IDictionary<string, object>)Json.Parse(outcome.ForServer());
            Assert.AreEqual("mara", forServer["npcId"]);
            Assert.AreEqual(Sig, Json.Get(forServer["finalize"], "signature"));
            Assert.AreEqual("token-Finalize", Json.Get(forServer["tape"], "stepToken"));
            Assert.AreEqual(1, npcs.Remembered("mara").Count, "nothing verified here: nothing applied");
            Assert.AreEqual(0, outcome.Remembered);
            Assert.AreEqual("calm", npcs.Get("mara").State["mood"]);
            Assert.AreEqual("calm", outcome.State["mood"], "the state as it was");

            // its server said yes: the game applies what the outcome carries to its own memory
            var state = npcs.Apply(outcome.NpcId, outcome.Memories, outcome.StateTransform);
            Assert.AreEqual(2, npcs.Remembered("mara").Count);
            Assert.AreEqual(1L, state["turns"]);
            Assert.IsFalse(state.ContainsKey("mood"), "a null in the merge patch removes the key");
        }

        [Test]
        public void AnInvalidOutcomeHasNothingToApplyOrCheck()
        {
            var refused = (IDictionary<string, object>)Json.Parse(@"{""valid"": false, ""dialogue"": ""I'd rather not talk about that."",
                ""action"": null, ""memoryStore"": [], ""stateTransform"": {}, ""signature"": null,
                ""ruleAudit"": {""preset"": ""rpg"", ""appliedRules"": [{""ruleId"": ""blocked.harm"", ""verdict"": ""blocked""}]}}");
            var npcs = Mara();
            var mind = new DialogueClient("http://svc:1", new TextCortex("I murder them."), npcs, new DialogueClientOptions { Http = Service(refused) });
            var outcome = mind.Process("mara", "Hello.", null, "rpg").Result;
            Assert.IsFalse(outcome.Valid);
            Assert.AreEqual("I'd rather not talk about that.", outcome.Dialogue);
            Assert.IsNull(outcome.Signature);
            Assert.IsNull(outcome.SignedPayload);
            Assert.IsNull(outcome.Action);
            Assert.AreEqual("rpg", outcome.Audit["preset"]);
            Assert.AreEqual("calm", outcome.State["mood"]);
            Assert.IsFalse(outcome.Applied || outcome.Verified, "nothing to apply or check");
            Assert.AreEqual(0, outcome.Remembered);
            Assert.AreEqual(1, npcs.Remembered("mara").Count);
        }

        private static T Refused<T>(DialogueClient mind, string npcId = "mara") where T : NpcMindException
        {
            var e = Assert.Throws<AggregateException>(() => mind.Process(npcId, "Hello.").Wait());
            Assert.IsInstanceOf<T>(e.InnerException, e.ToString());
            return (T)e.InnerException;
        }

        private static DialogueClient Mind(Func<HttpCall, HttpResult> answer, InMemoryNpcs npcs = null)
        {
            return new DialogueClient("http://svc:1", new TextCortex("Hm."), npcs ?? Mara(), new DialogueClientOptions { Http = new AnsweringHttp(answer) });
        }

        [Test]
        public void AValidOutcomeWithoutASignatureIsRefused()
        {
            var unsigned = Valid();
            unsigned["signature"] = null;
            var npcs = Mara();
            var e = Refused<SignatureException>(new DialogueClient("http://svc:1", new TextCortex("Hm."), npcs, new DialogueClientOptions { Http = Service(unsigned) }));
            Assert.That(e.Message, Is.StringContaining("without a signature"));
            Assert.AreEqual(1, npcs.Remembered("mara").Count, "nothing applied");
        }

        [Test]
        public void ARefusedStepIsAServiceExceptionWithTheStatusTheCodeAndTheProblemByPath()
        {
            var e = Refused<ServiceException>(Mind(c => AnsweringHttp.Ok(Json.Parse(@"{""error"": {""code"": ""invalid_request"", ""message"": ""bad"",
                ""details"": [{""path"": ""tape.stepToken"", ""message"": ""changed after the service returned it""}]}}"), 422)));
            Assert.That(e.Message, Is.StringContaining("POST /npcs/mara/process answered 422: tape.stepToken: changed after the service returned it"));
            Assert.AreEqual(422, e.Status);
            Assert.AreEqual("invalid_request", e.Code);
            e = Refused<ServiceException>(Mind(c => new HttpResult { Status = 502, Body = Encoding.UTF8.GetBytes("<html>Bad gateway</html>") }));
            Assert.That(e.Message, Is.StringContaining("502").And.StringContaining("Bad gateway"));
            Assert.AreEqual(502, e.Status);
            Assert.IsNull(e.Code, "a proxy's page has no code");
            e = Refused<ServiceException>(Mind(c => AnsweringHttp.Ok(Json.Parse(@"{""error"": {""code"": ""unauthorized"", ""message"": ""no token""}}"), 401)));
            Assert.AreEqual(401, e.Status);
            Assert.AreEqual("unauthorized", e.Code);
            StringAssert.Contains("no token", e.Message);
        }

        [Test]
        public void AServiceThatCannotBeReachedIsUnreachableAndOneAnsweringNonsenseBreaksTheProtocol()
        {
            var down = Refused<UnreachableException>(Mind(c => HttpResult.Failed(false, "connection refused")));
            Assert.That(down.Message, Is.StringContaining("cannot reach the npcmind service at http://svc:1").And.StringContaining("connection refused"));
            Assert.IsNull(down.Status, "no answer came");
            Assert.IsNull(down.Code);
            down = Refused<UnreachableException>(Mind(c => { throw new InvalidOperationException("the sender broke"); }));
            Assert.That(down.Message, Is.StringContaining("the sender broke"));
            var e = Refused<ProtocolException>(Mind(c => AnsweringHttp.Ok(Json.Parse("{\"ok\": true}"))));
            Assert.That(e.Message, Is.StringContaining("without an instruction and tape"));
            Assert.AreEqual(200, e.Status);
            e = Refused<ProtocolException>(Mind(c => AnsweringHttp.Ok(Json.Parse("{\"instruction\": {\"type\": \"Dance\"}, \"tape\": {}}"))));
            Assert.That(e.Message, Is.StringContaining("unknown instruction \"Dance\""));
            int calls = 0;
            e = Refused<ProtocolException>(Mind(c => { calls++; return AnsweringHttp.Ok(Json.Parse("{\"instruction\": {\"type\": \"IdentifyActor\"}, \"tape\": {}}")); }));
            Assert.That(e.Message, Is.StringContaining("no Finalize after 8 calls"));
            Assert.AreEqual(DialogueClient.MaxCalls, calls);
        }

        [Test]
        public void AContextJsonCannotCarryIsSaidByItsPathBeforeAnyCall()
        {
            int calls = 0;
            var mind = Mind(c => { calls++; return HttpResult.Failed(false, "x"); });
            var context = new Dictionary<string, object> { { "weather", new Dictionary<string, object> { { "rain", double.NaN } } } };
            var e = Assert.Throws<AggregateException>(() => mind.Process("mara", "Hello.", context).Wait());
            Assert.IsInstanceOf<InvalidInputException>(e.InnerException);
            Assert.That(e.InnerException.Message, Is.StringContaining("tape.context.weather.rain: NaN is not a JSON number"));
            Assert.AreEqual(0, calls);
        }

        [Test]
        public void ATapeGoesBackWithTheNumbersTheServiceWrote()
        {
            // Mono's double.Parse reads 0.1588785046728972 a unit off, and its "R" writes -974.4371102891851 as
            // -974.437110289185: either would change the tape, and the service's step token would refuse it
            const string state = "{\"a\":0.1588785046728972,\"b\":-974.4371102891851}";
            var http = new AnsweringHttp(call =>
            {
                if (AnsweringHttp.Sent(call)["lastResult"] != null)
                    return AnsweringHttp.Ok(Json.Parse("{\"instruction\": {\"type\": \"Finalize\", \"valid\": false}, \"tape\": {}}"));
                string answer = "{\"instruction\":{\"type\":\"IdentifyActor\"},\"tape\":{\"npcState\":" + state + "}}";
                return new HttpResult { Status = 200, Body = Encoding.UTF8.GetBytes(answer) };
            });
            var mind = new DialogueClient("http://svc:1", new TextCortex("Hm."), Mara(), new DialogueClientOptions { Http = http });
            Assert.IsFalse(mind.Process("mara", "Hello.").Result.Valid);
            StringAssert.Contains("\"tape\":{\"npcState\":" + state + "}", Encoding.UTF8.GetString(http.Calls[1].Body));
        }

        [Test]
        public void AnUnknownNpcOrABadIdIsSaidBeforeAnyCall()
        {
            int calls = 0;
            var mind = Mind(c => { calls++; return HttpResult.Failed(false, "x"); });
            Assert.That(Refused<InvalidInputException>(mind, "nobody").Message, Is.StringContaining("unknown NPC \"nobody\""));
            Assert.That(Refused<InvalidInputException>(mind, "a/b").Message, Is.StringContaining("npcId: \"a/b\" must be non-empty text without '/'"));
            Assert.That(Refused<InvalidInputException>(mind, "").Message, Is.StringContaining("npcId"));
            Assert.AreEqual(0, calls);
            Assert.Throws<ArgumentException>(() => new DialogueClient("localhost:8080", new TextCortex(""), Mara()));
            Assert.Throws<ArgumentException>(() => new InMemoryNpcs().Register("a/b", "x"));
        }

        [Test]
        public void AnNpcIdTravelsEscapedInThePath()
        {
            var npcs = new InMemoryNpcs();
            npcs.Register("guard #2", "A guard.");
            var http = Service(Valid());
            var outcome = new DialogueClient("http://svc:1", new TextCortex("Halt."), npcs, new DialogueClientOptions { Http = http, CheckSignatures = false })
                .Process("guard #2", "Halt!").Result;
            Assert.AreEqual("http://svc:1/npcs/guard%20%232/process", http.Calls[0].Url);
            Assert.That(outcome.SignedPayload, Is.StringContaining("\"npcId\":\"guard #2\""));
        }

        [Test]
        public void ThePublicKeysAreReadByKidOrTheirAbsenceSaid()
        {
            var keys = Mind(c => AnsweringHttp.Ok(Json.Parse(@"{""keys"": [{""kid"": ""k1"", ""alg"": ""Ed25519"", ""public_key"": ""AAA""},
                {""kid"": ""k2"", ""alg"": ""Ed25519"", ""public_key"": ""BBB""}]}"))).PublicKeys().Result;
            Assert.AreEqual("AAA", keys["k1"]);
            Assert.AreEqual("BBB", keys["k2"]);
            var e = Assert.Throws<AggregateException>(() => Mind(c => AnsweringHttp.Ok(Json.Parse("{\"error\": {\"code\": \"not_found\", \"message\": \"nope\"}}"), 404))
                .PublicKeys().Wait());
            var refused = (ServiceException)e.InnerException;
            Assert.That(refused.Message, Is.StringContaining("GET /v1/keys answered 404: nope"));
            Assert.AreEqual(404, refused.Status);
            Assert.AreEqual("not_found", refused.Code);
            e = Assert.Throws<AggregateException>(() => Mind(c => AnsweringHttp.Ok(Json.Parse("{\"ok\": true}"))).PublicKeys().Wait());
            Assert.IsInstanceOf<ProtocolException>(e.InnerException);
            Assert.That(e.InnerException.Message, Is.StringContaining("GET /v1/keys answered 200 without keys"));
        }

        [Test]
        public void MergePatchFollowsRfc7396()
        {
            // RFC 7396 Appendix A, a few of its examples
            Func<string, string, string> merge = (t, p) => Json.Write(DialogueClient.MergePatch(Json.Parse(t), Json.Parse(p)));
            Assert.AreEqual("{\"a\":\"c\"}", merge("{\"a\":\"b\"}", "{\"a\":\"c\"}"));
            Assert.AreEqual("{}", merge("{\"a\":\"b\"}", "{\"a\":null}"));
            Assert.AreEqual("{\"a\":{\"b\":\"d\"}}", merge("{\"a\":{\"b\":\"c\"}}", "{\"a\":{\"b\":\"d\",\"c\":null}}"));
            Assert.AreEqual("[\"c\"]", merge("{\"a\":\"b\"}", "[\"c\"]"));
            Assert.AreEqual("{\"a\":{\"bb\":{}}}", merge("{}", "{\"a\":{\"bb\":{\"ccc\":null}}}"));
        }

        [Test]
        public void InMemoryRecallIsByWordsSharedMostSimilarFirstWithinTheLimit()
        {
            var npcs = new InMemoryNpcs();
            npcs.Register("mara", "Mara.");
            npcs.Apply("mara", new List<NewMemory>
            {
                new NewMemory { Text = "Bread is two coppers.", Type = MemoryKind.Knowledge, Importance = 0.7 },
                new NewMemory { Text = "The old mine collapsed.", Type = MemoryKind.Knowledge, Importance = 0.7 },
                new NewMemory { Text = "A traveller asked about the old mine.", Type = MemoryKind.Experience, Importance = 0.5 },
            }, new Dictionary<string, object>());
            var found = npcs.Recall("mara", "Where is the old mine?", 2, 0.1);
            Assert.AreEqual(new[] { "The old mine collapsed.", "A traveller asked about the old mine." }, found.Select(m => m.Text).ToArray());
            Assert.That(found[0].Similarity, Is.GreaterThan(found[1].Similarity));
            Assert.AreEqual(1, npcs.Recall("mara", "Where is the old mine?", 1, 0.1).Count);
            Assert.AreEqual(0, npcs.Recall("mara", "Where is the old mine?", 5, 0.9).Count);
            Assert.AreEqual(0, npcs.Recall("nobody", "mine", 5, 0).Count);
        }

        [Test]
        public void TheCortexAsksWithTheConstraintsAndSaysWhereItFailed()
        {
            var http = new AnsweringHttp(c => AnsweringHttp.Ok(Json.Parse("{\"choices\": [{\"message\": {\"content\": \"Well met.\"}}]}")));
            var cortex = new OpenAICortex("http://llm:9/v1/", "qwen3:4b", "key", http);
            var constraints = new PromptConstraints { MaxTokens = 50, Temperature = 0.2, Stop = new List<string> { "END" } };
            Assert.AreEqual("Well met.", cortex.Complete("Say hi.", constraints).Result);
            Assert.AreEqual("http://llm:9/v1/chat/completions", http.Calls[0].Url);
            Assert.AreEqual("Bearer key", http.Calls[0].Headers["authorization"]);
            Assert.IsNull(Cases.Differs(Json.Parse(@"{""model"": ""qwen3:4b"", ""messages"": [{""role"": ""user"", ""content"": ""Say hi.""}],
                ""max_tokens"": 50, ""temperature"": 0.2, ""stop"": [""END""]}"), AnsweringHttp.Sent(http.Calls[0]), "body"));

            Func<Func<HttpCall, HttpResult>, CortexException> fails = answer =>
            {
                var e = Assert.Throws<AggregateException>(() => new OpenAICortex("http://llm:9/v1", "m", null, new AnsweringHttp(answer))
                    .Complete("p", new PromptConstraints()).Wait());
                Assert.IsInstanceOf<CortexException>(e.InnerException);
                return (CortexException)e.InnerException;
            };
            var down = fails(c => HttpResult.Failed(false, "connection refused"));
            Assert.AreEqual("http://llm:9/v1/chat/completions", down.Url);
            Assert.That(down.Message, Is.StringContaining("cannot reach the cortex").And.StringContaining("(http://llm:9/v1/chat/completions)"));
            Assert.That(fails(c => AnsweringHttp.Ok(Json.Parse("{\"error\": \"model not found\"}"), 404)).Message,
                Is.StringContaining("HTTP 404").And.StringContaining("model not found"));
            Assert.That(fails(c => AnsweringHttp.Ok(Json.Parse("{\"choices\": []}"))).Message, Is.StringContaining("choices[0].message.content"));
        }
    }
}
