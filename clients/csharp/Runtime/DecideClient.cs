// The game-facing decision client: the scheduler's rules, the outbox, and the transport, applied in the game loop.
//
// A game calls Tick() once a frame and Action(id, legalNow) for each entity; null means "run your native AI". The
// network never blocks the frame and never throws into it: the sender completes on other threads into a queue,
// and Tick() applies what came. Every method is meant for the game's thread (the one that calls Tick()).

using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Threading;
using System.Threading.Tasks;

namespace NpcMind
{
    /// <summary>How a DecideClient is set up: the scheduler's options (ClientId is the constructor's), and where its
    /// time and HTTP come from.</summary>
    public sealed class DecideClientOptions
    {
        public SchedulerOptions Scheduler = new SchedulerOptions();
        /// <summary>The engine's HTTP (UnityWebRequest: README); an HttpClientSender otherwise.</summary>
        public IHttpSender Http;
        /// <summary>The game's clock in ms; a Stopwatch otherwise.</summary>
        public Func<double> Clock;
    }

    /// <summary>One game's client of an npcmind service: call <see cref="Tick"/> every frame, <see cref="Action"/>
    /// per entity.</summary>
    public sealed class DecideClient : IDisposable
    {
        private readonly Scheduler core;
        private readonly Transport transport;
        private readonly IHttpSender http;
        private readonly bool ownHttp;
        private readonly Func<double> clock;
        private bool closed;
        private readonly List<OutRequest> due = new List<OutRequest>(); // the requests of one Tick, reused every frame

        public DecideClient(string serviceUrl, string clientId, DecideClientOptions options = null)
        {
            Urls.Http(serviceUrl, "serviceUrl");
            if (string.IsNullOrEmpty(clientId))
                throw new ArgumentException("clientId: must be a non-empty string (the game's name for itself)", "clientId");
            options = options ?? new DecideClientOptions();
            var s = options.Scheduler ?? new SchedulerOptions();
            s.ClientId = clientId;
            core = new Scheduler(s);
            if (options.Clock != null) clock = options.Clock;
            else
            {
                var watch = Stopwatch.StartNew();
                clock = () => watch.Elapsed.TotalMilliseconds;
            }
            ownHttp = options.Http == null;
            http = options.Http ?? new HttpClientSender();
            transport = new Transport(serviceUrl, http, () => core.TimeoutMs, s.PolicyMaxBytes);
        }

        /// <summary>The game's epoch: answers to requests sent under another epoch are dropped.</summary>
        public int Epoch
        {
            get { return core.Epoch; }
            set { core.Roster.SetEpoch(value, clock()); }
        }

        /// <summary>Counters for a debug overlay.</summary>
        public Stats Stats { get { return core.Stats; } }

        /// <summary>The game's own local policy (a Policy or a function); it may be changed as the game goes.</summary>
        public LocalPolicy Policy
        {
            get { return core.Cascade.Own; }
            set { core.Cascade.Own = value; }
        }

        /// <summary>The service's distilled policy in use (GET /v1/policy), or null.</summary>
        public Policy ServicePolicy { get { return core.Cascade.Fetched; } }

        /// <summary>The world the service sees beside the entities (change its fields as the game goes).</summary>
        public IDictionary<string, object> World { get { return core.World; } }

        /// <summary>The manifest's scope the game is in (a boss fight), or null: it may change as the game goes, and
        /// the next decide request carries it (Python's <c>scope</c>).</summary>
        public string Scope
        {
            get { return core.Scope; }
            set { core.Scope = value; }
        }

        /// <summary>The scope's state, sent with the scope (and given to the local policies) while there is one;
        /// change its fields or set a new one as the game goes.</summary>
        public IDictionary<string, object> ScopeState
        {
            get { return core.ScopeState; }
            set { core.ScopeState = value; }
        }

        /// <summary>How sure the local policy must be (0..1) to decide an entity here, the rest going to the service
        /// (the cascade); it may change as the game goes: from the next choice on. NaN is refused.</summary>
        public double Threshold
        {
            get { return core.Roster.Threshold; }
            set
            {
                if (double.IsNaN(value))
                    throw new ArgumentOutOfRangeException("value", "Threshold: must be a number (a confidence, 0..1), not NaN");
                core.Roster.Threshold = value;
            }
        }

        /// <summary>How long a request may take before its entities use their native AI.</summary>
        public double TimeoutMs { get { return core.TimeoutMs; } }

        /// <summary>A new scene (level, map): the service resets its population with the next telemetry.</summary>
        public void SetScene(string scene) { core.SetScene(scene); }

        /// <summary>Add an entity that decides, or update what it sees and may do now.</summary>
        public void Track(string id, string type, IDictionary<string, object> observation, IList<string> legalActions,
            TrackOptions options = null)
        {
            core.Roster.Track(id, type, observation, legalActions, options, clock());
        }

        /// <summary>An observe-only entity (the player): sent as telemetry, never asked.</summary>
        public void Observe(string id, string type, IDictionary<string, object> fields, IList<double> position = null)
        {
            core.Observe(id, type, fields, position);
        }

        /// <summary>The entity left the scene: forget it and tell the service.</summary>
        public void Untrack(string id) { core.Untrack(id); }

        /// <summary>Something happened to the entity: ask for it at once; false for one not tracked.</summary>
        public bool Event(string id, string trigger) { return core.Roster.Event(id, trigger, clock()); }

        /// <summary>What became of the entity's current AI decision; sent with the next tick. False when it has none
        /// to report (or <paramref name="outcome"/> is no member of <see cref="ReportOutcome"/>: said once).</summary>
        public bool Report(string id, ReportOutcome outcome, string detail = null)
        {
            string word = Wire.Defined(outcome) ? Wire.Text(outcome) : "ReportOutcome(" + (int)outcome + ")";
            return core.Report(id, word, detail);
        }

        /// <summary>The entity's live decision, or null: run the game's native AI.</summary>
        public Choice Action(string id, IList<string> legalNow = null) { return core.Roster.Action(id, legalNow, clock()); }

        /// <summary>Apply the answers that came in, then send what is due. Never blocks, never throws for the
        /// network, and parses nothing: answers, streamed lines and the policy come read (within their caps,
        /// <see cref="Limits"/>) on the sender's threads.</summary>
        public void Tick(double? now = null)
        {
            if (closed) return; // a frame after Close(): nothing to send, nothing to throw
            double at = now ?? clock();
            Apply(transport.Drain(), at);
            core.Tick(at, due);
            foreach (var r in due) transport.Send(r);
            due.Clear();
        }

        /// <summary>Send the queued reports, wait (blocking) until every request sent so far has answered or
        /// <paramref name="timeoutMs"/> passed, and apply the answers: for turn-based games, tests, and before
        /// Close(). True if nothing is in flight. Not for a frame: it blocks.</summary>
        public bool Wait(double timeoutMs = 10000)
        {
            if (!closed) foreach (var r in core.FlushReports()) transport.Send(r);
            transport.WaitIdle(timeoutMs);
            Apply(transport.Drain(), clock());
            return transport.InFlight == 0 && core.InFlight == 0;
        }

        /// <summary>What the model saw in this client's last decide request and what it answered (GET /v1/prompt),
        /// for a debug overlay; null when there is nothing yet or the service cannot say. Never faults; cancelled
        /// (and the request aborted) when <paramref name="cancellationToken"/> fires.</summary>
        public Task<IDictionary<string, object>> LastPrompt(CancellationToken cancellationToken = default(CancellationToken))
        {
            string path = "/v1/prompt?client_id=" + Uri.EscapeDataString(core.ClientId);
            return transport.Call("GET", path, core.Headers(), cancellationToken).ContinueWith(t =>
            {
                cancellationToken.ThrowIfCancellationRequested(); // the task ends as cancelled, not as null
                var got = t.Status == TaskStatus.RanToCompletion ? t.Result : null;
                if (got == null || got.Fail.HasValue || got.Status != 200) return null;
                return got.Body as IDictionary<string, object>;
            }, cancellationToken, TaskContinuationOptions.None, TaskScheduler.Default);
        }

        /// <summary>Stop without waiting for answers (a game that quits must not hang); call Wait() first to keep
        /// them.</summary>
        public void Close()
        {
            closed = true;
            transport.Close();
            if (ownHttp) ((IDisposable)http).Dispose();
        }

        public void Dispose() { Close(); }

        private void Apply(List<Settled> came, double now)
        {
            foreach (var s in came)
            {
                if (s.IsLine) core.Line(s.Ref, s.Line, s.Problem, now); // read off the frame, applied now
                else if (s.Chunk != null) core.Chunk(s.Ref, s.Chunk, now); // each line it completes is applied now
                else if (s.Ended) core.End(s.Ref, now, s.Fail, s.Error);
                else if (s.Fail.HasValue) core.Fail(s.Ref, s.Fail.Value, now);
                else core.Answer(s.Ref, s.Status, s.Body, s.Headers, now);
            }
        }
    }
}
