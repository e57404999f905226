// The scheduler under a random game and a random service (fixed seeds): whatever the order of calls and whatever
// comes back (decisions for other epochs, for entities not asked, actions not legal, fallbacks, malformed bodies,
// refusals, failures), no call throws, and Action gives only a decision that is live, legal now, answered for the
// epoch of now, for an entity its request asked about, or null.

using System;
using System.Collections.Generic;
using System.Linq;
using NpcMind;
using NUnit.Framework;

namespace NpcMind.Tests
{
    [TestFixture]
    public class SchedulerFuzzTests
    {
        private static readonly string[] Actions = { "idle", "wander", "chase", "flee" };

        [TestCase(1)]
        [TestCase(2)]
        [TestCase(3)]
        [TestCase(4)]
        [TestCase(5)]
        public void TheGameSideOfTheProtocolHoldsWhateverComes(int seed)
        {
            var rng = new Random(seed);
            var options = new SchedulerOptions
            {
                Manifest = Json.AsObject(Json.Parse("{\"types\":{\"bee\":{\"refresh_ms\":300,\"ttl_ms\":900}}}")),
                TimeoutMs = 1000,
                ApiKey = seed % 2 == 0 ? "key" : null,
                Log = m => { },
            };
            if (seed == 3) options.Policy = LocalPolicy.Of(e => new PolicyChoice(Actions[e.Id.Length % 4], 0.9));
            var s = new Scheduler(options);
            var pending = new List<OutRequest>();
            var forbidden = new HashSet<string>(); // decision ids that must never be used
            var asked = new Dictionary<string, HashSet<string>>(); // decide ref -> the ids it carried
            var askedEpoch = new Dictionary<string, int>();
            double now = 0;
            int decisions = 0, used = 0;
            for (int step = 0; step < 4000; step++)
            {
                now += rng.Next(0, 60);
                string id = "b" + rng.Next(8);
                switch (rng.Next(10))
                {
                    case 0:
                    case 1:
                        var legal = Actions.Where(a => rng.Next(3) != 0).ToList();
                        s.Roster.Track(id, "bee", new Dictionary<string, object> { { "hp", rng.NextDouble() } }, legal, null, now);
                        break;
                    case 2:
                        s.Roster.Event(id, "hit", now);
                        break;
                    case 3:
                        if (rng.Next(10) == 0) s.Untrack(id);
                        else if (rng.Next(10) == 0) s.Roster.SetEpoch(s.Epoch + 1, now);
                        else s.Report(id, rng.Next(5) == 0 ? "exploded" : "done");
                        break;
                    case 4:
                    case 5:
                        foreach (var r in s.Tick(now))
                        {
                            pending.Add(r);
                            if (r.Path == "/v1/decide")
                            {
                                var body = (IDictionary<string, object>)Json.Parse(r.Json);
                                asked[r.Ref] = new HashSet<string>(((IList<object>)body["entities"]).Select(x => (string)Json.Get(x, "id")));
                                askedEpoch[r.Ref] = (int)(long)body["epoch"];
                            }
                        }
                        break;
                    case 6:
                    case 7:
                        if (pending.Count == 0) break;
                        var one = pending[rng.Next(pending.Count)];
                        pending.Remove(one);
                        if (rng.Next(8) == 0)
                        {
                            s.Fail(one.Ref, rng.Next(2) == 0 ? FailKind.Timeout : FailKind.Unreachable, now);
                            break;
                        }
                        var answer = Answer(rng, one, asked, askedEpoch, s.Epoch, forbidden, ref decisions);
                        s.Answer(one.Ref, answer.Key, answer.Value, new Dictionary<string, string> { { "retry-after", "0.2" } }, now);
                        break;
                    default:
                        var legalNow = rng.Next(3) == 0 ? Actions.Where(a => rng.Next(2) == 0).ToList() : null;
                        var choice = s.Roster.Action(id, legalNow, now);
                        if (choice == null) break;
                        NpcEntity e;
                        Assert.IsTrue(s.Roster.Entities.TryGetValue(id, out e), "a decision for an entity not tracked");
                        Assert.That((legalNow ?? e.LegalActions).Contains(choice.Action), "not legal now: " + choice.Action);
                        Assert.That(now, Is.LessThan(choice.ExpiresAt), "past its expiry");
                        if (choice.DecisionId != null)
                        {
                            Assert.IsFalse(forbidden.Contains(choice.DecisionId), "used: " + choice.DecisionId);
                            used++;
                        }
                        break;
                }
            }
            Assert.That(decisions, Is.GreaterThan(50), "the fuzz answered too few decisions to mean anything");
            Assert.That(used, Is.GreaterThan(10), "the fuzz used too few decisions to mean anything");
        }

        /// <summary>A random answer to a request; the ids of decisions the game must never use go to
        /// <paramref name="forbidden"/> (another epoch than now, an entity not asked, an action not sent as legal).</summary>
        private static KeyValuePair<int, object> Answer(Random rng, OutRequest r, Dictionary<string, HashSet<string>> asked,
            Dictionary<string, int> askedEpoch, int epochNow, HashSet<string> forbidden, ref int count)
        {
            if (rng.Next(10) == 0)
            {
                int[] statuses = { 401, 413, 422, 429, 500, 503 };
                int status = statuses[rng.Next(statuses.Length)];
                string body = status == 422
                    ? "{\"error\":{\"code\":\"invalid\",\"message\":\"m\",\"details\":[{\"path\":\"entities[0].observation.hp\",\"message\":\"bad\"}]}}"
                    : "{\"error\":{\"code\":\"x\",\"message\":\"wait 1.5 s\"}}";
                return new KeyValuePair<int, object>(status, Json.Parse(body));
            }
            if (r.Path == "/v1/session")
                return new KeyValuePair<int, object>(200, Json.Parse("{\"session_token\":\"t" + rng.Next(9) + "\",\"expires_in_s\":2}"));
            if (r.Path != "/v1/decide") return new KeyValuePair<int, object>(200, Json.Parse("{}"));
            if (rng.Next(15) == 0) return new KeyValuePair<int, object>(200, Json.Parse("{\"epoch\":\"x\",\"decisions\":{}}"));
            var sent = (IDictionary<string, object>)Json.Parse(r.Json);
            var legalSent = ((IList<object>)sent["entities"]).ToDictionary(
                e => (string)Json.Get(e, "id"), e => ((IList<object>)Json.Get(e, "legal_actions")).Cast<string>().ToList());
            int epoch = rng.Next(6) == 0 ? epochNow + 1 : askedEpoch[r.Ref];
            var list = new List<object>();
            foreach (var id in asked[r.Ref].Concat(rng.Next(4) == 0 ? new[] { "b" + rng.Next(8) } : new string[0]))
            {
                string decisionId = "d" + (count++);
                if (rng.Next(5) == 0)
                {
                    list.Add(Json.Parse("{\"id\":\"" + id + "\",\"source\":\"FALLBACK\",\"code\":\"busy\",\"reason\":\"wait 0.9 s\"}"));
                    continue;
                }
                string action = Actions[rng.Next(Actions.Length)];
                bool legal = legalSent.ContainsKey(id) && legalSent[id].Contains(action);
                if (epoch != epochNow || epoch != askedEpoch[r.Ref] || !asked[r.Ref].Contains(id) || !legal) forbidden.Add(decisionId);
                list.Add(new Dictionary<string, object>
                {
                    { "id", id }, { "source", "AI" }, { "action", action }, { "label", action }, { "ttl_ms", 900L },
                    { "decision_id", decisionId }, { "cached", rng.Next(2) == 0 }, { "confidence", rng.NextDouble() },
                });
            }
            var answer = new Dictionary<string, object> { { "a2g", "0.1" }, { "epoch", (long)epoch }, { "latency_ms", 1L }, { "decisions", list } };
            return new KeyValuePair<int, object>(200, answer);
        }
    }
}
