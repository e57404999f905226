// Decide answers and stream lines, checked field by field.
#include "NpcMindCore/Answer.h"

#include "NpcMindCore/Limits.h"

namespace npcmind {

namespace {
bool Code(const std::string& c) {
    return c == "budget" || c == "busy" || c == "invalid_choice" || c == "refused" || c == "unavailable";
}
bool Fail(std::string& problem, const std::string& what) {
    problem = what;
    return false;
}
}  // namespace

bool Answer::ReadDecision(const Value& o, const std::string& at, Decision& x, std::string& problem) {
    problem.clear();
    if (!o.IsObject()) return Fail(problem, at + ": not an object");
    const Value& source = o["source"];
    if (source.IsString() && source.AsString() == "AI") {
        if (!o["id"].IsString()) return Fail(problem, at + ".id: must be a string");
        if (!o["action"].IsString()) return Fail(problem, at + ".action: must be a string");
        if (!o["label"].IsString()) return Fail(problem, at + ".label: must be a string");
        if (!o["ttl_ms"].IsNumber()) return Fail(problem, at + ".ttl_ms: must be a number");
        if (!o["decision_id"].IsString()) return Fail(problem, at + ".decision_id: must be a string");
        if (!o["cached"].IsBool()) return Fail(problem, at + ".cached: must be a boolean");
        const Value& c = o["confidence"];
        if (!c.IsNull() && !c.IsNumber()) return Fail(problem, at + ".confidence: must be a number");
        x = Decision();
        x.Source = "AI";
        x.Id = o["id"].AsString();
        x.Action = o["action"].AsString();
        x.Label = o["label"].AsString();
        x.TtlMs = o["ttl_ms"].AsNumber();
        x.DecisionId = o["decision_id"].AsString();
        x.Cached = o["cached"].AsBool();
        if (c.IsNumber()) x.Confidence = c.AsNumber();
        return true;
    }
    if (source.IsString() && source.AsString() == "FALLBACK") {
        if (!o["id"].IsString()) return Fail(problem, at + ".id: must be a string");
        if (!o["code"].IsString() || !Code(o["code"].AsString())) return Fail(problem, at + ".code: not a known fallback code");
        if (!o["reason"].IsString()) return Fail(problem, at + ".reason: must be a string");
        x = Decision();
        x.Source = "FALLBACK";
        x.Id = o["id"].AsString();
        x.Code = o["code"].AsString();
        x.Reason = o["reason"].AsString();
        return true;
    }
    return Fail(problem, at + ".source: must be AI or FALLBACK");
}

StreamLine Answer::ReadStreamLine(const std::string& line) {
    StreamLine out;
    Parsed p = Json::Parse(line, Limits::MaxStreamBytes);
    if (!p.Ok()) {
        out.Problem = "a line is not JSON (" + p.error + "): " + Json::Quote(line.substr(0, 60));
        return out;
    }
    const Value& o = p.value;
    if (o.IsObject() && !o.Has("source") && o.Has("a2g")) {
        if (!o["a2g"].IsString()) out.Problem = "$.a2g: must be a string";
        else if (!o["latency_ms"].IsInteger()) out.Problem = "$.latency_ms: must be an integer";
        else if (!o["epoch"].IsInteger()) out.Problem = "$.epoch: must be an integer";
        else {
            out.Is = StreamLine::Kind::End;
            out.Epoch = o["epoch"].AsNumber();
        }
        return out;
    }
    if (ReadDecision(o, "$", out.Got, out.Problem)) out.Is = StreamLine::Kind::Decision;
    return out;
}

bool Answer::ReadDecideResponse(const Value& body, DecideResponse& r, std::string& problem) {
    if (!body.IsObject()) return Fail(problem, "not a JSON object");
    if (!body["epoch"].IsNumber()) return Fail(problem, "epoch: must be a number");
    if (!body["decisions"].IsArray()) return Fail(problem, "decisions: must be an array");
    r = DecideResponse();
    r.Epoch = body["epoch"].AsNumber();
    const Array& all = body["decisions"].Items();
    for (size_t i = 0; i < all.size(); i++) {
        Decision d;
        if (!ReadDecision(all[i], "decisions[" + std::to_string(i) + "]", d, problem)) return false;
        r.Decisions.push_back(std::move(d));
    }
    return true;
}

}  // namespace npcmind
