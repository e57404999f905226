// Each type's refresh and decision life, from the service's manifest (GET /v1/manifest), and the service's
// provider deadline (GET /v1/health): a client that kept its own would re-ask too often or give up too soon.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "NpcMindCore/Types.h"

namespace npcmind {

/// Refresh and ttl per type (ms); the defaults hold until the manifest is known.
class Timings {
public:
    static constexpr double DefaultRefreshMs = 4000;
    static constexpr double DefaultTtlMs = 12000;
    /// GET /v1/manifest is out.
    bool Asked = false;

    /// `refreshMs`: the game's own, over every type's; `manifest`: when it is known already (null otherwise).
    Timings(std::optional<double> refreshMs, const Value& manifest);
    /// Whether a manifest was read.
    bool Known() const { return known_; }
    /// The type's refresh and ttl, in ms.
    void Of(const std::string& type, double& refresh, double& ttl) const;
    /// Take the answer to GET /v1/manifest; false when it holds none. Entities asked before it came are due again
    /// on their type's refresh.
    bool Read(int status, const Value& body, const std::vector<Entity*>& entities);
    /// The service's provider deadline in ms, from a GET /v1/health answer, or nullopt (an older service).
    static std::optional<double> DeadlineTimeoutMs(int status, const Value& body);

private:
    void Load(const Value& data);
    std::map<std::string, std::pair<double, double>> types_;
    bool known_ = false;
    std::optional<double> refreshMs_;
};

}  // namespace npcmind
