// Timings from the manifest.
#include "NpcMindCore/Timings.h"

#include <algorithm>

namespace npcmind {

namespace {
/// The first of the two that is a number other than 0, else the default (the other SDKs' `||`).
double First(const Value& a, const Value& b, double otherwise) {
    if (a.IsNumber() && a.AsNumber() != 0) return a.AsNumber();
    if (b.IsNumber() && b.AsNumber() != 0) return b.AsNumber();
    return otherwise;
}
}  // namespace

Timings::Timings(std::optional<double> refreshMs, const Value& manifest) : refreshMs_(refreshMs) {
    if (manifest.IsObject()) Load(manifest);
}

void Timings::Of(const std::string& type, double& refresh, double& ttl) const {
    auto t = types_.find(type);
    std::pair<double, double> got = t != types_.end() ? t->second : std::make_pair(DefaultRefreshMs, DefaultTtlMs);
    refresh = refreshMs_ ? *refreshMs_ : got.first;
    ttl = got.second;
}

bool Timings::Read(int status, const Value& body, const std::vector<Entity*>& entities) {
    Asked = false;
    const Value& data = body["manifest"];
    if (status != 200 || !data.IsObject()) return false;
    Load(data);
    for (Entity* e : entities) {
        double refresh, ttl;
        Of(e->Type, refresh, ttl);
        e->Due = std::min(e->Due, e->AskedAt + refresh);
    }
    return true;
}

void Timings::Load(const Value& data) {
    const Value& defaults = data["defaults"];
    types_.clear();
    known_ = true;
    for (const auto& kv : data["types"].Members()) {
        double refresh = First(kv.value["refresh_ms"], defaults["refresh_ms"], DefaultRefreshMs);
        double ttl = First(kv.value["ttl_ms"], defaults["ttl_ms"], DefaultTtlMs);
        types_[kv.key] = {refresh, ttl};
    }
}

std::optional<double> Timings::DeadlineTimeoutMs(int status, const Value& body) {
    const Value& deadline = body["deadline_ms"];
    if (status == 200 && deadline.IsNumber() && deadline.AsNumber() > 0) return deadline.AsNumber();
    return std::nullopt;
}

}  // namespace npcmind
