// A console game of 20 drones at 60 Hz against a real npcmind service (tests/test_unreal.py runs it; the C# SDK's
// Examples~/Console/Game.cs is its twin): every frame it tracks each drone, asks for its decision with the legal
// actions of that moment, and checks the game's side of the protocol: no action outside the legal ones, no
// decision of an older epoch, none past its expiry. It raises its epoch every 2 s. Phases come on stdin
// ("phase NAME", then "end"); at the end it prints one JSON line: per phase the frames, the AI and native choices,
// the violations and the Tick() times, wall and CPU ("ready" after the first frame). libcurl stands in for FHttpModule.
//   npcmind_game http://127.0.0.1:8080
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <ctime>

#include "CurlSender.h"
#include "NpcMindCore/DecideClient.h"

using namespace npcmind;

namespace {

struct Phase {
    int Frames = 0, Ai = 0, Cached = 0, Native = 0, Local = 0, Illegal = 0, OldEpoch = 0, Expired = 0, LateAi = 0;
    std::vector<double> TickMs, TickCpuMs;  // wall time, and this thread's CPU time (a loaded machine's
                                            // preemptions are in the first, not in the second)
    std::chrono::steady_clock::time_point Since = std::chrono::steady_clock::now();
};

double ThreadCpuMs() {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) / 1e6;
}

Value Figures(std::vector<double> ms) {
    std::sort(ms.begin(), ms.end());
    auto at = [&](double q) { return ms.empty() ? 0.0 : ms[std::min(ms.size() - 1, static_cast<size_t>(q * ms.size()))]; };
    Value v = Value::MakeObject();
    v.Set("p50", at(0.5));
    v.Set("p99", at(0.99));
    v.Set("max", ms.empty() ? 0.0 : ms.back());
    return v;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: npcmind_game SERVICE_URL\n");
        return 2;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    auto start = std::chrono::steady_clock::now();
    auto clock = [start] {
        return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    };
    SchedulerOptions options;
    options.ClientId = "cpp-game";
    options.FetchPolicy = false;
    options.Log = [](const std::string& m) { std::fprintf(stderr, "npcmind: %s\n", m.c_str()); };
    CurlSender http;
    DecideClient client(argv[1], options, http, clock);
    std::map<std::string, Phase> phases;
    std::vector<std::string> order{"start"};
    std::string current = "start";
    phases[current];
    std::mutex gate;
    std::vector<std::string> commands;
    std::thread reader([&] {
        std::string line;
        while (std::getline(std::cin, line)) {
            std::lock_guard<std::mutex> lock(gate);
            commands.push_back(line);
        }
        std::lock_guard<std::mutex> lock(gate);
        commands.push_back("end");
    });
    reader.detach();
    const std::vector<std::string> actions{"patrol", "chase", "recharge", "hold"};
    std::map<std::string, int> seenIn;  // a decision (by its id) -> the epoch it was first used in
    std::mt19937 rng(7);
    double nextEpoch = 2000;
    for (int frame = 0;; frame++) {
        std::string command;
        {
            std::lock_guard<std::mutex> lock(gate);
            if (!commands.empty()) {
                command = commands.front();
                commands.erase(commands.begin());
            }
        }
        if (command == "end") break;
        if (command.rfind("phase ", 0) == 0) {
            current = command.substr(6);
            phases[current] = Phase();
            order.push_back(current);
            std::fprintf(stderr, "phase %s\n", current.c_str());
        }
        Phase& p = phases[current];
        double frameStart = clock();
        if (frameStart >= nextEpoch) {
            client.SetEpoch(client.Epoch() + 1);
            nextEpoch += 2000;
        }
        for (int i = 0; i < 20; i++) {
            std::string id = "drone-" + std::to_string(i);
            std::vector<std::string> legal;  // the legal actions change as the game goes
            for (int k = 0; k < 4; k++)
                if (k != (frame / 30 + i) % 6) legal.push_back(actions[k]);
            Value obs = Value::MakeObject();
            obs.Set("battery", static_cast<double>((frame + i * 37) % 100) / 100);
            obs.Set("sees_intruder", (frame / 45 + i) % 3 == 0);
            obs.Set("heat", frame / 30);  // a new situation every half second: not the service's cache
            client.Track(id, "drone", obs, legal);
            std::vector<std::string> now;  // those of this very moment: a subset again
            for (const auto& a : legal)
                if (rng() % 8 != 0) now.push_back(a);
            double before = clock();
            auto choice = client.Action(id, &now);
            if (!choice) {
                p.Native++;
                continue;
            }
            if (std::find(now.begin(), now.end(), choice->Action) == now.end()) p.Illegal++;
            if (choice->ExpiresAt <= before) p.Expired++;
            if (choice->Source == "local") {
                p.Local++;
                continue;
            }
            p.Ai++;
            double since = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - p.Since).count();
            if (choice->Cached) p.Cached++;
            else if (since > 2000) p.LateAi++;
            auto first = seenIn.emplace(choice->DecisionId.value_or(""), client.Epoch());
            if (!first.second && first.first->second != client.Epoch()) p.OldEpoch++;
        }
        auto t0 = std::chrono::steady_clock::now();
        double cpu0 = ThreadCpuMs();
        client.Tick();
        p.TickCpuMs.push_back(ThreadCpuMs() - cpu0);
        p.TickMs.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
        if (frame == 0) {
            std::printf("ready\n");
            std::fflush(stdout);
        }
        p.Frames++;
        double wait = frameStart + 1000.0 / 60 - clock();
        if (wait > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(wait));
    }
    Value out = Value::MakeObject();
    for (const auto& name : order) {
        const Phase& p = phases[name];
        Value v = Value::MakeObject();
        v.Set("frames", p.Frames);
        v.Set("ai", p.Ai);
        v.Set("cached", p.Cached);
        v.Set("native", p.Native);
        v.Set("local", p.Local);
        v.Set("late_ai", p.LateAi);
        v.Set("illegal", p.Illegal);
        v.Set("old_epoch", p.OldEpoch);
        v.Set("expired", p.Expired);
        v.Set("tick_ms", Figures(p.TickMs));
        v.Set("tick_cpu_ms", Figures(p.TickCpuMs));
        out.Set(name, v);
    }
    const Stats& s = client.Counters();
    Value stats = Value::MakeObject();
    stats.Set("requests", s.Requests);
    stats.Set("ai", s.Ai);
    stats.Set("errors", s.Errors);
    stats.Set("illegal", s.Illegal);
    stats.Set("dropped_epoch", s.DroppedEpoch);
    Value fallbacks = Value::MakeObject();
    for (const auto& kv : s.Fallbacks) fallbacks.Set(kv.first, kv.second);
    stats.Set("fallbacks", fallbacks);
    stats.Set("streamed_decisions", s.StreamedDecisions);
    stats.Set("streams_cut", s.StreamsCut);
    out.Set("stats", stats);
    out.Set("epoch", client.Epoch());
    std::printf("%s\n", Json::Show(out).c_str());
    std::fflush(stdout);
    std::_Exit(0);  // the stdin reader may still be blocked on its read
}
