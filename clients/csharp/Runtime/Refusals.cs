// How the SDK reads a refusal: a 422 whose problems all lie in named entities costs only those entities (each is
// named once and sent alone until the service takes it); any other refusal is said once, with its fix.

using System.Collections.Generic;
using System.Globalization;
using System.Linq;
using System.Text.RegularExpressions;

namespace NpcMind
{
    /// <summary>Says a line once per key; <c>native</c>: the entities concerned use their native AI.</summary>
    internal delegate void Say(string key, string message, bool native);

    /// <summary>The entities the service refused (id -> why), and the lines that say a refusal once.</summary>
    internal sealed class Refusals
    {
        private static readonly Regex EntityPath = new Regex(@"^entities\[(\d+)\]\.?");
        /// <summary>The figures in a reason (seconds left, sizes): not a new kind of reason.</summary>
        public static readonly Regex Number = new Regex(@"\d+(?:\.\d+)?");

        /// <summary>Entity id -> why the service refused it: sent alone until taken.</summary>
        public readonly Dictionary<string, string> Alone = new Dictionary<string, string>();
        private readonly Say say;
        private readonly Stats stats;

        public Refusals(Say say, Stats stats)
        {
            this.say = say;
            this.stats = stats;
        }

        /// <summary>The entities of a 422 whose every problem lies in one of the request's entities
        /// (<paramref name="sent"/>: id and type, in the request's order), each with why, named once and sent
        /// alone from now on; null otherwise.</summary>
        public Dictionary<string, string> Entities(int status, object body, IList<KeyValuePair<string, string>> sent)
        {
            var found = RefusedEntities(status, body, sent.Select(p => p.Key).ToList());
            if (found == null) return null;
            foreach (var kv in found)
            {
                stats.Refused++;
                Alone[kv.Key] = kv.Value;
                string type = sent.Where(p => p.Key == kv.Key).Select(p => p.Value).FirstOrDefault() ?? "entity";
                string said = "npcmind refused " + type + " " + Errors.Quote(kv.Key) + " (" + kv.Value
                    + "): the others go on without it, and it is sent alone until the service takes it";
                say("refused:" + kv.Key + ":" + kv.Value, said, true);
            }
            return found;
        }

        /// <summary>Say a refusal of the whole request once (a countdown in its text is not a new refusal).</summary>
        public void Said(int status, object body, bool hosted)
        {
            string msg = "npcmind answered " + status + " " + Errors.ReadError(body).Code + ": " + Errors.ErrorLine(body, "");
            if (status == 401 && !hosted) msg += " (the service runs the hosted profile: give DecideClient its apiKey)";
            say(status + ":" + Number.Replace(msg, "#"), msg, true);
        }

        /// <summary>How long a 429 or 5xx asks us to wait (its Retry-After in seconds), in ms; else a second.</summary>
        public static double RetryAfterMs(IDictionary<string, string> headers)
        {
            string retry;
            if (headers != null && headers.TryGetValue("retry-after", out retry) && retry != null
                && Regex.IsMatch(retry, @"^\d+(\.\d+)?$"))
                return double.Parse(retry, CultureInfo.InvariantCulture) * 1000;
            return 1000;
        }

        /// <summary>The entities of a 422 whose every problem lies in one of the request's entities (their ids in
        /// the request's order), each with why; null when a problem lies in the whole request.</summary>
        public static Dictionary<string, string> RefusedEntities(int status, object body, IList<string> sent)
        {
            var details = status == 422 ? Errors.ReadError(body).Details : new List<Problem>();
            if (details.Count == 0) return null;
            var order = new List<string>();
            var why = new Dictionary<string, List<string>>();
            foreach (var d in details)
            {
                var m = EntityPath.Match(d.Path);
                if (!m.Success) return null;
                int index;
                if (!int.TryParse(m.Groups[1].Value, NumberStyles.None, CultureInfo.InvariantCulture, out index)
                    || index >= sent.Count)
                    return null;
                string id = sent[index];
                List<string> problems;
                if (!why.TryGetValue(id, out problems))
                {
                    why[id] = problems = new List<string>();
                    order.Add(id);
                }
                string rest = d.Path.Substring(m.Length);
                problems.Add((rest != "" ? rest : "entity") + ": " + d.Message);
            }
            var result = new Dictionary<string, string>();
            foreach (var id in order) result[id] = string.Join("; ", why[id].ToArray());
            return result;
        }
    }
}
