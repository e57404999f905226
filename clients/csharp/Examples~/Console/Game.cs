// A console game of 20 drones at 60 Hz against a real npcmind service (tests/test_csharp.py runs it): every frame
// it tracks each drone, asks for its decision with the legal actions of that moment, and checks the game's side of
// the protocol: no action outside the legal ones, no decision of an older epoch, none past its expiry. It raises
// its epoch every 2 s. Phases come on stdin ("phase NAME", then "end"); at the end it prints one JSON line: per
// phase the frames, the AI and native choices, the violations, and the Tick() times ("ready" after the first frame).
// With policy-every-ms=N it also fetches the service's policy every N ms (bench/amplify/sdk_csharp.py --tick: a
// hostile server's policy must not hold a frame).
//   mono NpcMindGame.exe http://127.0.0.1:8080 [policy-every-ms=N]

using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Linq;
using System.Threading;
using NpcMind;

public static class Game
{
    private static readonly string[] Actions = { "patrol", "chase", "recharge", "hold" };

    private sealed class Phase
    {
        public int Frames, Ai, Cached, Native, Local, Illegal, OldEpoch, Expired, LateAi, Thrown;
        public bool ServicePolicy; // the service's policy was in use at some frame of the phase
        public List<double> TickMs = new List<double>();
        public Stopwatch Since = Stopwatch.StartNew();
    }

    public static int Main(string[] args)
    {
        var watch = Stopwatch.StartNew();
        Func<double> clock = () => watch.Elapsed.TotalMilliseconds;
        var options = new DecideClientOptions { Clock = clock };
        options.Scheduler.Log = m => Console.Error.WriteLine("npcmind: " + m);
        options.Scheduler.FetchPolicy = false;
        foreach (var arg in args.Skip(1))
            if (arg.StartsWith("policy-every-ms=", StringComparison.Ordinal))
            {
                options.Scheduler.FetchPolicy = true;
                options.Scheduler.PolicyRefreshMs = double.Parse(arg.Substring(16), System.Globalization.CultureInfo.InvariantCulture);
            }
        var client = new DecideClient(args[0], "csharp-game", options);
        var phases = new Dictionary<string, Phase>();
        var order = new List<string>();
        string current = "start";
        phases[current] = new Phase();
        order.Add(current);
        var commands = new Queue<string>();
        var reader = new Thread(() =>
        {
            string line;
            while ((line = Console.In.ReadLine()) != null) lock (commands) commands.Enqueue(line.Trim());
            lock (commands) commands.Enqueue("end");
        }) { IsBackground = true };
        reader.Start();
        var seenIn = new Dictionary<Choice, int>(); // a decision applied (its own object) -> the epoch it was first used in
        int frame = 0;
        double nextEpoch = 2000;
        var rng = new Random(7);
        while (true)
        {
            string command = null;
            lock (commands) if (commands.Count > 0) command = commands.Dequeue();
            if (command == "end") break;
            if (command != null && command.StartsWith("phase "))
            {
                current = command.Substring(6);
                phases[current] = new Phase();
                order.Add(current);
                Console.Error.WriteLine("phase " + current);
            }
            var p = phases[current];
            double frameStart = clock();
            if (frameStart >= nextEpoch)
            {
                client.Epoch = client.Epoch + 1;
                nextEpoch += 2000;
            }
            for (int i = 0; i < 20; i++)
            {
                string id = "drone-" + i;
                // the legal actions change as the game goes; those of this very moment are a subset again
                var legal = Actions.Where((a, k) => k != (frame / 30 + i) % 6).ToList();
                var obs = new Dictionary<string, object>
                {
                    { "battery", (double)((frame + i * 37) % 100) / 100 },
                    { "sees_intruder", (frame / 45 + i) % 3 == 0 },
                    { "heat", frame / 30 }, // a new situation every half second: not the service's cache
                };
                client.Track(id, "drone", obs, legal);
                var now = legal.Where(a => rng.Next(8) != 0).ToList();
                Choice choice;
                double before = clock(); // Action reads the clock after this: a decision it gives lives past it
                try
                {
                    choice = client.Action(id, now);
                }
                catch (Exception e)
                {
                    p.Thrown++;
                    Console.Error.WriteLine(e);
                    continue;
                }
                if (choice == null)
                {
                    p.Native++;
                    continue;
                }
                if (!now.Contains(choice.Action)) p.Illegal++;
                if (choice.ExpiresAt <= before) p.Expired++;
                if (choice.Source == ChoiceSource.Local) p.Local++;
                else
                {
                    p.Ai++;
                    if (choice.Cached) p.Cached++;
                    else if (p.Since.ElapsedMilliseconds > 2000) p.LateAi++;
                    int first;
                    if (!seenIn.TryGetValue(choice, out first)) seenIn[choice] = client.Epoch;
                    else if (first != client.Epoch) p.OldEpoch++;
                }
            }
            var t = Stopwatch.StartNew();
            try
            {
                client.Tick();
            }
            catch (Exception e)
            {
                p.Thrown++;
                Console.Error.WriteLine(e);
            }
            p.TickMs.Add(t.Elapsed.TotalMilliseconds);
            p.ServicePolicy |= client.ServicePolicy != null;
            if (frame == 0) Console.WriteLine("ready"); // the first frame ran: the phases may begin
            p.Frames++;
            frame++;
            double wait = frameStart + 1000.0 / 60 - clock();
            if (wait > 0) Thread.Sleep(TimeSpan.FromMilliseconds(wait));
        }
        var output = new Dictionary<string, object>();
        foreach (var name in order)
        {
            var p = phases[name];
            var sorted = p.TickMs.OrderBy(x => x).ToList();
            Func<double, double> at = q => sorted.Count == 0 ? 0 : sorted[Math.Min(sorted.Count - 1, (int)(q * sorted.Count))];
            output[name] = new Dictionary<string, object>
            {
                { "frames", p.Frames }, { "ai", p.Ai }, { "cached", p.Cached }, { "native", p.Native },
                { "local", p.Local }, { "late_ai", p.LateAi }, { "illegal", p.Illegal }, { "old_epoch", p.OldEpoch },
                { "expired", p.Expired }, { "thrown", p.Thrown }, { "service_policy", p.ServicePolicy },
                { "tick_ms", new Dictionary<string, object> { { "p50", at(0.5) }, { "p99", at(0.99) }, { "max", sorted.LastOrDefault() } } },
            };
        }
        var s = client.Stats;
        output["stats"] = new Dictionary<string, object>
        {
            { "requests", s.Requests }, { "ai", s.Ai }, { "errors", s.Errors }, { "illegal", s.Illegal },
            { "dropped_epoch", s.DroppedEpoch }, { "fallbacks", s.Fallbacks.ToDictionary(kv => Wire.Text(kv.Key), kv => (object)kv.Value) },
            { "streamed_decisions", s.StreamedDecisions }, { "streams_cut", s.StreamsCut },
        };
        output["epoch"] = client.Epoch;
        client.Close();
        Console.WriteLine(Json.Write(output));
        return 0;
    }
}
