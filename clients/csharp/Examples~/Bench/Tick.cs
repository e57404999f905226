// tick() with 1,000 tracked entities, on the game loop's thread, in the shape bench/tick_bench.py prints (the
// TypeScript bench's twin, clients/typescript/bench/tick.mjs):
// steady: a tick with nothing due (every entity decided, no refresh, no telemetry yet): what every frame costs;
//         DecideClient.Tick() itself, its sender a stub that answers at once (the network is not timed).
// wave:   a tick where every entity is due at once (a new epoch): the scheduler sorts the 1,000, picks 64 (4
//         requests in flight of 16) and builds and encodes those requests (after 100 waves unmeasured: the JIT
//         compiles the hot paths first, as in a game's first seconds).
// Run: clients/csharp/Build~/build.sh build && mono clients/csharp/Build~/out/NpcMindTickBench.exe [--ticks 5000]

using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Linq;
using System.Text;
using NpcMind;

public static class TickBench
{
    const int N = 1000;
    static readonly Dictionary<string, object> Obs = new Dictionary<string, object>
    {
        { "hp_fraction", 0.5 }, { "distance_to_player", 40.0 }, { "sees_player", true }, { "current_action", "wander" },
    };
    static readonly List<string> Legal = new List<string> { "idle", "wander", "chase", "flee" };
    const string Manifest = "{\"types\":{\"bee\":{\"refresh_ms\":4000,\"ttl_ms\":12000}}}";

    /// <summary>A sender that answers every decide request at once with an AI decision for each entity.</summary>
    sealed class Answering : IHttpSender
    {
        public void Send(HttpCall call, Action<HttpResult> done)
        {
            var body = call.Body == null ? null : Json.Parse(Encoding.UTF8.GetString(call.Body));
            var decisions = new List<object>();
            var entities = Json.Get(body, "world") != null ? Json.Get(body, "entities") as IList<object> : null;
            foreach (var e in entities ?? new List<object>())
                decisions.Add(new Dictionary<string, object>
                {
                    { "source", "AI" }, { "id", Json.Get(e, "id") }, { "action", "flee" }, { "label", "Flee" },
                    { "confidence", 0.9 }, { "ttl_ms", 12000 }, { "decision_id", "d-" + Json.Get(e, "id") }, { "cached", false },
                });
            var answer = new Dictionary<string, object> { { "a2g", "0.1" }, { "epoch", 0 }, { "latency_ms", 1 }, { "decisions", decisions } };
            done(new HttpResult { Status = 200, Body = Encoding.UTF8.GetBytes(Json.Write(answer)) });
        }

        public void CancelAll() { }
    }

    static double[] Percentiles(List<double> samples)
    {
        var s = samples.OrderBy(x => x).ToList();
        double p50 = s.Count % 2 == 1 ? s[s.Count / 2] : (s[s.Count / 2 - 1] + s[s.Count / 2]) / 2;
        return new[] { p50, s[(int)Math.Floor(s.Count * 0.99) - 1] };
    }

    static SchedulerOptions Options()
    {
        return new SchedulerOptions
        {
            ClientId = "bench", Manifest = Json.AsObject(Json.Parse(Manifest)), TimeoutMs = 60000, Log = m => { },
        };
    }

    static double[] Steady(int ticks)
    {
        double now = 0;
        var c = new DecideClient("http://127.0.0.1:9", "bench",
            new DecideClientOptions { Http = new Answering(), Clock = () => now, Scheduler = Options() });
        for (int i = 0; i < N; i++) c.Track("e" + i, "bee", Obs, Legal, new TrackOptions { Position = new List<double> { i, 0 } });
        for (int k = 0; k < 1000 && c.Stats.Ai < N; k++) c.Tick();
        c.Tick(); // the last answers applied
        if (c.Stats.Ai < N) throw new Exception("not every entity decided: " + c.Stats.Ai);
        now = 100; // within the refresh and the telemetry period: nothing due
        var times = new List<double>();
        for (int i = 0; i < ticks; i++)
        {
            var t = Stopwatch.StartNew();
            c.Tick();
            times.Add(t.Elapsed.TotalMilliseconds);
        }
        if (c.Stats.Requests != (N + 15) / 16) throw new Exception("the steady state sent a request (" + c.Stats.Requests + ")");
        c.Close();
        return Percentiles(times);
    }

    static double[] Wave(int ticks)
    {
        var s = new Scheduler(Options());
        for (int i = 0; i < N; i++) s.Roster.Track("e" + i, "bee", Obs, Legal, new TrackOptions { Position = new List<double> { i, 0 } }, 0);
        var times = new List<double>();
        var empty = Json.Parse("{\"a2g\":\"0.1\",\"epoch\":0,\"latency_ms\":1,\"decisions\":[]}");
        const int warm = 100;
        for (int k = 0; k < warm + Math.Max(ticks / 10, 50); k++)
        {
            double now = 5000 + k;
            s.Roster.SetEpoch(k + 1, now); // every entity due now
            var t = Stopwatch.StartNew();
            var sent = s.Tick(now); // built and encoded (JSON text) in the tick
            if (k >= warm) times.Add(t.Elapsed.TotalMilliseconds);
            foreach (var r in sent) s.Answer(r.Ref, 200, empty, null, now);
        }
        return Percentiles(times);
    }

    public static int Main(string[] args)
    {
        int at = Array.IndexOf(args, "--ticks");
        int ticks = at >= 0 ? int.Parse(args[at + 1]) : 5000;
        var steady = Steady(ticks);
        var wave = Wave(ticks);
        Console.WriteLine(Json.Write(new Dictionary<string, object>
        {
            { "lang", "csharp" }, { "entities", N }, { "steady_p50_ms", steady[0] }, { "steady_p99_ms", steady[1] },
            { "wave_p50_ms", wave[0] }, { "wave_p99_ms", wave[1] },
        }));
        return 0;
    }
}
