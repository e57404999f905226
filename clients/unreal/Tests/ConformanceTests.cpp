// Runs every conformance case of clients/conformance/ against the C++ scheduler: the same files the Python,
// TypeScript and C# SDKs run, step by step as clients/csharp/Tests/ConformanceTests.cs does, so the four cannot
// drift. Each case that fails is named with its first differing step.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <dirent.h>
#include <set>

#include "Cases.h"
#include "NpcMindCore/Scheduler.h"

using namespace npcmind;

namespace {

std::vector<std::string> CaseFiles() {
    std::string folder = cases::Repo() + "/clients/conformance";
    std::vector<std::string> files;
    if (DIR* d = opendir(folder.c_str())) {
        while (dirent* e = readdir(d)) {
            std::string name = e->d_name;
            if (name.size() > 5 && name.substr(name.size() - 5) == ".json") files.push_back(folder + "/" + name);
        }
        closedir(d);
    }
    std::sort(files.begin(), files.end());
    return files;
}

std::optional<double> Num(const Value& v) {
    if (v.IsNumber()) return v.AsNumber();
    return std::nullopt;
}

/// The game's own policy a case gives: a function of the entity's id, or a distilled policy file.
LocalPolicy Local(const Value& c) {
    LocalPolicy local;
    if (c.Has("policy_file")) {
        std::string error;
        local.File = Policy::Load(c["policy_file"], error);
        return local;
    }
    if (!c["policy"].IsObject()) return local;
    Value table = c["policy"];
    local.Function = [table](const Entity& e) -> std::optional<PolicyChoice> {
        const Value& pair = table[e.Id];
        if (!pair.IsArray()) return PolicyChoice{"", 0};
        return PolicyChoice{pair.Items()[0].AsString(), pair.Items()[1].AsNumber()};
    };
    return local;
}

SchedulerOptions Options(const Value& c) {
    const Value& o = c["options"];
    SchedulerOptions options;
    if (o["client_id"].IsString()) options.ClientId = o["client_id"].AsString();
    options.Epoch = static_cast<int>(o["epoch"].AsNumber());
    options.World = o["world"];
    if (o["scope"].IsString()) options.Scope = o["scope"].AsString();
    options.ScopeState = o["scope_state"];
    options.ApiKey = o["api_key"].AsString();
    options.RefreshMs = Num(o["refresh_ms"]);
    if (o["event_window_ms"].IsNumber()) options.EventWindowMs = o["event_window_ms"].AsNumber();
    if (o["telemetry_ms"].IsNumber()) options.TelemetryMs = o["telemetry_ms"].AsNumber();
    if (o["threshold"].IsNumber()) options.Threshold = o["threshold"].AsNumber();
    if (o["workers"].IsNumber()) options.MaxInFlight = static_cast<int>(o["workers"].AsNumber());
    if (o["timeout_s"].IsNumber()) options.TimeoutMs = o["timeout_s"].AsNumber() * 1000;
    options.Manifest = c["manifest"];
    options.ManifestVersion = c["manifest_version"].AsString();
    if (o["fetch_policy"].IsBool()) options.FetchPolicy = o["fetch_policy"].AsBool();
    if (o["policy_refresh_ms"].IsNumber()) options.PolicyRefreshMs = o["policy_refresh_ms"].AsNumber();
    options.Policy = Local(c);
    if (o["stream"].IsBool()) options.Stream = o["stream"].AsBool();
    options.Log = [](const std::string&) {};
    return options;
}

Value ChoiceJson(const std::optional<Choice>& c) {
    if (!c) return Value();
    Value v = Value::MakeObject();
    v.Set("action", c->Action);
    v.Set("source", c->Source);
    v.Set("confidence", c->Confidence ? Value(*c->Confidence) : Value());
    v.Set("cached", c->Cached);
    v.Set("decision_id", c->DecisionId ? Value(*c->DecisionId) : Value());
    v.Set("label", c->Label ? Value(*c->Label) : Value());
    v.Set("expires_at_ms", c->ExpiresAt);
    return v;
}

Value RequestJson(const OutRequest& r) {
    Value v = Value::MakeObject();
    v.Set("ref", r.Ref);
    v.Set("method", r.Method);
    v.Set("path", r.Path);
    Value headers = Value::MakeObject();
    for (const auto& h : r.Headers) headers.Set(h.first, h.second);
    v.Set("headers", headers);
    v.Set("after", Value::Strings(r.After));
    v.Set("body", r.Json.empty() ? Value() : Json::Parse(r.Json).value);
    v.Set("stream", r.Stream);
    return v;
}

Value StatsJson(const Stats& s) {
    Value v = Value::MakeObject();
    v.Set("requests", s.Requests);
    v.Set("asked", s.Asked);
    v.Set("ai", s.Ai);
    v.Set("cached", s.Cached);
    v.Set("local", s.Local);
    Value fallbacks = Value::MakeObject();
    for (const auto& kv : s.Fallbacks) fallbacks.Set(kv.first, kv.second);
    v.Set("fallbacks", fallbacks);
    v.Set("dropped_epoch", s.DroppedEpoch);
    v.Set("illegal", s.Illegal);
    v.Set("errors", s.Errors);
    v.Set("reports_sent", s.ReportsSent);
    v.Set("refused", s.Refused);
    v.Set("streamed_decisions", s.StreamedDecisions);
    v.Set("streamed_ms_total", s.StreamedMsTotal);
    v.Set("streams_cut", s.StreamsCut);
    return v;
}

std::vector<std::string> Strings(const Value& v) {
    std::vector<std::string> out;
    for (const auto& s : v.Items()) out.push_back(s.AsString());
    return out;
}

std::optional<std::vector<double>> Position(const Value& v) {
    if (!v.IsArray()) return std::nullopt;
    std::vector<double> out;
    for (const auto& x : v.Items()) out.push_back(x.AsNumber());
    return out;
}

}  // namespace

/// One case, step by step; "" when it passes, else its first step that differs with what was expected and came.
std::string RunCase(const Value& c) {
    Scheduler s(Options(c));
    std::set<std::string> emitted, answered;
    const Array& steps = c["steps"].Items();
    for (size_t i = 0; i < steps.size(); i++) {
        const Value& step = steps[i];
        std::string at = "step " + std::to_string(i) + " (" + step["do"].AsString() + " at " + Json::Show(step["at_ms"]) + " ms)";
        double now = step["at_ms"].AsNumber();
        const Value& args = step["args"];
        std::string what = step["do"].AsString();
        auto expect = [&](const Value& result) -> std::string {
            if (!step.Has("expect")) return "";
            std::string d = cases::Differs(step["expect"], result, "expect");
            return d.empty() ? "" : at + ": " + d;
        };
        auto once = [&](const std::string& ref, bool end) -> std::string {
            if (!emitted.count(ref) || answered.count(ref)) return at + ": " + ref + " was not emitted, or was answered already";
            if (end) answered.insert(ref);
            return "";
        };
        std::string problem;
        if (what == "track") {
            TrackOptions t;
            t.Position = Position(args["position"]);
            if (args["profile"].IsString()) t.Profile = args["profile"].AsString();
            if (args["parent"].IsString()) t.Parent = args["parent"].AsString();
            if (args["state"].IsString()) t.State = args["state"].AsString();
            s.Entities().Track(args["id"].AsString(), args["type"].AsString(), args["observation"],
                               Strings(args["legal_actions"]), t, now);
        } else if (what == "observe") {
            s.Observe(args["id"].AsString(), args["type"].AsString(), args["fields"], Position(args["position"]));
        } else if (what == "untrack") {
            s.Untrack(args["id"].AsString());
        } else if (what == "event") {
            problem = expect(s.Entities().Event(args["id"].AsString(), args["trigger"].AsString(), now));
        } else if (what == "report") {
            problem = expect(s.Report(args["id"].AsString(), args["outcome"].AsString(), args["detail"].AsString()));
        } else if (what == "set_epoch") {
            s.Entities().SetEpoch(static_cast<int>(args["epoch"].AsNumber()), now);
        } else if (what == "set_scene") {
            s.SetScene(args["scene"].AsString());
        } else if (what == "set_scope") {  // what a game does through DecideClient::Core()
            if (args["scope"].IsString()) s.Scope = args["scope"].AsString();
            else s.Scope.reset();
            s.ScopeState = args["scope_state"];
        } else if (what == "set_threshold") {
            s.Entities().Threshold = args["threshold"].AsNumber();
        } else if (what == "tick") {
            auto made = s.Tick(now);
            Value got = Value::MakeArray();
            for (const auto& r : made) {
                emitted.insert(r.Ref);
                got.Push(RequestJson(r));
            }
            if (step.Has("sent")) {
                const Value& want = step["sent"];
                if (want.Size() != got.Size())
                    problem = at + ": expected " + std::to_string(want.Size()) + " requests, got " + Json::Show(got);
                for (size_t j = 0; problem.empty() && j < want.Size(); j++) {
                    std::string d = cases::Differs(want.Items()[j], got.Items()[j], "sent[" + std::to_string(j) + "]");
                    if (!d.empty()) problem = at + ": " + d + "; sent " + Json::Show(got);
                }
            }
        } else if (what == "answer" || what == "fail") {
            const std::string& ref = step["ref"].AsString();
            problem = once(ref, true);
            if (!problem.empty()) return problem;
            if (what == "fail") {
                s.Fail(ref, step["kind"].AsString() == "timeout" ? FailKind::Timeout : FailKind::Unreachable, now);
            } else {
                Headers headers;
                for (const auto& h : step["headers"].Members()) headers.emplace_back(h.key, h.value.AsString());
                s.Answer(ref, static_cast<int>(step["status"].AsNumber()), step["body"], headers, now);
            }
        } else if (what == "chunk") {
            problem = once(step["ref"].AsString(), false);
            if (problem.empty()) s.Chunk(step["ref"].AsString(), step["text"].AsString(), now);
        } else if (what == "end") {
            problem = once(step["ref"].AsString(), true);
            if (problem.empty()) s.End(step["ref"].AsString(), now);
        } else if (what == "action") {
            std::vector<std::string> legalNow = Strings(args["legal_now"]);
            problem = expect(ChoiceJson(s.Entities().Action(args["id"].AsString(),
                                                            args["legal_now"].IsArray() ? &legalNow : nullptr, now)));
        } else if (what == "stats") {
            problem = expect(StatsJson(s.Counters));
        } else if (what == "timeout_s") {
            problem = expect(s.TimeoutMs() / 1000);
        } else {
            problem = at + ": unknown step " + Json::Show(step["do"]);
        }
        if (!problem.empty()) return problem;
    }
    return "";
}

TEST_CASE("every conformance case of clients/conformance passes") {
    int run = 0, failed = 0;
    for (const auto& path : CaseFiles()) {
        Value data = cases::Read(path);
        Array list = data.IsArray() ? data.Items() : Array{data};
        std::string file = path.substr(path.rfind('/') + 1);
        for (const auto& c : list) {
            run++;
            std::string why = RunCase(c);
            if (!why.empty()) failed++;
            CHECK_MESSAGE(why.empty(), ("conformance " + file + ": " + c["name"].AsString() + ": " + why));
        }
    }
    std::printf("conformance: %d cases run, %d failed\n", run, failed);
    CHECK(run > 0);  // the folder was found and read
}
