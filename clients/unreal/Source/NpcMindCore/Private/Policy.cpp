// The distilled policy: loading with every bound checked, and its evaluation.
#include "NpcMindCore/Policy.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "NpcMindCore/Limits.h"

namespace npcmind {

namespace {

const char* const kSources[] = {"observation", "world", "scope_state", "trigger", "profile", "legal"};
const char* const kEncodings[] = {"number", "boolean", "enum"};

std::string Th(size_t n) { return Limits::Bytes(n); }

/// The loader's state: the first error found (the file is refused with it).
struct Loader {
    std::string error;
    bool Fail(const std::string& e) {
        if (error.empty()) error = e;
        return false;
    }
    bool Num(const Value& v, const std::string& path, double& out) {
        if (!v.IsNumber() || !std::isfinite(v.AsNumber()))
            return Fail("policy file: `" + path + "` must be a finite number");
        out = v.AsNumber();
        return true;
    }
    bool Int(const Value& v, const std::string& path, int& out) {
        double x;
        if (!Num(v, path, x)) return false;
        if (std::floor(x) != x) return Fail("policy file: `" + path + "` must be an integer");
        out = x > 2147483647.0 ? 2147483647 : x < -2147483648.0 ? -2147483647 - 1 : static_cast<int>(x);
        return true;
    }
    bool FeatureOf(const Value& o, const std::string& path, Policy::Feature& f);
    bool TreeOf(const Value& o, const std::string& path, size_t nFeatures, size_t nActions, Policy::Tree& t);
    bool TypeOf(const std::string& name, const Value& o, Policy::TypePolicy& tp);
};

bool OneOf(const Value& v, const char* const* list, size_t n) {
    if (!v.IsString()) return false;
    for (size_t i = 0; i < n; i++)
        if (v.AsString() == list[i]) return true;
    return false;
}

bool Loader::FeatureOf(const Value& o, const std::string& path, Policy::Feature& f) {
    if (!o.IsObject()) return Fail("policy file: `" + path + "` must be an object");
    if (!OneOf(o["source"], kSources, 6))
        return Fail("policy file: `" + path + ".source` must be one of observation, world, scope_state, trigger, profile, legal");
    if (!OneOf(o["encoding"], kEncodings, 3))
        return Fail("policy file: `" + path + ".encoding` must be one of number, boolean, enum");
    f.Source = o["source"].AsString();
    f.Encoding = o["encoding"].AsString();
    f.HasField = o["field"].IsString();
    f.Field = o["field"].AsString();
    if ((f.Source == "observation" || f.Source == "world" || f.Source == "scope_state") && !f.HasField)
        return Fail("policy file: `" + path + ".field` must name a field of the " + f.Source);
    f.HasValue = o["value"].IsString();
    f.Value = o["value"].AsString();
    if (f.Encoding == "enum" && !f.HasValue)
        return Fail("policy file: `" + path + ".value` must be the enum value this feature tests");
    if (!o["quantum"].IsNull()) {
        double q;
        if (!Num(o["quantum"], path + ".quantum", q)) return false;
        if (q <= 0) return Fail("policy file: `" + path + ".quantum` must be above 0");
        f.Quantum = q;
    }
    if (!o["missing"].IsNull() && !Num(o["missing"], path + ".missing", f.Missing)) return false;
    return true;
}

bool Loader::TreeOf(const Value& o, const std::string& path, size_t nFeatures, size_t nActions, Policy::Tree& t) {
    if (!o.IsObject()) return Fail("policy file: `" + path + "` must be an object");
    size_t n = o["feature"].IsArray() ? o["feature"].Size() : 0;
    for (const char* k : {"feature", "threshold", "left", "right", "value"}) {
        const Value& v = o[k];
        if (!v.IsArray() || v.Size() != n || n == 0)
            return Fail("policy file: `" + path + "." + k + "` must be a list of one item a node (" +
                        (n > 0 ? std::to_string(n) : std::string("at least 1")) + ")");
    }
    auto ints = [&](const char* k, std::vector<int>& out) {
        const Array& items = o[k].Items();
        out.resize(n);
        for (size_t i = 0; i < n; i++)
            if (!Int(items[i], path + "." + k + "[" + std::to_string(i) + "]", out[i])) return false;
        return true;
    };
    if (!ints("feature", t.Feature)) return false;
    t.Threshold.resize(n);
    for (size_t i = 0; i < n; i++)
        if (!Num(o["threshold"].Items()[i], path + ".threshold[" + std::to_string(i) + "]", t.Threshold[i])) return false;
    if (!ints("left", t.Left) || !ints("right", t.Right)) return false;
    t.Leaf.resize(n);
    for (size_t i = 0; i < n; i++) {
        const Value& row = o["value"].Items()[i];
        std::string at = path + ".value[" + std::to_string(i) + "]";
        for (const auto& p : row.Items()) {
            double x;
            if (!Num(p, at, x)) return false;
            t.Leaf[i].push_back(x);
        }
    }
    std::vector<int> depth(n, 0);  // children come after their parent: one pass sees parents first
    for (size_t i = 0; i < n; i++) {
        int f = t.Feature[i];
        if (f >= static_cast<long>(nFeatures))
            return Fail("policy file: `" + path + ".feature[" + std::to_string(i) + "]` is not a feature of the type");
        long l = t.Left[i], r = t.Right[i], ii = static_cast<long>(i), nn = static_cast<long>(n);
        if (f < 0) {
            t.Feature[i] = -1;
            const auto& row = t.Leaf[i];
            std::string at = path + ".value[" + std::to_string(i) + "]";
            if (row.size() != nActions) return Fail("policy file: `" + at + "` must hold one probability an action");
            double sum = 0;
            bool ok = true;
            for (double p : row) {
                ok = ok && p >= 0 && p <= 1;
                sum += p;
            }
            if (!ok || sum <= 0) return Fail("policy file: `" + at + "` must hold probabilities from 0 to 1, not all 0");
            continue;
        }
        if (!(ii < l && l < nn && ii < r && r < nn))
            return Fail("policy file: `" + path + "` node " + std::to_string(i) + " must point to later nodes of the tree");
        int d = depth[i];
        if (d >= Policy::MaxDepth)
            return Fail("policy file: `" + path + "` node " + std::to_string(i) + " is deeper than " +
                        std::to_string(Policy::MaxDepth) + " levels");
        depth[l] = std::max(depth[l], d + 1);
        depth[r] = std::max(depth[r], d + 1);
    }
    return true;
}

bool Loader::TypeOf(const std::string& name, const Value& o, Policy::TypePolicy& tp) {
    std::string path = "types." + name;
    if (!o.IsObject()) return Fail("policy file: `" + path + "` must be an object");
    const Value& actions = o["actions"];
    bool strings = actions.IsArray() && actions.Size() > 0;
    for (const auto& a : actions.Items()) strings = strings && a.IsString();
    if (!strings) return Fail("policy file: `" + path + ".actions` must be a list of action names");
    if (actions.Size() > Policy::MaxActions)
        return Fail("policy file: `" + path + ".actions` names " + Th(actions.Size()) + " actions: at most " +
                    std::to_string(Policy::MaxActions) + " a type");
    std::set<std::string> names;
    for (const auto& a : actions.Items()) {
        tp.Actions.push_back(a.AsString());
        names.insert(a.AsString());
    }
    if (names.size() != tp.Actions.size())
        return Fail("policy file: `" + path + ".actions` must not name an action twice");
    const Value& features = o["features"];
    const Value& trees = o["trees"];
    if (!features.IsArray()) return Fail("policy file: `" + path + ".features` must be a list");
    if (features.Size() > Policy::MaxFeatures)
        return Fail("policy file: `" + path + ".features` holds " + Th(features.Size()) + " features: at most " +
                    Th(Policy::MaxFeatures) + " a type");
    if (!trees.IsArray() || trees.Size() == 0)
        return Fail("policy file: `" + path + ".trees` must be a list of at least one tree");
    tp.Features.resize(features.Size());
    for (size_t i = 0; i < features.Size(); i++)
        if (!FeatureOf(features.Items()[i], path + ".features[" + std::to_string(i) + "]", tp.Features[i])) return false;
    for (size_t i = 0; i < tp.Actions.size(); i++) tp.Index[tp.Actions[i]] = static_cast<int>(i);
    tp.Trees.resize(trees.Size());
    for (size_t i = 0; i < trees.Size(); i++)
        if (!TreeOf(trees.Items()[i], path + ".trees[" + std::to_string(i) + "]", tp.Features.size(),
                    tp.Actions.size(), tp.Trees[i]))
            return false;
    return true;
}

bool ValidUtf8(const std::string& s) {
    for (size_t i = 0; i < s.size();) {
        unsigned char c = static_cast<unsigned char>(s[i]);
        size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (n == 0 || i + n > s.size()) return false;
        for (size_t k = 1; k < n; k++)
            if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
        i += n;
    }
    return true;
}

}  // namespace

long Policy::TooDeep(const std::string& text) {
    int depth = 0;
    bool inString = false;
    long chars = -1;  // characters (UTF-16 units, as the other SDKs count) up to here
    for (size_t i = 0; i < text.size(); i++) {
        unsigned char b = static_cast<unsigned char>(text[i]);
        if ((b & 0xC0) != 0x80) chars += b >= 0xF0 ? 2 : 1;
        char c = text[i];
        if (inString) {
            if (c == '\\') {
                i++;
                chars++;
            } else if (c == '"') {
                inString = false;
            }
        } else if (c == '"') {
            inString = true;
        } else if (c == '[' || c == '{') {
            if (++depth > MaxNesting) return chars;
        } else if (c == ']' || c == '}') {
            depth--;
        }
    }
    return -1;
}

std::shared_ptr<Policy> Policy::Load(const std::string& text, std::string& error, const std::string& manifestVersion,
                                     size_t maxBytes) {
    const std::string where = "policy JSON";
    if (text.size() > maxBytes) {
        error = where + ": larger than " + Th(maxBytes) + " bytes";
        return nullptr;
    }
    if (!ValidUtf8(text)) {
        error = where + ": not UTF-8";
        return nullptr;
    }
    long at = TooDeep(text);
    if (at >= 0) {
        error = where + ": nested deeper than " + std::to_string(MaxNesting) + " levels (at character " +
                std::to_string(at) + ")";
        return nullptr;
    }
    Parsed p = Json::Parse(text);
    if (!p.Ok()) {
        error = where + ": not JSON (" + p.error + ")";
        return nullptr;
    }
    return Load(p.value, error, manifestVersion);
}

std::shared_ptr<Policy> Policy::Load(const Value& o, std::string& error, const std::string& manifestVersion) {
    if (!o.IsObject()) {
        error = "a policy must be a JSON object";
        return nullptr;
    }
    const Value& format = o["format"];
    const Value& version = o["format_version"];
    bool versionOk = version.IsNumber() && version.AsNumber() == FormatVersion;
    if (!(format.IsString() && format.AsString() == Format) || !versionOk) {
        auto found = [&](const char* k) { return o.Has(k) ? Json::Show(o[k]) : std::string("undefined"); };
        error = std::string("not a policy file this SDK reads: `format` must be '") + Format +
                "' and `format_version` 1 (found " + found("format") + ", " + found("format_version") + ")";
        return nullptr;
    }
    Loader l;
    auto policy = std::make_shared<Policy>();
    if (!o["manifest_version"].IsString() || o["manifest_version"].AsString().empty()) {
        error = "policy file: `manifest_version` must be a non-empty string";
        return nullptr;
    }
    policy->ManifestVersion = o["manifest_version"].AsString();
    policy->ClientId = o["client_id"].AsString();
    policy->CreatedAt = o["created_at"].AsString();
    const Value& all = o["types"];
    if (!all.IsObject()) {
        error = "policy file: `types` must be an object of entity types";
        return nullptr;
    }
    if (all.Size() > MaxTypes) {
        error = "policy file: `types` holds " + Th(all.Size()) + " types: at most " + Th(MaxTypes);
        return nullptr;
    }
    long nodes = 0;
    for (const auto& kv : all.Members()) {  // the size first, before any tree is built: a huge file fails fast
        const Value& trees = kv.value["trees"];
        if (trees.Size() > MaxTrees && trees.IsArray()) {
            error = "policy file: `types." + kv.key + ".trees` holds " + Th(trees.Size()) + " trees: at most " +
                    std::to_string(MaxTrees) + " a type";
            return nullptr;
        }
        for (const auto& t : trees.Items()) nodes += t["feature"].IsArray() ? static_cast<long>(t["feature"].Size()) : 0;
        if (nodes > MaxNodes) {
            error = "policy file: `types." + kv.key + "` brings the trees past " + Th(MaxNodes) + " nodes in all";
            return nullptr;
        }
    }
    for (const auto& kv : all.Members()) {
        TypePolicy tp;
        if (!l.TypeOf(kv.key, kv.value, tp)) {
            error = l.error;
            return nullptr;
        }
        policy->types_[kv.key] = std::move(tp);
    }
    if (!manifestVersion.empty()) {
        error = policy->Check(manifestVersion);
        if (!error.empty()) return nullptr;
    }
    return policy;
}

std::string Policy::Check(const std::string& manifestVersion) const {
    if (manifestVersion == ManifestVersion) return "";
    return "this policy was distilled for manifest version " + ManifestVersion + ", and the game runs " +
           manifestVersion + ": a policy for another manifest version is never used (distill again)";
}

std::vector<std::string> Policy::Covers() const {
    std::vector<std::string> out;
    for (const auto& kv : types_) out.push_back(kv.first);
    return out;
}

double Policy::RoundHalfEven(double x) {
    double floor = std::floor(x);
    double diff = x - floor;
    if (diff < 0.5) return floor;
    if (diff > 0.5) return floor + 1;
    return std::fmod(floor, 2) == 0 ? floor : floor + 1;
}

namespace {

struct Situation {
    const Value* Observation;
    const Value* World;
    const Value* ScopeState;
    const Value* Trigger;
    const Value* Profile;
    std::set<std::string> Legal;
};

double Encode(const Policy::Feature& f, const Situation& s) {
    if (f.Source == "legal") return f.HasValue && s.Legal.count(f.Value) ? 1 : 0;
    const Value* from = f.Source == "observation" ? s.Observation
                        : f.Source == "world"     ? s.World
                        : f.Source == "scope_state" ? s.ScopeState
                        : f.Source == "trigger"   ? s.Trigger
                                                  : s.Profile;
    const Value* raw = f.HasField ? (from->IsObject() ? from->Get(f.Field) : nullptr) : from;
    if (!raw || raw->IsNull()) return f.Missing;
    if (f.Encoding == "enum") return raw->IsString() && raw->AsString() == f.Value ? 1 : 0;
    if (f.Encoding == "boolean") return raw->IsBool() ? (raw->AsBool() ? 1 : 0) : f.Missing;
    if (!raw->IsNumber()) return f.Missing;
    double x = raw->AsNumber();
    if (!std::isfinite(x)) return f.Missing;
    if (!f.Quantum) return x;
    double steps = x / *f.Quantum;  // a huge value over a tiny quantum overflows: not a number to compare
    if (!std::isfinite(steps)) return f.Missing;
    double q = Policy::RoundHalfEven(steps) * *f.Quantum;
    return std::isfinite(q) ? q : f.Missing;
}

}  // namespace

std::optional<PolicyChoice> Policy::Choose(const Value& type, const Value& observation, const Value& legalActions,
                                           const Value& world, const Value& scopeState, const Value& trigger,
                                           const Value& profile) const {
    if (!type.IsString()) return std::nullopt;
    auto found = types_.find(type.AsString());
    if (found == types_.end()) return std::nullopt;
    const TypePolicy& tp = found->second;
    Situation s{&observation, &world, &scopeState, &trigger, &profile, {}};
    for (const auto& a : legalActions.Items())
        if (a.IsString()) s.Legal.insert(a.AsString());
    std::vector<int> places;
    for (const auto& a : s.Legal) {
        auto i = tp.Index.find(a);
        if (i != tp.Index.end()) places.push_back(i->second);
    }
    std::sort(places.begin(), places.end());
    std::unordered_map<int, double> x;
    std::vector<double> sums(places.size(), 0.0);
    for (const auto& t : tp.Trees) {
        int node = 0, f;
        while ((f = t.Feature[node]) >= 0) {
            auto got = x.find(f);
            double v = got != x.end() ? got->second : (x[f] = Encode(tp.Features[f], s));
            node = v <= t.Threshold[node] ? t.Left[node] : t.Right[node];
        }
        const auto& row = t.Leaf[node];
        for (size_t j = 0; j < places.size(); j++) sums[j] = sums[j] + row[places[j]];
    }
    int best = -1;
    double bestP = 0, legal = 0;
    for (size_t j = 0; j < places.size(); j++) {
        double p = sums[j] / static_cast<double>(tp.Trees.size());
        legal += p;
        if (p > bestP) {
            best = places[j];
            bestP = p;
        }
    }
    if (best < 0 || legal <= 0) return std::nullopt;
    return PolicyChoice{tp.Actions[best], bestP / legal};
}

}  // namespace npcmind
