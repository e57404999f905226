// A hosted service's session (no I/O): opened with the api key, renewed at 90% of its life, reopened on a 401.

using System.Collections.Generic;

namespace NpcMind
{
    /// <summary>The session token a hosted client sends, and when to ask for the next one.</summary>
    internal sealed class Session
    {
        /// <summary>A renewal the service refused is tried again after this, with the old token.</summary>
        public const double RenewRetryMs = 30000;

        private string token;
        private double renewAt = double.PositiveInfinity; // on the client's clock
        /// <summary>The ref of the POST /v1/session in flight, if any.</summary>
        public string Pending;
        public readonly string ApiKey;

        public Session(string apiKey) { ApiKey = apiKey; }

        /// <summary>Whether requests may go: a token is held (an old one while it is renewed).</summary>
        public bool Open { get { return token != null; } }

        /// <summary>Whether requests may be made: a token held, or one asked for (they wait for it).</summary>
        public bool Ready { get { return token != null || Pending != null; } }

        /// <summary>The session request the others must wait for: the first one (a renewal goes on with the old
        /// token).</summary>
        public List<string> Awaited()
        {
            return Pending != null && token == null ? new List<string> { Pending } : new List<string>();
        }

        /// <summary>Whether to ask for a session now: none yet, or the token near its expiry.</summary>
        public bool Due(double now)
        {
            return Pending == null && (token == null || now >= renewAt);
        }

        /// <summary>The headers of the session request itself: the api key.</summary>
        public Dictionary<string, string> KeyHeaders()
        {
            return new Dictionary<string, string> { { "authorization", "Bearer " + ApiKey } };
        }

        /// <summary>The headers of every other request; while the first token is asked for, <c>Bearer @ref</c>:
        /// the transport puts in the token the answer to request <c>ref</c> brings.</summary>
        public Dictionary<string, string> Headers()
        {
            var h = new Dictionary<string, string>();
            if (token != null) h["authorization"] = "Bearer " + token;
            else if (Pending != null) h["authorization"] = "Bearer @" + Pending;
            return h;
        }

        /// <summary>The session request's answer; the reason when it was refused, else null.</summary>
        public string Answer(int status, object body, double now)
        {
            Pending = null;
            string t = SessionToken(status, body);
            if (t == null)
            {
                if (token != null) renewAt = now + RenewRetryMs; // a tenth of its life left: go on with it
                return "npcmind did not open a session (POST /v1/session answered " + status + ": "
                    + Errors.ErrorLine(body, "(no session_token)") + ")";
            }
            object ttl = Json.Get(body, "expires_in_s");
            token = t;
            renewAt = Json.IsNumber(ttl) ? now + 0.9 * Json.ToDouble(ttl) * 1000 : double.PositiveInfinity;
            return null;
        }

        /// <summary>The session request got no answer.</summary>
        public void Failed(double now)
        {
            Pending = null;
            if (token != null) renewAt = now + RenewRetryMs;
        }

        /// <summary>The service said the session ended (a 401): a new one before the next request.</summary>
        public void Expire()
        {
            token = null;
            renewAt = double.PositiveInfinity;
        }

        /// <summary>The token a POST /v1/session answer brings, or null: read here alone, by the session and by the
        /// transport (which puts it in the requests made while it was asked for).</summary>
        public static string SessionToken(int status, object body)
        {
            string t = status == 200 ? Json.Get(body, "session_token") as string : null;
            return string.IsNullOrEmpty(t) ? null : t;
        }
    }
}
