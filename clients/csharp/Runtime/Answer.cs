// Reading a /v1/decide answer: checked against the protocol before anything of it reaches the game.

using System.Collections.Generic;

namespace NpcMind
{
    /// <summary>One decision of an answer: <c>AI</c> (action, label, ttl, ...) or <c>FALLBACK</c> (code,
    /// reason).</summary>
    internal sealed class Decision
    {
        public string Id;
        public string Source;
        public string Action;
        public string Label;
        public double TtlMs;
        public string DecisionId;
        public bool Cached;
        public double? Confidence;
        public FallbackCode Code;
        public string Reason;
    }

    /// <summary>The last line of a streamed answer (it has <c>a2g</c>): nothing counts after it.</summary>
    internal sealed class StreamEnd
    {
        public double Epoch;
    }

    /// <summary>A /v1/decide answer that has the protocol's shape.</summary>
    internal sealed class DecideResponse
    {
        public double Epoch;
        public List<Decision> Decisions = new List<Decision>();
    }

    internal static class Answer
    {
        /// <summary>One decision read, or its problem (<paramref name="problem"/> set, null returned). A streamed
        /// answer gives its decisions one at a time: each is read alone, here.</summary>
        public static Decision ReadDecision(object d, string at, out string problem)
        {
            problem = null;
            var o = d as IDictionary<string, object>;
            if (o == null) { problem = at + ": not an object"; return null; }
            object source = Json.Get(o, "source");
            if ("AI".Equals(source))
            {
                var x = new Decision { Source = "AI" };
                if (!(Json.Get(o, "id") is string)) { problem = at + ".id: must be a string"; return null; }
                if (!(Json.Get(o, "action") is string)) { problem = at + ".action: must be a string"; return null; }
                if (!(Json.Get(o, "label") is string)) { problem = at + ".label: must be a string"; return null; }
                if (!Json.IsNumber(Json.Get(o, "ttl_ms"))) { problem = at + ".ttl_ms: must be a number"; return null; }
                if (!(Json.Get(o, "decision_id") is string)) { problem = at + ".decision_id: must be a string"; return null; }
                if (!(Json.Get(o, "cached") is bool)) { problem = at + ".cached: must be a boolean"; return null; }
                object c = Json.Get(o, "confidence");
                // absent or null: no confidence (TypeScript's `undefined` fails `!== null`; the wire always sends it)
                if (c != null && !Json.IsNumber(c)) { problem = at + ".confidence: must be a number"; return null; }
                x.Id = (string)o["id"];
                x.Action = (string)o["action"];
                x.Label = (string)o["label"];
                x.TtlMs = Json.ToDouble(o["ttl_ms"]);
                x.DecisionId = (string)o["decision_id"];
                x.Cached = (bool)o["cached"];
                x.Confidence = c == null ? (double?)null : Json.ToDouble(c);
                return x;
            }
            if ("FALLBACK".Equals(source))
            {
                if (!(Json.Get(o, "id") is string)) { problem = at + ".id: must be a string"; return null; }
                FallbackCode code;
                if (!Wire.TryRead(Json.Get(o, "code") as string, out code))
                {
                    problem = at + ".code: not a known fallback code (" + Wire.Words(typeof(FallbackCode)) + ")";
                    return null;
                }
                string reason = Json.Get(o, "reason") as string;
                if (reason == null) { problem = at + ".reason: must be a string"; return null; }
                return new Decision { Source = "FALLBACK", Id = (string)o["id"], Code = code, Reason = reason };
            }
            problem = at + ".source: must be AI or FALLBACK";
            return null;
        }

        /// <summary>One line of a streamed decide answer: a <see cref="Decision"/> (it has <c>source</c>) or the
        /// <see cref="StreamEnd"/> (it has <c>a2g</c>); null with <paramref name="problem"/> set otherwise.</summary>
        public static object ReadStreamLine(string line, out string problem)
        {
            object d;
            try
            {
                d = Json.Parse(line);
            }
            catch (NpcJsonException e)
            {
                problem = "a line is not JSON (" + e.Message + "): " + Errors.Quote(line.Length > 60 ? line.Substring(0, 60) : line);
                return null;
            }
            var o = d as IDictionary<string, object>;
            if (o != null && !o.ContainsKey("source") && o.ContainsKey("a2g"))
            {
                problem = null;
                if (!(o["a2g"] is string)) problem = "$.a2g: must be a string";
                else if (!(Json.Get(o, "latency_ms") is long)) problem = "$.latency_ms: must be an integer";
                else if (!(Json.Get(o, "epoch") is long)) problem = "$.epoch: must be an integer";
                return problem != null ? null : new StreamEnd { Epoch = (long)o["epoch"] };
            }
            return ReadDecision(d, "$", out problem);
        }

        /// <summary>The answer, or what is wrong with it (not npcmind, or another protocol version: never into the
        /// game).</summary>
        public static DecideResponse ReadDecideResponse(object body, out string problem)
        {
            problem = null;
            if (!(body is IDictionary<string, object>)) { problem = "not a JSON object"; return null; }
            object epoch = Json.Get(body, "epoch");
            if (!Json.IsNumber(epoch)) { problem = "epoch: must be a number"; return null; }
            var decisions = Json.Get(body, "decisions") as IList<object>;
            if (decisions == null) { problem = "decisions: must be an array"; return null; }
            var r = new DecideResponse { Epoch = Json.ToDouble(epoch) };
            for (int i = 0; i < decisions.Count; i++)
            {
                var d = ReadDecision(decisions[i], "decisions[" + i + "]", out problem);
                if (d == null) return null;
                r.Decisions.Add(d);
            }
            return r;
        }
    }
}
