// The SDK's shared shapes: what the game tells about an entity, what it gets back, and what goes on the wire.
// The TypeScript SDK's types.ts, the same names in PascalCase.

using System.Collections.Generic;

namespace NpcMind
{
    /// <summary>What became of an AI decision, for <see cref="DecideClient.Report"/> (POST /v1/report's
    /// <c>outcome</c>: done, failed, interrupted, rejected on the wire).</summary>
    public enum ReportOutcome
    {
        /// <summary>Carried out.</summary>
        Done,
        /// <summary>Tried, and it did not work.</summary>
        Failed,
        /// <summary>Begun, then cut short by the game.</summary>
        Interrupted,
        /// <summary>The game did not apply it.</summary>
        Rejected,
    }

    /// <summary>Where a <see cref="Choice"/> came from.</summary>
    public enum ChoiceSource
    {
        /// <summary>The service's model (<c>AI</c> on the wire), fresh or cached (<see cref="Choice.Cached"/>).</summary>
        AI,
        /// <summary>The cascade's local policy: the game's own or the service's distilled one (<c>local</c>).</summary>
        Local,
    }

    /// <summary>Why the service gave an entity no decision (a FALLBACK's <c>code</c>; the entity runs its native
    /// AI), as counted in <see cref="Stats.Fallbacks"/>.</summary>
    public enum FallbackCode
    {
        /// <summary>Over its type's token budget (<c>budget</c>).</summary>
        Budget,
        /// <summary>No provider slot freed in time (<c>busy</c>).</summary>
        Busy,
        /// <summary>The model chose no legal action (<c>invalid_choice</c>).</summary>
        InvalidChoice,
        /// <summary>The model declined (<c>refused</c>).</summary>
        Refused,
        /// <summary>The provider failed or timed out, or a stream was cut (<c>unavailable</c>).</summary>
        Unavailable,
    }

    /// <summary>A usable decision for one entity: from the model (<c>AI</c>, fresh or cached) or the local policy
    /// (<c>local</c>).</summary>
    public sealed class Choice
    {
        public string Action { get; private set; }
        public ChoiceSource Source { get; private set; }
        public double? Confidence { get; private set; }
        /// <summary>On the client's clock, in ms.</summary>
        public double ExpiresAt { get; private set; }
        public string DecisionId { get; private set; }
        public bool Cached { get; private set; }
        public string Label { get; private set; }

        internal Choice(string action, ChoiceSource source, double? confidence, double expiresAt, string decisionId,
            bool cached, string label)
        {
            Action = action;
            Source = source;
            Confidence = confidence;
            ExpiresAt = expiresAt;
            DecisionId = decisionId;
            Cached = cached;
            Label = label;
        }
    }

    /// <summary>What the game may add to an entity beside its observation and legal actions.</summary>
    public sealed class TrackOptions
    {
        public IList<double> Position;
        public string Profile;
        public string Parent;
        public string State;
    }

    /// <summary>What the game tells about one entity; the SDK's own bookkeeping sits beside it.</summary>
    public sealed class NpcEntity
    {
        public readonly string Id;
        public string Type;
        public IDictionary<string, object> Observation;
        public IList<string> LegalActions;
        public IList<double> Position;
        public string Profile;
        public string Parent;
        public string State;
        public string Trigger;
        internal double Due;
        internal double AskedAt;
        internal bool InFlight;
        internal Choice Choice;
        /// <summary>Changed since the last telemetry.</summary>
        internal bool Changed;

        public NpcEntity(string id) { Id = id; }
    }

    /// <summary>A local policy function for cascade mode: the action it would take and how sure it is (0..1),
    /// or null to ask the service. A distilled policy file is a <see cref="Policy"/> instead.</summary>
    public delegate PolicyChoice PolicyFunction(NpcEntity entity);

    /// <summary>An action and how sure a local policy is of it (0..1).</summary>
    public sealed class PolicyChoice
    {
        public readonly string Action;
        public readonly double Confidence;

        public PolicyChoice(string action, double confidence)
        {
            Action = action;
            Confidence = confidence;
        }
    }

    /// <summary>Counters a game can show in a debug overlay; the tests read them too.</summary>
    public sealed class Stats
    {
        public int Requests;
        public int Asked;
        public int Ai;
        public int Cached;
        public int Local;
        /// <summary>Fallbacks the service gave, by their code.</summary>
        public readonly Dictionary<FallbackCode, int> Fallbacks = new Dictionary<FallbackCode, int>();
        public int DroppedEpoch;
        public int Illegal;
        public int Errors;
        public int ReportsSent;
        /// <summary>Times the service refused an entity as malformed (it then goes alone until taken).</summary>
        public int Refused;
        /// <summary>Decisions applied from a streamed answer's lines, and the ms from their request's send to their
        /// line's arrival, summed (the mean latency an entity waits: total / count).</summary>
        public int StreamedDecisions;
        public double StreamedMsTotal;
        /// <summary>Streamed answers that ended before their last line (their entities fell back).</summary>
        public int StreamsCut;
    }

    /// <summary>A request the core wants sent: the transport executes it after every ref in <c>After</c> has
    /// settled.</summary>
    internal sealed class OutRequest
    {
        public readonly string Ref;
        public readonly string Method;
        public readonly string Path;
        public readonly IDictionary<string, string> Headers;
        /// <summary>The body (null for a GET); <see cref="Json"/> is its text, made when the request was made (a
        /// snapshot: the game may change its objects from the next frame on).</summary>
        public readonly IDictionary<string, object> Body;
        public readonly string Json;
        public readonly IList<string> After;
        /// <summary>A decide request whose answer is asked as a stream of lines (the transport sends
        /// <c>Accept: application/x-ndjson</c>, and gives the scheduler its chunks and end).</summary>
        public readonly bool Stream;

        public OutRequest(string reference, string method, string path, IDictionary<string, string> headers,
            IDictionary<string, object> body, string json, IList<string> after, bool stream = false)
        {
            Stream = stream;
            Ref = reference;
            Method = method;
            Path = path;
            Headers = headers;
            Body = body;
            Json = json;
            After = after;
        }
    }

    /// <summary>Why a request got no answer.</summary>
    internal enum FailKind
    {
        Timeout,
        Unreachable,
        /// <summary>The answer passed one of the SDK's caps (<see cref="Limits"/>): not read past it.</summary>
        TooLarge,
    }

    /// <summary>Where the SDK says a problem (once: a game loop would repeat it every frame).</summary>
    public delegate void NpcMindLog(string message);
}
