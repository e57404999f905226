// The per-entity rules (no I/O): tracking, events, the epoch, population changes, cascade, and applying a
// decision to the entity it names; the scheduler keeps the requests and answers.

using System;
using System.Collections.Generic;
using System.Linq;
using System.Text.RegularExpressions;

namespace NpcMind
{
    /// <summary>The cascade's choice for an entity, or null: the service decides.</summary>
    internal delegate PolicyChoice Chooser(NpcEntity entity);

    /// <summary>The entities of one game, on the scheduler's clock (ms).</summary>
    internal sealed class Roster
    {
        /// <summary>A change of population re-asks everyone, at most this often.</summary>
        public const double ReaskGapMs = 500;
        private static readonly Regex Number = new Regex(@"\d+(?:\.\d+)?");

        /// <summary>Id -> entity, in the order tracked (the order requests carry them).</summary>
        public readonly OrderedEntities Entities = new OrderedEntities();
        public int Epoch;
        public readonly Chooser Choose;
        public double Threshold;
        private readonly double windowMs;
        private readonly Stats stats;
        private readonly SayOnce say;
        private double windowEnd = double.NegativeInfinity; // events until then go out together, when it ends
        private int count;
        private double lastReask = double.NegativeInfinity;
        private bool reaskPending;

        public Roster(int epoch, double windowMs, Chooser choose, double threshold, Stats stats, SayOnce say)
        {
            Epoch = epoch;
            this.windowMs = windowMs;
            Choose = choose;
            Threshold = threshold;
            this.stats = stats;
            this.say = say;
        }

        private static readonly TrackOptions NoOptions = new TrackOptions();

        /// <summary>Add an entity that decides, or update what it sees and may do now (not asked again for that
        /// alone: on its refresh, on an event, or when the population changes).</summary>
        public void Track(string id, string type, IDictionary<string, object> observation, IList<string> legalActions,
            TrackOptions options, double now)
        {
            options = options ?? NoOptions; // this runs for every entity of every frame: nothing allocated
            NpcEntity e;
            if (!Entities.TryGetValue(id, out e))
            {
                e = new NpcEntity(id)
                {
                    Due = now,
                    AskedAt = double.NegativeInfinity,
                };
                Entities.Add(id, e);
            }
            else if (e.Type != type)
            {
                e.Choice = null;
                e.Due = now;
            }
            // kept by reference (this runs for every entity of every frame); written out when a request is built
            e.Type = type;
            e.Observation = observation;
            e.LegalActions = legalActions;
            e.Position = options.Position;
            e.Profile = options.Profile;
            e.Parent = options.Parent;
            e.State = options.State;
            e.Changed = true;
        }

        /// <summary>Something happened to the entity: asked when the event window it opened or joined ends. False
        /// (said once) for an entity not tracked: a game loop must not crash on the order of two calls.</summary>
        public bool Event(string id, string trigger, double now)
        {
            NpcEntity e;
            if (!Entities.TryGetValue(id, out e))
            {
                say.Say("event:" + trigger, "event(" + Errors.Quote(id) + ", " + Errors.Quote(trigger)
                    + ") for an entity not tracked: ignored", false);
                return false;
            }
            e.Trigger = trigger;
            if (now >= windowEnd) windowEnd = now + windowMs; // the first event of a moment opens a window
            e.Due = Math.Min(e.Due, windowEnd); // the next ones join it: they go together when it ends
            return true;
        }

        /// <summary>The report item for the entity's current AI decision, or null: it has none, or the outcome is
        /// unknown.</summary>
        public Dictionary<string, object> Report(string id, string outcome, string detail)
        {
            ReportOutcome known;
            if (!Wire.TryRead(outcome, out known))
            {
                // one wrong outcome would get the whole batch of reports refused
                say.Say("outcome:" + outcome, "report(" + Errors.Quote(id) + ", " + Errors.Quote(outcome ?? "null")
                    + "): the outcome must be one of " + Wire.Words(typeof(ReportOutcome)) + "; not sent", false);
                return null;
            }
            NpcEntity e;
            if (!Entities.TryGetValue(id, out e) || e.Choice == null || e.Choice.DecisionId == null) return null;
            var item = new Dictionary<string, object> { { "decision_id", e.Choice.DecisionId }, { "outcome", outcome } };
            if (!string.IsNullOrEmpty(detail)) item["detail"] = detail.Length > 200 ? detail.Substring(0, 200) : detail;
            return item;
        }

        /// <summary>The entity's live decision, or null: run the game's native AI. Checked against
        /// <paramref name="legalNow"/>, else the legal actions last tracked.</summary>
        public Choice Action(string id, IList<string> legalNow, double now)
        {
            NpcEntity e;
            if (!Entities.TryGetValue(id, out e) || e.Choice == null) return null;
            var c = e.Choice;
            if (now >= c.ExpiresAt)
            {
                e.Choice = null;
                return null;
            }
            return (legalNow ?? e.LegalActions).Contains(c.Action) ? c : null;
        }

        /// <summary>A new epoch: what was decided for the old state no longer holds, and everyone is asked
        /// again.</summary>
        public void SetEpoch(int value, double now)
        {
            if (value == Epoch) return;
            Epoch = value;
            foreach (var e in Entities.Values)
            {
                e.Choice = null;
                e.Due = Math.Min(e.Due, now);
            }
        }

        /// <summary>When the number of entities changed, everyone is due now (at most every 500 ms).</summary>
        public void Population(double now)
        {
            if (Entities.Count != count)
            {
                count = Entities.Count;
                reaskPending = true;
            }
            if (reaskPending && now - lastReask >= ReaskGapMs)
            {
                reaskPending = false;
                lastReask = now;
                foreach (var e in Entities.Values) e.Due = Math.Min(e.Due, now);
            }
        }

        /// <summary>Cascade: whether the local policy is sure enough of <paramref name="e"/> to decide it here.</summary>
        public bool Local(NpcEntity e, double now, double ttl)
        {
            PolicyChoice got;
            try
            {
                got = Choose(e);
            }
            catch (Exception exc)
            {
                // a broken policy must not stop the game: the service decides instead
                say.Say("policy", "the local policy failed for " + Errors.Quote(e.Id)
                    + " (said once; the service decides instead): " + exc.Message, false);
                return false;
            }
            if (got == null) return false;
            if (!(got.Confidence >= Threshold) || !e.LegalActions.Contains(got.Action)) return false;
            e.Choice = new Choice(got.Action, ChoiceSource.Local, got.Confidence, now + ttl, null, false, null);
            e.Trigger = null;
            stats.Local++;
            return true;
        }

        /// <summary>One decision of an answer, for the entity it names; <paramref name="legal"/>: the legal actions
        /// sent with it.</summary>
        public void Use(NpcEntity e, Decision d, IList<string> legal, double now)
        {
            e.InFlight = false;
            if (d.Source == "AI")
            {
                if (!legal.Contains(d.Action))
                {
                    stats.Illegal++;
                    e.Choice = null;
                    return;
                }
                stats.Ai++;
                if (d.Cached) stats.Cached++;
                e.Choice = new Choice(d.Action, ChoiceSource.AI, d.Confidence, now + d.TtlMs, d.DecisionId, d.Cached, d.Label);
                return;
            }
            int n;
            stats.Fallbacks.TryGetValue(d.Code, out n);
            stats.Fallbacks[d.Code] = n + 1;
            e.Choice = null;
            if (d.Code == FallbackCode.Budget)
                say.Say("budget:" + e.Type, e.Type + " " + Errors.Quote(e.Id) + " is over its token budget: " + d.Reason);
            else if (d.Code == FallbackCode.Unavailable || d.Code == FallbackCode.Busy)
                // the service's state, not the entity's: said once ("wait 0.9 s more" is not new at every ask)
                say.Say(Wire.Text(d.Code) + ":" + Number.Replace(d.Reason, "#"), "npcmind fell back with '" + Wire.Text(d.Code) + "': " + d.Reason);
        }

        /// <summary>The entities of an answered or failed request may be asked again: at <paramref name="due"/>, or
        /// else on their next refresh; those in <paramref name="keep"/> on their refresh.</summary>
        public void Release(IEnumerable<string> ids, double? due, IDictionary<string, string> keep = null)
        {
            foreach (var id in ids)
            {
                NpcEntity e;
                if (!Entities.TryGetValue(id, out e) || !e.InFlight) continue;
                e.InFlight = false;
                if (due.HasValue && (keep == null || !keep.ContainsKey(id))) e.Due = Math.Min(e.Due, due.Value);
            }
        }
    }

    /// <summary>Entities by id in the order they were tracked: a Dictionary does not promise an order, and the
    /// order of a request's entities is part of the protocol (a 422 names them by index).</summary>
    internal sealed class OrderedEntities
    {
        private readonly Dictionary<string, NpcEntity> byId = new Dictionary<string, NpcEntity>();
        private readonly List<NpcEntity> order = new List<NpcEntity>();
        private bool holes; // removed ones still in `order`, dropped at the next walk

        public int Count { get { return byId.Count; } }

        public bool TryGetValue(string id, out NpcEntity e) { return byId.TryGetValue(id, out e); }

        public bool ContainsKey(string id) { return byId.ContainsKey(id); }

        public void Add(string id, NpcEntity e)
        {
            byId.Add(id, e);
            order.Add(e);
        }

        public bool Remove(string id)
        {
            NpcEntity e;
            if (!byId.TryGetValue(id, out e)) return false;
            byId.Remove(id);
            holes = true;
            return true;
        }

        /// <summary>The entities in the order tracked.</summary>
        public List<NpcEntity> Values
        {
            get
            {
                if (holes)
                {
                    order.RemoveAll(e => { NpcEntity now; return !byId.TryGetValue(e.Id, out now) || !ReferenceEquals(now, e); });
                    holes = false;
                }
                return order;
            }
        }
    }
}
