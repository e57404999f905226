// Two checks of DecideClient over HttpClient against a real service on the forest manifest, run by
// tests/test_csharp.py (the TypeScript SDK's decide tests of the same name are their twins). Prints one JSON line.
//   mono NpcMindProbe.exe URL hosted CLIENT_ID API_KEY   a hosted game opens a session with its key and decides
//   mono NpcMindProbe.exe URL policy CLIENT_ID           the service's distilled policy is fetched and decides here

using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Linq;
using System.Threading;
using NpcMind;

public static class Probe
{
    static readonly List<string> Legal = new List<string> { "idle", "wander", "chase", "flee" };

    static Dictionary<string, object> Bee(double hp)
    {
        return new Dictionary<string, object>
        {
            { "hp_fraction", hp }, { "distance_to_player", 90 }, { "sees_player", true }, { "current_action", "chase" },
        };
    }

    /// <summary>The sender every check goes through, noting each request's method and path.</summary>
    sealed class Spy : IHttpSender
    {
        public readonly List<string> Seen = new List<string>();
        readonly HttpClientSender inner = new HttpClientSender();

        public void Send(HttpCall call, Action<HttpResult> done)
        {
            lock (Seen) Seen.Add(call.Method + " " + new Uri(call.Url).AbsolutePath);
            inner.Send(call, done);
        }

        public void CancelAll() { inner.CancelAll(); }
    }

    static DecideClientOptions Options(IHttpSender http, Func<double> clock, NpcMindLog log, string apiKey = null)
    {
        var o = new DecideClientOptions { Http = http, Clock = clock };
        o.Scheduler.World = new Dictionary<string, object> { { "player_hp_fraction", 0.4 }, { "repellent", false } };
        o.Scheduler.ApiKey = apiKey;
        o.Scheduler.Log = log;
        return o;
    }

    /// <summary>Tick at about 60 Hz until <paramref name="done"/> holds (false after 20 s).</summary>
    static bool Until(Func<bool> done, DecideClient c)
    {
        var watch = Stopwatch.StartNew();
        while (!done())
        {
            if (watch.Elapsed.TotalSeconds > 20) return false;
            c.Tick();
            Thread.Sleep(16);
        }
        return true;
    }

    public static int Main(string[] args)
    {
        var watch = Stopwatch.StartNew();
        Func<double> real = () => watch.Elapsed.TotalMilliseconds;
        var output = new Dictionary<string, object>();
        var said = new List<string>();
        NpcMindLog log = m => { lock (said) said.Add(m); };
        if (args[1] == "hosted")
        {
            var spy = new Spy();
            var c = new DecideClient(args[0], args[2], Options(spy, real, log, args[3]));
            c.Track("b7", "bee", Bee(0.5), Legal);
            output["decided"] = Until(() => c.Stats.Ai >= 1, c);
            var choice = c.Action("b7");
            output["source"] = choice == null ? null : Wire.Text(choice.Source);
            lock (spy.Seen) output["seen"] = spy.Seen.Distinct().ToList();
            output["first"] = spy.Seen.FirstOrDefault();
            c.Close();
            var quiet = new DecideClient(args[0], args[2], Options(new HttpClientSender(), real, log, "not-a-key"));
            quiet.Track("b8", "bee", Bee(0.5), Legal);
            output["refused_said"] = Until(() => { lock (said) return said.Any(m => m.Contains("did not open a session")); }, quiet);
            output["refused_action"] = quiet.Action("b8") == null ? null : quiet.Action("b8").Action;
            quiet.Close();
        }
        else
        {
            double t = 0;
            var c = new DecideClient(args[0], args[2], Options(new HttpClientSender(), () => t, log));
            c.Track("p1", "bee", Bee(0.1), Legal); // the forest policy: flee, at 0.99
            c.Track("p2", "bee", Bee(0.1), Legal);
            output["fetched"] = Until(() => c.ServicePolicy != null && c.Stats.Ai == 2, c);
            var first = c.Action("p1");
            output["before"] = first == null ? null : Wire.Text(first.Source); // asked before the policy came
            int asked = c.Stats.Asked;
            t += 4100; // the forest's refresh_ms: both due again, and the policy is sure of them
            c.Tick();
            var after = new List<object>();
            foreach (var id in new[] { "p1", "p2" })
            {
                var got = c.Action(id);
                after.Add(got == null ? null : new Dictionary<string, object>
                {
                    { "source", Wire.Text(got.Source) }, { "action", got.Action }, { "confidence", got.Confidence },
                    { "decision_id", got.DecisionId },
                });
            }
            output["after"] = after;
            output["local"] = c.Stats.Local;
            output["asked_more"] = c.Stats.Asked - asked;
            c.Close();
        }
        lock (said) output["said"] = said.ToList();
        Console.WriteLine(Json.Write(output));
        return 0;
    }
}
