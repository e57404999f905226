// Each type's refresh and decision life, from the service's manifest (GET /v1/manifest), and the service's
// provider deadline (GET /v1/health): a client that kept its own would re-ask too often or give up too soon.

using System;
using System.Collections.Generic;

namespace NpcMind
{
    /// <summary>Refresh and ttl per type (ms); the defaults hold until the manifest is known.</summary>
    internal sealed class Timings
    {
        public const double DefaultRefreshMs = 4000;
        public const double DefaultTtlMs = 12000;

        private Dictionary<string, double[]> types; // type -> [refresh_ms, ttl_ms]
        private readonly double? refreshMs;
        /// <summary>GET /v1/manifest is out.</summary>
        public bool Asked;

        /// <summary><paramref name="refreshMs"/>: the game's own, over every type's; <paramref name="manifest"/>:
        /// when it is known already.</summary>
        public Timings(double? refreshMs, IDictionary<string, object> manifest)
        {
            this.refreshMs = refreshMs;
            if (manifest != null) Load(manifest);
        }

        /// <summary>Whether a manifest was read.</summary>
        public bool Known { get { return types != null; } }

        /// <summary>The type's refresh and ttl, in ms.</summary>
        public void Of(string type, out double refresh, out double ttl)
        {
            double[] t;
            if (types == null || !types.TryGetValue(type, out t)) t = new[] { DefaultRefreshMs, DefaultTtlMs };
            refresh = refreshMs ?? t[0];
            ttl = t[1];
        }

        /// <summary>Take the answer to GET /v1/manifest; false when it holds none (asked again later). Entities asked
        /// before it came are due again on their type's refresh.</summary>
        public bool Read(int status, object body, IEnumerable<NpcEntity> entities)
        {
            Asked = false;
            var data = status == 200 ? Json.Get(body, "manifest") as IDictionary<string, object> : null;
            if (data == null) return false;
            Load(data);
            foreach (var e in entities)
            {
                double refresh, ttl;
                Of(e.Type, out refresh, out ttl);
                e.Due = Math.Min(e.Due, e.AskedAt + refresh);
            }
            return true;
        }

        private void Load(IDictionary<string, object> data)
        {
            var defaults = Json.Get(data, "defaults") as IDictionary<string, object> ?? new Dictionary<string, object>();
            var all = Json.Get(data, "types") as IDictionary<string, object> ?? new Dictionary<string, object>();
            types = new Dictionary<string, double[]>();
            foreach (var kv in all)
            {
                var one = kv.Value as IDictionary<string, object> ?? new Dictionary<string, object>();
                double refresh = First(Json.Get(one, "refresh_ms"), Json.Get(defaults, "refresh_ms"), DefaultRefreshMs);
                double ttl = First(Json.Get(one, "ttl_ms"), Json.Get(defaults, "ttl_ms"), DefaultTtlMs);
                types[kv.Key] = new[] { refresh, ttl };
            }
        }

        /// <summary>The first of the two that is a number other than 0, else the default (the other SDKs' `||`).</summary>
        private static double First(object a, object b, double otherwise)
        {
            if (Json.IsNumber(a) && Json.ToDouble(a) != 0) return Json.ToDouble(a);
            if (Json.IsNumber(b) && Json.ToDouble(b) != 0) return Json.ToDouble(b);
            return otherwise;
        }

        /// <summary>The service's provider deadline in ms, from a GET /v1/health answer, or null (an older
        /// service).</summary>
        public static double? DeadlineTimeoutMs(int status, object body)
        {
            object deadline = status == 200 ? Json.Get(body, "deadline_ms") : null;
            return Json.IsNumber(deadline) && Json.ToDouble(deadline) > 0 ? Json.ToDouble(deadline) : (double?)null;
        }
    }
}
