// Telemetry and reports (no I/O): what the game told, sent as the service's population and outcomes.

using System;
using System.Collections.Generic;
using System.Linq;

namespace NpcMind
{
    /// <summary>How the outbox makes a request (the scheduler's refs, headers and encoding) and tells what it met.</summary>
    internal interface IOutboxHost
    {
        /// <summary>A POST made now, or null when nothing of the body could be written.</summary>
        OutRequest Post(string path, Dictionary<string, object> body, IList<string> after);
        /// <summary>Entities the service refused as malformed: sent alone from now on (the scheduler's).</summary>
        Refusals Refusals { get; }
        /// <summary>Whether an entity decides (tracked): those are released from going alone by /v1/decide.</summary>
        bool Tracked(string id);
        void Warn(string key, string message, bool native);
    }

    /// <summary>Queues telemetry (changed entities only, scene and removals with the first part) and reports.</summary>
    internal sealed class Outbox
    {
        public const int TelemetryBatch = 1000;
        public const int ReportsARequest = 256;
        /// <summary>Held while the service is unreachable; beyond it the oldest tenth goes.</summary>
        public const int MaxQueuedReports = 10000;

        private sealed class Sent
        {
            public bool Telemetry;
            public Dictionary<string, object> Body;
        }

        private readonly IOutboxHost host;
        private readonly double everyMs;
        private readonly Dictionary<string, Dictionary<string, object>> observed = new Dictionary<string, Dictionary<string, object>>();
        private readonly List<string> observedOrder = new List<string>();
        private List<string> removed = new List<string>();
        private string scene;
        private readonly List<Dictionary<string, object>> reports = new List<Dictionary<string, object>>();
        private int batch = TelemetryBatch; // halved on a 413: observations too rich for the body limit
        private readonly Dictionary<string, Sent> sent = new Dictionary<string, Sent>();
        private List<string> newest = new List<string>(); // refs of the newest telemetry tick: a decide request waits for them
        private List<Dictionary<string, object>> again = new List<Dictionary<string, object>>(); // halved, or without a refused entity
        private double last = double.NegativeInfinity;

        public Outbox(IOutboxHost host, double everyMs)
        {
            this.host = host;
            this.everyMs = everyMs;
        }

        /// <summary>An observe-only entity (the player): sent as telemetry, never asked.</summary>
        public void Observe(string id, string type, IDictionary<string, object> fields, IList<double> position)
        {
            var item = new Dictionary<string, object> { { "id", id }, { "type", type }, { "fields", fields } };
            if (position != null) item["position"] = position;
            if (!observed.ContainsKey(id)) observedOrder.Add(id);
            observed[id] = item;
        }

        /// <summary>Forget an observed entity; whether it was one.</summary>
        public bool Forget(string id)
        {
            if (!observed.Remove(id)) return false;
            observedOrder.Remove(id);
            return true;
        }

        /// <summary>An entity left: the service hears it with the next telemetry.</summary>
        public void Remove(string id) { removed.Add(id); }

        /// <summary>A new scene: the service resets its population with the next telemetry.</summary>
        public void SetScene(string value) { scene = value; }

        /// <summary>Queue a report; the oldest tenth goes when the service has been away too long.</summary>
        public void Report(Dictionary<string, object> item)
        {
            if (reports.Count >= MaxQueuedReports)
            {
                reports.RemoveRange(0, MaxQueuedReports / 10);
                host.Warn("reports-dropped", "more than " + MaxQueuedReports + " reports wait for npcmind: the oldest are dropped", false);
            }
            reports.Add(item);
        }

        /// <summary>Reports still waiting to be sent.</summary>
        public int QueuedReports { get { return reports.Count; } }

        /// <summary>One request of queued reports (at most 256), or none; <paramref name="count"/>: how many it
        /// carries.</summary>
        public OutRequest SendReports(string clientId, out int count)
        {
            count = 0;
            if (reports.Count == 0) return null;
            int n = Math.Min(ReportsARequest, reports.Count);
            var taken = reports.GetRange(0, n);
            reports.RemoveRange(0, n);
            count = n;
            var body = new Dictionary<string, object> { { "client_id", clientId }, { "reports", taken } };
            var request = host.Post("/v1/report", body, null);
            if (request != null) sent[request.Ref] = new Sent { Telemetry = false };
            return request;
        }

        /// <summary>The telemetry due now: bodies to send again first, then, every <c>telemetryMs</c>, the changed
        /// entities, the observed ones, the removals and the scene (none when nothing is new).</summary>
        public List<OutRequest> SendTelemetry(double now, string clientId, int epoch, IEnumerable<NpcEntity> entities)
        {
            if (again.Count == 0 && now - last < everyMs) return NoneDue; // most frames: nothing made, nothing allocated
            var first = again;
            again = new List<Dictionary<string, object>>();
            var bodies = Telemetry(now, clientId, epoch, entities);
            if (bodies.Count > 0) newest = new List<string>();
            var output = new List<OutRequest>();
            foreach (var body in first.Concat(bodies)) Push(body, output);
            return output;
        }

        /// <summary>What SendTelemetry gives when nothing is due (never changed: callers only read it).</summary>
        private static readonly List<OutRequest> NoneDue = new List<OutRequest>();

        private List<Dictionary<string, object>> Telemetry(double now, string clientId, int epoch, IEnumerable<NpcEntity> entities)
        {
            var bodies = new List<Dictionary<string, object>>();
            if (now - last < everyMs) return bodies;
            var items = new List<Dictionary<string, object>>();
            foreach (var e in entities)
            {
                if (!e.Changed) continue;
                e.Changed = false;
                var item = new Dictionary<string, object> { { "id", e.Id }, { "type", e.Type }, { "fields", e.Observation } };
                if (e.Position != null) item["position"] = e.Position;
                if (e.State != null) item["state"] = e.State;
                if (e.Parent != null) item["parent"] = e.Parent;
                items.Add(item);
            }
            foreach (var id in observedOrder) items.Add(observed[id]);
            if (items.Count == 0 && removed.Count == 0 && scene == null) return bodies;
            last = now;
            var alone = items.Where(i => host.Refusals.Alone.ContainsKey((string)i["id"])).ToList();
            var together = items.Where(i => !host.Refusals.Alone.ContainsKey((string)i["id"])).ToList();
            bool firstPart = true;
            for (int i = 0; i < Math.Max(together.Count, 1); i += batch)
            {
                var body = new Dictionary<string, object>
                {
                    { "client_id", clientId },
                    { "epoch", epoch },
                    { "entities", together.Skip(i).Take(batch).ToList() },
                };
                if (firstPart && scene != null) body["scene"] = scene;
                if (i == 0) body["removed"] = removed;
                bodies.Add(body);
                firstPart = false;
            }
            if (alone.Count > 0) // cannot sink the others
                bodies.Add(new Dictionary<string, object> { { "client_id", clientId }, { "epoch", epoch }, { "entities", alone } });
            observed.Clear();
            observedOrder.Clear();
            removed = new List<string>();
            scene = null;
            return bodies;
        }

        /// <summary>Refs of the newest telemetry still unanswered: a decide request goes after them.</summary>
        public List<string> PendingTelemetry()
        {
            return newest.Where(r => sent.ContainsKey(r)).ToList();
        }

        /// <summary>Whether a request is the outbox's.</summary>
        public bool Owns(string reference) { return sent.ContainsKey(reference); }

        /// <summary>An answer to one of the outbox's requests; true when the service refused the request as a whole
        /// (the scheduler then backs off as for any refusal). What goes again goes with the next telemetry.</summary>
        public bool Answer(string reference, int status, object body)
        {
            Sent s;
            sent.TryGetValue(reference, out s);
            sent.Remove(reference);
            if (s != null && s.Telemetry && status == 200) Taken(s.Body);
            if (s == null || !s.Telemetry || status == 200) return status != 200;
            var items = (List<Dictionary<string, object>>)s.Body["entities"];
            if (status == 413 && items.Count > 1)
            {
                // rich observations: fewer entities a request, from now on too, and this one again in two
                int half = items.Count / 2;
                batch = Math.Max(1, Math.Min(batch, half));
                var front = new Dictionary<string, object>(s.Body);
                front["entities"] = items.Take(half).ToList();
                again.Add(front);
                var back = new Dictionary<string, object>(s.Body); // scene and removals went with the first
                back.Remove("scene");
                back.Remove("removed");
                back["entities"] = items.Skip(half).ToList();
                again.Add(back);
                return false;
            }
            var pairs = items.Select(i => new KeyValuePair<string, string>((string)i["id"], (string)i["type"])).ToList();
            var bad = host.Refusals.Entities(status, body, pairs);
            if (bad == null) return true;
            var kept = new Dictionary<string, object>(s.Body);
            kept["entities"] = items.Where(i => !bad.ContainsKey((string)i["id"])).ToList();
            var rem = kept.ContainsKey("removed") ? kept["removed"] as List<string> : null;
            if (((List<Dictionary<string, object>>)kept["entities"]).Count > 0 || (rem != null && rem.Count > 0)
                || kept.ContainsKey("scene"))
                again.Add(kept);
            return false;
        }

        /// <summary>A request that got no answer is forgotten (telemetry is sent again when the entities change).</summary>
        public void Failed(string reference) { sent.Remove(reference); }

        private void Taken(Dictionary<string, object> body)
        {
            // an observed entity taken: it may go with the others again (one that decides: by /v1/decide)
            foreach (var item in (List<Dictionary<string, object>>)body["entities"])
            {
                string id = (string)item["id"];
                if (!host.Tracked(id)) host.Refusals.Alone.Remove(id);
            }
        }

        private void Push(Dictionary<string, object> body, List<OutRequest> output)
        {
            var request = host.Post("/v1/telemetry", body, null);
            if (request == null) return;
            sent[request.Ref] = new Sent { Telemetry = true, Body = body };
            newest.Add(request.Ref);
            output.Add(request);
        }
    }
}
