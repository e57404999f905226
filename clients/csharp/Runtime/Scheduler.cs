// The decision scheduler (no I/O, no clock): what to ask /v1/decide and when, and what its answers mean.
//
// Every method that depends on time is given `now` (ms on the game's clock). It keeps the game's obligations: an
// answer for an old epoch is dropped, an action is re-checked against the legal actions sent (and those of now), a
// decision expires after its ttl_ms, every fallback or error gives null (the game's native AI, never an invented
// action). Scheduling (spec section 10): an event is asked at once with the events of the next eventWindowMs;
// others every refresh_ms of their type; a change of population re-asks everyone, at most every 500 ms; 16
// entities a request. Cascade: with a policy, entities it is sure about take the local action and only the rest go
// to the service. A port of the TypeScript SDK's scheduler.ts, checked by the same conformance cases.

using System;
using System.Collections.Generic;
using System.Linq;

namespace NpcMind
{
    /// <summary>How a scheduler is set up; the defaults are the other SDKs'.</summary>
    public sealed class SchedulerOptions
    {
        public string ClientId = "c1";
        public int Epoch;
        public IDictionary<string, object> World;
        public string Scope;
        public IDictionary<string, object> ScopeState;
        public string ApiKey;
        public double? RefreshMs;
        public double EventWindowMs = 50;
        public double TelemetryMs = 500;
        /// <summary>The cascade's local policy: a distilled file or a function; sure choices decide here.</summary>
        public LocalPolicy Policy;
        public double Threshold = 0.8;
        /// <summary>Use the service's distilled policy (GET /v1/policy); by default on when no Policy is given.</summary>
        public bool? FetchPolicy;
        public double PolicyRefreshMs = Cascade.DefaultPolicyRefreshMs;
        public int PolicyMaxBytes = NpcMind.Policy.MaxBytes;
        public double? TimeoutMs;
        /// <summary>Decide requests in flight at most: a wave of refreshes is spread over frames.</summary>
        public int MaxInFlight = 4;
        /// <summary>The manifest when it is known already (what GET /v1/manifest answers as `manifest`); else asked.</summary>
        public IDictionary<string, object> Manifest;
        /// <summary>The version of that manifest: the service's policy is fetched for it.</summary>
        public string ManifestVersion;
        /// <summary>Decide answers asked as a stream of lines (docs/streaming.md): each entity's decision is usable
        /// as its line arrives. On by default, as in the other SDKs (HttpClientSender reads the lines as they come);
        /// a sender that reads whole answers only gets today's single answer, which the scheduler reads as ever.</summary>
        public bool Stream = true;
        public NpcMindLog Log;
    }

    /// <summary>The decisions core: track entities, call <see cref="Tick(double)"/> for the requests to send, give back
    /// their answers.</summary>
    internal sealed class Scheduler
    {
        /// <summary>The protocol's limit of entities a decide request.</summary>
        public const int Batch = 16;
        /// <summary>The service's provider deadline, until GET /v1/health tells its own.</summary>
        public const double DefaultDeadlineMs = 10000;
        /// <summary>Past the deadline: the service's own work and the network.</summary>
        public const double TimeoutMarginMs = 5000;

        private enum Kind { Decide, Manifest, Health, Session, Policy }

        /// <summary>The reason of the fallback of an entity a cut stream did not reach.</summary>
        public const string Cut = "the decision stream was cut";

        private sealed class Sent
        {
            public Kind Kind;
            public int Epoch;
            /// <summary>The entities asked, in the request's order, with the legal actions sent for each; streamed,
            /// each leaves as its line comes.</summary>
            public List<KeyValuePair<string, IList<string>>> Legal;
            /// <summary>When it was sent (ms): a line's latency counts from here.</summary>
            public double At;
            /// <summary>Its streamed answer's lines, from the first chunk on.</summary>
            public Lines Lines;
            /// <summary>Its stream's last line came.</summary>
            public bool Whole;
            /// <summary>Lines of its stream read so far (at most Limits.MaxStreamLines, then it is ended).</summary>
            public int LinesRead;
        }

        public readonly Stats Stats = new Stats();
        public readonly string ClientId;
        /// <summary>The per-entity rules: Track, Event, Action, SetEpoch go there.</summary>
        public readonly Roster Roster;
        /// <summary>Which local policy decides first, and fetching the service's.</summary>
        public readonly Cascade Cascade;
        public IDictionary<string, object> World;
        public string Scope;
        public IDictionary<string, object> ScopeState;

        private readonly int maxInFlight;
        private readonly SayOnce said;
        private readonly bool timeoutGiven;
        private double timeout;
        private readonly Session session;
        private readonly Outbox outbox;
        private readonly Refusals refusals;
        private readonly Dictionary<string, Sent> sent = new Dictionary<string, Sent>();
        private readonly List<string> sentOrder = new List<string>(); // health and manifest refs, in the order sent
        private readonly Timings timings;
        private readonly bool stream;
        private int refs;
        private int decidesInFlight;
        private double notBefore = double.NegativeInfinity; // after a 429 or a service that is down

        public Scheduler(SchedulerOptions options)
        {
            options = options ?? new SchedulerOptions();
            ClientId = options.ClientId;
            World = options.World != null ? new Dictionary<string, object>(options.World) : new Dictionary<string, object>();
            Scope = options.Scope;
            ScopeState = options.ScopeState;
            maxInFlight = options.MaxInFlight;
            NpcMindLog log = options.Log ?? (m => Console.Error.WriteLine("npcmind: " + m));
            said = new SayOnce(log);
            refusals = new Refusals((key, message, native) => Warn(key, message, native), Stats);
            Cascade = new Cascade(ClientId, options.Policy, options.FetchPolicy, options.PolicyRefreshMs, said,
                options.ManifestVersion, options.PolicyMaxBytes);
            Chooser choose = e => Cascade.Choose(e, World, Scope != null ? ScopeState : null);
            Roster = new Roster(options.Epoch, options.EventWindowMs, choose, options.Threshold, Stats, said);
            timeoutGiven = options.TimeoutMs.HasValue;
            timeout = options.TimeoutMs ?? DefaultDeadlineMs + TimeoutMarginMs;
            session = !string.IsNullOrEmpty(options.ApiKey) ? new Session(options.ApiKey) : null;
            outbox = new Outbox(new Host(this), options.TelemetryMs);
            timings = new Timings(options.RefreshMs, options.Manifest);
            stream = options.Stream;
        }

        // --- what the game tells (the per-entity rules are the roster's) ------------------------------------

        /// <summary>The game's epoch: answers to requests sent under another epoch are dropped.</summary>
        public int Epoch { get { return Roster.Epoch; } }

        /// <summary>A new scene (level, map): the service resets its population with the next telemetry.</summary>
        public void SetScene(string scene) { outbox.SetScene(scene); }

        /// <summary>An observe-only entity (the player): sent as telemetry, never asked.</summary>
        public void Observe(string id, string type, IDictionary<string, object> fields, IList<double> position = null)
        {
            outbox.Observe(id, type, fields, position);
        }

        /// <summary>The entity left the scene (died, despawned): forget it and tell the service.</summary>
        public void Untrack(string id)
        {
            refusals.Alone.Remove(id);
            bool tracked = Roster.Entities.Remove(id);
            if (outbox.Forget(id) || tracked) outbox.Remove(id);
        }

        /// <summary>What became of the entity's current AI decision; false when it has none to report.</summary>
        public bool Report(string id, string outcome, string detail = null)
        {
            var item = Roster.Report(id, outcome, detail);
            if (item != null) outbox.Report(item);
            return item != null;
        }

        /// <summary>How long a request may take: the one given, else the service's deadline plus 5 s once it told it.</summary>
        public double TimeoutMs { get { return timeout; } }

        /// <summary>Requests sent and not yet answered (telemetry and reports are the outbox's, not counted).</summary>
        public int InFlight { get { return sent.Count; } }

        /// <summary>Entities tracked (that decide).</summary>
        public int Size { get { return Roster.Entities.Count; } }

        /// <summary>The headers a request of this client carries (a hosted session's token).</summary>
        public Dictionary<string, string> Headers()
        {
            return session != null ? session.Headers() : new Dictionary<string, string>();
        }

        /// <summary>What is due now, in the order to send: session, manifest, policy, telemetry, reports, decisions.</summary>
        public List<OutRequest> Tick(double now)
        {
            var output = new List<OutRequest>();
            Tick(now, output);
            return output;
        }

        /// <summary>The requests to send now, added to <paramref name="output"/> (a list the game loop reuses: a frame
        /// with nothing due allocates nothing).</summary>
        public void Tick(double now, List<OutRequest> output)
        {
            if (session != null && session.Due(now) && now >= notBefore)
            {
                var body = new Dictionary<string, object> { { "client_id", ClientId } };
                var r = Make("POST", "/v1/session", body, null, session.KeyHeaders());
                session.Pending = r.Ref;
                Remember(r.Ref, new Sent { Kind = Kind.Session });
                output.Add(r);
            }
            if (session != null && !session.Ready) return; // nothing goes without a token, or one asked for
            bool again = Cascade.RecheckManifest;
            if ((!timings.Known || again) && !timings.Asked && now >= notBefore) AskManifest(output, again);
            if (Cascade.Due(now) && now >= notBefore)
            {
                Dictionary<string, string> extra;
                string path = Cascade.Request(now, out extra);
                var headers = Headers();
                foreach (var kv in extra) headers[kv.Key] = kv.Value;
                var r = Make("GET", path, null, null, headers);
                Remember(r.Ref, new Sent { Kind = Kind.Policy });
                output.Add(r);
            }
            Roster.Population(now);
            if (now < notBefore) return; // the service is down or asked us to wait: keep it all for later
            output.AddRange(outbox.SendTelemetry(now, ClientId, Roster.Epoch, Roster.Entities.Values));
            int count;
            var reports = outbox.SendReports(ClientId, out count);
            if (reports != null) output.Add(reports);
            Stats.ReportsSent += count;
            Ask(now, output);
        }

        /// <summary>Send every queued report now (before closing, or for a turn-based game).</summary>
        public List<OutRequest> FlushReports()
        {
            var output = new List<OutRequest>();
            while (outbox.QueuedReports > 0)
            {
                int count;
                var r = outbox.SendReports(ClientId, out count);
                Stats.ReportsSent += count;
                if (r != null) output.Add(r);
            }
            return output;
        }

        /// <summary>An answer came back for <paramref name="reference"/>: applied by the request's kind (telemetry
        /// and reports: the outbox's). <paramref name="body"/>: the parsed JSON (a policy's raw bytes may come as a
        /// byte[]).</summary>
        public void Answer(string reference, int status, object body, IDictionary<string, string> headers, double now)
        {
            headers = headers ?? new Dictionary<string, string>();
            if (outbox.Owns(reference))
            {
                if (outbox.Answer(reference, status, body)) Refused(status, body, headers, now);
                return;
            }
            var s = Take(reference);
            if (s == null) return;
            switch (s.Kind)
            {
                case Kind.Decide: ApplyDecide(s, status, body, headers, now); break;
                case Kind.Manifest: ManifestAnswered(status, body, now); break;
                case Kind.Health: HealthAnswered(status, body); break;
                case Kind.Session: SessionAnswered(status, body, now); break;
                case Kind.Policy:
                    if (!Cascade.Answered(status, body, headers)) Refused(status, body, headers, now);
                    break;
            }
        }

        /// <summary>A request got no answer: said once, then undone by its kind; its entities use their native AI
        /// and are retried later.</summary>
        public void Fail(string reference, FailKind kind, double now)
        {
            Failed(kind);
            if (outbox.Owns(reference))
            {
                outbox.Failed(reference);
                return;
            }
            var s = Take(reference);
            if (s == null) return;
            switch (s.Kind)
            {
                case Kind.Decide:
                    decidesInFlight--;
                    Stats.Errors++;
                    notBefore = now + 1000;
                    Roster.Release(s.Legal.Select(p => p.Key), null);
                    break;
                case Kind.Manifest:
                    timings.Asked = false; // asked again on a later tick; the defaults hold meanwhile
                    notBefore = Math.Max(notBefore, now + 1000);
                    break;
                case Kind.Health:
                    break;
                case Kind.Session:
                    if (session != null && !session.Open) notBefore = Math.Max(notBefore, now + 1000);
                    if (session != null) session.Failed(now);
                    break;
                case Kind.Policy:
                    Cascade.Failed();
                    break;
            }
        }

        /// <summary>Bytes of request <paramref name="reference"/>'s streamed answer (a 200 in NDJSON): each line they
        /// complete is applied at once, so an entity's decision is usable before the stream ends. Bytes for a
        /// request that is not a decide request in flight are ignored (a game loop must not crash on them).</summary>
        public void Chunk(string reference, byte[] data, double now)
        {
            var s = Streaming(reference);
            if (s == null) return;
            foreach (var line in s.Lines.Feed(data))
            {
                string problem;
                var got = NpcMind.Answer.ReadStreamLine(line, out problem);
                StreamLine(reference, s, got, problem, now);
                if (!sent.ContainsKey(reference)) return; // ended at its cap: the rest of the chunk is not read
            }
        }

        /// <summary>One line of request <paramref name="reference"/>'s streamed answer, read already (the SDK's
        /// transport reads them on the sender's thread, off the frame): what <see cref="Answer.ReadStreamLine"/>
        /// gave, applied as <see cref="Chunk"/> applies a line.</summary>
        public void Line(string reference, object got, string problem, double now)
        {
            var s = Streaming(reference);
            if (s != null) StreamLine(reference, s, got, problem, now);
        }

        /// <summary>The decide request in flight a streamed answer is for (its first bytes: the service took every
        /// entity of it), or null.</summary>
        private Sent Streaming(string reference)
        {
            Sent s;
            if (!sent.TryGetValue(reference, out s) || s.Kind != Kind.Decide) return null;
            if (s.Lines == null) // the 200: the service took every entity of it
            {
                s.Lines = new Lines();
                foreach (var p in s.Legal) refusals.Alone.Remove(p.Key);
            }
            return s;
        }

        /// <summary>Request <paramref name="reference"/>'s streamed answer ended (a partial line is discarded): cut
        /// before its last line, the lines received stand and every entity of it without one falls back
        /// (<c>unavailable</c>, <see cref="Cut"/>). <paramref name="failed"/>: the transport ended it (no line
        /// within the timeout, the connection lost), said as Fail says it.</summary>
        public void End(string reference, double now, FailKind? failed = null, string error = null)
        {
            var s = Take(reference);
            if (s == null || s.Kind != Kind.Decide) return;
            decidesInFlight--;
            if (failed.HasValue) Failed(failed.Value, error);
            Ended(s, now);
        }

        /// <summary>A stream that ended: cut before its last line, its entities without a line fall back.</summary>
        private void Ended(Sent s, double now)
        {
            if (s.Whole)
            {
                Roster.Release(s.Legal.Select(p => p.Key).ToList(), null); // one the stream did not name: on its refresh
                return;
            }
            Stats.StreamsCut++;
            Stats.Errors++;
            foreach (var p in s.Legal)
            {
                NpcEntity e;
                if (Roster.Entities.TryGetValue(p.Key, out e) && e.InFlight)
                    Roster.Use(e, new Decision { Id = p.Key, Source = "FALLBACK", Code = FallbackCode.Unavailable, Reason = Cut }, p.Value, now);
            }
            notBefore = now + 1000; // as after a request that failed: the service may be gone
        }

        /// <summary>One line of a decide request's stream, under the rules of a whole answer: a line for an entity
        /// no longer tracked (or not asked, or answered already) is dropped, a stream for an older epoch is dropped
        /// whole, and a decision's action is checked against the legal actions sent (the roster's Use).</summary>
        private void StreamLine(string reference, Sent s, object got, string problem, double now)
        {
            if (s.Whole) return; // nothing counts after the last line
            if (++s.LinesRead > Limits.MaxStreamLines) // lines for ids never asked, without end: no more read
            {
                Take(reference);
                decidesInFlight--;
                Warn("stream-lines", "the decision stream passed " + Limits.MaxStreamLines
                    + " lines (Limits.MaxStreamLines): ended there, the rest not read", true);
                Ended(s, now);
                return;
            }
            if (got == null) // that entity is left without a line: it falls back if the stream is cut
            {
                Stats.Errors++;
                Warn("malformed-line", "a line of the decision stream could not be read: " + problem, true);
                return;
            }
            if (got is StreamEnd)
            {
                s.Whole = true;
                return;
            }
            if (s.Epoch != Roster.Epoch) // asked for a state the game has left: every line is stale
            {
                if (s.Legal.Count > 0)
                {
                    Stats.DroppedEpoch++;
                    Roster.Release(s.Legal.Select(p => p.Key).ToList(), now); // asked again at once, for the epoch of now
                    s.Legal.Clear();
                }
                return;
            }
            var d = (Decision)got;
            int at = s.Legal.FindIndex(p => p.Key == d.Id);
            if (at < 0) return; // not asked, or answered already
            var legal = s.Legal[at].Value;
            s.Legal.RemoveAt(at);
            NpcEntity e;
            if (!Roster.Entities.TryGetValue(d.Id, out e)) return; // untracked meanwhile
            Roster.Use(e, d, legal, now);
            Stats.StreamedDecisions++;
            Stats.StreamedMsTotal += now - s.At;
        }

        private void Remember(string reference, Sent s)
        {
            sent[reference] = s;
            if (s.Kind == Kind.Health || s.Kind == Kind.Manifest) sentOrder.Add(reference);
        }

        private Sent Take(string reference)
        {
            Sent s;
            if (!sent.TryGetValue(reference, out s)) return null;
            sent.Remove(reference);
            sentOrder.Remove(reference);
            return s;
        }

        // --- scheduling ---------------------------------------------------------------------------------------

        private void AskManifest(List<OutRequest> output, bool again)
        {
            if (!timeoutGiven && !again)
            {
                var health = Make("GET", "/v1/health", null, null, null);
                Remember(health.Ref, new Sent { Kind = Kind.Health });
                output.Add(health);
            }
            var r = Make("GET", "/v1/manifest", null, null, null);
            timings.Asked = true;
            Remember(r.Ref, new Sent { Kind = Kind.Manifest });
            output.Add(r);
        }

        /// <summary>Send what is due, events first, then the longest waiting; no more requests than maxInFlight.</summary>
        private void Ask(double now, List<OutRequest> output)
        {
            int free = maxInFlight - decidesInFlight;
            if (free <= 0 || !AnyDue(now)) return; // most frames: nothing due, nothing allocated
            AskDue(now, output, free);
        }

        private bool AnyDue(double now)
        {
            var all = Roster.Entities.Values;
            for (int i = 0; i < all.Count; i++)
                if (all[i].Due <= now && !all[i].InFlight) return true;
            return false;
        }

        /// <summary>The due entities, events first, asked in requests of 16 (those the service refused alone).</summary>
        private void AskDue(double now, List<OutRequest> output, int free)
        {
            var due = new List<NpcEntity>();
            var place = new List<int>(); // the order tracked: List.Sort is not stable, the other SDKs' sorts are
            var all = Roster.Entities.Values;
            for (int i = 0; i < all.Count; i++)
            {
                var e = all[i];
                if (e.Due <= now && !e.InFlight)
                {
                    due.Add(e);
                    place.Add(i);
                }
            }
            if (due.Count == 0) return;
            var order = new int[due.Count];
            for (int i = 0; i < order.Length; i++) order[i] = i;
            Array.Sort(order, (a, b) => // events first, then the longest due, then the order tracked
            {
                int c = (due[a].Trigger == null ? 1 : 0).CompareTo(due[b].Trigger == null ? 1 : 0);
                if (c == 0) c = due[a].Due.CompareTo(due[b].Due);
                return c != 0 ? c : place[a].CompareTo(place[b]);
            });
            due = order.Select(i => due[i]).ToList();
            var asked = new List<NpcEntity>();
            int room = free * Batch; // entities the free requests carry; one sent alone takes a whole request
            foreach (var e in due)
            {
                room -= refusals.Alone.ContainsKey(e.Id) ? Batch : 1;
                if (room < 0) break; // the rest stay due: next tick
                double refresh, ttl;
                timings.Of(e.Type, out refresh, out ttl);
                e.Due = now + refresh;
                e.AskedAt = now;
                if (Roster.Local(e, now, ttl)) continue;
                asked.Add(e);
            }
            var together = asked.Where(e => !refusals.Alone.ContainsKey(e.Id)).ToList();
            for (int i = 0; i < together.Count; i += Batch) SendBatch(together.Skip(i).Take(Batch).ToList(), output, now);
            foreach (var e in asked) if (refusals.Alone.ContainsKey(e.Id)) SendBatch(new List<NpcEntity> { e }, output, now); // so it cannot sink the others
        }

        private void SendBatch(List<NpcEntity> batch, List<OutRequest> output, double now)
        {
            var body = new Dictionary<string, object>
            {
                { "client_id", ClientId },
                { "epoch", Roster.Epoch },
                { "world", World },
                { "entities", batch.Select(EntityItem).ToList() },
            };
            if (Scope != null)
            {
                body["scope"] = Scope;
                if (ScopeState != null) body["scope_state"] = ScopeState;
            }
            var after = outbox.PendingTelemetry(); // its prompt shows the scene as the game last told it
            after.AddRange(sentOrder); // health and manifest still out: the timings
            var r = Post("/v1/decide", body, after);
            if (r == null) return;
            var kept = new HashSet<string>(((List<Dictionary<string, object>>)r.Body["entities"]).Select(i => (string)i["id"]));
            var legal = new List<KeyValuePair<string, IList<string>>>();
            foreach (var e in batch)
            {
                if (!kept.Contains(e.Id)) continue;
                e.InFlight = true;
                e.Trigger = null;
                legal.Add(new KeyValuePair<string, IList<string>>(e.Id, e.LegalActions.ToList()));
            }
            r = new OutRequest(r.Ref, r.Method, r.Path, r.Headers, r.Body, r.Json, r.After, stream);
            Remember(r.Ref, new Sent { Kind = Kind.Decide, Epoch = Roster.Epoch, Legal = legal, At = now });
            decidesInFlight++;
            Stats.Requests++;
            Stats.Asked += legal.Count;
            output.Add(r);
        }

        // --- answers ------------------------------------------------------------------------------------------

        private void ApplyDecide(Sent s, int status, object body, IDictionary<string, string> headers, double now)
        {
            decidesInFlight--;
            var ids = s.Legal.Select(p => p.Key).ToList();
            if (status != 200)
            {
                Stats.Errors++;
                var types = s.Legal.Select(p =>
                {
                    NpcEntity e;
                    return new KeyValuePair<string, string>(p.Key, Roster.Entities.TryGetValue(p.Key, out e) ? e.Type : "entity");
                }).ToList();
                var bad = refusals.Entities(status, body, types);
                if (bad != null)
                {
                    Roster.Release(ids, now, bad); // the others are asked again at once, without them
                    return;
                }
                Refused(status, body, headers, now);
                // a session that ended under us: asked again soon, with a new session
                Roster.Release(ids, status == 401 && session != null ? now : (double?)null);
                return;
            }
            foreach (var id in ids) refusals.Alone.Remove(id); // taken: it may go with the others again
            string problem;
            var answer = NpcMind.Answer.ReadDecideResponse(body, out problem);
            if (answer == null)
            {
                problem = Errors.ErrorLine(body, problem); // a body past its cap, or not JSON: why
                Stats.Errors++;
                Warn("malformed", "the answer to /v1/decide could not be read: " + problem, true);
                Roster.Release(ids, null);
                return;
            }
            if (answer.Epoch != Roster.Epoch || s.Epoch != Roster.Epoch)
            {
                Stats.DroppedEpoch++;
                Roster.Release(ids, now); // asked again at once, for the epoch of now
                return;
            }
            foreach (var d in answer.Decisions) ApplyDecision(s, d, now);
            Roster.Release(ids, null);
        }

        /// <summary>One decision of an answer to the request it answers: the step a streamed answer takes for each
        /// line as it comes (the epoch checked first by the caller).</summary>
        private void ApplyDecision(Sent s, Decision d, double now)
        {
            NpcEntity e;
            if (!Roster.Entities.TryGetValue(d.Id, out e)) return; // untracked meanwhile
            foreach (var p in s.Legal)
                if (p.Key == d.Id)
                {
                    Roster.Use(e, d, p.Value, now);
                    return;
                }
            // not asked in this request: not the answer's to give
        }

        private void ManifestAnswered(int status, object body, double now)
        {
            if (!timings.Read(status, body, Roster.Entities.Values))
            {
                notBefore = Math.Max(notBefore, now + 1000); // asked again on a later tick; defaults meanwhile
                return;
            }
            Cascade.Manifest(Json.Get(body, "version") as string);
        }

        private void HealthAnswered(int status, object body)
        {
            var deadline = Timings.DeadlineTimeoutMs(status, body);
            if (!timeoutGiven && deadline.HasValue) timeout = deadline.Value + TimeoutMarginMs;
        }

        private void SessionAnswered(int status, object body, double now)
        {
            string why = session != null ? session.Answer(status, body, now) : null;
            if (why == null) return;
            Warn("session:" + Refusals.Number.Replace(why, "#"), why, true);
            if (!session.Open) notBefore = Math.Max(notBefore, now + 1000);
        }

        private void Refused(int status, object body, IDictionary<string, string> headers, double now)
        {
            if (status == 429 || status >= 500) notBefore = now + Refusals.RetryAfterMs(headers);
            if (status == 401 && session != null)
            {
                session.Expire(); // a new session with the next request
                notBefore = Math.Max(notBefore, now + 250); // not a request a frame if it keeps failing
            }
            refusals.Said(status, body, session != null);
        }

        private void Failed(FailKind kind, string error = null)
        {
            if (kind == FailKind.TooLarge)
                Warn("too-large:" + Refusals.Number.Replace(error ?? "", "#"), error ?? "an answer passed one of the SDK's caps", true);
            else if (kind == FailKind.Timeout)
            {
                string why = timeoutGiven
                    ? "its model may take up to NPCMIND_DEADLINE_MS: leave TimeoutMs out to follow it"
                    : (TimeoutMarginMs / 1000) + " s past its own deadline for the model: it is overloaded or stalled";
                Warn("timeout", "npcmind did not answer within " + (timeout / 1000) + " s (" + why + ")", true);
            }
            else Warn("transport", "npcmind is unreachable", true);
        }

        private void Warn(string key, string message, bool native)
        {
            said.Say(key, message, native);
        }

        // --- requests -----------------------------------------------------------------------------------------

        private OutRequest Make(string method, string path, Dictionary<string, object> body, IList<string> after,
            Dictionary<string, string> headers)
        {
            string json = body == null ? null : Json.Write(body); // first: a body that is not JSON takes no ref
            string reference = "r" + (++refs);
            var waits = new List<string>();
            if (path != "/v1/session")
            {
                if (session != null) waits.AddRange(session.Awaited());
                if (after != null) waits.AddRange(after);
            }
            return new OutRequest(reference, method, path, headers ?? Headers(), body, json, waits);
        }

        /// <summary>A POST whose body is written now (a snapshot); an entity that is not JSON is left out and named
        /// once; null when nothing is left to send.</summary>
        private OutRequest Post(string path, Dictionary<string, object> body, IList<string> after)
        {
            try
            {
                return Make("POST", path, body, after, null);
            }
            catch (NpcJsonException)
            {
                // one entity holds what JSON cannot carry (NaN, a cycle, a game's own class): the others still go
            }
            var entities = body.ContainsKey("entities") ? body["entities"] as List<Dictionary<string, object>> : null;
            if (entities != null)
            {
                body["entities"] = entities.Where(item =>
                {
                    try
                    {
                        Json.Write(item);
                        return true;
                    }
                    catch (NpcJsonException exc)
                    {
                        string id = item["id"] as string ?? "";
                        Warn("encode:" + id, item["type"] + " " + Errors.Quote(id) + " cannot be sent as JSON ("
                            + exc.Message + "): left out", true);
                        return false;
                    }
                }).ToList();
            }
            var left = body.ContainsKey("entities") ? body["entities"] as List<Dictionary<string, object>> : null;
            var removed = body.ContainsKey("removed") ? body["removed"] as List<string> : null;
            if ((left == null || left.Count == 0) && (removed == null || removed.Count == 0) && !body.ContainsKey("scene"))
                return null;
            try
            {
                return Make("POST", path, body, after, null);
            }
            catch (NpcJsonException exc)
            {
                Warn("encode:" + exc.Message, "a request cannot be sent as JSON (" + exc.Message + "): skipped", true);
                return null;
            }
        }

        /// <summary>An entity's wire object: the given fields, and those optional ones that are set.</summary>
        private static Dictionary<string, object> EntityItem(NpcEntity e)
        {
            var item = new Dictionary<string, object>
            {
                { "id", e.Id },
                { "type", e.Type },
                { "observation", e.Observation },
                { "legal_actions", e.LegalActions },
            };
            if (e.Position != null) item["position"] = e.Position;
            if (e.Profile != null) item["profile"] = e.Profile;
            if (e.Parent != null) item["parent"] = e.Parent;
            if (e.Trigger != null) item["trigger"] = e.Trigger;
            return item;
        }

        /// <summary>The outbox's way into the scheduler's refs, encoding and refusals.</summary>
        private sealed class Host : IOutboxHost
        {
            private readonly Scheduler s;

            public Host(Scheduler s) { this.s = s; }

            public OutRequest Post(string path, Dictionary<string, object> body, IList<string> after)
            {
                return s.Post(path, body, after);
            }

            public Refusals Refusals { get { return s.refusals; } }

            public bool Tracked(string id) { return s.Roster.Entities.ContainsKey(id); }

            public void Warn(string key, string message, bool native) { s.Warn(key, message, native); }
        }
    }
}
