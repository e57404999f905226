// Tick() with 1,000 tracked entities, in the shape bench/tick_bench.py prints (the C# Examples~/Bench/Tick.cs's
// twin): steady, a tick with nothing due (DecideClient::Tick itself, its sender a stub that answers at the next
// poll); wave, every entity due at once (a new epoch): the scheduler sorts the 1,000, picks 64 (4 requests in
// flight of 16) and builds and writes those requests' JSON.
//   npcmind_tick_bench [--ticks 5000]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "NpcMindCore/DecideClient.h"

using namespace npcmind;

namespace {

const int N = 1000;

/// Answers every decide request with an AI decision for each entity, at the next Poll (as an engine's HTTP would).
class Answering : public IHttpSender {
public:
    void Send(const HttpCall& call, HttpEvents events) override {
        Value body = Json::Parse(call.Body).value;
        Value decisions = Value::MakeArray();
        if (body.Has("world"))
            for (const auto& e : body["entities"].Items()) {
                Value d = Value::MakeObject();
                d.Set("source", "AI");
                d.Set("id", e["id"]);
                d.Set("action", "flee");
                d.Set("label", "Flee");
                d.Set("confidence", 0.9);
                d.Set("ttl_ms", 12000);
                d.Set("decision_id", "d-" + e["id"].AsString());
                d.Set("cached", false);
                decisions.Push(d);
            }
        Value answer = Value::MakeObject();
        answer.Set("a2g", "0.1");
        answer.Set("epoch", 0);
        answer.Set("latency_ms", 1);
        answer.Set("decisions", decisions);
        queued_.emplace_back(std::move(events), Json::Show(answer));
    }
    void Poll() override {
        auto now = std::move(queued_);
        queued_.clear();
        for (auto& q : now) q.first.Done(200, {}, q.second, false, FailKind::Unreachable, "");
    }
    bool Busy() const override { return !queued_.empty(); }

private:
    std::vector<std::pair<HttpEvents, std::string>> queued_;
};

std::pair<double, double> Percentiles(std::vector<double> s) {
    std::sort(s.begin(), s.end());
    double p50 = s.size() % 2 ? s[s.size() / 2] : (s[s.size() / 2 - 1] + s[s.size() / 2]) / 2;
    return {p50, s[static_cast<size_t>(s.size() * 0.99) - 1]};
}

SchedulerOptions Options() {
    SchedulerOptions o;
    o.ClientId = "bench";
    o.Manifest = Json::Parse("{\"types\":{\"bee\":{\"refresh_ms\":4000,\"ttl_ms\":12000}}}").value;
    o.TimeoutMs = 60000;
    o.Stream = false;
    o.Log = [](const std::string&) {};
    return o;
}

Value Observation() {
    Value obs = Value::MakeObject();
    obs.Set("hp_fraction", 0.5);
    obs.Set("distance_to_player", 40.0);
    obs.Set("sees_player", true);
    obs.Set("current_action", "wander");
    return obs;
}

double Ms(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
    int ticks = argc > 2 && std::strcmp(argv[1], "--ticks") == 0 ? std::atoi(argv[2]) : 5000;
    const std::vector<std::string> legal{"idle", "wander", "chase", "flee"};
    Value obs = Observation();
    double now = 0;
    Answering http;
    DecideClient c("http://127.0.0.1:9", Options(), http, [&now] { return now; });
    for (int i = 0; i < N; i++) {
        TrackOptions t;
        t.Position = std::vector<double>{static_cast<double>(i), 0};
        c.Track("e" + std::to_string(i), "bee", obs, legal, t);
    }
    for (int k = 0; k < 1000 && c.Counters().Ai < N; k++) c.Tick();
    c.Tick();
    if (c.Counters().Ai < N) {
        std::fprintf(stderr, "not every entity decided: %d\n", c.Counters().Ai);
        return 1;
    }
    now = 100;  // within the refresh and the telemetry period: nothing due
    std::vector<double> steady;
    for (int i = 0; i < ticks; i++) {
        auto t0 = std::chrono::steady_clock::now();
        c.Tick();
        steady.push_back(Ms(t0));
    }
    if (c.Counters().Requests != (N + 15) / 16) {
        std::fprintf(stderr, "the steady state sent a request\n");
        return 1;
    }
    Scheduler s(Options());
    for (int i = 0; i < N; i++) {
        TrackOptions t;
        t.Position = std::vector<double>{static_cast<double>(i), 0};
        s.Entities().Track("e" + std::to_string(i), "bee", obs, legal, t, 0);
    }
    Value empty = Json::Parse("{\"a2g\":\"0.1\",\"epoch\":0,\"latency_ms\":1,\"decisions\":[]}").value;
    std::vector<double> wave;
    for (int k = 0; k < 100 + std::max(ticks / 10, 50); k++) {
        double at = 5000 + k;
        s.Entities().SetEpoch(k + 1, at);  // every entity due now
        auto t0 = std::chrono::steady_clock::now();
        auto sent = s.Tick(at);  // built and written (JSON text) in the tick
        if (k >= 100) wave.push_back(Ms(t0));
        for (const auto& r : sent) s.Answer(r.Ref, 200, empty, {}, at);
    }
    auto st = Percentiles(steady), wv = Percentiles(wave);
    std::printf("{\"lang\":\"cpp\",\"entities\":%d,\"steady_p50_ms\":%.6f,\"steady_p99_ms\":%.6f,"
                "\"wave_p50_ms\":%.6f,\"wave_p99_ms\":%.6f}\n", N, st.first, st.second, wv.first, wv.second);
    return 0;
}
