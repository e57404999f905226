// Dialogue NPCs: the step loop of POST /npcs/{npcId}/process, the game supplying recall and inference. The
// service is the mind (next step, prompt, judging, signing); the game is the body (state, memories, inference).
//
// The outcome's Ed25519 signature is checked here on every platform (Ed25519.cs: the vendored Bouncy Castle, pure
// managed; .NET Standard 2.0 has no Ed25519, and no hand-written cryptography goes in). One rule, the Python and
// TypeScript SDKs' too: Process applies a valid outcome it verified to the game's INpcMemory (its memories kept and
// its state merged, both or neither), and refuses one whose signature does not verify (SignatureException: nothing
// applied). With DialogueClientOptions.CheckSignatures false nothing is verified here, so nothing is applied: the
// game gets what a game server checks (the signature, the exact signed bytes, the Finalize and tape as received),
// and applies the outcome's Memories and StateTransform to its memory once its server said yes.

using System;
using System.Collections.Generic;
using System.Linq;
using System.Text;
using System.Threading;
using System.Threading.Tasks;

namespace NpcMind
{
    /// <summary>What kind of memory it is (the protocol's memory <c>type</c>: observation, experience, knowledge,
    /// emotion, dialogue on the wire).</summary>
    public enum MemoryKind
    {
        /// <summary>What the NPC saw or was told.</summary>
        Observation,
        /// <summary>What the NPC said or did (Finalize keeps its line as one).</summary>
        Experience,
        /// <summary>A fact worth keeping (the model's <c>remember</c>).</summary>
        Knowledge,
        /// <summary>How the NPC felt.</summary>
        Emotion,
        /// <summary>A line of dialogue (ForbocAI's clients send it; docs/protocol.md).</summary>
        Dialogue,
    }

    /// <summary>The steps of a dialogue turn, in the order the service gives them (each an instruction of
    /// POST /npcs/{npcId}/process); <see cref="NpcOutcome.Steps"/> lists those a turn took.</summary>
    public enum NpcStep
    {
        /// <summary>The game said who the NPC is (<see cref="INpcMemory.Get"/>).</summary>
        IdentifyActor,
        /// <summary>The game recalled memories (<see cref="INpcMemory.Recall"/>).</summary>
        QueryVector,
        /// <summary>The game's model answered the service's prompt (<see cref="ICortex.Complete"/>).</summary>
        ExecuteInference,
        /// <summary>The service judged and signed the line: the turn's end.</summary>
        Finalize,
    }

    /// <summary>A memory the game recalled for the observation, with how similar it is (0..1).</summary>
    public sealed class RecalledMemory
    {
        public string Text;
        public MemoryKind Type;
        public double Importance;
        public double Similarity;
    }

    /// <summary>A memory the service asks the game to keep.</summary>
    public sealed class NewMemory
    {
        public string Text;
        public MemoryKind Type;
        public double Importance;
    }

    /// <summary>What the game knows of one NPC.</summary>
    public sealed class NpcRecord
    {
        public string NpcId;
        public string Persona;
        public IDictionary<string, object> Data = new Dictionary<string, object>();
        public IDictionary<string, object> State = new Dictionary<string, object>();
    }

    /// <summary>The game's memory of its NPCs: who they are, what they recall, and where an outcome is kept.
    /// Called on the thread the awaited Process continues on (Unity's main thread inside a MonoBehaviour).</summary>
    public interface INpcMemory
    {
        /// <summary>The NPC's record, or null for one the game does not know.</summary>
        NpcRecord Get(string npcId);
        /// <summary>At most <paramref name="limit"/> memories at or above <paramref name="threshold"/>, most
        /// similar first.</summary>
        IList<RecalledMemory> Recall(string npcId, string query, int limit, double threshold);
        /// <summary>Keep the memories and merge the state patch (a JSON merge patch), both or neither; the new
        /// state.</summary>
        IDictionary<string, object> Apply(string npcId, IList<NewMemory> memories, IDictionary<string, object> stateTransform);
    }

    /// <summary>How the service asks the model to answer: <c>maxTokens</c>, <c>temperature</c>, <c>stop</c>.</summary>
    public sealed class PromptConstraints
    {
        public int? MaxTokens;
        public double? Temperature;
        public IList<string> Stop = new List<string>();

        /// <summary>The constraints of an ExecuteInference instruction (absent or odd fields: none).</summary>
        internal static PromptConstraints Read(object constraints)
        {
            var c = new PromptConstraints();
            object max = Json.Get(constraints, "maxTokens"), temperature = Json.Get(constraints, "temperature");
            if (Json.IsNumber(max)) c.MaxTokens = (int)Math.Min(int.MaxValue, Math.Max(0, Json.ToDouble(max)));
            if (Json.IsNumber(temperature)) c.Temperature = Json.ToDouble(temperature);
            var stop = Json.Get(constraints, "stop") as IList<object>;
            if (stop != null) c.Stop = stop.OfType<string>().ToList();
            return c;
        }
    }

    /// <summary>Whatever runs inference on the game's side (a local model, a hosted API): the model's text.</summary>
    public interface ICortex
    {
        /// <summary>The model's answer to <paramref name="prompt"/>; stop (cancelled) when
        /// <paramref name="cancellationToken"/> fires: the game left the dialogue.</summary>
        Task<string> Complete(string prompt, PromptConstraints constraints,
            CancellationToken cancellationToken = default(CancellationToken));
    }

    /// <summary>What the game gets back: the line, the action, the rules applied, whether the service's signature
    /// was checked here (<see cref="Verified"/>) and what was applied (<see cref="Applied"/>: the
    /// <see cref="Memories"/> kept and the <see cref="StateTransform"/> merged into <see cref="State"/>), and what a
    /// game server needs to check it.</summary>
    public sealed class NpcOutcome
    {
        public string NpcId;
        /// <summary>The ruleset let the output through; false: <see cref="Dialogue"/> is its refusal line, and
        /// there is nothing to apply or check.</summary>
        public bool Valid;
        public string Dialogue;
        /// <summary>The validated action (<c>type</c>, <c>target</c>, <c>reason</c>, <c>confidence</c>), or null.</summary>
        public IDictionary<string, object> Action;
        public IDictionary<string, object> Audit;
        /// <summary>The steps this turn took, Finalize last.</summary>
        public List<NpcStep> Steps;
        /// <summary>The memories the service asked the game to keep (kept when <see cref="Applied"/>), and the merge
        /// patch of the NPC's state (merged when <see cref="Applied"/>).</summary>
        public List<NewMemory> Memories = new List<NewMemory>();
        public IDictionary<string, object> StateTransform = new Dictionary<string, object>();
        /// <summary>The NPC's state: the merged one when <see cref="Applied"/>, as it was otherwise.</summary>
        public IDictionary<string, object> State;
        /// <summary>True when the SDK applied the outcome to its <see cref="INpcMemory"/>: a valid outcome whose
        /// signature it verified (<see cref="Verified"/>). False for an invalid one (nothing to apply) and for one
        /// nothing verified here (<see cref="DialogueClientOptions.CheckSignatures"/> false: the game applies it
        /// once its server said yes).</summary>
        public bool Applied { get; internal set; }
        /// <summary>How many memories were kept (0 when nothing was applied).</summary>
        public int Remembered { get; internal set; }
        /// <summary><c>kid.base64url</c> of the service's Ed25519 signature; null for an invalid outcome.</summary>
        public string Signature;
        /// <summary>The canonical JSON (RFC 8785) the signature covers; its UTF-8 bytes are what was signed.</summary>
        public string SignedPayload;
        /// <summary>The Finalize instruction and the tape exactly as the service returned them.</summary>
        public IDictionary<string, object> Finalize;
        public IDictionary<string, object> Tape;

        /// <summary>True when the service's signature was checked here (<see cref="DialogueClient.ChecksSignatures"/>);
        /// false when nothing checked it here: a game server with the Python or TypeScript SDK checks
        /// <see cref="ForServer"/>.</summary>
        public bool Verified { get; internal set; }

        /// <summary>The JSON a game server checks: <c>{"npcId", "finalize", "tape"}</c>, for
        /// <c>verify(finalize["signature"], signed_payload(npcId, finalize, tape), keys)</c>.</summary>
        public string ForServer()
        {
            return Json.Write(new Dictionary<string, object> { { "npcId", NpcId }, { "finalize", Finalize }, { "tape", Tape } });
        }
    }

    /// <summary>How a DialogueClient reaches the service.</summary>
    public sealed class DialogueClientOptions
    {
        /// <summary>A hosted service's session token.</summary>
        public string Token;
        /// <summary>The engine's HTTP (UnityWebRequest: README); an HttpClientSender otherwise.</summary>
        public IHttpSender Http;
        public double TimeoutMs = 30000;
        /// <summary>Check each valid outcome's signature here (the default); false leaves it to a game server.</summary>
        public bool CheckSignatures = true;
        /// <summary>The service's public keys (kid -> base64url, as GET /v1/keys lists them), pinned: the check then
        /// trusts these alone. Null: fetched from the service, which is worth what the connection is (https).</summary>
        public IDictionary<string, string> Keys;
    }

    /// <summary>Talks to an npcmind service for the dialogue NPCs of one game.</summary>
    public sealed class DialogueClient : IDisposable
    {
        /// <summary>A full run takes four calls; the loop gives up after this many.</summary>
        public const int MaxCalls = 8;

        private readonly string baseUrl;
        private readonly DialogueClientOptions options;
        private readonly IHttpSender http;
        private readonly bool ownHttp;
        public readonly ICortex Cortex;
        public readonly INpcMemory Memory;
        /// <summary>Whether outcomes are checked here (<see cref="DialogueClientOptions.CheckSignatures"/>).</summary>
        public readonly bool ChecksSignatures;
        private Dictionary<string, string> keys; // GET /v1/keys, fetched at the first outcome, again for a new kid

        public DialogueClient(string serviceUrl, ICortex cortex, INpcMemory memory, DialogueClientOptions options = null)
        {
            baseUrl = Urls.Http(serviceUrl, "serviceUrl");
            if (cortex == null)
                throw new ArgumentNullException("cortex", "cortex: the game's inference is needed (an OpenAICortex or your own)");
            if (memory == null)
                throw new ArgumentNullException("memory", "memory: the game's NPCs are needed (an InMemoryNpcs or your own)");
            Cortex = cortex;
            Memory = memory;
            this.options = options ?? new DialogueClientOptions();
            ownHttp = this.options.Http == null;
            http = this.options.Http ?? new HttpClientSender();
            ChecksSignatures = this.options.CheckSignatures;
            if (this.options.Keys != null) keys = new Dictionary<string, string>(this.options.Keys);
        }

        /// <summary>Run the loop for one observation, up to Finalize; a valid outcome whose signature verifies is
        /// applied to <see cref="Memory"/> (its memories kept and its state merged, both or neither), as the Python
        /// and TypeScript SDKs do. Throws an <see cref="NpcMindException"/> of its kind, nothing applied:
        /// <see cref="ServiceException"/> when the service refuses a step (its status and code),
        /// <see cref="UnreachableException"/>, <see cref="TooLargeException"/>, <see cref="ProtocolException"/>,
        /// <see cref="InvalidInputException"/> for what the game gave, <see cref="SignatureException"/> for an
        /// outcome that does not verify, the cortex's <see cref="CortexException"/>; an
        /// <see cref="OperationCanceledException"/> when <paramref name="cancellationToken"/> fires (the request or
        /// the inference under way is aborted).</summary>
        public async Task<NpcOutcome> Process(string npcId, string observation,
            IDictionary<string, object> context = null, string ruleset = null,
            CancellationToken cancellationToken = default(CancellationToken))
        {
            cancellationToken.ThrowIfCancellationRequested();
            if (string.IsNullOrEmpty(npcId) || npcId.Contains("/"))
                throw new InvalidInputException("npcId: " + Errors.Quote(npcId ?? "null") + " must be non-empty text without '/'");
            if (observation == null) throw new InvalidInputException("observation: must be text, not null");
            var rec = Memory.Get(npcId);
            if (rec == null)
                throw new InvalidInputException("unknown NPC " + Errors.Quote(npcId) + ": the game's memory has no record of it");
            var tape = new Dictionary<string, object>
            {
                { "observation", observation }, { "npcState", rec.State ?? new Dictionary<string, object>() },
                { "memories", new List<object>() }, { "context", context ?? new Dictionary<string, object>() },
            };
            if (!string.IsNullOrEmpty(ruleset)) tape["rulesetId"] = ruleset;
            IDictionary<string, object> step = tape, last = null;
            var steps = new List<NpcStep>();
            for (int i = 0; i < MaxCalls; i++)
            {
                cancellationToken.ThrowIfCancellationRequested();
                var answer = await Step(npcId, step, last, cancellationToken).ConfigureAwait(true);
                var instruction = answer.Key;
                step = answer.Value; // sent back as received, unknown fields (the step token) included
                NpcStep kind;
                if (!Wire.TryRead((string)instruction["type"], out kind))
                    throw new ProtocolException("unknown instruction " + Errors.Quote((string)instruction["type"])
                        + " (instruction.type: not one of " + Wire.Words(typeof(NpcStep)) + ")", 200);
                steps.Add(kind);
                if (kind == NpcStep.Finalize)
                {
                    var outcome = await Checked(Finish(npcId, instruction, step, steps), cancellationToken).ConfigureAwait(true);
                    cancellationToken.ThrowIfCancellationRequested(); // cancelled while the keys came: nothing applied
                    return Apply(outcome);
                }
                last = await Result(rec, kind, instruction, cancellationToken).ConfigureAwait(true);
            }
            throw new ProtocolException("no Finalize after " + MaxCalls + " calls", 200);
        }

        /// <summary>A valid outcome verified here, applied to the game's memory (both or neither: the memory's
        /// contract); any other outcome as it is.</summary>
        private NpcOutcome Apply(NpcOutcome outcome)
        {
            if (!outcome.Valid || !outcome.Verified) return outcome;
            outcome.State = Memory.Apply(outcome.NpcId, outcome.Memories, outcome.StateTransform);
            outcome.Applied = true;
            outcome.Remembered = outcome.Memories.Count;
            return outcome;
        }

        /// <summary>The service's signing keys (kid -> base64url), from GET /v1/keys: what outcomes are checked with.</summary>
        public async Task<Dictionary<string, string>> PublicKeys(CancellationToken cancellationToken = default(CancellationToken))
        {
            var got = await Request("GET", "/v1/keys", null, Limits.MaxKeysBytes, "Limits.MaxKeysBytes", cancellationToken)
                .ConfigureAwait(false);
            if (got.Key != 200) throw Errors.Refused(got.Key, got.Value, "GET /v1/keys");
            var keys = Json.Get(got.Value, "keys") as IList<object>;
            if (keys == null)
                throw new ProtocolException("GET /v1/keys answered 200 without keys: " + Errors.ErrorLine(got.Value, ""), 200);
            var byKid = new Dictionary<string, string>();
            foreach (var k in keys.OfType<IDictionary<string, object>>()) // a kid listed twice: the last, as the other SDKs
                byKid[Errors.Text(Json.Get(k, "kid"))] = Errors.Text(Json.Get(k, "public_key"));
            return byKid;
        }

        public void Dispose()
        {
            if (ownHttp) ((IDisposable)http).Dispose();
        }

        private async Task<IDictionary<string, object>> Result(NpcRecord rec, NpcStep kind, IDictionary<string, object> instruction,
            CancellationToken cancellationToken)
        {
            if (kind == NpcStep.IdentifyActor)
            {
                var actor = new Dictionary<string, object>
                {
                    { "npcId", rec.NpcId }, { "persona", rec.Persona }, { "data", rec.Data ?? new Dictionary<string, object>() },
                };
                return new Dictionary<string, object> { { "type", "IdentifyActorResult" }, { "actor", actor } };
            }
            if (kind == NpcStep.QueryVector)
            {
                object limit = Json.Get(instruction, "limit"), threshold = Json.Get(instruction, "threshold");
                var found = Memory.Recall(rec.NpcId, Errors.Text(Json.Get(instruction, "query")),
                    Json.IsNumber(limit) ? (int)Json.ToDouble(limit) : 0, Json.IsNumber(threshold) ? Json.ToDouble(threshold) : 0);
                var memories = (found ?? new List<RecalledMemory>()).Select(m => (object)new Dictionary<string, object>
                {
                    { "text", m.Text }, { "type", Wire.Text(m.Type) }, { "importance", m.Importance }, { "similarity", m.Similarity },
                }).ToList();
                return new Dictionary<string, object> { { "type", "QueryVectorResult" }, { "memories", memories } };
            }
            if (kind == NpcStep.ExecuteInference)
            {
                string output = await Cortex.Complete(Errors.Text(Json.Get(instruction, "prompt")),
                    PromptConstraints.Read(Json.Get(instruction, "constraints")), cancellationToken).ConfigureAwait(true);
                cancellationToken.ThrowIfCancellationRequested(); // a cortex that ignored it: its answer is not sent
                return new Dictionary<string, object> { { "type", "ExecuteInferenceResult" }, { "generatedOutput", output ?? "" } };
            }
            throw new ProtocolException("unknown instruction " + Errors.Quote(Wire.Text(kind)), 200);
        }

        private async Task<KeyValuePair<IDictionary<string, object>, IDictionary<string, object>>> Step(
            string npcId, IDictionary<string, object> tape, IDictionary<string, object> last, CancellationToken cancellationToken)
        {
            var body = new Dictionary<string, object> { { "tape", tape }, { "lastResult", last } };
            var got = await Request("POST", "/npcs/" + Uri.EscapeDataString(npcId) + "/process", body, Limits.MaxStepBytes,
                "Limits.MaxStepBytes", cancellationToken).ConfigureAwait(false);
            if (got.Key != 200) throw Errors.Refused(got.Key, got.Value, "POST /npcs/" + Uri.EscapeDataString(npcId) + "/process");
            var instruction = Json.Get(got.Value, "instruction") as IDictionary<string, object>;
            var next = Json.Get(got.Value, "tape") as IDictionary<string, object>;
            if (instruction == null || next == null || !(Json.Get(instruction, "type") is string))
            {
                string text = Json.Write(got.Value);
                throw new ProtocolException("the service answered 200 without an instruction and tape: "
                    + (text.Length > 200 ? text.Substring(0, 200) : text), 200);
            }
            return new KeyValuePair<IDictionary<string, object>, IDictionary<string, object>>(instruction, next);
        }

        /// <summary>A valid outcome's signature checked with the service's keys (fetched again once, for a key
        /// rotated since); one that does not verify is refused, nothing applied.</summary>
        private async Task<NpcOutcome> Checked(NpcOutcome outcome, CancellationToken cancellationToken)
        {
            if (!outcome.Valid || !ChecksSignatures) return outcome;
            if (keys == null) keys = await PublicKeys(cancellationToken).ConfigureAwait(true);
            if (!Signing.Verify(outcome.Signature, outcome.SignedPayload, keys) && options.Keys == null)
                keys = await PublicKeys(cancellationToken).ConfigureAwait(true); // as the other SDKs: asked again once (a key rotated)
            if (!Signing.Verify(outcome.Signature, outcome.SignedPayload, keys))
                throw new SignatureException("the outcome's signature does not verify with the service's keys (GET /v1/keys): nothing was applied");
            outcome.Verified = true;
            return outcome;
        }

        private NpcOutcome Finish(string npcId, IDictionary<string, object> fin, IDictionary<string, object> tape, List<NpcStep> steps)
        {
            var rec = Memory.Get(npcId);
            var outcome = new NpcOutcome
            {
                NpcId = npcId, Valid = Json.Get(fin, "valid") as bool? == true, Dialogue = Errors.Text(Json.Get(fin, "dialogue")),
                Audit = Json.Get(fin, "ruleAudit") as IDictionary<string, object> ?? new Dictionary<string, object>(),
                Steps = steps, State = rec != null ? rec.State : new Dictionary<string, object>(), Finalize = fin, Tape = tape,
            };
            if (!outcome.Valid) return outcome;
            outcome.Action = Json.Get(fin, "action") as IDictionary<string, object>;
            outcome.StateTransform = Json.Get(fin, "stateTransform") as IDictionary<string, object>
                ?? new Dictionary<string, object>();
            var store = Json.Get(fin, "memoryStore") as IList<object> ?? new List<object>();
            outcome.Memories = Memories(store);
            outcome.Signature = Json.Get(fin, "signature") as string;
            if (string.IsNullOrEmpty(outcome.Signature))
                throw new SignatureException("the service sent a valid outcome without a signature: nothing can check it");
            try
            {
                outcome.SignedPayload = Jcs.Canonical(Signing.SignedPayload(npcId, fin, tape));
            }
            catch (NotCanonicalException e)
            {
                throw new SignatureException("the outcome cannot be checked: its tape has no canonical form (" + e.Message + ")");
            }
            return outcome;
        }

        /// <summary>A valid Finalize's <c>memoryStore</c>, each item's type read as its <see cref="MemoryKind"/>: a word
        /// the protocol does not have is refused by name (the service's schema closes the set).</summary>
        private static List<NewMemory> Memories(IList<object> store)
        {
            var kept = new List<NewMemory>();
            for (int i = 0; i < store.Count; i++)
            {
                var m = store[i] as IDictionary<string, object>;
                if (m == null) continue;
                MemoryKind kind;
                if (!Wire.TryRead(Json.Get(m, "type") as string, out kind))
                    throw new ProtocolException("memoryStore[" + i + "].type: " + Errors.Quote(Errors.Text(Json.Get(m, "type")))
                        + " is not a memory type of this protocol (" + Wire.Words(typeof(MemoryKind)) + "): nothing was applied", 200);
                object importance = Json.Get(m, "importance");
                kept.Add(new NewMemory
                {
                    Text = Errors.Text(Json.Get(m, "text")), Type = kind,
                    Importance = Json.IsNumber(importance) ? Json.ToDouble(importance) : 0,
                });
            }
            return kept;
        }

        /// <summary>One call: its status and JSON body (an error body of its text when it is not JSON), the body
        /// read no further than one byte past <paramref name="max"/> (an error's past Limits.MaxErrorBytes), and
        /// parsed off the game's thread.</summary>
        private async Task<KeyValuePair<int, object>> Request(string method, string path, object body, int max, string capName,
            CancellationToken cancellationToken)
        {
            var headers = new Dictionary<string, string>();
            if (!string.IsNullOrEmpty(options.Token)) headers["authorization"] = "Bearer " + options.Token;
            var call = new HttpCall
            {
                Method = method, Url = baseUrl + path, Headers = headers, TimeoutMs = options.TimeoutMs, MaxBytes = max,
            };
            if (body != null)
            {
                headers["content-type"] = "application/json";
                try
                {
                    // canonical: numbers written from their exact digits, so a tape goes back as the service wrote it
                    // (Mono's "R" misses by a unit now and then, and the step token would then refuse the tape)
                    call.Body = Jcs.CanonicalBytes(body);
                }
                catch (NotCanonicalException e)
                {
                    throw new InvalidInputException("the step cannot be sent: " + e.Message);
                }
            }
            var result = await http.Call(call, cancellationToken).ConfigureAwait(false);
            if (result.Status == 0)
                throw new UnreachableException("cannot reach the npcmind service at " + baseUrl + ": "
                    + (result.TimedOut ? "no answer within " + options.TimeoutMs + " ms" : result.Error)
                    + " (is `npcmind serve` running there?)");
            var bytes = result.Body ?? new byte[0];
            int cap = Limits.For(result.Status, max, Limits.MaxErrorBytes);
            if (bytes.Length > cap)
                throw new TooLargeException(Limits.TooLarge(method + " " + path + " answered " + result.Status, cap,
                    Limits.Name(result.Status, max, capName)), result.Status);
            return new KeyValuePair<int, object>(result.Status, Transport.Parse(bytes));
        }

        /// <summary>RFC 7396 JSON merge patch: how a Finalize's <c>stateTransform</c> changes the NPC's state.</summary>
        public static object MergePatch(object target, object patch)
        {
            var p = patch as IDictionary<string, object>;
            if (p == null) return patch;
            var t = target as IDictionary<string, object>;
            var output = t != null ? new Dictionary<string, object>(t) : new Dictionary<string, object>();
            foreach (var kv in p)
            {
                if (kv.Value == null) output.Remove(kv.Key);
                else
                {
                    object old;
                    output.TryGetValue(kv.Key, out old);
                    output[kv.Key] = MergePatch(old, kv.Value);
                }
            }
            return output;
        }
    }
}
